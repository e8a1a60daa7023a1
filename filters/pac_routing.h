// A forward_proxy route that follows a PAC file: the route
// decider (upstream/router.h) that answers each request with what the PAC
// file's FindProxyForURL(url, host) says, evaluated off the event loop.
//
//   config (filters/pac_routing_config.h) ─▶ PacRoute
//     PacSource (file, URL, WPAD, system; its own thread) ─ new text ─▶
//     PacEvaluator (its threads, cache per URL asked) ◀─ decide()
//
// PacSource and PacEvaluator are the PAC engine (gateway/pac_engine/). The
// PAC file h2gate writes for its own apps is another thing:
// filters/served_pac.h.
//
// decide() builds the query as browsers do (https and CONNECT requests as
// "https://host[:port]/", path stripped; http ones whole) and maps the
// answer to routes: DIRECT → "", PROXY h:p → "PROXY h:p", HTTPS h:p →
// "HTTPS h:p" (proxies the router creates on demand from proxies()).
// SOCKS and QUIC entries are skipped (the parser says why), each distinct
// one logged once. An answer naming this listener's own address is a loop:
// DIRECT or 503 per on_loop, logged once. The address is what connecting
// to the named proxy would reach, as the own-address filter judges a
// destination (gateway/server/own_addresses.h): an IP literal in any notation, in
// its canonical form (net::canonicalRequestHost: 127.1, 2130706433,
// 0x7f000001, [::ffff:127.0.0.1] are 127.0.0.1), localhost, and a name by
// the addresses it resolves to. Only entries on one of the listener's ports
// are looked at, and a name is resolved (asynchronously, within
// dns_timeout) before its first decision and then again after cache_ttl. When the PAC cannot answer
// (none loaded yet, exception, timeout, garbage, overload) the route's fallback applies (DIRECT, a
// cluster, or a status); such a problem is logged once when it starts (or changes kind), and once
// when answers work again.
//
// Lifetime: created by the forward_proxy factory (config check and start
// alike); start() (from Filter::init, at start or reload) starts the
// source and the evaluator. Shared by every worker and by requests in
// flight (StreamInfo::route_decider); destroyed when the last goes, which
// stops the source's thread and the evaluator's threads (never one of
// their own: callbacks hold weak references).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <asio.hpp>

#include "filters/pac_routing_config.h"
#include "gateway/pac_engine/evaluator.h"
#include "gateway/pac_engine/source.h"
#include "gateway/upstream/router.h"

