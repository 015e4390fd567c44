// shmlink.hpp: RAII, move semantics, exceptions and Status results, handlers
// as lambdas (HandlerError, other exceptions), call_view, pipelining and the
// server's serve/start/stop/wait on every transport.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "shmlink.hpp"
#include "support.hpp"

namespace shmlink_test {
namespace {

static_assert(!std::is_copy_constructible_v<shmlink::Client>);
static_assert(!std::is_copy_assignable_v<shmlink::Client>);
static_assert(std::is_nothrow_move_constructible_v<shmlink::Client>);
static_assert(std::is_nothrow_move_assignable_v<shmlink::Client>);
static_assert(!std::is_copy_constructible_v<shmlink::Server>);
static_assert(std::is_nothrow_move_constructible_v<shmlink::Server>);
static_assert(std::is_nothrow_move_assignable_v<shmlink::Server>);

// A handler script like the C tests', written as a lambda over C++ types.
struct Script {
  std::atomic<int> notes{0};
  ScriptState gate;

  shmlink::Server::Handler handler() {
    return [this](std::string_view req, std::string& resp) {
      if (req == "note") {
        ++notes;
      } else if (req == "handler-error") {
        throw shmlink::HandlerError(77, "no such thing");
      } else if (req == "handler-error-0") {
        throw shmlink::HandlerError(0, "code zero");
      } else if (req == "std-exception") {
        throw std::runtime_error("boom from the handler");
      } else if (req == "int") {
        throw 42;
      } else if (req == "gate") {
        gate.wait_gate();
        resp = "gate done";
      } else if (req.substr(0, 5) == "size:") {
        resp = pattern(std::stoul(std::string(req.substr(5))));
      } else {
        resp.assign(req);
      }
    };
  }
};

class CppTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    server_ = shmlink::Server::bind({bind_address(GetParam(), dir_)});
    ASSERT_EQ(server_.addresses().size(), 1u);
    address_ = server_.addresses()[0];
    server_.start(script_.handler());
  }
  void TearDown() override {
    script_.gate.release();
    server_ = shmlink::Server();  // stops and joins before script_ goes away
  }

  TempDir dir_;
  Script script_;
  shmlink::Server server_;
  std::string address_;
};

TEST_P(CppTest, CallAndCallView) {
  shmlink::Client c = shmlink::Client::connect(address_);
  EXPECT_TRUE(c.is_connected());
  EXPECT_EQ(c.call("hello"), "hello");
  EXPECT_EQ(c.call(""), "");
  std::string_view v = c.call_view("view me");
  EXPECT_EQ(v, "view me");
  const char* first = v.data();
  v = c.call_view("again!!");  // same length: the allocation is reused
  EXPECT_EQ(v, "again!!");
  EXPECT_EQ(v.data(), first);
  EXPECT_EQ(c.call_view(""), "");
  std::string big = pattern(3 << 20, 1);
  EXPECT_TRUE(c.call(big) == big);
  EXPECT_EQ(c.call_view("size:100000"), pattern(100000));
}

