// SSPI backend of mechanism.h (Windows, secur32): the "Negotiate" package
// (Kerberos, falling back to NTLM inside SPNEGO as Windows does) and the
// "NTLM" package. Without an explicit identity the credentials are those of
// the logged-on user: single sign-on, nothing typed in. SSPI names services
// "HTTP/host"; the GSSAPI-style "HTTP@host" given here is converted.
//
// NTLMv2 only is a machine policy on Windows (LmCompatibilityLevel, 3 and
// above: NTLMv2 only, the default since Vista); SSPI has no per-call switch,
// so initPlatformAuth() reads the policy and warns when it allows less.
//
// Every SSPI call here is local except InitializeSecurityContext's first
// Kerberos leg, which may ask a domain controller for a service ticket: like
// the GSSAPI backend, callers run the first leg off the event loop.
#ifndef SECURITY_WIN32
#define SECURITY_WIN32
#endif
#include <windows.h>
// windows.h first: the SSPI headers build on its types.
#include <security.h>
#include <sspi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gateway/upstream/auth/mechanism.h"

namespace h2gate::upstream::auth {
namespace {

std::wstring widen(const std::string& s) {
  if (s.empty()) return {};
  const int n = MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), nullptr, 0);
  std::wstring out(static_cast<size_t>(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), out.data(), n);
  return out;
}

void wipe(std::wstring& s) {
  if (!s.empty()) SecureZeroMemory(s.data(), s.size() * sizeof(wchar_t));
  s.clear();
}

// SSPI's status, with what the user can do about the common ones.
struct Status {
  const char* name;
  const char* hint;
};

Status describe(SECURITY_STATUS st) {
  switch (st) {
    case SEC_E_NO_CREDENTIALS:
      return {"SEC_E_NO_CREDENTIALS",
              "no credentials for this package: log on to the domain, or "
              "give the cluster proxy_authentication.credentials"};
    case SEC_E_LOGON_DENIED:
      return {"SEC_E_LOGON_DENIED", "the user name or password is wrong"};
    case SEC_E_TARGET_UNKNOWN:
      return {"SEC_E_TARGET_UNKNOWN",
              "the domain does not know this service principal: check the cluster's spn"};
    case SEC_E_WRONG_PRINCIPAL:
      return {"SEC_E_WRONG_PRINCIPAL", "check the cluster's spn"};
    case SEC_E_NO_AUTHENTICATING_AUTHORITY:
      return {"SEC_E_NO_AUTHENTICATING_AUTHORITY", "no domain controller answered"};
    case SEC_E_TIME_SKEW:
      return {"SEC_E_TIME_SKEW", "this machine's clock differs from the domain controller's"};
    case SEC_E_CONTEXT_EXPIRED:
      return {"SEC_E_CONTEXT_EXPIRED", ""};
    case SEC_E_SECPKG_NOT_FOUND:
      return {"SEC_E_SECPKG_NOT_FOUND", "this Windows has no such security package"};
    case SEC_E_INVALID_TOKEN:
      return {"SEC_E_INVALID_TOKEN", ""};
    case SEC_E_MESSAGE_ALTERED:
      return {"SEC_E_MESSAGE_ALTERED", ""};
    case SEC_E_UNSUPPORTED_FUNCTION:
      return {"SEC_E_UNSUPPORTED_FUNCTION", ""};
    case SEC_E_INTERNAL_ERROR:
      return {"SEC_E_INTERNAL_ERROR", ""};
    case SEC_E_INSUFFICIENT_MEMORY:
      return {"SEC_E_INSUFFICIENT_MEMORY", ""};
    default:
      return {nullptr, ""};
  }
}

std::string sspiError(const char* call, SECURITY_STATUS st, std::string* hint) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%08lx", static_cast<unsigned long>(st));
  const Status d = describe(st);
  std::string out = std::string(call) + ": " + (d.name ? d.name : "SSPI error") + " (" + hex + ")";
  char* text = nullptr;
  const DWORD n = FormatMessageA(
      FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
      nullptr, static_cast<DWORD>(st), 0, reinterpret_cast<char*>(&text), 0, nullptr);
  if (n > 0 && text) {
    std::string msg(text, n);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == '\r' || msg.back() == ' '))
      msg.pop_back();
    if (!msg.empty()) out += ": " + msg;
  }
  if (text) LocalFree(text);
  *hint = d.hint;
  return out;
}

