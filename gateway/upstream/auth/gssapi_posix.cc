// GSSAPI backend of mechanism.h: MIT Kerberos's SPNEGO for Negotiate,
// gss-ntlmssp (NTLMSSP as a GSSAPI mechanism) for NTLM.
//
// Kerberos credentials. With a client keytab, tickets come from it into a
// credential cache in memory (MIT's "client_keytab" credential store).
// With a password (credentials, no keytab), h2gate gets them itself, an AS
// exchange into a cache in memory, and renews them before they end
// (PasswordTgt below). Otherwise the user's cache (KRB5CCNAME, as after
// kinit) is used through a snapshot in memory: MIT reads a FILE cache from
// disk on every gss_init_sec_context (measured: 165 µs a token from a FILE
// cache, 49 µs from a MEMORY copy), so its credentials are copied into a
// MEMORY cache and the copy is made again when the file changes (kinit,
// kinit -R, kdestroy: one stat() per token notices). Service tickets h2gate obtains stay in the
// copy. SPNEGO offers Kerberos only (gss_set_neg_mechs): NTLM is its own
// scheme here, and an optimistic token for a mechanism the proxy lacks is
// useless. Thread-safety: MIT's credential handles lock themselves; the
// snapshot is replaced under mu_, and contexts keep the handle they started
// with alive (shared_ptr).
#include <gssapi/gssapi.h>
#include <gssapi/gssapi_ext.h>
#include <gssapi/gssapi_krb5.h>
#include <krb5.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <openssl/crypto.h>

#include "gateway/base/log.h"
#include "gateway/upstream/auth/mechanism.h"
#include "gateway/upstream/auth/ticket_schedule.h"
#include "gateway/upstream/auth/token_threads.h"

