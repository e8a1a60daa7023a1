#include "filters/proxy_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>

#include "gateway/base/ascii.h"

namespace h2gate::filters {
namespace {

// Longest Proxy-Authorization value looked at; longer ones are refused
// without decoding (no user has a 6 KiB password).
constexpr std::size_t kMaxCredentials = 8192;

}  // namespace

ProxyAuthFilter::ProxyAuthFilter(std::string realm, std::vector<Digest> users)
    : challenge_("Proxy-Authenticate: Basic realm=\"" + realm + "\", charset=\"UTF-8\"\r\n"),
      users_(std::move(users)) {}

ProxyAuthFilter::Digest ProxyAuthFilter::digest(std::string_view text) {
  Digest d{};
  unsigned int n = 0;
  EVP_Digest(text.data(), text.size(), d.data(), &n, EVP_sha256(), nullptr);
  return d;
}

bool ProxyAuthFilter::accepts(std::string_view header) const {
  header = trimOws(header);
  constexpr std::string_view kScheme = "basic ";
  if (header.size() <= kScheme.size() || header.size() > kMaxCredentials ||
      !istartsWith(header, kScheme))
    return false;
  const std::string_view encoded = trimOws(header.substr(kScheme.size()));
  if (encoded.empty() || encoded.size() % 4 != 0) return false;
  unsigned char decoded[kMaxCredentials];
  const int n = EVP_DecodeBlock(decoded, reinterpret_cast<const unsigned char*>(encoded.data()),
                                static_cast<int>(encoded.size()));
  if (n < 0) return false;
  // EVP_DecodeBlock counts the bytes the '=' padding stands for.
  std::size_t len = static_cast<std::size_t>(n);
  for (std::size_t i = encoded.size(); i > 0 && encoded[i - 1] == '='; --i) --len;
  const Digest got = digest(std::string_view(reinterpret_cast<const char*>(decoded), len));
  bool ok = false;
  for (const Digest& want : users_)  // no early exit: every user costs the same
    ok |= CRYPTO_memcmp(got.data(), want.data(), got.size()) == 0;
  return ok;
}

FilterStatus ProxyAuthFilter::onRequestHead(const RequestHead& head, StreamInfo& info) const {
  const Header* h = findHeader(head.headers, "proxy-authorization");
  if (h && accepts(h->value)) return FilterStatus::Continue;
  info.status = 407;
  info.reason = h ? "proxy authentication failed: wrong credentials"
                  : "proxy authentication required (Basic)";
  info.reply_headers = challenge_;
  return FilterStatus::Stop;
}

FilterPtr createProxyAuth(config::NodeReader& r, const FactoryContext&) {
  if (!r.expectMap()) return nullptr;
  const std::size_t before = r.diagnostics().problems().size();
  r.allowOnly({"@type", "realm", "users"});
  r.expectType(kProxyAuthType);
  std::string realm = "h2gate";
  if (auto v = r.string("realm")) {
    if (v->empty() || v->find_first_of("\"\\\r\n") != std::string::npos)
      r.errorAt("realm", "must be non-empty, without quotes, backslashes or line breaks");
    else
      realm = *v;
  }
  std::vector<ProxyAuthFilter::Digest> users;
  std::vector<std::string> names;
  for (config::NodeReader& u : r.list("users", true)) {
    if (!u.expectMap()) continue;
    u.allowOnly({"username", "password"});
    auto user = u.string("username", true);
    auto pass = u.string("password", true);
    if (user && (user->empty() || user->find(':') != std::string::npos)) {
      u.errorAt("username", "must be non-empty and without ':' (RFC 7617)");
      continue;
    }
    if (pass && pass->empty()) u.errorAt("password", "must not be empty");
    if (user && std::find(names.begin(), names.end(), *user) != names.end())
      u.errorAt("username", "user '" + *user + "' is listed twice");
    if (user && pass) {
      names.push_back(*user);
      users.push_back(ProxyAuthFilter::digest(*user + ":" + *pass));
    }
  }
  if (r.has("users") && users.empty() && r.diagnostics().problems().size() == before)
    r.errorAt("users", "needs at least one user");
  if (r.diagnostics().problems().size() != before) return nullptr;
  return std::make_shared<ProxyAuthFilter>(std::move(realm), std::move(users));
}

}  // namespace h2gate::filters
