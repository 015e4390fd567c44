// Responses lent from the server's arena (capability bit 5), through the C
// API and shmlink.hpp: over shm and unix, large responses come as views read
// in place (shmlink_view_is_lent), byte for byte; small ones and tcp ones in
// buffers of their own; views outlive further calls and their client; freed
// views go back, so a server with a small arena lends every response of a
// long run; a C handler's large shmlink_response_reserve is written in place
// in the arena (reserve then write or reserve moves it back, correctly), on
// the descriptor handler's path too; NULL and bad arguments fail with the
// documented status and NULL outputs.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "c_api_fixture.hpp"
#include "cpp_fixture.hpp"

namespace shmlink_test {
namespace {

constexpr std::size_t kKiB = std::size_t{1} << 10;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kThreshold = 64 * kKiB;  // the server's default arena threshold

// What the lending handler saw of its own response: whether it lay in the
// arena after the first reservation, and when the handler returned.
struct Seen {
  std::atomic<int> after_reserve{-1};
  std::atomic<int> at_return{-1};
};

// The handler of these tests, on top of the scripted one (gate, fail:,
// size:N, echo). Requests "OP:N[:M]":
//   reserve:N            reserves N bytes, fills them with pattern(N, 1)
//   reserve+write:N:M    then writes pattern(M, 2)
//   reserve+reserve:N:M  then reserves M bytes more, filled with pattern(M, 2)
//   write+reserve:N:M    writes pattern(N, 1), then reserves M bytes of pattern(M, 2)
//   reserve+fail:N       reserves N bytes, then returns error 9 ("after reserving")
//   zeros:N              reserves N bytes and writes nothing
struct LendingState {
  ScriptState script;
  Seen seen;
};

// The numbers after "OP:" in `req` (at most two).
std::vector<std::size_t> numbers(std::string_view req) {
  std::vector<std::size_t> out;
  std::size_t at = req.find(':');
  while (at != std::string_view::npos) {
    std::size_t next = req.find(':', at + 1);
    out.push_back(std::stoul(std::string(req.substr(at + 1, next - at - 1))));
    at = next;
  }
  return out;
}

// Reserves `n` bytes of `response` and fills them with pattern(n, seed).
bool reserve_pattern(shmlink_response* response, std::size_t n, unsigned seed) {
  uint8_t* at = shmlink_response_reserve(response, n);
  if (at == nullptr) return false;
  std::string p = pattern(n, seed);
  if (n > 0) std::memcpy(at, p.data(), n);
  return true;
}

bool write_pattern(shmlink_response* response, std::size_t n, unsigned seed) {
  std::string p = pattern(n, seed);
  return shmlink_response_write(response, bytes(p), n) == SHMLINK_OK;
}

uint32_t lending_handler(void* user_data, const uint8_t* request, size_t request_len,
                         shmlink_response* response) {
  auto* state = static_cast<LendingState*>(user_data);
  std::string_view req(reinterpret_cast<const char*>(request), request_len);
  std::string_view op = req.substr(0, req.find(':'));
  if (op != "reserve" && op != "reserve+write" && op != "reserve+reserve" &&
      op != "write+reserve" && op != "reserve+fail" && op != "zeros") {
    return scripted_handler(&state->script, request, request_len, response);
  }
  std::vector<std::size_t> n = numbers(req);
  bool ok = op == "write+reserve" ? write_pattern(response, n.at(0), 1)
            : op == "zeros"       ? shmlink_response_reserve(response, n.at(0)) != nullptr
                                  : reserve_pattern(response, n.at(0), 1);
  state->seen.after_reserve = shmlink_response_is_lent(response);
  if (op == "reserve+write") ok = ok && write_pattern(response, n.at(1), 2);
  if (op == "reserve+reserve" || op == "write+reserve")
    ok = ok && reserve_pattern(response, n.at(1), 2);
  state->seen.at_return = shmlink_response_is_lent(response);
  if (op == "reserve+fail") {
    shmlink_response_set_error_message(response, "after reserving");
    return 9;
  }
  return ok ? 0 : 0xBAD;
}

// The same for requests with descriptors: "reserve:N" only (the descriptors
// are left to the library, which closes them).
uint32_t lending_fd_handler(void* user_data, const uint8_t* request, size_t request_len, int*,
                            size_t, shmlink_response* response) {
  return lending_handler(user_data, request, request_len, response);
}

// A view freed at scope exit.
struct ViewFree {
  void operator()(shmlink_view* v) const { shmlink_view_free(v); }
};
using ViewPtr = std::unique_ptr<shmlink_view, ViewFree>;

// A response through shmlink_client_call_response_timeout: the view and
// the bytes it gave.
struct Got {
  shmlink_status status = SHMLINK_E_INTERNAL;
  ViewPtr view;
  const uint8_t* data = nullptr;
  std::size_t len = 0;

