// The platform's security packages behind one small interface: GSSAPI (MIT
// Kerberos for SPNEGO, gss-ntlmssp for NTLM) on Linux and macOS in
// gssapi_posix.cc, SSPI (secur32) on Windows in sspi_win.cc. Tokens here
// are raw bytes; base64 and the HTTP headers are the caller's business
// (proxy_auth.h). Standard library only, so the Windows part cross-compiles
// on its own.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace h2gate::upstream::auth {

enum class Mechanism {
  Negotiate,  // SPNEGO with Kerberos (RFC 4559)
  Ntlm,       // NTLMv2 only, never LM or NTLMv1
};
// "Negotiate", "NTLM": the HTTP scheme names, and SSPI's package names.
inline std::string_view mechanismName(Mechanism m) {
  return m == Mechanism::Negotiate ? "Negotiate" : "NTLM";
}

// Where a cluster's credentials come from.
struct CredentialSource {
  // An explicit identity: "DOMAIN\user" or "user@DOMAIN". Empty: the
  // platform's own credentials (Kerberos: the user's credential cache,
  // KRB5CCNAME; NTLM on Linux: gss-ntlmssp's NTLM_USER_FILE; Windows: the
  // logged-on user, single sign-on). Given, it serves Negotiate too unless
  // there is a client_keytab: GSSAPI gets Kerberos tickets with the
  // password itself (no kinit; the principal is `principal`, else this
  // name, "DOMAIN\user" meaning user in the default realm), SSPI uses the
  // identity as it does for NTLM.
  std::string username;
  // With username. The backend copies what it needs and wipes its copies;
  // the caller wipes this one.
  std::string password;
  // GSSAPI Negotiate for service accounts: tickets come from this keytab
  // (into a credential cache in memory). Ignored by SSPI.
  std::string client_keytab;
  // GSSAPI Negotiate: the client principal to use (from the keytab, the
  // cache collection, or whose password `password` is). Empty: the keytab's
  // first / the cache's default / `username`.
  std::string principal;
};

// The outcome of one leg of a handshake.
struct Step {
  enum class Status { Continue, Complete, Failed };
  Status status = Status::Failed;
  std::string token;  // raw bytes for the proxy (empty when there are none); wipe after use
  // Failed: what the platform said (GSSAPI's major and minor status text,
  // SSPI's status), never a secret; and what the user can do about it.
  std::string error;
  std::string hint;
};

// One handshake: a request (Negotiate) or a connection (NTLM). Used by one
// thread at a time; may move between threads between legs.
class SecurityContext {
 public:
  virtual ~SecurityContext() = default;
  // One leg. `input` is the proxy's token, empty for the first leg.
  // MAY BLOCK: the first Negotiate leg may ask a KDC for a ticket (once per
  // service principal, and when tickets expire), so callers run it off the
  // event loop unless Mechanisms::firstStepIsLocal() says otherwise. Later
  // legs and NTLM compute locally.
  virtual Step step(std::string_view input) = 0;
};

// The credentials of one cluster for every mechanism. Thread-safe: contexts
// are made and stepped on any thread.
class Mechanisms {
 public:
  virtual ~Mechanisms() = default;
  // `spn` in GSSAPI's host-based form "HTTP@proxy.example.com". Never null;
  // problems show up in the first step().
  virtual std::unique_ptr<SecurityContext> newContext(Mechanism m, const std::string& spn) = 0;
  // Whether a first step for `spn` now would compute locally, from tickets
  // already in memory, without a KDC, a DNS lookup or reading a credential
  // cache file: then the caller may run it on its event loop. False unless
  // the backend knows (the default).
  virtual bool firstStepIsLocal(Mechanism m, const std::string& spn) {
    (void)m;
    (void)spn;
    return false;
  }
  // For `h2gate check`: what the credentials for `m` are now, when the
  // backend got them itself ("Kerberos ticket for alice@REALM got with the
  // configured password ..., valid until ..."), or why it could not; "" when
  // there is nothing to add. No I/O.
  virtual std::string credentialsNote(Mechanism m) {
    (void)m;
    return "";
  }
};

// The platform's implementation (gssapi_posix.cc or sspi_win.cc).
std::shared_ptr<Mechanisms> platformMechanisms(const CredentialSource& source);

// Once per process, before other threads start: what the platform needs
// set up. GSSAPI: gss-ntlmssp sends NTLMv2 only (LM_COMPAT_LEVEL at least
// 3). Returns a line for the log, or "".
std::string initPlatformAuth();

}  // namespace h2gate::upstream::auth
