// The GSSAPI backend (gateway/upstream/auth/gssapi_posix.cc) against a real
// MIT KDC in a throwaway realm (tests/support/kerberos.h): its tokens are
// checked by GSSAPI's own acceptor, in this process, with the service's
// keytab (Kerberos) or a user file (gss-ntlmssp), and the acceptor's answer
// goes back through the backend (Kerberos mutual authentication).
#include <gssapi/gssapi.h>
#include <gssapi/gssapi_ext.h>
#include <gssapi/gssapi_krb5.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "gateway/upstream/auth/mechanism.h"
#include "tests/support/config_util.h"
#include "tests/support/kerberos.h"
#include "tests/support/net.h"
#include "tests/support/temp_dir.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

using namespace h2gate::upstream::auth;
using h2gate::test::Kdc;
using h2gate::test::ScopedKrb5Env;

namespace {

gss_OID_desc kNtlm = {10, const_cast<char*>("\x2b\x06\x01\x04\x01\x82\x37\x02\x02\x0a")};

// GSSAPI's acceptor: the proxy's side of the handshake.
class Acceptor {
 public:
  // Kerberos: the service keytab; NTLM: NTLM_USER_FILE must be set.
  explicit Acceptor(const std::string& keytab) {
    OM_uint32 minor = 0;
    if (keytab.empty()) {
      gss_OID_set_desc mechs{1, &kNtlm};
      major_ = gss_acquire_cred(&minor, GSS_C_NO_NAME, GSS_C_INDEFINITE, &mechs, GSS_C_ACCEPT,
                                &cred_, nullptr, nullptr);
    } else {
      gss_key_value_element_desc el{"keytab", keytab.c_str()};
      gss_key_value_set_desc store{1, &el};
      major_ = gss_acquire_cred_from(&minor, GSS_C_NO_NAME, GSS_C_INDEFINITE, GSS_C_NO_OID_SET,
                                     GSS_C_ACCEPT, &store, &cred_, nullptr, nullptr);
    }
  }
  ~Acceptor() {
    OM_uint32 minor = 0;
    if (ctx_ != GSS_C_NO_CONTEXT) gss_delete_sec_context(&minor, &ctx_, GSS_C_NO_BUFFER);
    if (cred_ != GSS_C_NO_CREDENTIAL) gss_release_cred(&minor, &cred_);
  }
  bool ready() const { return !GSS_ERROR(major_); }
  // One leg: false when the acceptor rejects the token.
  bool accept(const std::string& in, std::string* out) {
    gss_buffer_desc input{in.size(), const_cast<char*>(in.data())};
    gss_buffer_desc output = GSS_C_EMPTY_BUFFER;
    gss_name_t src = GSS_C_NO_NAME;
    OM_uint32 minor = 0;
    major_ = gss_accept_sec_context(&minor, &ctx_, cred_, &input, GSS_C_NO_CHANNEL_BINDINGS, &src,
                                    nullptr, &output, &flags_, nullptr, nullptr);
    out->assign(static_cast<const char*>(output.value), output.length);
    gss_release_buffer(&minor, &output);
    if (src != GSS_C_NO_NAME) {
      gss_buffer_desc name = GSS_C_EMPTY_BUFFER;
      gss_display_name(&minor, src, &name, nullptr);
      client_.assign(static_cast<const char*>(name.value), name.length);
      gss_release_buffer(&minor, &name);
      gss_release_name(&minor, &src);
    }
    return !GSS_ERROR(major_);
  }
  bool complete() const { return major_ == GSS_S_COMPLETE; }
  const std::string& client() const { return client_; }
  // What the initiator asked for (GSS_C_MUTUAL_FLAG...).
  OM_uint32 flags() const { return flags_; }

