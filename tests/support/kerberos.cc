#include "tests/support/kerberos.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/net.h"
#include "tests/support/util.h"

namespace h2gate::test {

namespace {

std::string firstExisting(const std::vector<std::string>& paths) {
  for (const auto& p : paths)
    if (access(p.c_str(), X_OK) == 0) return p;
  return "";
}

std::string krb5kdcBinary() {
  const std::string found = findProgram("krb5kdc");
  return found.empty() ? firstExisting({"/usr/sbin/krb5kdc"}) : found;
}

std::string sbin(const std::string& name) {
  const std::string found = findProgram(name);
  return found.empty() ? firstExisting({"/usr/sbin/" + name}) : found;
}

}  // namespace

bool hasGssToken(const std::string& text) {
  return regexSearch(text, "YII[A-Za-z0-9+/]{20,}").has_value();
}

std::string kerberosToolsMissing() {
  std::string out;
  if (krb5kdcBinary().empty()) out += " krb5kdc (krb5-kdc)";
  if (sbin("kdb5_util").empty()) out += " kdb5_util (krb5-kdc)";
  if (sbin("kadmin.local").empty()) out += " kadmin.local (krb5-admin-server)";
  if (findProgram("kinit").empty()) out += " kinit (krb5-user)";
  return out;
}

Kdc::Kdc(std::string realm) : realm_(std::move(realm)), dir_("kdc") {
  if (const std::string missing = kerberosToolsMissing(); !missing.empty())
    throw std::runtime_error("Kerberos tools missing:" + missing);
  // Readable by other users: squid's Kerberos helper runs as squid's user
  // and reads this krb5.conf (the keytabs it needs are copied for it).
  ::chmod(dir_.path().c_str(), 0755);
  const std::string d = dir_.path().string();
  std::string last_error;
  for (int attempt = 0; attempt < 4; ++attempt) {
    port_ = freePort();
    const std::string p = std::to_string(port_);
    dir_.write("kdc.conf", "[kdcdefaults]\n kdc_ports = " + p + "\n kdc_tcp_ports = " + p +
                               "\n[realms]\n " + realm_ + " = {\n  database_name = " + d +
                               "/principal\n  key_stash_file = " + d + "/stash\n  acl_file = " + d +
                               "/kadm5.acl\n  max_life = 10h\n  max_renewable_life = 1d\n" +
                               "  supported_enctypes = aes256-cts-hmac-sha1-96:normal\n }\n" +
                               "[logging]\n kdc = FILE:" + d + "/kdc.log\n");
    dir_.write("krb5.conf", "[libdefaults]\n default_realm = " + realm_ +
                                "\n dns_lookup_kdc = false\n dns_lookup_realm = false\n"
                                " dns_canonicalize_hostname = false\n rdns = false\n"
                                " udp_preference_limit = 1\n[realms]\n " +
                                realm_ + " = {\n  kdc = 127.0.0.1:" + p +
                                "\n }\n[domain_realm]\n localhost = " + realm_ +
                                "\n .localhost = " + realm_ + "\n");
    ::chmod(krb5Conf().c_str(), 0644);
    if (!std::filesystem::exists(d + "/principal")) {
      const CommandResult made =
          runCommand({sbin("kdb5_util"), "create", "-s", "-r", realm_, "-P", "h2gate-test-master"},
                     env(), milliseconds(60000));
      if (made.exit_code != 0)
        throw std::runtime_error("kdb5_util create failed: " + made.out + made.err);
    }
    std::filesystem::remove(d + "/kdc.log");
    Process::Options opts;
    opts.argv = {krb5kdcBinary(), "-n", "-P", d + "/kdc.pid"};
    opts.env = env();
    opts.log_dir = d;
    opts.name = "krb5kdc";
    process_ = std::make_unique<Process>(std::move(opts));
    // The KDC listens on TCP too: ready once that port answers.
    if (waitForPort(port_, kPeerStartTimeout)) return;
    last_error = log() + process_->logTail();
    process_->stop(milliseconds(2000));
    process_.reset();
  }
  throw std::runtime_error("krb5kdc did not start:\n" + last_error);
}

Kdc::~Kdc() {
  if (process_) process_->stop(milliseconds(2000));
}

std::string Kdc::log() const {
  return readFile(dir_.file("kdc.log"));
}

size_t Kdc::asRequests(const std::string& principal, const std::string& result) const {
  size_t n = 0;
  std::istringstream in(log());
  for (std::string line; std::getline(in, line);)
    if (line.find("AS_REQ") != std::string::npos && line.find(result + ": ") != std::string::npos &&
        line.find(principal + "@" + realm_ + " for krbtgt/") != std::string::npos)
      ++n;
  return n;
}

std::map<std::string, std::optional<std::string>> Kdc::env(const std::string& ccache) const {
  std::map<std::string, std::optional<std::string>> e{
      {"KRB5_CONFIG", krb5Conf()},   {"KRB5_KDC_PROFILE", dir_.file("kdc.conf")},
      {"KRB5_KTNAME", std::nullopt}, {"KRB5_CLIENT_KTNAME", std::nullopt},
      {"KRB5CCNAME", std::nullopt},
  };
  if (!ccache.empty()) e["KRB5CCNAME"] = ccache;
  return e;
}

std::string Kdc::kadmin(const std::string& query) {
  const CommandResult r =
      runCommand({sbin("kadmin.local"), "-r", realm_, "-q", query}, env(), milliseconds(30000));
  if (r.exit_code != 0 || r.err.find("rror") != std::string::npos)
    throw std::runtime_error("kadmin.local -q '" + query + "' failed: " + r.out + r.err);
  return r.out;
}

void Kdc::addPrincipal(const std::string& name, const std::string& password) {
  kadmin("addprinc -pw " + password + " " + name);
}

void Kdc::addRandomKey(const std::string& name) {
  kadmin("addprinc -randkey " + name);
}

void Kdc::modifyPrincipal(const std::string& name, const std::string& options) {
  kadmin("modprinc " + options + " " + name);
}

void Kdc::changePassword(const std::string& name, const std::string& password) {
  kadmin("cpw -pw " + password + " " + name);
}

std::string Kdc::keytab(const std::string& file_name, const std::vector<std::string>& principals) {
  const std::string path = dir_.file(file_name);
  for (const auto& p : principals) kadmin("ktadd -k " + path + " " + p);
  return path;
}

std::string Kdc::kinit(const std::string& principal, const std::string& password,
                       const std::string& lifetime) {
  const std::string cache = "FILE:" + dir_.file("cc" + std::to_string(caches_++));
  const std::string pwfile = dir_.write("kinit.pw", password + "\n");
  std::vector<std::string> argv{"sh", "-c", "kinit \"$@\" < " + pwfile, "kinit"};
  if (!lifetime.empty()) argv.insert(argv.end(), {"-l", lifetime});
  argv.push_back(principal);
  const CommandResult r = runCommand(argv, env(cache), milliseconds(30000));
  std::filesystem::remove(pwfile);
  if (r.exit_code != 0) throw std::runtime_error("kinit " + principal + " failed: " + r.err);
  return cache;
}

ScopedKrb5Env::ScopedKrb5Env(const Kdc& kdc, const std::string& ccache) {
  for (const auto& [k, v] : kdc.env(ccache)) {
    const char* old = std::getenv(k.c_str());
    old_[k] = old ? std::optional<std::string>(old) : std::nullopt;
    if (v)
      ::setenv(k.c_str(), v->c_str(), 1);
    else
      ::unsetenv(k.c_str());
  }
}

ScopedKrb5Env::~ScopedKrb5Env() {
  for (const auto& [k, v] : old_) {
    if (v)
      ::setenv(k.c_str(), v->c_str(), 1);
    else
      ::unsetenv(k.c_str());
  }
}

}  // namespace h2gate::test
