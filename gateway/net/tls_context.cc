#include "gateway/net/tls_context.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <asio/ip/address.hpp>

#include "gateway/net/system_roots.h"

namespace h2gate::net {
namespace {

int g_ex_index = -1;  // SSL ex-data: the TlsContext and session key of a connection
std::once_flag g_ex_once;

struct ConnectionData {
  const TlsContext* owner;
  std::string session_key;
};

void freeConnectionData(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
  delete static_cast<ConnectionData*>(ptr);
}

std::string opensslError(const std::string& what) {
  std::string out = what;
  unsigned long e;
  char buf[256];
  while ((e = ERR_get_error()) != 0) {
    ERR_error_string_n(e, buf, sizeof buf);
    out += ": ";
    out += buf;
  }
  return out;
}

int tlsVersion(const std::string& name) {
  if (name == "TLSv1_2") return TLS1_2_VERSION;
  if (name == "TLSv1_3") return TLS1_3_VERSION;
  if (name == "TLS_AUTO" || name.empty()) return 0;
  return -1;
}

}  // namespace

std::shared_ptr<TlsContext> TlsContext::create(const config::TlsContext& cfg,
                                               const std::string& cluster, std::string* error) {
  std::call_once(g_ex_once, [] {
    g_ex_index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, &freeConnectionData);
  });
  ERR_clear_error();
  std::shared_ptr<TlsContext> t(new TlsContext());
  const std::string where = "cluster " + cluster + ": ";
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx) {
    *error = opensslError(where + "SSL_CTX_new failed");
    return nullptr;
  }
  t->ctx_.reset(ctx);
  const int min = tlsVersion(cfg.tls_minimum_protocol_version);
  const int max = tlsVersion(cfg.tls_maximum_protocol_version);
  if (min < 0 || max < 0) {
    *error = where + "unsupported TLS version (TLSv1_2, TLSv1_3)";
    return nullptr;
  }
  SSL_CTX_set_min_proto_version(ctx, min ? min : TLS1_2_VERSION);
  if (max) SSL_CTX_set_max_proto_version(ctx, max);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);

  t->insecure_ = cfg.insecure_skip_verify;
  if (!t->insecure_) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    const int ok = cfg.trusted_ca.empty()
                       ? loadSystemRoots(ctx)
                       : SSL_CTX_load_verify_locations(ctx, cfg.trusted_ca.c_str(), nullptr);
    if (ok != 1) {
      *error = opensslError(where + "cannot load trusted CA " +
                            (cfg.trusted_ca.empty() ? "(system bundle)" : cfg.trusted_ca));
      return nullptr;
    }
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }

  if (!cfg.certificate_chain.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg.certificate_chain.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, cfg.private_key.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
      *error = opensslError(where + "cannot use client certificate " + cfg.certificate_chain);
      return nullptr;
    }
  }

  std::string wire;
  for (const std::string& p : cfg.alpn_protocols) {
    wire.push_back(static_cast<char>(p.size()));
    wire += p;
  }
  if (!wire.empty() &&
      SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(wire.data()),
                              static_cast<unsigned>(wire.size())) != 0) {
    *error = opensslError(where + "cannot set ALPN");
    return nullptr;
  }
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, &TlsContext::onNewSession);
  t->sni_ = cfg.sni;
  return t;
}

TlsContext::~TlsContext() {
  for (auto& [k, s] : sessions_) SSL_SESSION_free(s);
}

std::string TlsContext::prepare(SSL* ssl, const std::string& host,
                                const std::string& session_key) const {
  asio::error_code ec;
  (void)asio::ip::make_address(host, ec);
  const bool is_ip = !ec;
  const std::string& sni = !sni_.empty() ? sni_ : host;
  if (!(sni_.empty() && is_ip) && SSL_set_tlsext_host_name(ssl, sni.c_str()) != 1)
    return opensslError("cannot set SNI " + sni);
  if (!insecure_) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    // The certificate must name what we asked for: the SNI when configured,
    // otherwise the endpoint's host name or IP address.
    const std::string& expect = !sni_.empty() ? sni_ : host;
    const int ok = (is_ip && sni_.empty()) ? X509_VERIFY_PARAM_set1_ip_asc(param, expect.c_str())
                                           : X509_VERIFY_PARAM_set1_host(param, expect.c_str(), 0);
    if (ok != 1) return opensslError("cannot set the name to verify");
  }
  SSL_set_ex_data(ssl, g_ex_index, new ConnectionData{this, session_key});
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  if (auto it = sessions_.find(session_key); it != sessions_.end())
    SSL_set_session(ssl, it->second);
  return {};
}

int TlsContext::onNewSession(SSL* ssl, SSL_SESSION* session) {
  auto* data = static_cast<ConnectionData*>(SSL_get_ex_data(ssl, g_ex_index));
  if (!data) return 0;
  std::lock_guard<std::mutex> lock(data->owner->sessions_mutex_);
  SSL_SESSION*& slot = data->owner->sessions_[data->session_key];
  if (slot) SSL_SESSION_free(slot);
  slot = session;
  return 1;  // we keep the reference
}

std::string TlsContext::selectedAlpn(const SSL* ssl) {
  const unsigned char* p = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(ssl, &p, &len);
  return p ? std::string(reinterpret_cast<const char*>(p), len) : std::string();
}

std::string TlsContext::verifyError(const SSL* ssl) {
  const long r = SSL_get_verify_result(ssl);
  if (r == X509_V_OK) return {};
  return std::string("certificate verify failed: ") + X509_verify_cert_error_string(r);
}

}  // namespace h2gate::net
