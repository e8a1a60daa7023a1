// Windows Credential Manager as h2gate's keyring (gateway/base/keyring_win.cc),
// the real advapi32 calls (under wine in the cross build's tests): an
// entry stored, read, replaced and deleted; what CredReadW itself sees of
// it (a generic credential h2gate:NAME, the password as UTF-16, as cmdkey
// writes it); and one that cmdkey's way of writing makes, read back.
#ifdef _WIN32

#include <windows.h>

#include <wincred.h>

#include <string>

#include <catch2/catch.hpp>

#include "gateway/base/keyring.h"

using namespace h2gate;

namespace {

// A name no other test run uses.
std::string uniqueName(const char* what) {
  return std::string("h2gate-test-") + what + "-" + std::to_string(GetCurrentProcessId());
}

}  // namespace

TEST_CASE("keyring (Credential Manager): store, look up, replace, delete", "[keyring]") {
  const std::string name = uniqueName("round-trip");
  std::string error;
  keyring::Entry e;
  REQUIRE(keyring::lookup(name, &e, &error) == keyring::Status::NotFound);

  REQUIRE(keyring::store(name, "CORP\\alice", "pä55 wörd", &error) == keyring::Status::Ok);
  INFO(error);
  REQUIRE(keyring::lookup(name, &e, &error) == keyring::Status::Ok);
  CHECK(e.username == "CORP\\alice");
  CHECK(e.password == "pä55 wörd");

  // What Credential Manager holds: the generic credential h2gate:NAME.
  const std::wstring target = L"h2gate:" + std::wstring(name.begin(), name.end());
  PCREDENTIALW c = nullptr;
  REQUIRE(CredReadW(target.c_str(), CRED_TYPE_GENERIC, 0, &c));
  CHECK(std::wstring(c->UserName) == L"CORP\\alice");
  CHECK(std::wstring(reinterpret_cast<const wchar_t*>(c->CredentialBlob),
                     c->CredentialBlobSize / sizeof(wchar_t)) == L"p\u00e455 w\u00f6rd");
  CredFree(c);

  // Stored again: replaced, not a second entry.
  e.clear();
  REQUIRE(keyring::store(name, "bob", "second", &error) == keyring::Status::Ok);
  REQUIRE(keyring::lookup(name, &e, &error) == keyring::Status::Ok);
  CHECK(e.username == "bob");
  CHECK(e.password == "second");

  REQUIRE(keyring::remove(name, &error) == keyring::Status::Ok);
  CHECK(keyring::lookup(name, &e, &error) == keyring::Status::NotFound);
  CHECK(keyring::remove(name, &error) == keyring::Status::NotFound);
  CHECK(CredReadW(target.c_str(), CRED_TYPE_GENERIC, 0, &c) == FALSE);
  CHECK(GetLastError() == ERROR_NOT_FOUND);
}

TEST_CASE("keyring (Credential Manager): an entry written as cmdkey writes it", "[keyring]") {
  // cmdkey /generic:h2gate:NAME /user:USER /pass:PASSWORD: a generic
  // credential with the password as UTF-16, persisted for the logon session
  // or the machine.
  const std::string name = uniqueName("cmdkey");
  std::wstring target = L"h2gate:" + std::wstring(name.begin(), name.end());
  std::wstring user = L"carol";
  std::wstring password = L"from-cmdkey";
  CREDENTIALW c{};
  c.Type = CRED_TYPE_GENERIC;
  c.TargetName = target.data();
  c.UserName = user.data();
  c.CredentialBlob = reinterpret_cast<LPBYTE>(password.data());
  c.CredentialBlobSize = static_cast<DWORD>(password.size() * sizeof(wchar_t));
  c.Persist = CRED_PERSIST_ENTERPRISE;
  REQUIRE(CredWriteW(&c, 0));
  keyring::Entry e;
  std::string error;
  REQUIRE(keyring::lookup(name, &e, &error) == keyring::Status::Ok);
  CHECK(e.username == "carol");
  CHECK(e.password == "from-cmdkey");
  CHECK(keyring::remove(name, &error) == keyring::Status::Ok);
}

#endif  // _WIN32
