// A worker process for the worker tests, run by `shmlink pool`.
//   test_worker        the C++ wrapper: shmlink::Worker::run
//   test_worker c      the C API by hand: accept, respond, fail
// Requests: "fail" answers remote error 9; "throw" a plain exception (the
// C++ worker; kHandlerException); anything else "<mode>:<request>".
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "shmlink.hpp"

namespace {

int run_cpp() {
  shmlink::Worker w = shmlink::Worker::connect();
  w.run([](std::string_view request, std::string& response) {
    if (request == "fail") throw shmlink::HandlerError(9, "failed on purpose");
    if (request == "throw") throw std::runtime_error("a plain exception");
    response = "cpp:";
    response += request;
  });
  return 0;
}

int run_c() {
  shmlink_worker* w = nullptr;
  if (shmlink_worker_connect(nullptr, nullptr, &w) != SHMLINK_OK) {
    std::fprintf(stderr, "test_worker: %s\n", shmlink_last_error());
    return 1;
  }
  for (;;) {
    const uint8_t* request = nullptr;
    size_t len = 0;
    int stopped = 0;
    if (shmlink_worker_accept(w, &request, &len, &stopped) != SHMLINK_OK) {
      std::fprintf(stderr, "test_worker: %s\n", shmlink_last_error());
      shmlink_worker_free(w);
      return 1;
    }
    if (stopped) break;
    std::string r(reinterpret_cast<const char*>(request), len);
    shmlink_status st;
    if (r == "fail") {
      st = shmlink_worker_fail(w, 9, "failed on purpose");
    } else {
      std::string out = "c:" + r;
      st = shmlink_worker_respond(w, reinterpret_cast<const uint8_t*>(out.data()), out.size());
    }
    if (st != SHMLINK_OK) {
      std::fprintf(stderr, "test_worker: %s\n", shmlink_last_error());
      shmlink_worker_free(w);
      return 1;
    }
  }
  shmlink_worker_free(w);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return argc > 1 && std::strcmp(argv[1], "c") == 0 ? run_c() : run_cpp();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "test_worker: %s\n", e.what());
    return 1;
  }
}
