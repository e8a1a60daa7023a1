// Writing HTTP/1.1 heads and bodies, and the hop-by-hop rules of RFC 9110
// §7.6.1 for a forward proxy.
#pragma once

#include <string>
#include <string_view>

#include "gateway/base/http_types.h"

namespace h2gate::http1 {

inline constexpr std::string_view kVia = "1.1 h2gate";

// True for headers that describe one hop and must not be forwarded:
// Connection, Proxy-Connection, Keep-Alive, TE, Trailer, Transfer-Encoding,
// Upgrade, and any header named in a Connection header of `headers`.
// Proxy-Authorization is hop-by-hop too unless forward_proxy_authorization.
bool isHopByHop(std::string_view name, const Headers& headers, bool forward_proxy_authorization);

// The Host header for a request to `req`'s target: its authority, without
// the port when it is 80 ("example.com", "[::1]:8080").
std::string hostHeader(const RequestHead& req);

// Request head in origin-form for an origin server ("GET /path HTTP/1.1"),
// hop-by-hop headers removed, Host replaced by hostHeader(req) (whatever the
// app sent: RFC 9112 §3.2.2), Via added, Expect dropped (the proxy answers
// 100-continue itself), framing from req.framing (Content-Length or chunked).
void appendOriginRequest(std::string& out, const RequestHead& req, bool close_after);

// Response head for the app. `framing` is how h2gate will frame the body
// towards the app (it may differ from the upstream's). Hop-by-hop headers of
// the upstream response are removed and Via added.
void appendResponseHead(std::string& out, const ResponseHead& resp, BodyFraming framing,
                        bool keep_alive);

void appendChunk(std::string& out, std::string_view data);
void appendLastChunk(std::string& out);

// A complete short error response with a text/plain body ending in "\n".
// `extra_headers` are whole header lines ("Name: value\r\n"), may be empty.
std::string errorResponse(int status, std::string_view body, bool close,
                          std::string_view extra_headers = {});
std::string_view reasonPhrase(int status);

}  // namespace h2gate::http1
