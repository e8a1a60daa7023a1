#include "gateway/upstream/proxy_request.h"

#include <openssl/evp.h>

#include <algorithm>

#include "gateway/http1/codec.h"

namespace h2gate::upstream {

std::string basicCredentials(const config::ProxyCredentials& c) {
  const std::string plain = c.username + ":" + c.password;
  std::string out(4 * ((plain.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(plain.data()),
                                static_cast<int>(plain.size()));
  out.resize(static_cast<size_t>(n));
  return "Basic " + out;
}

Headers forwardedHeaders(const RequestHead& head, const config::Cluster& cluster, bool lowercase) {
  Headers out;
  std::string via;
  for (const Header& h : head.headers) {
    if (http1::isHopByHop(h.name, head.headers, false)) continue;
    if (iequals(h.name, "host") || iequals(h.name, "content-length") || iequals(h.name, "expect"))
      continue;
    if (iequals(h.name, "via")) {
      via = h.value;
      continue;
    }
    Header copy = h;
    if (lowercase)
      std::transform(copy.name.begin(), copy.name.end(), copy.name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    out.push_back(std::move(copy));
  }
  if (!head.is_connect) {
    const std::string ours(http1::kVia);
    out.push_back({lowercase ? "via" : "Via", via.empty() ? ours : via + ", " + ours});
  }
  if (cluster.credentials)
    out.push_back({lowercase ? "proxy-authorization" : "Proxy-Authorization",
                   basicCredentials(*cluster.credentials)});
  return out;
}

}  // namespace h2gate::upstream