 private:
  gss_cred_id_t cred_ = GSS_C_NO_CREDENTIAL;
  gss_ctx_id_t ctx_ = GSS_C_NO_CONTEXT;
  OM_uint32 major_ = 0;
  OM_uint32 flags_ = 0;
  std::string client_;
};

struct Realm {
  Kdc kdc;
  std::string http_keytab;
  std::string svc_keytab;
  Realm() {
    kdc.addPrincipal("alice", "alice-pw");
    kdc.addPrincipal("bob", "bob-pw");
    kdc.addRandomKey("HTTP/localhost");
    kdc.addRandomKey("svc-h2gate");
    http_keytab = kdc.keytab("http.keytab", {"HTTP/localhost"});
    svc_keytab = kdc.keytab("svc.keytab", {"svc-h2gate"});
  }
};

// A full Negotiate exchange with the acceptor; returns the client the
// acceptor saw ("" when it failed) and the backend's step on its answer.
std::string negotiate(Mechanisms& m, const std::string& keytab, Step* mutual, bool tamper = false) {
  auto ctx = m.newContext(Mechanism::Negotiate, "HTTP@localhost");
  const Step first = ctx->step({});
  INFO(first.error);
  REQUIRE(first.status == Step::Status::Continue);
  REQUIRE(!first.token.empty());
  Acceptor acceptor(keytab);
  REQUIRE(acceptor.ready());
  std::string answer;
  if (!acceptor.accept(first.token, &answer)) return "";
  CHECK(acceptor.complete());
  CHECK((acceptor.flags() & GSS_C_MUTUAL_FLAG) != 0);  // the client asked for it
  REQUIRE(!answer.empty());                            // the mutual-authentication token
  if (tamper) answer[answer.size() - 3] ^= 0x5a;
  *mutual = ctx->step(answer);
  return acceptor.client();
}

}  // namespace

TEST_CASE("GSSAPI Negotiate: the user's ticket, mutual authentication checked",
          "[auth][gssapi][kerberos]") {
  Realm realm;
  const std::string cache = realm.kdc.kinit("alice", "alice-pw");
  ScopedKrb5Env env(realm.kdc, cache);
  auto mechs = platformMechanisms({});
  // Nothing known yet: the first token may need the KDC (it does: a TGS_REQ).
  CHECK_FALSE(mechs->firstStepIsLocal(Mechanism::Negotiate, "HTTP@localhost"));
  Step mutual;
  CHECK(negotiate(*mechs, realm.http_keytab, &mutual) == "alice@H2GATE.TEST");
  CHECK(mutual.status == Step::Status::Complete);
  // A token per request: the second comes from the service ticket in memory,
  // without asking the KDC again, so it may be made on the event loop.
  CHECK(mechs->firstStepIsLocal(Mechanism::Negotiate, "HTTP@localhost"));
  CHECK_FALSE(mechs->firstStepIsLocal(Mechanism::Negotiate, "HTTP@other.localhost"));
  const size_t tgs_before = h2gate::test::countOccurrences(realm.kdc.log(), "TGS_REQ");
  CHECK(negotiate(*mechs, realm.http_keytab, &mutual) == "alice@H2GATE.TEST");
  CHECK(h2gate::test::countOccurrences(realm.kdc.log(), "TGS_REQ") == tgs_before);
  // An answer that does not verify (one bit flipped) fails the handshake.
  CHECK(negotiate(*mechs, realm.http_keytab, &mutual, /*tamper=*/true) == "alice@H2GATE.TEST");
  CHECK(mutual.status == Step::Status::Failed);
  CHECK_FALSE(mutual.error.empty());

  SECTION("kinit as someone else: the next token follows the cache") {
    const std::string bob = realm.kdc.kinit("bob", "bob-pw");
    std::filesystem::copy_file(bob.substr(5), cache.substr(5),
                               std::filesystem::copy_options::overwrite_existing);
    // The cache file changed: the next token reads it again, off the loop.
    CHECK_FALSE(mechs->firstStepIsLocal(Mechanism::Negotiate, "HTTP@localhost"));
    CHECK(negotiate(*mechs, realm.http_keytab, &mutual) == "bob@H2GATE.TEST");
  }
}

