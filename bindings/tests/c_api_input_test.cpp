// The C API's handling of bad input and its small utilities: NULL pointers,
// invalid addresses and options, per-thread error details, status strings,
// option defaults, and a client used from two threads at once.
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "c_api_fixture.hpp"

namespace shmlink_test {
namespace {

// Uses one live shm server; the transport does not matter for these checks.
class CApiInput : public CApiTest {};

TEST_P(CApiInput, ConnectRejectsNullArguments) {
  shmlink_client* c = reinterpret_cast<shmlink_client*>(0x1);
  EXPECT_EQ(shmlink_client_connect(nullptr, nullptr, &c), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(c, nullptr) << "*out must be NULL after a failure";
  EXPECT_NE(last_error().find("address"), std::string::npos) << last_error();
  EXPECT_EQ(shmlink_client_connect(address_.c_str(), nullptr, nullptr), SHMLINK_E_INVALID_ARGUMENT);
  // NULL options mean the defaults.
  ASSERT_EQ(shmlink_client_connect(address_.c_str(), nullptr, &c), SHMLINK_OK) << last_error();
  shmlink_client_free(c);
}

TEST_P(CApiInput, ClientFunctionsRejectNullArguments) {
  ClientPtr c = connect();
  Buffer out;
  uint64_t id = 0;
  EXPECT_EQ(shmlink_client_call(nullptr, bytes("x"), 1, out.get()), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_call(c.get(), nullptr, 5, out.get()), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("NULL"), std::string::npos) << last_error();
  EXPECT_EQ(shmlink_client_call(c.get(), bytes("x"), 1, nullptr), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_call_timeout(nullptr, bytes("x"), 1, 10, out.get()),
            SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_call_timeout(c.get(), nullptr, 1, 10, out.get()),
            SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_call_timeout(c.get(), bytes("x"), 1, 10, nullptr),
            SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_send(nullptr, bytes("x"), 1, &id), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_send(c.get(), nullptr, 3, &id), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_recv(nullptr, 0, &id, out.get()), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_recv(c.get(), 0, &id, nullptr), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_notify(nullptr, bytes("x"), 1), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_notify(c.get(), nullptr, 3), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_close(nullptr), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_is_connected(nullptr), 0);
  EXPECT_EQ(shmlink_client_in_flight(nullptr), 0u);
  // Nothing was sent by the rejected calls; the client is intact.
  EXPECT_EQ(shmlink_client_in_flight(c.get()), 0u);
  ASSERT_EQ(call(c.get(), "intact", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "intact");
}

TEST_P(CApiInput, FreeFunctionsAcceptNull) {
  shmlink_client_free(nullptr);
  shmlink_server_free(nullptr);
  shmlink_buffer_free(nullptr);
  shmlink_buffer empty = SHMLINK_BUFFER_INIT;
  shmlink_buffer_free(&empty);
  shmlink_buffer_free(&empty);
  EXPECT_EQ(empty.data, nullptr);
  shmlink_server_stop(nullptr);
  SUCCEED();
}

TEST_P(CApiInput, InvalidAddressesAreRejected) {
  for (const char* bad : {"foo", "shm:", "unix:", "tcp:nohost", "tcp:127.0.0.1:notaport", "",
                          "udp:127.0.0.1:5", "tcp::80"}) {
    shmlink_client* c = reinterpret_cast<shmlink_client*>(0x1);
    EXPECT_EQ(shmlink_client_connect(bad, nullptr, &c), SHMLINK_E_INVALID_ADDRESS) << bad;
    EXPECT_EQ(c, nullptr) << bad;
    EXPECT_NE(last_error().find("invalid address"), std::string::npos) << last_error();
    const char* list[] = {bad};
    shmlink_server* s = reinterpret_cast<shmlink_server*>(0x1);
    EXPECT_EQ(shmlink_server_bind(list, 1, nullptr, &s), SHMLINK_E_INVALID_ADDRESS) << bad;
    EXPECT_EQ(s, nullptr) << bad;
  }
  shmlink_client* c = nullptr;
  EXPECT_EQ(shmlink_client_connect("shm:/tmp/\xff\xfe.sock", nullptr, &c),
            SHMLINK_E_INVALID_ARGUMENT)
      << "an address that is not UTF-8";
  EXPECT_NE(last_error().find("UTF-8"), std::string::npos) << last_error();
}

TEST_P(CApiInput, ClientOptionsOutOfRangeAreRejected) {
  struct Case {
    const char* what;
    void (*set)(shmlink_client_options&);
  };
  const Case cases[] = {
      {"ring_size", [](shmlink_client_options& o) { o.ring_size = 100000; }},
      {"ring_size", [](shmlink_client_options& o) { o.ring_size = 1024; }},
      {"ring_size", [](shmlink_client_options& o) { o.ring_size = uint64_t{1} << 40; }},
      {"wait", [](shmlink_client_options& o) { o.wait = 99; }},
      {"max_message_size", [](shmlink_client_options& o) { o.max_message_size = UINT64_MAX; }},
  };
  for (const Case& k : cases) {
    shmlink_client_options o;
    shmlink_client_options_init(&o);
    k.set(o);
    shmlink_client* c = reinterpret_cast<shmlink_client*>(0x1);
    EXPECT_EQ(shmlink_client_connect(address_.c_str(), &o, &c), SHMLINK_E_INVALID_ARGUMENT)
        << k.what;
    EXPECT_EQ(c, nullptr);
    EXPECT_NE(last_error().find(k.what), std::string::npos) << last_error();
  }
  EXPECT_EQ(stats().sessions_opened, 0u) << "a session was opened despite bad options";
}

// Options structs are extensible (`struct_size` first): a caller compiled
// against an older header passes a shorter struct, which the library reads
// no further than its struct_size (the allocation here is exactly that
// long, so the sanitizer build catches any read past it) and whose later
// fields keep their defaults; a newer header's longer struct is taken when
// the fields this library does not know are zero, refused otherwise.
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// An options struct as an older header had it: its first `size` bytes only,
// allocated to exactly that, zeroed, with its struct_size.
template <class T>
std::unique_ptr<T, FreeDeleter> older_struct(size_t size) {
  std::unique_ptr<T, FreeDeleter> p(static_cast<T*>(std::malloc(size)));
  if (p) {
    std::memset(p.get(), 0, size);
    p->struct_size = size;
  }
  return p;
}

TEST_P(CApiInput, OptionsStructsOfOtherSizes) {
  // An old client struct: up to and including `max_message_size`.
  auto old_client = older_struct<shmlink_client_options>(
      offsetof(shmlink_client_options, max_message_size) + sizeof(uint64_t));
  ASSERT_TRUE(old_client);
  old_client->ring_size = 4096;
  ClientPtr c = connect(old_client.get());
  ASSERT_TRUE(c) << last_error();
  Buffer out;
  std::string big = pattern(20000, 7);  // several 4 KiB rings: the old field was read
  ASSERT_EQ(call(c.get(), big, out), SHMLINK_OK) << last_error();
  EXPECT_TRUE(out.str() == big);

  // A newer client struct: 16 more bytes, zero, then set.
  struct newer {
    shmlink_client_options known;
    uint64_t later[2];
  } n{};
  shmlink_client_options_init(&n.known);
  n.known.struct_size = sizeof n;
  EXPECT_TRUE(connect(&n.known)) << last_error();
  n.later[1] = 1;
  shmlink_client* bad = reinterpret_cast<shmlink_client*>(0x1);
  EXPECT_EQ(shmlink_client_connect(address_.c_str(), &n.known, &bad), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
  EXPECT_NE(last_error().find("struct_size"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("upgrade the library"), std::string::npos) << last_error();

  // Shorter than the struct_size field itself.
  shmlink_client_options tiny{};
  tiny.struct_size = 3;
  EXPECT_EQ(shmlink_client_connect(address_.c_str(), &tiny, &bad), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("struct_size"), std::string::npos) << last_error();

  // An old server struct: up to and including `spin_us`; the rest default.
  auto so = older_struct<shmlink_server_options>(offsetof(shmlink_server_options, spin_us) +
                                                 sizeof(uint32_t));
  ASSERT_TRUE(so);
  so->max_sessions = 7;
  TempDir dir;
  std::string addr = bind_address(Transport::Shm, dir, "old");
  const char* addrs[] = {addr.c_str()};
  shmlink_server* srv = nullptr;
  ASSERT_EQ(shmlink_server_bind(addrs, 1, so.get(), &srv), SHMLINK_OK) << last_error();
  shmlink_server_free(srv);
}

TEST_P(CApiInput, EveryWaitStrategyWorks) {
  for (uint32_t wait :
       {SHMLINK_WAIT_DEFAULT, SHMLINK_WAIT_SLEEP, SHMLINK_WAIT_SPIN, SHMLINK_WAIT_BUSY}) {
    shmlink_client_options o{};
    o.wait = wait;
    o.spin_us = 10;
    o.ring_size = 4096;
    ClientPtr c = connect(&o);
    ASSERT_TRUE(c) << "wait " << wait;
    Buffer out;
    std::string big = pattern(20000, wait);  // several times the 4 KiB ring
    ASSERT_EQ(call(c.get(), big, out), SHMLINK_OK) << "wait " << wait << ": " << last_error();
    EXPECT_TRUE(out.str() == big);
  }
}

TEST_P(CApiInput, ServerBindRejectsBadArguments) {
  std::string good = bind_address(Transport::Unix, dir_, "other");
  const char* list[] = {good.c_str()};
  shmlink_server* s = reinterpret_cast<shmlink_server*>(0x1);
  EXPECT_EQ(shmlink_server_bind(nullptr, 1, nullptr, &s), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(shmlink_server_bind(list, 1, nullptr, nullptr), SHMLINK_E_INVALID_ARGUMENT);
  const char* with_null[] = {good.c_str(), nullptr};
  EXPECT_EQ(shmlink_server_bind(with_null, 2, nullptr, &s), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("addresses[1]"), std::string::npos) << last_error();
  s = reinterpret_cast<shmlink_server*>(0x1);
  EXPECT_NE(shmlink_server_bind(list, 0, nullptr, &s), SHMLINK_OK) << "no address at all";
  EXPECT_EQ(s, nullptr);

  struct Case {
    const char* what;
    void (*set)(shmlink_server_options&);
  };
  const Case cases[] = {
      {"wait", [](shmlink_server_options& o) { o.wait = 99; }},
      {"socket_group_set", [](shmlink_server_options& o) { o.socket_group_set = 2; }},
      {"allowed_uids",
       [](shmlink_server_options& o) {
         o.allowed_uids = nullptr;
         o.allowed_uids_len = 2;
       }},
      {"allowed_gids",
       [](shmlink_server_options& o) {
         o.allowed_gids = nullptr;
         o.allowed_gids_len = 1;
       }},
      {"max_message_size", [](shmlink_server_options& o) { o.max_message_size = UINT64_MAX; }},
  };
  for (const Case& k : cases) {
    shmlink_server_options o;
    shmlink_server_options_init(&o);
    k.set(o);
    s = reinterpret_cast<shmlink_server*>(0x1);
    EXPECT_EQ(shmlink_server_bind(list, 1, &o, &s), SHMLINK_E_INVALID_ARGUMENT) << k.what;
    EXPECT_EQ(s, nullptr);
    EXPECT_NE(last_error().find(k.what), std::string::npos) << last_error();
  }
}

TEST_P(CApiInput, ServerFunctionsRejectNullArguments) {
  EXPECT_EQ(shmlink_server_address_count(nullptr), 0u);
  EXPECT_EQ(shmlink_server_address(nullptr, 0), nullptr);
  EXPECT_EQ(shmlink_server_address(server_.get(), 1), nullptr) << "index out of range";
  EXPECT_EQ(shmlink_server_address(server_.get(), SIZE_MAX), nullptr);
  EXPECT_EQ(shmlink_server_serve(nullptr, scripted_handler, &state_), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_server_start(nullptr, scripted_handler, &state_), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_server_wait(nullptr), SHMLINK_E_INVALID_ARGUMENT);
  shmlink_server_stats st{};
  EXPECT_EQ(shmlink_server_stats_get(nullptr, &st), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_server_stats_get(server_.get(), nullptr), SHMLINK_E_INVALID_ARGUMENT);

  // A NULL handler is refused without using up the bound server.
  std::string addr = bind_address(Transport::Unix, dir_, "nullhandler");
  const char* list[] = {addr.c_str()};
  shmlink_server* raw = nullptr;
  ASSERT_EQ(shmlink_server_bind(list, 1, nullptr, &raw), SHMLINK_OK) << last_error();
  ServerPtr s(raw);
  EXPECT_EQ(shmlink_server_wait(raw), SHMLINK_E_STATE) << "wait on a server never started";
  EXPECT_EQ(shmlink_server_serve(raw, nullptr, nullptr), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_server_start(raw, nullptr, nullptr), SHMLINK_E_INVALID_ARGUMENT);
  ScriptState state;
  ASSERT_EQ(shmlink_server_start(raw, scripted_handler, &state), SHMLINK_OK) << last_error();
  shmlink_client* c = nullptr;
  ASSERT_EQ(shmlink_client_connect(addr.c_str(), nullptr, &c), SHMLINK_OK) << last_error();
  ClientPtr client(c);
  Buffer out;
  ASSERT_EQ(call(c, "served", out), SHMLINK_OK);
  EXPECT_EQ(out.str(), "served");
  client.reset();
  s.reset();  // stops and joins before `state` goes away
}

TEST_P(CApiInput, ClientUsedFromTwoThreadsAtOnceIsRefused) {
  ClientPtr c = connect();
  auto busy = std::async(std::launch::async, [&] {
    Buffer out;
    shmlink_status st = call(c.get(), "gate", out);
    return std::make_pair(st, out.str());
  });
  ASSERT_TRUE(wait_until([&] { return state_.gated.load() == 1; }));
  Buffer out;
  EXPECT_EQ(call(c.get(), "meanwhile", out), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("another thread"), std::string::npos) << last_error();
  EXPECT_EQ(shmlink_client_is_connected(c.get()), 1) << "a busy client is not a dead one";
  state_.release();
  auto [st, body] = busy.get();
  EXPECT_EQ(st, SHMLINK_OK);
  EXPECT_EQ(body, "gate done");
  ASSERT_EQ(call(c.get(), "after", out), SHMLINK_OK);
  EXPECT_EQ(out.str(), "after");
}

INSTANTIATE_TEST_SUITE_P(Shm, CApiInput, ::testing::Values(Transport::Shm), transport_name);

TEST(CApiStatus, ErrorStringForEveryCode) {
  std::set<std::string> seen;
  for (int32_t code = SHMLINK_OK; code <= SHMLINK_E_WOULD_BLOCK; ++code) {
    const char* s = shmlink_error_string(code);
    ASSERT_NE(s, nullptr) << code;
    EXPECT_GT(std::strlen(s), 0u) << code;
    EXPECT_STRNE(s, "unknown status code") << code;
    EXPECT_TRUE(seen.insert(s).second) << "two codes share \"" << s << "\"";
  }
  for (int32_t code : {-1, 19, 1000, INT32_MIN, INT32_MAX}) {
    const char* s = shmlink_error_string(code);
    ASSERT_NE(s, nullptr) << code;
    EXPECT_STREQ(s, "unknown status code") << code;
  }
}

TEST(CApiStatus, LastErrorIsPerThread) {
  auto fresh = std::async(std::launch::async, [] {
    return std::make_pair(std::string(shmlink_last_error()), shmlink_last_remote_code());
  });
  auto [message, code] = fresh.get();
  EXPECT_EQ(message, "") << "a thread where nothing failed";
  EXPECT_EQ(code, 0u);

  shmlink_client* c = nullptr;
  ASSERT_EQ(shmlink_client_connect("foo", nullptr, &c), SHMLINK_E_INVALID_ADDRESS);
  std::string mine = last_error();
  EXPECT_NE(mine.find("foo"), std::string::npos) << mine;
  auto other = std::async(std::launch::async, [] {
    shmlink_client* c = nullptr;
    shmlink_client_connect("bar", nullptr, &c);
    return std::string(shmlink_last_error());
  });
  EXPECT_NE(other.get().find("bar"), std::string::npos);
  EXPECT_EQ(last_error(), mine) << "another thread's failure changed this thread's detail";
}

TEST(CApiStatus, OptionsInitSpellsOutTheDefaults) {
  shmlink_client_options c;
  std::memset(&c, 0xAB, sizeof c);
  shmlink_client_options_init(&c);
  EXPECT_EQ(c.struct_size, sizeof c);
  EXPECT_EQ(c.timeout_us, 5'000'000u);
  EXPECT_EQ(c.wait, static_cast<uint32_t>(SHMLINK_WAIT_DEFAULT));
  EXPECT_EQ(c.spin_us, 50u);
  EXPECT_EQ(c.ring_size, 64u * 1024);
  EXPECT_EQ(c.max_message_size, 64u << 20);

  shmlink_server_options s;
  std::memset(&s, 0xAB, sizeof s);
  shmlink_server_options_init(&s);
  EXPECT_EQ(s.struct_size, sizeof s);
  EXPECT_EQ(s.allowed_uids, nullptr);
  EXPECT_EQ(s.allowed_uids_len, 0u);
  EXPECT_EQ(s.allowed_gids, nullptr);
  EXPECT_EQ(s.allowed_gids_len, 0u);
  EXPECT_EQ(s.socket_mode, 0600u);
  EXPECT_EQ(s.socket_group_set, 0u);
  EXPECT_EQ(s.max_sessions, 4096u);
  EXPECT_EQ(s.wait, static_cast<uint32_t>(SHMLINK_WAIT_DEFAULT));
  EXPECT_EQ(s.spin_us, 50u);
  EXPECT_EQ(s.max_message_size, 64u << 20);
  EXPECT_EQ(s.handshake_timeout_us, 2'000'000u);
  EXPECT_EQ(s.send_timeout_us, 5'000'000u);

  shmlink_client_options_init(nullptr);
  shmlink_server_options_init(nullptr);
}

TEST(CApiStatus, VersionIsSemver) {
  const char* v = shmlink_version();
  ASSERT_NE(v, nullptr);
  unsigned major = 0, minor = 0, patch = 0;
  EXPECT_EQ(std::sscanf(v, "%u.%u.%u", &major, &minor, &patch), 3) << v;
}

}  // namespace
}  // namespace shmlink_test
