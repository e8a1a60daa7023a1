#include "tests/support/auth_proxy.h"

#include <unistd.h>

#include <chrono>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/h2gate.h"
#include "tests/support/origin.h"
#include "tests/support/util.h"

namespace h2gate::test {

std::string authProxyMissing() {
  if (access(kTestVenvPython, X_OK) != 0)
    return std::string(kTestVenvPython) + " (deploy/install-deps.sh --test)";
  if (runCommand({kTestVenvPython, "-c", "import spnego, gssapi"}).exit_code != 0)
    return "pyspnego and gssapi in the test venv (deploy/install-deps.sh --test)";
  return "";
}

AuthProxy::AuthProxy(Options options) : options_(std::move(options)), dir_("authproxy") {
  if (const std::string missing = authProxyMissing(); !missing.empty())
    throw std::runtime_error("the auth test proxy needs " + missing);
  std::string users;
  for (const auto& u : options_.ntlm_users) users += u + "\n";
  const std::string users_file = dir_.write("ntlm_users", users);
  Process::Options opts;
  opts.argv = {kTestVenvPython,
               supportDir() + "/auth_proxy.py",
               "--port-file",
               dir_.file("port"),
               "--log",
               dir_.file("requests.log"),
               "--schemes",
               options_.schemes,
               "--mutual",
               options_.mutual,
               "--ntlm-acceptor",
               options_.ntlm_acceptor,
               "--challenge-framing",
               options_.challenge_framing};
  if (options_.one_line) opts.argv.push_back("--one-line");
  if (!options_.basic.empty()) opts.argv.insert(opts.argv.end(), {"--basic", options_.basic});
  if (!options_.tls_cert.empty())
    opts.argv.insert(opts.argv.end(), {"--tls", options_.tls_cert, options_.tls_key});
  if (!options_.alpn.empty()) opts.argv.insert(opts.argv.end(), {"--alpn", options_.alpn});
  if (!options_.hosts.empty()) {
    std::string names;
    for (const auto& h : options_.hosts) names += (names.empty() ? "" : ",") + h;
    opts.argv.insert(opts.argv.end(), {"--hosts", names});
  }
  opts.env["NTLM_USER_FILE"] = users_file;
  if (!options_.keytab.empty()) opts.env["KRB5_KTNAME"] = options_.keytab;
  if (!options_.krb5_conf.empty()) opts.env["KRB5_CONFIG"] = options_.krb5_conf;
  opts.log_dir = dir_.path().string();
  opts.name = "auth_proxy";
  process_ = std::make_unique<Process>(std::move(opts));
  const auto deadline = std::chrono::steady_clock::now() + kPeerStartTimeout;
  while (std::chrono::steady_clock::now() < deadline && process_->running()) {
    const std::string p = readFile(dir_.file("port"));
    if (!p.empty()) {
      port_ = static_cast<uint16_t>(std::stoi(p));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("auth_proxy.py did not start:\n" + process_->logTail());
}

AuthProxy::~AuthProxy() {
  if (process_) process_->stop(std::chrono::milliseconds(2000));
}

std::string AuthProxy::logText() const {
  return readFile(dir_.file("requests.log")) + process_->logTail(10);
}

std::vector<std::map<std::string, std::string>> AuthProxy::requests() const {
  std::vector<std::map<std::string, std::string>> out;
  std::istringstream in(readFile(dir_.file("requests.log")));
  std::string line;
  while (std::getline(in, line))
    if (auto o = parseJsonObject(line)) out.push_back(std::move(*o));
  return out;
}

std::string authConfigYaml(const std::string& host, uint16_t port, const std::string& ca,
                           const std::string& auth, const std::string& cluster_extra) {
  std::string y = directModeYaml() +
                  "        typed_config: {cluster: proxy}\n"
                  "  clusters:\n"
                  "  - name: proxy\n" +
                  cluster_extra;
  if (!auth.empty()) y += "    proxy_authentication:\n" + auth;
  y += "    load_assignment:\n"
       "      endpoints:\n"
       "      - lb_endpoints:\n"
       "        - endpoint: {address: {socket_address: {address: " +
       host + ", port_value: " + std::to_string(port) + "}}}\n";
  if (!ca.empty())
    y += "    transport_socket:\n"
         "      name: envoy.transport_sockets.tls\n"
         "      typed_config:\n"
         "        common_tls_context:\n"
         "          validation_context: {trusted_ca: {filename: " +
         ca + "}}\n";
  return y;
}

}  // namespace h2gate::test