namespace h2gate::upstream::auth {
namespace {

gss_OID_desc kSpnegoOid = {6, const_cast<char*>("\x2b\x06\x01\x05\x05\x02")};
// gss-ntlmssp's mechanism, 1.3.6.1.4.1.311.2.2.10 (MS-NLMP).
gss_OID_desc kNtlmOid = {10, const_cast<char*>("\x2b\x06\x01\x04\x01\x82\x37\x02\x02\x0a")};

std::string displayStatus(OM_uint32 code, int type, gss_OID mech) {
  std::string out;
  OM_uint32 more = 0;
  do {
    OM_uint32 minor = 0;
    gss_buffer_desc text = GSS_C_EMPTY_BUFFER;
    if (GSS_ERROR(gss_display_status(&minor, code, type, mech, &more, &text))) break;
    if (!out.empty()) out += "; ";
    out.append(static_cast<const char*>(text.value), text.length);
    gss_release_buffer(&minor, &text);
  } while (more != 0);
  return out;
}

// "major text: minor text", as GSSAPI words them.
std::string gssError(const char* what, OM_uint32 major, OM_uint32 minor, gss_OID mech) {
  std::string out = std::string(what) + ": " + displayStatus(major, GSS_C_GSS_CODE, GSS_C_NO_OID);
  if (minor != 0) out += ": " + displayStatus(minor, GSS_C_MECH_CODE, mech);
  return out;
}

bool contains(const std::string& text, const char* needle) {
  return text.find(needle) != std::string::npos;
}

// What the user can do about a Kerberos failure, from its words (MIT's
// mechglue maps minor codes to its own numbers, so the text is what is stable).
std::string kerberosHint(const std::string& error) {
  if (contains(error, "expired")) return "the Kerberos ticket has expired: run kinit (or kinit -R)";
  if (contains(error, "not found in Kerberos database"))
    return "the KDC does not know this service principal: check the cluster's spn (the proxy's "
           "name as Kerberos knows it)";
  if (contains(error, "Cannot contact any KDC") || contains(error, "Cannot find KDC"))
    return "no KDC of the realm answered: check the network and krb5.conf";
  if (contains(error, "No Kerberos credentials") || contains(error, "No credentials cache") ||
      contains(error, "No credentials were supplied"))
    return "no Kerberos ticket: run kinit, or give the cluster a client_keytab";
  if (contains(error, "Clock skew")) return "this machine's clock differs from the KDC's";
  return "";
}

void wipeBuffer(gss_buffer_desc& b) {
  OM_uint32 minor = 0;
  if (b.value && b.length) OPENSSL_cleanse(b.value, b.length);
  gss_release_buffer(&minor, &b);
}

// A credential handle shared by the contexts made from it.
struct Cred {
  gss_cred_id_t handle = GSS_C_NO_CREDENTIAL;
  std::string memory_cache;  // a MEMORY cache of ours, destroyed with the handle
  // Kerberos: the credential cache behind the handle, and whether it lives
  // in this process's memory (a snapshot or the keytab's): then a cached
  // service ticket makes a token without any I/O (firstStepIsLocal).
  std::string cache_name;
  bool in_memory = false;
  uint64_t generation = 0;  // tells a replaced credential from its successor
  ~Cred() {
    OM_uint32 minor = 0;
    if (handle != GSS_C_NO_CREDENTIAL) gss_release_cred(&minor, &handle);
    if (memory_cache.empty()) return;
    krb5_context kc = nullptr;
    if (krb5_init_context(&kc) != 0) return;
    krb5_ccache cc = nullptr;
    if (krb5_cc_resolve(kc, memory_cache.c_str(), &cc) == 0) krb5_cc_destroy(kc, cc);
    krb5_free_context(kc);
  }
};

std::string uniqueMemoryCache(const char* what) {
  static std::atomic<uint64_t> counter{0};
  return "MEMORY:h2gate-" + std::string(what) + "-" + std::to_string(counter++);
}

class Krb5Error {
 public:
  Krb5Error(krb5_context kc, krb5_error_code code) {
    const char* m = krb5_get_error_message(kc, code);
    text_ = m ? m : "Kerberos error " + std::to_string(code);
    krb5_free_error_message(kc, m);
  }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

// Tells a credential from its successors, across every GssMechanisms (a
// PasswordTgt's credentials are shared by several).
uint64_t nextGeneration() {
  static std::atomic<uint64_t> generations{0};
  return ++generations;
}

// A SPNEGO credential (Kerberos only) from MIT's credential store `store`;
// `memory_cache` (a MEMORY cache of ours, or "") goes with it and is
// destroyed with it. Null with *fail set.
std::shared_ptr<Cred> acquireSpnego(gss_name_t name, std::vector<gss_key_value_element_desc> store,
                                    std::string memory_cache, std::string cache_name, Step* fail) {
  auto cred = std::make_shared<Cred>();
  cred->in_memory = !memory_cache.empty();
  cred->memory_cache = std::move(memory_cache);
  cred->cache_name = std::move(cache_name);
  cred->generation = nextGeneration();
  gss_key_value_set_desc set{static_cast<OM_uint32>(store.size()), store.data()};
  gss_OID_set_desc mechs{1, &kSpnegoOid};
  OM_uint32 minor = 0;
  OM_uint32 major = gss_acquire_cred_from(&minor, name, GSS_C_INDEFINITE, &mechs, GSS_C_INITIATE,
                                          &set, &cred->handle, nullptr, nullptr);
  if (GSS_ERROR(major)) {
    fail->error = gssError("acquiring Kerberos credentials", major, minor, &kSpnegoOid);
    fail->hint = kerberosHint(fail->error);
    return nullptr;
  }
  // SPNEGO offers Kerberos only (see the top of this file).
  gss_OID_set_desc krb5{1, const_cast<gss_OID>(gss_mech_krb5)};
  major = gss_set_neg_mechs(&minor, cred->handle, &krb5);
  if (GSS_ERROR(major)) {
    fail->error = gssError("limiting SPNEGO to Kerberos", major, minor, &kSpnegoOid);
    return nullptr;
  }
  return cred;
}

std::string utcText(int64_t t) {
  return log::utcSeconds(std::chrono::system_clock::from_time_t(static_cast<std::time_t>(t)));
}

// The Kerberos principal a password belongs to: `principal`, else the
// credentials' user name. NTLM's "DOMAIN\\user" form stands for user in
// krb5.conf's default realm (the NetBIOS domain is not a realm; a backslash
// would be an escape in a Kerberos name); "user" and "user@REALM" are
// Kerberos names already.
std::string passwordPrincipal(const CredentialSource& source) {
  std::string name = source.principal.empty() ? source.username : source.principal;
  if (const size_t slash = name.find('\\'); slash != std::string::npos && source.principal.empty())
    name = name.substr(slash + 1);
  return name;
}

// What a failed krb5_get_init_creds_password means, in words a user acts on.
struct InitCredsFailure {
  std::string error;
  std::string hint;
  TicketFailure kind = TicketFailure::Transient;
};
InitCredsFailure describeInitCreds(krb5_error_code code, const std::string& message) {
  const std::string said = " (the KDC says: " + message + ")";
  switch (code) {
    case KRB5KDC_ERR_PREAUTH_FAILED:
    case KRB5KRB_AP_ERR_BAD_INTEGRITY:  // a principal without preauthentication
      return {"the KDC rejected the password" + said,
              "the password is wrong: correct the cluster's credentials (password or "
              "password_file) and reload",
              TicketFailure::Credentials};
    case KRB5KDC_ERR_KEY_EXP:
      return {"the password has expired" + said,
              "change it (kpasswd, or at a desktop of the domain), put the new one in the "
              "cluster's credentials and reload",
              TicketFailure::Credentials};
    case KRB5KDC_ERR_C_PRINCIPAL_UNKNOWN:
      return {"the KDC does not know this principal" + said,
              "credentials.username (or principal) must be the Kerberos principal: user or "
              "user@REALM",
              TicketFailure::Credentials};
    case KRB5KDC_ERR_CLIENT_REVOKED:
      return {"the account is locked or disabled" + said, "ask the realm's administrators",
              TicketFailure::Credentials};
    case KRB5KDC_ERR_NAME_EXP:
      return {"the principal has expired" + said, "ask the realm's administrators",
              TicketFailure::Credentials};
    case KRB5_KDC_UNREACH:
    case KRB5_REALM_CANT_RESOLVE:
    case KRB5_REALM_UNKNOWN:
      return {"no KDC answered" + said, "check the network and krb5.conf's kdc for the realm",
              TicketFailure::Transient};
    case KRB5KRB_AP_ERR_SKEW:
      return {"clock skew" + said, "this machine's clock differs from the KDC's",
              TicketFailure::Transient};
    default:
      return {message, "", TicketFailure::Transient};
  }
}

// Kerberos without kinit: tickets h2gate gets with a password (the
// cluster's credentials, no client_keytab). krb5_get_init_creds_password
// into a MEMORY cache of ours — never the user's cache, never the disk —
// and a GSSAPI credential from that cache, as for a snapshot of the user's.
// Not gss_acquire_cred_with_password (which NTLM uses): MIT's mechanism
// would then get fresh tickets by itself inside whichever
// gss_init_sec_context finds them due, possibly a token made on the event
// loop, and would report failures as GSSAPI text only. Here h2gate knows the
// ticket's end (renewal, the log) and the KDC's error code (one clear line
// per cause, and the back-off of ticket_schedule.h).
//
// Renewal: the first token wanted after renewalTime() (5 minutes before the
// end, or 20% of a short lifetime) queues a new AS exchange with the
// password on a token thread; tokens go on from the current ticket until the
// fresh one replaces it, so no request waits or fails for it. Without
// requests nothing is renewed; the next token after the end then waits for
// a fresh ticket (off the event loop: firstStepIsLocal is false without a
// valid ticket).
//
// One per principal and password in the process, shared by the clusters,
// workers and PAC-named proxies that use them: one AS exchange, one renewal,
// one back-off however many workers there are (a wrong password is tried
// once, not once per worker). A reload with another password makes another.
// One that failed outlives its users until its back-off ends, so that
// clusters made again (a PAC-named proxy's, a reload's) do not ask the KDC
// with the same password sooner.
class PasswordTgt : public std::enable_shared_from_this<PasswordTgt> {
 public:
  static std::shared_ptr<PasswordTgt> shared(const std::string& principal,
                                             const std::string& password) {
    static std::mutex mu;
    static std::vector<std::shared_ptr<PasswordTgt>> all;
    std::lock_guard lock(mu);
    // Unused (only this list holds it; a queued renewal holds it too) and
    // not backing off: forgotten, its password wiped.
    std::erase_if(all, [](const std::shared_ptr<PasswordTgt>& t) {
      return t.use_count() == 1 && !t->backingOff();
    });
    for (const auto& t : all)
      if (t->matches(principal, password)) return t;
    all.push_back(std::make_shared<PasswordTgt>(principal, password));
    return all.back();
  }

