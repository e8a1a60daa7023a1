// The account of this process (gateway/server/run_as.h): its token's user.
#include <windows.h>
// windows.h first: sddl.h builds on its types.
#include <sddl.h>

#include <string>
#include <vector>

#include "gateway/server/run_as.h"

namespace h2gate::run_as {

std::string processUserSid() {
  HANDLE token = nullptr;
  if (!::OpenProcessToken(::GetCurrentProcess(), TOKEN_QUERY, &token)) return {};
  DWORD bytes = 0;
  ::GetTokenInformation(token, TokenUser, nullptr, 0, &bytes);
  std::vector<unsigned char> buf(bytes ? bytes : 1);
  std::string out;
  if (bytes && ::GetTokenInformation(token, TokenUser, buf.data(), bytes, &bytes)) {
    char* text = nullptr;
    if (::ConvertSidToStringSidA(reinterpret_cast<TOKEN_USER*>(buf.data())->User.Sid, &text)) {
      out = text;
      ::LocalFree(text);
    }
  }
  ::CloseHandle(token);
  return out;
}

bool isLocalSystem(const std::string& sid) {
  PSID parsed = nullptr;
  if (!::ConvertStringSidToSidA(sid.c_str(), &parsed)) return false;
  const bool system = ::IsWellKnownSid(parsed, WinLocalSystemSid);
  ::LocalFree(parsed);
  return system;
}

}  // namespace h2gate::run_as
