#include "gateway/pac_engine/source.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "gateway/base/log.h"
#include "gateway/pac_engine/system_proxy.h"
#include "gateway/pac_engine/wpad.h"

namespace h2gate::pac {
namespace {

std::string timeText(std::chrono::system_clock::time_point t) {
  return log::utcSeconds(t);
}

constexpr std::string_view kDirectPac =
    "// Made by h2gate: the system proxy setting is \"no proxy\".\n"
    "function FindProxyForURL(url, host) { return \"DIRECT\"; }\n";

}  // namespace

const char* kindName(PacSourceConfig::Kind kind) {
  switch (kind) {
    case PacSourceConfig::Kind::File:
      return "file";
    case PacSourceConfig::Kind::Url:
      return "url";
    case PacSourceConfig::Kind::Wpad:
      return "wpad";
    case PacSourceConfig::Kind::System:
      return "system";
  }
  return "unknown";
}

PacSource::PacSource(PacSourceConfig config, asio::any_io_executor owner, OnScript on_script)
    : config_(std::move(config)),
      owner_(std::move(owner)),
      on_script_(std::move(on_script)),
      work_(io_.get_executor()),
      timer_(io_) {
  thread_ = std::thread([this] { io_.run(); });
}

PacSource::~PacSource() {
  alive_->store(false);
  asio::post(io_, [this] {
    timer_.cancel();
    if (fetch_) fetch_->cancel();
    work_.reset();
  });
  // Pending downloads end with "cancelled" on this thread; then it stops.
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

void PacSource::start() {
  asio::post(io_, [this] { attempt(); });
}

void PacSource::refreshNow() {
  asio::post(io_, [this] {
    if (!running_) attempt();
  });
}

PacSourceStatus PacSource::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

void PacSource::schedule(std::chrono::milliseconds after) {
  if (after.count() <= 0) return;
  timer_.expires_after(after);
  timer_.async_wait([this](const asio::error_code& ec) {
    if (!ec && !running_) attempt();
  });
}

void PacSource::attempt() {
  running_ = true;
  timer_.cancel();
  {
    std::lock_guard lock(mutex_);
    ++status_.attempts;
    status_.attempted_at = std::chrono::system_clock::now();
  }
  switch (config_.kind) {
    case PacSourceConfig::Kind::File: {
      std::ifstream in(config_.location, std::ios::binary);
      if (!in) return fail("cannot open " + config_.location + ": " + std::strerror(errno));
      std::string text;
      char buf[64 * 1024];
      while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        text.append(buf, static_cast<std::size_t>(in.gcount()));
        if (text.size() > config_.fetch.max_bytes)
          return fail(config_.location + " is larger than " +
                      std::to_string(config_.fetch.max_bytes) + " bytes (max_size)");
      }
      return succeed(std::move(text), config_.location);
    }
    case PacSourceConfig::Kind::Url:
      return fetchUrl(config_.location, config_.location);
    case PacSourceConfig::Kind::Wpad:
      return runWpad("WPAD");
    case PacSourceConfig::Kind::System:
      return attemptSystem();
  }
}

void PacSource::attemptSystem() {
  const SystemProxySettings s = readSystemProxySettings();
  std::string notes;
  for (const std::string& n : s.notes) notes += (notes.empty() ? "" : "; ") + n;
  if (notes != logged_notes_) {
    logged_notes_ = notes;
    if (!notes.empty())
      H2G_LOG(Warn, 0, 0,
              "pac " << config_.name << ": system proxy settings (" << s.from
                     << "): left out: " << notes);
  }
  switch (s.mode) {
    case SystemProxySettings::Mode::Direct:
      return succeed(std::string(kDirectPac), "system: " + s.from + ": no proxy");
    case SystemProxySettings::Mode::Manual: {
      std::vector<std::string> named;
      for (const std::string* e : {&s.manual.http, &s.manual.https, &s.manual.other})
        if (!e->empty()) named.push_back(*e);
      return succeed(manualProxyPac(s.manual, s.from), "system: " + s.from + ": manual settings",
                     {}, std::move(named));
    }
    case SystemProxySettings::Mode::AutoUrl:
      return fetchUrl(s.pac_url, "system: " + s.from + ": " + s.pac_url);
    case SystemProxySettings::Mode::AutoDetect:
      return runWpad("system: " + s.from + ": automatic detection, WPAD");
  }
}

void PacSource::fetchUrl(std::string url, std::string origin) {
  fetch_ = PacFetch::start(io_.get_executor(), url, config_.fetch,
                           [this, url, origin = std::move(origin)](FetchResult r) {
                             fetch_.reset();
                             if (!alive_->load()) return;
                             if (!r.ok) return fail(r.error);
                             succeed(std::move(r.body), origin, url);
                           });
}

void PacSource::runWpad(std::string origin_prefix) {
  std::string why;
  auto urls = std::make_shared<std::vector<std::string>>(wpadCandidates(&why));
  if (urls->empty()) return fail("WPAD: " + why);
  wpadNext(urls, 0, std::make_shared<std::string>(), std::move(origin_prefix));
}

void PacSource::wpadNext(std::shared_ptr<std::vector<std::string>> urls, std::size_t i,
                         std::shared_ptr<std::string> errors, std::string origin_prefix) {
  if (i >= urls->size()) return fail("WPAD: no candidate answered: " + *errors);
  FetchOptions options = config_.fetch;
  options.timeout = std::min(options.timeout, config_.wpad_candidate_timeout);
  const std::string url = (*urls)[i];
  fetch_ = PacFetch::start(
      io_.get_executor(), url, options, [this, urls, i, errors, origin_prefix, url](FetchResult r) {
        fetch_.reset();
        if (!alive_->load()) return;
        if (r.ok) return succeed(std::move(r.body), url + " (" + origin_prefix + ")", url);
        *errors += (errors->empty() ? "" : "; ") + r.error;
        wpadNext(urls, i + 1, errors, origin_prefix);
      });
}

void PacSource::succeed(std::string text, std::string origin, std::string url,
                        std::vector<std::string> manual_proxies) {
  running_ = false;
  std::shared_ptr<PacScript> script = makeScript(std::move(text), origin);
  script->url = std::move(url);
  script->manual_proxies = std::move(manual_proxies);
  const auto now = std::chrono::system_clock::now();
  bool changed = false;
  bool recovered = false;
  {
    std::lock_guard lock(mutex_);
    recovered = status_.consecutive_failures > 0;
    changed = !status_.have_script || status_.sha256 != script->sha256;
    status_.fetched_at = now;
    status_.last_error.clear();
    status_.consecutive_failures = 0;
    if (changed) {
      status_.have_script = true;
      status_.origin = origin;
      status_.sha256 = script->sha256;
      status_.changed_at = now;
    }
  }
  if (recovered) H2G_LOG(Info, 0, 0, "pac " << config_.name << ": " << origin << " works again");
  logged_error_.clear();
  if (changed) {
    H2G_LOG(Info, 0, 0,
            "pac " << config_.name << ": new PAC file from " << origin << " ("
                   << script->text.size() << " bytes, sha256 " << script->sha256.substr(0, 16)
                   << "...)");
    asio::post(owner_, [alive = alive_, cb = on_script_, script] {
      if (alive->load()) cb(script);
    });
  }
  schedule(config_.refresh_interval);
}

void PacSource::fail(std::string error) {
  running_ = false;
  std::string keeping;
  {
    std::lock_guard lock(mutex_);
    status_.last_error = error;
    ++status_.consecutive_failures;
    ++status_.failures;
    if (status_.have_script)
      keeping = "; keeping the PAC file from " + status_.origin + " fetched " +
                timeText(status_.fetched_at);
    else
      keeping = "; no PAC file yet: the route's fallback applies";
  }
  if (error != logged_error_) {
    logged_error_ = error;
    H2G_LOG(Warn, 0, 0,
            "pac " << config_.name << " (" << kindName(config_.kind) << "): " << error << keeping);
  } else {
    H2G_LOG(Debug, 0, 0, "pac " << config_.name << ": still failing: " << error);
  }
  const auto retry = config_.refresh_interval.count() > 0
                         ? std::min(config_.retry_interval, config_.refresh_interval)
                         : config_.retry_interval;
  schedule(retry);
}

}  // namespace h2gate::pac
