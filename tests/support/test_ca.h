// A throwaway certificate authority made at test time (EC P-256, OpenSSL 3
// libcrypto), and leaf certificates it signs. PEM files are written into a
// directory the caller owns. Nothing is cached between test runs.
#pragma once

#include <string>
#include <vector>

namespace h2gate::test {

struct CertFiles {
  std::string cert;   // PEM certificate
  std::string key;    // PEM private key (unencrypted PKCS#8)
  std::string chain;  // cert followed by the CA cert (for servers that want a chain file)
};

class TestCA {
 public:
  // Creates <dir>/ca.pem and <dir>/ca.key. Throws std::runtime_error on failure.
  explicit TestCA(const std::string& dir, const std::string& common_name = "h2gate test CA");
  ~TestCA();
  TestCA(const TestCA&) = delete;
  TestCA& operator=(const TestCA&) = delete;

  const std::string& caCertPath() const { return ca_cert_path_; }

  // A server certificate (extendedKeyUsage serverAuth) with
  // subjectAltName = IP:127.0.0.1, IP:::1, DNS:localhost, plus each of
  // `extra_dns` (e.g. "origin.test"). Written as <dir>/<name>.pem/.key/-chain.pem.
  CertFiles issueServer(const std::string& name, const std::vector<std::string>& extra_dns = {});
  // The same subjectAltNames, with `common_name` as the subject's CN, byte
  // for byte (a UTF8String: it may carry ESC sequences, CR or LF, as a
  // hostile server's certificate can).
  CertFiles issueServerWithName(const std::string& name, const std::string& common_name);
  // A client certificate (clientAuth) with the given common name.
  CertFiles issueClient(const std::string& name, const std::string& common_name);

 private:
  CertFiles issue(const std::string& name, const std::string& common_name, const std::string& san,
                  bool server);

  std::string dir_;
  std::string ca_cert_path_;
  void* ca_key_ = nullptr;   // EVP_PKEY*
  void* ca_cert_ = nullptr;  // X509*
  long serial_ = 1;
};

}  // namespace h2gate::test
