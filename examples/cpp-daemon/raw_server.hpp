// A plain socket server speaking 4-byte little-endian length framing
// (request: u32 length + bytes; reply: u32 length + bytes), doing the same
// work as the shmlink handler. It is the baseline users would otherwise
// build: what PHP's sockets extension talks to in the comparison.
#pragma once

#include <atomic>
#include <list>
#include <mutex>
#include <string>
#include <thread>

class RawServer {
 public:
  // Listens on a Unix socket path ("unix:PATH") or "tcp:HOST:PORT"; throws
  // std::runtime_error with the reason when it cannot.
  explicit RawServer(const std::string& address);
  RawServer(const RawServer&) = delete;
  RawServer& operator=(const RawServer&) = delete;
  ~RawServer();

  // Accepts connections on a thread, one thread per connection.
  void start();
  // Async-signal-safe: shuts the listening socket down so accept returns.
  void request_stop() noexcept;
  // Joins the accept thread and every connection thread.
  void join();
  const std::string& address() const { return address_; }

 private:
  void accept_loop();
  std::string address_;
  std::string path_;  // unix socket file to remove, if any
  int fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  struct Connection {
    int fd;
    std::atomic<bool> done{false};
    std::thread thread;
  };
  void reap_finished();  // joins and closes connections whose peer left
  std::mutex mutex_;
  std::list<Connection> connections_;
};
