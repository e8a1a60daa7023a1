#include "tests/support/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tests/support/process.h"
#include "tests/support/util.h"

namespace h2gate::test {

bool haveNetns(std::string* why) {
  if (::geteuid() != 0) {
    *why = "needs root (network namespaces)";
    return false;
  }
  if (findProgram("ip").empty() || runCommand({"ip", "netns", "list"}).exit_code != 0) {
    *why = "`ip netns` is unavailable";
    return false;
  }
  return true;
}

InNetns::InNetns(const std::string& tag) : name_("h2g-" + tag + "-" + std::to_string(::getpid())) {
  runCommand({"ip", "netns", "del", name_});
  if (runCommand({"ip", "netns", "add", name_}).exit_code != 0) {
    error_ = "ip netns add " + name_ + " failed";
    return;
  }
  runCommand({"ip", "-n", name_, "link", "set", "lo", "up"});
  original_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  const int fd = ::open(("/run/netns/" + name_).c_str(), O_RDONLY | O_CLOEXEC);
  if (original_ < 0 || fd < 0 || ::setns(fd, CLONE_NEWNET) != 0)
    error_ = std::string("setns: ") + std::strerror(errno);
  if (fd >= 0) ::close(fd);
}

InNetns::~InNetns() {
  if (original_ >= 0) {
    ::setns(original_, CLONE_NEWNET);
    ::close(original_);
  }
  runCommand({"ip", "netns", "del", name_});
}

bool InNetns::ip(std::vector<std::string> args) const {
  args.insert(args.begin(), {"ip", "-n", name_});
  return runCommand(args).exit_code == 0;
}

}  // namespace h2gate::test