TEST_P(CppTest, AnEventLoopWaitsOnTheClientsDescriptor) {
  shmlink::Client c = shmlink::Client::connect(address_);
  int fd = c.fd();
  ASSERT_GE(fd, 0);
  std::map<uint64_t, std::string> want;
  for (int i = 0; i < 32; ++i) {
    std::string req = "loop" + std::to_string(i);
    want[c.send(req)] = req;
  }
  uint64_t dropped = c.send("dropped");
  EXPECT_TRUE(c.abandon(dropped));
  while (!want.empty()) {
    auto got = c.try_receive();
    if (!got) {
      pollfd p{fd, POLLIN, 0};
      ASSERT_EQ(::poll(&p, 1, 10'000), 1) << "no wake-up in 10 s";
      continue;
    }
    auto it = want.find(got->first);
    ASSERT_NE(it, want.end()) << "an answer to no call: " << got->first;
    EXPECT_EQ(got->second, it->second);
    want.erase(it);
  }
  EXPECT_EQ(c.call("after"), "after");
}

TEST_P(CppTest, ScopeExitClosesTheSession) {
  {
    shmlink::Client c = shmlink::Client::connect(address_);
    EXPECT_EQ(c.call("x"), "x");
    EXPECT_EQ(server_.stats().active_sessions, 1u);
  }
  EXPECT_TRUE(wait_until([&] { return server_.stats().active_sessions == 0; }));
  EXPECT_EQ(server_.stats().sessions_closed, 1u);
}

TEST_P(CppTest, MoveTransfersTheSession) {
  shmlink::Client a = shmlink::Client::connect(address_);
  shmlink::Client b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_TRUE(b);
  EXPECT_EQ(b.call("moved"), "moved");
  EXPECT_FALSE(a.is_connected());
  EXPECT_EQ(a.in_flight(), 0u);
  try {
    a.call("x");
    FAIL() << "a moved-from client called";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_CLOSED);
    EXPECT_NE(std::string(e.what()).find("moved from"), std::string::npos) << e.what();
  }
  EXPECT_THROW(a.send("x"), shmlink::DisconnectedError);
  EXPECT_THROW(a.recv(), shmlink::DisconnectedError);
  EXPECT_THROW(a.notify("x"), shmlink::DisconnectedError);
  std::string out = "old";
  shmlink::Status s = a.try_call("x", out);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.code, SHMLINK_E_CLOSED);
  EXPECT_EQ(out, "");
  a.close();  // fine on an empty client

  // Move assignment releases the target's own session.
  shmlink::Client c = shmlink::Client::connect(address_);
  EXPECT_TRUE(wait_until([&] { return server_.stats().active_sessions == 2; }));
  c = std::move(b);
  EXPECT_EQ(c.call("kept"), "kept");
  EXPECT_TRUE(wait_until([&] { return server_.stats().active_sessions == 1; }));
}

TEST_P(CppTest, ForkedChildForgetsTheInheritedClient) {
  shmlink::Client c = shmlink::Client::connect(address_);
  EXPECT_EQ(c.call("before"), "before");
  // Fork while every server thread sleeps (see c_api_test.cpp's
  // release_in_child: a lock held at the fork stays held in the child).
  ASSERT_TRUE(wait_until(other_threads_asleep)) << "the server's threads never all slept";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    c.forget_inherited();
    _exit(c ? 1 : 0);  // empty afterwards
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(c.call("after"), "after");
  EXPECT_EQ(server_.stats().active_sessions, 1u);
}

TEST_P(CppTest, CloseMakesCallsThrowClosed) {
  shmlink::Client c = shmlink::Client::connect(address_);
  c.close();
  c.close();
  EXPECT_FALSE(c.is_connected());
  try {
    c.call("x");
    FAIL() << "a closed client called";
  } catch (const shmlink::DisconnectedError& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_CLOSED);
    EXPECT_GT(std::strlen(e.what()), 0u);
  }
  EXPECT_TRUE(wait_until([&] { return server_.stats().active_sessions == 0; }));
}

TEST_P(CppTest, HandlerErrorBecomesARemoteErrorWithItsCode) {
  shmlink::Client c = shmlink::Client::connect(address_);
  try {
    c.call("handler-error");
    FAIL() << "no exception";
  } catch (const shmlink::RemoteError& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_REMOTE);
    EXPECT_EQ(e.remote_code(), 77u);
    EXPECT_NE(std::string(e.what()).find("no such thing"), std::string::npos) << e.what();
  }
  // Code 0 would mean success: it arrives as kHandlerException.
  try {
    c.call("handler-error-0");
    FAIL() << "no exception";
  } catch (const shmlink::RemoteError& e) {
    EXPECT_EQ(e.remote_code(), shmlink::kHandlerException);
    EXPECT_NE(std::string(e.what()).find("code zero"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.call("after"), "after") << "the session survives a remote error";
}

TEST_P(CppTest, OtherExceptionsBecomeHandlerException) {
  shmlink::Client c = shmlink::Client::connect(address_);
  try {
    c.call("std-exception");
    FAIL() << "no exception";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_REMOTE);
    EXPECT_EQ(e.remote_code(), shmlink::kHandlerException);
    EXPECT_NE(std::string(e.what()).find("boom from the handler"), std::string::npos) << e.what();
  }
  try {
    c.call("int");
    FAIL() << "no exception";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.remote_code(), shmlink::kHandlerException);
    EXPECT_NE(std::string(e.what()).find("unknown exception"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.call("alive"), "alive");
  EXPECT_EQ(server_.stats().errors, 2u);
}

TEST_P(CppTest, NonThrowingVariantsReportStatus) {
  shmlink::Status s;
  shmlink::Client c = shmlink::Client::connect(address_, {}, s);
  ASSERT_TRUE(s) << s.message;
  std::string out;
  s = c.try_call("fine", out);
  EXPECT_TRUE(s);
  EXPECT_EQ(out, "fine");
  s = c.try_call("handler-error", out);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.code, SHMLINK_E_REMOTE);
  EXPECT_EQ(s.remote_code, 77u);
  EXPECT_NE(s.message.find("no such thing"), std::string::npos) << s.message;
  EXPECT_EQ(out, "");

  uint64_t id = 0, got = 0;
  ASSERT_TRUE(c.try_send("piped", id));
  ASSERT_TRUE(c.try_recv(got, out));
  EXPECT_EQ(got, id);
  EXPECT_EQ(out, "piped");
  ASSERT_TRUE(c.try_send("handler-error", id));
  s = c.try_recv(got, out);
  EXPECT_EQ(s.code, SHMLINK_E_REMOTE);
  EXPECT_EQ(got, id);
  s = c.try_recv(got, out);
  EXPECT_EQ(s.code, SHMLINK_E_NOTHING_IN_FLIGHT);
  EXPECT_TRUE(c.try_notify("note"));
  EXPECT_EQ(c.try_call("x", out, std::chrono::microseconds(-1)).code, SHMLINK_E_INVALID_ARGUMENT);

  shmlink::Client bad = shmlink::Client::connect("foo", {}, s);
  EXPECT_FALSE(bad);
  EXPECT_EQ(s.code, SHMLINK_E_INVALID_ADDRESS);
  EXPECT_NE(s.message.find("foo"), std::string::npos) << s.message;
}

