// Feeds arbitrary bytes to the PAC answer parser as FindProxyForURL's
// return value. Nothing may crash or hang, and what it keeps must hold its
// own invariants: bounded lists, entries that print and parse back to
// themselves.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gateway/pac_engine/answer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace h2gate::pac;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const ProxyList list = parseProxyList(in);
  if (list.entries.size() > kMaxEntries || list.skipped.size() > kMaxSkipped ||
      list.skipped_count < list.skipped.size())
    std::abort();
  for (const ProxyEntry& e : list.entries) {
    if (e.kind != ProxyEntry::Kind::Direct && (e.host.empty() || e.port == 0)) std::abort();
    const ProxyList again = parseProxyList(e.str());
    if (again.entries.size() != 1 || !(again.entries[0] == e)) std::abort();
  }
  return 0;
}