  PasswordTgt(std::string principal, std::string password)
      : principal_(std::move(principal)), shown_(principal_), password_(std::move(password)) {}
  ~PasswordTgt() { OPENSSL_cleanse(password_.data(), password_.size()); }

  // The credential, got now (an AS exchange: blocks, off the event loop
  // only) when there is no valid one; null with *fail set, at once while a
  // failure's back-off lasts.
  std::shared_ptr<Cred> get(Step* fail) {
    bool renew = false;
    std::shared_ptr<Cred> cred;
    {
      std::lock_guard lock(mu_);
      const int64_t now = std::time(nullptr);
      if (usable(now)) {
        cred = cred_;
        if (now >= renew_at_ && !renewing_ && now >= retry_at_) renew = renewing_ = true;
      }
    }
    if (cred) {
      if (renew) TokenThreads::instance().post([self = shared_from_this()] { self->renew(); });
      return cred;
    }
    std::lock_guard acquiring(acquire_mu_);
    {
      std::lock_guard lock(mu_);
      const int64_t now = std::time(nullptr);
      if (usable(now)) return cred_;  // another thread got one meanwhile
      if (now < retry_at_) return failed(fail);
    }
    obtain(/*renewal=*/false);
    std::lock_guard lock(mu_);
    if (usable(std::time(nullptr))) return cred_;
    return failed(fail);
  }

  // The valid credential in memory, or null; no I/O.
  std::shared_ptr<Cred> current() {
    std::lock_guard lock(mu_);
    return usable(std::time(nullptr)) ? cred_ : nullptr;
  }

  // For `h2gate check`: the ticket now, or why there is none.
  std::string describe() {
    std::lock_guard lock(mu_);
    if (usable(std::time(nullptr)))
      return "Kerberos ticket for " + shown_ +
             " got with the configured password (no kinit; kept in memory), valid until " +
             utcText(end_) + ", renewed from " + utcText(renew_at_);
    if (!error_.empty()) return "no Kerberos ticket for " + shown_ + ": " + error_;
    return "";
  }

 private:
  bool backingOff() {
    std::lock_guard lock(mu_);
    return std::time(nullptr) < retry_at_;
  }

  bool matches(const std::string& principal, const std::string& password) const {
    return principal == principal_ && password.size() == password_.size() &&
           CRYPTO_memcmp(password.data(), password_.data(), password.size()) == 0;
  }

  // Whether the ticket is good for a token now: a few seconds before its end
  // at most (the token still has to reach the proxy), less for tiny lifetimes.
  bool usable(int64_t now) const {
    return cred_ && now + std::min<int64_t>(5, (end_ - start_) / 10) < end_;
  }