  std::string_view text() const { return {reinterpret_cast<const char*>(data), len}; }
  bool lent() const { return shmlink_view_is_lent(view.get()) == 1; }
};

Got call_response(shmlink_client* c, std::string_view req, uint64_t timeout_us = 0) {
  Got g;
  shmlink_view* v = nullptr;
  g.status = shmlink_client_call_response_timeout(c, bytes(req), req.size(), timeout_us, &v,
                                                  &g.data, &g.len);
  g.view.reset(v);
  return g;
}

std::string sized(const char* op, std::size_t n) {
  return std::string(op) + ":" + std::to_string(n);
}
std::string sized(const char* op, std::size_t n, std::size_t m) {
  return sized(op, n) + ":" + std::to_string(m);
}

class CApiLentResponses : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override { serve(nullptr); }
  void TearDown() override {
    client_.reset();
    state_.script.release();
    server_.reset();
  }

  // (Re)starts the server with `options`, the lending handler for plain
  // requests and for requests with descriptors; connects client_.
  void serve(const shmlink_server_options* options) {
    client_.reset();
    state_.script.release();
    server_.reset();
    state_.script.reset();
    start_server(GetParam(), dir_, options, {lending_handler, &state_},
                 {lending_fd_handler, &state_}, server_, address_);
    shmlink_client* c = nullptr;
    ASSERT_EQ(shmlink_client_connect(address_.c_str(), nullptr, &c), SHMLINK_OK) << last_error();
    client_.reset(c);
  }

  // The scripted handler's "size:N" (pattern(N) reserved in place), checked.
  void expect_sized(std::size_t n, bool lent) {
    Got g = call_response(client_.get(), sized("size", n));
    ASSERT_EQ(g.status, SHMLINK_OK) << n << ": " << last_error();
    EXPECT_EQ(g.lent(), lent) << n;
    ASSERT_EQ(g.len, n);
    EXPECT_TRUE(g.text() == pattern(n)) << n << " bytes differ";
  }

