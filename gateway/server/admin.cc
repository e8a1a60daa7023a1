#include "gateway/server/admin.h"

#include <algorithm>
#include <array>

#include "config/loader.h"
#include "gateway/base/ascii.h"
#include "gateway/base/log.h"
#include "gateway/http1/codec.h"
#include "gateway/http1/parser.h"
#include "gateway/net/address.h"

namespace h2gate {
namespace {

// "name:port" → "name", "[v6]:port" → "v6" (normal form in, as
// config::normalizeAllowedHost makes it).
std::string_view hostPart(std::string_view normal) {
  if (!normal.empty() && normal.front() == '[') return normal.substr(1, normal.find(']') - 1);
  return normal.substr(0, normal.find(':'));
}

std::string hostRefusal(std::string_view host, const asio::ip::tcp::endpoint& local_endpoint,
                        const Admin::Options& options) {
  const asio::ip::address local = local_endpoint.address();
  std::string why;
  const std::optional<std::string> normal = config::normalizeAllowedHost(host, &why);
  if (!normal) return "malformed Host header: " + why;
  const std::string_view name = hostPart(*normal);
  asio::error_code ec;
  const asio::ip::address ip = asio::ip::make_address(std::string(name), ec);
  if (!ec) {
    const asio::ip::address a = net::unmapped(ip);
    if (a.is_loopback() || a == net::unmapped(local)) return {};
  } else if (name == "localhost") {
    return {};
  }
  for (const std::string& allowed : options.allowed_hosts) {
    const bool with_port = allowed.find(':') != std::string::npos && allowed.back() != ']';
    if (with_port ? allowed == *normal : hostPart(allowed) == name) return {};
  }
  const std::string port = std::to_string(local_endpoint.port());
  return "Host '" + std::string(host) +
         "' is not this admin endpoint's address: refused, as a web page using DNS rebinding "
         "would be. Use http://" +
         net::endpointText(local_endpoint) + "/ or http://localhost:" + port +
         "/, or list the name under admin.allowed_hosts in the config\n";
}

// One admin request: read a head (small limits), answer, close.
class AdminSession : public std::enable_shared_from_this<AdminSession> {
 public:
  // `admin` outlives its sessions: they run on its loop, which stops before
  // it is destroyed.
  AdminSession(asio::ip::tcp::socket socket, Admin& admin, const Admin::Options& options,
               const Admin::Handler& handler)
      : socket_(std::move(socket)),
        admin_(admin),
        options_(options),
        handler_(handler),
        parser_(http1::Parser::Kind::Request, http1::Limits{8 * 1024, 50}),
        timer_(socket_.get_executor()) {}

  void start() {
    timer_.expires_after(std::chrono::seconds(10));
    timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
      if (!ec) self->socket_.close();
    });
    read();
  }

 private:
  void read() {
    socket_.async_read_some(
        asio::buffer(buf_), [self = shared_from_this()](const asio::error_code& ec, size_t n) {
          if (ec) {
            self->timer_.cancel();
            return;
          }
          size_t used = 0;
          std::string body;
          const http1::Event ev = self->parser_.feed(self->buf_.data(), n, &used, &body);
          if (ev == http1::Event::HeadComplete) {
            // The answer may take a while (a reload): no more read deadline.
            self->timer_.cancel();
            self->respond();
          } else if (ev == http1::Event::Error) {
            self->send(http1::errorResponse(self->parser_.errorStatus(),
                                            self->parser_.errorReason(), true));
          } else {
            self->read();
          }
        });
  }

  void respond() {
    const RequestHead& r = parser_.request();
    head_ = r.method == "HEAD";
    if (r.method != "GET" && r.method != "HEAD" && r.method != "POST") {
      Admin::Reply rep{405, "text/plain; charset=utf-8",
                       "admin endpoints take GET (POST for /reload, /quitquitquit)\n",
                       "GET, HEAD, POST"};
      return send(reply(rep, false));
    }
    asio::error_code ec;
    const asio::ip::tcp::endpoint local = socket_.local_endpoint(ec);
    if (std::string why = Admin::check(r, local, options_); !why.empty()) {
      const asio::ip::tcp::endpoint peer = socket_.remote_endpoint(ec);
      admin_.logRefusal(net::endpointText(peer), why.substr(0, why.find('\n')));
      return send(reply(Admin::Reply{403, "text/plain; charset=utf-8", why, {}}, head_));
    }
    const std::string_view target = r.target;
    const size_t q = target.find('?');
    const asio::ip::tcp::endpoint peer = socket_.remote_endpoint(ec);
    asio::ip::address peer_ip = peer.address();
    if (peer_ip.is_v6() && peer_ip.to_v6().is_v4_mapped())
      peer_ip = asio::ip::make_address_v4(asio::ip::v4_mapped, peer_ip.to_v6());
    const Admin::Request request{r.method, target.substr(0, q),
                                 q == std::string_view::npos ? "" : target.substr(q + 1),
                                 !ec && peer_ip.is_loopback()};
    handler_(request, [self = shared_from_this()](Admin::Reply rep) {
      self->send(reply(rep, self->head_));
    });
  }

