// What a configuration reload changes: which listening sockets stay, which
// are bound and which close; which clusters get new pools; what cannot change
// without a restart; and the one-line summary. Pure functions over config
// structs (tlsFilesFingerprint() aside, which reads files), so the Server's
// reload (gateway/server/server.cc) stays wiring and this stays unit-tested.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace h2gate::reload {

// A listening address as configured, normalized: "127.0.0.1:3128",
// "[::1]:3128". Port 0 stays 0: the socket the OS gave a port is kept as
// long as the config still asks for "any port" on that address.
std::string addressKey(const config::SocketAddress& a);

// Listening sockets are matched by configured address, not by listener
// name: an address present before and after keeps its socket (no moment
// without a listener, no connection refused), even when the listener that
// owns it was renamed or changed otherwise.
struct SocketPlan {
  struct Entry {
    size_t listener = 0;  // index in the new config's listeners
    config::SocketAddress address;
    // An additional address: skipped when it cannot be bound (as at start).
    bool optional = false;
    // Index (in the `open` list given to planSockets) of the socket to
    // keep; nullopt: bind a new one.
    std::optional<size_t> reuse;
  };
  std::vector<Entry> entries;  // in config order: each listener's address, then its extras
  std::vector<size_t> close;   // indices in `open` that no entry keeps, ascending
};
// `open`: addressKey() of each socket listening now (duplicates allowed;
// each is kept by at most one entry).
SocketPlan planSockets(const std::vector<std::string>& open,
                       const std::vector<config::Listener>& listeners);

// Listeners and clusters by name, for the summary and (clusters) for which
// pools to replace. `changed` means present in both with different settings.
struct NameDiff {
  std::vector<std::string> added, removed, changed, unchanged;
};
// Settings equal as /config_dump writes them, and the same credentials
// (the dump redacts the password). Source positions do not count.
bool sameListener(const config::Listener& a, const config::Listener& b);
bool sameCluster(const config::Cluster& a, const config::Cluster& b);
NameDiff diffListeners(const std::vector<config::Listener>& before,
                       const std::vector<config::Listener>& after);
NameDiff diffClusters(const std::vector<config::Cluster>& before,
                      const std::vector<config::Cluster>& after);

// The contents of a cluster's TLS files (trusted CA, client certificate and
// key), condensed: a reload treats a cluster whose files were replaced
// under the same names (certificate rotation) as changed. "" without TLS;
// an unreadable file contributes a marker (building its context will fail).
std::string tlsFilesFingerprint(const config::Cluster& c);

// Settings a running process cannot change (worker count, admin address;
// admin.allowed_hosts can):
// returns one message per difference ("... needs a restart; keeping ...")
// and copies the running values into `next`, so what runs is what
// /config_dump shows.
std::vector<std::string> keepRestartOnly(const config::Bootstrap& running, config::Bootstrap& next);

// "listeners: 1 added (extra), 1 unchanged; clusters: 1 changed (proxy)";
// a kind with no entries at all reads "none".
std::string summary(const NameDiff& listeners, const NameDiff& clusters);

}  // namespace h2gate::reload
