// The `match` object of forward_proxy routes and acl entries, read from the
// config (gateway/match/matcher.h holds what it builds):
//
//   match:
//     hosts: [api.example.com, "*.example.com"]  # exact names; "*.NAME": its subdomains
//                                                #   (not NAME itself); "*": everything
//     host_suffixes: [corp.example]   # the name and all its subdomains (curl's NO_PROXY
//                                     #   semantics: ".corp.example" means the same)
//     cidrs: [10.0.0.0/8, "fd00::/8"] # IP destinations in these ranges (below)
//     ports: [443, "8000-8999"]       # destination ports; default: any
//     kind: connect                   # connect (CONNECT tunnels) | absolute (GET http://…);
//                                     #   default: both
//     no_proxy: "${NO_PROXY}"         # a NO_PROXY list, read as no_proxy_mode reads it
//     no_proxy_mode: curl             # curl (default) | go | python (gateway/match/no_proxy.h)
//
// A request matches when its destination matches any of hosts,
// host_suffixes, cidrs and no_proxy (none of them given: any destination),
// AND its port is in ports, AND its kind is kind. `match: {}` matches all.
// Names may be U-labels ("bücher.example"): they are compared as A-labels.
// CIDR ranges match IP-literal destinations (in canonical form: "127.1" is
// 127.0.0.1); h2gate does not resolve names to choose a route (the upstream
// proxy resolves them). In direct mode the acl's deny entries and reject
// routes are also applied to the addresses a name resolved to, before
// h2gate connects (Filter::checkAddress). A `hosts` entry that ends in a
// number ("127.1") is an error: write the address in standard form.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/node_reader.h"
#include "gateway/match/matcher.h"

namespace h2gate::filters {

// Records every problem (unknown key, bad CIDR, bad port range...) with its
// position and returns nullopt when there was one. NO_PROXY entries that the
// chosen mode ignores are not errors: they are appended to *ignored as
// "PATH: 'entry': why".
std::optional<match::Match> parseMatch(config::NodeReader& match,
                                       std::vector<std::string>* ignored);

}  // namespace h2gate::filters
