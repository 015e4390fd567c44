// shmlink C++17 API: a header-only RAII wrapper over the C API in shmlink.h.
//
//   shmlink::Client c = shmlink::Client::connect("shm:/run/app.sock");
//   std::string answer = c.call("hello");
//
//   shmlink::Server s = shmlink::Server::bind({"shm:/run/app.sock"});
//   s.serve([](std::string_view request, std::string& response) { response = request; });
//
// File descriptors travel with a request over shm: and unix: (Client::call
// and send with a list of descriptors; Server::serve and start with a
// handler of such requests).
//
// Large requests can be written in place into the client's arena (shm: and
// unix:): Client::loan gives a Loan to fill, Client::call(std::move(loan))
// sends it without a copy. Large responses can be read where the server lent
// them: Client::call_response gives a Response read in place.
//
// Errors are reported as shmlink::Error exceptions (code, remote code and the
// library's detail message), or as shmlink::Status values by the try_* and
// Status& variants, which never throw.
//
// Threads: a Client serves one thread at a time (it may move between
// threads). A Server is set up and served from one thread; Server::stop may
// be called from any thread and from a signal handler. Handlers run on many
// session threads at once and must be thread-safe.

#ifndef SHMLINK_HPP
#define SHMLINK_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shmlink.h"

namespace shmlink {

// How a side waits for the other (see the SHMLINK_WAIT_* constants).
enum class Wait : uint32_t {
  Default = SHMLINK_WAIT_DEFAULT,  // adaptive spin (50 µs), then sleep
  Sleep = SHMLINK_WAIT_SLEEP,      // sleep at once (lowest CPU)
  Spin = SHMLINK_WAIT_SPIN,        // spin up to spin_us, then sleep
  Busy = SHMLINK_WAIT_BUSY,        // never sleep (lowest latency)
};

// Remote error codes reserved by the library (docs/protocol.md): a handler
// that panicked (Rust servers), a response larger than the client accepts.
inline constexpr uint32_t kHandlerPanicked = SHMLINK_REMOTE_HANDLER_PANICKED;
inline constexpr uint32_t kResponseTooLarge = SHMLINK_REMOTE_RESPONSE_TOO_LARGE;
// Remote error code a caller receives when a C++ handler threw something
// other than HandlerError (the message is e.what(), or "unknown exception").
inline constexpr uint32_t kHandlerException = SHMLINK_REMOTE_HANDLER_EXCEPTION;

// Options of a client; 0 in any field means the library default.
struct ClientOptions {
  std::chrono::microseconds timeout{0};  // connect and per-call timeout (0: 5 s)
  Wait wait = Wait::Default;
  uint32_t spin_us = 0;              // spin time for Wait::Spin (0: 50 µs)
  std::size_t ring_size = 0;         // shm ring per direction, a power of two (0: 64 KiB)
  std::size_t max_message_size = 0;  // largest message sent or accepted (0: 64 MiB)
  uint64_t max_arena_bytes = 0;      // most arena mapped for loans and lent responses (0: 2 GiB)
  uint64_t arena_threshold = 0;  // calls at least this large lend (0: 64 KiB; UINT64_MAX: never)
  bool lend = true;              // false: no arena (loans fail, every request and response streams)
  bool shm_required = false;     // true: refuse to continue an shm: session over its socket
};

// Options of a server; 0 (or empty) in any field means the library default.
struct ServerOptions {
  std::vector<uint32_t> allowed_uids;    // uids allowed besides the server's own
  std::vector<uint32_t> allowed_gids;    // primary gids allowed
  uint32_t socket_mode = 0;              // permission bits of socket files (0: 0600/0660)
  std::optional<uint32_t> socket_group;  // group given the socket files
  uint32_t max_sessions = 0;             // most sessions at once (0: 4096)
  Wait wait = Wait::Default;
  uint32_t spin_us = 0;                            // spin time for Wait::Spin (0: 50 µs)
  std::size_t max_message_size = 0;                // (0: 64 MiB)
  std::chrono::microseconds handshake_timeout{0};  // time a client has for its hello (0: 2 s)
  std::chrono::microseconds send_timeout{0};  // time a response may wait for ring space (0: 5 s)
  bool accept_fds = true;        // false: requests with descriptors are refused, nothing sent
  uint64_t max_arena_bytes = 0;  // per session: client arena mapped, own lent (0: 2 GiB)
  bool accept_arena = true;      // false: no lent requests or responses (everything streams)
  uint64_t max_shm_bytes = 0;    // session segments held at once; past it, the socket (0: no limit)
  std::string handover;          // Unix socket a successor takes this server over at (empty: none)
};

// Outcome of a non-throwing operation; true when it succeeded.
struct Status {
  shmlink_status code = SHMLINK_OK;
  uint32_t remote_code = 0;  // the handler's code when code == SHMLINK_E_REMOTE
  std::string message;       // the library's detail (shmlink_last_error) on failure
  explicit operator bool() const noexcept { return code == SHMLINK_OK; }
};

// A failed operation: what() is the library's detail message, captured right
// after the failing call.
class Error : public std::runtime_error {
 public:
  Error(shmlink_status code, uint32_t remote_code, const std::string& message, uint64_t call_id = 0)
      : std::runtime_error(message), code_(code), remote_code_(remote_code), call_id_(call_id) {}

  // The status code (never SHMLINK_OK).
  shmlink_status code() const noexcept { return code_; }
  // The handler's error code for SHMLINK_E_REMOTE, else 0.
  uint32_t remote_code() const noexcept { return remote_code_; }
  // The id of the pipelined call a Client::recv error answers, else 0.
  uint64_t call_id() const noexcept { return call_id_; }

