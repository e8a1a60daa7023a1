// The Windows builds of h2gate's libraries, checked together under wine. Built by
// the top-level CMake project with cmake/mingw-w64.cmake against the sysroot of
// deploy/windows/build-deps.sh (OpenSSL, nghttp2, yaml-cpp, prometheus-cpp core)
// plus Debian's Asio and llhttp, the same find_package/pkg_check_modules targets as
// the Linux build. tests/windows/deps_test.sh starts the Linux peers (nginx, and
// nghttpx in front of it), proves them with curl, runs this under wine and checks
// what it printed against the peers' logs.
//
//   h2gate_windows_deps_test --h1=IP:PORT --h2=IP:PORT --host=NAME --cafile=PATH
//       --path=/FILE --sha256=HEX --yaml=PATH --metrics-out=PATH
//
// Checks, each printed as "ok: ..." or "FAIL: ...":
//  - Asio + llhttp: GET PATH over HTTP/1.1 from --h1 (nginx), the body's SHA-256;
//  - Asio + OpenSSL + nghttp2: a TLS connection to --h2 (nghttpx), verified against
//    --cafile with --host as the name, TLS 1.3, ALPN h2, then GET PATH as an HTTP/2
//    stream: status 200 and the body's SHA-256;
//  - yaml-cpp: --yaml (tests/windows/deps_test.yaml) has the values below, and a
//    broken document throws a ParserException with its line and column (C++
//    exceptions across the static libraries);
//  - prometheus-cpp: a registry with a counter per check, serialized to
//    --metrics-out in the text format (deps_test.sh runs promtool on it).
// Exit status 0 when every check passed, 1 otherwise, 2 on bad arguments.
#include <llhttp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <yaml-cpp/yaml.h>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct Args {
  std::string h1, h2, host, cafile, path, sha256, yaml, metrics_out;
};

int failures = 0;

void ok(const std::string& what) {
  std::printf("ok: %s\n", what.c_str());
}
void fail(const std::string& what) {
  std::printf("FAIL: %s\n", what.c_str());
  ++failures;
}

std::string sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1) return "?";
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

std::string opensslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += out.empty() ? "" : "; ";
    out += buf;
  }
  return out;
}

asio::ip::tcp::endpoint endpointOf(const std::string& ip_port) {
  const auto colon = ip_port.rfind(':');
  return {asio::ip::make_address(ip_port.substr(0, colon)),
          static_cast<unsigned short>(std::stoi(ip_port.substr(colon + 1)))};
}

// ------------------------------------------------------- HTTP/1.1 + llhttp ----

struct H1Response {
  std::string status_text, body;
  int status = 0;
  bool complete = false;
};

void checkHttp1(const Args& a) {
  asio::io_context io;
  asio::ip::tcp::socket sock(io);
  asio::error_code ec;
  sock.connect(endpointOf(a.h1), ec);
  if (ec) return fail("http1: connect to " + a.h1 + ": " + ec.message());
  const std::string req = "GET " + a.path + " HTTP/1.1\r\nHost: " + a.host +
                          "\r\nUser-Agent: h2gate-windows-deps-test\r\nConnection: close\r\n\r\n";
  asio::write(sock, asio::buffer(req), ec);
  if (ec) return fail("http1: write: " + ec.message());

  llhttp_settings_t settings;
  llhttp_settings_init(&settings);
  settings.on_body = [](llhttp_t* p, const char* at, size_t n) {
    static_cast<H1Response*>(p->data)->body.append(at, n);
    return 0;
  };
  settings.on_message_complete = [](llhttp_t* p) {
    auto* r = static_cast<H1Response*>(p->data);
    r->status = p->status_code;
    r->complete = true;
    return 0;
  };
  llhttp_t parser;
  llhttp_init(&parser, HTTP_RESPONSE, &settings);
  H1Response resp;
  parser.data = &resp;
  std::vector<char> buf(64 * 1024);
  while (!resp.complete) {
    const size_t n = sock.read_some(asio::buffer(buf), ec);
    if (ec == asio::error::eof) break;
    if (ec) return fail("http1: read: " + ec.message());
    const llhttp_errno_t err = llhttp_execute(&parser, buf.data(), n);
    if (err != HPE_OK)
      return fail(std::string("http1: llhttp: ") + llhttp_errno_name(err) + " " +
                  llhttp_get_error_reason(&parser));
  }
  if (!resp.complete) return fail("http1: connection closed before the response was complete");
  const std::string sum = sha256Hex(resp.body);
  if (resp.status != 200 || sum != a.sha256)
    return fail("http1: GET " + a.path + " status " + std::to_string(resp.status) + ", " +
                std::to_string(resp.body.size()) + " bytes, sha256 " + sum);
  ok("http1 (Asio, llhttp): GET " + a.path + " status 200, " + std::to_string(resp.body.size()) +
     " bytes, sha256 " + sum);
}

// ------------------------------------------------- TLS + HTTP/2 (nghttp2) ----