  std::shared_ptr<Cred> failed(Step* fail) const {
    fail->error = error_;
    fail->hint = hint_;
    return nullptr;
  }

  // On a token thread.
  void renew() {
    {
      std::lock_guard acquiring(acquire_mu_);
      bool due = false;
      {
        std::lock_guard lock(mu_);
        due = std::time(nullptr) >= renew_at_;  // else another thread got one meanwhile
      }
      if (due) obtain(/*renewal=*/true);
    }
    std::lock_guard lock(mu_);
    renewing_ = false;
  }

  // One AS exchange with the password; acquire_mu_ held.
  void obtain(bool renewal) {
    std::shared_ptr<Cred> cred;
    InitCredsFailure why;
    int64_t start = 0;
    int64_t end = 0;
    std::string shown = principal_;
    krb5_context kc = nullptr;
    if (krb5_error_code e = krb5_init_context(&kc); e != 0) {
      why = {"cannot initialise Kerberos (krb5.conf): error " + std::to_string(e),
             "check krb5.conf (KRB5_CONFIG)", TicketFailure::Credentials};
      kc = nullptr;
    }
    krb5_principal client = nullptr;
    if (kc) {
      if (krb5_error_code e = krb5_parse_name(kc, principal_.c_str(), &client); e != 0) {
        why = {"'" + principal_ + "' is not a Kerberos principal: " + Krb5Error(kc, e).str(),
               "credentials.username (or principal) is the Kerberos principal: user or "
               "user@REALM (without @REALM, krb5.conf's default_realm)",
               TicketFailure::Credentials};
        client = nullptr;
      } else {
        char* text = nullptr;
        if (krb5_unparse_name(kc, client, &text) == 0) {
          shown = text;
          krb5_free_unparsed_name(kc, text);
        }
      }
    }
    if (client) {
      const std::string memory = uniqueMemoryCache("password");
      krb5_ccache mem = nullptr;
      krb5_get_init_creds_opt* opt = nullptr;
      krb5_creds creds;
      std::memset(&creds, 0, sizeof creds);
      krb5_error_code e = krb5_cc_resolve(kc, memory.c_str(), &mem);
      if (e == 0) e = krb5_get_init_creds_opt_alloc(kc, &opt);
      if (e == 0) e = krb5_get_init_creds_opt_set_out_ccache(kc, opt, mem);
      if (e == 0)
        e = krb5_get_init_creds_password(kc, &creds, client, password_.c_str(), nullptr, nullptr, 0,
                                         nullptr, opt);
      if (e == 0) {
        start = creds.times.starttime != 0 ? creds.times.starttime : creds.times.authtime;
        end = creds.times.endtime;
        krb5_free_cred_contents(kc, &creds);
        krb5_cc_close(kc, mem);  // closing a MEMORY cache keeps its contents
        mem = nullptr;
        Step fail;
        cred = acquireSpnego(GSS_C_NO_NAME, {{"ccache", memory.c_str()}}, memory, memory, &fail);
        if (!cred) why = {fail.error, fail.hint, TicketFailure::Transient};
        // (Without a credential, nothing holds the cache: Cred's destructor
        // destroyed it.)
      } else {
        why = describeInitCreds(e, Krb5Error(kc, e).str());
        if (mem) krb5_cc_destroy(kc, mem);
        mem = nullptr;
      }
      if (opt) krb5_get_init_creds_opt_free(kc, opt);
      if (mem) krb5_cc_close(kc, mem);
      krb5_free_principal(kc, client);
    }
    if (kc) krb5_free_context(kc);

    std::lock_guard lock(mu_);
    shown_ = shown;
    if (cred) {
      cred_ = std::move(cred);
      start_ = start;
      end_ = end;
      renew_at_ = renewalTime(start, end);
      retry_at_ = 0;
      error_.clear();
      hint_.clear();
      logged_.clear();
      H2G_LOG(Info, 0, 0,
              "Kerberos: " << (renewal ? "renewed the ticket" : "got a ticket") << " for " << shown
                           << " with the configured password (no kinit; kept in memory), valid "
                              "until "
                           << utcText(end) << "; next renewal from " << utcText(renew_at_));
      return;
    }
    const int64_t delay = retryDelay(why.kind);
    error_ = "getting a ticket for " + shown + " with the configured password: " + why.error;
    hint_ = why.hint + (why.hint.empty() ? "" : "; ") +
            (why.kind == TicketFailure::Credentials
                 ? "h2gate asks the KDC with this password again in " + std::to_string(delay / 60) +
                       " minutes (so that it cannot lock the account), or at once after a "
                       "reload with another"
                 : "h2gate asks the KDC again in " + std::to_string(delay) + " s");
    retry_at_ = std::time(nullptr) + delay;
    if (renewal && cred_) {
      // The current ticket goes on until its end; requests do not fail
      // yet, so this is the only word of it. Once per cause.
      const std::string line = "Kerberos: renewing the ticket for " + shown +
                               " failed: " + why.error + " (" + hint_ +
                               "); the current one is valid until " + utcText(end_);
      if (logged_ != why.error) {
        H2G_LOG(Warn, 0, 0, line);
      } else {
        H2G_LOG(Debug, 0, 0, line);
      }
      logged_ = why.error;
    }
  }