TEST_CASE("GSSAPI Negotiate: a client keytab, no user cache", "[auth][gssapi][kerberos]") {
  Realm realm;
  ScopedKrb5Env env(realm.kdc, "FILE:" + realm.kdc.dir().file("no-such-cache"));
  CredentialSource source;
  source.client_keytab = realm.svc_keytab;
  auto mechs = platformMechanisms(source);
  Step mutual;
  CHECK(negotiate(*mechs, realm.http_keytab, &mutual) == "svc-h2gate@H2GATE.TEST");
  CHECK(mutual.status == Step::Status::Complete);
  // Nothing was written to a cache on disk.
  CHECK_FALSE(std::filesystem::exists(realm.kdc.dir().file("no-such-cache")));
}

TEST_CASE("GSSAPI Negotiate: failures say why and what to do", "[auth][gssapi][kerberos]") {
  Realm realm;
  SECTION("no ticket") {
    ScopedKrb5Env env(realm.kdc, "FILE:" + realm.kdc.dir().file("no-such-cache"));
    const Step s =
        platformMechanisms({})->newContext(Mechanism::Negotiate, "HTTP@localhost")->step({});
    CHECK(s.status == Step::Status::Failed);
    CHECK(s.token.empty());
    CHECK_THAT(s.error, Catch::Contains("no-such-cache"));
    CHECK_THAT(s.hint, Catch::Contains("run kinit"));
  }
  SECTION("an expired ticket") {
    const std::string cache = realm.kdc.kinit("alice", "alice-pw", "2s");
    ScopedKrb5Env env(realm.kdc, cache);
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
    const Step s =
        platformMechanisms({})->newContext(Mechanism::Negotiate, "HTTP@localhost")->step({});
    CHECK(s.status == Step::Status::Failed);
    CHECK_THAT(s.error, Catch::Contains("expired"));
    CHECK_THAT(s.hint, Catch::Contains("kinit"));
  }
  SECTION("a service principal the KDC does not know") {
    const std::string cache = realm.kdc.kinit("alice", "alice-pw");
    ScopedKrb5Env env(realm.kdc, cache);
    const Step s =
        platformMechanisms({})->newContext(Mechanism::Negotiate, "HTTP@wrong.localhost")->step({});
    CHECK(s.status == Step::Status::Failed);
    CHECK_THAT(s.error, Catch::Contains("HTTP/wrong.localhost@H2GATE.TEST not found"));
    CHECK_THAT(s.hint, Catch::Contains("check the cluster's spn"));
  }
}

// Tagged [gss-ntlmssp]: ctest runs it apart, with the LeakSanitizer
// suppression for gss-ntlmssp's own leak (tests/lsan.supp).
TEST_CASE("GSSAPI NTLM (gss-ntlmssp): NTLMv2 with an explicit identity",
          "[auth][gssapi][gss-ntlmssp]") {
  h2gate::test::TempDir dir("ntlm");
  const std::string users = dir.write("users", "CORP:alice:ntlm-pw\n");
  h2gate::testing::ScopedEnv user_file("NTLM_USER_FILE", users);
  auto run = [&](const std::string& password, std::string* type3) {
    CredentialSource source;
    source.username = "CORP\\alice";
    source.password = password;
    auto ctx = platformMechanisms(source)->newContext(Mechanism::Ntlm, "HTTP@localhost");
    Acceptor acceptor("");
    REQUIRE(acceptor.ready());
    const Step negotiate = ctx->step({});
    INFO(negotiate.error);
    REQUIRE(negotiate.status == Step::Status::Continue);
    std::string challenge;
    REQUIRE(acceptor.accept(negotiate.token, &challenge));
    const Step authenticate = ctx->step(challenge);
    INFO(authenticate.error);
    REQUIRE(authenticate.status != Step::Status::Failed);
    *type3 = authenticate.token;
    std::string none;
    return acceptor.accept(authenticate.token, &none) && acceptor.complete();
  };
  std::string type3;
  CHECK(run("ntlm-pw", &type3));
  // MS-NLMP 2.2.1.3: the NT challenge response's length at offset 20; an
  // NTLMv1 one is 24 bytes, an NTLMv2 one longer. The LM response of an
  // NTLMv2-only client is 24 bytes of zeros or absent.
  REQUIRE(type3.size() > 24);
  const auto u16 = [&](size_t at) {
    return static_cast<unsigned>(static_cast<unsigned char>(type3[at])) |
           static_cast<unsigned>(static_cast<unsigned char>(type3[at + 1])) << 8;
  };
  CHECK(type3.compare(0, 8, std::string("NTLMSSP\0", 8)) == 0);
  CHECK(u16(20) > 24);
  CHECK_FALSE(run("wrong-pw", &type3));
}

