#include "tests/support/scrape.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <sstream>
#include <thread>

#include "tests/support/util.h"

namespace h2gate::test {

AdminReply adminRequest(const std::string& method, uint16_t port, const std::string& path,
                        const std::vector<std::string>& headers,
                        std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> args{"-sS", "-X", method, "--max-time",
                                std::to_string(timeout.count() / 1000 + 1)};
  for (const std::string& h : headers) args.insert(args.end(), {"-H", h});
  args.insert(args.end(), {"-w", "\n%{http_code} %{content_type}",
                           "http://127.0.0.1:" + std::to_string(port) + path});
  CommandResult r = runCurl(args, timeout + std::chrono::milliseconds(5000));
  AdminReply out;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const size_t nl = r.out.rfind('\n');
  if (r.exit_code != 0 || nl == std::string::npos) return out;
  out.body = r.out.substr(0, nl);
  const std::string tail = r.out.substr(nl + 1);
  out.status = std::atoi(tail.c_str());
  if (const size_t sp = tail.find(' '); sp != std::string::npos)
    out.content_type = tail.substr(sp + 1);
  return out;
}

AdminReply adminGet(uint16_t port, const std::string& path, std::chrono::milliseconds timeout) {
  return adminRequest("GET", port, path, {}, timeout);
}

bool waitForEndpointState(uint16_t admin_port, uint16_t proxy_port, const std::string& state,
                          std::chrono::milliseconds timeout) {
  const std::string want = "127.0.0.1:" + std::to_string(proxy_port) + " state=" + state;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (adminGet(admin_port, "/clusters").body.find(want) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

AdminReply adminPost(uint16_t port, const std::string& path, std::chrono::milliseconds timeout) {
  return adminRequest("POST", port, path, {kAdminPostHeader}, timeout);
}

Scrape::Scrape(const std::string& text) : text_(text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t i = line.find_first_of("{ ");
    if (i == std::string::npos) continue;
    s.name = line.substr(0, i);
    if (line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') break;
        std::string key = line.substr(i, eq - i);
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) ++j;
          value += line[j];
        }
        s.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      i = line.find(' ', i);
      if (i == std::string::npos) continue;
    }
    s.value = std::strtod(line.c_str() + i + 1, nullptr);
    samples_.push_back(std::move(s));
  }
}

namespace {

bool matches(const Sample& s, const std::string& name,
             const std::map<std::string, std::string>& match) {
  if (s.name != name) return false;
  for (const auto& [k, v] : match) {
    auto it = s.labels.find(k);
    if (it == s.labels.end() || it->second != v) return false;
  }
  return true;
}

}  // namespace

double Scrape::sum(const std::string& name, const std::map<std::string, std::string>& match) const {
  double total = 0;
  for (const Sample& s : samples_)
    if (matches(s, name, match)) total += s.value;
  return total;
}

size_t Scrape::count(const std::string& name,
                     const std::map<std::string, std::string>& match) const {
  size_t n = 0;
  for (const Sample& s : samples_) n += matches(s, name, match);
  return n;
}

Scrape scrapeMetrics(uint16_t admin_port) {
  AdminReply r = adminGet(admin_port, "/metrics");
  REQUIRE(r.status == 200);
  return Scrape(r.body);
}

}  // namespace h2gate::test