struct H2State {
  int32_t stream_id = -1;
  std::string status, body;
  bool closed = false;
  uint32_t close_error = 0;
};

int onHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
             const uint8_t* value, size_t valuelen, uint8_t, void* user) {
  auto* s = static_cast<H2State*>(user);
  if (frame->hd.stream_id == s->stream_id &&
      std::string_view(reinterpret_cast<const char*>(name), namelen) == ":status")
    s->status.assign(reinterpret_cast<const char*>(value), valuelen);
  return 0;
}

int onData(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data, size_t len,
           void* user) {
  auto* s = static_cast<H2State*>(user);
  if (stream_id == s->stream_id) s->body.append(reinterpret_cast<const char*>(data), len);
  return 0;
}

int onStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user) {
  auto* s = static_cast<H2State*>(user);
  if (stream_id == s->stream_id) {
    s->closed = true;
    s->close_error = error_code;
  }
  return 0;
}

nghttp2_nv header(std::string_view name, std::string_view value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

using TlsStream = asio::ssl::stream<asio::ip::tcp::socket>;

// Writes everything nghttp2 has queued.
bool flushSession(nghttp2_session* session, TlsStream& tls, std::string& error) {
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session, &data);
    if (n < 0) {
      error = std::string("nghttp2_session_mem_send: ") + nghttp2_strerror(static_cast<int>(n));
      return false;
    }
    if (n == 0) return true;
    asio::error_code ec;
    asio::write(tls, asio::buffer(data, static_cast<size_t>(n)), ec);
    if (ec) {
      error = "TLS write: " + ec.message();
      return false;
    }
  }
}

void checkTlsHttp2(const Args& a) {
  asio::io_context io;
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  asio::error_code ec;
  ctx.load_verify_file(a.cafile, ec);
  if (ec) return fail("tls: loading the CA file " + a.cafile + ": " + ec.message());
  ctx.set_verify_mode(asio::ssl::verify_peer);
  static const unsigned char alpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx.native_handle(), alpn, sizeof alpn);

  TlsStream tls(io, ctx);
  SSL* ssl = tls.native_handle();
  SSL_set_tlsext_host_name(ssl, a.host.c_str());
  SSL_set1_host(ssl, a.host.c_str());  // the certificate must name --host
  tls.lowest_layer().connect(endpointOf(a.h2), ec);
  if (ec) return fail("tls: connect to " + a.h2 + ": " + ec.message());
  tls.handshake(asio::ssl::stream_base::client, ec);
  if (ec) {
    const long vr = SSL_get_verify_result(ssl);
    return fail("tls: handshake with " + a.h2 + ": " + ec.message() +
                (vr != X509_V_OK ? std::string(" (") + X509_verify_cert_error_string(vr) + ")"
                                 : std::string()) +
                " " + opensslErrors());
  }
  const unsigned char* proto = nullptr;
  unsigned int proto_len = 0;
  SSL_get0_alpn_selected(ssl, &proto, &proto_len);
  const std::string alpn_selected(reinterpret_cast<const char*>(proto), proto_len);
  const std::string version = SSL_get_version(ssl);
  if (SSL_get_verify_result(ssl) != X509_V_OK || SSL_version(ssl) != TLS1_3_VERSION ||
      alpn_selected != "h2")
    return fail("tls: " + version + ", ALPN '" + alpn_selected + "', verify result " +
                std::to_string(SSL_get_verify_result(ssl)));
  ok("tls (OpenSSL " + std::string(OPENSSL_FULL_VERSION_STR) + "): " + version + ", ALPN " +
     alpn_selected + ", certificate verified for " + a.host + ", cipher " + SSL_get_cipher(ssl));

  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_header_callback(cbs, onHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, onData);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, onStreamClose);
  H2State state;
  nghttp2_session* session = nullptr;
  nghttp2_session_client_new(&session, cbs, &state);
  nghttp2_session_callbacks_del(cbs);

  const std::string authority = a.host + a.h2.substr(a.h2.rfind(':'));
  nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, nullptr, 0);
  const nghttp2_nv hdrs[] = {header(":method", "GET"), header(":scheme", "https"),
                             header(":authority", authority), header(":path", a.path),
                             header("user-agent", "h2gate-windows-deps-test")};
  state.stream_id =
      nghttp2_submit_request(session, nullptr, hdrs, sizeof hdrs / sizeof hdrs[0], nullptr, &state);
  std::string error;
  if (state.stream_id < 0)
    error = "nghttp2_submit_request: " + std::string(nghttp2_strerror(state.stream_id));
  std::vector<uint8_t> buf(64 * 1024);
  while (error.empty() && !state.closed) {
    if (!flushSession(session, tls, error)) break;
    const size_t n = tls.read_some(asio::buffer(buf), ec);
    if (ec) {
      error = "TLS read: " + ec.message();
      break;
    }
    const ssize_t rv = nghttp2_session_mem_recv(session, buf.data(), n);
    if (rv < 0)
      error = std::string("nghttp2_session_mem_recv: ") + nghttp2_strerror(static_cast<int>(rv));
  }
  if (error.empty()) {
    nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR);  // GOAWAY
    flushSession(session, tls, error);
  }
  nghttp2_session_del(session);
  tls.shutdown(ec);  // close_notify; the peer may already have closed

  if (!error.empty()) return fail("http2: " + error);
  const std::string sum = sha256Hex(state.body);
  if (state.status != "200" || state.close_error != NGHTTP2_NO_ERROR || sum != a.sha256)
    return fail("http2: GET " + a.path + " status '" + state.status + "', stream closed with " +
                nghttp2_http2_strerror(state.close_error) + ", " +
                std::to_string(state.body.size()) + " bytes, sha256 " + sum);
  ok("http2 (nghttp2 " + std::string(nghttp2_version(0)->version_str) + "): GET https://" +
     authority + a.path + " stream " + std::to_string(state.stream_id) + " status 200, " +
     std::to_string(state.body.size()) + " bytes, sha256 " + sum);
}

