// A C++ client: N calls of 2048 bytes with the response checked, then a
// pipelined burst (many calls in flight, answers matched by id).
//
//   shmlink-cpp-client ADDRESS [N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <shmlink.hpp>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ADDRESS [N]\n", argv[0]);
    return 2;
  }
  long n = argc > 2 ? std::atol(argv[2]) : 10000;
  try {
    shmlink::ClientOptions options;
    options.timeout = std::chrono::seconds(2);
    shmlink::Client client = shmlink::Client::connect(argv[1], options);

    std::string request(2048, 'x');
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) {
      request[0] = static_cast<char>('a' + i % 26);
      std::string_view response = client.call_view(request);  // no copy, valid until next call
      if (response != std::string_view(request).substr(0, request.size() / 8)) {
        std::fprintf(stderr, "call %ld: wrong response\n", i);
        return 1;
      }
    }
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    std::printf("%ld calls in %.3f s: %.0f calls/s\n", n, took.count(), n / took.count());

    // Pipelining: send 32, then receive the 32 answers in whatever order.
    std::map<uint64_t, std::string> sent;
    for (int i = 0; i < 32; ++i) {
      std::string r(64, static_cast<char>('A' + i % 26));
      sent[client.send(r)] = r;
    }
    while (!sent.empty()) {
      auto [id, response] = client.recv();
      auto it = sent.find(id);
      if (it == sent.end() || response != it->second.substr(0, it->second.size() / 8)) {
        std::fprintf(stderr, "pipelined call %llu: wrong response\n",
                     static_cast<unsigned long long>(id));
        return 1;
      }
      sent.erase(it);
    }
    std::printf("32 pipelined calls answered\n");
  } catch (const shmlink::Error& e) {
    std::fprintf(stderr, "shmlink error (%s): %s\n", shmlink_error_string(e.code()), e.what());
    return 1;
  }
  return 0;
}