class SspiContext : public SecurityContext {
 public:
  SspiContext(const CredentialSource& source, Mechanism m, const std::string& spn)
      : mech_(m), source_(source) {
    // "HTTP@host" (GSSAPI) → "HTTP/host" (SSPI).
    std::string target = spn;
    if (const size_t at = target.find('@'); at != std::string::npos) target[at] = '/';
    target_ = widen(target);
  }
  ~SspiContext() override {
    if (have_ctx_) DeleteSecurityContext(&ctx_);
    if (have_cred_) FreeCredentialsHandle(&cred_);
    SecureZeroMemory(source_.password.data(), source_.password.size());
  }

  Step step(std::string_view input) override {
    Step out;
    if (done_) {
      out.error = "the handshake is over";
      return out;
    }
    if (!have_cred_ && !acquire(&out)) {
      done_ = true;
      return out;
    }
    SecBuffer in_buf{static_cast<unsigned long>(input.size()), SECBUFFER_TOKEN,
                     const_cast<char*>(input.data())};
    SecBufferDesc in_desc{SECBUFFER_VERSION, 1, &in_buf};
    // Our own buffer of the package's largest token (not
    // ISC_REQ_ALLOCATE_MEMORY, which wine's Kerberos does not implement).
    std::vector<char> token(max_token_);
    SecBuffer out_buf{static_cast<unsigned long>(token.size()), SECBUFFER_TOKEN, token.data()};
    SecBufferDesc out_desc{SECBUFFER_VERSION, 1, &out_buf};
    unsigned long attrs = 0;
    TimeStamp expiry{};
    // Negotiate asks for mutual authentication: the proxy's answer may then
    // prove it holds the service key (checked by the next step).
    const unsigned long flags =
        ISC_REQ_CONNECTION | (mech_ == Mechanism::Negotiate ? ISC_REQ_MUTUAL_AUTH : 0);
    SECURITY_STATUS st = InitializeSecurityContextW(
        &cred_, have_ctx_ ? &ctx_ : nullptr, target_.empty() ? nullptr : target_.data(), flags, 0,
        SECURITY_NATIVE_DREP, input.empty() ? nullptr : &in_desc, 0, &ctx_, &out_desc, &attrs,
        &expiry);
    if (st == SEC_I_COMPLETE_NEEDED || st == SEC_I_COMPLETE_AND_CONTINUE) {
      const SECURITY_STATUS done = CompleteAuthToken(&ctx_, &out_desc);
      if (done != SEC_E_OK)
        st = done;
      else
        st = st == SEC_I_COMPLETE_NEEDED ? SEC_E_OK : SEC_I_CONTINUE_NEEDED;
    }
    if (out_buf.cbBuffer > 0 && out_buf.cbBuffer <= token.size())
      out.token.assign(token.data(), out_buf.cbBuffer);
    SecureZeroMemory(token.data(), token.size());
    if (st == SEC_E_OK || st == SEC_I_CONTINUE_NEEDED) have_ctx_ = true;
    if (st == SEC_E_OK) {
      out.status = Step::Status::Complete;
      done_ = true;
      return out;
    }
    if (st == SEC_I_CONTINUE_NEEDED) {
      out.status = Step::Status::Continue;
      return out;
    }
    out.status = Step::Status::Failed;
    SecureZeroMemory(out.token.data(), out.token.size());
    out.token.clear();
    out.error = sspiError(mechanism(), st, &out.hint);
    done_ = true;
    return out;
  }

 private:
  const char* mechanism() const { return mech_ == Mechanism::Negotiate ? "Negotiate" : "NTLM"; }