TEST_P(CppTest, PipeliningAndNotify) {
  shmlink::Client c = shmlink::Client::connect(address_);
  std::map<uint64_t, std::string> sent;
  for (int i = 0; i < 32; ++i) {
    std::string req = "p" + std::to_string(i);
    sent[c.send(req)] = req;
  }
  EXPECT_EQ(c.in_flight(), 32u);
  for (int i = 0; i < 32; ++i) {
    auto [id, body] = c.recv();
    ASSERT_EQ(sent.count(id), 1u);
    EXPECT_EQ(body, sent[id]);
    sent.erase(id);
  }
  EXPECT_EQ(c.in_flight(), 0u);
  uint64_t failing = c.send("handler-error");
  try {
    c.recv(std::chrono::seconds(5));
    FAIL() << "no exception";
  } catch (const shmlink::RemoteError& e) {
    EXPECT_EQ(e.remote_code(), 77u);
    EXPECT_EQ(e.call_id(), failing);
  }
  try {
    c.recv();
    FAIL() << "no exception";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_NOTHING_IN_FLIGHT);
  }
  for (int i = 0; i < 5; ++i) c.notify("note");
  EXPECT_TRUE(wait_until([&] { return script_.notes.load() == 5; }));
}

TEST_P(CppTest, TimeoutThrowsAndTheSessionSurvives) {
  shmlink::Client c = shmlink::Client::connect(address_);
  try {
    c.call("gate", std::chrono::milliseconds(50));
    FAIL() << "no timeout";
  } catch (const shmlink::TimeoutError& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_TIMEOUT);
  }
  script_.gate.release();
  EXPECT_EQ(c.call("next"), "next");
  EXPECT_THROW(c.call("x", std::chrono::microseconds(-5)), shmlink::Error);
}

TEST_P(CppTest, ClientOptionsArePassedThrough) {
  shmlink::ClientOptions o;
  o.timeout = std::chrono::seconds(2);
  o.wait = shmlink::Wait::Sleep;
  o.ring_size = 4096;
  o.max_message_size = 1 << 20;
  shmlink::Client c = shmlink::Client::connect(address_, o);
  std::string req = pattern(100000, 2);  // many times the 4 KiB ring
  EXPECT_TRUE(c.call(req) == req);
  try {
    c.call("size:" + std::to_string((1 << 20) + 1));
    FAIL() << "a response over max_message_size was accepted";
  } catch (const shmlink::RemoteError& e) {
    EXPECT_EQ(e.remote_code(), shmlink::kResponseTooLarge) << e.what();
  }

  o.ring_size = 1000;
  try {
    shmlink::Client::connect(address_, o);
    FAIL() << "a ring size that is not a power of two was accepted";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("ring_size"), std::string::npos) << e.what();
  }
  o.ring_size = 0;
  o.wait = static_cast<shmlink::Wait>(99);
  EXPECT_THROW(shmlink::Client::connect(address_, o), shmlink::Error);
  o.wait = shmlink::Wait::Busy;
  o.timeout = std::chrono::microseconds(-1);
  EXPECT_THROW(shmlink::Client::connect(address_, o), shmlink::Error);
}

