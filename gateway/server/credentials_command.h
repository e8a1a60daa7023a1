// `h2gate credentials set|show|delete`: proxy credentials in the system's
// keyring (gateway/base/keyring.h), for a config's `credentials: {keyring:
// NAME}` and the flag --proxy-credentials keyring:NAME (config/README.md).
//
//   h2gate credentials set NAME USER   the password from standard input: a
//                                      terminal asks twice, without echo;
//                                      a pipe gives one line
//   h2gate credentials show NAME       the user name and that a password is
//                                      stored (never the password); exit 1
//                                      when there is no such entry
//   h2gate credentials delete NAME     exit 1 when there was none
//
// Exit status: 0 done, 1 absent entry or a keyring error, 2 a usage error.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace h2gate::credentials {

// Whether argv names this command (argv[1] is "credentials").
bool isCommand(int argc, const char* const* argv);

// Runs it: `args` are the words after "credentials". Messages go to `out`
// (results) and `err` (problems); the password is read with
// terminal::readSecretLine() (gateway/server/terminal.h).
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace h2gate::credentials
