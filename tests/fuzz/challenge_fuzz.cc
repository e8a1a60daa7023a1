// Proxy-Authenticate parsing (gateway/upstream/auth/challenge.h) on
// arbitrary bytes: nothing may crash, and what parsed must survive a round
// trip: written back in canonical form and parsed again, it gives the same
// challenges (so the parser neither loses nor invents a scheme, token or
// param).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gateway/upstream/auth/challenge.h"

namespace {

std::string quoted(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string canonical(const std::vector<h2gate::upstream::auth::Challenge>& challenges) {
  std::string out;
  for (const auto& c : challenges) {
    if (!out.empty()) out += ", ";
    out += c.scheme;
    if (!c.token68.empty()) {
      out += " " + c.token68;
    } else {
      for (size_t i = 0; i < c.params.size(); ++i)
        out += (i == 0 ? " " : ", ") + c.params[i].first + "=" + quoted(c.params[i].second);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace h2gate::upstream::auth;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<Challenge> first;
  parseChallenges(in, &first);
  for (const Challenge& c : first) {
    if (c.scheme.empty()) std::abort();
    if (!c.token68.empty() && !c.params.empty()) std::abort();
  }
  std::vector<Challenge> again;
  const std::string text = canonical(first);
  if (!parseChallenges(text, &again) || again != first) std::abort();
  return 0;
}
