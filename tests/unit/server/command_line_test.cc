// The command lines `h2gate service install` and `h2gate autostart install`
// store for Windows (gateway/server/command_line.h): quoting by the C
// runtime's rules, and the flags' file paths made absolute. Each expected
// line is written out; on Windows (under wine in unit_windows) every quoted
// line is also split again by the system's own CommandLineToArgvW, which
// must give the arguments back unchanged.
#include "gateway/server/command_line.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#if defined(_WIN32)
#include <windows.h>
// windows.h first: shellapi.h builds on its types.
#include <shellapi.h>
#endif

using namespace h2gate;
using command_line::join;
using command_line::quoteArg;
using command_line::withAbsolutePaths;

namespace {

std::string q(std::string_view a) {
  return quoteArg<char>(a);
}

#if defined(_WIN32)
// What Windows' own parser makes of `line` (argv[0] is a program path).
std::vector<std::wstring> split(const std::wstring& line) {
  int argc = 0;
  LPWSTR* argv = ::CommandLineToArgvW(line.c_str(), &argc);
  REQUIRE(argv != nullptr);
  std::vector<std::wstring> out(argv, argv + argc);
  ::LocalFree(argv);
  return out;
}
#endif

}  // namespace

TEST_CASE("command_line: quoted only when needed, by the C runtime's rules", "[server][cli]") {
  CHECK(q("plain") == "plain");
  CHECK(q("C:\\h2gate\\h2gate.yaml") == "C:\\h2gate\\h2gate.yaml");  // backslashes alone: literal
  CHECK(q("") == "\"\"");
  CHECK(q("C:\\Program Files\\h2gate\\h2gate.exe") == "\"C:\\Program Files\\h2gate\\h2gate.exe\"");
  CHECK(q("a\tb") == "\"a\tb\"");
  // A quote inside: escaped with one backslash.
  CHECK(q("say \"hi\"") == "\"say \\\"hi\\\"\"");
  // Backslashes before a quote are doubled, plus one for the quote.
  CHECK(q("a\\\"b") == "\"a\\\\\\\"b\"");
  // Backslashes before the closing quote are doubled: "C:\dir\" would end
  // in an escaped quote otherwise.
  CHECK(q("C:\\my dir\\") == "\"C:\\my dir\\\\\"");
  CHECK(q("C:\\my dir\\\\") == "\"C:\\my dir\\\\\\\\\"");
  // Backslashes in the middle stay single.
  CHECK(q("C:\\a b\\c") == "\"C:\\a b\\c\"");
}

TEST_CASE("command_line: join quotes each argument", "[server][cli]") {
  const std::vector<std::string> args = {"C:\\Program Files\\h2gate\\h2gate.exe",
                                         "autostart",
                                         "run",
                                         "-c",
                                         "C:\\Users\\Jo Doe\\AppData\\Roaming\\h2gate\\h2gate.yaml",
                                         "--log-file",
                                         "C:\\Users\\jo\\h2gate.log"};
  CHECK(join(args) ==
        "\"C:\\Program Files\\h2gate\\h2gate.exe\" autostart run -c "
        "\"C:\\Users\\Jo Doe\\AppData\\Roaming\\h2gate\\h2gate.yaml\" --log-file "
        "C:\\Users\\jo\\h2gate.log");
  CHECK(join(std::vector<std::string>{}).empty());
}

#if defined(_WIN32)
TEST_CASE("command_line: Windows' CommandLineToArgvW gives every argument back",
          "[server][cli][windows]") {
  const std::vector<std::wstring> args = {L"C:\\Program Files\\h2gate\\h2gate.exe",
                                          L"autostart",
                                          L"run",
                                          L"",
                                          L"C:\\my dir\\",
                                          L"C:\\my dir\\\\",
                                          L"say \"hi\"",
                                          L"a\\\"b",
                                          L"a\\\\\"b c",
                                          L"tab\there",
                                          L"\\\\server\\share\\h 2.yaml",
                                          L"\x00e9t\x00e9 \x4e2d"};
  const std::wstring line = join(args);
  INFO("line: " << std::string(line.begin(), line.end()));
  CHECK(split(line) == args);
}
#endif

TEST_CASE("command_line: the flags' file paths are made absolute, others kept", "[server][cli]") {
  // The injected `absolute` stands for GetFullPathNameW (the Windows callers).
  const auto absolute = [](const std::string& p) { return "C:\\work\\" + p; };
  bool has_log_file = true;
  CHECK(
      withAbsolutePaths<char>({"-c", "h2gate.yaml", "--listen", "127.0.0.1:3128", "--cacert=ca.pem",
                               "--pac", "proxy.pac", "--proxy-auth", "negotiate"},
                              absolute, &has_log_file) ==
      std::vector<std::string>{"-c", "C:\\work\\h2gate.yaml", "--listen", "127.0.0.1:3128",
                               "--cacert=C:\\work\\ca.pem", "--pac", "C:\\work\\proxy.pac",
                               "--proxy-auth", "negotiate"});
  CHECK_FALSE(has_log_file);
  // A --pac URL is no path; --log-file is noticed in both forms.
  CHECK(withAbsolutePaths<char>(
            {"--pac", "http://wpad.corp.example/wpad.dat", "--log-file", "x.log"}, absolute,
            &has_log_file) == std::vector<std::string>{"--pac", "http://wpad.corp.example/wpad.dat",
                                                       "--log-file", "C:\\work\\x.log"});
  CHECK(has_log_file);
  CHECK(withAbsolutePaths<char>({"--config=h.yaml", "--log-file=l.log", "--pac=https://x/p.pac"},
                                absolute, &has_log_file) ==
        std::vector<std::string>{"--config=C:\\work\\h.yaml", "--log-file=C:\\work\\l.log",
                                 "--pac=https://x/p.pac"});
  CHECK(has_log_file);
  // A path flag at the end without its value stays as given (parse() has
  // refused it before anyone stores it).
  CHECK(withAbsolutePaths<char>({"-c"}, absolute, &has_log_file) == std::vector<std::string>{"-c"});
  CHECK_FALSE(has_log_file);
}