TEST_P(CppTest, ConnectFailuresThrowWithCodeAndDetail) {
  try {
    shmlink::Client::connect(bind_address(Transport::Unix, dir_, "nobody"));
    FAIL() << "connected to nobody";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_CONNECT);
    EXPECT_NE(std::string(e.what()).find("nobody"), std::string::npos) << e.what();
  }
  try {
    shmlink::Client::connect("tcp:nohost");
    FAIL() << "parsed tcp:nohost";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_INVALID_ADDRESS);
  }
  EXPECT_THROW(shmlink::Client::connect(std::string_view("shm:/a\0b", 8)), shmlink::Error);
}

TEST_P(CppTest, ServerRefusesASecondHandlerAndReportsStats) {
  EXPECT_THROW(server_.start(script_.handler()), shmlink::Error);
  try {
    server_.serve(script_.handler());
    FAIL() << "served twice";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_STATE);
  }
  shmlink::Client c = shmlink::Client::connect(address_);
  EXPECT_EQ(c.call("ok"), "ok") << "the refused handler replaced the running one";
  shmlink_server_stats s = server_.stats();
  EXPECT_EQ(s.calls, 1u);
  EXPECT_EQ(s.sessions_opened, 1u);
}

TEST_P(CppTest, ServeOnAThreadStopsFromAnother) {
  shmlink::Server s = shmlink::Server::bind({bind_address(GetParam(), dir_, "serve")});
  std::string address = s.addresses().at(0);
  if (GetParam() == Transport::Tcp) {
    EXPECT_EQ(address.rfind("tcp:127.0.0.1:", 0), 0u);
  }
  EXPECT_EQ(address.find(":0", address.size() - 2), std::string::npos) << "port not resolved";
  auto serving = std::async(std::launch::async, [&] {
    s.serve([](std::string_view req, std::string& resp) { resp = "served " + std::string(req); });
  });
  shmlink::Client c = shmlink::Client::connect(address);
  EXPECT_EQ(c.call("x"), "served x");
  s.stop();
  ASSERT_EQ(serving.wait_for(5s), std::future_status::ready);
  serving.get();  // rethrows a failure of serve
  EXPECT_THROW(c.call("x"), shmlink::DisconnectedError);
}

shmlink::Server* g_signalled = nullptr;
extern "C" void stop_on_signal(int) { g_signalled->stop(); }

TEST_P(CppTest, StopFromASignalHandlerEndsWait) {
  shmlink::Server s = shmlink::Server::bind({bind_address(GetParam(), dir_, "signal")});
  s.start([](std::string_view req, std::string& resp) { resp.assign(req); });
  shmlink::Client c = shmlink::Client::connect(s.addresses().at(0));
  EXPECT_EQ(c.call("before"), "before");
  g_signalled = &s;
  struct sigaction sa {
  }, old{};
  sa.sa_handler = stop_on_signal;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  ASSERT_EQ(raise(SIGUSR1), 0);
  auto waited = std::async(std::launch::async, [&] { s.wait(); });
  ASSERT_EQ(waited.wait_for(5s), std::future_status::ready);
  waited.get();
  sigaction(SIGUSR1, &old, nullptr);
  g_signalled = nullptr;
  EXPECT_THROW(c.call("after"), shmlink::DisconnectedError);
}

TEST_P(CppTest, DestroyingAStartedServerStopsIt) {
  std::string bind = bind_address(GetParam(), dir_, "scoped");
  std::string address;
  {
    shmlink::Server s = shmlink::Server::bind({bind});
    address = s.addresses().at(0);
    s.start([](std::string_view, std::string& resp) { resp = "up"; });
    shmlink::Server moved = std::move(s);  // the handler moves with it
    EXPECT_EQ(shmlink::Client::connect(address).call("x"), "up");
    EXPECT_FALSE(s);  // NOLINT(bugprone-use-after-move)
    EXPECT_THROW(s.wait(), shmlink::Error);
  }
  shmlink::Status st;
  shmlink::Client c = shmlink::Client::connect(address, {}, st);
  EXPECT_EQ(st.code, SHMLINK_E_CONNECT) << st.message;
  if (GetParam() != Transport::Tcp) {
    EXPECT_FALSE(std::filesystem::exists(bind.substr(bind.find(':') + 1)));
  }
}

