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

// Reads and validates a YAML file: config's own part. Unreadable file, a
// file larger than `max_bytes`, YAML syntax errors, nesting deeper than
// kMaxYamlDepth, unknown keys, wrong types, out-of-range values and what
// validate() checks all end up in problems (every one, not just the first).
// A filter's name and typed_config are kept, not looked at: the filters
// check and build them (filters/chain.h); h2gate loads a config with both
// (gateway/server/load_config.h).
LoadResult loadFile(const std::string& path, uint64_t max_bytes = kDefaultMaxConfigBytes);
LoadResult loadString(const std::string& yaml, const std::string& source_name);

// The filter names config itself uses: the built-in default chain, and the
// terminal filter a listener's chain ends in (named in the "a listener needs
// one filter chain" problem). filters/registry.h defines all filter names;
// filters/chain.cc asserts that these agree with it.
inline constexpr const char* kAccessLogFilterName = "h2gate.filters.access_log";
inline constexpr const char* kTerminalFilterName = "h2gate.filters.forward_proxy";

// The built-in default: listener "local_proxy" on 127.0.0.1:3128 (plus [::1]:3128
// when IPv6 is available), admin on 127.0.0.1:9901, filters access_log +
// forward_proxy with no cluster (direct mode).
Bootstrap defaultBootstrap();

// Cross-reference checks on an assembled Bootstrap (used for configs built
// from flags too), config's own part: at least one listener, duplicate
// listener and cluster names, clusters without endpoints, two listeners (or
// a listener and the admin endpoint) on one address, a listener without a
// filter chain. Sorted by position in the file.
std::vector<Problem> validate(const Bootstrap& bootstrap);

// A `proxy_authentication` mapping (config/README.md): scheme, spn,
// client_keytab, principal and credentials, as a cluster has it and as a
// PAC route's proxies have it (filters/pac_routing_config.h). The
// credentials go into `cluster.credentials` (an error when it holds
// proxy_credentials already). Records every problem in the reader's
// Diagnostics; nullopt when the node is absent or not a mapping.
std::optional<ProxyAuthentication> parseProxyAuthentication(NodeReader& r, Cluster& cluster);

// Small checks shared with the flag parser (gateway/server/cli.h).
// "" when `path` names a readable regular file, else "cannot read 'PATH': why".
std::string checkReadableFile(const std::string& path);
// A secret kept in a file of its own (a password_file): its content without
// one trailing line break. nullopt, with *why set, when it cannot be read or
// is larger than 64 KiB. The caller wipes what it gets.
std::optional<std::string> readSecretFile(const std::string& path, std::string* why);
// The password of keyring entry `name` (gateway/base/keyring.h): a
// credentials' `keyring: NAME` and the flag --proxy-credentials keyring:NAME.
// *entry_user: the user name the entry holds (nullopt: none). A `username`
// (empty: not given) that differs from the entry's is an error, as are an
// entry with neither, no such entry and a keyring that cannot be read:
// nullopt with *why (the keyring's reason and what to do). The caller wipes
// what it gets.
std::optional<std::string> keyringPassword(const std::string& name, const std::string& username,
                                           std::optional<std::string>* entry_user,
                                           std::string* why);
// An IPv4 or IPv6 literal, without brackets ("::1", "fe80::1%eth0").
bool isIpLiteral(std::string_view text);
// A DNS name as a proxy endpoint may use (letters, digits, '-', '_', '.').
bool isHostName(std::string_view text);
// An admin.allowed_hosts entry in normal form: "name", "name:port",
// "192.0.2.1[:port]", "[2001:db8::1][:port]"; lower case, without a trailing
// dot. nullopt and *why when `text` is none of these.
std::optional<std::string> normalizeAllowedHost(std::string_view text, std::string* why);

}  // namespace h2gate::config
