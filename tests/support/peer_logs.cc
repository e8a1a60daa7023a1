#include "tests/support/peer_logs.h"

#include <fstream>
#include <iterator>
#include <mutex>
#include <utility>
#include <vector>

#include "tests/support/process.h"

namespace h2gate::test {
namespace {

struct Entry {
  unsigned long id;
  std::string name;
  std::string path;
};

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}

std::vector<Entry>& registry() {
  static std::vector<Entry> entries;
  return entries;
}

unsigned long next_id = 0;

}  // namespace

PeerLog::PeerLog(std::string name, std::string path) {
  std::lock_guard lock(registryMutex());
  id_ = ++next_id;
  registry().push_back({id_, std::move(name), std::move(path)});
}

PeerLog::~PeerLog() {
  std::lock_guard lock(registryMutex());
  std::erase_if(registry(), [&](const Entry& e) { return e.id == id_; });
}

std::string peerLogTails(size_t lines) {
  std::vector<Entry> entries;
  {
    std::lock_guard lock(registryMutex());
    entries = registry();
  }
  std::string out;
  for (const Entry& e : entries) {
    std::ifstream in(e.path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    out += "== " + e.name + " (" + e.path + ")" + (in ? "" : ": not there") + "\n";
    if (!text.empty()) out += tailLines(text, lines) + (text.back() == '\n' ? "" : "\n");
  }
  return out;
}

}  // namespace h2gate::test
