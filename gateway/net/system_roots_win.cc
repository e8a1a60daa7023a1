#include <windows.h>
// wincrypt.h after windows.h (WIN32_LEAN_AND_MEAN leaves it out).
#include <wincrypt.h>

#include <openssl/err.h>
#include <openssl/x509.h>

#include "gateway/net/system_roots.h"

namespace h2gate::net {
namespace {

// Adds every certificate of one system store (the current user's view of
// it, which includes the machine's); returns how many were added.
int addStore(X509_STORE* store, const wchar_t* name) {
  HCERTSTORE sys = ::CertOpenSystemStoreW(0, name);
  if (!sys) return 0;
  int added = 0;
  const CERT_CONTEXT* cert = nullptr;
  while ((cert = ::CertEnumCertificatesInStore(sys, cert)) != nullptr) {
    if (cert->dwCertEncodingType != X509_ASN_ENCODING) continue;
    const unsigned char* der = cert->pbCertEncoded;
    X509* x = d2i_X509(nullptr, &der, static_cast<long>(cert->cbCertEncoded));
    if (!x) continue;  // a certificate OpenSSL cannot parse is skipped
    // A duplicate (in ROOT and CA both) is not an error for the store.
    if (X509_STORE_add_cert(store, x) == 1) ++added;
    X509_free(x);
  }
  ::CertCloseStore(sys, 0);
  return added;
}

}  // namespace

int loadSystemRoots(SSL_CTX* ctx) {
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  // Intermediates of the CA store help chains whose server sends too few;
  // only ROOT holds trust anchors, but X509_STORE has no such distinction:
  // like curl's CURLSSLOPT_NATIVE_CA, both are loaded.
  const int roots = addStore(store, L"ROOT");
  addStore(store, L"CA");
  ERR_clear_error();  // duplicates leave "cert already in hash table"
  return roots > 0 ? 1 : 0;
}

}  // namespace h2gate::net
