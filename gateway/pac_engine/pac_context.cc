#include "gateway/pac_engine/pac_context.h"

#include <algorithm>

namespace h2gate::pac {
namespace {

const char* typeName(duk_context* ctx, duk_idx_t idx) {
  switch (duk_get_type(ctx, idx)) {
    case DUK_TYPE_UNDEFINED:
      return "undefined";
    case DUK_TYPE_NULL:
      return "null";
    case DUK_TYPE_BOOLEAN:
      return "a boolean";
    case DUK_TYPE_NUMBER:
      return "a number";
    case DUK_TYPE_OBJECT:
      return duk_is_array(ctx, idx) ? "an array" : "an object";
    default:
      return "a non-string value";
  }
}

// Which entry points the script defines. Inside duk_safe_call: a global
// may be a getter that throws.
struct EntryPoints {
  bool plain = false;
  bool ex = false;
};

duk_ret_t findEntryPoints(duk_context* ctx, void* udata) {
  auto* e = static_cast<EntryPoints*>(udata);
  duk_get_global_string(ctx, "FindProxyForURLEx");
  e->ex = duk_is_function(ctx, -1);
  duk_get_global_string(ctx, "FindProxyForURL");
  e->plain = duk_is_function(ctx, -1);
  return 0;
}

struct Call {
  const char* fn;
  std::string_view url;
  std::string_view host;
  RawAnswer* out;
};

// FindProxyForURL(url, host) inside duk_safe_call: even pushing the
// arguments may fail (the heap at its memory limit).
duk_ret_t callFindProxy(duk_context* ctx, void* udata) {
  auto* c = static_cast<Call*>(udata);
  duk_get_global_string(ctx, c->fn);
  duk_push_lstring(ctx, c->url.data(), c->url.size());
  duk_push_lstring(ctx, c->host.data(), c->host.size());
  duk_call(ctx, 2);
  if (!duk_is_string(ctx, -1)) {
    c->out->error = {PacError::Kind::BadReturn,
                     std::string(c->fn) + " returned " + typeName(ctx, -1) + ", not a string"};
    return 0;
  }
  duk_size_t len = 0;
  const char* s = duk_get_lstring(ctx, -1, &len);
  if (len > kMaxAnswer)
    c->out->error = {PacError::Kind::BadReturn, std::string(c->fn) + " returned " +
                                                    std::to_string(len) + " bytes (more than " +
                                                    std::to_string(kMaxAnswer) + ")"};
  else
    c->out->text.assign(s, len);
  return 0;
}

}  // namespace

PacContext::PacContext(const PacEnvironment& env)
    : env_(env), heap_(env.heap_limit, env.clock, static_cast<PacHost*>(this)) {}

PacContext::~PacContext() = default;

Deadline PacContext::dnsDeadline() const {
  return std::min(run_deadline_, std::chrono::steady_clock::now() + env_.dns_timeout);
}

std::vector<net::IpAddress> PacContext::dnsLookup(const std::string& host, bool v4_only) {
  if (!env_.resolver) return {};
  std::string key = v4_only ? "4 " : "* ";
  key += host;
  for (const auto& [name, answer] : run_lookups_)
    if (name == key) return answer;
  if (run_lookups_.size() >= kMaxLookupsPerRun) {
    ++lookups_refused_;
    return {};
  }
  std::vector<net::IpAddress> answer = env_.resolver->resolve(host, v4_only, dnsDeadline(), owner_);
  run_lookups_.emplace_back(std::move(key), answer);
  return answer;
}

void PacContext::startRun(Deadline deadline, std::string_view owner) {
  run_deadline_ = deadline;
  heap_.setDeadline(deadline);
  run_lookups_.clear();
  owner_.assign(owner);
  lookups_refused_ = 0;
}

void PacContext::endRun() {
  heap_.setDeadline(Deadline::max());
  run_deadline_ = Deadline::max();
  run_lookups_.clear();
}

std::vector<net::IpAddress> PacContext::myAddresses() {
  if (!env_.resolver) return {};
  return env_.resolver->localAddresses(dnsDeadline());
}

void PacContext::alert(std::string_view message) {
  if (env_.alert) env_.alert(message);
}

bool PacContext::runPastDeadline() {
  if (run_deadline_ == Deadline::max() || std::chrono::steady_clock::now() < run_deadline_)
    return false;
  heap_.markTimedOut();
  return true;
}

PacError PacContext::load(std::string_view script, std::string_view name, Deadline deadline) {
  if (!heap_.valid())
    return {PacError::Kind::Memory, "the memory limit is too small to create a JavaScript heap"};
  if (loaded_) return {PacError::Kind::Exception, "a PAC context loads one script"};
  loaded_ = true;
  startRun(deadline, "");
  duk_context* ctx = heap_.ctx();
  if (std::string err = installPacLibrary(ctx); !err.empty()) {
    // The library runs under the load's deadline too: on a slow machine it
    // can be what runs past it, which is a timeout, not an exception.
    const bool timed_out = heap_.timedOut();
    endRun();
    if (heap_.allocationRefused()) return {PacError::Kind::Memory, err};
    if (timed_out) return {PacError::Kind::Timeout, err};
    return {PacError::Kind::Exception, err};
  }
  const std::string file(name.empty() ? std::string_view("proxy.pac") : name);
  PacError err = heap_.runProgram(script, file.c_str());
  if (!err) {
    EntryPoints e;
    if (duk_safe_call(ctx, findEntryPoints, &e, 0, 1) != DUK_EXEC_SUCCESS) {
      err = heap_.popError(PacError::Kind::Exception);
    } else {
      duk_pop(ctx);
      uses_ex_ = e.ex;
      if (!e.plain && !e.ex)
        err = {PacError::Kind::NoFunction, "the file defines no function FindProxyForURL"};
    }
  }
  endRun();
  return err;
}

RawAnswer PacContext::findProxy(std::string_view url, std::string_view host, Deadline deadline) {
  RawAnswer out;
  if (!heap_.valid() || !loaded_) {
    out.error = {PacError::Kind::NoScript, "no PAC file is loaded"};
    return out;
  }
  duk_context* ctx = heap_.ctx();
  startRun(deadline, host);
  Call call{uses_ex_ ? "FindProxyForURLEx" : "FindProxyForURL", url, host, &out};
  if (duk_safe_call(ctx, callFindProxy, &call, 0, 1) != DUK_EXEC_SUCCESS) {
    out.text.clear();
    out.error = heap_.popError(PacError::Kind::Exception);
  } else {
    duk_pop(ctx);
  }
  endRun();
  out.lookups_refused = lookups_refused_;
  return out;
}

}  // namespace h2gate::pac