  TempDir dir_;
  std::string address_;
  LendingState state_;  // outlives server_: declared first, destroyed last
  ServerPtr server_;
  ClientPtr client_;
};

TEST_P(CApiLentResponses, LargeResponsesAreLentAndReadInPlace) {
  for (std::size_t n : {kThreshold, kMiB, std::size_t{3'000'001}, 16 * kMiB}) expect_sized(n, true);
  // Below the threshold: a buffer of its own.
  for (std::size_t n : {std::size_t{1}, std::size_t{100}, kThreshold - 1}) expect_sized(n, false);
  // Written with shmlink_response_write (an echo): lent all the same (the
  // server copies it into its arena once).
  std::string big = pattern(2 * kMiB, 5);
  Got echo = call_response(client_.get(), big);
  ASSERT_EQ(echo.status, SHMLINK_OK) << last_error();
  EXPECT_TRUE(echo.lent());
  EXPECT_TRUE(echo.text() == big);
  // An empty response: a view, no bytes, data NULL.
  Got empty = call_response(client_.get(), "");
  ASSERT_EQ(empty.status, SHMLINK_OK) << last_error();
  EXPECT_NE(empty.view, nullptr);
  EXPECT_EQ(empty.data, nullptr);
  EXPECT_EQ(empty.len, 0u);
  EXPECT_FALSE(empty.lent());
  // Without a timeout, and a small response.
  shmlink_view* v = nullptr;
  const uint8_t* data = nullptr;
  std::size_t len = 0;
  ASSERT_EQ(shmlink_client_call_response(client_.get(), bytes("hello"), 5, &v, &data, &len),
            SHMLINK_OK)
      << last_error();
  ViewPtr owned(v);
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(data), len), "hello");
  EXPECT_EQ(shmlink_view_is_lent(v), 0);
  // shmlink_client_call copies a lent response out.
  Buffer out;
  std::string req = sized("size", kMiB);
  ASSERT_EQ(shmlink_client_call(client_.get(), bytes(req), req.size(), out.get()), SHMLINK_OK);
  EXPECT_TRUE(out.str() == pattern(kMiB));
}

TEST_P(CApiLentResponses, AViewOutlivesLaterCallsAndItsClient) {
  Got a = call_response(client_.get(), sized("size", kMiB));
  ASSERT_EQ(a.status, SHMLINK_OK) << last_error();
  ASSERT_TRUE(a.lent());
  // More calls on the same client, lent and not, while `a` is held.
  for (int i = 0; i < 5; ++i) expect_sized(3 * kMiB, true);
  expect_sized(10, false);
  Got b = call_response(client_.get(), sized("size", 2 * kMiB));
  ASSERT_EQ(b.status, SHMLINK_OK) << last_error();
  ASSERT_TRUE(b.lent());
  // The client closed, then freed: the views still read their bytes.
  ASSERT_EQ(shmlink_client_close(client_.get()), SHMLINK_OK);
  Got closed = call_response(client_.get(), "x");
  EXPECT_EQ(closed.status, SHMLINK_E_CLOSED);
  EXPECT_EQ(closed.view, nullptr);
  client_.reset();
  EXPECT_TRUE(a.text() == pattern(kMiB));
  EXPECT_TRUE(b.text() == pattern(2 * kMiB));
  EXPECT_EQ(shmlink_view_is_lent(a.view.get()), 1);
  a.view.reset();
  EXPECT_TRUE(b.text() == pattern(2 * kMiB));
  // The server goes on serving new clients.
  serve(nullptr);
  expect_sized(kMiB, true);
}

TEST_P(CApiLentResponses, FreedViewsGoBackSoASmallArenaLendsEveryResponse) {
  shmlink_server_options o{};
  o.max_arena_bytes = 8 * kMiB;
  serve(&o);
  const std::string want = pattern(3 * kMiB);
  for (int i = 0; i < 40; ++i) {
    Got g = call_response(client_.get(), sized("size", 3 * kMiB));
    ASSERT_EQ(g.status, SHMLINK_OK) << i << ": " << last_error();
    ASSERT_TRUE(g.lent()) << "call " << i << ": the freed views came back";
    if (i % 8 == 0) {
      EXPECT_TRUE(g.text() == want) << i;
    }
  }  // each view is freed before the next call
  // Views held fill the arena: the next response comes in a buffer of its
  // own, still correct; once they are freed, responses are lent again.
  std::vector<Got> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(call_response(client_.get(), sized("size", 3 * kMiB)));
    ASSERT_EQ(held.back().status, SHMLINK_OK) << last_error();
    ASSERT_TRUE(held.back().lent());
  }
  Got full = call_response(client_.get(), sized("size", 3 * kMiB));
  ASSERT_EQ(full.status, SHMLINK_OK) << last_error();
  EXPECT_FALSE(full.lent()) << "the arena is full: streamed";
  EXPECT_TRUE(full.text() == want);
  for (const Got& h : held) EXPECT_TRUE(h.text() == want) << "held views unchanged";
  held.clear();
  expect_sized(3 * kMiB, true);
}

