// Windows command lines, built portably so that they are unit-tested on
// every platform: what `h2gate service install` (service_win.cc) and
// `h2gate autostart install` (autostart_win.cc) store for Windows to start
// h2gate.exe with later, from another working directory.
//
// Windows passes a program one string; the C runtime (and
// CommandLineToArgvW) splits it into argv by these rules: arguments are
// separated by spaces or tabs; a double quote starts or ends a quoted part
// (spaces inside stay); 2n backslashes before a quote are n backslashes and
// the quote is special, 2n+1 are n backslashes and a literal quote;
// backslashes not before a quote are literal. quoteArg() writes the inverse.
// Templates on the character type: the Windows code quotes UTF-16
// (std::wstring) strings, the tests both kinds.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace h2gate::command_line {

// `a` quoted (only when needed: empty, or a space, tab, newline, vertical
// tab or double quote in it) so that the C runtime gives it back unchanged.
template <class Char>
std::basic_string<Char> quoteArg(std::basic_string_view<Char> a) {
  static constexpr Char kSpecial[] = {Char(' '), Char('\t'), Char('\n'), Char('\v'), Char('"'), 0};
  if (!a.empty() && a.find_first_of(kSpecial) == std::basic_string_view<Char>::npos)
    return std::basic_string<Char>(a);
  std::basic_string<Char> out(1, Char('"'));
  for (size_t i = 0;; ++i) {
    size_t backslashes = 0;
    while (i < a.size() && a[i] == Char('\\')) {
      ++i;
      ++backslashes;
    }
    if (i == a.size()) {  // before the closing quote: each doubled
      out.append(backslashes * 2, Char('\\'));
      break;
    }
    if (a[i] == Char('"'))
      out.append(backslashes * 2 + 1, Char('\\'));
    else
      out.append(backslashes, Char('\\'));
    out.push_back(a[i]);
  }
  out.push_back(Char('"'));
  return out;
}

// The arguments quoted, separated by one space: a whole command line when
// args[0] is the program's path.
template <class Char>
std::basic_string<Char> join(const std::vector<std::basic_string<Char>>& args) {
  std::basic_string<Char> out;
  for (const std::basic_string<Char>& a : args) {
    if (!out.empty()) out.push_back(Char(' '));
    out += quoteArg(std::basic_string_view<Char>(a));
  }
  return out;
}

// The flags whose value is a file: -c, --config, --cacert, --log-file, and
// --pac when its value is no URL.
inline bool isPathFlag(std::string_view name) {
  return name == "-c" || name == "--config" || name == "--cacert" || name == "--log-file" ||
         name == "--pac";
}

// h2gate's flags as given on the command line (`--flag VALUE` or
// `--flag=VALUE`), with the values of isPathFlag() flags replaced by
// absolute(value) (a URL given to --pac stays as it is). *has_log_file: a
// --log-file flag is among them. Char: the flags' character type; the flag
// names are ASCII.
template <class Char>
std::vector<std::basic_string<Char>> withAbsolutePaths(
    const std::vector<std::basic_string<Char>>& flags,
    const std::function<std::basic_string<Char>(const std::basic_string<Char>&)>& absolute,
    bool* has_log_file) {
  using String = std::basic_string<Char>;
  auto ascii = [](const String& s) {
    std::string out;
    for (Char c : s)
      out.push_back(static_cast<unsigned long>(c) < 0x80 ? static_cast<char>(c) : '?');
    return out;
  };
  auto isUrl = [](const String& v) {
    static constexpr Char kSep[] = {Char(':'), Char('/'), Char('/'), 0};
    return v.find(kSep) != String::npos;
  };
  std::vector<String> out;
  *has_log_file = false;
  for (size_t i = 0; i < flags.size(); ++i) {
    const String& f = flags[i];
    const size_t eq = f.find(Char('='));
    const bool dashes = f.size() > 2 && f[0] == Char('-') && f[1] == Char('-');
    const std::string name = ascii(dashes && eq != String::npos ? f.substr(0, eq) : f);
    if (name == "--log-file") *has_log_file = true;
    if (!isPathFlag(name)) {
      out.push_back(f);
      continue;
    }
    if (dashes && eq != String::npos) {  // --flag=VALUE
      const String value = f.substr(eq + 1);
      out.push_back(f.substr(0, eq + 1) +
                    (value.empty() || isUrl(value) ? value : absolute(value)));
      continue;
    }
    out.push_back(f);
    if (i + 1 < flags.size()) {
      const String& value = flags[++i];
      out.push_back(value.empty() || isUrl(value) ? value : absolute(value));
    }
  }
  return out;
}

}  // namespace h2gate::command_line
