#include "tests/support/test_ca.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <memory>
#include <stdexcept>

namespace h2gate::test {

namespace {

[[noreturn]] void fail(const std::string& what) {
  char buf[256];
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  throw std::runtime_error("TestCA: " + what + ": " + buf);
}

EVP_PKEY* newKey() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (!key) fail("EVP_EC_gen");
  return key;
}

void addExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) fail("extension " + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

X509* newCert(EVP_PKEY* key, const std::string& cn, long serial) {
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 7L * 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("h2gate tests"), -1, -1, 0);
  // UTF-8 (ASCII is UTF-8 too): any byte string a test gives, controls included.
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn.data()),
                             static_cast<int>(cn.size()), -1, 0);
  return cert;
}

void writeCert(const std::string& path, X509* cert, X509* also = nullptr) {
  FILE* f = fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("TestCA: cannot write " + path);
  PEM_write_X509(f, cert);
  if (also) PEM_write_X509(f, also);
  fclose(f);
}

void writeKey(const std::string& path, EVP_PKEY* key) {
  FILE* f = fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("TestCA: cannot write " + path);
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  fclose(f);
}

}  // namespace

TestCA::TestCA(const std::string& dir, const std::string& common_name) : dir_(dir) {
  EVP_PKEY* key = newKey();
  X509* cert = newCert(key, common_name, serial_++);
  X509_set_issuer_name(cert, X509_get_subject_name(cert));
  addExt(cert, cert, NID_basic_constraints, "critical,CA:TRUE");
  addExt(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign");
  addExt(cert, cert, NID_subject_key_identifier, "hash");
  if (!X509_sign(cert, key, EVP_sha256())) fail("sign CA");
  ca_key_ = key;
  ca_cert_ = cert;
  ca_cert_path_ = dir_ + "/ca.pem";
  writeCert(ca_cert_path_, cert);
  writeKey(dir_ + "/ca.key", key);
}

TestCA::~TestCA() {
  X509_free(static_cast<X509*>(ca_cert_));
  EVP_PKEY_free(static_cast<EVP_PKEY*>(ca_key_));
}

CertFiles TestCA::issueServer(const std::string& name, const std::vector<std::string>& extra_dns) {
  std::string san = "IP:127.0.0.1,IP:::1,DNS:localhost";
  for (const auto& d : extra_dns) san += ",DNS:" + d;
  return issue(name, extra_dns.empty() ? "localhost" : extra_dns.front(), san, true);
}

CertFiles TestCA::issueServerWithName(const std::string& name, const std::string& common_name) {
  return issue(name, common_name, "IP:127.0.0.1,IP:::1,DNS:localhost", true);
}

CertFiles TestCA::issueClient(const std::string& name, const std::string& common_name) {
  return issue(name, common_name, "", false);
}

CertFiles TestCA::issue(const std::string& name, const std::string& cn, const std::string& san,
                        bool server) {
  auto* ca_cert = static_cast<X509*>(ca_cert_);
  auto* ca_key = static_cast<EVP_PKEY*>(ca_key_);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(newKey(), EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(newCert(key.get(), cn, serial_++), X509_free);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert));
  addExt(cert.get(), ca_cert, NID_basic_constraints, "critical,CA:FALSE");
  addExt(cert.get(), ca_cert, NID_key_usage, "critical,digitalSignature,keyAgreement");
  addExt(cert.get(), ca_cert, NID_ext_key_usage, server ? "serverAuth" : "clientAuth");
  addExt(cert.get(), ca_cert, NID_authority_key_identifier, "keyid:always");
  if (!san.empty()) addExt(cert.get(), ca_cert, NID_subject_alt_name, san);
  if (!X509_sign(cert.get(), ca_key, EVP_sha256())) fail("sign " + name);
  CertFiles files{dir_ + "/" + name + ".pem", dir_ + "/" + name + ".key",
                  dir_ + "/" + name + "-chain.pem"};
  writeCert(files.cert, cert.get());
  writeCert(files.chain, cert.get(), ca_cert);
  writeKey(files.key, key.get());
  return files;
}

}  // namespace h2gate::test
