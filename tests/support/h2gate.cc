#include "tests/support/h2gate.h"

#include <cctype>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/support/util.h"

namespace h2gate::test {

std::string AccessLogEntry::get(const std::string& key) const {
  auto it = fields.find(key);
  return it == fields.end() ? "" : it->second;
}

long long AccessLogEntry::num(const std::string& key) const {
  auto it = fields.find(key);
  if (it == fields.end() || it->second.empty()) return -1;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  return *end == '\0' ? v : -1;
}

std::optional<std::map<std::string, std::string>> parseJsonObject(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  auto ws = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto str = [&](std::string& s) -> bool {
    if (i >= text.size() || text[i] != '"') return false;
    ++i;
    while (i < text.size() && text[i] != '"') {
      char c = text[i++];
      if (c != '\\') {
        s += c;
        continue;
      }
      if (i >= text.size()) return false;
      char e = text[i++];
      switch (e) {
        case 'n':
          s += '\n';
          break;
        case 't':
          s += '\t';
          break;
        case 'r':
          s += '\r';
          break;
        case 'b':
          s += '\b';
          break;
        case 'f':
          s += '\f';
          break;
        case 'u': {
          if (i + 4 > text.size()) return false;
          unsigned cp = static_cast<unsigned>(std::stoul(text.substr(i, 4), nullptr, 16));
          i += 4;
          if (cp < 0x80) {
            s += static_cast<char>(cp);
          } else {
            s += '?';  // good enough for tests
          }
          break;
        }
        default:
          s += e;
      }
    }
    if (i >= text.size()) return false;
    ++i;
    return true;
  };
  ws();
  if (i >= text.size() || text[i] != '{') return std::nullopt;
  ++i;
  ws();
  if (i < text.size() && text[i] == '}') return out;
  for (;;) {
    ws();
    std::string key, value;
    if (!str(key)) return std::nullopt;
    ws();
    if (i >= text.size() || text[i] != ':') return std::nullopt;
    ++i;
    ws();
    if (i < text.size() && text[i] == '"') {
      if (!str(value)) return std::nullopt;
    } else {
      size_t start = i;
      while (i < text.size() && text[i] != ',' && text[i] != '}' &&
             !std::isspace(static_cast<unsigned char>(text[i])))
        ++i;
      value = text.substr(start, i - start);
      if (value.empty() || value == "{" || value == "[") return std::nullopt;
    }
    out[key] = value;
    ws();
    if (i < text.size() && text[i] == ',') {
      ++i;
      continue;
    }
    if (i < text.size() && text[i] == '}') return out;
    return std::nullopt;
  }
}

std::string H2gate::binaryPath(const std::string& configured) {
  if (const char* env = std::getenv("H2GATE_TEST_BINARY"); env && *env) return env;
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("H2GATE_BINARY"); env && *env) return env;
  return "h2gate";
}

std::string H2gate::pacProbePath(const std::string& configured) {
  if (const char* env = std::getenv("H2GATE_TEST_PAC_PROBE"); env && *env) return env;
  return configured;
}

H2gate::H2gate() : H2gate(Options{}) {}

H2gate::H2gate(Options options) : check_clean_exit_(options.check_clean_exit), dir_("h2gate") {
  std::vector<std::string> argv{binaryPath(options.binary)};
  if (!options.yaml.empty()) {
    argv.push_back("-c");
    argv.push_back(dir_.write("h2gate.yaml", options.yaml));
  }
  if (options.yaml.empty() && options.args.empty()) {
    for (const char* a :
         {"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-level", "debug"})
      argv.push_back(a);
  }
  argv.insert(argv.end(), options.args.begin(), options.args.end());
  if (!options.hosts.empty() || !options.resolv_conf.empty()) {
    // Same pid throughout (unshare and sh exec), so signals reach h2gate.
    const std::string hosts = dir_.write("hosts", "127.0.0.1 localhost\n" + options.hosts);
    const std::string resolv =
        options.resolv_conf.empty() ? "" : dir_.write("resolv.conf", options.resolv_conf);
    argv.insert(argv.begin(),
                {"unshare", "-m", "sh", "-c",
                 "mount --bind \"$0\" /etc/hosts && "
                 "{ [ -z \"$1\" ] || mount --bind \"$1\" /etc/resolv.conf; } && shift && "
                 "exec \"$@\"",
                 hosts, resolv});
  }

  Process::Options popts;
  popts.argv = argv;
  popts.env = options.env;
  popts.env.emplace("H2GATE_UPSTREAM", std::nullopt);
  popts.log_dir = dir_.path().string();
  popts.name = "h2gate";
  process_ = std::make_unique<Process>(std::move(popts));

  const std::string addr = R"(([0-9.]+|\[[0-9a-f:]+\]))";  // group 1
  auto fail = [&](const std::string& what) {
    std::string tail = process_->logTail(60);
    process_->stop(milliseconds(1000));
    throw std::runtime_error("h2gate: " + what + "\n" + tail);
  };
  std::vector<std::string> wanted = options.listeners;
  if (wanted.empty()) wanted.push_back("");
  for (const auto& name : wanted) {
    std::string re = "listening on " + addr + ":([0-9]+) \\(listener (" +
                     (name.empty() ? std::string("[^)]+") : name) + ")\\)";
    auto m = process_->waitForLog(re, options.start_timeout);
    if (!m) fail("no 'listening on ... (listener " + name + ")' line");
    uint16_t port = static_cast<uint16_t>(std::stoi((*m)[2]));
    ports_[(*m)[3]] = port;
    if (first_listener_.empty()) first_listener_ = (*m)[3];
  }
  if (options.expect_admin) {
    auto m =
        process_->waitForLog("admin listening on " + addr + ":([0-9]+)", options.start_timeout);
    if (!m) fail("no 'admin listening on' line");
    admin_port_ = static_cast<uint16_t>(std::stoi((*m)[2]));
  }
}