  const std::string principal_;  // as configured
  std::string shown_;            // with its realm, once parsed
  std::string password_;         // a secret: wiped in the destructor
  std::mutex acquire_mu_;        // one AS exchange at a time
  std::mutex mu_;                // what follows
  std::shared_ptr<Cred> cred_;
  int64_t start_ = 0;
  int64_t end_ = 0;
  int64_t renew_at_ = 0;
  bool renewing_ = false;  // a renewal is queued or running
  // The last failure, told to every request until retry_at_.
  std::string error_;
  std::string hint_;
  int64_t retry_at_ = 0;
  std::string logged_;  // the renewal failure last logged at warn
};

class GssMechanisms;

class GssContext : public SecurityContext {
 public:
  GssContext(std::shared_ptr<GssMechanisms> owner, Mechanism m, std::string spn)
      : owner_(std::move(owner)), mech_(m), spn_(std::move(spn)) {}
  ~GssContext() override {
    OM_uint32 minor = 0;
    if (ctx_ != GSS_C_NO_CONTEXT) gss_delete_sec_context(&minor, &ctx_, GSS_C_NO_BUFFER);
    if (target_ != GSS_C_NO_NAME) gss_release_name(&minor, &target_);
  }
  Step step(std::string_view input) override;

 private:
  std::shared_ptr<GssMechanisms> owner_;
  Mechanism mech_;
  std::string spn_;
  std::shared_ptr<Cred> cred_;
  gss_name_t target_ = GSS_C_NO_NAME;
  gss_ctx_id_t ctx_ = GSS_C_NO_CONTEXT;
  bool done_ = false;
  bool first_ = false;  // the next step is the first leg
};

class GssMechanisms : public Mechanisms, public std::enable_shared_from_this<GssMechanisms> {
 public:
  explicit GssMechanisms(const CredentialSource& source) : source_(source) {
    // Never used, only kept alive: while a krb5 context lives, MIT's profile
    // library keeps krb5.conf parsed (checking its mtime), so the context
    // every GSSAPI call makes does not open and parse it again (measured:
    // 35 µs a token instead of 52).
    if (krb5_init_context(&profile_keeper_) != 0) profile_keeper_ = nullptr;
  }

  std::unique_ptr<SecurityContext> newContext(Mechanism m, const std::string& spn) override {
    return std::make_unique<GssContext>(shared_from_this(), m, spn);
  }

  // The credential for `m`, acquired (or refreshed) now; null with *fail set.
  std::shared_ptr<Cred> credential(Mechanism m, Step* fail) {
    // A password's tickets: outside mu_, which the event loop takes
    // (firstStepIsLocal), as an AS exchange may take seconds.
    if (m == Mechanism::Negotiate && withPassword()) return passwordTgt()->get(fail);
    std::lock_guard<std::mutex> lock(mu_);
    return m == Mechanism::Negotiate ? kerberos(fail) : ntlm(fail);
  }

  std::string credentialsNote(Mechanism m) override {
    if (m != Mechanism::Negotiate || !withPassword()) return "";
    return passwordTgt()->describe();
  }

  // A Negotiate step failed with this credential: acquire a fresh one next
  // time (the user may have run kinit meanwhile). An NTLM credential is
  // kept: a password does not change by itself, and gss-ntlmssp 1.2 leaks
  // some 6 KiB in OpenSSL with every acquisition (tests/lsan.supp). So is a
  // ticket got with a password: it is renewed before it ends, and dropping
  // it on a failure that is not its fault (a wrong spn) would send every
  // request to the KDC for a new one.
  void forget(Mechanism m, const std::shared_ptr<Cred>& cred) {
    if (m != Mechanism::Negotiate || withPassword()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (krb_ == cred) krb_.reset();
  }

  // Negotiate needs the KDC only without a valid service ticket (and a
  // fresh credential cache snapshot needs the file): local when the
  // credentials live in memory, the user's cache file is unchanged (one
  // stat(), local metadata) and the service ticket for `spn` found there
  // after an earlier token is valid for kTicketMargin more. NTLM is always
  // local (hashes of the password in memory).
  bool firstStepIsLocal(Mechanism m, const std::string& spn) override {
    if (m == Mechanism::Ntlm) return true;
    std::shared_ptr<Cred> cred;
    if (withPassword()) {
      // The password's ticket, while valid (renewal is queued, not waited for).
      std::shared_ptr<PasswordTgt> tgt;
      {
        std::lock_guard<std::mutex> lock(mu_);
        tgt = tgt_;
      }
      if (!tgt || !(cred = tgt->current())) return false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!cred) {
      if (!krb_ || !krb_->in_memory) return false;
      if (!file_cache_.empty() && stampOf(file_cache_) != stamp_) return false;
      cred = krb_;
    }
    const auto it = tickets_.find(spn);
    if (it == tickets_.end() || it->second.generation != cred->generation) return false;
    return std::time(nullptr) + kTicketMargin < it->second.endtime;
  }

  // The canonical name of `spn` found by an earlier token (so no DNS
  // lookup canonicalizes it again), or GSS_C_NO_NAME. The caller releases it.
  gss_name_t canonicalName(const std::string& spn) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = tickets_.find(spn);
    if (it == tickets_.end() || !it->second.name) return GSS_C_NO_NAME;
    OM_uint32 minor = 0;
    gss_name_t out = GSS_C_NO_NAME;
    gss_duplicate_name(&minor, it->second.name, &out);
    return out;
  }