  bool acquire(Step* out) {
    std::wstring package = widen(std::string(mechanismName(mech_)));
    SEC_WINNT_AUTH_IDENTITY_W identity{};
    std::wstring user, domain, password;
    const bool explicit_identity = !source_.username.empty();
    if (explicit_identity) {
      // "DOMAIN\user" splits; "user@domain" (a UPN) goes as the user name.
      const std::string& name = source_.username;
      if (const size_t slash = name.find('\\'); slash != std::string::npos) {
        domain = widen(name.substr(0, slash));
        user = widen(name.substr(slash + 1));
      } else {
        user = widen(name);
      }
      password = widen(source_.password);
      identity.User = reinterpret_cast<unsigned short*>(user.data());
      identity.UserLength = static_cast<unsigned long>(user.size());
      identity.Domain = domain.empty() ? nullptr : reinterpret_cast<unsigned short*>(domain.data());
      identity.DomainLength = static_cast<unsigned long>(domain.size());
      identity.Password = reinterpret_cast<unsigned short*>(password.data());
      identity.PasswordLength = static_cast<unsigned long>(password.size());
      identity.Flags = SEC_WINNT_AUTH_IDENTITY_UNICODE;
    }
    PSecPkgInfoW info = nullptr;
    const SECURITY_STATUS q = QuerySecurityPackageInfoW(package.data(), &info);
    if (q != SEC_E_OK) {
      out->status = Step::Status::Failed;
      out->error = sspiError("QuerySecurityPackageInfo", q, &out->hint);
      wipe(password);
      return false;
    }
    max_token_ = info->cbMaxToken;
    FreeContextBuffer(info);
    TimeStamp expiry{};
    const SECURITY_STATUS st = AcquireCredentialsHandleW(
        nullptr, package.data(), SECPKG_CRED_OUTBOUND, nullptr,
        explicit_identity ? &identity : nullptr, nullptr, nullptr, &cred_, &expiry);
    wipe(password);
    SecureZeroMemory(source_.password.data(), source_.password.size());
    if (st != SEC_E_OK) {
      out->status = Step::Status::Failed;
      out->error = sspiError("AcquireCredentialsHandle", st, &out->hint);
      return false;
    }
    have_cred_ = true;
    return true;
  }

  Mechanism mech_;
  CredentialSource source_;
  std::wstring target_;
  CredHandle cred_{};
  CtxtHandle ctx_{};
  bool have_cred_ = false;
  bool have_ctx_ = false;
  bool done_ = false;
  size_t max_token_ = 0;  // the package's cbMaxToken
};

class SspiMechanisms : public Mechanisms {
 public:
  explicit SspiMechanisms(const CredentialSource& source) : source_(source) {}
  ~SspiMechanisms() override { SecureZeroMemory(source_.password.data(), source_.password.size()); }
  // A credential handle per context: SSPI's handles are cheap, and one of
  // the logged-on user follows that user's ticket renewals by itself.
  std::unique_ptr<SecurityContext> newContext(Mechanism m, const std::string& spn) override {
    return std::make_unique<SspiContext>(source_, m, spn);
  }

 private:
  CredentialSource source_;
};

}  // namespace

std::shared_ptr<Mechanisms> platformMechanisms(const CredentialSource& source) {
  return std::make_shared<SspiMechanisms>(source);
}

std::string initPlatformAuth() {
  DWORD level = 0;
  DWORD size = sizeof level;
  const LSTATUS rc =
      RegGetValueW(HKEY_LOCAL_MACHINE, L"SYSTEM\\CurrentControlSet\\Control\\Lsa",
                   L"LmCompatibilityLevel", RRF_RT_REG_DWORD, nullptr, &level, &size);
  if (rc != ERROR_SUCCESS || level >= 3) return "";  // absent: Windows' default, 3
  return "this machine's LmCompatibilityLevel is " + std::to_string(level) +
         ", which lets NTLM send LM or NTLMv1 responses; SSPI follows the machine's policy, so "
         "set it to 3 or more for NTLMv2 only (Local Security Policy: Network security: LAN "
         "Manager authentication level)";
}

}  // namespace h2gate::upstream::auth
