#include "gateway/check/check_auth.h"

#include <optional>
#include <utility>

#include "gateway/base/ascii.h"
#include "gateway/metrics/registry.h"
#include "gateway/upstream/upstream_stats.h"

namespace h2gate::check {

AuthWalk::AuthWalk(asio::io_context& io, Report& report, std::chrono::milliseconds step_timeout,
                   uint64_t conn_id)
    : io_(io), report_(report), step_timeout_(step_timeout), conn_id_(conn_id) {}

AuthWalk::~AuthWalk() {
  config::wipe(authorization_);
}

void AuthWalk::resetRequest() {
  retry_ = false;
  sent_.clear();
  local_failure_.clear();
  config::wipe(authorization_);
  handshake_ = false;
  request_auth_.reset();
}

void AuthWalk::setCluster(const config::Cluster* c) {
  resetRequest();
  auth_.reset();
  health_.reset();
  http1_only_ = false;
  cluster_ = c;
  if (c == nullptr || !upstream::auth::ProxyAuth::configured(*c)) return;
  const config::Cluster& cluster = *c;
  std::vector<std::string> labels;
  for (const config::SocketAddress& e : cluster.endpoints)
    labels.push_back(upstream::endpointLabel(e.address, e.port_value));
  health_ = std::make_shared<upstream::ClusterHealth>(cluster.name, std::move(labels));
  auth_ = std::make_shared<upstream::auth::ProxyAuth>(
      cluster, io_, metrics::Registry::global().newShard(), health_);
  auth_->onHttp1Required([this](size_t) { http1_only_ = true; });
  auth_->setObserver(
      [this](upstream::auth::Scheme s, upstream::auth::Outcome o, const std::string& why) {
        if (o == upstream::auth::Outcome::Failed) {
          // Without the daemon's "what happens next" (its log's reader
          // needs it; here the next lines show it).
          local_failure_ = why.substr(0, why.find("; requests go without"));
          local_failure_scheme_ = s;
        }
      });
}

void AuthWalk::startEndpoint(size_t endpoint) {
  endpoint_ = endpoint;
  http1_only_ = auth_ && auth_->http1Only(endpoint);
}

bool AuthWalk::describe(bool carried, bool* has_credentials) {
  report_.begin();
  if (carried) {
    report_.ok("proxy-auth", "Proxy-Authorization from upstream_headers");
    *has_credentials = true;
    auth_.reset();
    return true;
  }
  if (!auth_) {
    report_.note("proxy-auth", "none configured");
    return true;
  }
  request_auth_ =
      std::make_shared<upstream::auth::RequestAuth>(auth_, conn_id_, 1, /*has_body=*/false);
  *has_credentials = true;
  const config::Cluster& cluster = *cluster_;
  const std::string shown =
      !cluster.authentication ? "basic (proxy_credentials)"
      : cluster.authentication->scheme == config::ProxyAuthentication::Scheme::Auto
          ? "auto (the strongest scheme the proxy offers: Negotiate > NTLM > Basic)"
          : std::string(upstream::auth::schemeLabel(auth_->upFront(endpoint_)));
  report_.note("proxy-auth", "configured: " + shown + who());
  return true;
}

bool AuthWalk::kerberosPassword() const {
  return cluster_ && cluster_->credentials && cluster_->authentication &&
         cluster_->authentication->client_keytab.empty();
}

std::string AuthWalk::who() const {
  return cluster_ && cluster_->credentials ? " as '" + cluster_->credentials->username + "'"
                                           : std::string();
}

std::string AuthWalk::schemeOf(const std::string& authorization) {
  return authorization.substr(0, authorization.find(' '));
}
std::string AuthWalk::sentText(const std::string& authorization) {
  const size_t sp = authorization.find(' ');
  const size_t n = sp == std::string::npos ? 0 : authorization.size() - sp - 1;
  return schemeOf(authorization) + " (" + std::to_string(n) + " characters, not shown)";
}
std::string AuthWalk::offersText(const ResponseHead& h) {
  // What the proxy wrote: each scheme name shortened, the list too.
  constexpr size_t kShown = 8;
  const auto challenges = upstream::auth::challengesOf(h.headers);
  std::string schemes;
  for (size_t i = 0; i < challenges.size() && i < kShown; ++i)
    schemes += (schemes.empty() ? "" : ", ") + serverText(challenges[i].scheme, 64);
  if (challenges.size() > kShown)
    schemes += " and " + std::to_string(challenges.size() - kShown) + " more";
  return schemes.empty() ? std::string("no Proxy-Authenticate") : schemes;
}

bool AuthWalk::prepare(bool h2) {
  config::wipe(authorization_);
  handshake_ = false;
  if (!request_auth_) return true;
  report_.begin();
  local_failure_.clear();
  std::optional<upstream::auth::Prepared> prepared;
  // A Kerberos token may be made on a token thread and posted back: the
  // loop must wait for it even with nothing else to do.
  auto guard = asio::make_work_guard(io_);
  request_auth_->prepare(endpoint_, h2, /*connection_authenticated=*/false,
                         [&](upstream::auth::Prepared p) { prepared = std::move(p); });
  const auto deadline = Clock::now() + step_timeout_;
  io_.restart();
  while (!prepared && Clock::now() < deadline) io_.run_one_for(deadline - Clock::now());
  if (!prepared)
    return report_.fail("proxy-auth",
                        "no Kerberos token within " + std::to_string(step_timeout_.count()) + " ms",
                        "the KDC does not answer: check krb5.conf's kdc for the realm and "
                        "that it is reachable (kinit works?)");
  authorization_ = std::move(prepared->authorization);
  handshake_ = prepared->handshake;
  // A Kerberos ticket h2gate got itself (with the configured password):
  // which, and until when.
  if (iequals(schemeOf(authorization_), "Negotiate")) {
    const std::string ticket =
        auth_->mechanisms().credentialsNote(upstream::auth::Mechanism::Negotiate);
    if (!ticket.empty()) report_.ok("proxy-auth", ticket);
  }
  if (!local_failure_.empty())
    report_.note("proxy-auth", "cannot make " +
                                   std::string(upstream::auth::schemeLabel(local_failure_scheme_)) +
                                   " credentials: " + local_failure_);
  if (authorization_.empty())
    report_.note("proxy-auth",
                 "nothing sent up front" + std::string(local_failure_.empty()
                                                           ? " (the scheme is learnt from the "
                                                             "proxy's 407)"
                                                           : ""));
  else
    report_.ok("proxy-auth",
               "sending " + sentText(authorization_) +
                   (handshake_ ? ": NTLM negotiate message (type 1), the challenge comes "
                                 "back on this connection"
                               : "") +
                   who());
  sent_ = schemeOf(authorization_);
  return true;
}

upstream::auth::Verdict AuthWalk::onResponse(const ResponseHead& head, bool can_retry,
                                             bool same_connection) {
  using Kind = upstream::auth::Verdict::Kind;
  const std::string sent = sent_;
  upstream::auth::Verdict v = request_auth_->onResponse(head, can_retry, same_connection);
  const std::string answer =
      std::to_string(head.status) + (head.reason.empty() ? "" : " " + serverText(head.reason));
  switch (v.kind) {
    case Kind::Retry: {
      retry_ = true;
      const upstream::auth::Scheme learnt = auth_->upFront(endpoint_);
      report_.note("proxy-auth",
                   answer + ", the proxy offers " + offersText(head) +
                       (learnt != upstream::auth::Scheme::None
                            ? ": auto picks " + std::string(upstream::auth::schemeLabel(learnt))
                            : std::string()) +
                       "; one retry with it, as the daemon does");
      break;
    }
    case Kind::Continue:
      if (v.handshake) {
        report_.note("proxy-auth", answer + ", the proxy offers " + offersText(head) +
                                       ": using ntlm on this connection");
        report_.ok("proxy-auth", "sending " + sentText(v.authorization) +
                                     ": NTLM negotiate message (type 1)" + who());
      } else {
        report_.ok("proxy-auth", answer + " with the NTLM challenge (type 2): sending " +
                                     sentText(v.authorization) +
                                     ", the authenticate message (type 3), on the same "
                                     "connection");
      }
      sent_ = schemeOf(v.authorization);
      break;
    case Kind::Fail:
      report_.fail("proxy-auth", v.reason,
                   "the proxy's answer does not prove it holds the service key of its "
                   "principal: a proxy in the way, or the wrong keytab on the proxy");
      break;
    case Kind::Deliver:
      if (head.status == 407 || sent.empty()) break;
      if (iequals(sent, "Negotiate")) {
        const auto answer_challenges = upstream::auth::challengesOf(head.headers);
        const upstream::auth::Challenge* c =
            upstream::auth::findChallenge(answer_challenges, "Negotiate");
        report_.ok("proxy-auth", "Negotiate accepted (" + answer + "); " +
                                     (c && !c->token68.empty()
                                          ? "the proxy's mutual-authentication token verified"
                                          : "the proxy sent no mutual-authentication token"));
      } else if (iequals(sent, "NTLM")) {
        report_.ok("proxy-auth", "NTLM accepted (" + answer +
                                     "): the connection is "
                                     "authenticated");
      } else {
        report_.ok("proxy-auth", sent + " accepted (" + answer + ")");
      }
      break;
  }
  return v;
}

bool AuthWalk::fail407(const ResponseHead& h, const std::string& step, bool has_credentials) {
  const std::string what =
      "407 proxy authentication required (the proxy offers: " + offersText(h) + ")";
  if (!local_failure_.empty()) {
    report_.failLine(step, what);
    const bool kerberos = local_failure_scheme_ == upstream::auth::Scheme::Negotiate;
    return report_.fail("proxy-auth",
                        "no " + std::string(upstream::auth::schemeLabel(local_failure_scheme_)) +
                            " credentials: " + local_failure_,
                        !kerberos ? "give the cluster proxy_authentication.credentials"
                        : kerberosPassword()
                            ? "h2gate gets the ticket with the password of the cluster's "
                              "credentials: check the user name (or principal) and the password"
                            : "get a Kerberos ticket: run kinit (klist shows the credential cache "
                              "KRB5CCNAME names), or give the cluster a client_keytab or "
                              "credentials");
  }
  if (!sent_.empty()) {
    report_.failLine(step, what);
    return report_.fail("proxy-auth", "the proxy rejected the " + sent_ + " credentials" + who(),
                        iequals(sent_, "Negotiate")
                            ? "the ticket is not accepted: kinit as a user the proxy "
                              "knows, check the spn (klist after a try shows the "
                              "service ticket)"
                            : "check user name and password (and DOMAIN\\user for NTLM)");
  }
  if (request_auth_)
    return report_.fail(step, what,
                        "the proxy asks for a scheme the cluster's proxy_authentication "
                        "cannot answer: set scheme to one it offers");
  return report_.fail(step, what,
                      has_credentials
                          ? "the proxy rejected the credentials: check user name and password"
                          : "give credentials: https://USER:PASSWORD@HOST:PORT in --upstream, "
                            "or credentials in the cluster");
}

}  // namespace h2gate::check