  // After a Negotiate token for `spn` made with `cred`: remembers the
  // service ticket's end time (from the in-memory cache) and the
  // canonicalized name. Off the event loop (it may canonicalize by DNS and
  // reads krb5.conf); once per principal and credential.
  void noteTicket(const std::string& spn, const std::shared_ptr<Cred>& cred, gss_name_t target) {
    if (!cred->in_memory) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto it = tickets_.find(spn);
      if (it != tickets_.end() && it->second.generation == cred->generation &&
          std::time(nullptr) + kTicketMargin < it->second.endtime)
        return;
    }
    OM_uint32 minor = 0;
    gss_name_t canon = GSS_C_NO_NAME;
    if (GSS_ERROR(gss_canonicalize_name(&minor, target, gss_mech_krb5, &canon))) return;
    gss_buffer_desc text = GSS_C_EMPTY_BUFFER;
    gss_display_name(&minor, canon, &text, nullptr);
    const std::string principal(static_cast<const char*>(text.value), text.length);
    gss_release_buffer(&minor, &text);
    const krb5_timestamp endtime = ticketEnd(cred->cache_name, principal);
    std::lock_guard<std::mutex> lock(mu_);
    Ticket& t = tickets_[spn];
    if (t.name) gss_release_name(&minor, &t.name);
    t = Ticket{cred->generation, endtime, canon};
  }

  ~GssMechanisms() override {
    OM_uint32 minor = 0;
    for (auto& [spn, t] : tickets_)
      if (t.name) gss_release_name(&minor, &t.name);
    if (profile_keeper_) krb5_free_context(profile_keeper_);
    OPENSSL_cleanse(source_.password.data(), source_.password.size());
  }

 private:
  // Identity of the user's FILE cache: a change means kinit ran.
  struct FileStamp {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    struct timespec mtime {};
    bool operator==(const FileStamp& o) const {
      return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
             mtime.tv_nsec == o.mtime.tv_nsec;
    }
  };
  static std::optional<FileStamp> stampOf(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::nullopt;
    return FileStamp{st.st_dev, st.st_ino, st.st_size, st.st_mtim};
  }

  // Kerberos tickets come from the password: credentials with a user name
  // and no client keytab (then the keytab's; see mechanism.h).
  bool withPassword() const { return source_.client_keytab.empty() && !source_.username.empty(); }
  std::shared_ptr<PasswordTgt> passwordTgt() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!tgt_) tgt_ = PasswordTgt::shared(passwordPrincipal(source_), source_.password);
    return tgt_;
  }

  gss_name_t principalName(Step* fail) {
    if (source_.principal.empty()) return GSS_C_NO_NAME;
    gss_buffer_desc b{source_.principal.size(), source_.principal.data()};
    gss_name_t name = GSS_C_NO_NAME;
    OM_uint32 minor = 0;
    const OM_uint32 major = gss_import_name(&minor, &b, GSS_KRB5_NT_PRINCIPAL_NAME, &name);
    if (GSS_ERROR(major)) {
      fail->error =
          gssError(("principal '" + source_.principal + "'").c_str(), major, minor, gss_mech_krb5);
      return GSS_C_NO_NAME;
    }
    return name;
  }

  std::shared_ptr<Cred> kerberos(Step* fail) {
    if (!source_.client_keytab.empty()) {
      if (krb_) return krb_;
      gss_name_t name = principalName(fail);
      if (!source_.principal.empty() && name == GSS_C_NO_NAME) return nullptr;
      std::string memory = uniqueMemoryCache("keytab");
      krb_ = acquireSpnego(
          name, {{"client_keytab", source_.client_keytab.c_str()}, {"ccache", memory.c_str()}},
          memory, memory, fail);
      OM_uint32 minor = 0;
      if (name != GSS_C_NO_NAME) gss_release_name(&minor, &name);
      if (!krb_ && fail->hint.empty()) fail->hint = "check client_keytab (klist -k) and principal";
      return krb_;
    }
    // The user's cache, through a snapshot in memory (FILE caches; others,
    // such as KEYRING or KCM, are already fast and are used directly).
    if (krb_ && !file_cache_.empty() && stampOf(file_cache_) == stamp_) return krb_;
    if (krb_ && file_cache_.empty()) return krb_;
    krb_.reset();
    krb5_context kc = nullptr;
    if (krb5_error_code e = krb5_init_context(&kc); e != 0) {
      fail->error = "cannot initialise Kerberos (krb5.conf): error " + std::to_string(e);
      return nullptr;
    }
    std::shared_ptr<Cred> out = snapshot(kc, fail);
    krb5_free_context(kc);
    krb_ = out;
    return out;
  }

