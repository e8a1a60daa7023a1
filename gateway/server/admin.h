// The admin listener (127.0.0.1:9901 by default): a tiny HTTP/1.1 server on
// the main thread's event loop, apart from the workers, so it answers while
// the data path is saturated. One request per connection; GET, HEAD and
// POST (a request body is not read). What each method and path answers is
// the Handler's business (Server::adminReply); other methods get 405.
//
// Web pages must not use it. A page on any site can make the browser send a
// request here (a "simple" cross-site POST needs no permission), and a site
// whose name it re-points at 127.0.0.1 (DNS rebinding) can even read the
// answers. So before the Handler sees a request, check() refuses with 403:
//   - a Host that is not the listener's own address (the address the
//     connection came in on), a loopback address, "localhost", or one of
//     Options::allowed_hosts (config: admin.allowed_hosts). The port in Host
//     is not compared: port forwarding and NAT change it, and a rebinding
//     page always sends its own name. No Host at all (HTTP/1.0) is accepted:
//     browsers always send one;
//   - an Origin other than the request's own (http://HOST), and "null";
//   - Sec-Fetch-Site other than same-origin or none (what browsers send for
//     a page's cross-site and same-site requests);
//   - a POST without the header kStateChangingHeader: a page can send it
//     only after a CORS preflight, which this server never grants.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <asio.hpp>

#include "gateway/base/http_types.h"
#include "gateway/net/accept_backoff.h"

namespace h2gate {

class Admin {
 public:
  // What every POST must carry (any non-empty value; the README uses 1).
  static constexpr std::string_view kStateChangingHeader = "X-H2gate-Admin";

  struct Options {
    // Normal form (config::normalizeAllowedHost): "name" or "name:port".
    std::vector<std::string> allowed_hosts;
  };
  struct Request {
    std::string_view method;  // GET, HEAD or POST
    std::string_view path;    // without the query string
    std::string_view query;   // after '?', "" when none
    // The connection comes from a loopback address (what endpoints that
    // make h2gate act on data from the request, like /pac/eval, require).
    bool loopback_peer = false;
  };
  struct Reply {
    int status = 404;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
    std::string allow;  // the Allow header of a 405; empty: none
  };
  // Called exactly once, on the admin's loop, with the answer (for HEAD the
  // body is dropped). May be called after the handler returned (a reload
  // answers when it is done); the connection stays open until then.
  using Respond = std::function<void(Reply)>;
  // Runs on the admin's loop. The request's views live until it returns.
  using Handler = std::function<void(const Request& request, Respond respond)>;

  Admin(asio::io_context& io, asio::ip::tcp::endpoint endpoint, Options options, Handler handler);
  // Binds. Returns an error message or "".
  std::string start();
  asio::ip::tcp::endpoint localEndpoint() const;
  void stop();
  // From the next request on (a reload changed admin.allowed_hosts).
  void setAllowedHosts(std::vector<std::string> hosts) {
    options_.allowed_hosts = std::move(hosts);
  }

  // Why `head`, received on a connection to `local`, is refused (the body
  // of the 403), or "" when it may be answered.
  static std::string check(const RequestHead& head, const asio::ip::tcp::endpoint& local,
                           const Options& options);

  // Logs a refusal, at most once per kWarnInterval (with the number left
  // unlogged since): a hostile page may send many.
  void logRefusal(const std::string& client, const std::string& why);

 private:
  void accept();
  asio::ip::tcp::endpoint endpoint_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer retry_;
  net::AcceptBackoff backoff_;
  Options options_;
  Handler handler_;
  std::chrono::steady_clock::time_point last_refusal_log_{};
  uint64_t unlogged_refusals_ = 0;
  bool refusal_logged_ = false;
};

}  // namespace h2gate