namespace {

// AS requests for `principal` in the KDC's log with `result` ("ISSUE",
// "PREAUTH_FAILED", "CLIENT KEY EXPIRED", "CLIENT_NOT_FOUND").
size_t asRequests(const Kdc& kdc, const std::string& principal, const std::string& result) {
  size_t n = 0;
  std::istringstream in(kdc.log());
  for (std::string line; std::getline(in, line);)
    if (line.find("AS_REQ") != std::string::npos && line.find(result + ": ") != std::string::npos &&
        line.find(principal + "@" + kdc.realm() + " for krbtgt/") != std::string::npos)
      ++n;
  return n;
}

CredentialSource withPassword(const std::string& user, const std::string& password) {
  CredentialSource source;
  source.username = user;
  source.password = password;
  return source;
}

}  // namespace

TEST_CASE("GSSAPI Negotiate with a password: no kinit, no cache, one AS exchange",
          "[auth][gssapi][kerberos][password]") {
  Realm realm;
  ScopedKrb5Env env(realm.kdc, "FILE:" + realm.kdc.dir().file("no-such-cache"));
  // NTLM's DOMAIN\user form: user in the default realm.
  auto mechs = platformMechanisms(withPassword("CORP\\alice", "alice-pw"));
  CHECK(mechs->credentialsNote(Mechanism::Negotiate).empty());  // nothing asked yet
  CHECK_FALSE(mechs->firstStepIsLocal(Mechanism::Negotiate, "HTTP@localhost"));
  Step mutual;
  CHECK(negotiate(*mechs, realm.http_keytab, &mutual) == "alice@H2GATE.TEST");
  CHECK(mutual.status == Step::Status::Complete);
  CHECK_THAT(mechs->credentialsNote(Mechanism::Negotiate),
             Catch::StartsWith("Kerberos ticket for alice@H2GATE.TEST got with the configured "
                               "password (no kinit; kept in memory), valid until "));
  // The service ticket is in memory: the next token may be made on the loop.
  CHECK(mechs->firstStepIsLocal(Mechanism::Negotiate, "HTTP@localhost"));
  // Another cluster (or worker) with the same principal and password shares
  // the ticket: no second AS exchange.
  auto other = platformMechanisms(withPassword("alice", "alice-pw"));
  CHECK(negotiate(*other, realm.http_keytab, &mutual) == "alice@H2GATE.TEST");
  CHECK(negotiate(*mechs, realm.http_keytab, &mutual) == "alice@H2GATE.TEST");
  CHECK(asRequests(realm.kdc, "alice", "ISSUE") == 1);
  // `principal` names the Kerberos principal when the user name is NTLM's.
  CredentialSource bob = withPassword("CORP\\someone-else", "bob-pw");
  bob.principal = "bob@H2GATE.TEST";
  CHECK(negotiate(*platformMechanisms(bob), realm.http_keytab, &mutual) == "bob@H2GATE.TEST");
  CHECK_FALSE(std::filesystem::exists(realm.kdc.dir().file("no-such-cache")));
}

