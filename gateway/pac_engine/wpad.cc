#include "gateway/pac_engine/wpad.h"

#include <algorithm>
#include <sstream>

#include "gateway/base/ascii.h"

namespace h2gate::pac {
namespace {

std::string normalized(std::string_view d) {
  std::string out = toLowerAscii(d);
  while (!out.empty() && out.back() == '.') out.pop_back();
  while (!out.empty() && out.front() == '.') out.erase(out.begin());
  return out;
}

bool plausibleDomain(std::string_view d) {
  if (d.empty() || d.size() > 253) return false;
  for (char c : d)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'))
      return false;
  return d.find("..") == std::string_view::npos;
}

void addUnique(std::vector<std::string>& out, std::string d) {
  if (plausibleDomain(d) && std::find(out.begin(), out.end(), d) == out.end())
    out.push_back(std::move(d));
}

}  // namespace

std::vector<std::string> searchDomains(std::string_view resolv_conf, std::string_view hostname) {
  std::vector<std::string> last;
  std::istringstream in{std::string(resolv_conf)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string keyword;
    if (!(words >> keyword) || keyword[0] == '#' || keyword[0] == ';') continue;
    if (keyword != "search" && keyword != "domain") continue;
    last.clear();
    std::string d;
    while (words >> d) {
      if (d[0] == '#' || d[0] == ';') break;
      last.push_back(normalized(d));
      if (keyword == "domain") break;
    }
  }
  std::vector<std::string> out;
  for (std::string& d : last) addUnique(out, std::move(d));
  if (const std::size_t dot = hostname.find('.'); dot != std::string_view::npos)
    addUnique(out, normalized(hostname.substr(dot + 1)));
  return out;
}

}  // namespace h2gate::pac
