// A WinINet client that takes its proxy where browsers and desktop apps on
// Windows take it: the user's Internet Settings (INTERNET_OPEN_TYPE_PRECONFIG),
// which tests/clients/README.md's `reg add` commands set. Cross-built with mingw-w64 and
// run under wine by tests/integration/system_proxy_test.cc ([wininet]).
//
//   wininet_client.exe get URL OUT_FILE [CA_FILE]
//       download URL into OUT_FILE; with CA_FILE, first add that PEM CA to the
//       user's Root store (what `certutil -user -addstore Root` does on
//       Windows; wine's certutil is a stub). The CA is added by the process
//       that fetches, so the fetch cannot race the store's write-back to the
//       registry of another process.
//
// `get` prints "proxy: <access type> <proxy> bypass <list>" (what WinINet
// read from the settings), then "status <code> bytes <n>". Exit 0 on HTTP
// 200 with the body written; 1 otherwise, with the step and GetLastError() on
// stderr. Nothing here sets a proxy: it is the settings' or none.
// windows.h first: wincrypt.h and wininet.h need its types.
#include <windows.h>

#include <wincrypt.h>
#include <wininet.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace {

int fail(const char* step) {
  std::fprintf(stderr, "wininet_client: %s failed: error %lu\n", step, GetLastError());
  return 1;
}

// Closes a WinINet handle when it goes out of scope.
struct InternetHandle {
  HINTERNET h = nullptr;
  explicit InternetHandle(HINTERNET handle) : h(handle) {}
  ~InternetHandle() {
    if (h) InternetCloseHandle(h);
  }
  InternetHandle(const InternetHandle&) = delete;
  InternetHandle& operator=(const InternetHandle&) = delete;
};

std::string narrow(const wchar_t* s) {
  if (!s) return "(none)";
  std::string out;
  for (; *s; ++s) out += *s < 128 ? static_cast<char>(*s) : '?';
  return out;
}

// The proxy WinINet will use for this session, as it read it from the settings.
void printProxy(HINTERNET session) {
  DWORD size = 0;
  InternetQueryOptionW(session, INTERNET_OPTION_PROXY, nullptr, &size);
  std::vector<unsigned char> buf(size ? size : 1);
  if (!InternetQueryOptionW(session, INTERNET_OPTION_PROXY, buf.data(), &size)) {
    std::printf("proxy: unknown (error %lu)\n", GetLastError());
    return;
  }
  const auto* info = reinterpret_cast<const INTERNET_PROXY_INFO*>(buf.data());
  const char* type = info->dwAccessType == INTERNET_OPEN_TYPE_PROXY    ? "PROXY"
                     : info->dwAccessType == INTERNET_OPEN_TYPE_DIRECT ? "DIRECT"
                                                                       : "OTHER";
  std::printf("proxy: %s %s bypass %s\n", type,
              narrow(reinterpret_cast<const wchar_t*>(info->lpszProxy)).c_str(),
              narrow(reinterpret_cast<const wchar_t*>(info->lpszProxyBypass)).c_str());
}

