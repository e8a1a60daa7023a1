// Client TLS towards one upstream cluster: one SSL_CTX built at start (trust
// store parsed once), shared by every connection to that cluster.
//
// Verification is on unless the config explicitly says otherwise. Each
// connection checks the proxy's name (DNS SAN) or IP (IP SAN) and sends SNI
// for names. Sessions are remembered per endpoint so reconnects resume.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <openssl/ssl.h>

#include "config/config.h"

namespace h2gate::net {

class TlsContext {
 public:
  // Builds the context. Returns nullptr and sets *error (naming the file or
  // setting at fault) on failure.
  static std::shared_ptr<TlsContext> create(const config::TlsContext& cfg,
                                            const std::string& cluster_name, std::string* error);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* native() const { return ctx_.get(); }
  bool verifies() const { return !insecure_; }

  // Prepares a new SSL object for `host` (the endpoint's name or IP):
  // SNI (cfg.sni, else host when it is a name), name/IP verification, and
  // the last session for `session_key` when there is one. Returns an error
  // message or "".
  std::string prepare(SSL* ssl, const std::string& host, const std::string& session_key) const;

  // The ALPN protocol the handshake selected ("h2", "http/1.1" or "").
  static std::string selectedAlpn(const SSL* ssl);
  // The reason of the last verification failure, for logs and 502 bodies.
  static std::string verifyError(const SSL* ssl);

 private:
  TlsContext() = default;
  static int onNewSession(SSL* ssl, SSL_SESSION* session);

  struct CtxFree {
    void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
  };
  std::unique_ptr<SSL_CTX, CtxFree> ctx_;
  std::string sni_;
  bool insecure_ = false;
  // Resumption: the newest session per endpoint ("host:port"). Shared by the
  // workers, hence the mutex.
  mutable std::mutex sessions_mutex_;
  mutable std::unordered_map<std::string, SSL_SESSION*> sessions_;
};

}  // namespace h2gate::net
