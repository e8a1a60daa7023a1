// The system's keyring, for proxy credentials kept outside the config file:
// a config's `credentials: {keyring: NAME}` (config/README.md) and
// `h2gate credentials set|show|delete` (gateway/server/credentials_command.h).
//
// An entry has a name the user chooses ("corp", a proxy's host name) and
// holds a user name and a password. Where entries live:
//   keyring_posix.cc  the Secret Service on the D-Bus session bus (libsecret:
//                     GNOME Keyring, KWallet, KeePassXC), items of the schema
//                     kSecretSchema with the attributes "entry" (the name) and
//                     "username", in the default collection ("login").
//   keyring_win.cc    Windows Credential Manager: a generic credential
//                     "h2gate:NAME" (CredWriteW/CredReadW/CredDeleteW), the
//                     password as UTF-16 as `cmdkey /generic:h2gate:NAME
//                     /user:USER /pass` writes it.
//
// Every operation returns within kTimeout: a Secret Service that does not
// answer, or a locked keyring whose unlock prompt nobody can see, gives an
// error that names the cause and what to do instead, never a hang. Errors
// never contain the password.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace h2gate::keyring {

inline constexpr std::chrono::seconds kTimeout{10};
inline constexpr const char* kSecretSchema = "org.h2gate.ProxyCredentials";

// What an entry holds. The password is overwritten (OPENSSL_cleanse) when
// the Entry is destroyed or cleared.
struct Entry {
  std::string username;
  std::string password;

  Entry() = default;
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
  ~Entry() { clear(); }
  void clear();
};

enum class Status {
  Ok,
  NotFound,  // no entry of that name
  Failed,    // no keyring, a locked one, no answer in time: *error says which
};

// Where the entries are kept, for messages: "the Secret Service" or
// "Windows Credential Manager".
std::string_view backendName();

// Creates or replaces entry `name`. Ok or Failed (with *error).
Status store(const std::string& name, const std::string& username, const std::string& password,
             std::string* error);
// Fills *out (Ok), or NotFound, or Failed with *error.
Status lookup(const std::string& name, Entry* out, std::string* error);
// Deletes entry `name`: Ok, NotFound, or Failed with *error.
Status remove(const std::string& name, std::string* error);

// A name as an entry may have: 1 to 128 characters, none of them a control
// character. "" when fine, else why not.
std::string checkName(std::string_view name);

// For the unit tests of the code that reads entries (config's parser,
// tests/unit/config/): lookup() calls `f` instead of the keyring while it
// is set; an empty function restores the keyring.
using LookupFunction = std::function<Status(const std::string&, Entry*, std::string*)>;
void setLookupForTesting(LookupFunction f);

namespace detail {
// lookup() without the test hook: keyring_posix.cc or keyring_win.cc.
Status lookupEntry(const std::string& name, Entry* out, std::string* error);
}  // namespace detail

}  // namespace h2gate::keyring
