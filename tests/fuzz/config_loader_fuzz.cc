// libFuzzer target: arbitrary bytes as a YAML config.
//
// Contract under test (gateway/server/load_config.h): loadConfigString() (config's
// parser, then every filter's typed_config parser: filters/chain.h) reports
// every problem in LoadResult::problems and never throws or crashes, whatever
// the input. Nothing is caught here on purpose: an exception escaping is a
// bug, and libFuzzer reports it as a crash with the input that caused it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gateway/base/keyring.h"
#include "gateway/server/load_config.h"

// `credentials: {keyring: NAME}` would ask the session's Secret Service for
// every input (a D-Bus round trip, or up to keyring::kTimeout): the parser
// asks this instead, which holds one entry, "corp", so that both the found
// and the absent paths are fuzzed.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  h2gate::keyring::setLookupForTesting(
      [](const std::string& name, h2gate::keyring::Entry* out, std::string*) {
        if (name != "corp") return h2gate::keyring::Status::NotFound;
        out->username = "alice";
        out->password = "fuzz-pw";
        return h2gate::keyring::Status::Ok;
      });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  auto result = h2gate::loadConfigString(yaml, "fuzz.yaml");
  // Formatting the problems exercises Problem::str() on whatever marks came out.
  for (const auto& problem : result.problems) (void)problem.str();
  return 0;
}
