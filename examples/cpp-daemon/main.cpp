// shmlink-daemon: the example service rebuilt on shmlink. It listens on every
// address given (shm:, unix:, tcp: at once), counts the byte frequencies of
// each request and replies with its first floor(len / 8) bytes. SIGTERM or
// SIGINT stops it gracefully (calls in flight are answered).
//
//   shmlink-daemon [--wait sleep|spin|busy] [--allow-uid N]... [--allow-gid N]...
//                  [--raw-unix PATH] [--raw-tcp HOST:PORT] [--ready-file PATH]
//                  [--handover PATH] ADDRESS...
//   shmlink-daemon [options] --take-over PATH [--handover PATH]
//
// Hot upgrade: a daemon started with --handover PATH is replaced by a new
// one started with --take-over PATH (a newer build, say): the new daemon
// takes the listeners and the live sessions over, their clients
// notice nothing, and the old one exits (docs/protocol.md, "Hand-over").
// The raw listeners are not handed over.
//
// --raw-unix/--raw-tcp also serve the same work over plain sockets with
// 4-byte length framing: the baseline a hand-built client would talk to.

#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <shmlink.hpp>
#include <string>
#include <thread>
#include <vector>

#include "raw_server.hpp"
#include "work.hpp"

namespace {

// The server the signal handler stops (a lock-free atomic: signal-safe to read).
std::atomic<const shmlink::Server*> g_server{nullptr};

extern "C" void on_signal(int) {
  // Server::stop() only calls shmlink_server_stop (a flag and an eventfd
  // write): async-signal-safe. The raw listeners are stopped by main once
  // server.wait() returns.
  const shmlink::Server* server = g_server.load();
  if (server != nullptr) server->stop();
}

struct Args {
  std::vector<std::string> addresses, raw;
  shmlink::ServerOptions options;
  std::string ready_file;
  std::string take_over;  // take the daemon listening for successors there over
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "shmlink-daemon: %s\nusage: shmlink-daemon [--wait sleep|spin|busy] "
               "[--allow-uid N]... [--allow-gid N]... [--raw-unix PATH] [--raw-tcp HOST:PORT] "
               "[--ready-file PATH] [--handover PATH] ADDRESS...\n"
               "       shmlink-daemon [options] --take-over PATH [--handover PATH]\n",
               why);
  std::exit(2);
}

uint32_t number(const char* s) {
  char* end = nullptr;
  unsigned long v = std::strtoul(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v > UINT32_MAX) usage("expected a number");
  return static_cast<uint32_t>(v);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage((arg + " needs a value").c_str());
      return argv[++i];
    };
    if (arg == "--wait") {
      std::string w = value();
      if (w == "sleep")
        a.options.wait = shmlink::Wait::Sleep;
      else if (w == "spin")
        a.options.wait = shmlink::Wait::Spin;
      else if (w == "busy")
        a.options.wait = shmlink::Wait::Busy;
      else
        usage("--wait is one of sleep, spin, busy");
    } else if (arg == "--allow-uid") {
      a.options.allowed_uids.push_back(number(value()));
    } else if (arg == "--allow-gid") {
      a.options.allowed_gids.push_back(number(value()));
    } else if (arg == "--raw-unix") {
      a.raw.push_back(std::string("unix:") + value());
    } else if (arg == "--raw-tcp") {
      a.raw.push_back(std::string("tcp:") + value());
    } else if (arg == "--ready-file") {
      a.ready_file = value();
    } else if (arg == "--handover") {
      a.options.handover = value();
    } else if (arg == "--take-over") {
      a.take_over = value();
    } else if (arg.rfind("--", 0) == 0) {
      usage(("unknown option " + arg).c_str());
    } else {
      a.addresses.push_back(arg);
    }
  }
  if (a.addresses.empty() && a.take_over.empty()) usage("no address to listen on");
  if (!a.addresses.empty() && !a.take_over.empty()) {
    usage("--take-over takes its predecessor's addresses: give none");
  }
  return a;
}

// Logs sessions opening and closing. The library has no per-session event
// yet, so this polls the server's counters every 100 ms: it is approximate
// until the library offers session events (sessions opening or closing
// within one interval are reported as one line with their count, and a
// session both opened and closed in it shows as one of each).
void log_sessions(const shmlink::Server& server, const std::atomic<bool>& done) {
  shmlink_server_stats last{};
  for (;;) {
    bool finishing = done.load();  // one last look after the server stopped
    shmlink_server_stats s = server.stats();
    if (s.sessions_opened > last.sessions_opened)
      std::printf("session opened (%" PRIu64 " new, active %" PRIu64 ")\n",
                  s.sessions_opened - last.sessions_opened, s.active_sessions);
    if (s.sessions_closed > last.sessions_closed)
      std::printf("session closed (%" PRIu64 " ended, active %" PRIu64 ")\n",
                  s.sessions_closed - last.sessions_closed, s.active_sessions);
    std::fflush(stdout);
    last = s;
    if (finishing) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  try {
    // A new build takes a running daemon's listeners and live sessions
    // over (its clients notice nothing); the old one then exits.
    shmlink::Server server = args.take_over.empty()
                                 ? shmlink::Server::bind(args.addresses, args.options)
                                 : shmlink::Server::take_over(args.take_over, args.options);
    std::vector<std::unique_ptr<RawServer>> raw;
    for (const auto& a : args.raw) raw.push_back(std::make_unique<RawServer>(a));

    g_server.store(&server);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);

    server.start([](std::string_view request, std::string& response) {
      response.assign(daemon_work::handle(request));
    });
    for (auto& r : raw) r->start();

    std::string listening;
    for (const auto& a : server.addresses()) listening += " " + a;
    for (const auto& r : raw) listening += " raw:" + r->address();
    std::printf("listening on%s\n", listening.c_str());
    std::fflush(stdout);
    // The ready file's identity: a successor writes its own at the same
    // path, which this daemon then must not remove as it exits.
    struct stat ready {};
    if (!args.ready_file.empty()) {
      // Written aside then renamed: a reader never sees half a line.
      const std::string tmp = args.ready_file + ".tmp";
      std::ofstream(tmp) << listening.substr(1) << "\n";
      std::rename(tmp.c_str(), args.ready_file.c_str());
      stat(args.ready_file.c_str(), &ready);
    }

    std::atomic<bool> done{false};
    std::thread logger(log_sessions, std::cref(server), std::cref(done));
    server.wait();  // until SIGTERM/SIGINT
    for (auto& r : raw) r->request_stop();
    for (auto& r : raw) r->join();
    done.store(true);
    logger.join();
    g_server.store(nullptr);

    shmlink_server_stats s = server.stats();
    std::printf("stopped: %" PRIu64 " sessions, %" PRIu64 " calls, %" PRIu64
                " errors, byte-count checksum %016" PRIx64 "\n",
                s.sessions_opened, s.calls, s.errors, daemon_work::checksum());
    struct stat now {};
    if (!args.ready_file.empty() && stat(args.ready_file.c_str(), &now) == 0 &&
        now.st_ino == ready.st_ino && now.st_dev == ready.st_dev) {
      std::remove(args.ready_file.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shmlink-daemon: %s\n", e.what());
    return 1;
  }
}
