#include "config/config.h"

#include <openssl/crypto.h>

namespace h2gate::config {

void wipe(std::string& s) {
  // The whole capacity: bytes beyond size() may hold an older, longer value.
  if (s.capacity() > 0) OPENSSL_cleanse(s.data(), s.capacity());
  s.clear();
}

ProxyCredentials& ProxyCredentials::operator=(const ProxyCredentials& other) {
  if (this == &other) return *this;
  wipe(password);
  username = other.username;
  password = other.password;
  password_file = other.password_file;
  keyring = other.keyring;
  return *this;
}

ProxyCredentials& ProxyCredentials::operator=(ProxyCredentials&& other) noexcept {
  if (this == &other) return *this;
  wipe(password);
  username = std::move(other.username);
  password = std::move(other.password);
  password_file = std::move(other.password_file);
  keyring = std::move(other.keyring);
  return *this;
}

ProxyCredentials::~ProxyCredentials() {
  wipe(password);
}

std::string_view schemeName(ProxyAuthentication::Scheme s) {
  switch (s) {
    case ProxyAuthentication::Scheme::Auto:
      return "auto";
    case ProxyAuthentication::Scheme::Negotiate:
      return "negotiate";
    case ProxyAuthentication::Scheme::Ntlm:
      return "ntlm";
    case ProxyAuthentication::Scheme::Basic:
      return "basic";
  }
  return "auto";
}

std::string authenticationText(const Cluster& c) {
  if (!c.authentication) return c.credentials ? "basic" : "";
  const ProxyAuthentication& a = *c.authentication;
  std::string text(schemeName(a.scheme));
  if (a.scheme != ProxyAuthentication::Scheme::Negotiate &&
      a.scheme != ProxyAuthentication::Scheme::Auto)
    return text;
  if (!a.client_keytab.empty()) return text + " (Kerberos keytab " + a.client_keytab + ")";
  // gateway/upstream/auth/gssapi_posix.cc, PasswordTgt.
  if (c.credentials)
    return text + " (Kerberos tickets got with the password of '" +
           (a.principal.empty() ? c.credentials->username : a.principal) + "', no kinit)";
  return text;
}

}  // namespace h2gate::config
