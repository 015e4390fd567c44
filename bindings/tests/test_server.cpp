// A server process for the crash tests, built on shmlink.hpp.
//   test_server ADDRESS...
// Binds every address, prints "ready ADDRESS..." (real tcp ports) on stdout,
// then serves: "sleep" prints "entered" and sleeps 10 s before answering
// "slept"; anything else is echoed. SIGTERM/SIGINT stop it cleanly.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "shmlink.hpp"

namespace {

shmlink::Server* g_server = nullptr;

extern "C" void on_signal(int) {
  if (g_server != nullptr) g_server->stop();  // async-signal-safe
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ADDRESS...\n", argv[0]);
    return 2;
  }
  std::vector<std::string> addresses(argv + 1, argv + argc);
  try {
    shmlink::Server server = shmlink::Server::bind(addresses);
    g_server = &server;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);

    std::string line = "ready";
    for (const std::string& a : server.addresses()) line += " " + a;
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);

    server.serve([](std::string_view request, std::string& response) {
      if (request == "sleep") {
        std::printf("entered\n");
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::seconds(10));
        response = "slept";
        return;
      }
      response.assign(request);
    });
    g_server = nullptr;
  } catch (const shmlink::Error& e) {
    std::fprintf(stderr, "test_server: %s\n", e.what());
    return 1;
  }
  return 0;
}
