// Authentication to a cluster's upstream proxies: its proxy_authentication
// (scheme auto, negotiate, ntlm or basic), or proxy_credentials alone
// (Basic on every request, as before there was a choice).
//
// ProxyAuth, one per cluster and worker (owned by the UpstreamPool, used on
// the worker's thread), chooses the scheme: the configured one, or for auto
// the strongest the proxy offers in its 407 (Negotiate > NTLM > Basic),
// remembered per endpoint so later requests carry credentials up front. It
// holds the platform's credentials (mechanism.h), counts
// h2gate_upstream_auth_total and logs each distinct failure once.
//
// RequestAuth, one per app request (owned by it across its attempts), runs
// the exchange:
//   - Basic: the header on every request.
//   - Negotiate: a fresh Kerberos token per request (so every h2 stream
//     carries its own). The first for a proxy (and the first after its
//     service ticket nears its end, or after kinit) may wait for the KDC:
//     it is made on a TokenThreads thread. Later ones come from the ticket
//     in memory and are made on the event loop (Mechanisms::
//     firstStepIsLocal; about 50 µs each, less than handing them to a
//     thread and back costs). The proxy's mutual-authentication token in
//     its answer, when it sends one, must verify (checked on the event loop:
//     it needs only the session key the context holds).
//   - NTLM: per HTTP/1.1 connection, three messages: negotiate (sent with
//     the request), the proxy's challenge (a 407 on the same keep-alive
//     connection), authenticate (the request again). A request body is held
//     back, and the negotiate leg says Content-Length: 0, until the last
//     leg. The connection is then authenticated, and later requests on it
//     (keep-alive absolute-form) send nothing. HTTP/2 cannot carry it: a
//     proxy that wants NTLM is reached over HTTP/1.1 only. NTLM messages
//     are computed on the event loop: no KDC, no network, only hashes of
//     the password in memory.
// Failures are bounded: at most one retry per request (after the 407 that
// told which scheme the proxy wants); a 407 to credentials reaches the app
// as the proxy sent it; so does the 407 when h2gate cannot make credentials
// (no Kerberos ticket: "run kinit"), with the reason logged once per cause.
// What a proxy wrote (the schemes of its 407) is shortened and escaped
// before it goes into a log line, and the causes remembered are bounded.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio.hpp>

#include "config/config.h"
#include "gateway/base/http_types.h"
#include "gateway/metrics/registry.h"
#include "gateway/upstream/auth/challenge.h"
#include "gateway/upstream/auth/mechanism.h"
#include "gateway/upstream/auth/token_threads.h"
#include "gateway/upstream/health.h"

namespace h2gate::upstream::auth {

enum class Scheme : uint8_t { None, Basic, Negotiate, Ntlm };
// Metric and /clusters labels: "none", "basic", "negotiate", "ntlm".
std::string_view schemeLabel(Scheme s);

enum class Outcome : uint8_t { Success, Rejected, Failed, MutualFailed };
std::string_view outcomeLabel(Outcome o);  // "success", "rejected", "failed", "mutual_failed"

// What to send with one attempt of a request.
struct Prepared {
  std::string authorization;  // the Proxy-Authorization value, "" for none; a secret
  // An NTLM negotiate leg: the proxy is expected to answer 407 with its
  // challenge on this connection, so the request body is held back (the
  // head says Content-Length: 0) until the next leg.
  bool handshake = false;
  Prepared() = default;
  Prepared(Prepared&&) noexcept = default;
  Prepared& operator=(Prepared&&) noexcept = default;
  ~Prepared() { config::wipe(authorization); }
};

// What to do with the proxy's final answer to an attempt.
struct Verdict {
  enum class Kind {
    Deliver,   // hand the response to the app as it is
    Retry,     // drop this attempt and queue the request again (it then carries credentials)
    Continue,  // HTTP/1.1 (NTLM): read this 407 to its end, then send the request
               // again on the same connection with `authorization`
    Fail,      // the app gets 502 with `reason` (the proxy's Kerberos answer did not verify)
  };
  Kind kind = Kind::Deliver;
  std::string authorization;  // Continue; a secret
  bool handshake = false;     // Continue: the next head is still a negotiate leg
  std::string reason;         // Fail
  // Deliver: the connection is now authenticated (NTLM): requests that
  // reuse it need no credentials.
  bool connection_authenticated = false;
  Verdict() = default;
  Verdict(Verdict&&) noexcept = default;
  Verdict& operator=(Verdict&&) noexcept = default;
  ~Verdict() { config::wipe(authorization); }
};

class ProxyAuth : public std::enable_shared_from_this<ProxyAuth> {
 public:
  // Whether `cluster` authenticates to its proxies at all.
  static bool configured(const config::Cluster& cluster);