namespace h2gate::filters {

class PacRoute final : public upstream::RouteDecider,
                       public std::enable_shared_from_this<PacRoute> {
 public:
  // `listener`: the listener's own addresses ("host:port"), for loops.
  PacRoute(PacRouteConfig config, std::vector<std::string> own_addresses);
  ~PacRoute() override;
  PacRoute(const PacRoute&) = delete;
  PacRoute& operator=(const PacRoute&) = delete;

  // Starts the source and the evaluator; idempotent. Returns an error
  // message or "" (the TLS settings for HTTPS proxies failing is not an
  // error here: those proxies fail, with the reason, when named).
  std::string start();

  // upstream::RouteDecider
  void decide(const RequestHead& head, const StreamInfo& info, asio::any_io_executor ex,
              std::function<void(Decision)> done) const override;
  // The decision from the evaluator's answer cache, or nullopt (no
  // cached answer, or not started). Allocates only what the Decision holds.
  std::optional<Decision> decideNow(const RequestHead& head, const StreamInfo& info) const override;
  std::shared_ptr<const upstream::ProxyTemplate> proxies() const override { return proxies_; }

  // The network changed: forget cached answers, fetch the PAC again
  // (WPAD and system sources may now find another one).
  void networkChanged();

  // For the admin endpoint, GET /pac/eval: what the PAC answers for `url`
  // (scheme://host[:port][/path]) and what h2gate does with it; `done`
  // posted to `ex` with a few lines of text, or an error line.
  void explain(const std::string& url, asio::any_io_executor ex,
               std::function<void(int status, std::string text)> done) const;

  // For the admin endpoint, GET /pac: source, origin, fetch time, sha256,
  // the last error; and the PAC text itself at the end.
  std::string describe(bool with_text) const;
  // Readiness: "" or why the route runs on an old PAC or on its fallback
  // ("pac routes[0]: download failed (...); keeping the PAC fetched at ...").
  std::string degraded() const;

  struct Counters {
    uint64_t evaluations = 0;
    uint64_t cache_hits = 0;
    uint64_t timeouts = 0;
    uint64_t errors = 0;
    uint64_t fallbacks = 0;  // requests that took the route's fallback
    uint64_t download_failures = 0;
    uint64_t loads = 0;
    uint64_t load_failures = 0;  // PAC files that came but did not load
    uint64_t cache_entries = 0;  // the answer cache now
    uint64_t cache_bytes = 0;
    bool have_script = false;
  };
  Counters counters() const;
  const std::string& name() const { return config_.source.name; }
  const PacRouteConfig& config() const { return config_; }

  // Whether the proxy of `route` ("PROXY host:port"), at `host`, gets the
  // credentials of pac.proxies.proxy_authentication: "" when it does (or
  // there are none to get), else why not ("not in authenticate_to
  // [localhost] (...)"). With `log`, a refusal is logged at warn once per
  // proxy and list. Asked when a pool for that proxy is made.
  std::string mayAuthenticate(const std::string& route, const std::string& host, bool log) const;

  // How the loop check resolves a proxy's name: `done` gets its addresses
  // (none when it does not resolve), posted to `ex`. By default asio's
  // resolver (getaddrinfo off the event loop); tests set their own.
  using NameLookup = std::function<void(const std::string& host, asio::any_io_executor ex,
                                        std::function<void(std::vector<asio::ip::address>)> done)>;
  void setNameLookup(NameLookup lookup) { lookup_ = std::move(lookup); }

 private:
  // What `result` means for a request: routes, or the fallback.
  Decision toDecision(const pac::PacResult& result, uint64_t conn_id, uint64_t stream_id) const;
  Decision fallback() const;
  // One log line when the PAC's trouble starts or changes kind.
  void noteProblem(const pac::PacError& error, uint64_t conn_id, uint64_t stream_id) const;
  void noteGood() const;
  bool isOwnAddress(const pac::ProxyEntry& e) const;
  bool reachesOwn(const asio::ip::address& a, uint16_t port) const;
  bool onOwnPort(uint16_t port) const;
  // The proxy names in `r` on one of the listener's ports that the loop
  // check needs resolved and has no fresh addresses for.
  std::vector<std::string> unresolvedNames(const pac::PacResult& r) const;
  // toDecision() once the names it needs are resolved; `done` posted to `ex`.
  void decideWith(std::shared_ptr<const pac::PacResult> r, uint64_t conn_id, uint64_t stream_id,
                  asio::any_io_executor ex, std::function<void(Decision)> done) const;
  void onScript(std::shared_ptr<pac::PacScript> script);

  // One of the listener's own addresses, parsed once ("[::1]:3128" →
  // ::1, 3128; one that does not parse matches nothing).
  struct OwnAddress {
    asio::ip::address address;  // may be unspecified: every local address
    uint16_t port = 0;
  };

  // authenticate_to as it is now (the default follows the PAC file in
  // use); shared with the proxy template's may_authenticate.
  struct AuthPolicy;

  PacRouteConfig config_;
  std::shared_ptr<AuthPolicy> auth_;
  std::vector<OwnAddress> own_addresses_;
  // The machine's addresses, read once when an own address is unspecified.
  std::vector<asio::ip::address> interfaces_;
  NameLookup lookup_;
  // Addresses of the proxy names the loop check resolved (bounded).
  struct Resolved {
    std::vector<asio::ip::address> addresses;
    std::chrono::steady_clock::time_point expires;
  };
  mutable std::mutex names_mutex_;
  mutable std::unordered_map<std::string, Resolved> names_;
  std::shared_ptr<upstream::ProxyTemplate> proxies_;
  std::unique_ptr<pac::PacEvaluator> evaluator_;
  std::unique_ptr<pac::PacSource> source_;
  std::once_flag started_;

  mutable std::mutex log_mutex_;
  mutable std::string problem_;  // kind of the trouble logged last; "" when fine
  // !problem_.empty(), readable without the lock: a good answer while all
  // is well (every request) takes no lock.
  mutable std::atomic<bool> troubled_{false};
  mutable std::set<std::string> noted_;  // skipped entries and loops logged (bounded)
  mutable std::atomic<uint64_t> fallbacks_{0};
};

}  // namespace h2gate::filters
