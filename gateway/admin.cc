#include "gateway/admin.h"

#include <array>

#include "gateway/http1/codec.h"
#include "gateway/http1/parser.h"
#include "gateway/log.h"

namespace h2gate {
namespace {

// One admin request: read a head (small limits), answer, close.
class AdminSession : public std::enable_shared_from_this<AdminSession> {
 public:
  AdminSession(asio::ip::tcp::socket socket, Admin::Handler handler)
      : socket_(std::move(socket)),
        handler_(std::move(handler)),
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
    if (r.method != "GET" && r.method != "HEAD" && r.method != "POST") {
      Admin::Reply rep{405, "text/plain; charset=utf-8",
                       "admin endpoints take GET (POST for /reload)\n", "GET, HEAD, POST"};
      return send(reply(rep, false));
    }
    const std::string_view target = r.target;
    const size_t q = target.find('?');
    const std::string_view path = target.substr(0, q);
    const std::string_view query = q == std::string_view::npos ? "" : target.substr(q + 1);
    const Admin::Reply rep = handler_(r.method, path, query);
    send(reply(rep, r.method == "HEAD"));
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
  Admin::Handler handler_;
  http1::Parser parser_;
  asio::steady_timer timer_;
  std::array<char, 8192> buf_{};
  std::string out_;
};

}  // namespace

Admin::Admin(asio::io_context& io, asio::ip::tcp::endpoint endpoint, Handler handler)
    : endpoint_(endpoint), acceptor_(io), handler_(std::move(handler)) {}

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
}

void Admin::accept() {
  acceptor_.async_accept([this](const asio::error_code& ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) std::make_shared<AdminSession>(std::move(socket), handler_)->start();
    accept();
  });
}

}  // namespace h2gate