int trust(const wchar_t* ca_path, std::vector<BYTE>& der_out) {
  std::ifstream f(ca_path, std::ios::binary);
  const std::string pem{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  if (pem.empty()) {
    std::fprintf(stderr, "wininet_client: cannot read the CA file\n");
    return 1;
  }
  DWORD der_len = 0;
  if (!CryptStringToBinaryA(pem.data(), static_cast<DWORD>(pem.size()), CRYPT_STRING_BASE64HEADER,
                            nullptr, &der_len, nullptr, nullptr))
    return fail("CryptStringToBinary");
  std::vector<BYTE> der(der_len);
  if (!CryptStringToBinaryA(pem.data(), static_cast<DWORD>(pem.size()), CRYPT_STRING_BASE64HEADER,
                            der.data(), &der_len, nullptr, nullptr))
    return fail("CryptStringToBinary");
  HCERTSTORE store =
      CertOpenStore(CERT_STORE_PROV_SYSTEM_W, 0, 0, CERT_SYSTEM_STORE_CURRENT_USER, L"Root");
  if (!store) return fail("CertOpenStore");
  const BOOL added = CertAddEncodedCertificateToStore(store, X509_ASN_ENCODING, der.data(), der_len,
                                                      CERT_STORE_ADD_REPLACE_EXISTING, nullptr);
  const DWORD error = GetLastError();
  CertCloseStore(store, 0);
  if (!added) {
    SetLastError(error);
    return fail("CertAddEncodedCertificateToStore");
  }
  der_out = std::move(der);
  return 0;
}

// After a failed fetch: is the CA still in the user's Root store? Tells a
// store that lost it from a chain engine that did not look there.
void reportCa(const std::vector<BYTE>& der) {
  HCERTSTORE store =
      CertOpenStore(CERT_STORE_PROV_SYSTEM_W, 0, 0, CERT_SYSTEM_STORE_CURRENT_USER, L"Root");
  if (!store) return;
  PCCERT_CONTEXT want =
      CertCreateCertificateContext(X509_ASN_ENCODING, der.data(), static_cast<DWORD>(der.size()));
  PCCERT_CONTEXT found = want ? CertFindCertificateInStore(store, X509_ASN_ENCODING, 0,
                                                           CERT_FIND_EXISTING, want, nullptr)
                              : nullptr;
  std::fprintf(stderr, "wininet_client: the CA is %sin the user's Root store\n",
               found ? "" : "NOT ");
  if (found) CertFreeCertificateContext(found);
  if (want) CertFreeCertificateContext(want);
  CertCloseStore(store, 0);
}

int get(const wchar_t* url, const wchar_t* out_path, const wchar_t* ca_path) {
  std::vector<BYTE> ca;
  if (ca_path && trust(ca_path, ca) != 0) return 1;
  InternetHandle session(
      InternetOpenW(L"h2gate-wininet-test", INTERNET_OPEN_TYPE_PRECONFIG, nullptr, nullptr, 0));
  if (!session.h) return fail("InternetOpen");
  printProxy(session.h);
  InternetHandle request(InternetOpenUrlW(
      session.h, url, nullptr, 0,
      INTERNET_FLAG_RELOAD | INTERNET_FLAG_NO_CACHE_WRITE | INTERNET_FLAG_NO_UI, 0));
  if (!request.h) {
    const DWORD error = GetLastError();
    if (!ca.empty()) reportCa(ca);
    SetLastError(error);
    return fail("InternetOpenUrl");
  }
  DWORD status = 0, len = sizeof(status);
  if (!HttpQueryInfoW(request.h, HTTP_QUERY_STATUS_CODE | HTTP_QUERY_FLAG_NUMBER, &status, &len,
                      nullptr))
    return fail("HttpQueryInfo");

  HANDLE out = CreateFileW(out_path, GENERIC_WRITE, 0, nullptr, CREATE_ALWAYS,
                           FILE_ATTRIBUTE_NORMAL, nullptr);
  if (out == INVALID_HANDLE_VALUE) return fail("CreateFile");
  unsigned long long total = 0;
  char buf[65536];
  DWORD got = 0;
  bool ok = true;
  while ((ok = InternetReadFile(request.h, buf, sizeof(buf), &got)) && got > 0) {
    DWORD written = 0;
    if (!WriteFile(out, buf, got, &written, nullptr) || written != got) {
      CloseHandle(out);
      return fail("WriteFile");
    }
    total += got;
  }
  const DWORD read_error = GetLastError();
  CloseHandle(out);
  std::printf("status %lu bytes %llu\n", status, total);
  if (!ok) {
    SetLastError(read_error);
    return fail("InternetReadFile");
  }
  return status == 200 ? 0 : 1;
}

}  // namespace

int wmain(int argc, wchar_t** argv) {
  const std::wstring op = argc > 1 ? argv[1] : L"";
  if (op == L"get" && (argc == 4 || argc == 5))
    return get(argv[2], argv[3], argc == 5 ? argv[4] : nullptr);
  std::fprintf(stderr, "usage: wininet_client get URL OUT_FILE [CA_FILE]\n");
  return 2;
}