  static std::string reply(const Admin::Reply& r, bool head) {
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " +
                      std::string(http1::reasonPhrase(r.status)) + "\r\nContent-Type: ";
    out.append(r.content_type).append("\r\nContent-Length: ").append(std::to_string(r.body.size()));
    if (!r.allow.empty()) out.append("\r\nAllow: ").append(r.allow);
    out.append("\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n");
    if (!head) out.append(r.body);
    return out;
  }

  void send(std::string bytes) {
    out_ = std::move(bytes);
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](const asio::error_code&, size_t) {
                        asio::error_code ec;
                        self->socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
                        self->socket_.close(ec);
                        self->timer_.cancel();
                      });
  }

  asio::ip::tcp::socket socket_;
  Admin& admin_;
  const Admin::Options& options_;
  const Admin::Handler& handler_;
  http1::Parser parser_;
  asio::steady_timer timer_;
  std::array<char, 8192> buf_{};
  std::string out_;
  bool head_ = false;
};

}  // namespace

std::string Admin::check(const RequestHead& head, const asio::ip::tcp::endpoint& local,
                         const Options& options) {
  const Header* host = nullptr;
  for (const Header& h : head.headers) {
    if (!iequals(h.name, "host")) continue;
    if (host) return "more than one Host header\n";
    host = &h;
  }
  if (host) {
    if (std::string why = hostRefusal(trimOws(host->value), local, options); !why.empty())
      return why;
  }
  if (const Header* origin = findHeader(head.headers, "origin")) {
    const std::string o = toLowerAscii(trimOws(origin->value));
    const std::string own = host ? "http://" + toLowerAscii(trimOws(host->value)) : std::string();
    if (o != own && o + ":80" != own && o != own + ":80")
      return "Origin '" + std::string(trimOws(origin->value)) +
             "': the admin endpoint does not answer web pages from other origins\n";
  }
  if (const Header* site = findHeader(head.headers, "sec-fetch-site")) {
    const std::string s = toLowerAscii(trimOws(site->value));
    if (s != "same-origin" && s != "none")
      return "Sec-Fetch-Site: " + s + ": the admin endpoint does not answer web pages\n";
  }
  if (head.method == "POST") {
    const Header* marker = findHeader(head.headers, kStateChangingHeader);
    if (!marker || trimOws(marker->value).empty())
      return "POST needs the header " + std::string(kStateChangingHeader) +
             ": 1 (a web page cannot send it), e.g. curl -X POST -H '" +
             std::string(kStateChangingHeader) + ": 1' http://" + net::endpointText(local) +
             "/reload\n";
  }
  return {};
}

Admin::Admin(asio::io_context& io, asio::ip::tcp::endpoint endpoint, Options options,
             Handler handler)
    : endpoint_(endpoint),
      acceptor_(io),
      retry_(io),
      options_(std::move(options)),
      handler_(std::move(handler)) {}

std::string Admin::start() {
  asio::error_code ec;
  acceptor_.open(endpoint_.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint_, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return "admin: cannot listen on " + endpoint_.address().to_string() + ":" +
           std::to_string(endpoint_.port()) + ": " + ec.message();
  accept();
  return {};
}

asio::ip::tcp::endpoint Admin::localEndpoint() const {
  asio::error_code ec;
  return acceptor_.local_endpoint(ec);
}

void Admin::stop() {
  asio::error_code ec;
  acceptor_.close(ec);
  retry_.cancel();
}

void Admin::logRefusal(const std::string& client, const std::string& why) {
  const auto now = std::chrono::steady_clock::now();
  if (refusal_logged_ && now - last_refusal_log_ < net::AcceptBackoff::kWarnInterval) {
    ++unlogged_refusals_;
    return;
  }
  H2G_LOG(Warn, 0, 0,
          "admin: refused a request from "
              << client << ": " << why
              << (unlogged_refusals_ ? " (" + std::to_string(unlogged_refusals_) +
                                           " more refused since the last warning)"
                                     : std::string()));
  refusal_logged_ = true;
  last_refusal_log_ = now;
  unlogged_refusals_ = 0;
}

void Admin::accept() {
  acceptor_.async_accept([this](const asio::error_code& ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      // EMFILE and friends: the connection stays queued; back off instead
      // of failing again at once (net/accept_backoff.h).
      uint64_t unlogged = 0;
      if (backoff_.failed(std::chrono::steady_clock::now(), &unlogged))
        H2G_LOG(Warn, 0, 0,
                "admin: accept failed: " << ec.message() << "; retrying every "
                                         << net::AcceptBackoff::kRetryDelay.count() << " ms"
                                         << (unlogged ? " (" + std::to_string(unlogged) +
                                                            " more failures since the last warning)"
                                                      : std::string()));
      retry_.expires_after(net::AcceptBackoff::kRetryDelay);
      retry_.async_wait([this](const asio::error_code& e) {
        if (!e && acceptor_.is_open()) accept();
      });
      return;
    }
    std::make_shared<AdminSession>(std::move(socket), *this, options_, handler_)->start();
    accept();
  });
}

}  // namespace h2gate
