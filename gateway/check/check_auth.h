// `h2gate check`'s proxy authentication, with the gateway's own classes:
// one auth::ProxyAuth (as a pool has per cluster) and one
// auth::RequestAuth (as a request has across its attempts), driven through
// the same hooks as the pool's (H2Stream's auth hook, Http1Exchange's
// AuthHooks). Each leg is a line of the Report: what went up front, the
// proxy's 407 and what auto chose from it, NTLM's challenge and
// authenticate messages on one connection, the Negotiate answer and its
// mutual-authentication token. Never a credential: only schemes, user
// names and token sizes. Used on check's one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <asio.hpp>

#include "config/config.h"
#include "gateway/base/http_types.h"
#include "gateway/check/check_report.h"
#include "gateway/upstream/auth/proxy_auth.h"
#include "gateway/upstream/health.h"

namespace h2gate::check {

class AuthWalk {
 public:
  // `io` and `report` MUST outlive this object; `conn_id` is for the log
  // lines of the gateway code.
  AuthWalk(asio::io_context& io, Report& report, std::chrono::milliseconds step_timeout,
           uint64_t conn_id);
  ~AuthWalk();
  AuthWalk(const AuthWalk&) = delete;
  AuthWalk& operator=(const AuthWalk&) = delete;

  // The cluster whose proxies are checked next (null: none); it MUST
  // outlive its use here. Forgets the previous cluster's state.
  void setCluster(const config::Cluster* cluster);
  // The endpoint (index in the cluster) checked next.
  void startEndpoint(size_t endpoint);
  // Forgets the last request's state (next endpoint).
  void resetRequest();

  // The endpoint is to be reached over HTTP/1.1 only: NTLM configured, or
  // a proxy that asked for NTLM while spoken to over h2.
  bool http1Only() const { return http1_only_; }

  // Prints what is configured (`carried`: upstream_headers carry a
  // Proxy-Authorization, which wins as in the daemon) and makes the
  // request's RequestAuth; sets `*has_credentials` when credentials go.
  bool describe(bool carried, bool* has_credentials);
  // Whether the request authenticates (a RequestAuth exists).
  bool active() const { return request_auth_ != nullptr; }

  // The credentials for the next attempt, as the pool asks for them
  // (a Kerberos token may come from a token thread: runs `io` until it is
  // there); prints what is sent. False (and a FAIL line) on timeout.
  bool prepare(bool h2);
  // The Proxy-Authorization value of the attempt ("" none); a secret.
  const std::string& authorization() const { return authorization_; }
  // The attempt is an NTLM negotiate leg.
  bool handshake() const { return handshake_; }

  // The proxy's final answer to one leg, judged by RequestAuth as in the
  // daemon; printed. A Retry verdict sets retryRequested().
  upstream::auth::Verdict onResponse(const ResponseHead& head, bool can_retry,
                                     bool same_connection);
  bool retryRequested() const { return retry_; }
  void clearRetry() { retry_ = false; }

  // The attempt's answer was a 407: FAIL lines with its cause (credentials
  // that could not be made, credentials rejected, a scheme the config cannot
  // answer, none configured). Returns false.
  bool fail407(const ResponseHead& h, const std::string& step, bool has_credentials);

  // "Negotiate, NTLM": the schemes of the answer's Proxy-Authenticate.
  static std::string offersText(const ResponseHead& h);

 private:
  std::string who() const;
  // Negotiate gets its tickets with the password of the credentials.
  bool kerberosPassword() const;
  // The scheme of a Proxy-Authorization value ("Negotiate", "NTLM", …).
  static std::string schemeOf(const std::string& authorization);
  // "Negotiate (1040 characters, not shown)": what went, never the value.
  static std::string sentText(const std::string& authorization);

  asio::io_context& io_;
  Report& report_;
  std::chrono::milliseconds step_timeout_;
  uint64_t conn_id_;
  const config::Cluster* cluster_ = nullptr;
  size_t endpoint_ = 0;
  std::shared_ptr<upstream::ClusterHealth> health_;
  std::shared_ptr<upstream::auth::ProxyAuth> auth_;
  std::shared_ptr<upstream::auth::RequestAuth> request_auth_;
  std::string authorization_;  // a secret, wiped
  bool handshake_ = false;
  std::string sent_;  // the scheme of the last leg's credentials, "" none
  bool retry_ = false;
  bool http1_only_ = false;
  // What the platform said when credentials could not be made (never a
  // secret), and for which scheme.
  std::string local_failure_;
  upstream::auth::Scheme local_failure_scheme_ = upstream::auth::Scheme::None;
};

}  // namespace h2gate::check
