// Shared helpers of the shmlink C and C++ API tests: temporary directories,
// transports, polling with deadlines, RAII holders for C handles, and the
// scripted handler the C API tests serve with.
#ifndef SHMLINK_TESTS_SUPPORT_HPP
#define SHMLINK_TESTS_SUPPORT_HPP

#include <gtest/gtest.h>
#include <shmlink.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace shmlink_test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

enum class Transport { Shm, Unix, Tcp };

// "shm", "unix" or "tcp" (also the gtest parameter name).
const char* name(Transport t);
std::string transport_name(const ::testing::TestParamInfo<Transport>& info);

// The address a server of transport `t` binds in `dir`: a socket file for
// shm/unix, a free port on 127.0.0.1 for tcp (read the real one back from the
// server).
std::string bind_address(Transport t, const TempDir& dir, const std::string& stem = "s");

// Polls `done` every millisecond until it is true (returns true) or
// `timeout` passed (returns false).
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = 5s);

// Whether every thread of this process but the caller is asleep (state S
// in /proc/self/task/*/stat): none is inside a lock, the allocator's
// included, at that moment.
bool other_threads_asleep();

// How long `f` took.
template <typename F>
std::chrono::milliseconds timed(F&& f) {
  auto t0 = Clock::now();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
}

struct ClientFree {
  void operator()(shmlink_client* c) const { shmlink_client_free(c); }
};
using ClientPtr = std::unique_ptr<shmlink_client, ClientFree>;

struct ServerFree {
  void operator()(shmlink_server* s) const { shmlink_server_free(s); }
};
using ServerPtr = std::unique_ptr<shmlink_server, ServerFree>;

// A library-owned buffer freed at scope exit.
struct Buffer {
  shmlink_buffer b = SHMLINK_BUFFER_INIT;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { shmlink_buffer_free(&b); }
  shmlink_buffer* get() { return &b; }
  std::string str() const {
    return b.len == 0 ? std::string() : std::string(reinterpret_cast<const char*>(b.data), b.len);
  }
};

inline const uint8_t* bytes(std::string_view s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

// A deterministic pattern of `n` bytes (different for each `seed`).
std::string pattern(std::size_t n, unsigned seed = 0);

// State of the scripted C handler (`scripted_handler`). Requests:
//   "note"             counts one-way notes, empty response
//   "fail:CODE[:MSG]"  answers with error CODE (and message MSG when given)
//   "gate"             blocks until release() (at most 20 s), answers "gate done"
//   "size:N"           answers N pattern bytes written in place (response_reserve)
//   "badargs"          checks the response functions' argument checks, answers
//                      "ok" or what went wrong
//   anything else      echoed back
class ScriptState {
 public:
  std::atomic<uint64_t> notes{0};
  std::atomic<int> gated{0};  // handlers blocked in "gate" now

  // Lets every "gate" request (now and later) finish.
  void release();

  // Closes the gate again and zeroes the counters.
  void reset();

  // Used by the handler.
  void wait_gate();

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = false;
};

uint32_t scripted_handler(void* user_data, const uint8_t* request, size_t request_len,
                          shmlink_response* response);

// The last error of this thread as a std::string.
inline std::string last_error() { return shmlink_last_error(); }

}  // namespace shmlink_test

#endif  // SHMLINK_TESTS_SUPPORT_HPP
