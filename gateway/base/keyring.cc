// What the keyring's two platform files share (gateway/base/keyring.h).
#include "gateway/base/keyring.h"

#include <mutex>

#include <openssl/crypto.h>

namespace h2gate::keyring {
namespace {

std::mutex& hookMutex() {
  static std::mutex m;
  return m;
}

LookupFunction& hook() {
  static LookupFunction f;
  return f;
}

}  // namespace

void Entry::clear() {
  if (password.capacity() > 0) OPENSSL_cleanse(password.data(), password.capacity());
  password.clear();
  username.clear();
}

std::string checkName(std::string_view name) {
  if (name.empty()) return "an entry's name must not be empty";
  if (name.size() > 128) return "an entry's name has at most 128 characters";
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return "an entry's name must not contain control characters";
  }
  return {};
}

Status lookup(const std::string& name, Entry* out, std::string* error) {
  LookupFunction f;
  {
    std::lock_guard lock(hookMutex());
    f = hook();
  }
  if (f) return f(name, out, error);
  return detail::lookupEntry(name, out, error);
}

void setLookupForTesting(LookupFunction f) {
  std::lock_guard lock(hookMutex());
  hook() = std::move(f);
}

}  // namespace h2gate::keyring
