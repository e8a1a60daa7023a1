#include "gateway/pac_engine/fetch.h"

#include <optional>

#include "config/config.h"
#include "gateway/base/ascii.h"
#include "gateway/http1/parser.h"
#include "gateway/net/ip_address.h"
#include "gateway/net/tls_context.h"
#include "gateway/upstream/transport.h"

namespace h2gate::pac {
namespace {

std::string hostForHeader(const FetchUrl& u) {
  std::string h = u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host;
  if (u.port != (u.https ? 443 : 80)) h += ":" + std::to_string(u.port);
  return h;
}

class FetchImpl : public PacFetch, public std::enable_shared_from_this<FetchImpl> {
 public:
  FetchImpl(asio::any_io_executor ex, std::string url, FetchOptions options, Callback done)
      : ex_(ex),
        url_(std::move(url)),
        options_(std::move(options)),
        done_(std::move(done)),
        timer_(ex),
        resolver_(ex) {}

  void begin() {
    timer_.expires_after(options_.timeout);
    timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
      if (ec == asio::error::operation_aborted) return;
      self->fail("no complete answer within " + std::to_string(self->options_.timeout.count()) +
                 " ms");
    });
    request(url_);
  }

  void cancel() override {
    asio::post(ex_, [self = shared_from_this()] { self->fail("cancelled"); });
  }

 private:
  void request(const std::string& url) {
    result_.final_url = url;
    if (std::string err = parseFetchUrl(url, &target_); !err.empty()) return fail(err);
    where_ = hostForHeader(target_);
    if (target_.https && !tls_) {
      config::TlsContext cfg;
      cfg.alpn_protocols = {"http/1.1"};
      cfg.trusted_ca = options_.trusted_ca;
      std::string error;
      tls_ = net::TlsContext::create(cfg, "PAC download", &error);
      if (!tls_) return fail(error);
    }
    resolver_.async_resolve(
        target_.host, std::to_string(target_.port),
        [self = shared_from_this()](const asio::error_code& ec,
                                    asio::ip::tcp::resolver::results_type results) {
          if (self->finished_) return;
          if (ec) return self->fail("cannot resolve the name: " + ec.message());
          self->endpoints_.assign(results.begin(), results.end());
          self->next_ = 0;
          self->connectNext();
        });
  }

  void connectNext() {
    if (next_ >= endpoints_.size())
      return fail("cannot connect" + (last_error_.empty() ? std::string() : ": " + last_error_));
    const asio::ip::tcp::endpoint ep = endpoints_[next_++].endpoint();
    socket_.emplace(ex_);
    socket_->async_connect(ep, [self = shared_from_this()](const asio::error_code& ec) {
      if (self->finished_) return;
      if (ec) {
        self->last_error_ = ec.message();
        return self->connectNext();
      }
      self->connected();
    });
  }

  void connected() {
    if (!target_.https) {
      transport_ = std::make_unique<upstream::Transport>(std::move(*socket_));
      socket_.reset();
      return sendRequest();
    }
    SSL* ssl = SSL_new(tls_->native());
    if (ssl == nullptr) return fail("TLS setup failed");
    transport_ = std::make_unique<upstream::Transport>(std::move(*socket_), ssl);
    socket_.reset();
    if (std::string err = tls_->prepare(ssl, target_.host, where_); !err.empty())
      return fail("TLS setup: " + err);
    transport_->asyncHandshake([self = shared_from_this()](const asio::error_code& ec) {
      if (self->finished_) return;
      if (ec) {
        std::string why = net::TlsContext::verifyError(self->transport_->ssl());
        return self->fail("TLS handshake failed: " + (why.empty() ? ec.message() : why));
      }
      self->sendRequest();
    });
  }

  void sendRequest() {
    request_text_ = "GET " + target_.target + " HTTP/1.1\r\nHost: " + hostForHeader(target_) +
                    "\r\nUser-Agent: h2gate/" H2GATE_VERSION
                    "\r\nAccept: application/x-ns-proxy-autoconfig, */*\r\n"
                    "Connection: close\r\n\r\n";
    parser_.emplace(http1::Parser::Kind::Response, http1::Limits{});
    body_.clear();
    transport_->asyncWrite(asio::buffer(request_text_),
                           [self = shared_from_this()](const asio::error_code& ec, size_t) {
                             if (self->finished_) return;
                             if (ec) return self->fail("sending the request: " + ec.message());
                             self->readMore();
                           });
  }