TEST_P(CApiLentResponses, ALargeReservationIsWrittenInPlace) {
  Got g = call_response(client_.get(), sized("reserve", 3 * kMiB));
  ASSERT_EQ(g.status, SHMLINK_OK) << last_error();
  EXPECT_EQ(state_.seen.after_reserve.load(), 1) << "reserved in the arena";
  EXPECT_EQ(state_.seen.at_return.load(), 1);
  EXPECT_TRUE(g.lent());
  EXPECT_TRUE(g.text() == pattern(3 * kMiB, 1));
  // At the threshold: lent; below it: the ordinary buffer.
  g = call_response(client_.get(), sized("reserve", kThreshold));
  ASSERT_EQ(g.status, SHMLINK_OK) << last_error();
  EXPECT_EQ(state_.seen.after_reserve.load(), 1);
  EXPECT_TRUE(g.lent());
  EXPECT_TRUE(g.text() == pattern(kThreshold, 1));
  g = call_response(client_.get(), sized("reserve", kThreshold - 1));
  ASSERT_EQ(g.status, SHMLINK_OK) << last_error();
  EXPECT_EQ(state_.seen.after_reserve.load(), 0);
  EXPECT_FALSE(g.lent());
  EXPECT_TRUE(g.text() == pattern(kThreshold - 1, 1));
  // A reused buffer of the arena starts zeroed, as the ordinary one does.
  for (int i = 0; i < 3; ++i) {
    g = call_response(client_.get(), sized("size", 3 * kMiB));
    ASSERT_TRUE(g.lent());
    g.view.reset();
    g = call_response(client_.get(), sized("zeros", 3 * kMiB));
    ASSERT_EQ(g.status, SHMLINK_OK) << last_error();
    EXPECT_TRUE(g.lent());
    EXPECT_TRUE(g.text() == std::string(3 * kMiB, '\0')) << "not zeroed";
  }
}

TEST_P(CApiLentResponses, WritingAfterALentReservationMovesItBack) {
  struct Case {
    const char* op;
    std::size_t n, m;
    int after_reserve, at_return;
  };
  for (const Case& c :
       {Case{"reserve+write", 2 * kMiB, 10, 1, 0}, Case{"reserve+write", 2 * kMiB, kMiB, 1, 0},
        Case{"reserve+reserve", kMiB, 100, 1, 0}, Case{"reserve+reserve", kMiB, 2 * kMiB, 1, 0},
        Case{"write+reserve", 10, kMiB, 0, 0}, Case{"reserve+write", 100, 10, 0, 0}}) {
    std::string what = sized(c.op, c.n, c.m);
    Got g = call_response(client_.get(), what);
    ASSERT_EQ(g.status, SHMLINK_OK) << what << ": " << last_error();
    EXPECT_EQ(state_.seen.after_reserve.load(), c.after_reserve) << what;
    EXPECT_EQ(state_.seen.at_return.load(), c.at_return) << what;
    ASSERT_EQ(g.len, c.n + c.m) << what;
    EXPECT_TRUE(g.text() == pattern(c.n, 1) + pattern(c.m, 2)) << what << ": bytes differ";
    // Large enough: the server lends it all the same (one copy).
    EXPECT_EQ(g.lent(), c.n + c.m >= kThreshold) << what;
  }
}

TEST_P(CApiLentResponses, AnErrorAfterALentReservationIsSent) {
  for (int i = 0; i < 20; ++i) {
    Got g = call_response(client_.get(), sized("reserve+fail", 4 * kMiB));
    EXPECT_EQ(g.status, SHMLINK_E_REMOTE);
    EXPECT_EQ(shmlink_last_remote_code(), 9u);
    EXPECT_NE(last_error().find("after reserving"), std::string::npos) << last_error();
    EXPECT_EQ(g.view, nullptr);
    EXPECT_EQ(g.data, nullptr);
    EXPECT_EQ(g.len, 0u);
  }
  // The loans went back: large responses are still lent.
  expect_sized(4 * kMiB, true);
}

