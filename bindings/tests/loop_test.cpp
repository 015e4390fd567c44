// Waiting for answers in an event loop through the C API, on every
// transport: shmlink_client_fd becomes readable when an answer has begun to
// arrive after shmlink_client_try_receive said SHMLINK_E_WOULD_BLOCK (over
// shm: the server rings the client's eventfd), abandoned calls' answers are
// dropped, and several sessions with many calls in flight share one epoll.
#include <poll.h>
#include <sys/epoll.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "c_api_fixture.hpp"

namespace shmlink_test {
namespace {

class CApiLoopTest : public CApiTest {};

// Waits up to 10 s for `fd` to be readable.
bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 10'000) == 1;
}

TEST_P(CApiLoopTest, TryReceiveSaysWouldBlockThenTheDescriptorWakes) {
  ClientPtr c = connect();
  int fd = -1;
  ASSERT_EQ(shmlink_client_fd(c.get(), &fd), SHMLINK_OK) << last_error();
  ASSERT_GE(fd, 0);
  int again = -1;
  ASSERT_EQ(shmlink_client_fd(c.get(), &again), SHMLINK_OK);
  EXPECT_EQ(again, fd) << "one descriptor per client";
  uint64_t id = 0, got = 0;
  Buffer out;
  EXPECT_EQ(shmlink_client_try_receive(c.get(), &got, out.get()), SHMLINK_E_NOTHING_IN_FLIGHT);
  ASSERT_EQ(shmlink_client_send(c.get(), bytes("gate"), 4, &id), SHMLINK_OK);
  ASSERT_EQ(shmlink_client_try_receive(c.get(), &got, out.get()), SHMLINK_E_WOULD_BLOCK);
  EXPECT_FALSE(last_error().empty());
  state_.release();
  // A wake-up may come early (the server rings a new bell once on
  // receipt): the loop looks again, as every loop must.
  shmlink_status st = SHMLINK_E_WOULD_BLOCK;
  for (int wakes = 0; st == SHMLINK_E_WOULD_BLOCK; ++wakes) {
    ASSERT_LT(wakes, 100) << "woken 100 times with nothing to take";
    ASSERT_TRUE(readable(fd)) << "no wake-up in 10 s";
    st = shmlink_client_try_receive(c.get(), &got, out.get());
  }
  ASSERT_EQ(st, SHMLINK_OK) << last_error();
  EXPECT_EQ(got, id);
  EXPECT_EQ(out.str(), "gate done");
  // Blocking calls still work on the same client.
  ASSERT_EQ(call(c.get(), "blocking", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "blocking");
}

TEST_P(CApiLoopTest, WaitReadableWaitsWithoutReceiving) {
  ClientPtr c = connect();
  uint64_t id = 0, got = 0;
  int ready = -1;
  EXPECT_EQ(shmlink_client_wait_readable(c.get(), 1000, &ready), SHMLINK_E_NOTHING_IN_FLIGHT);
  ASSERT_EQ(shmlink_client_send(c.get(), bytes("gate"), 4, &id), SHMLINK_OK);
  ASSERT_EQ(shmlink_client_wait_readable(c.get(), 20'000, &ready), SHMLINK_OK) << last_error();
  EXPECT_EQ(ready, 0) << "the gate holds the answer";
  EXPECT_EQ(shmlink_client_is_connected(c.get()), 1);
  state_.release();
  ASSERT_EQ(shmlink_client_wait_readable(c.get(), 10'000'000, &ready), SHMLINK_OK) << last_error();
  EXPECT_EQ(ready, 1);
  Buffer out;
  ASSERT_EQ(shmlink_client_try_receive(c.get(), &got, out.get()), SHMLINK_OK) << last_error();
  EXPECT_EQ(got, id);
  EXPECT_EQ(out.str(), "gate done");
  EXPECT_EQ(shmlink_client_wait_readable(c.get(), 0, nullptr), SHMLINK_E_INVALID_ARGUMENT);
}

TEST_P(CApiLoopTest, AbandonedAnswersAreDropped) {
  ClientPtr c = connect();
  int fd = -1;
  ASSERT_EQ(shmlink_client_fd(c.get(), &fd), SHMLINK_OK) << last_error();
  uint64_t held = 0, kept = 0, got = 0;
  ASSERT_EQ(shmlink_client_send(c.get(), bytes("gate"), 4, &held), SHMLINK_OK);
  ASSERT_EQ(shmlink_client_send(c.get(), bytes("kept"), 4, &kept), SHMLINK_OK);
  EXPECT_EQ(shmlink_client_abandon(c.get(), held), 1);
  EXPECT_EQ(shmlink_client_abandon(c.get(), held), 0) << "abandoned twice";
  EXPECT_EQ(shmlink_client_abandon(nullptr, held), 0);
  state_.release();
  Buffer out;
  for (;;) {
    shmlink_status st = shmlink_client_try_receive(c.get(), &got, out.get());
    if (st == SHMLINK_OK) break;
    ASSERT_EQ(st, SHMLINK_E_WOULD_BLOCK) << last_error();
    ASSERT_TRUE(readable(fd));
  }
  EXPECT_EQ(got, kept);
  EXPECT_EQ(out.str(), "kept");
  EXPECT_EQ(shmlink_client_in_flight(c.get()), 0u);
  ASSERT_EQ(call(c.get(), "after", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "after");
}

TEST_P(CApiLoopTest, ThreeSessionsShareOneEpoll) {
  constexpr int kSessions = 3;
  constexpr int kInFlight = 64;
  constexpr int kRounds = 20;
  std::vector<ClientPtr> clients;
  int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  std::map<std::pair<int, uint64_t>, std::string> want;
  for (int s = 0; s < kSessions; ++s) {
    clients.push_back(connect());
    int fd = -1;
    ASSERT_EQ(shmlink_client_fd(clients.back().get(), &fd), SHMLINK_OK) << last_error();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(s);
    ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
  }
  Buffer out;
  for (int round = 0; round < kRounds; ++round) {
    for (int s = 0; s < kSessions; ++s) {
      for (int k = 0; k < kInFlight; ++k) {
        std::string req = std::to_string(s) + "." + std::to_string(round) + "." + std::to_string(k);
        uint64_t id = 0;
        ASSERT_EQ(shmlink_client_send(clients[s].get(), bytes(req), req.size(), &id), SHMLINK_OK)
            << last_error();
        want[{s, id}] = req;
      }
    }
    while (!want.empty()) {
      epoll_event evs[kSessions];
      int n = epoll_wait(ep, evs, kSessions, 10'000);
      ASSERT_GT(n, 0) << "no session woke in 10 s";
      for (int i = 0; i < n; ++i) {
        int s = static_cast<int>(evs[i].data.u32);
        for (;;) {
          uint64_t id = 0;
          shmlink_status st = shmlink_client_try_receive(clients[s].get(), &id, out.get());
          if (st == SHMLINK_E_WOULD_BLOCK || st == SHMLINK_E_NOTHING_IN_FLIGHT) break;
          ASSERT_EQ(st, SHMLINK_OK) << last_error();
          auto it = want.find({s, id});
          ASSERT_NE(it, want.end()) << "session " << s << ": an answer to no call, id " << id;
          EXPECT_EQ(out.str(), it->second);
          want.erase(it);
        }
      }
    }
  }
  ::close(ep);
}

TEST_P(CApiLoopTest, TenThousandCallsInFlight) {
  ClientPtr c = connect();
  int fd = -1;
  ASSERT_EQ(shmlink_client_fd(c.get(), &fd), SHMLINK_OK) << last_error();
  constexpr int kCalls = 10'000;
  std::map<uint64_t, std::string> want;
  for (int i = 0; i < kCalls; ++i) {
    std::string req = "n" + std::to_string(i);
    uint64_t id = 0;
    // Sends wait for ring room while the server answers (the answers are
    // kept for try_receive meanwhile).
    ASSERT_EQ(shmlink_client_send(c.get(), bytes(req), req.size(), &id), SHMLINK_OK)
        << last_error();
    want[id] = req;
  }
  Buffer out;
  while (!want.empty()) {
    uint64_t id = 0;
    shmlink_status st = shmlink_client_try_receive(c.get(), &id, out.get());
    if (st == SHMLINK_E_WOULD_BLOCK) {
      ASSERT_TRUE(readable(fd)) << want.size() << " answers missing after 10 s";
      continue;
    }
    ASSERT_EQ(st, SHMLINK_OK) << last_error();
    auto it = want.find(id);
    ASSERT_NE(it, want.end()) << "an answer to no call, or twice: " << id;
    EXPECT_EQ(out.str(), it->second);
    want.erase(it);
  }
  EXPECT_EQ(shmlink_client_in_flight(c.get()), 0u);
}

// A server answered from a loop of its own: requests queued, taken when
// the descriptor of shmlink_server_start_queued is readable, answered in
// any order (here two at a time, the later first), failed or freed.
class QueuedServerTest : public ::testing::TestWithParam<Transport> {};

shmlink_status shmlink_call(shmlink_client* c, std::string_view req, Buffer& out) {
  return shmlink_client_call(c, bytes(req), req.size(), out.get());
}

TEST_P(QueuedServerTest, RequestsAreAnsweredFromTheLoop) {
  TempDir dir;
  std::string bind = bind_address(GetParam(), dir);
  const char* list[] = {bind.c_str()};
  shmlink_server* raw = nullptr;
  ASSERT_EQ(shmlink_server_bind(list, 1, nullptr, &raw), SHMLINK_OK) << last_error();
  ServerPtr server(raw);
  std::string address = shmlink_server_address(raw, 0);
  shmlink_request* none = nullptr;
  EXPECT_EQ(shmlink_server_next_request(raw, &none), SHMLINK_E_STATE) << "not started yet";
  int fd = -1;
  ASSERT_EQ(shmlink_server_start_queued(raw, &fd), SHMLINK_OK) << last_error();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(shmlink_server_next_request(raw, &none), SHMLINK_E_WOULD_BLOCK);
  EXPECT_EQ(none, nullptr);

  constexpr int kClients = 3, kCalls = 40;
  std::atomic<bool> done{false};
  std::thread loop([&] {
    std::vector<shmlink_request*> held;
    while (!done.load()) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) != 1) {
        // Nothing for a while: answer a lone held request.
        for (shmlink_request* r : held) {
          size_t len = 0;
          const uint8_t* data = shmlink_request_data(r, &len);
          EXPECT_EQ(shmlink_request_answer(r, data, len), SHMLINK_OK);
        }
        held.clear();
        continue;
      }
      shmlink_request* r = nullptr;
      while (shmlink_server_next_request(raw, &r) == SHMLINK_OK) {
        size_t len = 0;
        const uint8_t* data = shmlink_request_data(r, &len);
        std::string req(reinterpret_cast<const char*>(data), len);
        if (req == "fail") {
          EXPECT_EQ(shmlink_request_fail(r, 0x2A, "asked to fail"), SHMLINK_OK);
        } else if (req == "free") {
          shmlink_request_free(r);
        } else {
          held.push_back(r);
          if (held.size() == 2) {
            for (auto it = held.rbegin(); it != held.rend(); ++it) {
              const uint8_t* d = shmlink_request_data(*it, &len);
              EXPECT_EQ(shmlink_request_answer(*it, d, len), SHMLINK_OK);
            }
            held.clear();
          }
        }
      }
    }
    for (shmlink_request* r : held) shmlink_request_free(r);
  });
  std::vector<std::thread> callers;
  for (int k = 0; k < kClients; ++k) {
    callers.emplace_back([&, k] {
      shmlink_client* c = nullptr;
      ASSERT_EQ(shmlink_client_connect(address.c_str(), nullptr, &c), SHMLINK_OK) << last_error();
      ClientPtr client(c);
      Buffer out;
      for (int i = 0; i < kCalls; ++i) {
        std::string req = std::to_string(k) + "." + std::to_string(i);
        ASSERT_EQ(shmlink_call(c, req, out), SHMLINK_OK) << last_error();
        EXPECT_EQ(out.str(), req);
      }
      ASSERT_EQ(shmlink_call(c, "fail", out), SHMLINK_E_REMOTE);
      EXPECT_EQ(shmlink_last_remote_code(), 0x2Au);
      ASSERT_EQ(shmlink_call(c, "free", out), SHMLINK_E_REMOTE);
      EXPECT_NE(last_error().find("unanswered"), std::string::npos) << last_error();
    });
  }
  for (auto& t : callers) t.join();
  done.store(true);
  loop.join();
  // Requests nobody takes are answered with an error once the server is
  // waited for.
  shmlink_server_stop(raw);
  EXPECT_EQ(shmlink_server_wait(raw), SHMLINK_OK) << last_error();
  EXPECT_EQ(shmlink_server_next_request(raw, &none), SHMLINK_E_STATE);
  EXPECT_EQ(shmlink_request_data(nullptr, nullptr), nullptr);
  EXPECT_EQ(shmlink_request_answer(nullptr, nullptr, 0), SHMLINK_E_INVALID_ARGUMENT);
  shmlink_request_free(nullptr);
}

INSTANTIATE_TEST_SUITE_P(Transports, QueuedServerTest,
                         ::testing::Values(Transport::Shm, Transport::Unix, Transport::Tcp),
                         transport_name);

INSTANTIATE_TEST_SUITE_P(Transports, CApiLoopTest,
                         ::testing::Values(Transport::Shm, Transport::Unix, Transport::Tcp),
                         transport_name);

}  // namespace
}  // namespace shmlink_test
