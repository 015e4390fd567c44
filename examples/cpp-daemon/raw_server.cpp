#include "raw_server.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string_view>

#include "work.hpp"

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

bool read_full(int fd, void* buf, size_t len) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = ::read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool write_full(int fd, const void* buf, size_t len) {
  const auto* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

// Serves one connection until the peer closes it (the owner closes `fd`).
void serve_connection(int fd) {
  std::string request;
  std::string out;
  for (;;) {
    unsigned char hdr[4];
    if (!read_full(fd, hdr, 4)) break;
    uint32_t len =
        uint32_t(hdr[0]) | uint32_t(hdr[1]) << 8 | uint32_t(hdr[2]) << 16 | uint32_t(hdr[3]) << 24;
    if (len > (64u << 20)) break;  // same limit as the shmlink default
    request.resize(len);
    if (len > 0 && !read_full(fd, request.data(), len)) break;
    std::string_view reply = daemon_work::handle(request);
    auto rlen = static_cast<uint32_t>(reply.size());
    out.assign({char(rlen & 0xff), char(rlen >> 8 & 0xff), char(rlen >> 16 & 0xff),
                char(rlen >> 24 & 0xff)});
    out.append(reply);
    if (!write_full(fd, out.data(), out.size())) break;
  }
}

int listen_unix(const std::string& path) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof sa.sun_path) throw std::runtime_error("socket path too long: " + path);
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket");
  ::unlink(path.c_str());  // a stale file from an earlier run
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) fail("bind " + path);
  if (::listen(fd, 128) != 0) fail("listen " + path);
  return fd;
}

int listen_tcp(const std::string& hostport) {
  auto colon = hostport.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("expected HOST:PORT: " + hostport);
  std::string host = hostport.substr(0, colon), port = hostport.substr(colon + 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    throw std::runtime_error("cannot resolve " + hostport + ": " + gai_strerror(rc));
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  bool ok = fd >= 0 && ::bind(fd, res->ai_addr, res->ai_addrlen) == 0 && ::listen(fd, 128) == 0;
  ::freeaddrinfo(res);
  if (!ok) fail("listen " + hostport);
  return fd;
}

}  // namespace

RawServer::RawServer(const std::string& address) : address_(address) {
  if (address.rfind("unix:", 0) == 0) {
    path_ = address.substr(5);
    fd_ = listen_unix(path_);
  } else if (address.rfind("tcp:", 0) == 0) {
    fd_ = listen_tcp(address.substr(4));
    // Report the port the kernel chose for port 0.
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    char host[NI_MAXHOST], port[NI_MAXSERV];
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0 &&
        ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, port, sizeof port,
                      NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      address_ = std::string("tcp:") + host + ":" + port;
    }
  } else {
    throw std::runtime_error("raw address must be unix:PATH or tcp:HOST:PORT: " + address);
  }
}

RawServer::~RawServer() {
  request_stop();
  join();
  if (fd_ >= 0) ::close(fd_);
  if (!path_.empty()) ::unlink(path_.c_str());
}

void RawServer::start() {
  acceptor_ = std::thread([this] { accept_loop(); });
}

void RawServer::request_stop() noexcept {
  stopping_.store(true);
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void RawServer::accept_loop() {
  while (!stopping_.load()) {
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      break;  // shut down
    }
    int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // fails harmlessly on unix
    reap_finished();
    std::lock_guard<std::mutex> g(mutex_);
    Connection& conn = connections_.emplace_back();
    conn.fd = c;
    conn.thread = std::thread([&conn] {
      serve_connection(conn.fd);
      conn.done.store(true);
    });
  }
}

void RawServer::reap_finished() {
  std::lock_guard<std::mutex> g(mutex_);
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->done.load()) {
      it->thread.join();
      ::close(it->fd);
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void RawServer::join() {
  if (acceptor_.joinable()) acceptor_.join();
  std::lock_guard<std::mutex> g(mutex_);
  // Wake connection threads blocked in read (the fds are still open: only
  // this object closes them).
  for (auto& c : connections_) ::shutdown(c.fd, SHUT_RDWR);
  for (auto& c : connections_) {
    c.thread.join();
    ::close(c.fd);
  }
  connections_.clear();
}
