#include "filters/acl.h"

#include "filters/match_config.h"
#include "filters/served_pac.h"
#include "gateway/base/log.h"

namespace h2gate::filters {

AclFilter::AclFilter(Config config) : config_(std::move(config)) {}

std::string AclFilter::init() {
  for (const std::string& why : config_.ignored)
    H2G_LOG(Warn, 0, 0, "acl: NO_PROXY entry left out, it never matches: " << why);
  return {};
}

FilterStatus AclFilter::onRequestHead(const RequestHead& head, StreamInfo& info) const {
  const match::Destination dest(head.host, head.port, head.is_connect);
  for (const Entry& e : config_.deny) {
    if (!e.match.matches(dest)) continue;
    info.status = 403;
    info.reason = "destination " + head.authority() + " denied by policy: " + e.reason;
    return FilterStatus::Stop;
  }
  if (!config_.has_allow) return FilterStatus::Continue;
  for (const Entry& e : config_.allow)
    if (e.match.matches(dest)) return FilterStatus::Continue;
  info.status = 403;
  info.reason = "destination " + head.authority() + " denied by policy: not in the allow list";
  return FilterStatus::Stop;
}

std::optional<Refusal> AclFilter::checkAddress(const RequestHead& head, const StreamInfo&,
                                               const net::IpAddress& address) const {
  if (!config_.check_resolved_addresses) return std::nullopt;
  const match::Destination dest(address, head.port, head.is_connect);
  for (const Entry& e : config_.deny) {
    if (!e.match.matches(dest)) continue;
    return Refusal{403, "destination " + head.authority() + " (" + dest.ip()->str() +
                            ") denied by policy: " + e.reason};
  }
  return std::nullopt;
}

void AclFilter::describePac(PacBuilder& pac) const {
  // Through h2gate, which answers 403: never DIRECT around the policy.
  for (std::size_t i = 0; i < config_.deny.size(); ++i)
    pac.add(config_.deny[i].match, PacBuilder::Action::Proxy,
            "acl deny[" + std::to_string(i) + "]: h2gate answers 403");
  if (!config_.has_allow) return;
  std::vector<const match::Match*> allowed;
  for (const Entry& e : config_.allow) allowed.push_back(&e.match);
  pac.addUnlessAny(allowed, PacBuilder::Action::Proxy,
                   "acl allow: anything else is denied, h2gate answers 403");
}

namespace {

void parseEntries(config::NodeReader& r, const char* key, bool with_reason,
                  std::vector<AclFilter::Entry>& out, std::vector<std::string>& ignored) {
  for (config::NodeReader& item : r.list(key)) {
    if (!item.expectMap()) continue;
    if (with_reason)
      item.allowOnly({"match", "reason"});
    else
      item.allowOnly({"match"});
    AclFilter::Entry e;
    config::NodeReader m = item.child("match", true);
    if (!m.isNull()) {
      if (std::optional<match::Match> match = parseMatch(m, &ignored)) e.match = std::move(*match);
    }
    if (with_reason) {
      const std::string index = std::string(key) + "[" + std::to_string(out.size()) + "]";
      e.reason = item.string("reason").value_or("");
      if (e.reason.empty()) e.reason = "acl " + index;
    }
    out.push_back(std::move(e));
  }
}

}  // namespace

FilterPtr createAcl(config::NodeReader& r, const FactoryContext&) {
  if (!r.expectMap()) return nullptr;
  const std::size_t before = r.diagnostics().problems().size();
  r.allowOnly({"@type", "deny", "allow", "check_resolved_addresses"});
  r.expectType(kAclType);
  AclFilter::Config config;
  parseEntries(r, "deny", true, config.deny, config.ignored);
  parseEntries(r, "allow", false, config.allow, config.ignored);
  config.has_allow = r.has("allow");
  if (auto check = r.boolean("check_resolved_addresses")) config.check_resolved_addresses = *check;
  if (!r.has("deny") && !r.has("allow")) r.error("an acl needs deny, allow or both");
  if (r.diagnostics().problems().size() != before) return nullptr;
  return std::make_shared<AclFilter>(std::move(config));
}

}  // namespace h2gate::filters
