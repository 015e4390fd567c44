// A fixture serving a shmlink.hpp handler on one transport, with a client.
#ifndef SHMLINK_TESTS_CPP_FIXTURE_HPP
#define SHMLINK_TESTS_CPP_FIXTURE_HPP

#include <utility>

#include "shmlink.hpp"
#include "support.hpp"

namespace shmlink_test {

class CppServerTest : public ::testing::TestWithParam<Transport> {
 protected:
  // (Re)binds a server with `options` on this test's transport, starts it
  // with `handler` and connects client_ with `client_options`.
  void start(shmlink::Server::Handler handler, const shmlink::ServerOptions& options = {},
             const shmlink::ClientOptions& client_options = {}) {
    client_ = shmlink::Client();
    server_ = shmlink::Server();
    server_ = shmlink::Server::bind({bind_address(GetParam(), dir_)}, options);
    server_.start(std::move(handler));
    client_ = shmlink::Client::connect(server_.addresses()[0], client_options);
  }

  void TearDown() override {
    client_ = shmlink::Client();
    server_ = shmlink::Server();
  }

  TempDir dir_;
  shmlink::Server server_;
  shmlink::Client client_;
};

}  // namespace shmlink_test

#endif  // SHMLINK_TESTS_CPP_FIXTURE_HPP
