// The keyring on Windows: Credential Manager (advapi32's CredWriteW,
// CredReadW, CredDeleteW), a generic credential "h2gate:NAME" per entry,
// kept for the logged-on user (CRED_PERSIST_LOCAL_MACHINE: this machine,
// not roaming). The password is stored as UTF-16, as `cmdkey
// /generic:h2gate:NAME /user:USER /pass` writes it, so either tool can
// create the entry. See gateway/base/keyring.h.
//
// These calls are local (the Credential Manager service, no prompt), so
// they need no thread of their own to stay within kTimeout.
#include "gateway/base/keyring.h"

#include <windows.h>

#include <wincred.h>

#include <string>

namespace h2gate::keyring {
namespace {

constexpr const char* kInstead = "use password_file or ${ENV} instead";

std::wstring widen(const std::string& s) {
  if (s.empty()) return {};
  const int n = MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), nullptr, 0);
  std::wstring w(static_cast<size_t>(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), w.data(), n);
  return w;
}

std::string narrow(const wchar_t* w, size_t len) {
  if (len == 0) return {};
  const int n =
      WideCharToMultiByte(CP_UTF8, 0, w, static_cast<int>(len), nullptr, 0, nullptr, nullptr);
  std::string s(static_cast<size_t>(n), '\0');
  WideCharToMultiByte(CP_UTF8, 0, w, static_cast<int>(len), s.data(), n, nullptr, nullptr);
  return s;
}

void wipe(std::wstring& w) {
  if (w.capacity() > 0) SecureZeroMemory(w.data(), w.capacity() * sizeof(wchar_t));
  w.clear();
}

std::wstring target(const std::string& name) {
  return widen("h2gate:" + name);
}

std::string failure(const char* what, DWORD code) {
  std::string text =
      "Credential Manager failed to " + std::string(what) + " (error " + std::to_string(code);
  wchar_t* msg = nullptr;
  if (FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM |
                         FORMAT_MESSAGE_IGNORE_INSERTS,
                     nullptr, code, 0, reinterpret_cast<wchar_t*>(&msg), 0, nullptr) > 0 &&
      msg != nullptr) {
    std::string m = narrow(msg, wcslen(msg));
    while (!m.empty() && (m.back() == '\n' || m.back() == '\r' || m.back() == ' ')) m.pop_back();
    text += ": " + m;
  }
  if (msg != nullptr) LocalFree(msg);
  text += ")";
  if (code == ERROR_NO_SUCH_LOGON_SESSION)
    text += ": this logon session has no credential store (a service account?); " +
            std::string(kInstead);
  return text;
}

}  // namespace

std::string_view backendName() {
  return "Windows Credential Manager";
}

Status store(const std::string& name, const std::string& username, const std::string& password,
             std::string* error) {
  std::wstring t = target(name);
  std::wstring user = widen(username);
  std::wstring pass = widen(password);
  if (pass.size() * sizeof(wchar_t) > CRED_MAX_CREDENTIAL_BLOB_SIZE) {
    wipe(pass);
    *error = "the password is too long for Credential Manager (at most " +
             std::to_string(CRED_MAX_CREDENTIAL_BLOB_SIZE / sizeof(wchar_t)) + " characters)";
    return Status::Failed;
  }
  CREDENTIALW c{};
  c.Type = CRED_TYPE_GENERIC;
  c.TargetName = t.data();
  c.UserName = user.data();
  c.CredentialBlobSize = static_cast<DWORD>(pass.size() * sizeof(wchar_t));
  c.CredentialBlob = reinterpret_cast<LPBYTE>(pass.data());
  c.Persist = CRED_PERSIST_LOCAL_MACHINE;
  std::wstring comment = L"h2gate proxy credentials";
  c.Comment = comment.data();
  const BOOL ok = CredWriteW(&c, 0);
  const DWORD code = ok ? 0 : GetLastError();
  wipe(pass);
  if (ok) return Status::Ok;
  *error = failure("store the entry", code);
  return Status::Failed;
}

Status remove(const std::string& name, std::string* error) {
  const std::wstring t = target(name);
  if (CredDeleteW(t.c_str(), CRED_TYPE_GENERIC, 0)) return Status::Ok;
  const DWORD code = GetLastError();
  if (code == ERROR_NOT_FOUND) return Status::NotFound;
  *error = failure("delete the entry", code);
  return Status::Failed;
}

namespace detail {

Status lookupEntry(const std::string& name, Entry* out, std::string* error) {
  const std::wstring t = target(name);
  PCREDENTIALW c = nullptr;
  if (!CredReadW(t.c_str(), CRED_TYPE_GENERIC, 0, &c)) {
    const DWORD code = GetLastError();
    if (code == ERROR_NOT_FOUND) return Status::NotFound;
    *error = failure("read the entry", code);
    return Status::Failed;
  }
  Status s = Status::Ok;
  if (c->CredentialBlobSize % sizeof(wchar_t) != 0) {
    *error = "the entry's password is not UTF-16 text (written by another program?)";
    s = Status::Failed;
  } else {
    out->password = narrow(reinterpret_cast<const wchar_t*>(c->CredentialBlob),
                           c->CredentialBlobSize / sizeof(wchar_t));
    if (c->UserName != nullptr) out->username = narrow(c->UserName, wcslen(c->UserName));
  }
  if (c->CredentialBlob != nullptr) SecureZeroMemory(c->CredentialBlob, c->CredentialBlobSize);
  CredFree(c);
  return s;
}

}  // namespace detail
}  // namespace h2gate::keyring
