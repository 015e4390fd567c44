// The C API's behaviour on every transport (shm, unix, tcp): calls,
// pipelining, one-way messages, remote errors, timeouts, large and over-size
// messages, statistics, stopping, buffer reuse, clients inherited by fork().
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "c_api_fixture.hpp"

namespace shmlink_test {
namespace {

TEST_P(CApiTest, CallEchoes) {
  ClientPtr c = connect();
  ASSERT_TRUE(c);
  EXPECT_EQ(shmlink_client_is_connected(c.get()), 1);
  Buffer out;
  ASSERT_EQ(call(c.get(), "hello", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "hello");
  ASSERT_EQ(shmlink_client_call(c.get(), bytes("again"), 5, out.get()), SHMLINK_OK);
  EXPECT_EQ(out.str(), "again");
}

TEST_P(CApiTest, TransportSaysWhatTheSessionUses) {
  ClientPtr c = connect();
  ASSERT_TRUE(c);
  const uint32_t want[] = {SHMLINK_TRANSPORT_SHM, SHMLINK_TRANSPORT_UNIX, SHMLINK_TRANSPORT_TCP};
  EXPECT_EQ(shmlink_client_transport(c.get()), want[static_cast<int>(GetParam())]);
  EXPECT_EQ(shmlink_client_transport(nullptr), 0u);
  ASSERT_EQ(shmlink_client_close(c.get()), SHMLINK_OK);
  EXPECT_EQ(shmlink_client_transport(c.get()), 0u) << "closed";
}

TEST_P(CApiTest, ZeroLengthRequestGetsEmptyResponse) {
  ClientPtr c = connect();
  Buffer out;
  ASSERT_EQ(call(c.get(), "x", out), SHMLINK_OK);
  ASSERT_EQ(shmlink_client_call(c.get(), nullptr, 0, out.get()), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.b.len, 0u);
  uint64_t id = 0;
  ASSERT_EQ(shmlink_client_send(c.get(), nullptr, 0, &id), SHMLINK_OK);
  uint64_t got = 0;
  ASSERT_EQ(shmlink_client_recv(c.get(), 0, &got, out.get()), SHMLINK_OK);
  EXPECT_EQ(got, id);
  EXPECT_EQ(out.b.len, 0u);
  EXPECT_EQ(shmlink_client_notify(c.get(), nullptr, 0), SHMLINK_OK);
}

TEST_P(CApiTest, PipelinedCallsAllArriveWithTheirIds) {
  ClientPtr c = connect();
  constexpr int kCalls = 64;
  std::map<uint64_t, std::string> sent;
  for (int i = 0; i < kCalls; ++i) {
    std::string req = "p" + std::to_string(i);
    uint64_t id = 0;
    ASSERT_EQ(shmlink_client_send(c.get(), bytes(req), req.size(), &id), SHMLINK_OK)
        << last_error();
    EXPECT_TRUE(sent.emplace(id, req).second) << "duplicate id " << id;
  }
  EXPECT_EQ(shmlink_client_in_flight(c.get()), static_cast<size_t>(kCalls));
  // Responses may come in any order; each must match its own request.
  std::set<uint64_t> received;
  Buffer out;
  for (int i = 0; i < kCalls; ++i) {
    uint64_t id = 0;
    ASSERT_EQ(shmlink_client_recv(c.get(), 0, &id, out.get()), SHMLINK_OK) << last_error();
    ASSERT_EQ(sent.count(id), 1u) << "unknown id " << id;
    EXPECT_EQ(out.str(), sent[id]);
    EXPECT_TRUE(received.insert(id).second) << "id received twice: " << id;
  }
  EXPECT_EQ(shmlink_client_in_flight(c.get()), 0u);
  uint64_t id = 12345;
  EXPECT_EQ(shmlink_client_recv(c.get(), 0, &id, out.get()), SHMLINK_E_NOTHING_IN_FLIGHT);
  EXPECT_FALSE(last_error().empty());
}

TEST_P(CApiTest, CallBetweenPipelinedSendsKeepsTheirResponses) {
  ClientPtr c = connect();
  uint64_t a = 0, b = 0;
  ASSERT_EQ(shmlink_client_send(c.get(), bytes("A"), 1, &a), SHMLINK_OK);
  ASSERT_EQ(shmlink_client_send(c.get(), bytes("B"), 1, &b), SHMLINK_OK);
  Buffer out;
  ASSERT_EQ(call(c.get(), "C", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "C");
  EXPECT_EQ(shmlink_client_in_flight(c.get()), 2u);
  std::map<uint64_t, std::string> got;
  for (int i = 0; i < 2; ++i) {
    uint64_t id = 0;
    ASSERT_EQ(shmlink_client_recv(c.get(), 0, &id, out.get()), SHMLINK_OK) << last_error();
    got[id] = out.str();
  }
  EXPECT_EQ(got, (std::map<uint64_t, std::string>{{a, "A"}, {b, "B"}}));
  // The out_id pointer is optional.
  ASSERT_EQ(shmlink_client_send(c.get(), bytes("D"), 1, nullptr), SHMLINK_OK);
  ASSERT_EQ(shmlink_client_recv(c.get(), 0, nullptr, out.get()), SHMLINK_OK);
  EXPECT_EQ(out.str(), "D");
}

TEST_P(CApiTest, OneWayNotesReachTheHandler) {
  ClientPtr c = connect();
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(shmlink_client_notify(c.get(), bytes("note"), 4), SHMLINK_OK) << last_error();
  EXPECT_EQ(shmlink_client_in_flight(c.get()), 0u);
  EXPECT_TRUE(wait_until([&] { return state_.notes.load() == 10; }))
      << "notes seen: " << state_.notes.load();
  Buffer out;
  ASSERT_EQ(call(c.get(), "after notes", out), SHMLINK_OK);
  EXPECT_EQ(out.str(), "after notes");
}

TEST_P(CApiTest, RemoteErrorCarriesCodeAndMessageAndSessionSurvives) {
  ClientPtr c = connect();
  Buffer out;
  ASSERT_EQ(call(c.get(), "fail:42:bad thing happened", out), SHMLINK_E_REMOTE);
  EXPECT_EQ(shmlink_last_remote_code(), 42u);
  EXPECT_NE(last_error().find("bad thing happened"), std::string::npos) << last_error();
  EXPECT_EQ(shmlink_client_is_connected(c.get()), 1);

  ASSERT_EQ(call(c.get(), "still works", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "still works");

  // Without a message the library supplies one; the code still arrives.
  ASSERT_EQ(call(c.get(), "fail:7", out), SHMLINK_E_REMOTE);
  EXPECT_EQ(shmlink_last_remote_code(), 7u);
  EXPECT_FALSE(last_error().empty());

  // A pipelined call's remote error reports its id.
  uint64_t id = 0, got = 0;
  ASSERT_EQ(shmlink_client_send(c.get(), bytes("fail:9:piped"), 12, &id), SHMLINK_OK);
  ASSERT_EQ(shmlink_client_recv(c.get(), 0, &got, out.get()), SHMLINK_E_REMOTE);
  EXPECT_EQ(got, id);
  EXPECT_EQ(shmlink_last_remote_code(), 9u);
  EXPECT_NE(last_error().find("piped"), std::string::npos) << last_error();

  // A later failure that is not remote resets the remote code.
  ASSERT_EQ(shmlink_client_recv(c.get(), 0, &got, out.get()), SHMLINK_E_NOTHING_IN_FLIGHT);
  EXPECT_EQ(shmlink_last_remote_code(), 0u);
}

TEST_P(CApiTest, HandlerSeesResponseArgumentChecks) {
  ClientPtr c = connect();
  Buffer out;
  ASSERT_EQ(call(c.get(), "badargs", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "ok");
}

TEST_P(CApiTest, PerCallTimeoutDiscardsTheLateReply) {
  ClientPtr c = connect();
  Buffer out;
  shmlink_status st = SHMLINK_OK;
  auto took = timed([&] { st = call(c.get(), "gate", out, 100'000); });
  ASSERT_EQ(st, SHMLINK_E_TIMEOUT) << last_error();
  EXPECT_FALSE(last_error().empty());
  EXPECT_GE(took, 90ms);
  EXPECT_LT(took, 3000ms);
  EXPECT_EQ(out.b.len, 0u);
  // The handler is still busy with the timed-out call; let it answer late.
  EXPECT_TRUE(wait_until([&] { return state_.gated.load() == 1; }));
  state_.release();
  ASSERT_EQ(call(c.get(), "next", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "next") << "the late reply was returned to the next call";
  EXPECT_EQ(shmlink_client_is_connected(c.get()), 1);
  ASSERT_EQ(call(c.get(), "and next", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "and next");
}

TEST_P(CApiTest, RecvTimesOutThenStillReceives) {
  ClientPtr c = connect();
  uint64_t id = 0, got = 0;
  ASSERT_EQ(shmlink_client_send(c.get(), bytes("gate"), 4, &id), SHMLINK_OK);
  Buffer out;
  ASSERT_EQ(shmlink_client_recv(c.get(), 50'000, &got, out.get()), SHMLINK_E_TIMEOUT);
  EXPECT_EQ(shmlink_client_in_flight(c.get()), 1u);
  state_.release();
  ASSERT_EQ(shmlink_client_recv(c.get(), 0, &got, out.get()), SHMLINK_OK) << last_error();
  EXPECT_EQ(got, id);
  EXPECT_EQ(out.str(), "gate done");
}

TEST_P(CApiTest, LargeMessagesStreamThroughTheRing) {
  ClientPtr c = connect();
  constexpr size_t k4MiB = 4u << 20;  // 64 times the default ring
  std::string big = pattern(k4MiB, 3);
  Buffer out;
  ASSERT_EQ(call(c.get(), big, out), SHMLINK_OK) << last_error();
  ASSERT_EQ(out.b.len, k4MiB);
  EXPECT_TRUE(out.str() == big) << "4 MiB echo differs";
  ASSERT_EQ(call(c.get(), "size:" + std::to_string(k4MiB), out), SHMLINK_OK) << last_error();
  ASSERT_EQ(out.b.len, k4MiB);
  EXPECT_TRUE(out.str() == pattern(k4MiB)) << "4 MiB response differs";
  ASSERT_EQ(call(c.get(), "small", out), SHMLINK_OK);
  EXPECT_EQ(out.str(), "small");
}

TEST_P(CApiTest, OverSizeRequestIsRefusedAndSessionSurvives) {
  shmlink_server_options o;
  shmlink_server_options_init(&o);
  o.max_message_size = 64 * 1024;
  serve(&o);
  ClientPtr c = connect();
  std::string limit(64 * 1024, 'a'), over(64 * 1024 + 1, 'b');
  Buffer out;
  ASSERT_EQ(call(c.get(), over, out), SHMLINK_E_TOO_LARGE);
  EXPECT_NE(last_error().find("65537"), std::string::npos) << last_error();
  uint64_t id = 0;
  EXPECT_EQ(shmlink_client_send(c.get(), bytes(over), over.size(), &id), SHMLINK_E_TOO_LARGE);
  EXPECT_EQ(shmlink_client_notify(c.get(), bytes(over), over.size()), SHMLINK_E_TOO_LARGE);
  EXPECT_EQ(shmlink_client_in_flight(c.get()), 0u);
  EXPECT_EQ(shmlink_client_is_connected(c.get()), 1);
  ASSERT_EQ(call(c.get(), limit, out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.b.len, limit.size());
  ASSERT_EQ(call(c.get(), "fine", out), SHMLINK_OK);
  EXPECT_EQ(out.str(), "fine");
}

TEST_P(CApiTest, ResponseLargerThanTheClientAcceptsIsARemoteError) {
  shmlink_client_options o;
  shmlink_client_options_init(&o);
  o.max_message_size = 64 * 1024;
  ClientPtr c = connect(&o);
  Buffer out;
  ASSERT_EQ(call(c.get(), "size:65536", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.b.len, 65536u);
  ASSERT_EQ(call(c.get(), "size:65537", out), SHMLINK_E_REMOTE);
  EXPECT_EQ(shmlink_last_remote_code(), 0xFFFF0002u) << "the reserved code of docs/protocol.md";
  EXPECT_NE(last_error().find("maximum message size"), std::string::npos) << last_error();
  ASSERT_EQ(call(c.get(), "fine", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "fine");
}

TEST_P(CApiTest, StatsCountSessionsCallsAndErrors) {
  shmlink_server_stats s = stats();
  EXPECT_EQ(s.sessions_opened, 0u);
  EXPECT_EQ(s.calls, 0u);
  {
    ClientPtr c = connect();
    Buffer out;
    for (int i = 0; i < 3; ++i) ASSERT_EQ(call(c.get(), "x", out), SHMLINK_OK);
    ASSERT_EQ(call(c.get(), "fail:5:no", out), SHMLINK_E_REMOTE);
    s = stats();
    EXPECT_EQ(s.sessions_opened, 1u);
    EXPECT_EQ(s.active_sessions, 1u);
    EXPECT_EQ(s.sessions_closed, 0u);
    EXPECT_EQ(s.calls, 4u);
    EXPECT_EQ(s.errors, 1u);
    EXPECT_EQ(s.refused, 0u);
  }
  EXPECT_TRUE(wait_until([&] { return stats().active_sessions == 0; }));
  s = stats();
  EXPECT_EQ(s.sessions_closed, 1u);
  EXPECT_EQ(s.sessions_opened, 1u);
}

TEST_P(CApiTest, BufferIsReusedAcrossCalls) {
  ClientPtr c = connect();
  Buffer out;
  ASSERT_EQ(call(c.get(), "size:5000", out), SHMLINK_OK);
  ASSERT_EQ(out.b.len, 5000u);
  ASSERT_GE(out.b.capacity, 5000u);
  const uint8_t* first = out.b.data;
  size_t capacity = out.b.capacity;
  for (int i = 0; i < 5; ++i) {
    std::string req = "r" + std::to_string(i);
    ASSERT_EQ(call(c.get(), req, out), SHMLINK_OK);
    EXPECT_EQ(out.str(), req);
    EXPECT_EQ(out.b.data, first) << "the allocation was not reused";
    EXPECT_EQ(out.b.capacity, capacity);
  }
  // A buffer filled by one client may be handed to another, or freed and reused.
  ClientPtr d = connect();
  ASSERT_EQ(call(d.get(), "other client", out), SHMLINK_OK);
  EXPECT_EQ(out.str(), "other client");
  shmlink_buffer_free(out.get());
  EXPECT_EQ(out.b.data, nullptr);
  EXPECT_EQ(out.b.len, 0u);
  EXPECT_EQ(out.b.capacity, 0u);
  ASSERT_EQ(call(c.get(), "after free", out), SHMLINK_OK);
  EXPECT_EQ(out.str(), "after free");
}

TEST_P(CApiTest, ClosedClientFailsWithClosed) {
  ClientPtr c = connect();
  Buffer out;
  ASSERT_EQ(call(c.get(), "x", out), SHMLINK_OK);
  ASSERT_EQ(shmlink_client_close(c.get()), SHMLINK_OK);
  EXPECT_EQ(shmlink_client_is_connected(c.get()), 0);
  EXPECT_EQ(shmlink_client_in_flight(c.get()), 0u);
  EXPECT_EQ(call(c.get(), "x", out), SHMLINK_E_CLOSED);
  EXPECT_FALSE(last_error().empty());
  uint64_t id = 0;
  EXPECT_EQ(shmlink_client_send(c.get(), bytes("x"), 1, &id), SHMLINK_E_CLOSED);
  EXPECT_EQ(shmlink_client_recv(c.get(), 0, &id, out.get()), SHMLINK_E_CLOSED);
  EXPECT_EQ(shmlink_client_notify(c.get(), bytes("x"), 1), SHMLINK_E_CLOSED);
  EXPECT_EQ(shmlink_client_close(c.get()), SHMLINK_OK) << "closing twice must be fine";
  EXPECT_TRUE(wait_until([&] { return stats().active_sessions == 0; }));
}

TEST_P(CApiTest, PastMaxShmBytesSessionsUseTheSocketUnlessShmIsRequired) {
  shmlink_server_options so;
  shmlink_server_options_init(&so);
  so.max_shm_bytes = 135168;  // one session with 64 KiB rings (132 KiB)
  serve(&so);
  ClientPtr first = connect();
  ClientPtr second = connect();
  Buffer out;
  ASSERT_EQ(call(second.get(), "over the socket", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "over the socket");
  shmlink_client_options strict;
  shmlink_client_options_init(&strict);
  EXPECT_EQ(strict.shm_required, 0u) << "falling back is the default";
  strict.shm_required = 1;
  shmlink_client* c = nullptr;
  if (GetParam() == Transport::Shm) {
    EXPECT_EQ(shmlink_client_transport(first.get()), SHMLINK_TRANSPORT_SHM);
    EXPECT_EQ(shmlink_client_transport(second.get()), SHMLINK_TRANSPORT_UNIX);
    EXPECT_EQ(shmlink_client_connect(address_.c_str(), &strict, &c), SHMLINK_E_REFUSED);
    EXPECT_NE(std::string(last_error()).find("max_shm_bytes"), std::string::npos) << last_error();
  } else {
    // Nothing to require on a socket transport: the option changes nothing.
    ASSERT_EQ(shmlink_client_connect(address_.c_str(), &strict, &c), SHMLINK_OK) << last_error();
    shmlink_client_free(c);
  }
  strict.shm_required = 2;
  EXPECT_EQ(shmlink_client_connect(address_.c_str(), &strict, &c), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(last_error()).find("shm_required"), std::string::npos) << last_error();
  ASSERT_EQ(call(first.get(), "still", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "still");
}

TEST_P(CApiTest, IsConnectedTellsABusySessionFromADeadOne) {
  ClientPtr c = connect();
  Buffer out;
  std::thread caller([&] { EXPECT_EQ(call(c.get(), "gate", out), SHMLINK_OK) << last_error(); });
  ASSERT_TRUE(wait_until([&] { return state_.gated.load() == 1; }));
  // Another thread is inside a call: busy, not dead.
  EXPECT_EQ(shmlink_client_is_connected(c.get()), 1);
  state_.release();
  caller.join();
  EXPECT_EQ(out.str(), "gate done");
  EXPECT_EQ(shmlink_client_is_connected(c.get()), 1);
  // The server gone: dead, whether or not a call is running.
  shmlink_server_stop(server_.get());
  ASSERT_EQ(shmlink_server_wait(server_.get()), SHMLINK_OK) << last_error();
  EXPECT_TRUE(wait_until([&] { return shmlink_client_is_connected(c.get()) == 0; }));
  EXPECT_NE(call(c.get(), "x", out), SHMLINK_OK);
  EXPECT_EQ(shmlink_client_is_connected(c.get()), 0);
}

// Forks; the child releases the inherited client `c` with `release` and
// exits. Returns once the child has exited normally.
void release_in_child(ClientPtr& c, void (*release)(shmlink_client*)) {
  // The child of a multi-threaded process inherits every lock another
  // thread held at the fork; the sanitizers' allocators (before LLVM 16)
  // take none around a fork, so a server thread allocating then (the
  // segment preparer, right after a session began) leaves the child's
  // first malloc waiting forever. Fork while every server thread sleeps.
  ASSERT_TRUE(wait_until(other_threads_asleep)) << "the server's threads never all slept";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    release(c.release());
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_P(CApiTest, ForkedChildForgetsAnInheritedClientAndTheParentGoesOn) {
  ClientPtr c = connect();
  Buffer out;
  ASSERT_EQ(call(c.get(), "before", out), SHMLINK_OK);
  release_in_child(c, shmlink_client_forget);
  ASSERT_EQ(call(c.get(), "after", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "after");
  EXPECT_EQ(shmlink_client_is_connected(c.get()), 1);
  EXPECT_EQ(stats().active_sessions, 1u);
}

TEST_P(CApiTest, ForkedChildFreeingAnInheritedClientEndsTheParentsSession) {
  // Why shmlink_client_forget exists: freeing says goodbye to the server (on
  // the shared ring, or on the shared socket), and the server ends the
  // session the parent still uses.
  ClientPtr c = connect();
  Buffer out;
  ASSERT_EQ(call(c.get(), "before", out), SHMLINK_OK);
  release_in_child(c, shmlink_client_free);
  EXPECT_TRUE(wait_until([&] { return stats().active_sessions == 0; }));
  EXPECT_NE(call(c.get(), "after", out), SHMLINK_OK);
}

TEST_P(CApiTest, ANewSessionOfTheParentIsNotDisturbedByItsEndedOne) {
  // The server keeps the segment of a session ended by a goodbye for the
  // same process's next session, but only once the client closed its
  // socket. Here the child's goodbye ended the session while the parent's
  // client still holds the socket and the rings: the parent's next session
  // must get a segment of its own, or the old client's requests would land
  // in it.
  ClientPtr c = connect();
  Buffer out;
  ASSERT_EQ(call(c.get(), "before", out), SHMLINK_OK);
  release_in_child(c, shmlink_client_free);
  ASSERT_TRUE(wait_until([&] { return stats().active_sessions == 0; }));
  ClientPtr d = connect();
  for (int i = 0; i < 50; i++) {
    EXPECT_NE(call(c.get(), "old " + std::to_string(i), out), SHMLINK_OK);
    std::string want = "new " + std::to_string(i);
    ASSERT_EQ(call(d.get(), want, out), SHMLINK_OK) << last_error();
    ASSERT_EQ(out.str(), want);
  }
  EXPECT_EQ(stats().active_sessions, 1u);
}

// How many times this process maps each session segment, by inode
// (/proc/self/maps: range perms offset dev inode path).
std::map<std::string, int> session_segment_mappings() {
  std::ifstream maps("/proc/self/maps");
  std::map<std::string, int> n;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("memfd:shmlink-session") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode;
    fields >> range >> perms >> offset >> dev >> inode;
    n[inode]++;
  }
  return n;
}

TEST_P(CApiTest, AFreedShmClientsMappingIsKeptForTheNextSessionUntilReleased) {
  shmlink_release_kept_mappings();
  ClientPtr c = connect();
  Buffer out;
  ASSERT_EQ(call(c.get(), "first", out), SHMLINK_OK) << last_error();
  // The server runs in this process too: the session's segment is the one
  // mapped twice (the server's prepared segments are mapped once).
  std::string segment;
  for (const auto& [inode, count] : session_segment_mappings()) {
    if (count == 2) segment = inode;
  }
  const bool shm = GetParam() == Transport::Shm;
  EXPECT_EQ(!segment.empty(), shm) << "only an shm: session maps a segment";
  c.reset();
  ASSERT_TRUE(wait_until([&] { return stats().active_sessions == 0; }));
  // (Over unix and tcp `segment` is empty: no inode, a count of 0.)
  EXPECT_EQ(session_segment_mappings()[segment], shm ? 2 : 0) << "kept by both sides";
  ClientPtr d = connect();
  ASSERT_EQ(call(d.get(), "second", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "second");
  EXPECT_EQ(session_segment_mappings()[segment], shm ? 2 : 0) << "the kept mapping, not a third";
  d.reset();
  ASSERT_TRUE(wait_until([&] { return stats().active_sessions == 0; }));
  shmlink_release_kept_mappings();
  EXPECT_EQ(session_segment_mappings()[segment], shm ? 1 : 0) << "released: the server's alone";
  ClientPtr e = connect();
  ASSERT_EQ(call(e.get(), "third", out), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), "third");
}

TEST_P(CApiTest, StartTwiceAndWaitFollowTheStateRules) {
  EXPECT_EQ(shmlink_server_start(server_.get(), scripted_handler, &state_), SHMLINK_E_STATE);
  EXPECT_EQ(shmlink_server_serve(server_.get(), scripted_handler, &state_), SHMLINK_E_STATE);
  ClientPtr c = connect();
  Buffer out;
  ASSERT_EQ(call(c.get(), "x", out), SHMLINK_OK) << "the refused start broke the server";
  shmlink_server_stop(server_.get());
  EXPECT_EQ(shmlink_server_wait(server_.get()), SHMLINK_OK) << last_error();
  EXPECT_EQ(shmlink_server_wait(server_.get()), SHMLINK_OK) << "a stopped server waits at once";
  EXPECT_NE(call(c.get(), "x", out), SHMLINK_OK);
  EXPECT_EQ(shmlink_client_is_connected(c.get()), 0);
}

TEST_P(CApiTest, ServeStopsWhenStoppedFromAnotherThread) {
  std::string bind = bind_address(GetParam(), dir_, "served");
  const char* list[] = {bind.c_str()};
  shmlink_server* raw = nullptr;
  ASSERT_EQ(shmlink_server_bind(list, 1, nullptr, &raw), SHMLINK_OK) << last_error();
  ServerPtr server(raw);
  std::string address = shmlink_server_address(raw, 0);
  ScriptState state;
  auto serving = std::async(std::launch::async,
                            [&] { return shmlink_server_serve(raw, scripted_handler, &state); });
  shmlink_client* c = nullptr;
  ASSERT_EQ(shmlink_client_connect(address.c_str(), nullptr, &c), SHMLINK_OK) << last_error();
  ClientPtr client(c);
  Buffer out;
  ASSERT_EQ(call(c, "served", out), SHMLINK_OK);
  EXPECT_EQ(out.str(), "served");
  EXPECT_EQ(shmlink_server_wait(raw), SHMLINK_E_STATE) << "wait while serve runs elsewhere";

  shmlink_server_stop(raw);
  ASSERT_EQ(serving.wait_for(5s), std::future_status::ready) << "serve did not return";
  EXPECT_EQ(serving.get(), SHMLINK_OK);
  shmlink_status st = call(c, "after stop", out);
  EXPECT_TRUE(st == SHMLINK_E_PEER_GONE || st == SHMLINK_E_CLOSED)
      << shmlink_error_string(st) << ": " << last_error();
  if (GetParam() != Transport::Tcp) {
    EXPECT_FALSE(std::filesystem::exists(bind.substr(bind.find(':') + 1)))
        << "socket file left behind";
  }
  EXPECT_EQ(shmlink_server_serve(raw, scripted_handler, &state), SHMLINK_E_STATE);
}

TEST_P(CApiTest, StopBeforeServeReturnsAtOnce) {
  std::string bind = bind_address(GetParam(), dir_, "early");
  const char* list[] = {bind.c_str()};
  shmlink_server* raw = nullptr;
  ASSERT_EQ(shmlink_server_bind(list, 1, nullptr, &raw), SHMLINK_OK) << last_error();
  ServerPtr server(raw);
  ScriptState state;
  shmlink_server_stop(raw);
  auto serving = std::async(std::launch::async,
                            [&] { return shmlink_server_serve(raw, scripted_handler, &state); });
  ASSERT_EQ(serving.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(serving.get(), SHMLINK_OK);
}

TEST_P(CApiTest, LiveAddressIsNotTakenOver) {
  const char* list[] = {address_.c_str()};
  shmlink_server* s = reinterpret_cast<shmlink_server*>(0x1);
  EXPECT_EQ(shmlink_server_bind(list, 1, nullptr, &s), SHMLINK_E_BIND);
  EXPECT_EQ(s, nullptr);
  EXPECT_FALSE(last_error().empty());
  ClientPtr c = connect();
  Buffer out;
  ASSERT_EQ(call(c.get(), "still mine", out), SHMLINK_OK);
}

TEST_P(CApiTest, ConnectingToAMissingServerFails) {
  std::string missing;
  if (GetParam() == Transport::Tcp) {
    // A port that was free a moment ago: bind one, read it, free it.
    const char* list[] = {"tcp:127.0.0.1:0"};
    shmlink_server* s = nullptr;
    ASSERT_EQ(shmlink_server_bind(list, 1, nullptr, &s), SHMLINK_OK);
    missing = shmlink_server_address(s, 0);
    shmlink_server_free(s);
  } else {
    missing = bind_address(GetParam(), dir_, "nobody");
  }
  shmlink_client* c = reinterpret_cast<shmlink_client*>(0x1);
  EXPECT_EQ(shmlink_client_connect(missing.c_str(), nullptr, &c), SHMLINK_E_CONNECT) << missing;
  EXPECT_EQ(c, nullptr);
  EXPECT_FALSE(last_error().empty());
}

TEST_P(CApiTest, ConnectingToAServerThatIsNotServingTimesOut) {
  std::string bind = bind_address(GetParam(), dir_, "idle");
  const char* list[] = {bind.c_str()};
  shmlink_server* raw = nullptr;
  ASSERT_EQ(shmlink_server_bind(list, 1, nullptr, &raw), SHMLINK_OK) << last_error();
  ServerPtr idle(raw);  // bound (listening) but never served
  shmlink_client_options o;
  shmlink_client_options_init(&o);
  o.timeout_us = 200'000;
  shmlink_client* c = reinterpret_cast<shmlink_client*>(0x1);
  shmlink_status st = SHMLINK_OK;
  auto took = timed([&] { st = shmlink_client_connect(shmlink_server_address(raw, 0), &o, &c); });
  // A handshake that does not finish in time is a timeout, at the deadline.
  EXPECT_EQ(st, SHMLINK_E_TIMEOUT) << shmlink_error_string(st) << ": " << last_error();
  EXPECT_EQ(c, nullptr);
  EXPECT_GE(took, 150ms);
  EXPECT_LT(took, 3000ms);
}

INSTANTIATE_TEST_SUITE_P(Transports, CApiTest,
                         ::testing::Values(Transport::Shm, Transport::Unix, Transport::Tcp),
                         transport_name);

}  // namespace
}  // namespace shmlink_test