  std::shared_ptr<Cred> snapshot(krb5_context kc, Step* fail) {
    krb5_ccache src = nullptr;
    krb5_error_code e = krb5_cc_default(kc, &src);
    if (e == 0 && !source_.principal.empty()) {
      // In a cache collection (DIR, KEYRING, KCM): the principal's cache.
      krb5_principal want = nullptr;
      if (krb5_parse_name(kc, source_.principal.c_str(), &want) == 0) {
        krb5_ccache match = nullptr;
        if (krb5_cc_cache_match(kc, want, &match) == 0) {
          krb5_cc_close(kc, src);
          src = match;
        }
        krb5_free_principal(kc, want);
      }
    }
    if (e != 0) {
      fail->error = "no Kerberos credential cache: " + Krb5Error(kc, e).str();
      fail->hint = kerberosHint("No credentials cache");
      return nullptr;
    }
    const std::string type = krb5_cc_get_type(kc, src);
    const std::string name = type + ":" + krb5_cc_get_name(kc, src);
    krb5_principal client = nullptr;
    e = krb5_cc_get_principal(kc, src, &client);
    if (e != 0) {
      fail->error =
          "no Kerberos ticket in credential cache " + name + ": " + Krb5Error(kc, e).str();
      fail->hint = kerberosHint("No credentials cache");
      krb5_cc_close(kc, src);
      return nullptr;
    }
    std::shared_ptr<Cred> out;
    if (type == "FILE") {
      const std::string path = krb5_cc_get_name(kc, src);
      const auto stamp = stampOf(path);
      const std::string memory = uniqueMemoryCache("ccache");
      krb5_ccache mem = nullptr;
      e = krb5_cc_resolve(kc, memory.c_str(), &mem);
      if (e == 0) e = krb5_cc_initialize(kc, mem, client);
      if (e == 0) e = krb5_cc_copy_creds(kc, src, mem);
      if (mem) krb5_cc_close(kc, mem);  // closing a MEMORY cache keeps its contents
      if (e != 0) {
        fail->error = "cannot read credential cache " + name + ": " + Krb5Error(kc, e).str();
        fail->hint = kerberosHint("No credentials cache");
      } else {
        out = acquireSpnego(GSS_C_NO_NAME, {{"ccache", memory.c_str()}}, memory, memory, fail);
        if (out && stamp) {
          file_cache_ = path;
          stamp_ = *stamp;
        }
      }
      if (!out && mem) {
        // Nothing holds the copy: drop it.
        krb5_ccache again = nullptr;
        if (krb5_cc_resolve(kc, memory.c_str(), &again) == 0) krb5_cc_destroy(kc, again);
      }
    } else {
      file_cache_.clear();
      out = acquireSpnego(GSS_C_NO_NAME, {{"ccache", name.c_str()}}, "", name, fail);
    }
    krb5_free_principal(kc, client);
    krb5_cc_close(kc, src);
    return out;
  }

  std::shared_ptr<Cred> ntlm(Step* fail) {
    if (ntlm_) return ntlm_;
    auto cred = std::make_shared<Cred>();
    gss_OID_set_desc mechs{1, &kNtlmOid};
    OM_uint32 minor = 0;
    OM_uint32 major = 0;
    if (source_.username.empty()) {
      // gss-ntlmssp's own: NTLM_USER_FILE (or winbind where it is built in).
      major = gss_acquire_cred(&minor, GSS_C_NO_NAME, GSS_C_INDEFINITE, &mechs, GSS_C_INITIATE,
                               &cred->handle, nullptr, nullptr);
    } else {
      gss_buffer_desc user{source_.username.size(), source_.username.data()};
      gss_name_t name = GSS_C_NO_NAME;
      major = gss_import_name(&minor, &user, GSS_C_NT_USER_NAME, &name);
      if (!GSS_ERROR(major)) {
        gss_buffer_desc pw{source_.password.size(), source_.password.data()};
        major = gss_acquire_cred_with_password(&minor, name, &pw, GSS_C_INDEFINITE, &mechs,
                                               GSS_C_INITIATE, &cred->handle, nullptr, nullptr);
      }
      OM_uint32 m2 = 0;
      if (name != GSS_C_NO_NAME) gss_release_name(&m2, &name);
    }
    if (GSS_ERROR(major)) {
      fail->error = gssError("acquiring NTLM credentials", major, minor, &kNtlmOid);
      if (major == GSS_S_BAD_MECH || contains(fail->error, "unsupported mechanism"))
        fail->hint = "NTLM needs gss-ntlmssp (Debian: gss-ntlmssp)";
      else if (source_.username.empty())
        fail->hint = "give the cluster proxy_authentication.credentials (or set NTLM_USER_FILE)";
      return nullptr;
    }
    ntlm_ = cred;
    return ntlm_;
  }

