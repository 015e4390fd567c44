// Workers written with the C API and the C++ wrapper, run by a real
// `shmlink pool`: calls reach them, their errors reach the caller with
// their codes, and they end when the pool stops.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "shmlink.hpp"
#include "support.hpp"

extern char** environ;

namespace shmlink_test {
namespace {

// `shmlink pool` with one worker: `test_worker MODE`.
class Pool {
 public:
  Pool(const TempDir& dir, const std::string& mode) : address_("unix:" + dir.path() + "/p.sock") {
    std::vector<std::string> args = {
        SHMLINK_CLI,         "pool", "--listen",          address_, "--workers", "1", "--control",
        dir.path() + "/ctl", "--",   SHMLINK_TEST_WORKER, mode};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, SHMLINK_CLI, nullptr, nullptr, argv.data(), environ);
    if (rc != 0) throw std::runtime_error(std::string("posix_spawn shmlink: ") + std::strerror(rc));
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  ~Pool() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // A client, once the pool listens.
  shmlink::Client client() const {
    shmlink::Client c;
    EXPECT_TRUE(wait_until(
        [&] {
          shmlink::Status s;
          c = shmlink::Client::connect(address_, {}, s);
          return static_cast<bool>(s);
        },
        10s))
        << "the pool did not listen at " << address_;
    return c;
  }

  // SIGTERM, then the exit status.
  int stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  std::string address_;
  pid_t pid_ = 0;
};

void calls_reach_the_worker(const std::string& mode, const std::string& prefix) {
  TempDir dir;
  Pool pool(dir, mode);
  shmlink::Client c = pool.client();
  EXPECT_EQ(c.call("hello"), prefix + "hello");
  try {
    c.call("fail");
    ADD_FAILURE() << "a failing call succeeded";
  } catch (const shmlink::RemoteError& e) {
    EXPECT_EQ(e.remote_code(), 9u);
    EXPECT_NE(std::string(e.what()).find("failed on purpose"), std::string::npos) << e.what();
  }
  if (mode == "cpp") {
    try {
      c.call("throw");
      ADD_FAILURE() << "a throwing call succeeded";
    } catch (const shmlink::RemoteError& e) {
      EXPECT_EQ(e.remote_code(), shmlink::kHandlerException);
      EXPECT_NE(std::string(e.what()).find("a plain exception"), std::string::npos) << e.what();
    }
  }
  std::string big(3 << 20, 'x');
  EXPECT_EQ(c.call(big).size(), big.size() + prefix.size());
  EXPECT_EQ(c.call("after"), prefix + "after");
  c.close();
  EXPECT_EQ(pool.stop(), 0) << "the pool stops cleanly, its worker with it";
}

TEST(Worker, CppWrapperWorkerUnderAPool) { calls_reach_the_worker("cpp", "cpp:"); }

TEST(Worker, CApiWorkerUnderAPool) { calls_reach_the_worker("c", "c:"); }

TEST(Worker, WithoutAPoolSaysWhy) {
  unsetenv("SHMLINK_WORKER");
  shmlink_worker* w = nullptr;
  EXPECT_EQ(shmlink_worker_connect(nullptr, nullptr, &w), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(w, nullptr);
  EXPECT_NE(std::string(shmlink_last_error()).find("SHMLINK_WORKER"), std::string::npos);
  EXPECT_THROW(shmlink::Worker::connect(), shmlink::Error);
  shmlink::Worker empty;
  EXPECT_THROW(empty.accept(), shmlink::DisconnectedError);
}

}  // namespace
}  // namespace shmlink_test
