#include "tests/support/admin_post.h"

#include <cstdlib>

#include "tests/support/util.h"

namespace h2gate::test {

AdminReply adminPost(uint16_t port, const std::string& path, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  CommandResult r =
      runCurl({"-sS", "-X", "POST", "--max-time", std::to_string(timeout.count() / 1000 + 1), "-w",
               "\n%{http_code} %{content_type}", "http://127.0.0.1:" + std::to_string(port) + path},
              timeout + std::chrono::milliseconds(5000));
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

}  // namespace h2gate::test