  // On the worker's thread. `mechanisms` null: the platform's (mechanism.h).
  ProxyAuth(const config::Cluster& cluster, asio::io_context& io, metrics::Shard& shard,
            std::shared_ptr<ClusterHealth> health,
            std::shared_ptr<Mechanisms> mechanisms = nullptr);
  ~ProxyAuth();
  ProxyAuth(const ProxyAuth&) = delete;
  ProxyAuth& operator=(const ProxyAuth&) = delete;

  // Called when `endpoint` turns out to want NTLM while it is spoken to
  // over HTTP/2: the pool reaches it over HTTP/1.1 from then on.
  void onHttp1Required(std::function<void(size_t endpoint)> fn) { http1_required_ = std::move(fn); }
  // The endpoint is to be reached over HTTP/1.1 only (its proxy wants NTLM).
  bool http1Only(size_t endpoint) const;

  // The scheme to send up front to `endpoint`: the configured one, or what
  // auto learnt from that proxy's 407 (None until then).
  Scheme upFront(size_t endpoint) const;
  // The scheme to answer `offered` with: the configured one if offered;
  // for auto the strongest offered that h2gate can use, skipping `skip`
  // (one that just failed locally). None when there is nothing to use.
  Scheme choose(const std::vector<Challenge>& offered, Scheme skip = Scheme::None) const;
  // Auto: `endpoint`'s proxy wants `scheme`.
  void learn(size_t endpoint, Scheme scheme, uint64_t conn_id, uint64_t stream_id);

  // "HTTP@<endpoint address>", or the configured spn.
  std::string spn(size_t endpoint) const;
  const std::string& basicHeader() const { return basic_; }
  const config::Cluster& cluster() const { return cluster_; }
  Mechanisms& mechanisms() { return *mechanisms_; }
  const std::shared_ptr<Mechanisms>& mechanismsPtr() const { return mechanisms_; }
  const std::shared_ptr<LoopMailbox>& mailbox() const { return mailbox_; }
  // "proxy 127.0.0.1:3128 of cluster X", for messages.
  std::string proxyName(size_t endpoint) const;

  // Counts the outcome; a failure (`why`, never a secret) is logged at warn
  // the first time its cause is seen for the cluster, at debug after that.
  void record(Scheme scheme, Outcome outcome, uint64_t conn_id, uint64_t stream_id,
              const std::string& why = "");
  // Also tells `fn` of every outcome record() counts, with its `why`
  // (never a secret), on this thread: for `h2gate check`, which prints
  // each leg of the exchange instead of reading the log.
  using Observer = std::function<void(Scheme, Outcome, const std::string& why)>;
  void setObserver(Observer fn) { observer_ = std::move(fn); }
  // Logs `message` (escaped, at most 2 KiB of it) at warn once per cluster
  // and `key`, at debug after that. What is remembered is bounded whatever
  // a proxy sends: a key counts by its first kMaxCauseBytes, and at most
  // kMaxCauses keys are kept per cluster until it succeeds again; the first
  // new one beyond them is logged at warn saying so, the later ones at debug.
  void warnOnce(const std::string& key, uint64_t conn_id, uint64_t stream_id,
                const std::string& message);
  static constexpr size_t kMaxCauses = 32;
  static constexpr size_t kMaxCauseBytes = 512;
  // The causes remembered for this cluster: how many, their bytes.
  struct Remembered {
    size_t causes = 0;
    size_t bytes = 0;
  };
  Remembered remembered() const;

