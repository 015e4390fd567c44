// A fixture serving the scripted handler on one transport through the C API.
#ifndef SHMLINK_TESTS_C_API_FIXTURE_HPP
#define SHMLINK_TESTS_C_API_FIXTURE_HPP

#include "support.hpp"

namespace shmlink_test {

// A C handler with its user data.
template <typename F>
struct With {
  F f;
  void* user_data;
};

// Binds a server with `options` on transport `t` in `dir`, registers
// `fds` for requests with descriptors and starts it with `handler`;
// `server` and `address` (the real one) receive it.
inline void start_server(Transport t, const TempDir& dir, const shmlink_server_options* options,
                         With<shmlink_handler> handler, With<shmlink_fd_handler> fds,
                         ServerPtr& server, std::string& address) {
  std::string bind = bind_address(t, dir);
  const char* list[] = {bind.c_str()};
  shmlink_server* s = nullptr;
  ASSERT_EQ(shmlink_server_bind(list, 1, options, &s), SHMLINK_OK) << last_error();
  server.reset(s);
  ASSERT_EQ(shmlink_server_address_count(s), 1u);
  const char* real = shmlink_server_address(s, 0);
  ASSERT_NE(real, nullptr);
  address = real;
  ASSERT_EQ(shmlink_server_set_fd_handler(s, fds.f, fds.user_data), SHMLINK_OK) << last_error();
  ASSERT_EQ(shmlink_server_start(s, handler.f, handler.user_data), SHMLINK_OK) << last_error();
}

class CApiTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override { serve(nullptr); }

  void TearDown() override {
    state_.release();
    server_.reset();
  }

  // (Re)binds a server with `options` on this test's transport and starts it,
  // with `fd_handler` (and its `fd_user_data`) for requests with descriptors.
  void serve(const shmlink_server_options* options, shmlink_fd_handler fd_handler = nullptr,
             void* fd_user_data = nullptr) {
    state_.release();
    server_.reset();
    state_.reset();
    start_server(GetParam(), dir_, options, {scripted_handler, &state_}, {fd_handler, fd_user_data},
                 server_, address_);
  }

  // A new client of the server (fails the test and returns NULL on error).
  ClientPtr connect(const shmlink_client_options* options = nullptr) {
    shmlink_client* c = nullptr;
    shmlink_status st = shmlink_client_connect(address_.c_str(), options, &c);
    EXPECT_EQ(st, SHMLINK_OK) << last_error();
    return ClientPtr(c);
  }

  // One call; the response (or "" on failure) goes into `out`.
  static shmlink_status call(shmlink_client* c, std::string_view req, Buffer& out,
                             uint64_t timeout_us = 0) {
    return shmlink_client_call_timeout(c, bytes(req), req.size(), timeout_us, out.get());
  }

  shmlink_server_stats stats() {
    shmlink_server_stats s{};
    EXPECT_EQ(shmlink_server_stats_get(server_.get(), &s), SHMLINK_OK);
    return s;
  }

  TempDir dir_;
  std::string address_;
  ScriptState state_;  // outlives server_: declared first, destroyed last
  ServerPtr server_;
};

}  // namespace shmlink_test

#endif  // SHMLINK_TESTS_C_API_FIXTURE_HPP
