// Host names written in the config (route and ACL patterns, NO_PROXY
// entries) in the form the matchers compare (filters/matcher.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace h2gate::filters {

// Lower case, one trailing dot removed, and internationalised names in
// their A-label form: "Bücher.Example." → "xn--bcher-kva.example" (IDNA2008
// with UTS #46 non-transitional mapping, libidn2 — what browsers and curl
// put on the wire, so the config may use either form). The result must be
// letters, digits, '-', '_' and dots between non-empty labels, at most 253
// characters. Returns nullopt and sets *error otherwise.
std::optional<std::string> normalizeHostName(std::string_view text, std::string* error);

}  // namespace h2gate::filters