  void readMore() {
    transport_->asyncReadSome(
        asio::buffer(buf_), [self = shared_from_this()](const asio::error_code& ec, size_t n) {
          if (self->finished_) return;
          if (ec) {
            if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
              const http1::Event ev = self->parser_->finish();
              if (ev == http1::Event::MessageComplete) return self->complete();
              return self->fail("the server closed the connection before the end of the file");
            }
            return self->fail("reading: " + ec.message());
          }
          self->consume(n);
        });
  }

  void consume(size_t n) {
    size_t off = 0;
    while (true) {
      size_t used = 0;
      const http1::Event ev = parser_->feed(buf_.data() + off, n - off, &used, &body_);
      off += used;
      switch (ev) {
        case http1::Event::Error:
          return fail("bad HTTP response: " + parser_->errorReason());
        case http1::Event::HeadComplete:
          if (!onHead()) return;
          break;
        case http1::Event::Body:
          if (body_.size() > options_.max_bytes)
            return fail("the file is larger than " + std::to_string(options_.max_bytes) + " bytes");
          break;
        case http1::Event::MessageComplete:
          return complete();
        case http1::Event::NeedMore:
          if (off >= n) return readMore();
          break;
      }
    }
  }

  // Returns false when it finished the fetch (error or redirect).
  bool onHead() {
    const ResponseHead& head = parser_->response();
    result_.status = head.status;
    if (head.status == 301 || head.status == 302 || head.status == 303 || head.status == 307 ||
        head.status == 308) {
      const Header* location = findHeader(head.headers, "location");
      if (location == nullptr || location->value.empty()) {
        fail("HTTP " + std::to_string(head.status) + " without a Location");
        return false;
      }
      if (++redirects_ > options_.max_redirects) {
        fail("more than " + std::to_string(options_.max_redirects) + " redirects");
        return false;
      }
      std::string next = location->value;
      if (!istartsWith(next, "http://") && !istartsWith(next, "https://")) {
        const std::string base =
            std::string(target_.https ? "https://" : "http://") + hostForHeader(target_);
        next = next.front() == '/' ? base + next : base + "/" + next;
      }
      if (target_.https && istartsWith(next, "http://")) {
        fail("refusing a redirect from https to http (" + next + ")");
        return false;
      }
      transport_->close();
      transport_.reset();
      request(next);
      return false;
    }
    if (head.status != 200) {
      fail("HTTP " + std::to_string(head.status) + (head.reason.empty() ? "" : " " + head.reason));
      return false;
    }
    if (head.framing == BodyFraming::ContentLength && head.content_length > options_.max_bytes) {
      fail("the file is larger than " + std::to_string(options_.max_bytes) + " bytes (" +
           std::to_string(head.content_length) + ")");
      return false;
    }
    return true;
  }

  void complete() {
    if (finished_) return;
    if (body_.size() > options_.max_bytes)
      return fail("the file is larger than " + std::to_string(options_.max_bytes) + " bytes");
    result_.ok = true;
    result_.body = std::move(body_);
    finish();
  }

  void fail(std::string why) {
    if (finished_) return;
    result_.ok = false;
    result_.error = where_.empty() ? why : where_ + ": " + why;
    finish();
  }

  void finish() {
    finished_ = true;
    timer_.cancel();
    resolver_.cancel();
    if (socket_) {
      asio::error_code ignored;
      socket_->close(ignored);
    }
    if (transport_) transport_->close();
    Callback done = std::move(done_);
    // Never inside start(): the caller may still be setting up.
    asio::post(ex_,
               [done = std::move(done), r = std::move(result_)]() mutable { done(std::move(r)); });
  }

  asio::any_io_executor ex_;
  std::string url_;
  FetchOptions options_;
  Callback done_;
  asio::steady_timer timer_;
  asio::ip::tcp::resolver resolver_;
  FetchUrl target_;
  std::string where_;
  std::shared_ptr<net::TlsContext> tls_;
  std::vector<asio::ip::tcp::resolver::results_type::value_type> endpoints_;
  std::size_t next_ = 0;
  std::string last_error_;
  std::optional<asio::ip::tcp::socket> socket_;
  std::unique_ptr<upstream::Transport> transport_;
  std::string request_text_;
  std::optional<http1::Parser> parser_;
  std::array<char, 16 * 1024> buf_{};
  std::string body_;
  int redirects_ = 0;
  bool finished_ = false;
  FetchResult result_;
};

}  // namespace

std::string parseFetchUrl(std::string_view url, FetchUrl* out) {
  *out = FetchUrl{};
  std::string_view rest;
  if (istartsWith(url, "http://")) {
    rest = url.substr(7);
  } else if (istartsWith(url, "https://")) {
    out->https = true;
    rest = url.substr(8);
  } else {
    return "'" + std::string(url) + "' is not an http:// or https:// URL";
  }
  const std::size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  std::string_view target = end == std::string_view::npos ? "/" : rest.substr(end);
  if (const std::size_t hash = target.find('#'); hash != std::string_view::npos)
    target = target.substr(0, hash);
  if (target.empty() || target.front() != '/')
    out->target = "/" + std::string(target);
  else
    out->target = std::string(target);
  if (authority.find('@') != std::string_view::npos)
    return "credentials in a PAC URL are not supported";
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return "unclosed '[' in the URL's host";
    out->host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return "unexpected text after ']' in the URL";
      port = after.substr(1);
    }
    std::optional<net::IpAddress> ip = net::parseIp(out->host);
    if (!ip || !ip->v6) return "'" + out->host + "' in brackets is not an IPv6 address";
  } else {
    const std::size_t colon = authority.find(':');
    out->host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out->host.empty()) return "the URL has no host";
  for (char c : out->host)
    if (static_cast<unsigned char>(c) <= 0x20 || c == '\\' || c == '%')
      return "the URL's host has characters a host name cannot have";
  out->port = out->https ? 443 : 80;
  if (!port.empty()) {
    unsigned v = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || v > 65535) return "bad port in the URL";
      v = v * 10 + static_cast<unsigned>(c - '0');
    }
    if (v == 0 || v > 65535) return "bad port in the URL";
    out->port = static_cast<uint16_t>(v);
  }
  for (char c : out->target)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) == 0x7F)
      return "the URL's path has spaces or control characters";
  return {};
}

std::shared_ptr<PacFetch> PacFetch::start(asio::any_io_executor ex, std::string url,
                                          FetchOptions options, Callback done) {
  auto f = std::make_shared<FetchImpl>(ex, std::move(url), std::move(options), std::move(done));
  f->begin();
  return f;
}

}  // namespace h2gate::pac