 private:
  const config::Cluster& cluster_;
  config::ProxyAuthentication::Scheme configured_;
  std::shared_ptr<Mechanisms> mechanisms_;
  std::shared_ptr<LoopMailbox> mailbox_;
  metrics::Shard& shard_;
  std::shared_ptr<ClusterHealth> health_;
  std::string basic_;                          // "Basic ..." when there are credentials; a secret
  std::vector<Scheme> learnt_;                 // per endpoint (auto)
  std::vector<bool> http1_only_;               // per endpoint
  std::array<metrics::Counter*, 16> cells_{};  // [scheme-1][outcome], resolved on first use
  bool failures_since_success_ = false;
  std::function<void(size_t)> http1_required_;
  Observer observer_;
};

// One app request's authentication across its attempts. Used on the
// worker's thread; held by a shared_ptr so a token job can find out it is
// gone.
class RequestAuth : public std::enable_shared_from_this<RequestAuth> {
 public:
  // `has_body`: an absolute-form request with a body (NTLM holds it back
  // during the handshake).
  RequestAuth(std::shared_ptr<ProxyAuth> auth, uint64_t conn_id, uint64_t stream_id, bool has_body);
  ~RequestAuth();

  // Before an attempt goes to proxy `endpoint`, as an h2 stream or on an
  // HTTP/1.1 connection (`connection_authenticated`: one NTLM already
  // proved itself on). `ready` gets what to send: within this call, or
  // (Negotiate) later on the worker's thread — never after this object is
  // gone.
  void prepare(size_t endpoint, bool h2, bool connection_authenticated,
               std::function<void(Prepared)> ready);

  // The proxy's final answer (not 1xx) to the attempt. `can_retry`: nothing
  // of the request beyond its head has left (no body byte, no tunnel byte).
  // `same_connection`: HTTP/1.1 and the answer leaves the connection open
  // (keep-alive), so a handshake may go on there.
  Verdict onResponse(const ResponseHead& head, bool can_retry, bool same_connection);

 private:
  // What this attempt sent.
  enum class Sent : uint8_t { Nothing, Basic, Negotiate, NtlmNegotiate, NtlmAuthenticate };
  // The Kerberos token job's result, on the worker's thread.
  void tokenReady(std::unique_ptr<SecurityContext> ctx, Step step);
  Prepared ntlmNegotiate();
  Scheme sentScheme() const;
  std::string offersText(const std::vector<Challenge>& offered) const;

  std::shared_ptr<ProxyAuth> auth_;
  uint64_t conn_id_;
  uint64_t stream_id_;
  bool has_body_;
  size_t endpoint_ = 0;
  bool h2_ = false;
  Sent sent_ = Sent::Nothing;
  bool connection_authenticated_ = false;
  bool retried_ = false;
  Scheme next_ = Scheme::None;          // the retry's scheme, chosen from the 407
  Scheme failed_local_ = Scheme::None;  // a scheme h2gate could not make credentials for
  std::unique_ptr<SecurityContext> ctx_;
  // prepare()'s callback while a Kerberos token is being made; the job
  // carries `attempt_` so a late result for an older attempt is dropped.
  std::function<void(Prepared)> ready_;
  uint64_t attempt_ = 0;
};

// Base64 (RFC 4648, with padding) of raw token bytes, and back; nullopt for
// text that is not base64.
std::string base64Encode(std::string_view raw);
std::optional<std::string> base64Decode(std::string_view text);

}  // namespace h2gate::upstream::auth