  // The latest end time of a ticket for `principal` (any realm: a referral
  // stores its ticket without one) in `cache`; 0 when there is none.
  static krb5_timestamp ticketEnd(const std::string& cache, const std::string& principal) {
    krb5_context kc = nullptr;
    if (krb5_init_context(&kc) != 0) return 0;
    krb5_timestamp end = 0;
    krb5_ccache cc = nullptr;
    krb5_principal server = nullptr;
    krb5_cc_cursor cursor = nullptr;
    if (krb5_cc_resolve(kc, cache.c_str(), &cc) == 0 &&
        krb5_parse_name(kc, principal.c_str(), &server) == 0 &&
        krb5_cc_start_seq_get(kc, cc, &cursor) == 0) {
      krb5_creds creds;
      while (krb5_cc_next_cred(kc, cc, &cursor, &creds) == 0) {
        if (krb5_principal_compare_any_realm(kc, creds.server, server))
          end = std::max(end, creds.times.endtime);
        krb5_free_cred_contents(kc, &creds);
      }
      krb5_cc_end_seq_get(kc, cc, &cursor);
    }
    if (server) krb5_free_principal(kc, server);
    if (cc) krb5_cc_close(kc, cc);
    krb5_free_context(kc);
    return end;
  }

  // A token is made on the event loop only while its service ticket stays
  // valid this much longer (clock skew, a slow request).
  static constexpr std::time_t kTicketMargin = 300;
  struct Ticket {
    uint64_t generation = 0;  // of the credential it was found with
    krb5_timestamp endtime = 0;
    gss_name_t name = GSS_C_NO_NAME;  // canonicalized, owned
  };

  CredentialSource source_;
  krb5_context profile_keeper_ = nullptr;
  std::mutex mu_;
  std::map<std::string, Ticket> tickets_;  // by spn
  std::shared_ptr<Cred> krb_;
  std::shared_ptr<PasswordTgt> tgt_;  // with a password
  std::string file_cache_;            // the user's FILE cache krb_ is a copy of ("" otherwise)
  FileStamp stamp_;
  std::shared_ptr<Cred> ntlm_;
};

Step GssContext::step(std::string_view input) {
  Step out;
  if (done_) {
    out.error = "the handshake is over";
    return out;
  }
  gss_OID mech = mech_ == Mechanism::Negotiate ? &kSpnegoOid : &kNtlmOid;
  const char* what = mech_ == Mechanism::Negotiate ? "Negotiate" : "NTLM";
  if (!cred_) {
    cred_ = owner_->credential(mech_, &out);
    if (!cred_) {
      done_ = true;
      return out;
    }
    if (mech_ == Mechanism::Negotiate) target_ = owner_->canonicalName(spn_);
    if (target_ == GSS_C_NO_NAME) {
      gss_buffer_desc b{spn_.size(), spn_.data()};
      OM_uint32 minor = 0;
      const OM_uint32 major = gss_import_name(&minor, &b, GSS_C_NT_HOSTBASED_SERVICE, &target_);
      if (GSS_ERROR(major)) {
        out.error = gssError(("service principal " + spn_).c_str(), major, minor, mech);
        done_ = true;
        return out;
      }
    }
    first_ = true;
  }
  gss_buffer_desc in{input.size(), const_cast<char*>(input.data())};
  gss_buffer_desc token = GSS_C_EMPTY_BUFFER;
  OM_uint32 minor = 0;
  // Negotiate asks for mutual authentication: the proxy's answer may then
  // prove it holds the service key (its token is checked by the next step).
  const OM_uint32 flags = mech_ == Mechanism::Negotiate ? GSS_C_MUTUAL_FLAG : 0;
  const OM_uint32 major =
      gss_init_sec_context(&minor, cred_->handle, &ctx_, target_, mech, flags, GSS_C_INDEFINITE,
                           GSS_C_NO_CHANNEL_BINDINGS, input.empty() ? GSS_C_NO_BUFFER : &in,
                           nullptr, &token, nullptr, nullptr);
  if (token.length > 0) out.token.assign(static_cast<const char*>(token.value), token.length);
  wipeBuffer(token);
  if (GSS_ERROR(major)) {
    out.status = Step::Status::Failed;
    out.error = gssError(what, major, minor, mech);
    if (mech_ == Mechanism::Negotiate) out.hint = kerberosHint(out.error);
    OPENSSL_cleanse(out.token.data(), out.token.size());
    out.token.clear();
    done_ = true;
    owner_->forget(mech_, cred_);
    return out;
  }
  out.status = major == GSS_S_CONTINUE_NEEDED ? Step::Status::Continue : Step::Status::Complete;
  done_ = out.status == Step::Status::Complete;
  if (first_ && mech_ == Mechanism::Negotiate) owner_->noteTicket(spn_, cred_, target_);
  first_ = false;
  return out;
}

}  // namespace

std::shared_ptr<Mechanisms> platformMechanisms(const CredentialSource& source) {
  return std::make_shared<GssMechanisms>(source);
}

std::string initPlatformAuth() {
  // gss-ntlmssp's LM compatibility level: 3 and above send NTLMv2 only (its
  // default is 3). A lower one in the environment would allow LM and NTLMv1.
  const char* level = std::getenv("LM_COMPAT_LEVEL");
  if (level == nullptr) return "";
  char* end = nullptr;
  const long n = std::strtol(level, &end, 10);
  if (end != level && *end == '\0' && n >= 3 && n <= 5) return "";
  const std::string was = level;
  ::setenv("LM_COMPAT_LEVEL", "3", 1);
  return "LM_COMPAT_LEVEL=" + was +
         " would let NTLM fall back to LM or NTLMv1; h2gate sets it to 3 (NTLMv2 only)";
}

}  // namespace h2gate::upstream::auth
