// File descriptors with calls, through the C API and shmlink.hpp: over shm
// and unix the handler reads the pipe and memfd it was handed, descriptors it
// does not keep are closed in the server (counted in /proc/self/fd: the
// server runs in this process), kept ones stay open; too many, a closed one,
// NULL with a count, a server that refuses them, or tcp fail with nothing sent
// and the session usable.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "c_api_fixture.hpp"
#include "shmlink.hpp"

namespace shmlink_test {
namespace {

std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// The count once it holds still for 50 ms: a shm server prepares the next
// session's memory on a thread of its own after each connect.
std::size_t steady_fds() {
  std::size_t n = open_fds();
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(50ms);
    std::size_t now = open_fds();
    if (now == n) break;
    n = now;
  }
  return n;
}

bool is_open(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

// A descriptor closed at scope exit (-1: none).
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// A memfd holding `text` (its offset at the end, as written).
Fd memfd_with(const std::string& text) {
  Fd fd(memfd_create("shmlink-fds-test", MFD_CLOEXEC));
  EXPECT_GE(fd.get(), 0);
  EXPECT_EQ(write(fd.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  return fd;
}

// A pipe with `text` written into it: {read end, write end}.
std::pair<Fd, Fd> pipe_with(const std::string& text) {
  int p[2] = {-1, -1};
  EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
  EXPECT_EQ(write(p[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  return {Fd(p[0]), Fd(p[1])};
}

// What one descriptor a handler got holds: a file from its start, or what a
// pipe has buffered.
std::string contents(int fd) {
  std::string out;
  char buf[256];
  off_t at = 0;
  bool seekable = lseek(fd, 0, SEEK_CUR) != -1;
  for (;;) {
    ssize_t n = seekable ? pread(fd, buf, sizeof buf, at) : read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    at += n;
    if (!seekable && static_cast<std::size_t>(n) < sizeof buf) break;  // drained
  }
  return out;
}

// The C handler of requests with descriptors: answers the request, then
// "|" and the contents of each descriptor. "keep" keeps them all (stored in
// `kept`, closed by the test), "fail" answers with error 9 after keeping the
// first.
struct FdState {
  std::mutex m;
  std::vector<int> kept;
  ~FdState() {
    for (int fd : kept) close(fd);
  }
};

uint32_t reading_fd_handler(void* user_data, const uint8_t* request, size_t request_len, int* fds,
                            size_t nfds, shmlink_response* response) {
  auto* state = static_cast<FdState*>(user_data);
  std::string req(reinterpret_cast<const char*>(request), request_len);
  std::string out = req;
  for (size_t i = 0; i < nfds; ++i) out += "|" + contents(fds[i]);
  if (req == "keep" || (req == "fail" && nfds > 0)) {
    std::lock_guard<std::mutex> g(state->m);
    for (size_t i = 0; i < (req == "keep" ? nfds : 1); ++i) {
      state->kept.push_back(fds[i]);
      fds[i] = -1;
    }
  }
  if (req == "fail") {
    shmlink_response_set_error_message(response, "failed after keeping one");
    return 9;
  }
  return shmlink_response_write(response, bytes(out), out.size()) == SHMLINK_OK ? 0 : 1;
}

class CApiFds : public CApiTest {
 protected:
  void SetUp() override { serve(nullptr, reading_fd_handler); }

  void TearDown() override {
    client_.reset();
    CApiTest::TearDown();
  }

  // (Re)starts the server with `options` and `fd_handler` (NULL: none
  // registered); connects client_ to it.
  void serve(const shmlink_server_options* options, shmlink_fd_handler fd_handler) {
    client_.reset();
    CApiTest::serve(options, fd_handler, &fd_state_);
    client_ = connect();
  }

  shmlink_status call(std::string_view req, const std::vector<int>& fds) {
    return shmlink_client_call_fds(client_.get(), bytes(req), req.size(), fds.data(), fds.size(),
                                   out_.get());
  }

  // A plain call still works: the session survived.
  void expect_usable() {
    ASSERT_EQ(shmlink_client_call(client_.get(), bytes("after"), 5, out_.get()), SHMLINK_OK)
        << last_error();
    EXPECT_EQ(out_.str(), "after");
    EXPECT_EQ(shmlink_client_is_connected(client_.get()), 1);
  }

  FdState fd_state_;  // its kept descriptors are closed after TearDown
  ClientPtr client_;
  Buffer out_;
};

TEST_P(CApiFds, HandlerReadsAPipeAndAMemfd) {
  auto [r, w] = pipe_with("piped");
  Fd m = memfd_with("in the memfd");
  ASSERT_EQ(call("two", {r.get(), m.get()}), SHMLINK_OK) << last_error();
  EXPECT_EQ(out_.str(), "two|piped|in the memfd");
  // The caller's descriptors stay open and its own.
  EXPECT_TRUE(is_open(r.get()));
  EXPECT_TRUE(is_open(m.get()));
  // No descriptors: the plain handler; then descriptors again.
  ASSERT_EQ(call("none", {}), SHMLINK_OK) << last_error();
  EXPECT_EQ(out_.str(), "none");
  ASSERT_EQ(call("again", {m.get()}), SHMLINK_OK) << last_error();
  EXPECT_EQ(out_.str(), "again|in the memfd");
}

TEST_P(CApiFds, PipelinedSendWithFds) {
  Fd a = memfd_with("A"), b = memfd_with("B");
  int fa = a.get(), fb = b.get();
  uint64_t ia = 0, ib = 0, got = 0;
  ASSERT_EQ(shmlink_client_send_fds(client_.get(), bytes("a"), 1, &fa, 1, &ia), SHMLINK_OK)
      << last_error();
  ASSERT_EQ(shmlink_client_send_fds(client_.get(), bytes("b"), 1, &fb, 1, &ib), SHMLINK_OK)
      << last_error();
  std::map<uint64_t, std::string> replies;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(shmlink_client_recv(client_.get(), 0, &got, out_.get()), SHMLINK_OK) << last_error();
    replies[got] = out_.str();
  }
  EXPECT_EQ(replies, (std::map<uint64_t, std::string>{{ia, "a|A"}, {ib, "b|B"}}));
}

TEST_P(CApiFds, DescriptorsNotKeptAreClosedKeptOnesStayOpen) {
  Fd m = memfd_with("x");
  std::vector<int> many(SHMLINK_MAX_FDS, m.get());
  std::size_t before = steady_fds();
  ASSERT_EQ(call("read", many), SHMLINK_OK) << last_error();
  EXPECT_TRUE(wait_until([&] { return open_fds() == before; }))
      << "open: " << open_fds() << ", before: " << before;

  ASSERT_EQ(call("keep", {m.get(), m.get(), m.get()}), SHMLINK_OK) << last_error();
  EXPECT_EQ(open_fds(), before + 3);
  {
    std::lock_guard<std::mutex> g(fd_state_.m);
    ASSERT_EQ(fd_state_.kept.size(), 3u);
    for (int fd : fd_state_.kept) EXPECT_TRUE(is_open(fd)) << fd;
  }

  // A handler error: the one kept stays open, the other is closed.
  ASSERT_EQ(call("fail", {m.get(), m.get()}), SHMLINK_E_REMOTE);
  EXPECT_EQ(shmlink_last_remote_code(), 9u);
  EXPECT_TRUE(wait_until([&] { return open_fds() == before + 4; }))
      << "open: " << open_fds() << ", before: " << before;
}

TEST_P(CApiFds, WithoutAnFdHandlerThePlainHandlerAnswersAndFdsAreClosed) {
  serve(nullptr, nullptr);
  Fd m = memfd_with("x");
  std::size_t before = steady_fds();
  ASSERT_EQ(call("plain", {m.get(), m.get()}), SHMLINK_OK) << last_error();
  EXPECT_EQ(out_.str(), "plain");
  EXPECT_TRUE(wait_until([&] { return open_fds() == before; }))
      << "open: " << open_fds() << ", before: " << before;
}

TEST_P(CApiFds, TooManyFdsNothingSentSessionUsable) {
  Fd m = memfd_with("x");
  std::vector<int> many(SHMLINK_MAX_FDS + 1, m.get());
  std::size_t before = steady_fds();
  EXPECT_EQ(call("too many", many), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("nothing was sent"), std::string::npos) << last_error();
  uint64_t id = 0;
  EXPECT_EQ(shmlink_client_send_fds(client_.get(), bytes("x"), 1, many.data(), many.size(), &id),
            SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_in_flight(client_.get()), 0u);
  EXPECT_EQ(open_fds(), before);
  expect_usable();
}

TEST_P(CApiFds, ClosedOrNegativeFdIsNamed) {
  Fd m = memfd_with("x");
  // A number of our own, closed; high, so that no descriptor the server
  // opens meanwhile (lowest free number first) can take it.
  int closed = fcntl(m.get(), F_DUPFD_CLOEXEC, 900);
  ASSERT_GE(closed, 900);
  close(closed);
  EXPECT_EQ(call("closed", {m.get(), closed}), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "fds[1] = " + std::to_string(closed) +
                              " is not an open file descriptor; nothing was sent");
  EXPECT_EQ(call("negative", {-1}), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("fds[0] = -1"), std::string::npos) << last_error();
  EXPECT_EQ(shmlink_client_call_fds(client_.get(), bytes("x"), 1, nullptr, 2, out_.get()),
            SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("fds is NULL"), std::string::npos) << last_error();
  expect_usable();
}

TEST_P(CApiFds, ServerThatRefusesFdsSessionUsable) {
  shmlink_server_options o{};
  o.refuse_fds = 1;
  serve(&o, reading_fd_handler);
  Fd m = memfd_with("x");
  EXPECT_EQ(call("refused", {m.get()}), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_FALSE(last_error().empty());
  expect_usable();
}

TEST_P(CApiFds, FdHandlerOnlyBeforeServing) {
  EXPECT_EQ(shmlink_server_set_fd_handler(server_.get(), reading_fd_handler, &fd_state_),
            SHMLINK_E_STATE);
  EXPECT_EQ(shmlink_server_set_fd_handler(nullptr, reading_fd_handler, nullptr),
            SHMLINK_E_INVALID_ARGUMENT);
}

INSTANTIATE_TEST_SUITE_P(Transports, CApiFds, ::testing::Values(Transport::Shm, Transport::Unix),
                         transport_name);

TEST(CApiFdsOptions, RefuseFdsIsZeroOrOneAndInitSpellsTheDefault) {
  shmlink_server_options o;
  shmlink_server_options_init(&o);
  EXPECT_EQ(o.refuse_fds, 0u);
  o.refuse_fds = 2;
  TempDir dir;
  std::string bind = bind_address(Transport::Unix, dir);
  const char* list[] = {bind.c_str()};
  shmlink_server* s = nullptr;
  EXPECT_EQ(shmlink_server_bind(list, 1, &o, &s), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(last_error().find("refuse_fds"), std::string::npos) << last_error();
}

TEST(CApiFdsTcp, Unsupported) {
  const char* list[] = {"tcp:127.0.0.1:0"};
  shmlink_server* raw = nullptr;
  ASSERT_EQ(shmlink_server_bind(list, 1, nullptr, &raw), SHMLINK_OK) << last_error();
  ServerPtr server(raw);
  ScriptState state;
  ASSERT_EQ(shmlink_server_start(raw, scripted_handler, &state), SHMLINK_OK) << last_error();
  shmlink_client* c = nullptr;
  ASSERT_EQ(shmlink_client_connect(shmlink_server_address(raw, 0), nullptr, &c), SHMLINK_OK);
  ClientPtr client(c);
  Fd m = memfd_with("x");
  int fd = m.get();
  Buffer out;
  EXPECT_EQ(shmlink_client_call_fds(c, bytes("x"), 1, &fd, 1, out.get()), SHMLINK_E_UNSUPPORTED);
  EXPECT_NE(last_error().find("nothing was sent"), std::string::npos) << last_error();
  EXPECT_STRNE(shmlink_error_string(SHMLINK_E_UNSUPPORTED), "unknown status code");
  uint64_t id = 0;
  EXPECT_EQ(shmlink_client_send_fds(c, bytes("x"), 1, &fd, 1, &id), SHMLINK_E_UNSUPPORTED);
  ASSERT_EQ(shmlink_client_call(c, bytes("after"), 5, out.get()), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "after");
  // No descriptors over tcp is a plain call.
  ASSERT_EQ(shmlink_client_call_fds(c, bytes("none"), 4, nullptr, 0, out.get()), SHMLINK_OK);
  EXPECT_EQ(out.str(), "none");
}

// shmlink.hpp: Client::call/send with descriptors, Server::start with an
// FdHandler that keeps some by setting them to -1.
class CppFds : public ::testing::TestWithParam<Transport> {
 protected:
  void start(const shmlink::ServerOptions& options = {}) {
    server_ = shmlink::Server::bind({bind_address(GetParam(), dir_)}, options);
    server_.start([](std::string_view req, std::string& resp) { resp.assign(req); },
                  [this](std::string_view req, std::vector<int>& fds, std::string& resp) {
                    resp.assign(req);
                    for (int fd : fds) resp += "|" + contents(fd);
                    if (req == "keep-first" && !fds.empty()) {
                      std::lock_guard<std::mutex> g(kept_.m);
                      kept_.kept.push_back(fds[0]);
                      fds[0] = -1;
                    }
                    if (req == "throw") throw shmlink::HandlerError(5, "thrown");
                  });
    client_ = shmlink::Client::connect(server_.addresses()[0]);
  }
  void TearDown() override {
    client_ = shmlink::Client();
    server_ = shmlink::Server();
  }

  TempDir dir_;
  FdState kept_;  // outlives server_
  shmlink::Server server_;
  shmlink::Client client_;
};

TEST_P(CppFds, CallSendAndKeep) {
  start();
  auto [r, w] = pipe_with("piped");
  Fd m = memfd_with("memfd");
  EXPECT_EQ(client_.call("two", {r.get(), m.get()}), "two|piped|memfd");
  EXPECT_EQ(client_.call("plain"), "plain");
  uint64_t id = client_.send("sent", {m.get()});
  auto [got, resp] = client_.recv();
  EXPECT_EQ(got, id);
  EXPECT_EQ(resp, "sent|memfd");
  std::string out;
  EXPECT_TRUE(client_.try_call("try", {m.get()}, out)) << out;
  EXPECT_EQ(out, "try|memfd");

  std::size_t before = steady_fds();
  EXPECT_EQ(client_.call("keep-first", {m.get(), m.get(), m.get()}),
            "keep-first|memfd|memfd|memfd");
  EXPECT_TRUE(wait_until([&] { return open_fds() == before + 1; }))
      << "open: " << open_fds() << ", before: " << before;
  try {
    client_.call("throw", {m.get()});
    ADD_FAILURE() << "no exception";
  } catch (const shmlink::RemoteError& e) {
    EXPECT_EQ(e.remote_code(), 5u);
  }
  EXPECT_TRUE(wait_until([&] { return open_fds() == before + 1; }))
      << "open: " << open_fds() << ", before: " << before;
}

TEST_P(CppFds, ErrorsLeaveTheSessionUsable) {
  start();
  Fd m = memfd_with("x");
  try {
    client_.call("too many", std::vector<int>(SHMLINK_MAX_FDS + 1, m.get()));
    ADD_FAILURE() << "no exception";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_INVALID_ARGUMENT);
  }
  std::string out;
  shmlink::Status s = client_.try_call("negative", {-5}, out);
  EXPECT_EQ(s.code, SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("fds[0] = -5"), std::string::npos) << s.message;
  EXPECT_EQ(client_.call("after"), "after");
}

TEST_P(CppFds, RefusingServer) {
  shmlink::ServerOptions o;
  o.accept_fds = false;
  start(o);
  Fd m = memfd_with("x");
  std::string out;
  EXPECT_EQ(client_.try_call("refused", {m.get()}, out).code, SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(client_.call("after"), "after");
}

INSTANTIATE_TEST_SUITE_P(Transports, CppFds, ::testing::Values(Transport::Shm, Transport::Unix),
                         transport_name);

TEST(CppFdsTcp, UnsupportedThrows) {
  shmlink::Server server = shmlink::Server::bind({"tcp:127.0.0.1:0"});
  server.start([](std::string_view req, std::string& resp) { resp.assign(req); });
  shmlink::Client c = shmlink::Client::connect(server.addresses()[0]);
  Fd m = memfd_with("x");
  try {
    c.call("x", {m.get()});
    ADD_FAILURE() << "no exception";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_UNSUPPORTED);
  }
  EXPECT_EQ(c.call("after"), "after");
}

}  // namespace
}  // namespace shmlink_test
