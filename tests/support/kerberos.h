// A throwaway MIT Kerberos realm on loopback: krb5kdc (package krb5-kdc) on
// an ephemeral port, its database made with kdb5_util and its principals
// with kadmin.local (krb5-admin-server), kinit from krb5-user. Everything
// lives in the fixture's TempDir: kdc.conf, krb5.conf, the database, the
// keytabs and the credential caches. The KDC stops with the fixture.
//
// Clients of the realm need its krb5.conf: env() gives KRB5_CONFIG (and a
// credential cache) for a child process; for Kerberos calls made by the
// test process itself, use ScopedKrb5Env.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/peer_logs.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace h2gate::test {

class Kdc {
 public:
  explicit Kdc(std::string realm = "H2GATE.TEST");
  ~Kdc();
  Kdc(const Kdc&) = delete;
  Kdc& operator=(const Kdc&) = delete;

  const std::string& realm() const { return realm_; }
  uint16_t port() const { return port_; }
  const TempDir& dir() const { return dir_; }
  // The realm's krb5.conf: this KDC, no DNS, "localhost" and "*.localhost"
  // in the realm, no reverse lookups (the service principal of a proxy
  // reached as localhost is HTTP/localhost@REALM).
  std::string krb5Conf() const { return dir_.file("krb5.conf"); }
  // The KDC's log (one line per AS-REQ / TGS-REQ).
  std::string log() const;
  // Its lines of AS requests for `principal` (without the realm) with
  // `result` ("ISSUE", "PREAUTH_FAILED", "CLIENT KEY EXPIRED"): one per
  // kinit, or ticket got with a password.
  size_t asRequests(const std::string& principal, const std::string& result) const;

  // kadmin.local: a principal with this password, or with a random key.
  void addPrincipal(const std::string& name, const std::string& password);
  void addRandomKey(const std::string& name);
  // kadmin.local modprinc with these options, e.g. "-maxlife \"60 seconds\""
  // (the principal's tickets end a minute after they are issued),
  // "+requires_preauth", "-pwexpire \"2020-01-01 00:00:00 UTC\"".
  void modifyPrincipal(const std::string& name, const std::string& options);
  // kadmin.local cpw: the principal's new password.
  void changePassword(const std::string& name, const std::string& password);
  // kadmin.local ktadd: the principals' keys into a new keytab file; returns
  // its path.
  std::string keytab(const std::string& file_name, const std::vector<std::string>& principals);
  // kinit into a new FILE cache; returns "FILE:<path>". `lifetime` as kinit
  // -l takes it ("10s"), empty for the default. Throws when kinit fails.
  std::string kinit(const std::string& principal, const std::string& password,
                    const std::string& lifetime = "");

  // KRB5_CONFIG for a child process (KRB5_KDC_PROFILE and KRB5_KTNAME
  // unset), and KRB5CCNAME = `ccache` when given.
  std::map<std::string, std::optional<std::string>> env(const std::string& ccache = "") const;

 private:
  std::string kadmin(const std::string& query);

  std::string realm_;
  TempDir dir_;
  PeerLog log_{"KDC kdc.log", dir_.file("kdc.log")};
  uint16_t port_ = 0;
  std::unique_ptr<Process> process_;
  int caches_ = 0;
};

// Sets KRB5_CONFIG (and KRB5CCNAME, unless empty) in this process for one
// scope, for Kerberos calls the test makes itself.
class ScopedKrb5Env {
 public:
  ScopedKrb5Env(const Kdc& kdc, const std::string& ccache);
  ~ScopedKrb5Env();
  ScopedKrb5Env(const ScopedKrb5Env&) = delete;
  ScopedKrb5Env& operator=(const ScopedKrb5Env&) = delete;

 private:
  std::map<std::string, std::optional<std::string>> old_;
};

// Whether the Kerberos tools the fixture needs are installed; "" when they
// are, else what is missing.
std::string kerberosToolsMissing();

// Whether `text` holds what looks like a Kerberos (SPNEGO) token in base64:
// its DER starts 0x60 0x82, "YII" in base64, and runs on for hundreds of
// characters. Not "YII" alone: a temporary directory's random suffix
// ("/tmp/h2gate-h2gate-XRsYII/h2gate.yaml" in a start-up line) has that.
bool hasGssToken(const std::string& text);

}  // namespace h2gate::test
