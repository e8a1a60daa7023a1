#include "gateway/upstream/auth/proxy_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <map>
#include <mutex>
#include <set>

#include "config/node_reader.h"
#include "gateway/base/log.h"
#include "gateway/upstream/upstream_stats.h"

namespace h2gate::upstream::auth {
namespace {

using ConfigScheme = config::ProxyAuthentication::Scheme;

// Causes already logged at warn, per cluster, shared by every worker (so
// "once" holds with several). Forgotten when the cluster succeeds again, so
// a failure that comes back is logged again. Bounded whatever its proxies
// send: a cause is its first kMaxCauseBytes, and at most kMaxCauses are
// kept; beyond them one more warning says so and new causes go to debug.
struct Causes {
  std::set<std::string> keys;
  bool full = false;  // the warning that no more are kept was logged
};
std::mutex g_logged_mu;
std::map<std::string, Causes>& loggedCauses() {
  static std::map<std::string, Causes> causes;
  return causes;
}

// A scheme name as the proxy wrote it, cut to this many characters when shown.
constexpr size_t kMaxShownScheme = 64;
// At most this many of a 407's schemes are named in a message.
constexpr size_t kMaxShownSchemes = 8;
// One log line of a failure: escaped, at most this long.
constexpr size_t kMaxMessageBytes = 2048;

size_t schemeIndex(Scheme s) {
  return static_cast<size_t>(s) - 1;  // Basic, Negotiate, Ntlm
}

void wipe(std::string& s) {
  config::wipe(s);
}

}  // namespace

std::string_view schemeLabel(Scheme s) {
  switch (s) {
    case Scheme::Basic:
      return "basic";
    case Scheme::Negotiate:
      return "negotiate";
    case Scheme::Ntlm:
      return "ntlm";
    case Scheme::None:
      break;
  }
  return "none";
}

std::string_view outcomeLabel(Outcome o) {
  switch (o) {
    case Outcome::Success:
      return "success";
    case Outcome::Rejected:
      return "rejected";
    case Outcome::Failed:
      return "failed";
    case Outcome::MutualFailed:
      return "mutual_failed";
  }
  return "failed";
}

std::string base64Encode(std::string_view raw) {
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(raw.data()),
                                static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::string> base64Decode(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0 || text.size() > (1u << 20)) return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the bytes the padding stands for as zeros.
  size_t len = static_cast<size_t>(n);
  if (text.back() == '=') --len;
  if (text[text.size() - 2] == '=') --len;
  out.resize(len);
  return out;
}

// ---------------------------------------------------------------------------
// ProxyAuth

bool ProxyAuth::configured(const config::Cluster& c) {
  return c.authentication.has_value() || c.credentials.has_value();
}

ProxyAuth::ProxyAuth(const config::Cluster& cluster, asio::io_context& io, metrics::Shard& shard,
                     std::shared_ptr<ClusterHealth> health, std::shared_ptr<Mechanisms> mechanisms)
    : cluster_(cluster),
      configured_(cluster.authentication ? cluster.authentication->scheme : ConfigScheme::Basic),
      mailbox_(std::make_shared<LoopMailbox>(io)),
      shard_(shard),
      health_(std::move(health)),
      learnt_(cluster.endpoints.size(), Scheme::None),
      http1_only_(cluster.endpoints.size(), false) {
  if (cluster.credentials) {
    std::string plain = cluster.credentials->username + ":" + cluster.credentials->password;
    std::string encoded = base64Encode(plain);
    basic_ = "Basic " + encoded;
    wipe(plain);
    wipe(encoded);
  }
  if (mechanisms) {
    mechanisms_ = std::move(mechanisms);
  } else if (configured_ != ConfigScheme::Basic) {
    CredentialSource source;
    if (cluster.credentials) {
      source.username = cluster.credentials->username;
      source.password = cluster.credentials->password;
    }
    if (cluster.authentication) {
      source.client_keytab = cluster.authentication->client_keytab;
      source.principal = cluster.authentication->principal;
    }
    mechanisms_ = platformMechanisms(source);
    wipe(source.password);
  }
  const std::string_view shown = configured_ == ConfigScheme::Basic       ? "basic"
                                 : configured_ == ConfigScheme::Negotiate ? "negotiate"
                                 : configured_ == ConfigScheme::Ntlm      ? "ntlm"
                                                                          : "auto";
  if (health_)
    for (size_t i = 0; i < cluster.endpoints.size(); ++i) health_->setAuth(i, shown);
}

ProxyAuth::~ProxyAuth() {
  mailbox_->close();
  wipe(basic_);
}

bool ProxyAuth::http1Only(size_t endpoint) const {
  return configured_ == ConfigScheme::Ntlm ||
         (endpoint < http1_only_.size() && http1_only_[endpoint]);
}

Scheme ProxyAuth::upFront(size_t endpoint) const {
  switch (configured_) {
    case ConfigScheme::Basic:
      return Scheme::Basic;
    case ConfigScheme::Negotiate:
      return Scheme::Negotiate;
    case ConfigScheme::Ntlm:
      return Scheme::Ntlm;
    case ConfigScheme::Auto:
      break;
  }
  return endpoint < learnt_.size() ? learnt_[endpoint] : Scheme::None;
}

Scheme ProxyAuth::choose(const std::vector<Challenge>& offered, Scheme skip) const {
  auto usable = [&](Scheme s, std::string_view name) {
    return s != skip && findChallenge(offered, name) != nullptr;
  };
  switch (configured_) {
    case ConfigScheme::Basic:
      return usable(Scheme::Basic, "Basic") && !basic_.empty() ? Scheme::Basic : Scheme::None;
    case ConfigScheme::Negotiate:
      return usable(Scheme::Negotiate, "Negotiate") ? Scheme::Negotiate : Scheme::None;
    case ConfigScheme::Ntlm:
      return usable(Scheme::Ntlm, "NTLM") ? Scheme::Ntlm : Scheme::None;
    case ConfigScheme::Auto:
      break;
  }
  if (usable(Scheme::Negotiate, "Negotiate")) return Scheme::Negotiate;
  if (usable(Scheme::Ntlm, "NTLM")) return Scheme::Ntlm;
  if (usable(Scheme::Basic, "Basic") && !basic_.empty()) return Scheme::Basic;
  return Scheme::None;
}

void ProxyAuth::learn(size_t endpoint, Scheme scheme, uint64_t conn_id, uint64_t stream_id) {
  if (configured_ != ConfigScheme::Auto || endpoint >= learnt_.size()) return;
  if (learnt_[endpoint] == scheme) return;
  learnt_[endpoint] = scheme;
  if (health_) health_->setAuth(endpoint, schemeLabel(scheme));
  H2G_LOG(Info, conn_id, stream_id,
          proxyName(endpoint) << " wants " << schemeLabel(scheme)
                              << " authentication (auto): later requests carry it up front");
  if (scheme == Scheme::Ntlm && !http1_only_[endpoint]) {
    http1_only_[endpoint] = true;
    warnOnce("ntlm-http1", conn_id, stream_id,
             proxyName(endpoint) +
                 " wants NTLM, which authenticates a connection: HTTP/2 cannot carry it (its "
                 "streams are independent requests), so h2gate reaches this proxy over "
                 "HTTP/1.1 connections from now on, one per tunnel");
    if (http1_required_) http1_required_(endpoint);
  }
}

std::string ProxyAuth::spn(size_t endpoint) const {
  if (cluster_.authentication && !cluster_.authentication->spn.empty())
    return cluster_.authentication->spn;
  return "HTTP@" + (endpoint < cluster_.endpoints.size() ? cluster_.endpoints[endpoint].address
                                                         : std::string("localhost"));
}

std::string ProxyAuth::proxyName(size_t endpoint) const {
  std::string ep = endpoint < cluster_.endpoints.size()
                       ? endpointLabel(cluster_.endpoints[endpoint].address,
                                       cluster_.endpoints[endpoint].port_value)
                       : std::string("?");
  // A proxy a PAC file named is a cluster of its own, named "PROXY h:p" or
  // "HTTPS h:p" (upstream/router.h).
  if (cluster_.name.starts_with("PROXY ") || cluster_.name.starts_with("HTTPS "))
    return "proxy " + ep + " (named by a PAC file)";
  return "proxy " + ep + " of cluster " + cluster_.name;
}

void ProxyAuth::record(Scheme scheme, Outcome outcome, uint64_t conn_id, uint64_t stream_id,
                       const std::string& why) {
  if (scheme != Scheme::None) {
    const size_t i = schemeIndex(scheme) * 4 + static_cast<size_t>(outcome);
    if (!cells_[i])
      cells_[i] = &shard_.counter(
          metrics::Family::UpstreamAuth,
          {cluster_.name, std::string(schemeLabel(scheme)), std::string(outcomeLabel(outcome))});
    cells_[i]->add();
  }
  if (observer_) observer_(scheme, outcome, why);
  if (outcome == Outcome::Success) {
    if (failures_since_success_) {
      failures_since_success_ = false;
      std::lock_guard lock(g_logged_mu);
      loggedCauses().erase(cluster_.name);
    }
    return;
  }
  failures_since_success_ = true;
  warnOnce(std::string(schemeLabel(scheme)) + "|" + std::string(outcomeLabel(outcome)) + "|" + why,
           conn_id, stream_id, why);
}

void ProxyAuth::warnOnce(const std::string& key, uint64_t conn_id, uint64_t stream_id,
                         const std::string& message) {
  enum class Seen { New, Known, Full } seen = Seen::Known;
  {
    std::lock_guard lock(g_logged_mu);
    Causes& causes = loggedCauses()[cluster_.name];
    std::string cause = key.substr(0, kMaxCauseBytes);
    if (causes.keys.count(cause) == 0) {
      if (causes.keys.size() < kMaxCauses) {
        causes.keys.insert(std::move(cause));
        seen = Seen::New;
      } else if (!causes.full) {
        causes.full = true;
        seen = Seen::Full;
      }
    }
  }
  std::string line = config::escapeControls(message);
  if (line.size() > kMaxMessageBytes)
    line = line.substr(0, kMaxMessageBytes) + "... (" + std::to_string(line.size()) + " bytes)";
  if (seen == Seen::New) {
    H2G_LOG(Warn, conn_id, stream_id, line);
  } else if (seen == Seen::Full) {
    H2G_LOG(Warn, conn_id, stream_id,
            line << " (cluster " << cluster_.name << " has had " << kMaxCauses
                 << " other kinds of authentication failure since its last success: "
                    "further new ones are logged at debug level only)");
  } else {
    H2G_LOG(Debug, conn_id, stream_id, line);
  }
}

ProxyAuth::Remembered ProxyAuth::remembered() const {
  std::lock_guard lock(g_logged_mu);
  Remembered r;
  const auto it = loggedCauses().find(cluster_.name);
  if (it == loggedCauses().end()) return r;
  r.causes = it->second.keys.size();
  for (const std::string& k : it->second.keys) r.bytes += k.size();
  return r;
}

// ---------------------------------------------------------------------------
// RequestAuth

RequestAuth::RequestAuth(std::shared_ptr<ProxyAuth> auth, uint64_t conn_id, uint64_t stream_id,
                         bool has_body)
    : auth_(std::move(auth)), conn_id_(conn_id), stream_id_(stream_id), has_body_(has_body) {}

RequestAuth::~RequestAuth() = default;

Scheme RequestAuth::sentScheme() const {
  switch (sent_) {
    case Sent::Basic:
      return Scheme::Basic;
    case Sent::Negotiate:
      return Scheme::Negotiate;
    case Sent::NtlmNegotiate:
    case Sent::NtlmAuthenticate:
      return Scheme::Ntlm;
    case Sent::Nothing:
      break;
  }
  return Scheme::None;
}

std::string RequestAuth::offersText(const std::vector<Challenge>& offered) const {
  // The proxy's words, bounded: they go into log lines and their causes.
  std::string out;
  for (size_t i = 0; i < offered.size() && i < kMaxShownSchemes; ++i) {
    const std::string& scheme = offered[i].scheme;
    out += (out.empty() ? "" : ", ") +
           config::escapeControls(std::string_view(scheme).substr(0, kMaxShownScheme));
    if (scheme.size() > kMaxShownScheme)
      out += "... (" + std::to_string(scheme.size()) + " characters)";
  }
  if (offered.size() > kMaxShownSchemes)
    out += " and " + std::to_string(offered.size() - kMaxShownSchemes) + " more";
  return out.empty() ? "nothing h2gate understands" : out;
}

Prepared RequestAuth::ntlmNegotiate() {
  Prepared p;
  ctx_ = auth_->mechanisms().newContext(Mechanism::Ntlm, auth_->spn(endpoint_));
  Step step = ctx_->step({});
  if (step.status != Step::Status::Continue || step.token.empty()) {
    ctx_.reset();
    failed_local_ = Scheme::Ntlm;
    auth_->record(Scheme::Ntlm, Outcome::Failed, conn_id_, stream_id_,
                  "NTLM to " + auth_->proxyName(endpoint_) + ": " +
                      (step.error.empty() ? "no negotiate message" : step.error) +
                      (step.hint.empty() ? "" : " (" + step.hint + ")") +
                      "; requests go without credentials and get the proxy's 407");
    wipe(step.token);
    return p;
  }
  std::string encoded = base64Encode(step.token);
  p.authorization = "NTLM " + encoded;
  p.handshake = true;
  wipe(encoded);
  wipe(step.token);
  sent_ = Sent::NtlmNegotiate;
  return p;
}

void RequestAuth::prepare(size_t endpoint, bool h2, bool connection_authenticated,
                          std::function<void(Prepared)> ready) {
  endpoint_ = endpoint;
  h2_ = h2;
  sent_ = Sent::Nothing;
  connection_authenticated_ = connection_authenticated;
  ctx_.reset();
  Scheme scheme = next_ != Scheme::None ? next_ : auth_->upFront(endpoint);
  if (scheme == failed_local_) scheme = Scheme::None;
  switch (scheme) {
    case Scheme::None:
      return ready(Prepared{});
    case Scheme::Basic: {
      Prepared p;
      p.authorization = auth_->basicHeader();
      sent_ = Sent::Basic;
      return ready(std::move(p));
    }
    case Scheme::Ntlm:
      // An authenticated connection needs nothing more; HTTP/2 cannot do
      // NTLM at all (the pool sends such endpoints over HTTP/1.1).
      if (h2 || connection_authenticated) return ready(Prepared{});
      return ready(ntlmNegotiate());
    case Scheme::Negotiate:
      break;
  }
  // A Kerberos token: on the event loop when the service ticket is in
  // memory (no KDC, no DNS, no cache file: Mechanisms::firstStepIsLocal),
  // else on a token thread (see token_threads.h).
  const std::string spn = auth_->spn(endpoint);
  ready_ = std::move(ready);
  const uint64_t attempt = ++attempt_;
  if (auth_->mechanisms().firstStepIsLocal(Mechanism::Negotiate, spn)) {
    std::unique_ptr<SecurityContext> ctx =
        auth_->mechanisms().newContext(Mechanism::Negotiate, spn);
    Step step = ctx->step({});
    return tokenReady(std::move(ctx), std::move(step));
  }
  struct Job {
    std::unique_ptr<SecurityContext> ctx;
    Step step;
    ~Job() { wipe(step.token); }
  };
  auto job = std::make_shared<Job>();
  job->ctx = auth_->mechanisms().newContext(Mechanism::Negotiate, spn);
  std::weak_ptr<RequestAuth> weak = weak_from_this();
  std::shared_ptr<LoopMailbox> mailbox = auth_->mailbox();
  TokenThreads::instance().post([job, weak, mailbox, attempt] {
    job->step = job->ctx->step({});
    mailbox->post([job, weak, attempt] {
      auto self = weak.lock();
      if (!self || self->attempt_ != attempt || !self->ready_) return;
      self->tokenReady(std::move(job->ctx), std::move(job->step));
    });
  });
}

void RequestAuth::tokenReady(std::unique_ptr<SecurityContext> ctx, Step step) {
  std::function<void(Prepared)> ready = std::move(ready_);
  ready_ = nullptr;
  Prepared p;
  if (step.status == Step::Status::Failed || step.token.empty()) {
    failed_local_ = Scheme::Negotiate;
    auth_->record(Scheme::Negotiate, Outcome::Failed, conn_id_, stream_id_,
                  "Negotiate (Kerberos) to " + auth_->proxyName(endpoint_) + " for " +
                      auth_->spn(endpoint_) + ": " +
                      (step.error.empty() ? "no token" : step.error) +
                      (step.hint.empty() ? "" : " (" + step.hint + ")") +
                      "; requests go without a ticket and get the proxy's 407");
  } else {
    std::string encoded = base64Encode(step.token);
    p.authorization = "Negotiate " + encoded;
    wipe(encoded);
    sent_ = Sent::Negotiate;
    // Kept for the proxy's mutual-authentication token, if it sends one.
    if (step.status == Step::Status::Continue) ctx_ = std::move(ctx);
  }
  wipe(step.token);
  ready(std::move(p));
}

Verdict RequestAuth::onResponse(const ResponseHead& head, bool can_retry, bool same_connection) {
  Verdict v;
  const std::string proxy = auth_->proxyName(endpoint_);
  if (head.status != 407) {
    switch (sent_) {
      case Sent::Negotiate: {
        // RFC 4559: the proxy's final answer may carry its half of a mutual
        // authentication; if it does, it must verify.
        const std::vector<Challenge> answer = challengesOf(head.headers);
        const Challenge* c = findChallenge(answer, "Negotiate");
        if (!c || c->token68.empty() || !ctx_) {
          auth_->record(Scheme::Negotiate, Outcome::Success, conn_id_, stream_id_);
          break;
        }
        std::optional<std::string> token = base64Decode(c->token68);
        Step step = token ? ctx_->step(*token) : Step{};
        ctx_.reset();
        if (token) wipe(*token);
        if (step.status == Step::Status::Complete) {
          auth_->record(Scheme::Negotiate, Outcome::Success, conn_id_, stream_id_);
          break;
        }
        const std::string why =
            token ? (step.error.empty() ? "the handshake did not complete" : step.error)
                  : "its token is not base64";
        auth_->record(Scheme::Negotiate, Outcome::MutualFailed, conn_id_, stream_id_,
                      proxy + " answered " + std::to_string(head.status) +
                          " but its Kerberos mutual-authentication token does not verify (" + why +
                          "): the answer is not passed on");
        v.kind = Verdict::Kind::Fail;
        v.reason =
            "the upstream proxy could not prove its identity (Kerberos mutual "
            "authentication failed: " +
            why + ")";
        break;
      }
      case Sent::Basic:
        auth_->record(Scheme::Basic, Outcome::Success, conn_id_, stream_id_);
        break;
      case Sent::NtlmAuthenticate:
        auth_->record(Scheme::Ntlm, Outcome::Success, conn_id_, stream_id_);
        v.connection_authenticated = true;
        break;
      case Sent::NtlmNegotiate:
        // The proxy acted on the negotiate leg without a challenge: it did
        // not want NTLM after all. With a body held back it saw the request
        // without one: that answer must not reach the app.
        if (has_body_) {
          v.kind = Verdict::Kind::Fail;
          v.reason = "the upstream proxy answered the NTLM negotiate message with " +
                     std::to_string(head.status) + " instead of a challenge";
          auth_->record(Scheme::Ntlm, Outcome::Failed, conn_id_, stream_id_,
                        proxy + " " + v.reason);
        }
        break;
      case Sent::Nothing:
        break;
    }
    ctx_.reset();
    return v;
  }

  // 407.
  const std::vector<Challenge> offered = challengesOf(head.headers);
  switch (sent_) {
    case Sent::Basic:
    case Sent::Negotiate:
    case Sent::NtlmAuthenticate: {
      const std::string scheme(schemeLabel(sentScheme()));
      auth_->record(sentScheme(), Outcome::Rejected, conn_id_, stream_id_,
                    proxy + " rejected the " + scheme + " credentials (407 again; it offers " +
                        offersText(offered) + "); the app gets the 407");
      ctx_.reset();
      return v;
    }
    case Sent::NtlmNegotiate: {
      const Challenge* c = findChallenge(offered, "NTLM");
      std::string why;
      std::optional<std::string> challenge;
      if (!c || c->token68.empty())
        why = "its 407 carries no NTLM challenge";
      else if (!same_connection)
        why = "it closes the connection after the challenge (NTLM needs it kept open)";
      else if (!(challenge = base64Decode(c->token68)))
        why = "its NTLM challenge is not base64";
      Step step;
      if (why.empty()) {
        step = ctx_->step(*challenge);
        wipe(*challenge);
        if (step.status == Step::Status::Failed || step.token.empty())
          why = step.error.empty() ? "no authenticate message" : step.error;
      }
      if (!why.empty()) {
        auth_->record(Scheme::Ntlm, Outcome::Failed, conn_id_, stream_id_,
                      "NTLM with " + proxy + " failed: " + why + "; the app gets the 407");
        ctx_.reset();
        wipe(step.token);
        return v;
      }
      std::string encoded = base64Encode(step.token);
      wipe(step.token);
      v.kind = Verdict::Kind::Continue;
      v.authorization = "NTLM " + encoded;
      wipe(encoded);
      sent_ = Sent::NtlmAuthenticate;
      ctx_.reset();  // NTLM is done with it: the proxy's answer carries no token
      return v;
    }
    case Sent::Nothing:
      break;
  }
  // We sent nothing (not known yet, or the credentials could not be made):
  // the 407 says what the proxy wants.
  if (retried_ || !can_retry) return v;
  const Scheme scheme = auth_->choose(offered, failed_local_);
  if (scheme == Scheme::None) {
    if (failed_local_ == Scheme::None)
      auth_->warnOnce("offers|" + offersText(offered), conn_id_, stream_id_,
                      proxy + " asks for " + offersText(offered) + ", which cluster " +
                          auth_->cluster().name +
                          "'s proxy_authentication cannot answer; apps get its 407");
    return v;
  }
  retried_ = true;
  if (failed_local_ == Scheme::None) auth_->learn(endpoint_, scheme, conn_id_, stream_id_);
  if (scheme == Scheme::Ntlm && !h2_ && same_connection) {
    // On this connection: its 407 is read to the end, then the negotiate leg.
    Prepared p = ntlmNegotiate();
    if (p.authorization.empty()) return v;
    v.kind = Verdict::Kind::Continue;
    v.authorization = std::move(p.authorization);
    v.handshake = true;
    return v;
  }
  next_ = scheme;
  v.kind = Verdict::Kind::Retry;
  return v;
}

}  // namespace h2gate::upstream::auth