H2gate::~H2gate() {
  if (!process_) return;
  if (!check_clean_exit_ || process_->status()) {
    // Reaped by the test already, or not checked: only report sanitizers.
    if (process_->status()) CHECK(sanitizerReport() == "");
    return;
  }
  process_->signalMain(SIGTERM);
  // A hang is what this catches (how long draining may take, the drain and
  // stop tests check): under AddressSanitizer the exit's leak check scans the
  // whole heap, which after two reloads of a 20,000-host acl took more than
  // 10 s on a loaded machine ("all connections closed; exiting", then killed).
  auto status = process_->wait(milliseconds(60000));
  if (!status) status = process_->stop(milliseconds(100));
  INFO("h2gate at the end of the test: " << status->str() << "\n" << process_->logTail(30));
  CHECK(status->exited);
  CHECK(status->code == 0);
  CHECK(sanitizerReport() == "");
}

std::string H2gate::sanitizerReport() const {
  std::string err = process_->stderrText();
  // The last one is h2gate's own (gateway/upstream/phase.h): logged in the
  // release build, where it does not stop the process.
  for (const char* marker : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                             "WARNING: ThreadSanitizer", "illegal phase transition"}) {
    size_t pos = err.find(marker);
    if (pos != std::string::npos) {
      size_t start = err.rfind('\n', pos);
      return err.substr(start == std::string::npos ? 0 : start + 1, 4000);
    }
  }
  return "";
}

bool H2gate::sanitized() const {
  const std::string proc = "/proc/" + std::to_string(process_->pid());
  std::ifstream maps(proc + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("/libasan.so") != std::string::npos) return true;
  }
  // clang links the runtime in: its entry point's name is in the executable.
  std::ifstream exe(proc + "/exe", std::ios::binary);
  const std::string needle = "__asan_init";
  std::string chunk(1 << 20, '\0'), tail;
  while (exe) {
    exe.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const std::string window = tail + chunk.substr(0, static_cast<size_t>(exe.gcount()));
    if (window.find(needle) != std::string::npos) return true;
    tail = window.size() >= needle.size() ? window.substr(window.size() - needle.size()) : window;
  }
  return false;
}

uint16_t H2gate::port(const std::string& listener) const {
  auto it = ports_.find(listener.empty() ? first_listener_ : listener);
  if (it == ports_.end()) throw std::out_of_range("no listener " + listener);
  return it->second;
}

std::string H2gate::proxyUrl(const std::string& listener) const {
  return "http://127.0.0.1:" + std::to_string(port(listener));
}

std::vector<AccessLogEntry> H2gate::accessLog() const {
  std::vector<AccessLogEntry> out;
  std::istringstream in(process_->stdoutText());
  std::string line;
  while (std::getline(in, line)) {
    if (auto obj = parseJsonObject(line)) out.push_back({std::move(*obj), line});
  }
  return out;
}

std::vector<AccessLogEntry> H2gate::waitForAccessLog(size_t n, milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto entries = accessLog();
    if (entries.size() >= n || std::chrono::steady_clock::now() >= deadline) return entries;
    std::this_thread::sleep_for(milliseconds(20));
  }
}

ExitStatus H2gate::terminate(milliseconds timeout) {
  process_->signalMain(SIGTERM);
  if (auto s = process_->wait(timeout)) return *s;
  return process_->stop(milliseconds(100));
}

std::string directModeYaml(const std::string& h2gate_section, const std::string& listener_fields) {
  std::string y;
  if (!h2gate_section.empty()) y += "h2gate:\n" + h2gate_section;
  y += "admin:\n"
       "  address:\n"
       "    socket_address: {address: 127.0.0.1, port_value: 0}\n"
       "static_resources:\n"
       "  listeners:\n";
  y += listenerYaml("local_proxy", "      - name: h2gate.filters.forward_proxy\n", listener_fields);
  return y;
}

std::string listenerYaml(const std::string& name, const std::string& filters,
                         const std::string& listener_fields) {
  return "  - name: " + name +
         "\n"
         "    address:\n"
         "      socket_address: {address: 127.0.0.1, port_value: 0}\n" +
         listener_fields +
         "    filter_chains:\n"
         "    - filters:\n"
         "      - name: h2gate.filters.access_log\n" +
         filters;
}

}  // namespace h2gate::test
