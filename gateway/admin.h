// The admin listener (127.0.0.1:9901 by default): a tiny HTTP/1.1 server on
// the main thread's event loop. One request per connection.
//   GET /ready        200 "LIVE" while serving, 503 "DRAINING" during shutdown
//   GET /server_info  JSON: version, state, uptime, workers, listeners
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <asio.hpp>

namespace h2gate {

class Admin {
 public:
  struct Status {
    bool draining = false;
    std::string server_info_json;
  };
  using StatusFn = std::function<Status()>;

  Admin(asio::io_context& io, asio::ip::tcp::endpoint endpoint, StatusFn status);
  // Binds. Returns an error message or "".
  std::string start();
  asio::ip::tcp::endpoint localEndpoint() const;
  void stop();

 private:
  void accept();
  asio::ip::tcp::endpoint endpoint_;
  asio::ip::tcp::acceptor acceptor_;
  StatusFn status_;
};

}  // namespace h2gate
