// The effective configuration as YAML, for the admin endpoint GET /config_dump.
#pragma once

#include <string>
#include <string_view>

#include "config/config.h"

namespace h2gate::config {

// What replaces a secret in the dump.
inline constexpr const char* kRedacted = "[redacted]";

// `b` as YAML in the shape the loader reads (config/loader.h), with every
// default written out, so loadString(dumpYaml(b)) gives back the same
// Bootstrap. Secrets are replaced by kRedacted: the password of
// proxy_credentials and proxy_authentication.credentials (a password_file is
// named, never read back; a keyring entry is named, its password never
// shown), and inside filter typed_config the value of every key that
// isSecretKey() and the `value` of every {key, value} header entry. ${ENV} references kept in
// typed_config stay as written; values the loader already expanded (e.g. a user name) appear
// expanded. The first line is a comment naming b.source.
std::string dumpYaml(const Bootstrap& b);

// Drops the YAML tree of every filter that was built (FilterConfig::filter
// set), keeping its redacted rendering in redacted_yaml for dumpYaml(), which
// then parses it again: yaml-cpp's tree costs several hundred bytes per
// value, the text about what the file had. For the running server (gateway/
// server.h), which needs the built filters only.
void dropFilterYaml(Bootstrap& b);
// A filter's typed_config as dumpYaml() shows it (secrets redacted), as
// text: redacted_yaml, or the tree rendered; "" when there is none.
std::string typedConfigText(const FilterConfig& f);

// True when a typed_config key names a secret: it contains "password",
// "secret", "token" or "authorization", in any case.
bool isSecretKey(std::string_view key);

// A duration as Envoy writes it: whole seconds with 0, 3, 6 or 9 fractional
// digits ("5s", "0.250s", "0.000001500s"). Negative durations become "0s".
std::string formatDuration(Duration d);

}  // namespace h2gate::config
