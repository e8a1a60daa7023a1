// The admin listener (127.0.0.1:9901 by default): a tiny HTTP/1.1 server on
// the main thread's event loop, apart from the workers, so it answers while
// the data path is saturated. One request per connection; GET, HEAD and
// POST (a request body is not read). What each method and path answers is
// the Handler's business (Server::adminReply); other methods get 405.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <asio.hpp>

namespace h2gate {

class Admin {
 public:
  struct Reply {
    int status = 404;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
    std::string allow;  // the Allow header of a 405; empty: none
  };
  // Method ("GET", "HEAD" or "POST"), path without the query string, and
  // the query string (after '?', "" when none) → reply (for HEAD the body
  // is dropped). Runs on the admin's loop.
  using Handler =
      std::function<Reply(std::string_view method, std::string_view path, std::string_view query)>;

  Admin(asio::io_context& io, asio::ip::tcp::endpoint endpoint, Handler handler);
  // Binds. Returns an error message or "".
  std::string start();
  asio::ip::tcp::endpoint localEndpoint() const;
  void stop();

 private:
  void accept();
  asio::ip::tcp::endpoint endpoint_;
  asio::ip::tcp::acceptor acceptor_;
  Handler handler_;
};

}  // namespace h2gate
