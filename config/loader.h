// Loading and validating a Bootstrap.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/node_reader.h"

namespace h2gate::config {

struct LoadResult {
  Bootstrap bootstrap;
  // Empty on success. Otherwise `bootstrap` holds what could be read and
  // MUST NOT be used to run.
  std::vector<Problem> problems;
  bool ok() const { return problems.empty(); }
};

// Reads and validates a YAML file. Unreadable file, a file larger than
// `max_bytes`, YAML syntax errors, nesting deeper than kMaxYamlDepth,
// unknown keys, wrong types, out-of-range values and dangling cluster
// references all end up in problems (every one, not just the first). The
// filters are built (validateAndBuild).
LoadResult loadFile(const std::string& path, uint64_t max_bytes = kDefaultMaxConfigBytes);
LoadResult loadString(const std::string& yaml, const std::string& source_name);

// The built-in default: listener "local_proxy" on 127.0.0.1:3128 (plus [::1]:3128
// when IPv6 is available), admin on 127.0.0.1:9901, filters access_log +
// forward_proxy with no cluster (direct mode).
Bootstrap defaultBootstrap();

// Cross-reference and semantic checks on an assembled Bootstrap (used for
// configs built from flags too): dangling cluster references, duplicate names,
// listeners without a terminal forward_proxy filter, unknown filter names.
std::vector<Problem> validate(const Bootstrap& bootstrap);
// The same checks; every filter it builds is kept in its FilterConfig::filter
// (not init()ed), and a filter already there is used instead of being built
// again from typed_config. Reset `filter` after changing typed_config.
std::vector<Problem> validateAndBuild(Bootstrap& bootstrap);

// Small checks shared with the flag parser (gateway/cli.h).
// "" when `path` names a readable regular file, else "cannot read 'PATH': why".
std::string checkReadableFile(const std::string& path);
// A secret kept in a file of its own (a password_file): its content without
// one trailing line break. nullopt, with *why set, when it cannot be read or
// is larger than 64 KiB. The caller wipes what it gets.
std::optional<std::string> readSecretFile(const std::string& path, std::string* why);
// An IPv4 or IPv6 literal, without brackets ("::1", "fe80::1%eth0").
bool isIpLiteral(std::string_view text);
// A DNS name as a proxy endpoint may use (letters, digits, '-', '_', '.').
bool isHostName(std::string_view text);
// An admin.allowed_hosts entry in normal form: "name", "name:port",
// "192.0.2.1[:port]", "[2001:db8::1][:port]"; lower case, without a trailing
// dot. nullopt and *why when `text` is none of these.
std::optional<std::string> normalizeAllowedHost(std::string_view text, std::string* why);

}  // namespace h2gate::config