TEST_P(CppTest, BindFailuresAndServerOptions) {
  try {
    shmlink::Server::bind({address_});
    FAIL() << "took over a live address";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_BIND);
  }
  shmlink::Status st;
  shmlink::Server none = shmlink::Server::bind({"foo"}, {}, st);
  EXPECT_FALSE(none);
  EXPECT_EQ(st.code, SHMLINK_E_INVALID_ADDRESS);
  EXPECT_TRUE(none.addresses().empty());
  EXPECT_EQ(none.stats().calls, 0u);
  none.stop();  // no-op

  shmlink::ServerOptions o;
  o.max_message_size = 1024;
  o.wait = shmlink::Wait::Spin;
  o.spin_us = 20;
  o.max_sessions = 1;
  o.allowed_uids = {12345};
  shmlink::Server small = shmlink::Server::bind({bind_address(GetParam(), dir_, "small")}, o);
  small.start([](std::string_view req, std::string& resp) { resp.assign(req); });
  shmlink::Client c = shmlink::Client::connect(small.addresses().at(0));
  EXPECT_EQ(c.call(std::string(1024, 'a')).size(), 1024u);
  try {
    c.call(std::string(1025, 'a'));
    FAIL() << "an over-size request was sent";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_TOO_LARGE);
  }
  EXPECT_EQ(c.call("still"), "still");
  // max_sessions = 1: a second session is refused while the first is open.
  try {
    shmlink::Client::connect(small.addresses().at(0));
    FAIL() << "a second session was accepted";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_REFUSED) << e.what();
  }
  o.wait = static_cast<shmlink::Wait>(99);
  EXPECT_THROW(shmlink::Server::bind({bind_address(GetParam(), dir_, "bad")}, o), shmlink::Error);
}

// Hot upgrade: a second server takes the first one's listener and live
// shm: session over; the client's next calls, on the same session, are
// answered by the successor, and the first server's wait() returns.
TEST(CppHandover, ASuccessorTakesTheListenerAndTheLiveSessionOver) {
  TempDir dir;
  shmlink::ServerOptions options;
  options.handover = dir.path() + "/h.sock";
  shmlink::Server first = shmlink::Server::bind({"shm:" + dir.path() + "/a.sock"}, options);
  first.start([](std::string_view req, std::string& resp) { resp = "first " + std::string(req); });
  shmlink::Client c = shmlink::Client::connect(first.addresses().at(0));
  EXPECT_EQ(c.call("x"), "first x");
  uint64_t pipelined = c.send("queued");
  EXPECT_EQ(c.recv(), std::make_pair(pipelined, std::string("first queued")));

  shmlink::Server second = shmlink::Server::take_over(options.handover, options);
  EXPECT_EQ(second.addresses(), first.addresses());
  second.start(
      [](std::string_view req, std::string& resp) { resp = "second " + std::string(req); });
  auto waited = std::async(std::launch::async, [&] { first.wait(); });
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready) << "the first server did not stop";
  waited.get();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(c.call("y"), "second y");
  // New sessions come to the successor too, and it can be taken over in turn.
  EXPECT_EQ(shmlink::Client::connect(first.addresses().at(0)).call("z"), "second z");
  shmlink::Server third = shmlink::Server::take_over(options.handover);
  third.start([](std::string_view req, std::string& resp) { resp = "third " + std::string(req); });
  second.wait();
  EXPECT_EQ(c.call("w"), "third w");

  // Nobody listening: a clear failure.
  shmlink::Status st;
  shmlink::Server none = shmlink::Server::take_over(dir.path() + "/nobody.sock", {}, st);
  EXPECT_EQ(st.code, SHMLINK_E_BIND);
  EXPECT_NE(st.message.find("cannot take the server over"), std::string::npos) << st.message;
}

INSTANTIATE_TEST_SUITE_P(Transports, CppTest,
                         ::testing::Values(Transport::Shm, Transport::Unix, Transport::Tcp),
                         transport_name);

}  // namespace
}  // namespace shmlink_test
