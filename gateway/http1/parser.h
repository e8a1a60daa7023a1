// HTTP/1.x message parsing with llhttp, for app requests (downstream) and
// origin responses (direct mode).
//
// The parser is driven in steps: feed() consumes bytes until something the
// caller must act on happens (head complete, body bytes, message complete,
// error) and reports how many bytes it consumed. It pauses at the end of the
// head and at the end of a message so the caller can decide what the bytes
// after them mean (a tunnel's first bytes after CONNECT, a pipelined request).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <llhttp.h>

#include "gateway/base/http_types.h"

namespace h2gate::http1 {

struct Limits {
  size_t max_head_bytes = 64 * 1024;  // request line/status line + headers
  size_t max_headers = 100;
};

enum class Event {
  NeedMore,         // all input consumed, nothing to report
  HeadComplete,     // head() is valid; for CONNECT the rest is tunnel data
  Body,             // body bytes were appended to the caller's buffer
  MessageComplete,  // the message (head + body) is done
  Error,            // errorStatus()/errorReason() say why; the parser is dead
};

class Parser {
 public:
  enum class Kind { Request, Response };
  Parser(Kind kind, Limits limits);
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;

  // Parses data[0, len). Body bytes (decoded: no chunk framing) are appended
  // to *body. Returns the event and sets *consumed. Body events are merged:
  // one call may append several chunks and still return Body.
  Event feed(const char* data, size_t len, size_t* consumed, std::string* body);
  // The peer closed. Completes a close-delimited message (MessageComplete) or
  // reports a truncated one (Error); NeedMore if nothing was in progress.
  Event finish();

  // For responses: the request method was HEAD (or CONNECT with a 2xx), so the
  // next response has no body. Set before feeding the response.
  void expectNoBody(bool no_body) { expect_no_body_ = no_body; }
  // For responses: the request was CONNECT, so a 2xx ends at its head and
  // what follows is tunnel data.
  void expectConnectResponse(bool connect) { connect_response_ = connect; }

  // Valid after HeadComplete (requests: method, target, http_minor, headers,
  // framing, content_length, keep_alive; is_connect/host/port/path are filled
  // by parseTarget()).
  const RequestHead& request() const { return request_; }
  RequestHead& request() { return request_; }
  const ResponseHead& response() const { return response_; }
  // After MessageComplete: whether the connection may carry another message.
  bool keepAlive() const { return keep_alive_; }
  bool inMessage() const { return in_message_; }
  // A new message's head has started arriving and is not complete yet.
  bool inHead() const { return in_head_; }

  // After Error: 400 for malformed input, 431 for limits, 501 for a request
  // transfer coding other than chunked (RFC 9112 §6.1).
  int errorStatus() const { return error_status_; }
  const std::string& errorReason() const { return error_reason_; }

 private:
  static int onMessageBegin(llhttp_t*);
  static int onUrl(llhttp_t*, const char*, size_t);
  static int onStatus(llhttp_t*, const char*, size_t);
  static int onHeaderField(llhttp_t*, const char*, size_t);
  static int onHeaderValue(llhttp_t*, const char*, size_t);
  static int onHeaderValueComplete(llhttp_t*);
  static int onHeadersComplete(llhttp_t*);
  static int onBody(llhttp_t*, const char*, size_t);
  static int onMessageComplete(llhttp_t*);
  static Parser& self(llhttp_t* p) { return *static_cast<Parser*>(p->data); }
  // The header list of the message being parsed.
  Headers& headers() { return kind_ == Kind::Request ? request_.headers : response_.headers; }
  Event fail(int status, std::string reason);
  // A head or message completion the callbacks noted and feed() has not
  // reported yet (the head first), cleared as it is returned.
  std::optional<Event> takeCompletion();

  llhttp_t parser_;
  llhttp_settings_t settings_;
  Kind kind_;
  Limits limits_;
  RequestHead request_;
  ResponseHead response_;
  std::string* body_out_ = nullptr;
  size_t head_bytes_ = 0;
  bool in_head_ = false;
  bool in_message_ = false;
  bool head_done_ = false;     // set by the callback, reported by feed()
  bool message_done_ = false;  // idem
  bool got_body_ = false;
  bool value_pending_ = false;  // a header field was seen, its value not yet done
  bool expect_no_body_ = false;
  bool connect_response_ = false;
  bool keep_alive_ = true;
  bool dead_ = false;
  int error_status_ = 0;
  std::string error_reason_;
};

// Fills is_connect/host/port/path from request.method/target. Authority-form
// for CONNECT ("host:port", IPv6 in brackets, port required), absolute-form
// "http://host[:port]/path" otherwise. The host comes out canonical
// (net::canonicalRequestHost: "0x7f.1" and "[::ffff:127.0.0.1]" are
// 127.0.0.1), and when that differs from what the app wrote, `target` is
// rewritten with it. Returns "" or a reason for a 400: origin-form "GET /"
// sent to a proxy, a target with bytes outside visible ASCII (TAB, form
// feed, 0x80-0xFF), a host that ends in a number but is no IPv4 address,
// the unspecified address.
std::string parseTarget(RequestHead& request);

}  // namespace h2gate::http1
