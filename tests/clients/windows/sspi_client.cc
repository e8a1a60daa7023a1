// An HTTP client that authenticates to a proxy with h2gate's SSPI backend
// (gateway/upstream/auth/sspi_win.cc), the way h2gate's Windows build does:
// Negotiate (a token, then the proxy's mutual-authentication answer checked)
// or NTLM (negotiate, the proxy's challenge on the same connection,
// authenticate). Cross-built with mingw-w64 and run under wine by
// tests/integration/sspi_wine_test.cc ([sspi]) against real proxies.
//
//   sspi_client.exe negotiate|ntlm PROXY_PORT URL [USER PASSWORD]
//
// Sends "GET URL" to 127.0.0.1:PROXY_PORT. Prints "step1 <status>" etc. for
// the backend's steps, "status <code>" for each answer and, for Negotiate,
// "mutual <complete|failed|none>". Exit 0 when the last answer is 200.
#include <winsock2.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gateway/upstream/auth/mechanism.h"

using namespace h2gate::upstream::auth;

namespace {

const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string b64(const std::string& in) {
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16 |
                       static_cast<unsigned char>(in[i + 1]) << 8 |
                       static_cast<unsigned char>(in[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += kB64[(v >> k) & 63];
  }
  if (i < in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string unb64(const std::string& in) {
  std::string out;
  unsigned v = 0;
  int bits = 0;
  for (char c : in) {
    const char* p = std::strchr(kB64, c);
    if (c == '=' || !p || !*p) break;
    v = v << 6 | static_cast<unsigned>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((v >> bits) & 0xff);
    }
  }
  return out;
}

struct Answer {
  int status = 0;
  std::string challenge;  // the token of the first Proxy-Authenticate of our scheme
};

// One request on `s`, its answer read to the end (Content-Length).
bool exchange(SOCKET s, const std::string& url, const std::string& authorization,
              const std::string& scheme, Answer* a) {
  std::string req = "GET " + url + " HTTP/1.1\r\nHost: origin\r\n";
  if (!authorization.empty()) req += "Proxy-Authorization: " + authorization + "\r\n";
  req += "\r\n";
  if (send(s, req.data(), static_cast<int>(req.size()), 0) != static_cast<int>(req.size()))
    return false;
  std::string buf;
  char chunk[4096];
  size_t end = std::string::npos;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    const int n = recv(s, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
  }
  const std::string head = buf.substr(0, end + 2);
  a->status = std::atoi(head.c_str() + 9);
  size_t length = 0;
  size_t pos = 0;
  while ((pos = head.find("\r\n", pos)) != std::string::npos) {
    pos += 2;
    const std::string line = head.substr(pos, head.find("\r\n", pos) - pos);
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    if (name == "content-length") length = std::strtoul(value.c_str(), nullptr, 10);
    if (name == "proxy-authenticate" && a->challenge.empty() &&
        _strnicmp(value.c_str(), (scheme + " ").c_str(), scheme.size() + 1) == 0)
      a->challenge = unb64(value.substr(scheme.size() + 1));
  }
  size_t have = buf.size() - (end + 4);
  while (have < length) {
    const int n = recv(s, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    have += static_cast<size_t>(n);
  }
  std::printf("status %d\n", a->status);
  return true;
}

const char* name(Step::Status s) {
  return s == Step::Status::Continue   ? "continue"
         : s == Step::Status::Complete ? "complete"
                                       : "failed";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: sspi_client.exe negotiate|ntlm PROXY_PORT URL [USER PASSWORD]\n");
    return 2;
  }
  const bool ntlm = std::string(argv[1]) == "ntlm";
  const std::string scheme = ntlm ? "NTLM" : "Negotiate";
  CredentialSource source;
  if (argc >= 6) {
    source.username = argv[4];
    source.password = argv[5];
  }
  WSADATA wsa;
  WSAStartup(MAKEWORD(2, 2), &wsa);
  SOCKET s = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<u_short>(std::atoi(argv[2])));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::fprintf(stderr, "connect failed: %d\n", WSAGetLastError());
    return 1;
  }
  auto ctx = platformMechanisms(source)->newContext(ntlm ? Mechanism::Ntlm : Mechanism::Negotiate,
                                                    "HTTP@localhost");
  Step step = ctx->step({});
  std::printf("step1 %s %s\n", name(step.status), step.error.c_str());
  if (step.status == Step::Status::Failed) return 1;
  Answer a;
  if (!exchange(s, argv[3], scheme + " " + b64(step.token), scheme, &a)) return 1;
  if (ntlm && a.status == 407 && !a.challenge.empty()) {
    step = ctx->step(a.challenge);
    std::printf("step2 %s %s\n", name(step.status), step.error.c_str());
    if (step.status == Step::Status::Failed) return 1;
    a = Answer{};
    if (!exchange(s, argv[3], scheme + " " + b64(step.token), scheme, &a)) return 1;
  }
  if (!ntlm) {
    if (a.challenge.empty()) {
      std::printf("mutual none\n");
    } else {
      step = ctx->step(a.challenge);
      std::printf("mutual %s %s\n", step.status == Step::Status::Complete ? "complete" : "failed",
                  step.error.c_str());
    }
  }
  closesocket(s);
  return a.status == 200 ? 0 : 1;
}
