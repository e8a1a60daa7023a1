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

}  // namespace h2gate::config
