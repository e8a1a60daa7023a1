// Running a test inside a network namespace of its own: the calling thread
// (the test's main thread) moves into a fresh namespace with loopback up, so
// every process and thread it starts afterwards (nginx, squid, h2gate, curl)
// runs there, and `ip addr add` changes only that namespace. Needs root and
// `ip netns`.
#pragma once

#include <string>
#include <vector>

namespace h2gate::test {

// True when network namespaces can be made here; else `why` says why not.
bool haveNetns(std::string* why);

// The calling thread in a fresh network namespace with loopback up, for the
// life of this object; back in the original one afterwards, and the
// namespace deleted. Declare it before any fixture that starts processes or
// threads: they inherit the thread's namespace.
class InNetns {
 public:
  // `tag` goes into the namespace's name (h2g-TAG-PID).
  explicit InNetns(const std::string& tag = "netchange");
  ~InNetns();
  InNetns(const InNetns&) = delete;
  InNetns& operator=(const InNetns&) = delete;

  const std::string& name() const { return name_; }
  const std::string& error() const { return error_; }
  // `ip -n NS args...`; true when it exited 0.
  bool ip(std::vector<std::string> args) const;

 private:
  std::string name_;
  std::string error_;
  int original_ = -1;
};

}  // namespace h2gate::test