TEST_P(CApiLentResponses, TheDescriptorHandlerReservesInPlaceToo) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  std::string req = sized("reserve", 2 * kMiB);
  Buffer out;
  ASSERT_EQ(shmlink_client_call_fds(client_.get(), bytes(req), req.size(), p, 2, out.get()),
            SHMLINK_OK)
      << last_error();
  close(p[0]);
  close(p[1]);
  EXPECT_EQ(state_.seen.after_reserve.load(), 1);
  EXPECT_TRUE(out.str() == pattern(2 * kMiB, 1));
}

TEST_P(CApiLentResponses, NullAndBadArguments) {
  std::string req = sized("size", kMiB);
  const uint8_t* r = bytes(req);
  shmlink_view* v = reinterpret_cast<shmlink_view*>(&req);  // overwritten with NULL
  const uint8_t* data = r;
  std::size_t len = 7;
  EXPECT_EQ(shmlink_client_call_response(client_.get(), r, req.size(), nullptr, &data, &len),
            SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("out_view is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(shmlink_client_call_response(client_.get(), r, req.size(), &v, nullptr, &len),
            SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_call_response(client_.get(), r, req.size(), &v, &data, nullptr),
            SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_call_response(nullptr, r, req.size(), &v, &data, &len),
            SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("client is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(v, nullptr);
  EXPECT_EQ(data, nullptr);
  EXPECT_EQ(len, 0u);
  EXPECT_EQ(shmlink_client_call_response(client_.get(), nullptr, 5, &v, &data, &len),
            SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(v, nullptr);
  // A remote error, a timeout: NULL outputs, the session usable.
  Got failed = call_response(client_.get(), "fail:7:no");
  EXPECT_EQ(failed.status, SHMLINK_E_REMOTE);
  EXPECT_EQ(shmlink_last_remote_code(), 7u);
  EXPECT_EQ(failed.view, nullptr);
  Got late = call_response(client_.get(), "gate", 100'000);
  EXPECT_EQ(late.status, SHMLINK_E_TIMEOUT);
  EXPECT_EQ(late.view, nullptr);
  EXPECT_EQ(late.data, nullptr);
  state_.script.release();
  expect_sized(kMiB, true);
  // NULL views and responses.
  shmlink_view_free(nullptr);
  EXPECT_EQ(shmlink_view_is_lent(nullptr), 0);
  EXPECT_EQ(shmlink_response_is_lent(nullptr), 0);
  EXPECT_EQ(shmlink_client_is_connected(client_.get()), 1);
}

INSTANTIATE_TEST_SUITE_P(Transports, CApiLentResponses,
                         ::testing::Values(Transport::Shm, Transport::Unix), transport_name);

// Over tcp nothing is lent: responses and reservations use buffers.
TEST(CApiLentResponsesTcp, NothingIsLent) {
  LendingState state;
  const char* list[] = {"tcp:127.0.0.1:0"};
  shmlink_server* raw = nullptr;
  ASSERT_EQ(shmlink_server_bind(list, 1, nullptr, &raw), SHMLINK_OK) << last_error();
  ServerPtr server(raw);
  ASSERT_EQ(shmlink_server_start(raw, lending_handler, &state), SHMLINK_OK) << last_error();
  shmlink_client* c = nullptr;
  ASSERT_EQ(shmlink_client_connect(shmlink_server_address(raw, 0), nullptr, &c), SHMLINK_OK);
  ClientPtr client(c);
  Got g = call_response(c, sized("reserve", 2 * kMiB));
  ASSERT_EQ(g.status, SHMLINK_OK) << last_error();
  EXPECT_FALSE(g.lent());
  EXPECT_EQ(state.seen.after_reserve.load(), 0);
  EXPECT_TRUE(g.text() == pattern(2 * kMiB, 1));
}

// shmlink.hpp: Response (RAII), Client::call_response / try_call_response.
class CppLentResponses : public CppServerTest {
 protected:
  // "N" answers pattern(N); "throw" fails with code 5; anything else is echoed.
  void SetUp() override {
    start([](std::string_view req, std::string& resp) {
      if (req == "throw") throw shmlink::HandlerError(5, "thrown");
      if (!req.empty() && req.find_first_not_of("0123456789") == std::string_view::npos) {
        resp = pattern(std::stoul(std::string(req)));
      } else {
        resp = req;
      }
    });
  }
};

TEST_P(CppLentResponses, LargeResponsesAreReadInPlace) {
  for (std::size_t n : {kThreshold, 3 * kMiB, std::size_t{100}}) {
    shmlink::Response r = client_.call_response(std::to_string(n));
    ASSERT_TRUE(r);
    EXPECT_EQ(r.is_lent(), n >= kThreshold) << n;
    ASSERT_EQ(r.size(), n);
    EXPECT_TRUE(r.view() == pattern(n)) << n;
    EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(r.data()), r.size()), r.view());
    EXPECT_EQ(static_cast<std::size_t>(r.end() - r.begin()), n);
  }
  shmlink::Response r = client_.call_response("hello", std::chrono::seconds(10));
  EXPECT_EQ(r.str(), "hello");
  EXPECT_FALSE(r.is_lent());
  shmlink::Response empty = client_.call_response("");
  EXPECT_TRUE(empty);
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.view(), "");
}

TEST_P(CppLentResponses, MovesHandOverAndResponsesOutliveTheClient) {
  shmlink::Response a = client_.call_response(std::to_string(2 * kMiB));
  ASSERT_TRUE(a.is_lent());
  const uint8_t* where = a.data();
  shmlink::Response b(std::move(a));
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(a.size(), 0u);
  EXPECT_FALSE(a.is_lent());
  EXPECT_EQ(b.data(), where);
  a = std::move(b);
  EXPECT_EQ(a.data(), where);
  // Assigning over a held response frees it (the leak checker would see it).
  a = client_.call_response(std::to_string(kMiB));
  client_ = shmlink::Client();
  EXPECT_TRUE(a.is_lent());
  EXPECT_TRUE(a.view() == pattern(kMiB));
  shmlink_view* raw = a.release();
  EXPECT_FALSE(a);
  EXPECT_EQ(shmlink_view_is_lent(raw), 1);
  shmlink_view_free(raw);
}

TEST_P(CppLentResponses, ErrorsThrowOrReturnAStatus) {
  try {
    client_.call_response("throw");
    ADD_FAILURE() << "no exception";
  } catch (const shmlink::RemoteError& e) {
    EXPECT_EQ(e.remote_code(), 5u);
  }
  shmlink::Response r = client_.call_response("1000000");
  shmlink::Status s = client_.try_call_response("throw", r);
  EXPECT_EQ(s.code, SHMLINK_E_REMOTE);
  EXPECT_EQ(s.remote_code, 5u);
  EXPECT_FALSE(r) << "emptied on failure";
  EXPECT_EQ(client_.try_call_response("x", r, std::chrono::microseconds(-1)).code,
            SHMLINK_E_INVALID_ARGUMENT);
  ASSERT_TRUE(client_.try_call_response("70000", r));
  EXPECT_TRUE(r.is_lent());
  shmlink::Client none;
  EXPECT_EQ(none.try_call_response("x", r).code, SHMLINK_E_CLOSED);
  EXPECT_THROW(none.call_response("x"), shmlink::DisconnectedError);
  EXPECT_THROW(client_.call_response("x", std::chrono::microseconds(-1)), shmlink::Error);
}

INSTANTIATE_TEST_SUITE_P(Transports, CppLentResponses,
                         ::testing::Values(Transport::Shm, Transport::Unix), transport_name);

}  // namespace
}  // namespace shmlink_test
