// A server process killed with SIGKILL in the middle of a call: the caller
// must fail promptly (well within 1 s) with SHMLINK_E_PEER_GONE, on every
// transport, and an idle session must notice on its next call.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "support.hpp"

extern char** environ;

namespace shmlink_test {
namespace {

// A child process whose stdout is read line by line; killed and reaped at
// destruction if still running.
class Child {
 public:
  Child(const std::string& path, const std::vector<std::string>& args) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    out_ = fds[0];
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(path.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) throw std::runtime_error("posix_spawn " + path + ": " + std::strerror(rc));
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      reap();
    }
    close(out_);
  }

  // The next line of the child's stdout, or nothing at `deadline` or EOF.
  std::optional<std::string> read_line(Clock::time_point deadline) {
    for (;;) {
      auto nl = buffered_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffered_.substr(0, nl);
        buffered_.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      int n = poll(&p, 1, static_cast<int>(left.count()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      char chunk[256];
      ssize_t got = read(out_, chunk, sizeof chunk);
      if (got <= 0) return std::nullopt;
      buffered_.append(chunk, static_cast<size_t>(got));
    }
  }

  // Sends SIGKILL and returns when it was sent.
  Clock::time_point kill_now() {
    kill(pid_, SIGKILL);
    return Clock::now();
  }

  // Waits for the child to end; its wait status.
  int reap() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffered_;
};

class ServerKilledMidCall : public ::testing::TestWithParam<Transport> {};

// Connects, retrying until the server answers or `deadline` passes.
ClientPtr connect_by(const std::string& address, Clock::time_point deadline) {
  shmlink_client_options o;
  shmlink_client_options_init(&o);
  o.timeout_us = 30'000'000;  // the failure must come from the death, not a timeout
  for (;;) {
    shmlink_client* c = nullptr;
    shmlink_status st = shmlink_client_connect(address.c_str(), &o, &c);
    if (st == SHMLINK_OK) return ClientPtr(c);
    if (Clock::now() >= deadline) {
      ADD_FAILURE() << "cannot connect to " << address << ": " << last_error();
      return nullptr;
    }
    std::this_thread::sleep_for(5ms);
  }
}

struct CallResult {
  shmlink_status status;
  std::string detail;
  Clock::time_point returned;
};

// The address test_server announces ("ready ADDRESS"), or "" after
// failing the test.
std::string ready_address(Child& server) {
  auto ready = server.read_line(Clock::now() + 20s);
  EXPECT_TRUE(ready.has_value()) << "test_server did not print ready";
  if (!ready) return "";
  std::istringstream words(*ready);
  std::string word, address;
  words >> word >> address;
  EXPECT_EQ(word, "ready") << *ready;
  EXPECT_FALSE(address.empty()) << *ready;
  return word == "ready" ? address : "";
}

TEST_P(ServerKilledMidCall, CallFailsWithPeerGoneWithinOneSecond) {
  TempDir dir;
  Child server(SHMLINK_TEST_SERVER, {bind_address(GetParam(), dir)});
  std::string address = ready_address(server);
  ASSERT_FALSE(address.empty());

  ClientPtr busy = connect_by(address, Clock::now() + 10s);
  ClientPtr idle = connect_by(address, Clock::now() + 10s);
  ASSERT_TRUE(busy && idle);
  Buffer out;
  ASSERT_EQ(shmlink_client_call(idle.get(), bytes("ping"), 4, out.get()), SHMLINK_OK)
      << last_error();
  ASSERT_EQ(out.str(), "ping");

  auto caller = std::async(std::launch::async, [c = busy.get()] {
    Buffer response;
    shmlink_status st = shmlink_client_call(c, bytes("sleep"), 5, response.get());
    return CallResult{st, last_error(), Clock::now()};
  });
  auto entered = server.read_line(Clock::now() + 10s);
  ASSERT_EQ(entered.value_or("<nothing>"), "entered");

  Clock::time_point killed = server.kill_now();
  int status = server.reap();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "wait status " << status;

  ASSERT_EQ(caller.wait_for(5s), std::future_status::ready) << "the call hangs";
  CallResult r = caller.get();
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(r.returned - killed);
  std::cerr << name(GetParam()) << ": the call failed " << took.count()
            << " ms after SIGKILL: " << r.detail << "\n";
  EXPECT_EQ(r.status, SHMLINK_E_PEER_GONE) << shmlink_error_string(r.status) << ": " << r.detail;
  EXPECT_FALSE(r.detail.empty());
  EXPECT_LT(took, 1000ms) << "the death was noticed late";
  EXPECT_EQ(shmlink_client_is_connected(busy.get()), 0);

  // The session is over: further calls fail at once.
  shmlink_status again = shmlink_client_call(busy.get(), bytes("x"), 1, out.get());
  EXPECT_TRUE(again == SHMLINK_E_CLOSED || again == SHMLINK_E_PEER_GONE)
      << shmlink_error_string(again) << ": " << last_error();

  // The idle session notices on its next call.
  shmlink_status st = SHMLINK_OK;
  auto idle_took = timed([&] { st = shmlink_client_call(idle.get(), bytes("x"), 1, out.get()); });
  EXPECT_TRUE(st == SHMLINK_E_PEER_GONE || st == SHMLINK_E_CLOSED)
      << shmlink_error_string(st) << ": " << last_error();
  EXPECT_LT(idle_took, 1000ms);
  EXPECT_EQ(shmlink_client_is_connected(idle.get()), 0);
}

// A client waiting in an event loop (on shmlink_client_fd) when its server
// is killed: the descriptor becomes readable and try_receive reports the
// death.
TEST_P(ServerKilledMidCall, ALoopWaitingOnTheDescriptorWakesWithPeerGone) {
  TempDir dir;
  Child server(SHMLINK_TEST_SERVER, {bind_address(GetParam(), dir)});
  std::string address = ready_address(server);
  ASSERT_FALSE(address.empty());
  ClientPtr c = connect_by(address, Clock::now() + 10s);
  ASSERT_TRUE(c);
  int fd = -1;
  ASSERT_EQ(shmlink_client_fd(c.get(), &fd), SHMLINK_OK) << last_error();
  uint64_t id = 0;
  ASSERT_EQ(shmlink_client_send(c.get(), bytes("sleep"), 5, &id), SHMLINK_OK) << last_error();
  ASSERT_EQ(server.read_line(Clock::now() + 10s).value_or("<nothing>"), "entered");
  Buffer out;
  ASSERT_EQ(shmlink_client_try_receive(c.get(), &id, out.get()), SHMLINK_E_WOULD_BLOCK);
  server.kill_now();
  server.reap();
  shmlink_status st = SHMLINK_E_WOULD_BLOCK;
  auto deadline = Clock::now() + 5s;
  while (st == SHMLINK_E_WOULD_BLOCK) {
    ASSERT_LT(Clock::now(), deadline) << "the death never showed";
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 5'000), 1) << "no wake-up in 5 s after SIGKILL";
    st = shmlink_client_try_receive(c.get(), &id, out.get());
  }
  EXPECT_TRUE(st == SHMLINK_E_PEER_GONE || st == SHMLINK_E_CLOSED)
      << shmlink_error_string(st) << ": " << last_error();
}

INSTANTIATE_TEST_SUITE_P(Transports, ServerKilledMidCall,
                         ::testing::Values(Transport::Shm, Transport::Unix, Transport::Tcp),
                         transport_name);

}  // namespace
}  // namespace shmlink_test
