#include "support.hpp"

#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

namespace shmlink_test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/shmlink-test-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

const char* name(Transport t) {
  switch (t) {
    case Transport::Shm:
      return "shm";
    case Transport::Unix:
      return "unix";
    case Transport::Tcp:
      return "tcp";
  }
  return "?";
}

std::string transport_name(const ::testing::TestParamInfo<Transport>& info) {
  return name(info.param);
}

std::string bind_address(Transport t, const TempDir& dir, const std::string& stem) {
  switch (t) {
    case Transport::Shm:
      return "shm:" + dir.path() + "/" + stem + ".sock";
    case Transport::Unix:
      return "unix:" + dir.path() + "/" + stem + ".sock";
    case Transport::Tcp:
      return "tcp:127.0.0.1:0";
  }
  return "";
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() >= deadline) return done();
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

bool other_threads_asleep() {
  std::string self = std::to_string(static_cast<long>(syscall(SYS_gettid)));
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    if (task.path().filename() == self) continue;
    std::ifstream stat(task.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;  // the thread ended meanwhile
    auto paren = line.rfind(')');
    if (paren == std::string::npos || paren + 2 >= line.size()) return false;
    if (line[paren + 2] != 'S') return false;
  }
  return true;
}

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed * 7 + i / 251) % 256);
  return s;
}

void ScriptState::release() {
  std::lock_guard<std::mutex> g(m_);
  open_ = true;
  cv_.notify_all();
}

void ScriptState::reset() {
  std::lock_guard<std::mutex> g(m_);
  open_ = false;
  notes = 0;
}

void ScriptState::wait_gate() {
  std::unique_lock<std::mutex> g(m_);
  ++gated;
  cv_.wait_for(g, 20s, [this] { return open_; });
  --gated;
}

namespace {

uint32_t write(shmlink_response* response, std::string_view s) {
  return shmlink_response_write(response, bytes(s), s.size()) == SHMLINK_OK ? 0 : 0xBAD;
}

// Checks the argument checks of the response functions from inside a handler.
std::string check_bad_args(shmlink_response* response) {
  if (shmlink_response_write(nullptr, bytes("x"), 1) != SHMLINK_E_INVALID_ARGUMENT)
    return "write(NULL response) was not rejected";
  if (shmlink_response_write(response, nullptr, 5) != SHMLINK_E_INVALID_ARGUMENT)
    return "write(NULL data, 5) was not rejected";
  if (shmlink_response_write(response, nullptr, 0) != SHMLINK_OK)
    return "write(NULL data, 0) failed";
  if (shmlink_response_reserve(nullptr, 4) != nullptr) return "reserve(NULL response) not NULL";
  if (shmlink_response_set_error_message(nullptr, "x") != SHMLINK_E_INVALID_ARGUMENT)
    return "set_error_message(NULL response) was not rejected";
  if (shmlink_response_set_error_message(response, nullptr) != SHMLINK_E_INVALID_ARGUMENT)
    return "set_error_message(NULL message) was not rejected";
  // A message set before returning 0 is ignored.
  if (shmlink_response_set_error_message(response, "ignored") != SHMLINK_OK)
    return "set_error_message failed";
  if (std::strlen(shmlink_last_error()) == 0) return "no last error after a failure";
  return "ok";
}

}  // namespace

uint32_t scripted_handler(void* user_data, const uint8_t* request, size_t request_len,
                          shmlink_response* response) {
  auto* state = static_cast<ScriptState*>(user_data);
  std::string_view req(reinterpret_cast<const char*>(request), request_len);
  if (req == "note") {
    ++state->notes;
    return 0;
  }
  if (req.substr(0, 5) == "fail:") {
    std::string rest(req.substr(5));
    auto colon = rest.find(':');
    uint32_t code = static_cast<uint32_t>(std::stoul(rest.substr(0, colon)));
    if (colon != std::string::npos)
      shmlink_response_set_error_message(response, rest.substr(colon + 1).c_str());
    return code;
  }
  if (req == "gate") {
    state->wait_gate();
    return write(response, "gate done");
  }
  if (req.substr(0, 5) == "size:") {
    std::size_t n = std::stoul(std::string(req.substr(5)));
    std::string p = pattern(n);
    uint8_t* at = shmlink_response_reserve(response, n);
    if (at == nullptr) return 0xBAD;
    if (n > 0) std::memcpy(at, p.data(), n);
    return 0;
  }
  if (req == "badargs") return write(response, check_bad_args(response));
  return write(response, req);
}

}  // namespace shmlink_test
