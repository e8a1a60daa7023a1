// WPAD candidates on POSIX: the search domains of /etc/resolv.conf and the
// host name, walked up to the registrable domain by the public suffix list
// (libpsl).
#include <libpsl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "gateway/pac_engine/wpad.h"
#include "gateway/pac_engine/wpad_posix.h"

namespace h2gate::pac {

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
  std::ifstream in("/etc/resolv.conf");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) name[0] = '\0';
  return searchDomains(text, name);
}

std::vector<std::string> wpadCandidates(std::string* why) {
  std::vector<std::string> urls = wpadUrls(systemSearchDomains());
  if (urls.empty())
    *why =
        "no DNS search domain below a public suffix to look in (resolv.conf has no usable search "
        "or domain line, and the host name has no domain)";
  return urls;
}

}  // namespace h2gate::pac