// -------------------------------------------------------------- yaml-cpp ----

void checkYaml(const Args& a) {
  try {
    // tests/windows/deps_test.yaml
    const YAML::Node doc = YAML::LoadFile(a.yaml);
    const YAML::Node listener = doc["listeners"][0];
    const std::string name = doc["name"].as<std::string>();
    const int port = listener["port"].as<int>();
    const std::string address = listener["address"].as<std::string>();
    const std::string idn = doc["hosts"][1].as<std::string>();
    if (name != "h2gate" || port != 3128 || address != "127.0.0.1" || idn != "bücher.example")
      return fail("yaml: " + a.yaml + ": name '" + name + "', port " + std::to_string(port) +
                  ", address '" + address + "', hosts[1] '" + idn + "'");
    ok("yaml (yaml-cpp): " + a.yaml + ": name " + name + ", listener " + address + ":" +
       std::to_string(port) + ", hosts[1] " + idn);
  } catch (const YAML::Exception& e) {
    return fail("yaml: " + a.yaml + ": " + e.what());
  }
  // An unclosed flow sequence: yaml-cpp (Linux, same version) reports line 2,
  // column 6 ("end of sequence flow not found"); marks are 0-based.
  try {
    YAML::Load("listeners: [1, 2\nadmin: {port: 9901}\n");
    fail("yaml: a broken document parsed without an error");
  } catch (const YAML::ParserException& e) {
    if (e.mark.line != 1 || e.mark.column != 5)
      return fail("yaml: broken document: error at line " + std::to_string(e.mark.line + 1) +
                  ", column " + std::to_string(e.mark.column + 1) + ", expected 2:6: " + e.what());
    ok("yaml: broken document rejected at line " + std::to_string(e.mark.line + 1) + ", column " +
       std::to_string(e.mark.column + 1) + " (" + e.msg + ")");
  }
}

// -------------------------------------------------------- prometheus-cpp ----

void writeMetrics(const Args& a, const std::map<std::string, int>& passed) {
  prometheus::Registry registry;
  auto& checks = prometheus::BuildCounter()
                     .Name("h2gate_windows_deps_checks_total")
                     .Help("Checks of the Windows dependency build that passed.")
                     .Register(registry);
  for (const auto& [check, n] : passed) checks.Add({{"check", check}}).Increment(n);
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  std::ofstream out(a.metrics_out, std::ios::binary);
  out << text;
  out.close();
  const std::string want = "h2gate_windows_deps_checks_total{check=\"yaml\"} " +
                           std::to_string(passed.count("yaml") ? passed.at("yaml") : 0);
  if (!out || text.find(want) == std::string::npos)
    return fail("prometheus: " + a.metrics_out + " lacks '" + want + "':\n" + text);
  ok("prometheus (prometheus-cpp core): " + std::to_string(text.size()) +
     " bytes of text format in " + a.metrics_out);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  const std::map<std::string, std::string*> flags = {
      {"--h1", &a.h1},     {"--h2", &a.h2},
      {"--host", &a.host}, {"--cafile", &a.cafile},
      {"--path", &a.path}, {"--sha256", &a.sha256},
      {"--yaml", &a.yaml}, {"--metrics-out", &a.metrics_out}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    const auto it = flags.find(arg.substr(0, eq));
    if (eq == std::string::npos || it == flags.end()) {
      std::fprintf(stderr, "unknown argument '%s'\n", arg.c_str());
      return 2;
    }
    *it->second = arg.substr(eq + 1);
  }
  for (const auto& [flag, value] : flags) {
    if (value->empty()) {
      std::fprintf(stderr, "missing %s=...\n", flag.c_str());
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IONBF, 0);

  std::map<std::string, int> passed;
  int before = failures;
  checkHttp1(a);
  if (failures == before) passed["http1"] = 1;
  before = failures;
  checkTlsHttp2(a);
  if (failures == before) passed["http2"] = 1;
  before = failures;
  checkYaml(a);
  if (failures == before) passed["yaml"] = 2;
  writeMetrics(a, passed);
  std::printf("%s: %d check(s) failed\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
