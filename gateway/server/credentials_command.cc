// `h2gate credentials` (gateway/server/credentials_command.h).
#include "gateway/server/credentials_command.h"

#include <ostream>
#include <string_view>

#include <openssl/crypto.h>

#include "gateway/base/keyring.h"
#include "gateway/server/terminal.h"

namespace h2gate::credentials {
namespace {

constexpr const char* kUsage = "usage: h2gate credentials set NAME USER | show NAME | delete NAME";

void wipe(std::string& s) {
  if (s.capacity() > 0) OPENSSL_cleanse(s.data(), s.capacity());
  s.clear();
}

std::string where() {
  return std::string(keyring::backendName());
}

// What a keyring call that did not succeed prints; the exit code.
int failure(const char* verb, const std::string& name, keyring::Status s, const std::string& error,
            std::ostream& err) {
  if (s == keyring::Status::NotFound)
    err << "h2gate: no entry '" << name << "' in " << where() << "\n";
  else
    err << "h2gate: credentials " << verb << " " << name << ": " << error << "\n";
  return 1;
}

int set(const std::string& name, const std::string& user, std::ostream& out, std::ostream& err) {
  const bool tty = terminal::stdinIsTerminal();
  std::string password;
  if (!terminal::readSecretLine("Password for " + user + " (entry " + name + "): ", &password)) {
    err << "h2gate: credentials set: no password read from standard input\n";
    return 1;
  }
  if (password.empty()) {
    err << "h2gate: credentials set: the password is empty\n";
    return 1;
  }
  if (tty) {
    std::string again;
    const bool same = terminal::readSecretLine("Again: ", &again) && again == password;
    wipe(again);
    if (!same) {
      err << "h2gate: credentials set: the passwords differ; nothing stored\n";
      wipe(password);
      return 1;
    }
  }
  std::string error;
  const keyring::Status s = keyring::store(name, user, password, &error);
  wipe(password);
  if (s != keyring::Status::Ok) return failure("set", name, s, error, err);
  out << "stored entry '" << name << "' (user " << user << ") in " << where() << "\n";
  return 0;
}

int show(const std::string& name, std::ostream& out, std::ostream& err) {
  keyring::Entry entry;
  std::string error;
  const keyring::Status s = keyring::lookup(name, &entry, &error);
  if (s != keyring::Status::Ok) return failure("show", name, s, error, err);
  out << "entry '" << name << "' in " << where() << ": user "
      << (entry.username.empty() ? std::string("(none)") : entry.username)
      << ", a password is stored\n";
  return 0;
}

int remove(const std::string& name, std::ostream& out, std::ostream& err) {
  std::string error;
  const keyring::Status s = keyring::remove(name, &error);
  if (s != keyring::Status::Ok) return failure("delete", name, s, error, err);
  out << "deleted entry '" << name << "' from " << where() << "\n";
  return 0;
}

}  // namespace

bool isCommand(int argc, const char* const* argv) {
  return argc >= 2 && std::string_view(argv[1]) == "credentials";
}

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::string action = args.empty() ? std::string() : args[0];
  const std::size_t want = action == "set" ? 3 : (action == "show" || action == "delete") ? 2 : 0;
  if (want == 0 || args.size() != want) {
    err << "h2gate: " << kUsage << "\n";
    return 2;
  }
  const std::string& name = args[1];
  if (std::string why = keyring::checkName(name); !why.empty()) {
    err << "h2gate: credentials " << action << ": " << why << "\n";
    return 2;
  }
  if (action == "set") {
    const std::string& user = args[2];
    if (user.empty()) {
      err << "h2gate: credentials set: the user name must not be empty\n";
      return 2;
    }
    return set(name, user, out, err);
  }
  if (action == "show") return show(name, out, err);
  return remove(name, out, err);
}

}  // namespace h2gate::credentials
