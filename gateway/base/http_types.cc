#include "gateway/base/http_types.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

namespace h2gate {

const Header* findHeader(const Headers& headers, std::string_view name) {
  for (const Header& h : headers) {
    if (iequals(h.name, name)) return &h;
  }
  return nullptr;
}

std::string basicCredentials(std::string_view user, std::string_view password) {
  std::string plain;
  plain.reserve(user.size() + 1 + password.size());
  plain.append(user).append(1, ':').append(password);
  std::string out(4 * ((plain.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(plain.data()),
                                static_cast<int>(plain.size()));
  OPENSSL_cleanse(plain.data(), plain.size());
  out.resize(static_cast<size_t>(n));
  return "Basic " + out;
}

std::string RequestHead::authority() const {
  const std::string p = std::to_string(port);
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + p;
  return host + ":" + p;
}

std::string_view resultName(Result r) {
  // Metric label values: keep them stable.
  switch (r) {
    case Result::Ok:
      return "ok";
    case Result::Rejected:
      return "rejected";
    case Result::BadRequest:
      return "bad_request";
    case Result::DnsFailed:
      return "dns_failed";
    case Result::ConnectFailed:
      return "connect_failed";
    case Result::ConnectTimeout:
      return "connect_timeout";
    case Result::UpstreamReset:
      return "upstream_reset";
    case Result::DownstreamReset:
      return "downstream_reset";
    case Result::Drained:
      return "drained";
    case Result::StreamIdleTimeout:
      return "stream_idle_timeout";
  }
  return "unknown";
}

}  // namespace h2gate
