// The SSPI backend (gateway/upstream/auth/sspi_win.cc) under wine, in the
// Windows cross build (tests/windows/). What wine can do: NTLM with an
// explicit identity (wine's NTLM runs Samba's ntlm_auth, Debian winbind);
// Negotiate through its Kerberos package, which uses the host's MIT
// Kerberos (no ticket here: the Linux integration test
// tests/integration/sspi_wine_test.cc brings a KDC and real proxies).
// What it cannot: a domain logon (single sign-on from the logged-on user),
// SPNEGO framing (its Negotiate sends the bare Kerberos token).
// Built only for Windows: the main build's unit test glob sees it too.
#ifdef _WIN32
#include <windows.h>

#include <string>

#include <catch2/catch.hpp>

#include "gateway/upstream/auth/mechanism.h"

using namespace h2gate::upstream::auth;

namespace {

std::string fromHex(const char* hex) {
  std::string out;
  for (size_t i = 0; hex[i] && hex[i + 1]; i += 2)
    out.push_back(static_cast<char>(std::stoi(std::string(hex + i, 2), nullptr, 16)));
  return out;
}

unsigned u16(const std::string& s, size_t at) {
  return static_cast<unsigned char>(s[at]) | static_cast<unsigned char>(s[at + 1]) << 8;
}

// A CHALLENGE_MESSAGE (MS-NLMP 2.2.1.2) from pyspnego's acceptor, with its
// target information: what a proxy sends in its 407.
const char* const kChallenge =
    "4e544c4d5353500002000000040004003800000035828ae2edf5456540a980660000000000000000"
    "3a003a003c000000000c04000000000f56004d000100040056004d000200160057004f0052004b00"
    "530054004100540049004f004e000300040076006d0007000800fad1c946f47cdd0100000000";

}  // namespace

TEST_CASE("SSPI NTLM with an explicit identity: negotiate, then an NTLMv2 authenticate",
          "[auth][sspi]") {
  CredentialSource source;
  source.username = "CORP\\alice";
  source.password = "ntlm-pw";
  auto ctx = platformMechanisms(source)->newContext(Mechanism::Ntlm, "HTTP@proxy.test");
  const Step negotiate = ctx->step({});
  INFO(negotiate.error << " " << negotiate.hint
                       << " (wine's NTLM needs Samba's ntlm_auth: Debian winbind)");
  REQUIRE(negotiate.status == Step::Status::Continue);
  REQUIRE(negotiate.token.size() >= 16);
  CHECK(negotiate.token.compare(0, 8, std::string("NTLMSSP\0", 8)) == 0);
  CHECK(negotiate.token[8] == 1);  // NEGOTIATE_MESSAGE

  const Step authenticate = ctx->step(fromHex(kChallenge));
  INFO(authenticate.error);
  REQUIRE(authenticate.status != Step::Status::Failed);
  const std::string& t = authenticate.token;
  REQUIRE(t.size() > 64);
  CHECK(t.compare(0, 8, std::string("NTLMSSP\0", 8)) == 0);
  CHECK(t[8] == 3);  // AUTHENTICATE_MESSAGE
  // NtChallengeResponse length at offset 20: 24 would be NTLMv1.
  CHECK(u16(t, 20) > 24);
}

TEST_CASE("SSPI Negotiate without a ticket: NTLM inside, or an error with what to do",
          "[auth][sspi]") {
  // ctest points KRB5CCNAME at nothing (wine's Kerberos reads the host's cache).
  const Step s =
      platformMechanisms({})->newContext(Mechanism::Negotiate, "HTTP@proxy.test")->step({});
  INFO("status " << static_cast<int>(s.status) << ", " << s.token.size()
                 << " token bytes, error: " << s.error);
  if (s.status == Step::Status::Failed) {
    // wine 8 (Debian 12) answers so.
    CHECK(s.token.empty());
    CHECK_THAT(s.error, Catch::Contains("SEC_E_NO_CREDENTIALS"));
    CHECK_THAT(s.hint, Catch::Contains("credentials"));
  } else {
    // Windows, and wine 10 (Debian 13): without a ticket Negotiate falls
    // back to NTLM under the session's account: its NEGOTIATE_MESSAGE is in
    // the first token (alone, or wrapped in SPNEGO).
    CHECK(s.status == Step::Status::Continue);
    CHECK(s.token.find(std::string("NTLMSSP\0\x01", 9)) != std::string::npos);
  }
}

TEST_CASE("SSPI: the machine's LmCompatibilityLevel is checked", "[auth][sspi]") {
  const wchar_t* key = L"SYSTEM\\CurrentControlSet\\Control\\Lsa";
  HKEY lsa = nullptr;
  REQUIRE(RegCreateKeyExW(HKEY_LOCAL_MACHINE, key, 0, nullptr, 0, KEY_ALL_ACCESS, nullptr, &lsa,
                          nullptr) == ERROR_SUCCESS);
  RegDeleteValueW(lsa, L"LmCompatibilityLevel");
  CHECK(initPlatformAuth().empty());  // absent: Windows' default (NTLMv2 only)
  DWORD level = 1;
  REQUIRE(RegSetValueExW(lsa, L"LmCompatibilityLevel", 0, REG_DWORD,
                         reinterpret_cast<const BYTE*>(&level), sizeof level) == ERROR_SUCCESS);
  CHECK_THAT(initPlatformAuth(), Catch::Contains("LmCompatibilityLevel is 1"));
  level = 5;
  RegSetValueExW(lsa, L"LmCompatibilityLevel", 0, REG_DWORD, reinterpret_cast<const BYTE*>(&level),
                 sizeof level);
  CHECK(initPlatformAuth().empty());
  RegDeleteValueW(lsa, L"LmCompatibilityLevel");
  RegCloseKey(lsa);
}

#endif  // _WIN32