 private:
  shmlink_status code_;
  uint32_t remote_code_;
  uint64_t call_id_;
};

// The handler answered with an error (SHMLINK_E_REMOTE); remote_code() is its code.
class RemoteError : public Error {
 public:
  using Error::Error;
};

// The operation timed out (SHMLINK_E_TIMEOUT). A timed-out call's late
// response is discarded; the session stays usable unless the timeout struck
// in the middle of sending a message (is_connected() tells).
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// The session cannot be used any more: the peer is gone (SHMLINK_E_PEER_GONE),
// it was closed (SHMLINK_E_CLOSED) or the peer broke the protocol
// (SHMLINK_E_PROTOCOL). Connect again.
class DisconnectedError : public Error {
 public:
  using Error::Error;
};

// The client's arena cannot lend that much now (SHMLINK_E_ARENA_FULL): send
// or drop loans, or call with the bytes (large calls stream). The session
// goes on.
class ArenaFullError : public Error {
 public:
  using Error::Error;
};

// Thrown by a handler to answer with an error: the caller gets SHMLINK_E_REMOTE
// with this code and message. Code 0 means success to the library, so a
// HandlerError with code 0 reaches the caller as kHandlerException.
class HandlerError : public std::runtime_error {
 public:
  HandlerError(uint32_t code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  uint32_t code() const noexcept { return code_; }

 private:
  uint32_t code_;
};

namespace detail {

// The status of a failure of the wrapper itself (not of a C call).
inline Status make_status(shmlink_status code, const char* message) noexcept {
  Status s;
  s.code = code;
  try {
    s.message = message;
  } catch (...) {  // out of memory: the code alone must do
  }
  return s;
}

// The status of a C call that just returned `code`, with this thread's
// detail. Call it right after the C call, before anything else can fail.
inline Status capture(shmlink_status code) noexcept {
  if (code == SHMLINK_OK) return Status{};
  const char* detail = shmlink_last_error();
  if (detail == nullptr || *detail == '\0') detail = shmlink_error_string(code);
  Status s = make_status(code, detail);
  if (code == SHMLINK_E_REMOTE) s.remote_code = shmlink_last_remote_code();
  return s;
}

[[noreturn]] inline void raise(const Status& s, uint64_t call_id = 0) {
  switch (s.code) {
    case SHMLINK_E_REMOTE:
      throw RemoteError(s.code, s.remote_code, s.message, call_id);
    case SHMLINK_E_TIMEOUT:
      throw TimeoutError(s.code, s.remote_code, s.message, call_id);
    case SHMLINK_E_PEER_GONE:
    case SHMLINK_E_CLOSED:
    case SHMLINK_E_PROTOCOL:
      throw DisconnectedError(s.code, s.remote_code, s.message, call_id);
    case SHMLINK_E_ARENA_FULL:
      throw ArenaFullError(s.code, s.remote_code, s.message, call_id);
    default:
      throw Error(s.code, s.remote_code, s.message, call_id);
  }
}

// Throws the error of a failed C call.
inline void check(shmlink_status code) {
  if (code != SHMLINK_OK) raise(capture(code));
}

inline const uint8_t* bytes(std::string_view s) noexcept {
  return reinterpret_cast<const uint8_t*>(s.data());
}

inline std::string_view view(const shmlink_buffer& b) noexcept {
  if (b.len == 0) return {};
  return {reinterpret_cast<const char*>(b.data), b.len};
}

// Microseconds for the C API; false when the duration is negative.
inline bool micros(std::chrono::microseconds d, uint64_t& out) noexcept {
  if (d.count() < 0) return false;
  out = static_cast<uint64_t>(d.count());
  return true;
}

inline const char* const kNoClient =
    "shmlink::Client has no session: it was moved from, or its connect failed";
inline const char* const kNoServer =
    "shmlink::Server has no server: it was moved from, or its bind failed";
inline const char* const kNegativeTimeout = "shmlink: a timeout must not be negative";

// The C options of a client (Client::connect, Worker::connect); false when
// a timeout is negative.
inline bool client_options(const ClientOptions& options, shmlink_client_options& o) noexcept {
  o = shmlink_client_options{};
  if (!micros(options.timeout, o.timeout_us)) return false;
  o.wait = static_cast<uint32_t>(options.wait);
  o.spin_us = options.spin_us;
  o.ring_size = options.ring_size;
  o.max_message_size = options.max_message_size;
  o.max_arena_bytes = options.max_arena_bytes;
  o.arena_threshold = options.arena_threshold;
  o.no_arena = options.lend ? 0 : 1;
  o.shm_required = options.shm_required ? 1 : 0;
  return true;
}

// Runs `fill`, which fills a response string, for a handler trampoline:
// writes the response, or turns an exception into an error code and
// message. Never lets an exception unwind into the library.
template <typename Fill>
uint32_t respond(shmlink_response* response, Fill&& fill) noexcept {
  const char* message = "unknown exception";
  try {
    // One reusable response string per session thread: no allocation per
    // call once it has grown to the usual response size.
    thread_local std::string out;
    out.clear();
    fill(out);
    shmlink_status st = shmlink_response_write(response, bytes(out), out.size());
    // Do not keep a huge buffer per thread after an unusually large response.
    if (out.capacity() > (std::size_t{1} << 20)) std::string().swap(out);
    if (st == SHMLINK_OK) return 0;
    message = "shmlink: the response could not be written";
  } catch (const HandlerError& e) {
    shmlink_response_set_error_message(response, e.what());
    return e.code() != 0 ? e.code() : kHandlerException;
  } catch (const std::exception& e) {
    shmlink_response_set_error_message(response, e.what());
    return kHandlerException;
  } catch (...) {
  }
  shmlink_response_set_error_message(response, message);
  return kHandlerException;
}

inline std::string_view text(const uint8_t* data, size_t len) noexcept {
  return std::string_view(reinterpret_cast<const char*>(data), len);
}

// The handler trampoline: runs the C++ handler.
inline uint32_t handle(void* user_data, const uint8_t* request, size_t request_len,
                       shmlink_response* response) noexcept {
  return respond(response, [&](std::string& out) {
    const auto& handler =
        *static_cast<const std::function<void(std::string_view, std::string&)>*>(user_data);
    handler(text(request, request_len), out);
  });
}

// The trampoline of requests with descriptors. The handler gets them as a
// vector; the entries it changes (to -1) or removes are the ones it keeps,
// marked -1 in the library's array whether it returns or throws; the library
// closes the others.
inline uint32_t handle_fds(void* user_data, const uint8_t* request, size_t request_len, int* fds,
                           size_t nfds, shmlink_response* response) noexcept {
  return respond(response, [&](std::string& out) {
    const auto& handler =
        *static_cast<const std::function<void(std::string_view, std::vector<int>&, std::string&)>*>(
            user_data);
    std::vector<int> list(fds, fds + nfds);
    struct Kept {
      const std::vector<int>& list;
      int* fds;
      size_t nfds;
      ~Kept() {
        for (size_t i = 0; i < nfds; ++i)
          if (i >= list.size() || list[i] != fds[i]) fds[i] = -1;
      }
    } kept{list, fds, nfds};
    handler(text(request, request_len), list, out);
  });
}

}  // namespace detail

namespace detail {

// A library handle with the bytes it holds (Loan, Response): move-only; the
// destructor frees the handle with Free.
template <typename Handle, typename Byte, typename Free>
class Held {
 public:
  Held() noexcept = default;
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
  Held(Held&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  Held& operator=(Held&& other) noexcept {
    if (this != &other) {
      Free()(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~Held() { Free()(handle_); }

  // The bytes (nullptr when empty or moved from).
  Byte* data() noexcept { return data_; }
  const Byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  Byte* begin() noexcept { return data_; }
  Byte* end() noexcept { return data_ + size_; }
  const Byte* begin() const noexcept { return data_; }
  const Byte* end() const noexcept { return data_ + size_; }

  // True when it holds a handle (not moved from, not sent or released).
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  // The C handle, still owned by this object.
  Handle* native_handle() const noexcept { return handle_; }

  // Gives up the C handle: the caller owns it; this object is empty afterwards.
  Handle* release() noexcept {
    data_ = nullptr;
    size_ = 0;
    return std::exchange(handle_, nullptr);
  }

 protected:
  Held(Handle* handle, Byte* data, std::size_t size) noexcept
      : handle_(handle), data_(data), size_(size) {}

 private:
  Handle* handle_ = nullptr;
  Byte* data_ = nullptr;
  std::size_t size_ = 0;
};

struct LoanFree {
  void operator()(shmlink_loan* l) const noexcept { shmlink_loan_free(l); }
};

struct ViewFree {
  void operator()(shmlink_view* v) const noexcept { shmlink_view_free(v); }
};

}  // namespace detail

// A buffer of a client's arena lent for one request (Client::loan): fill
// data()[0..size()) in place, then send it with Client::call(std::move(loan)).
// Move-only; the destructor gives an unsent loan back to the arena. It keeps
// its memory mapped by itself, so it may outlive its Client (it can no
// longer be sent then). One thread at a time. release() hands the C handle
// over (to shmlink_client_call_loan or shmlink_loan_free).
class Loan : public detail::Held<shmlink_loan, uint8_t, detail::LoanFree> {
 public:
  // An empty loan (no buffer).
  Loan() noexcept = default;

  // Copies `bytes` into the loan at `offset` (shmlink_loan_write): from
  // 12 MiB on, past the caches, as Client::call copies large requests.
  // Throws shmlink::Error (invalid argument) when they would pass size().
  void write(std::size_t offset, std::string_view bytes) {
    detail::check(shmlink_loan_write(native_handle(), offset,
                                     reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }

 private:
  friend class Client;
  Loan(shmlink_loan* handle, uint8_t* data, std::size_t size) noexcept : Held(handle, data, size) {}
};

// A response read where it arrived (Client::call_response): a large
// response the server lent from its arena (shm: and unix:, at least the
// server's arena threshold, 64 KiB by default) is read in place, without a
// copy (is_lent()); any other lies in a buffer of its own. Move-only; the
// destructor frees it, which gives a lent one back to the server (with the
// client's next message). It keeps its memory mapped by itself, so it stays
// valid across later calls and may outlive its Client. Each lent response
// held keeps its room of the server's arena: do not hoard them. The bytes of
// a lent response are volatile (a server breaking the protocol could change
// them while they are read): copy them out (str()) for a stable value.
// release() hands the C handle over (to shmlink_view_free).
class Response : public detail::Held<shmlink_view, const uint8_t, detail::ViewFree> {
 public:
  // An empty response (no handle).
  Response() noexcept = default;

  // The bytes as text (a view, valid while this response is).
  std::string_view view() const noexcept { return detail::text(data(), size()); }
  // A copy of the bytes.
  std::string str() const { return std::string(view()); }
  bool empty() const noexcept { return size() == 0; }

  // True when the bytes lie in the server's arena (read in place).
  bool is_lent() const noexcept { return shmlink_view_is_lent(native_handle()) == 1; }

 private:
  friend class Client;
  Response(shmlink_view* handle, const uint8_t* data, std::size_t size) noexcept
      : Held(handle, data, size) {}
};

// Unmaps the segments this process keeps mapped for later sessions (a
// client keeps the mapping of an shm: session it ended, at most 8 of at most
// 4 MiB each for 2 s, and uses it again when the server gives the same
// segment back). For a process done with its sessions that wants the memory
// back at once; sessions in use are not affected.
inline void release_kept_mappings() noexcept { shmlink_release_kept_mappings(); }

// A session with a server. Move-only; the destructor ends the session.
// Thread-safety: one thread at a time (the library reports concurrent use as
// SHMLINK_E_INVALID_ARGUMENT); moving it to another thread is fine.
class Client {
 public:
  // An empty client (no session): calls throw Error(SHMLINK_E_CLOSED).
  Client() noexcept = default;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  // The session moves; `other` becomes empty.
  Client(Client&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)),
        buffer_(std::exchange(other.buffer_, shmlink_buffer{})) {}
  Client& operator=(Client&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
      buffer_ = std::exchange(other.buffer_, shmlink_buffer{});
    }
    return *this;
  }
  // Ends the session (the server is told goodbye) and frees everything.
  ~Client() { reset(); }

  // Connects to `address` (shm:PATH, unix:PATH or tcp:HOST:PORT) and performs
  // the handshake; the returned Client owns the session. `address` and
  // `options` are read during the call only. Throws Error. Thread-safe.
  static Client connect(std::string_view address, const ClientOptions& options = {}) {
    Status s;
    Client c = connect(address, options, s);
    if (!s) detail::raise(s);
    return c;
  }

  // As above without throwing: on failure `status` holds the error and the
  // returned client is empty.
  static Client connect(std::string_view address, const ClientOptions& options,
                        Status& status) noexcept {
    status = Status{};
    shmlink_client_options o{};
    if (!detail::client_options(options, o)) {
      status = detail::make_status(SHMLINK_E_INVALID_ARGUMENT, detail::kNegativeTimeout);
      return Client();
    }
    if (address.find('\0') != std::string_view::npos) {
      status = detail::make_status(SHMLINK_E_INVALID_ADDRESS,
                                   "shmlink: the address contains a NUL byte");
      return Client();
    }
    std::string text;
    try {
      text.assign(address.data(), address.size());
    } catch (...) {
      status = detail::make_status(SHMLINK_E_INTERNAL, "shmlink: out of memory");
      return Client();
    }
    shmlink_client* handle = nullptr;
    shmlink_status code = shmlink_client_connect(text.c_str(), &o, &handle);
    if (code != SHMLINK_OK) {
      status = detail::capture(code);
      return Client();
    }
    return Client(handle);
  }

  // Calls with the client's default timeout and returns the response (a
  // copy the caller owns). Throws Error (RemoteError when the handler failed).
  // `request` is read during the call only.
  std::string call(std::string_view request) { return call(request, std::chrono::microseconds{0}); }

  // Calls with `timeout` (0: the client's default). A response arriving after
  // the timeout is discarded, never returned to a later call.
  std::string call(std::string_view request, std::chrono::microseconds timeout) {
    return std::string(call_view(request, timeout));
  }

  // Calls with file descriptors that go with the request (shm: and unix:
  // sessions, at most SHMLINK_MAX_FDS). The handler receives duplicates:
  // `fds` stay the caller's, open. Throws Error: SHMLINK_E_UNSUPPORTED over
  // tcp:, SHMLINK_E_INVALID_ARGUMENT for too many descriptors, one that is
  // not open, or a server that refuses them (nothing sent, session usable).
  std::string call(std::string_view request, const std::vector<int>& fds,
                   std::chrono::microseconds timeout = std::chrono::microseconds{0}) {
    return std::string(call_view(request, fds.data(), fds.size(), timeout));
  }

  // Calls without allocating once warmed up: the view points into a buffer
  // owned by this client and stays valid until the next call, send, recv,
  // close, move or destruction of this client.
  std::string_view call_view(std::string_view request,
                             std::chrono::microseconds timeout = std::chrono::microseconds{0}) {
    return call_view(request, nullptr, 0, timeout);
  }

  // Non-throwing call: on success `response` holds the response (its
  // capacity is reused); on failure it is left empty.
  Status try_call(std::string_view request, std::string& response,
                  std::chrono::microseconds timeout = std::chrono::microseconds{0}) noexcept {
    return try_call(request, nullptr, 0, response, timeout);
  }

  // Non-throwing call with file descriptors (as call with `fds`).
  Status try_call(std::string_view request, const std::vector<int>& fds, std::string& response,
                  std::chrono::microseconds timeout = std::chrono::microseconds{0}) noexcept {
    return try_call(request, fds.data(), fds.size(), response, timeout);
  }

  // Lends `size` bytes of this client's arena to fill in place (shm: and
  // unix:, to a server that takes lent requests). Throws ArenaFullError when
  // the arena cannot hold them now; Error with SHMLINK_E_INVALID_ARGUMENT
  // when the server takes no lent requests (or ClientOptions::lend is
  // false), SHMLINK_E_UNSUPPORTED over tcp:. The session goes on.
  Loan loan(std::size_t size) {
    Loan out;
    Status s = try_loan(size, out);
    if (!s) detail::raise(s);
    return out;
  }

  // Non-throwing loan: on success `out` holds the loan (an unsent loan it
  // held before is given back first); on failure it is empty.
  Status try_loan(std::size_t size, Loan& out) noexcept {
    out = Loan();
    if (handle_ == nullptr) return detail::make_status(SHMLINK_E_CLOSED, detail::kNoClient);
    shmlink_loan* handle = nullptr;
    uint8_t* data = nullptr;
    Status s = detail::capture(shmlink_client_loan(handle_, size, &handle, &data));
    if (s) out = Loan(handle, data, size);
    return s;
  }

  // Calls with a filled loan of this client, as call(request, timeout). The
  // loan is consumed whatever the outcome (sent, or given back to the arena
  // when the call fails): `loan` is empty afterwards.
  std::string call(Loan&& loan, std::chrono::microseconds timeout = std::chrono::microseconds{0}) {
    Loan taken(std::move(loan));
    uint64_t us = 0;
    if (!detail::micros(timeout, us)) raise_negative_timeout();
    require();
    detail::check(shmlink_client_call_loan_timeout(handle_, taken.release(), us, &buffer_));
    return std::string(detail::view(buffer_));
  }

  // Non-throwing call with a loan (consumed whatever the outcome, as above).
  Status try_call(Loan&& loan, std::string& response,
                  std::chrono::microseconds timeout = std::chrono::microseconds{0}) noexcept {
    Loan taken(std::move(loan));
    response.clear();
    uint64_t us = 0;
    if (!detail::micros(timeout, us))
      return detail::make_status(SHMLINK_E_INVALID_ARGUMENT, detail::kNegativeTimeout);
    if (handle_ == nullptr) return detail::make_status(SHMLINK_E_CLOSED, detail::kNoClient);
    Status s =
        detail::capture(shmlink_client_call_loan_timeout(handle_, taken.release(), us, &buffer_));
    if (s) return copy_out(response);
    return s;
  }

  // Calls with the client's default timeout and returns the response where
  // it arrived: a large response the server lent from its arena is read in
  // place, without a copy (Response::is_lent); any other comes in a buffer of
  // its own. The Response stays valid across later calls and after this
  // client is gone. Throws as call(request).
  Response call_response(std::string_view request) {
    return call_response(request, std::chrono::microseconds{0});
  }

  // call_response with `timeout` (0: the client's default), as call(request, timeout).
  Response call_response(std::string_view request, std::chrono::microseconds timeout) {
    Response out;
    Status s = try_call_response(request, out, timeout);
    if (!s) detail::raise(s);
    return out;
  }

  // Non-throwing call_response: on success `response` holds the response
  // (one it held before is freed first); on failure it is empty.
  Status try_call_response(std::string_view request, Response& response,
                           std::chrono::microseconds timeout = std::chrono::microseconds{
                               0}) noexcept {
    response = Response();
    uint64_t us = 0;
    if (!detail::micros(timeout, us))
      return detail::make_status(SHMLINK_E_INVALID_ARGUMENT, detail::kNegativeTimeout);
    if (handle_ == nullptr) return detail::make_status(SHMLINK_E_CLOSED, detail::kNoClient);
    shmlink_view* view = nullptr;
    const uint8_t* data = nullptr;
    std::size_t len = 0;
    Status s = detail::capture(shmlink_client_call_response_timeout(
        handle_, detail::bytes(request), request.size(), us, &view, &data, &len));
    if (s) response = Response(view, data, len);
    return s;
  }

  // Bytes of arena this client maps for its loans (0 for an empty or closed
  // client, and while another thread is in a call on it).
  uint64_t arena_bytes() const noexcept { return shmlink_client_arena_bytes(handle_); }

  // Sends a request without waiting (pipelining); returns its call id, which
  // recv reports with the response. Throws Error.
  uint64_t send(std::string_view request) { return send(request, nullptr, 0); }

  // Sends a request with file descriptors without waiting (as call with
  // `fds`); returns its call id. Throws Error.
  uint64_t send(std::string_view request, const std::vector<int>& fds) {
    return send(request, fds.data(), fds.size());
  }

  // Non-throwing send; `id` receives the call id on success.
  Status try_send(std::string_view request, uint64_t& id) noexcept {
    if (handle_ == nullptr) return detail::make_status(SHMLINK_E_CLOSED, detail::kNoClient);
    return detail::capture(
        shmlink_client_send(handle_, detail::bytes(request), request.size(), &id));
  }

  // Receives the next pipelined response in arrival order, waiting up to
  // `timeout` (0: the client's default): {call id, response}. A handler's
  // error throws RemoteError whose call_id() names the call.
  // SHMLINK_E_NOTHING_IN_FLIGHT when nothing was sent.
  std::pair<uint64_t, std::string> recv(std::chrono::microseconds timeout = {}) {
    uint64_t us = 0;
    if (!detail::micros(timeout, us)) raise_negative_timeout();
    require();
    uint64_t id = 0;
    shmlink_status code = shmlink_client_recv(handle_, us, &id, &buffer_);
    if (code != SHMLINK_OK) detail::raise(detail::capture(code), id);
    return {id, std::string(detail::view(buffer_))};
  }

  // Non-throwing recv: `id` receives the call id (also on SHMLINK_E_REMOTE),
  // `response` the response (empty on failure).
  Status try_recv(uint64_t& id, std::string& response,
                  std::chrono::microseconds timeout = {}) noexcept {
    response.clear();
    uint64_t us = 0;
    if (!detail::micros(timeout, us))
      return detail::make_status(SHMLINK_E_INVALID_ARGUMENT, detail::kNegativeTimeout);
    if (handle_ == nullptr) return detail::make_status(SHMLINK_E_CLOSED, detail::kNoClient);
    Status s = detail::capture(shmlink_client_recv(handle_, us, &id, &buffer_));
    if (s) return copy_out(response);
    return s;
  }

  // The descriptor an event loop (epoll, poll, asio, libuv) watches: it
  // becomes readable when an answer has begun to arrive after try_receive
  // returned nothing, or when the session ends. The client's own: watch it,
  // never read or close it. Throws Error (SHMLINK_E_INVALID_ARGUMENT over shm:
  // with a server of an older build).
  int fd() {
    require();
    int out = -1;
    detail::check(shmlink_client_fd(handle_, &out));
    return out;
  }

  // The next pipelined answer if one has arrived, never waiting for one to
  // begin: {call id, response}, or nothing (fd() then becomes readable when
  // one does). A handler's error throws RemoteError naming the call.
  std::optional<std::pair<uint64_t, std::string>> try_receive() {
    require();
    uint64_t id = 0;
    shmlink_status code = shmlink_client_try_receive(handle_, &id, &buffer_);
    if (code == SHMLINK_E_WOULD_BLOCK) return std::nullopt;
    if (code != SHMLINK_OK) detail::raise(detail::capture(code), id);
    return std::make_pair(id, std::string(detail::view(buffer_)));
  }

  // Gives up on a sent call: its answer is dropped when it comes. False
  // when it was not in flight.
  bool abandon(uint64_t id) noexcept { return shmlink_client_abandon(handle_, id) == 1; }

  // Sends a one-way message: no response, no id. Throws Error.
  void notify(std::string_view message) {
    require();
    detail::check(shmlink_client_notify(handle_, detail::bytes(message), message.size()));
  }

  // Non-throwing notify.
  Status try_notify(std::string_view message) noexcept {
    if (handle_ == nullptr) return detail::make_status(SHMLINK_E_CLOSED, detail::kNoClient);
    return detail::capture(shmlink_client_notify(handle_, detail::bytes(message), message.size()));
  }

  // True when the session is usable and the server alive (non-blocking;
  // false while another thread is inside a call on this client).
  bool is_connected() const noexcept { return shmlink_client_is_connected(handle_) == 1; }

  // Calls sent and not yet received (0 for an empty or closed client).
  std::size_t in_flight() const noexcept { return shmlink_client_in_flight(handle_); }

  // Ends the session; later calls throw Error(SHMLINK_E_CLOSED). Closing
  // twice, or closing an empty client, is fine.
  void close() noexcept {
    if (handle_ != nullptr) shmlink_client_close(handle_);
  }

  // In the child of a fork(), releases a client inherited from the parent
  // without telling the server anything, so the parent's session goes on
  // (destroying it there would end that session). The client is empty
  // afterwards.
  void forget_inherited() noexcept {
    shmlink_client_forget(std::exchange(handle_, nullptr));
    shmlink_buffer_free(&buffer_);
  }

  // True when the client holds a session handle (even a closed one).
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  // The C handle, still owned by this client.
  shmlink_client* native_handle() const noexcept { return handle_; }

 private:
  explicit Client(shmlink_client* handle) noexcept : handle_(handle) {}

  void reset() noexcept {
    shmlink_client_free(handle_);
    shmlink_buffer_free(&buffer_);
    handle_ = nullptr;
  }

  void require() const {
    if (handle_ == nullptr) throw DisconnectedError(SHMLINK_E_CLOSED, 0, detail::kNoClient);
  }

  std::string_view call_view(std::string_view request, const int* fds, std::size_t nfds,
                             std::chrono::microseconds timeout) {
    uint64_t us = 0;
    if (!detail::micros(timeout, us)) raise_negative_timeout();
    require();
    detail::check(shmlink_client_call_fds_timeout(handle_, detail::bytes(request), request.size(),
                                                  fds, nfds, us, &buffer_));
    return detail::view(buffer_);
  }

  Status try_call(std::string_view request, const int* fds, std::size_t nfds, std::string& response,
                  std::chrono::microseconds timeout) noexcept {
    response.clear();
    uint64_t us = 0;
    if (!detail::micros(timeout, us))
      return detail::make_status(SHMLINK_E_INVALID_ARGUMENT, detail::kNegativeTimeout);
    if (handle_ == nullptr) return detail::make_status(SHMLINK_E_CLOSED, detail::kNoClient);
    Status s = detail::capture(shmlink_client_call_fds_timeout(
        handle_, detail::bytes(request), request.size(), fds, nfds, us, &buffer_));
    if (s) return copy_out(response);
    return s;
  }

  uint64_t send(std::string_view request, const int* fds, std::size_t nfds) {
    require();
    uint64_t id = 0;
    detail::check(
        shmlink_client_send_fds(handle_, detail::bytes(request), request.size(), fds, nfds, &id));
    return id;
  }

  [[noreturn]] static void raise_negative_timeout() {
    throw Error(SHMLINK_E_INVALID_ARGUMENT, 0, detail::kNegativeTimeout);
  }

  Status copy_out(std::string& response) noexcept {
    try {
      response.assign(detail::view(buffer_));
      return Status{};
    } catch (...) {
      return detail::make_status(SHMLINK_E_INTERNAL, "shmlink: out of memory copying the response");
    }
  }

  shmlink_client* handle_ = nullptr;
  shmlink_buffer buffer_ = SHMLINK_BUFFER_INIT;
};

// A worker of `shmlink pool`: answers the calls its pool hands it on the
// calling thread, waiting on its ring directly. Move-only; the destructor
// ends the session (the pool is told goodbye). One thread at a time.
class Worker {
 public:
  // An empty worker: operations throw Error(SHMLINK_E_CLOSED).
  Worker() noexcept = default;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  Worker(Worker&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Worker& operator=(Worker&& other) noexcept {
    if (this != &other) {
      shmlink_worker_free(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  ~Worker() { shmlink_worker_free(handle_); }

  // Connects to the pool at `address`, or, when empty, at the address in
  // the environment variable SHMLINK_WORKER (which the pool sets). Throws Error.
  static Worker connect(std::string_view address = {}, const ClientOptions& options = {}) {
    shmlink_client_options o{};
    if (!detail::client_options(options, o)) {
      throw Error(SHMLINK_E_INVALID_ARGUMENT, 0, detail::kNegativeTimeout);
    }
    std::string text(address);
    if (text.find('\0') != std::string::npos) {
      throw Error(SHMLINK_E_INVALID_ADDRESS, 0, "shmlink: the address contains a NUL byte");
    }
    shmlink_worker* handle = nullptr;
    detail::check(shmlink_worker_connect(address.empty() ? nullptr : text.c_str(), &o, &handle));
    Worker w;
    w.handle_ = handle;
    return w;
  }

  // The next call's request (valid until the next call on this worker), or
  // nothing when the pool told this worker to stop. Throws Error.
  std::optional<std::string_view> accept() {
    require();
    const uint8_t* request = nullptr;
    std::size_t len = 0;
    int stopped = 0;
    detail::check(shmlink_worker_accept(handle_, &request, &len, &stopped));
    if (stopped != 0) return std::nullopt;
    if (len == 0) return std::string_view();
    return std::string_view(reinterpret_cast<const char*>(request), len);
  }

  // Answers the call accepted last. Throws Error.
  void respond(std::string_view response) {
    require();
    detail::check(shmlink_worker_respond(handle_, detail::bytes(response), response.size()));
  }

  // Answers the call accepted last with an error: the caller receives a
  // remote error with `code` and `message`. Throws Error.
  void fail(uint32_t code, const std::string& message) {
    require();
    detail::check(shmlink_worker_fail(handle_, code, message.c_str()));
  }

  // Streams the answer to the HTTP request accepted last: `head` is an
  // encoded HTTP response (status, headers, first bytes), sent at once;
  // write() sends more, end() ends it. Throws Error (the client gone:
  // the request is over).
  void stream_begin(std::string_view head) {
    require();
    detail::check(shmlink_worker_stream_begin(handle_, detail::bytes(head), head.size()));
  }
  void write(std::string_view data) {
    require();
    detail::check(shmlink_worker_stream_write(handle_, detail::bytes(data), data.size()));
  }
  void end() {
    require();
    detail::check(shmlink_worker_stream_end(handle_));
  }

  // Answers calls with `handler` until the pool tells this worker to stop.
  // A HandlerError answers with its code and message, another exception with
  // kHandlerException and its what(). Throws Error when the session fails.
  void run(const std::function<void(std::string_view request, std::string& response)>& handler) {
    std::string response;
    while (std::optional<std::string_view> request = accept()) {
      response.clear();
      try {
        handler(*request, response);
      } catch (const HandlerError& e) {
        fail(e.code() != 0 ? e.code() : kHandlerException, e.what());
        continue;
      } catch (const std::exception& e) {
        fail(kHandlerException, e.what());
        continue;
      }
      respond(response);
    }
  }

  // True when the worker holds a session handle.
  explicit operator bool() const noexcept { return handle_ != nullptr; }

 private:
  void require() const {
    if (handle_ == nullptr) {
      throw DisconnectedError(SHMLINK_E_CLOSED, 0, "shmlink::Worker has no session");
    }
  }

  shmlink_worker* handle_ = nullptr;
};

// A server bound to one or more addresses. Move-only; the destructor stops it
// (joining a started one) and removes its socket files.
// Thread-safety: bind/serve/start/wait from one thread; stop, stats and
// addresses from any thread (stop also from a signal handler).
class Server {
 public:
  // Fills `response` for `request`; throw HandlerError to answer with an
  // error. Called from many session threads at once: must be thread-safe.
  using Handler = std::function<void(std::string_view request, std::string& response)>;

  // Fills `response` for a request that came with file descriptors (open in
  // this process, in the order sent). The handler keeps a descriptor by
  // setting its entry to -1 (or removing it) and closes it itself later;
  // the library closes the others after the handler returns or throws.
  // Thread-safe, as Handler.
  using FdHandler =
      std::function<void(std::string_view request, std::vector<int>& fds, std::string& response)>;

  // An empty server: operations throw Error(SHMLINK_E_INVALID_ARGUMENT).
  Server() noexcept = default;
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  Server(Server&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)),
        handler_(std::move(other.handler_)),
        fd_handler_(std::move(other.fd_handler_)) {}
  Server& operator=(Server&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
      handler_ = std::move(other.handler_);
      fd_handler_ = std::move(other.fd_handler_);
    }
    return *this;
  }
  // Stops the server and waits for a started one. A serve() running on
  // another thread must have returned before the Server is destroyed.
  ~Server() { reset(); }

  // Binds every address (shm:, unix:, tcp: in any mix; tcp:HOST:0 picks a
  // free port); the returned Server owns the listeners. `addresses` and
  // `options` are read during the call only. Throws Error. Thread-safe.
  static Server bind(const std::vector<std::string>& addresses, const ServerOptions& options = {}) {
    Status s;
    Server server = bind(addresses, options, s);
    if (!s) detail::raise(s);
    return server;
  }

  // As above without throwing: on failure `status` holds the error and the
  // returned server is empty.
  static Server bind(const std::vector<std::string>& addresses, const ServerOptions& options,
                     Status& status) noexcept {
    status = Status{};
    shmlink_server_options o{};
    if (!options_for(options, o, status)) return Server();
    std::vector<const char*> list;
    try {
      list.reserve(addresses.size());
    } catch (...) {
      status = detail::make_status(SHMLINK_E_INTERNAL, "shmlink: out of memory");
      return Server();
    }
    for (const std::string& a : addresses) {
      if (a.find('\0') != std::string::npos) {
        status = detail::make_status(SHMLINK_E_INVALID_ADDRESS,
                                     "shmlink: an address contains a NUL byte");
        return Server();
      }
      list.push_back(a.c_str());
    }
    shmlink_server* handle = nullptr;
    shmlink_status code = shmlink_server_bind(list.data(), list.size(), &o, &handle);
    if (code != SHMLINK_OK) {
      status = detail::capture(code);
      return Server();
    }
    return Server(handle);
  }

  // Takes over the server listening for successors at `handover` (its
  // ServerOptions::handover): its listeners and live sessions come to
  // the returned Server and go on once it serves; their clients notice
  // nothing. The old server answers the calls it had begun, then stops.
  // With options.handover set, this server listens there for a successor
  // of its own. Throws Error (SHMLINK_E_BIND, saying why; the old server
  // then serves on).
  static Server take_over(const std::string& handover, const ServerOptions& options = {}) {
    Status s;
    Server server = take_over(handover, options, s);
    if (!s) detail::raise(s);
    return server;
  }

  // As above without throwing.
  static Server take_over(const std::string& handover, const ServerOptions& options,
                          Status& status) noexcept {
    status = Status{};
    shmlink_server_options o{};
    if (!options_for(options, o, status)) return Server();
    if (handover.find('\0') != std::string::npos) {
      status = detail::make_status(SHMLINK_E_INVALID_ARGUMENT,
                                   "shmlink: the hand-over path contains a NUL byte");
      return Server();
    }
    shmlink_server* handle = nullptr;
    shmlink_status code = shmlink_server_take_over(handover.c_str(), &o, &handle);
    if (code != SHMLINK_OK) {
      status = detail::capture(code);
      return Server();
    }
    return Server(handle);
  }

  // Serves on the calling thread until stop(): requests already received are
  // answered, sessions closed, socket files removed, then it returns. Once
  // per server; the server keeps the handler until it is destroyed. Throws
  // Error. Call from one thread; stop() from any.
  void serve(Handler handler) {
    detail::check(shmlink_server_serve(handle_, &detail::handle, install(std::move(handler))));
  }

  // Serves on background threads and returns at once; end it with stop()
  // then wait(), or by destroying the server. Once per server; the server
  // keeps the handler until it is destroyed. Throws Error.
  void start(Handler handler) {
    detail::check(shmlink_server_start(handle_, &detail::handle, install(std::move(handler))));
  }

  // serve with `fd_handler` answering the requests that come with file
  // descriptors (without one they go to `handler`, their descriptors closed).
  void serve(Handler handler, FdHandler fd_handler) {
    void* h = install(std::move(handler), std::move(fd_handler));
    detail::check(shmlink_server_serve(handle_, &detail::handle, h));
  }

  // start with `fd_handler`, as serve with it.
  void start(Handler handler, FdHandler fd_handler) {
    void* h = install(std::move(handler), std::move(fd_handler));
    detail::check(shmlink_server_start(handle_, &detail::handle, h));
  }

  // Asks the server to stop and returns at once. Thread-safe and
  // async-signal-safe: it only calls shmlink_server_stop. No-op when empty.
  void stop() const noexcept { shmlink_server_stop(handle_); }

  // Waits until a started server has stopped (after stop() from any thread
  // or a signal handler); returns at once for a stopped one. Throws Error
  // (SHMLINK_E_STATE when the server was never started).
  void wait() {
    require();
    detail::check(shmlink_server_wait(handle_));
  }

  // The bound addresses, with the real port for tcp:HOST:0. Thread-safe.
  std::vector<std::string> addresses() const {
    std::vector<std::string> out;
    std::size_t n = shmlink_server_address_count(handle_);
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const char* a = shmlink_server_address(handle_, i);
      if (a != nullptr) out.emplace_back(a);
    }
    return out;
  }

  // The server's counters (all zero for an empty server). Thread-safe.
  shmlink_server_stats stats() const noexcept {
    shmlink_server_stats s{};
    if (handle_ != nullptr) shmlink_server_stats_get(handle_, &s);
    return s;
  }

  // True when the server holds a handle.
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  // The C handle, still owned by this server.
  shmlink_server* native_handle() const noexcept { return handle_; }

 private:
  // The C options of `options` (pointing into it: valid while it is).
  static bool options_for(const ServerOptions& options, shmlink_server_options& o,
                          Status& status) noexcept {
    o.allowed_uids = options.allowed_uids.data();
    o.allowed_uids_len = options.allowed_uids.size();
    o.allowed_gids = options.allowed_gids.data();
    o.allowed_gids_len = options.allowed_gids.size();
    o.socket_mode = options.socket_mode;
    o.socket_group_set = options.socket_group.has_value() ? 1 : 0;
    o.socket_group = options.socket_group.value_or(0);
    o.max_sessions = options.max_sessions;
    o.wait = static_cast<uint32_t>(options.wait);
    o.spin_us = options.spin_us;
    o.max_message_size = options.max_message_size;
    o.refuse_fds = options.accept_fds ? 0 : 1;
    o.max_arena_bytes = options.max_arena_bytes;
    o.refuse_arena = options.accept_arena ? 0 : 1;
    o.max_shm_bytes = options.max_shm_bytes;
    if (options.handover.find('\0') != std::string::npos) {
      status = detail::make_status(SHMLINK_E_INVALID_ARGUMENT,
                                   "shmlink: the hand-over path contains a NUL byte");
      return false;
    }
    o.handover = options.handover.empty() ? nullptr : options.handover.c_str();
    if (!detail::micros(options.handshake_timeout, o.handshake_timeout_us) ||
        !detail::micros(options.send_timeout, o.send_timeout_us)) {
      status = detail::make_status(SHMLINK_E_INVALID_ARGUMENT, detail::kNegativeTimeout);
      return false;
    }
    return true;
  }

  explicit Server(shmlink_server* handle) noexcept : handle_(handle) {}

  void reset() noexcept {
    // Stops and joins a started server before its handler goes away.
    shmlink_server_free(handle_);
    handle_ = nullptr;
    handler_.reset();
    fd_handler_.reset();
  }

  void require() const {
    if (handle_ == nullptr) throw Error(SHMLINK_E_INVALID_ARGUMENT, 0, detail::kNoServer);
  }

  // Stores the handler at a stable address for the C trampoline. Refuses a
  // second one: the first may still be in use by serving threads.
  void* install(Handler handler) {
    require();
    if (handler_ != nullptr)
      throw Error(SHMLINK_E_STATE, 0, "shmlink::Server: serve or start was already called");
    if (!handler) throw Error(SHMLINK_E_INVALID_ARGUMENT, 0, "shmlink::Server: empty handler");
    handler_ = std::make_unique<Handler>(std::move(handler));
    return handler_.get();
  }

  // install, with the handler of requests with descriptors registered too.
  void* install(Handler handler, FdHandler fd_handler) {
    require();
    if (!handler || !fd_handler)
      throw Error(SHMLINK_E_INVALID_ARGUMENT, 0, "shmlink::Server: empty handler");
    if (handler_ == nullptr) {
      fd_handler_ = std::make_unique<FdHandler>(std::move(fd_handler));
      detail::check(shmlink_server_set_fd_handler(handle_, &detail::handle_fds, fd_handler_.get()));
    }
    return install(std::move(handler));
  }

  shmlink_server* handle_ = nullptr;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<FdHandler> fd_handler_;
};

}  // namespace shmlink

#endif  // SHMLINK_HPP
