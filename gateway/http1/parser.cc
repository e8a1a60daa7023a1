#include "gateway/http1/parser.h"

#include <charconv>
#include <cstdio>

#include "gateway/base/ascii.h"
#include "gateway/net/host_name.h"

namespace h2gate::http1 {

Parser::Parser(Kind kind, Limits limits) : kind_(kind), limits_(limits) {
  llhttp_settings_init(&settings_);
  settings_.on_message_begin = &Parser::onMessageBegin;
  settings_.on_url = &Parser::onUrl;
  settings_.on_status = &Parser::onStatus;
  settings_.on_header_field = &Parser::onHeaderField;
  settings_.on_header_value = &Parser::onHeaderValue;
  settings_.on_header_value_complete = &Parser::onHeaderValueComplete;
  settings_.on_headers_complete = &Parser::onHeadersComplete;
  settings_.on_body = &Parser::onBody;
  settings_.on_message_complete = &Parser::onMessageComplete;
  llhttp_init(&parser_, kind == Kind::Request ? HTTP_REQUEST : HTTP_RESPONSE, &settings_);
  parser_.data = this;
}

int Parser::onMessageBegin(llhttp_t* p) {
  Parser& s = self(p);
  s.request_ = RequestHead{};
  s.response_ = ResponseHead{};
  s.in_message_ = true;
  s.in_head_ = true;
  s.head_bytes_ = 0;
  s.value_pending_ = false;
  return 0;
}

int Parser::onUrl(llhttp_t* p, const char* at, size_t len) {
  self(p).request_.target.append(at, len);
  return 0;
}

int Parser::onStatus(llhttp_t* p, const char* at, size_t len) {
  self(p).response_.reason.append(at, len);
  return 0;
}

int Parser::onHeaderField(llhttp_t* p, const char* at, size_t len) {
  Parser& s = self(p);
  Headers& h = s.headers();
  if (!s.value_pending_) {
    if (h.size() >= s.limits_.max_headers) {
      s.error_status_ = 431;
      s.error_reason_ =
          "too many header fields (limit " + std::to_string(s.limits_.max_headers) + ")";
      return HPE_USER;
    }
    h.emplace_back();
    s.value_pending_ = true;
  }
  h.back().name.append(at, len);
  return 0;
}

int Parser::onHeaderValue(llhttp_t* p, const char* at, size_t len) {
  Parser& s = self(p);
  Headers& h = s.headers();
  h.back().value.append(at, len);
  return 0;
}

int Parser::onHeaderValueComplete(llhttp_t* p) {
  Parser& s = self(p);
  Headers& h = s.headers();
  std::string& v = h.back().value;
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
  s.value_pending_ = false;
  return 0;
}

namespace {

// RFC 9112 §6.1: a request whose transfer codings h2gate cannot decode gets
// 501. h2gate decodes only chunked (and re-frames the body upstream), so
// every other coding ("gzip, chunked", "xchunked") is refused rather than
// forwarded with a body nobody can delimit. "" or the reason.
std::string unsupportedTransferCoding(const Headers& headers) {
  for (const Header& h : headers) {
    if (!iequals(h.name, "transfer-encoding")) continue;
    std::string_view v = h.value;
    while (!v.empty()) {
      const size_t comma = v.find(',');
      const std::string_view coding = trimOws(v.substr(0, comma));
      if (!coding.empty() && !iequals(coding, "chunked"))
        return "unsupported transfer coding '" + std::string(coding.substr(0, 64)) +
               "' (h2gate decodes only chunked request bodies)";
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  return {};
}

}  // namespace

int Parser::onHeadersComplete(llhttp_t* p) {
  Parser& s = self(p);
  s.in_head_ = false;
  s.head_done_ = true;
  BodyFraming framing = BodyFraming::None;
  if (p->flags & F_CHUNKED)
    framing = BodyFraming::Chunked;
  else if (p->flags & F_CONTENT_LENGTH)
    framing = BodyFraming::ContentLength;
  const bool keep_alive = llhttp_should_keep_alive(p) != 0;
  if (s.kind_ == Kind::Request) {
    if (p->flags & F_TRANSFER_ENCODING) {
      if (std::string why = unsupportedTransferCoding(s.request_.headers); !why.empty()) {
        s.error_status_ = 501;
        s.error_reason_ = std::move(why);
        return -1;  // llhttp: HPE_CB_HEADERS_COMPLETE; feed() reports error_status_
      }
    }
    RequestHead& r = s.request_;
    r.method = llhttp_method_name(static_cast<llhttp_method_t>(p->method));
    r.http_minor = p->http_minor;
    r.framing = framing;
    r.content_length = framing == BodyFraming::ContentLength ? p->content_length : 0;
    r.keep_alive = keep_alive;
    // An Upgrade (h2c, websocket) offered with an absolute-form request is
    // declined: the Upgrade and Connection headers are hop-by-hop and go no
    // further (codec.h), the origin answers a plain request, and the bytes
    // after this message are the app's next request. Without this llhttp
    // would take them for the upgraded protocol and never report another
    // head. (A proxy carries WebSockets in CONNECT tunnels.)
    if (p->method != HTTP_CONNECT) p->upgrade = 0;
    // A message whose body is known to be empty (Content-Length: 0) ends
    // here: llhttp goes on to its completion, which the caller gets with
    // no further input (a keep-alive peer sends none). CONNECT's payload is
    // tunnel data, not a body; stop here either way so the caller sees the
    // head before any body bytes.
    if (p->method != HTTP_CONNECT && framing == BodyFraming::ContentLength && r.content_length == 0)
      return 0;
    return HPE_PAUSED;
  }
  ResponseHead& r = s.response_;
  r.status = p->status_code;
  r.http_minor = p->http_minor;
  const bool no_body = s.expect_no_body_ || r.status / 100 == 1 || r.status == 204 ||
                       r.status == 304 || (s.connect_response_ && r.status / 100 == 2);
  if (no_body) {
    r.framing = BodyFraming::None;
    r.keep_alive = keep_alive;
    return 1;  // no body: llhttp goes straight to message complete
  }
  if (framing == BodyFraming::None) framing = BodyFraming::UntilClose;
  r.framing = framing;
  r.content_length = framing == BodyFraming::ContentLength ? p->content_length : 0;
  r.keep_alive = keep_alive && framing != BodyFraming::UntilClose;
  // Content-Length: 0 ends the message with its head, as a bodyless one
  // does: pausing here would leave the completion for input that a
  // keep-alive peer never sends.
  if (framing == BodyFraming::ContentLength && r.content_length == 0) return 0;
  return HPE_PAUSED;
}

int Parser::onBody(llhttp_t* p, const char* at, size_t len) {
  Parser& s = self(p);
  s.body_out_->append(at, len);
  s.got_body_ = true;
  return 0;
}

int Parser::onMessageComplete(llhttp_t* p) {
  Parser& s = self(p);
  s.message_done_ = true;
  s.in_message_ = false;
  s.keep_alive_ = llhttp_should_keep_alive(p) != 0;
  return HPE_PAUSED;
}

Event Parser::fail(int status, std::string reason) {
  dead_ = true;
  error_status_ = status;
  error_reason_ = std::move(reason);
  return Event::Error;
}

std::optional<Event> Parser::takeCompletion() {
  if (head_done_) {
    head_done_ = false;
    return Event::HeadComplete;
  }
  if (message_done_) {
    message_done_ = false;
    return Event::MessageComplete;
  }
  return std::nullopt;
}

Event Parser::feed(const char* data, size_t len, size_t* consumed, std::string* body) {
  *consumed = 0;
  if (dead_) return Event::Error;
  // A head and its message completing in one step (a message without a
  // body, or with Content-Length: 0) are reported one per call, the second
  // without further input.
  if (const std::optional<Event> e = takeCompletion()) return *e;
  if (len == 0) return Event::NeedMore;
  body_out_ = body;
  got_body_ = false;
  const bool was_in_head = in_head_ || !in_message_;
  const llhttp_errno_t err = llhttp_execute(&parser_, data, len);
  body_out_ = nullptr;
  switch (err) {
    case HPE_OK:
      *consumed = len;
      break;
    case HPE_PAUSED:
    case HPE_PAUSED_UPGRADE:
      *consumed = static_cast<size_t>(llhttp_get_error_pos(&parser_) - data);
      if (err == HPE_PAUSED)
        llhttp_resume(&parser_);
      else
        llhttp_resume_after_upgrade(&parser_);
      break;
    case HPE_USER:
      return fail(error_status_ ? error_status_ : 400, error_reason_);
    default: {
      // A callback refused the message and said why (e.g. 501).
      if (error_status_ != 0) return fail(error_status_, error_reason_);
      const char* why = llhttp_get_error_reason(&parser_);
      return fail(400, std::string("malformed HTTP: ") + llhttp_errno_name(err) +
                           (why && *why ? std::string(" (") + why + ")" : std::string()));
    }
  }
  if (was_in_head) {
    head_bytes_ += *consumed;
    if (head_bytes_ > limits_.max_head_bytes)
      return fail(431, "request head larger than " + std::to_string(limits_.max_head_bytes / 1024) +
                           " KiB");
  }
  if (const std::optional<Event> e = takeCompletion()) return *e;
  return got_body_ ? Event::Body : Event::NeedMore;
}

Event Parser::finish() {
  if (dead_) return Event::Error;
  if (!in_message_) return Event::NeedMore;
  // A close-delimited body completes here; anything else was cut short.
  llhttp_finish(&parser_);
  if (message_done_) {
    message_done_ = false;
    keep_alive_ = false;
    return Event::MessageComplete;
  }
  return fail(502, "peer closed in the middle of a message");
}

namespace {

bool parsePort(std::string_view text, uint16_t* out) {
  if (text.empty() || text.size() > 5) return false;
  unsigned v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v == 0 || v > 65535) return false;
  *out = static_cast<uint16_t>(v);
  return true;
}

bool validHost(std::string_view host, bool bracketed) {
  if (host.empty() || host.size() > 255) return false;
  for (char c : host) {
    const bool ok = isAsciiAlnum(c) || c == '-' || c == '.' || c == '_' ||
                    (bracketed && (c == ':' || c == '%'));
    if (!ok) return false;
  }
  return true;
}

struct Authority {
  std::string host;  // canonical (net::canonicalRequestHost), no brackets
  uint16_t port = 0;
  bool port_given = false;
  bool changed = false;  // the canonical host differs from the one written
};

// "host[:port]" or "[v6][:port]". default_port 0 means the port is required.
std::string splitAuthority(std::string_view auth, uint16_t default_port, Authority* out) {
  std::string_view h, p;
  bool bracketed = false;
  if (!auth.empty() && auth.front() == '[') {
    const size_t close = auth.find(']');
    if (close == std::string_view::npos) return "unterminated IPv6 literal";
    h = auth.substr(1, close - 1);
    bracketed = true;
    std::string_view rest = auth.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return "junk after IPv6 literal";
      p = rest.substr(1);
      out->port_given = true;
    }
  } else {
    const size_t colon = auth.rfind(':');
    if (colon != std::string_view::npos) {
      h = auth.substr(0, colon);
      p = auth.substr(colon + 1);
      out->port_given = true;
    } else {
      h = auth;
    }
  }
  if (!validHost(h, bracketed)) return "invalid host";
  if (!out->port_given) {
    if (default_port == 0) return "port missing (expected host:port)";
    out->port = default_port;
  } else if (!parsePort(p, &out->port)) {
    return "invalid port";
  }
  std::string error;
  std::optional<std::string> canonical = net::canonicalRequestHost(h, bracketed, &error);
  if (!canonical) return error;
  out->changed = *canonical != h;
  out->host = std::move(*canonical);
  return {};
}

// RFC 9112 §3.2: the request-target is visible ASCII (RFC 3986 characters
// and the few more that clients leave unencoded). Controls such as TAB and
// form feed, DEL and bytes 0x80-0xFF are not forwarded: an origin or proxy
// behind h2gate could split or read the target differently.
std::string badTargetByte(std::string_view target) {
  for (char c : target) {
    const auto b = static_cast<unsigned char>(c);
    if (b > 0x20 && b < 0x7F) continue;
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", b);
    return std::string("request target contains the byte ") + hex +
           " (only visible ASCII is allowed; percent-encode the rest)";
  }
  return {};
}

}  // namespace

std::string parseTarget(RequestHead& r) {
  if (std::string err = badTargetByte(r.target); !err.empty()) return err;
  std::string_view t = r.target;
  r.is_connect = r.method == "CONNECT";
  Authority a;
  if (r.is_connect) {
    const std::string err = splitAuthority(t, 0, &a);
    if (!err.empty()) return "CONNECT target '" + r.target + "': " + err;
    r.host = std::move(a.host);
    r.port = a.port;
    if (a.changed) r.target = r.authority();
    return {};
  }
  if (!t.empty() && (t.front() == '/' || t == "*"))
    return "this is a proxy: send absolute-form requests (GET http://host/path) or CONNECT "
           "host:port, not origin-form '" +
           r.target + "'";
  const size_t sep = t.find("://");
  if (sep == std::string_view::npos) return "request target is not an absolute URL";
  const std::string_view scheme = t.substr(0, sep);
  if (!iequals(scheme, "http")) {
    if (iequals(scheme, "https"))
      return "https:// URLs go through CONNECT; h2gate does not originate TLS for absolute-form";
    return "unsupported URL scheme '" + std::string(scheme) + "'";
  }
  std::string_view rest = t.substr(sep + 3);
  const size_t path_start = rest.find_first_of("/?#");
  const std::string_view auth = rest.substr(0, path_start);
  if (auth.find('@') != std::string_view::npos) return "user info in URLs is not supported";
  std::string err = splitAuthority(auth, 80, &a);
  if (!err.empty()) return "URL authority '" + std::string(auth) + "': " + err;
  r.host = std::move(a.host);
  r.port = a.port;
  std::string_view path =
      path_start == std::string_view::npos ? std::string_view() : rest.substr(path_start);
  if (const size_t hash = path.find('#'); hash != std::string_view::npos)
    path = path.substr(0, hash);
  r.path = path.empty() || path.front() != '/' ? "/" + std::string(path) : std::string(path);
  if (a.changed) {
    // The target as the upstream proxy will see it: the canonical host, the
    // port if one was written, the rest unchanged.
    std::string url = "http://";
    url += r.host.find(':') != std::string::npos ? "[" + r.host + "]" : r.host;
    if (a.port_given) url += ":" + std::to_string(r.port);
    if (path_start != std::string_view::npos) url += rest.substr(path_start);
    r.target = std::move(url);
  }
  return {};
}

}  // namespace h2gate::http1