TEST_CASE("GSSAPI Negotiate with a password: each failure says why, and the KDC is asked once",
          "[auth][gssapi][kerberos][password]") {
  Realm realm;
  ScopedKrb5Env env(realm.kdc, "FILE:" + realm.kdc.dir().file("no-such-cache"));
  std::string user;
  std::string password;
  std::string error;
  std::string hint;
  std::string kdc_result;
  SECTION("a wrong password (preauthentication required)") {
    realm.kdc.modifyPrincipal("alice", "+requires_preauth");
    user = "alice";
    password = "wrong-pw-unit-1";
    error =
        "getting a ticket for alice@H2GATE.TEST with the configured password: the KDC "
        "rejected the password (the KDC says: ";
    hint = "the password is wrong";
    kdc_result = "PREAUTH_FAILED";
  }
  SECTION("an expired password") {
    realm.kdc.modifyPrincipal("bob", "-pwexpire \"2020-01-01 00:00:00 UTC\"");
    user = "bob";
    password = "bob-pw";
    error =
        "getting a ticket for bob@H2GATE.TEST with the configured password: the password has "
        "expired (the KDC says: Password has expired)";
    hint = "change it (kpasswd";
    kdc_result = "CLIENT KEY EXPIRED";
  }
  SECTION("a principal the KDC does not know") {
    user = "nobody";
    password = "nobody-pw-unit";
    error =
        "getting a ticket for nobody@H2GATE.TEST with the configured password: the KDC does "
        "not know this principal";
    hint = "credentials.username (or principal) must be the Kerberos principal";
    kdc_result = "CLIENT_NOT_FOUND";
  }
  auto mechs = platformMechanisms(withPassword(user, password));
  for (int i = 0; i < 3; ++i) {
    const Step s = mechs->newContext(Mechanism::Negotiate, "HTTP@localhost")->step({});
    CHECK(s.status == Step::Status::Failed);
    CHECK(s.token.empty());
    CHECK_THAT(s.error, Catch::StartsWith(error));
    CHECK_THAT(s.hint, Catch::Contains(hint));
    CHECK_THAT(s.hint, Catch::EndsWith("h2gate asks the KDC with this password again in 15 "
                                       "minutes (so that it cannot lock the account), or at once "
                                       "after a reload with another"));
    CHECK(s.error.find(password) == std::string::npos);
  }
  // Three tokens wanted, one question to the KDC.
  CHECK(asRequests(realm.kdc, user, kdc_result) == 1);
  CHECK_THAT(mechs->credentialsNote(Mechanism::Negotiate),
             Catch::StartsWith("no Kerberos ticket for " + user + "@H2GATE.TEST: " + error));
}

TEST_CASE("GSSAPI Negotiate with a password: an unreachable KDC is not asked again at once",
          "[auth][gssapi][kerberos][password]") {
  Realm realm;
  // A krb5.conf whose KDC port nobody listens on; MIT's trace shows each
  // attempt to get a ticket.
  h2gate::test::TempDir dir("nokdc");
  const uint16_t port = h2gate::test::freePort();
  const std::string conf =
      dir.write("krb5.conf",
                "[libdefaults]\n default_realm = H2GATE.TEST\n dns_lookup_kdc = false\n"
                " udp_preference_limit = 1\n[realms]\n H2GATE.TEST = {\n  kdc = 127.0.0.1:" +
                    std::to_string(port) + "\n }\n");
  const std::string trace = dir.file("trace");
  ScopedKrb5Env env(realm.kdc, "FILE:" + dir.file("no-such-cache"));
  h2gate::testing::ScopedEnv krb5_config("KRB5_CONFIG", conf);
  h2gate::testing::ScopedEnv krb5_trace("KRB5_TRACE", trace);
  auto mechs = platformMechanisms(withPassword("alice", "alice-pw-unreachable"));
  for (int i = 0; i < 3; ++i) {
    const Step s = mechs->newContext(Mechanism::Negotiate, "HTTP@localhost")->step({});
    CHECK(s.status == Step::Status::Failed);
    CHECK_THAT(s.error, Catch::StartsWith("getting a ticket for alice@H2GATE.TEST with the "
                                          "configured password: no KDC answered (the KDC says: "));
    CHECK_THAT(s.hint, Catch::EndsWith("check the network and krb5.conf's kdc for the realm; "
                                       "h2gate asks the KDC again in 30 s"));
  }
  // Three tokens wanted, one attempt.
  const std::string traced = h2gate::test::readFile(trace);
  INFO(traced);
  CHECK(h2gate::test::countOccurrences(traced,
                                       "Getting initial credentials for alice@H2GATE.TEST") == 1);
  CHECK(h2gate::test::countOccurrences(
            traced, "Initiating TCP connection to stream 127.0.0.1:" + std::to_string(port)) == 1);
}
