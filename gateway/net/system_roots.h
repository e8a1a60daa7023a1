// The system's trusted CA certificates into a TLS context's X509_STORE, for
// upstream verification when the config names no trusted_ca (--cacert).
// POSIX: OpenSSL's default verify paths, i.e. the distribution's bundle
// (system_roots_posix.cc). Windows: the certificates of the ROOT and CA
// system stores (system_roots_win.cc; OpenSSL does not read them itself).
#pragma once

#include <openssl/ssl.h>

namespace h2gate::net {

// 1 when the trust anchors were set up, else 0 with OpenSSL's error queue
// (or nothing) saying why.
int loadSystemRoots(SSL_CTX* ctx);

}  // namespace h2gate::net
