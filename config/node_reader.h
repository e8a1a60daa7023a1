// Typed, error-collecting access to a YAML mapping.
//
// Every config problem is recorded (never thrown) with file:line:column and the
// YAML path, so `h2gate --validate` can print all of them at once:
//   cfg.yaml:12:22: static_resources.clusters[0].connect_timeout: expected a duration like 5s
// The loader and the filter config parsers (filters/registry.h) both use it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/config.h"

namespace h2gate::config {

struct Problem {
  Mark mark;
  std::string path;  // YAML path, e.g. static_resources.listeners[0].name
  std::string message;
  // "file:line:column: path: message" (line/column omitted when unknown),
  // one line, escaped with escapeControls().
  std::string str() const;
};

// `text` with control characters written as escapes, safe to print on a
// terminal or in a log line: \t \n \r, other C0 bytes and DEL as \xNN, C1
// controls (UTF-8 U+0080..U+009F) as \u00NN, bytes that are not UTF-8 as
// \xNN. Well-formed UTF-8 text and backslashes are kept as they are.
std::string escapeControls(std::string_view text);

// Sorts problems into file order; those without a position (unreadable
// file, flags) go first. Stable: problems at one position keep their order.
void sortByPosition(std::vector<Problem>& problems);

class Diagnostics {
 public:
  explicit Diagnostics(std::string file) : file_(std::move(file)) {}
  void error(const Mark& mark, std::string path, std::string message);
  Mark markOf(const YAML::Node& node) const;
  const std::string& file() const { return file_; }
  const std::vector<Problem>& problems() const { return problems_; }
  bool ok() const { return problems_.empty(); }

 private:
  std::string file_;
  std::vector<Problem> problems_;
};

// A view of one YAML node plus its path. Getters return nullopt when the key
// is absent (or, with required=true, record "missing required field") and
// record an error and return nullopt when the value has the wrong type or is
// out of range. String values get ${ENV_VAR} expansion; a missing variable is
// an error.
class NodeReader {
 public:
  // `fallback` is where errors about this node point when the node itself has
  // no usable position (absent, null, or built in code): child() passes the
  // key's position, or the parent's when the key is absent.
  NodeReader(YAML::Node node, std::string path, Diagnostics& diag, Mark fallback = {});

  const YAML::Node& node() const { return node_; }
  const std::string& path() const { return path_; }
  Mark mark() const;
  Diagnostics& diagnostics() const { return diag_; }
  bool isNull() const { return !node_ || node_.IsNull(); }
  bool has(const char* key) const;

  // Records "expected a mapping" and returns false when this node is not one
  // (a null node counts as an empty mapping).
  bool expectMap();
  // Records "unknown field" for every key not listed.
  void allowOnly(std::initializer_list<const char*> keys);

  std::optional<std::string> string(const char* key, bool required = false);
  std::optional<bool> boolean(const char* key, bool required = false);
  std::optional<uint64_t> uint(const char* key, uint64_t min, uint64_t max, bool required = false);
  std::optional<Duration> duration(const char* key, bool required = false);
  std::optional<std::vector<std::string>> stringList(const char* key, bool required = false);
  // A string that must be one of `allowed` (an Envoy enum); the error lists them.
  std::optional<std::string> choice(const char* key, std::initializer_list<const char*> allowed,
                                    bool required = false);
  // Checks the optional "@type" key of a typed_config against the type URL
  // expected at this place (e.g. type.googleapis.com/envoy.extensions.
  // transport_sockets.tls.v3.UpstreamTlsContext). Absent is fine.
  void expectType(std::string_view type_url);

  // A child mapping. Absent: a reader on a null node (isNull() true).
  NodeReader child(const char* key, bool required = false);
  // A child sequence. Absent: empty. Not a sequence: error, empty.
  std::vector<NodeReader> list(const char* key, bool required = false);

  // Records an error at this node / at a child key.
  void error(std::string message) const;
  void errorAt(const char* key, std::string message) const;

 private:
  // The value at `key` (Undefined when absent or when this is not a mapping),
  // and the position of the key itself.
  YAML::Node lookup(const char* key, Mark* key_mark = nullptr) const;
  // Where errors about the value at `key` point: the value, or the key when
  // the value is null or absent.
  Mark markAt(const char* key) const;
  std::string childPath(const char* key) const;
  // The raw scalar at key, before ${ENV} expansion (so messages can quote it
  // without leaking secrets); records missing/not-a-scalar errors, `what`
  // naming the expected type ("a string").
  std::optional<std::string> scalar(const char* key, bool required, const char* what);

  YAML::Node node_;
  std::string path_;
  Diagnostics& diag_;
  Mark fallback_;
};

// "5s", "0.25s", "100ms", "250us", "1m", "1h" (Envoy/protobuf durations, plus
// ms/us/m/h as Envoy's YAML accepts). Negative or malformed: nullopt.
std::optional<Duration> parseDuration(std::string_view text);

// Replaces ${NAME} with the environment variable NAME. Returns nullopt and sets
// *missing to the variable name when one is not set. "$$" is not special.
std::optional<std::string> expandEnv(std::string_view text, std::string* missing);

}  // namespace h2gate::config
