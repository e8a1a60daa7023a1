#include "gateway/check/check_report.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "config/node_reader.h"

namespace h2gate::check {
namespace {

std::string nameText(X509_NAME* name) {
  if (name == nullptr) return "?";
  // The CN alone when there is one: a chain line stays readable.
  const int i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (i >= 0) {
    ASN1_STRING* s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
    unsigned char* utf8 = nullptr;
    const int n = ASN1_STRING_to_UTF8(&utf8, s);
    if (n >= 0) {
      std::string cn(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
      OPENSSL_free(utf8);
      return "CN=" + serverText(cn);
    }
  }
  char buf[256];
  X509_NAME_oneline(name, buf, sizeof buf);
  return serverText(buf);
}

}  // namespace

std::string serverText(std::string_view text, size_t max) {
  if (text.size() <= max) return config::escapeControls(text);
  size_t cut = max;
  // Not inside a UTF-8 sequence: its lead byte goes with the rest of it.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return config::escapeControls(text.substr(0, cut)) + "... (" + std::to_string(text.size()) +
         " bytes)";
}

std::string Report::printable(std::string_view text) {
  return config::escapeControls(text);
}

std::string opensslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

// "CN=proxy.example (issuer CN=Corp CA, until Jan  1 00:00:00 2030 GMT) ← …"
std::string chainText(SSL* ssl) {
  STACK_OF(X509)* chain = SSL_get_peer_cert_chain(ssl);
  if (chain == nullptr || sk_X509_num(chain) == 0) return "no certificate";
  std::string out;
  // A chain is a few certificates; a server may send a hundred.
  constexpr int kShown = 6;
  const int n = sk_X509_num(chain);
  for (int i = 0; i < n && i < kShown; ++i) {
    X509* c = sk_X509_value(chain, i);
    if (i > 0) out += " <- ";
    out += nameText(X509_get_subject_name(c)) + " (issuer " + nameText(X509_get_issuer_name(c));
    BIO* b = BIO_new(BIO_s_mem());
    if (b != nullptr) {
      ASN1_TIME_print(b, X509_get0_notAfter(c));
      char* p = nullptr;
      const long len = BIO_get_mem_data(b, &p);
      out += ", until " + std::string(p, static_cast<size_t>(len));
      BIO_free(b);
    }
    out += ")";
  }
  if (n > kShown) out += " <- ... (" + std::to_string(n - kShown) + " more)";
  return out;
}

// What a user can do about a failed certificate verification.
std::string verifyAdvice(long result, const std::string& host) {
  switch (result) {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      return "unknown CA: pass --cacert FILE (or set trusted_ca in the cluster's "
             "validation_context), or add the company CA to the system store "
             "(/usr/local/share/ca-certificates, then update-ca-certificates)";
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return "the certificate is not issued for '" + host +
             "': use the proxy's name as written in its certificate, or set sni";
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return "check this machine's clock; otherwise the proxy's certificate must be renewed";
    default:
      return "ask the proxy's administrator which CA issues its certificate";
  }
}

}  // namespace h2gate::check
