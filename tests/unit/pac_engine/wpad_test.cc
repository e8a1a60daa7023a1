// WPAD by DNS: the search domains h2gate reads and the candidate URLs it
// makes from them, never above the registrable domain.
#include "gateway/pac_engine/wpad.h"

#include <catch2/catch.hpp>

#ifndef _WIN32
#include "gateway/pac_engine/wpad_posix.h"
#endif

using namespace h2gate::pac;

TEST_CASE("wpad: search domains from resolv.conf and the host name", "[pac][wpad]") {
  CHECK(searchDomains("nameserver 10.0.0.1\nsearch a.corp.example.com corp.example.com\n", "") ==
        std::vector<std::string>{"a.corp.example.com", "corp.example.com"});
  // The last search or domain line wins, as in glibc; comments are skipped.
  CHECK(searchDomains("search one.example\n# search commented.example\ndomain Two.Example.\n",
                      "") == std::vector<std::string>{"two.example"});
  CHECK(searchDomains("domain x.example\nsearch y.example z.example # trailing\n", "") ==
        std::vector<std::string>{"y.example", "z.example"});
  CHECK(searchDomains("search .\n", "").empty());
  // The host's own domain comes last, once.
  CHECK(searchDomains("search corp.example.com\n", "laptop.branch.corp.example.com") ==
        std::vector<std::string>{"corp.example.com", "branch.corp.example.com"});
  CHECK(searchDomains("search corp.example.com\n", "laptop.corp.example.com") ==
        std::vector<std::string>{"corp.example.com"});
  CHECK(searchDomains("", "vm").empty());
  CHECK(searchDomains("search bad_ÿ.example ok.example\n", "") ==
        std::vector<std::string>{"ok.example"});
}

// wpadUrls is the POSIX way (libpsl); Windows asks WinHTTP (wpad_win.cc).
#ifndef _WIN32
TEST_CASE("wpad: candidates walk up to the registrable domain, never past it", "[pac][wpad]") {
  CHECK(wpadUrls({"a.b.corp.example.com"}) ==
        std::vector<std::string>{
            "http://wpad.a.b.corp.example.com/wpad.dat", "http://wpad.b.corp.example.com/wpad.dat",
            "http://wpad.corp.example.com/wpad.dat", "http://wpad.example.com/wpad.dat"});
  // A multi-label public suffix: not wpad.co.uk.
  CHECK(wpadUrls({"office.example.co.uk"}) ==
        std::vector<std::string>{"http://wpad.office.example.co.uk/wpad.dat",
                                 "http://wpad.example.co.uk/wpad.dat"});
  // A registrable domain alone gives itself.
  CHECK(wpadUrls({"example.org"}) == std::vector<std::string>{"http://wpad.example.org/wpad.dat"});
  // A public suffix or a single label gives nothing.
  CHECK(wpadUrls({"co.uk"}).empty());
  CHECK(wpadUrls({"com"}).empty());
  CHECK(wpadUrls({"lan"}).empty());
  // Overlapping domains give each URL once, in order.
  CHECK(wpadUrls({"a.corp.example.test", "corp.example.test"}) ==
        std::vector<std::string>{"http://wpad.a.corp.example.test/wpad.dat",
                                 "http://wpad.corp.example.test/wpad.dat",
                                 "http://wpad.example.test/wpad.dat"});
}
#endif
