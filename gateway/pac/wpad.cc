#include "gateway/pac/wpad.h"

#include <libpsl.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#ifdef _WIN32
#include <winsock2.h>
#else
#include <unistd.h>
#endif

namespace h2gate::pac {
namespace {

std::string normalized(std::string_view d) {
  std::string out(d);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
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

std::vector<std::string> wpadUrls(const std::vector<std::string>& domains) {
  // The list compiled into libpsl, or the newer one of Debian's
  // publicsuffix package when it is installed.
  static const psl_ctx_t* psl = psl_latest(nullptr);
  std::vector<std::string> urls;
  for (const std::string& domain : domains) {
    const char* reg = psl ? psl_registrable_domain(psl, domain.c_str()) : nullptr;
    if (reg == nullptr) continue;  // a public suffix itself, or a single label
    const std::string registrable = reg;
    std::string d = domain;
    while (true) {
      const std::string url = "http://wpad." + d + "/wpad.dat";
      if (std::find(urls.begin(), urls.end(), url) == urls.end()) urls.push_back(url);
      if (d.size() <= registrable.size()) break;
      d = d.substr(d.find('.') + 1);
    }
  }
  return urls;
}

std::vector<std::string> systemSearchDomains() {
  std::string text;
#ifndef _WIN32
  std::ifstream in("/etc/resolv.conf");
  std::stringstream ss;
  ss << in.rdbuf();
  text = ss.str();
#endif
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) name[0] = '\0';
  return searchDomains(text, name);
}

}  // namespace h2gate::pac
