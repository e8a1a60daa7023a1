// The system's trusted CAs (gateway/net/system_roots.h) through their
// interface: OpenSSL's default paths on POSIX (system_roots_posix.cc), the
// ROOT and CA stores on Windows (system_roots_win.cc). A cluster without a
// trusted_ca verifies against them: they must be there, and be what the
// system trusts, not everything.
#include "gateway/net/system_roots.h"

#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstdio>
#include <memory>

#include <catch2/catch.hpp>

#include "tests/support/temp_dir.h"
#include "tests/support/test_ca.h"

using namespace h2gate;

namespace {

struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using Ctx = std::unique_ptr<SSL_CTX, CtxFree>;

// Whether `ctx`'s store finds an issuer for a certificate issued by `ca`'s
// certificate (read from its PEM file), i.e. whether `ca` is trusted.
bool trusts(SSL_CTX* ctx, X509* leaf) {
  X509_STORE_CTX* v = X509_STORE_CTX_new();
  REQUIRE(X509_STORE_CTX_init(v, SSL_CTX_get_cert_store(ctx), leaf, nullptr) == 1);
  const bool ok = X509_verify_cert(v) == 1;
  X509_STORE_CTX_free(v);
  return ok;
}

X509* readCert(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  REQUIRE(f);
  X509* x = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  REQUIRE(x);
  return x;
}

}  // namespace

TEST_CASE("system roots: loaded, and a CA made here is not among them", "[net][system_roots]") {
  Ctx ctx(SSL_CTX_new(TLS_client_method()));
  REQUIRE(ctx);
#if !defined(_WIN32)
  CHECK(net::loadSystemRoots(ctx.get()) == 1);
#else
  net::loadSystemRoots(ctx.get());  // a wine prefix may have no ROOT store
#endif
  test::TempDir dir("system-roots");
  test::TestCA ca(dir.path().string());
  const test::CertFiles server = ca.issueServer("server");
  X509* leaf = readCert(server.cert);
  CHECK_FALSE(trusts(ctx.get(), leaf));
  // The same check passes once that CA is trusted: it can tell the two apart.
  REQUIRE(SSL_CTX_load_verify_locations(ctx.get(), ca.caCertPath().c_str(), nullptr) == 1);
  CHECK(trusts(ctx.get(), leaf));
  X509_free(leaf);
}

#if !defined(_WIN32)
TEST_CASE("system roots: the distribution's bundle is what is trusted", "[net][system_roots]") {
  // The first certificate of the bundle OpenSSL's default paths name is a
  // root a system-rooted context trusts (a self-signed root verifies
  // against itself when it is in the store).
  Ctx ctx(SSL_CTX_new(TLS_client_method()));
  REQUIRE(net::loadSystemRoots(ctx.get()) == 1);
  const char* file = X509_get_default_cert_file();
  std::FILE* f = std::fopen(file, "r");
  if (f == nullptr) {
    WARN("no CA bundle at " << file << ": nothing to compare with");
    return;
  }
  X509* root = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  REQUIRE(root);
  CHECK(trusts(ctx.get(), root));
  X509_free(root);
}
#endif
