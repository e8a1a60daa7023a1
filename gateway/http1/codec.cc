#include "gateway/http1/codec.h"

#include <array>
#include <cstdio>

#include "gateway/base/ascii.h"

namespace h2gate::http1 {
namespace {

constexpr std::array<std::string_view, 7> kHopByHop = {
    "connection", "proxy-connection",  "keep-alive", "te",
    "trailer",    "transfer-encoding", "upgrade"};

// Does any Connection header list `name` as a token?
bool namedByConnection(std::string_view name, const Headers& headers) {
  for (const Header& h : headers) {
    if (!iequals(h.name, "connection")) continue;
    std::string_view v = h.value;
    while (!v.empty()) {
      const size_t comma = v.find(',');
      if (iequals(trimOws(v.substr(0, comma)), name)) return true;
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  return false;
}

void appendHeader(std::string& out, std::string_view name, std::string_view value) {
  out.append(name).append(": ").append(value).append("\r\n");
}

}  // namespace

bool isHopByHop(std::string_view name, const Headers& headers, bool forward_proxy_authorization) {
  for (std::string_view h : kHopByHop)
    if (iequals(name, h)) return true;
  if (!forward_proxy_authorization && iequals(name, "proxy-authorization")) return true;
  return namedByConnection(name, headers);
}

std::string hostHeader(const RequestHead& req) {
  const std::string auth = req.authority();
  if (req.port != 80) return auth;
  return auth.substr(0, auth.rfind(':'));
}

void appendOriginRequest(std::string& out, const RequestHead& req, bool close_after) {
  out.append(req.method).append(" ").append(req.path).append(" HTTP/1.1\r\n");
  // RFC 9112 §3.2.2: the app's Host (one, several or none) is replaced by
  // the target's authority, the destination h2gate judged and connected to.
  appendHeader(out, "Host", hostHeader(req));
  std::string via;
  for (const Header& h : req.headers) {
    if (isHopByHop(h.name, req.headers, false)) continue;
    if (iequals(h.name, "host") || iequals(h.name, "content-length") || iequals(h.name, "expect"))
      continue;
    if (iequals(h.name, "via")) {
      via = h.value;
      continue;
    }
    appendHeader(out, h.name, h.value);
  }
  appendHeader(out, "Via", via.empty() ? std::string(kVia) : via + ", " + std::string(kVia));
  if (req.framing == BodyFraming::ContentLength)
    appendHeader(out, "Content-Length", std::to_string(req.content_length));
  else if (req.framing == BodyFraming::Chunked)
    appendHeader(out, "Transfer-Encoding", "chunked");
  if (close_after) appendHeader(out, "Connection", "close");
  out.append("\r\n");
}

void appendResponseHead(std::string& out, const ResponseHead& resp, BodyFraming framing,
                        bool keep_alive) {
  size_t size = 160;  // status line, Via, framing, Connection
  for (const Header& h : resp.headers) size += h.name.size() + h.value.size() + 4;
  out.reserve(out.size() + size);  // one allocation, not one per doubling
  out.append("HTTP/1.1 ").append(std::to_string(resp.status)).append(" ");
  out.append(resp.reason.empty() ? reasonPhrase(resp.status) : std::string_view(resp.reason));
  out.append("\r\n");
  std::string via;
  for (const Header& h : resp.headers) {
    // Proxy-Authenticate is end-to-end for us: a 407 from the upstream proxy
    // is meant for the app, which holds the credentials.
    if (isHopByHop(h.name, resp.headers, true)) continue;
    // Without a body (HEAD, 304) Content-Length describes the resource: keep it.
    if (iequals(h.name, "content-length") && framing != BodyFraming::None) continue;
    if (iequals(h.name, "via")) {
      via = h.value;
      continue;
    }
    appendHeader(out, h.name, h.value);
  }
  appendHeader(out, "Via", via.empty() ? std::string(kVia) : via + ", " + std::string(kVia));
  if (framing == BodyFraming::ContentLength)
    appendHeader(out, "Content-Length", std::to_string(resp.content_length));
  else if (framing == BodyFraming::Chunked)
    appendHeader(out, "Transfer-Encoding", "chunked");
  if (!keep_alive) appendHeader(out, "Connection", "close");
  out.append("\r\n");
}

void appendChunk(std::string& out, std::string_view data) {
  if (data.empty()) return;  // a zero-size chunk would end the body
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  out.append(size, static_cast<size_t>(n)).append(data).append("\r\n");
}

void appendLastChunk(std::string& out) {
  out.append("0\r\n\r\n");
}

std::string_view reasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 407:
      return "Proxy Authentication Required";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

std::string errorResponse(int status, std::string_view body, bool close,
                          std::string_view extra_headers) {
  std::string text(body);
  text.push_back('\n');
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reasonPhrase(status)) +
                    "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                    std::to_string(text.size()) + "\r\n";
  out += extra_headers;
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  out += text;
  return out;
}

}  // namespace h2gate::http1
