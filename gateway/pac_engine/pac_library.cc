#include "gateway/pac_engine/pac_library.h"

#include <algorithm>

#include "gateway/base/ascii.h"
#include "gateway/pac_engine/js_heap.h"

namespace h2gate::pac {
namespace {

// The functions written in JavaScript. Their helpers live in closures, not
// globals, so a PAC file's own `months` or `cache` cannot break them.
constexpr std::string_view kLibrary = R"JS(
function dnsDomainIs(host, domain) {
  var cut = host.length - domain.length;
  return cut >= 0 && host.substring(cut) == domain;
}

function dnsDomainLevels(host) {
  return host.split(".").length - 1;
}

function localHostOrDomainIs(host, hostdom) {
  if (host == hostdom) return true;
  return hostdom.lastIndexOf(host + ".", 0) == 0;
}

function isResolvable(host) {
  return dnsResolve(host) != null;
}

function isResolvableEx(host) {
  return dnsResolveEx(host) != "";
}

var shExpMatch = (function (glob) {
  // Compiled patterns, dropped wholesale when full: PAC files use few.
  var compiled = Object.create(null), count = 0;
  return function shExpMatch(str, shexp) {
    var s = String(str), key = String(shexp);
    // A plain glob is matched natively, in linear time (as a regular
    // expression, '*x*x*x*x*y' backtracks for an exponential time).
    var plain = glob(s, key);
    if (plain !== undefined) return plain;
    var re = compiled[key];
    if (re === undefined) {
      var body = key.replace(/\./g, "\\.").replace(/\*/g, ".*").replace(/\?/g, ".");
      re = new RegExp("^" + body + "$");
      if (count >= 512) {
        compiled = Object.create(null);
        count = 0;
      }
      compiled[key] = re;
      count++;
    }
    return re.test(s);
  };
})(__h2gateShExpGlob);

var weekdayRange, dateRange, timeRange;
(function () {
  function table(names) {
    var t = Object.create(null);
    for (var i = 0; i < names.length; i++) t[names[i]] = i;
    return t;
  }
  var DAYS = table(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]);
  var MONTHS = table(["JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                      "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]);

  // The arguments without a trailing "GMT", and whether it was there.
  function split(args) {
    var list = Array.prototype.slice.call(args);
    var gmt = list.length > 0 && list[list.length - 1] == "GMT";
    if (gmt) list.pop();
    return { list: list, gmt: gmt };
  }

  function within(start, now, end) {
    return start <= end ? start <= now && now <= end : now >= start || now <= end;
  }

  weekdayRange = function weekdayRange() {
    var a = split(arguments), n = a.list.length;
    if (n < 1) return false;
    var first = DAYS[a.list[0]];
    var last = n == 2 ? DAYS[a.list[1]] : first;
    if (first === undefined || last === undefined) return false;
    var now = new Date();
    return within(first, a.gmt ? now.getUTCDay() : now.getDay(), last);
  };

  // One dateRange argument: a month name, a day (1-31) or a year.
  function datePart(x) {
    var v = parseInt(x, 10);
    if (isNaN(v)) {
      var m = MONTHS[x];
      return m === undefined ? null : { kind: "m", value: m };
    }
    return v < 32 ? { kind: "d", value: v } : { kind: "y", value: v };
  }

  dateRange = function dateRange() {
    var a = split(arguments), n = a.list.length;
    if (n < 1 || n > 6 || (n > 1 && n % 2 == 1)) return false;
    var now = new Date();
    var current = {
      d: a.gmt ? now.getUTCDate() : now.getDate(),
      m: a.gmt ? now.getUTCMonth() : now.getMonth(),
      y: a.gmt ? now.getUTCFullYear() : now.getFullYear()
    };
    var parts = [];
    for (var i = 0; i < n; i++) {
      var p = datePart(a.list[i]);
      if (p === null) return false;
      parts.push(p);
    }
    if (n == 1) return current[parts[0].kind] == parts[0].value;
    // Both halves name the same fields, e.g. (day, month) .. (day, month);
    // each half becomes one number, year-month-day, of those fields only.
    var half = n / 2, start = 0, end = 0, here = 0;
    var weight = { y: 10000, m: 100, d: 1 };
    var seen = {};
    for (var j = 0; j < half; j++) {
      var s = parts[j], e = parts[half + j];
      if (s.kind != e.kind || seen[s.kind]) return false;
      seen[s.kind] = true;
      start += s.value * weight[s.kind];
      end += e.value * weight[e.kind];
      here += current[s.kind] * weight[s.kind];
    }
    return within(start, here, end);
  };

  timeRange = function timeRange() {
    var a = split(arguments), n = a.list.length, x = a.list;
    if (n < 1) return false;
    var now = new Date();
    var h = a.gmt ? now.getUTCHours() : now.getHours();
    if (n == 1) return h == x[0];
    if (n == 2) return x[0] <= h && h <= x[1];
    var m = a.gmt ? now.getUTCMinutes() : now.getMinutes();
    var s = a.gmt ? now.getUTCSeconds() : now.getSeconds();
    var start, end;
    if (n == 4) {
      start = x[0] * 3600 + x[1] * 60;
      end = x[2] * 3600 + x[3] * 60 + 59;
    } else if (n == 6) {
      start = x[0] * 3600 + x[1] * 60 + x[2] * 1;
      end = x[3] * 3600 + x[4] * 60 + x[5] * 1;
    } else {
      throw new Error("timeRange: bad number of arguments");
    }
    return within(start, h * 3600 + m * 60 + s, end);
  };
})();
)JS";

PacHost& host(duk_context* ctx) {
  return *static_cast<PacHost*>(JsHeap::ownerOf(ctx));
}

// The string argument at `idx`, when it is a string primitive.
std::optional<std::string> stringArg(duk_context* ctx, duk_idx_t idx) {
  if (!duk_is_string(ctx, idx)) return std::nullopt;
  duk_size_t len = 0;
  const char* s = duk_get_lstring(ctx, idx, &len);
  return std::string(s, len);
}

// Throws when the run's deadline passed during a DNS call.
void checkDeadline(duk_context* ctx) {
  if (host(ctx).runPastDeadline()) (void)duk_range_error(ctx, "PAC run deadline passed during DNS");
}

void pushString(duk_context* ctx, const std::string& s) {
  duk_push_lstring(ctx, s.data(), s.size());
}

duk_ret_t jsDnsResolve(duk_context* ctx) {
  std::optional<std::string> name = stringArg(ctx, 0);
  if (!name || !isAscii(*name)) {
    duk_push_null(ctx);
    return 1;
  }
  const std::vector<net::IpAddress> ips = host(ctx).dnsLookup(*name, true);
  checkDeadline(ctx);
  if (ips.empty())
    duk_push_null(ctx);
  else
    pushString(ctx, ips.front().str());
  return 1;
}

duk_ret_t jsDnsResolveEx(duk_context* ctx) {
  std::optional<std::string> name = stringArg(ctx, 0);
  if (!name || !isAscii(*name)) return 0;  // undefined, as Chromium
  const std::vector<net::IpAddress> ips = host(ctx).dnsLookup(*name, false);
  checkDeadline(ctx);
  pushString(ctx, joinAddresses(ips));
  return 1;
}

duk_ret_t jsMyIpAddress(duk_context* ctx) {
  const std::vector<net::IpAddress> ips = host(ctx).myAddresses();
  checkDeadline(ctx);
  auto v4 = std::find_if(ips.begin(), ips.end(), [](const net::IpAddress& ip) { return !ip.v6; });
  if (v4 != ips.end())
    pushString(ctx, v4->str());
  else if (!ips.empty())
    pushString(ctx, ips.front().str());
  else
    duk_push_string(ctx, "127.0.0.1");
  return 1;
}

duk_ret_t jsMyIpAddressEx(duk_context* ctx) {
  const std::vector<net::IpAddress> ips = host(ctx).myAddresses();
  checkDeadline(ctx);
  pushString(ctx, joinAddresses(ips));
  return 1;
}

duk_ret_t jsIsInNet(duk_context* ctx) {
  // Chromium: pattern and mask must be dotted quads; a host that is not one
  // is resolved (IPv4).
  const std::optional<uint32_t> pattern = parseDottedQuad(duk_safe_to_string(ctx, 1));
  const std::optional<uint32_t> mask = parseDottedQuad(duk_safe_to_string(ctx, 2));
  if (!pattern || !mask) {
    duk_push_false(ctx);
    return 1;
  }
  const bool is_string = duk_is_string(ctx, 0);
  std::optional<uint32_t> address = parseDottedQuad(duk_safe_to_string(ctx, 0));
  if (!address && is_string) {
    const std::string name = duk_get_string(ctx, 0);
    if (isAscii(name)) {
      const std::vector<net::IpAddress> ips = host(ctx).dnsLookup(name, true);
      checkDeadline(ctx);
      if (!ips.empty()) {
        const auto& b = ips.front().bytes;
        address = (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
      }
    }
  }
  duk_push_boolean(ctx, address && ((*address & *mask) == (*pattern & *mask)));
  return 1;
}

duk_ret_t jsIsInNetEx(duk_context* ctx) {
  std::optional<std::string> ip = stringArg(ctx, 0);
  std::optional<std::string> prefix = stringArg(ctx, 1);
  if (!ip || !prefix) {
    duk_push_null(ctx);
    return 1;
  }
  duk_push_boolean(ctx, isInNetEx(*ip, *prefix));
  return 1;
}

duk_ret_t jsSortIpAddressList(duk_context* ctx) {
  std::optional<std::string> list = stringArg(ctx, 0);
  if (!list || !isAscii(*list)) {
    duk_push_null(ctx);
    return 1;
  }
  if (std::optional<std::string> sorted = sortIpAddressList(*list))
    pushString(ctx, *sorted);
  else
    duk_push_false(ctx);
  return 1;
}

duk_ret_t jsIsPlainHostName(duk_context* ctx) {
  std::optional<std::string> name = stringArg(ctx, 0);
  if (!name) return duk_type_error(ctx, "isPlainHostName requires 1 string parameter");
  duk_push_boolean(ctx, isPlainHostName(*name));
  return 1;
}

duk_ret_t jsAlert(duk_context* ctx) {
  const char* text = duk_get_top(ctx) == 0 ? "undefined" : duk_to_string(ctx, 0);
  host(ctx).alert(text);
  return 0;
}

duk_ret_t jsGetClientVersion(duk_context* ctx) {
  duk_push_string(ctx, "1.0");
  return 1;
}

// shExpMatch(s, p) when p is a plain glob, else undefined (see shExpGlob).
duk_ret_t jsShExpGlob(duk_context* ctx) {
  duk_size_t s_len = 0, p_len = 0;
  const char* s = duk_get_lstring(ctx, 0, &s_len);
  const char* p = duk_get_lstring(ctx, 1, &p_len);
  if (!s || !p) return 0;
  const std::optional<bool> m = shExpGlob({s, s_len}, {p, p_len});
  if (!m) return 0;
  duk_push_boolean(ctx, *m);
  return 1;
}
constexpr const char* kShExpGlob = "__h2gateShExpGlob";

struct Native {
  const char* name;
  duk_c_function fn;
  duk_idx_t nargs;
};
constexpr Native kNatives[] = {
    {"dnsResolve", jsDnsResolve, 1},
    {"dnsResolveEx", jsDnsResolveEx, 1},
    {"myIpAddress", jsMyIpAddress, 0},
    {"myIpAddressEx", jsMyIpAddressEx, 0},
    {"isInNet", jsIsInNet, 3},
    {"isInNetEx", jsIsInNetEx, 2},
    {"sortIpAddressList", jsSortIpAddressList, 1},
    {"isPlainHostName", jsIsPlainHostName, 1},
    {"alert", jsAlert, DUK_VARARGS},
    {"getClientVersion", jsGetClientVersion, 0},
};

}  // namespace

bool globMatch(std::string_view s, std::string_view p) {
  // Greedy: a '*' takes nothing at first, then one more character each time
  // what follows it fails; only the last '*' is ever retried.
  std::size_t i = 0, j = 0, star = std::string_view::npos, mark = 0;
  while (i < s.size()) {
    if (j < p.size() && p[j] == '*') {
      star = j++;
      mark = i;
    } else if (j < p.size() && (p[j] == '?' || p[j] == s[i])) {
      ++i;
      ++j;
    } else if (star != std::string_view::npos) {
      j = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (j < p.size() && p[j] == '*') ++j;
  return j == p.size();
}

std::optional<bool> shExpGlob(std::string_view s, std::string_view p) {
  if (!isAscii(s) || !isAscii(p)) return std::nullopt;  // '?' is one UTF-16 unit, not one byte
  if (s.find_first_of("\n\r") != std::string_view::npos) return std::nullopt;  // '.' stops there
  if (p.find_first_of("\\^$+()[]{}|") != std::string_view::npos) return std::nullopt;
  return globMatch(s, p);
}

bool isPlainHostName(std::string_view host) {
  if (host.find('.') != std::string_view::npos) return false;
  const std::optional<net::IpAddress> ip = net::parseIp(host);
  return !(ip && host.front() != '[' && host.find('%') == std::string_view::npos);
}

std::optional<uint32_t> parseDottedQuad(std::string_view text) {
  uint32_t out = 0;
  for (int part = 0; part < 4; ++part) {
    std::size_t digits = 0;
    unsigned value = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
      value = value * 10 + static_cast<unsigned>(text[digits] - '0');
      if (++digits > 3) return std::nullopt;
    }
    if (digits == 0 || value > 255) return std::nullopt;
    out = (out << 8) | value;
    text.remove_prefix(digits);
    if (part < 3) {
      if (text.empty() || text.front() != '.') return std::nullopt;
      text.remove_prefix(1);
    }
  }
  if (!text.empty()) return std::nullopt;
  return out;
}

namespace {

// An address literal as Chromium's IPAddress::AssignFromIPLiteral takes it:
// no brackets, no zone.
std::optional<net::IpAddress> literal(std::string_view s) {
  if (s.empty() || s.front() == '[' || s.find('%') != std::string_view::npos) return std::nullopt;
  return net::parseIp(s);
}

net::IpAddress mapped(const net::IpAddress& v4) {
  net::IpAddress out;
  out.v6 = true;
  out.bytes[10] = 0xff;
  out.bytes[11] = 0xff;
  std::copy(v4.bytes.begin(), v4.bytes.begin() + 4, out.bytes.begin() + 12);
  return out;
}

}  // namespace

bool isInNetEx(std::string_view ip, std::string_view prefix) {
  std::optional<net::IpAddress> address = literal(ip);
  const std::size_t slash = prefix.find('/');
  if (!address || slash == std::string_view::npos) return false;
  if (!literal(prefix.substr(0, slash))) return false;
  std::string error;
  std::optional<net::CidrRange> range = net::parseCidr(prefix, /*strict=*/false, &error);
  if (!range) return false;
  if (address->v6 != range->base.v6) {
    if (!address->v6) {
      address = mapped(*address);
    } else {
      range->base = mapped(range->base);
      range->prefix = static_cast<uint8_t>(range->prefix + 96);
    }
  }
  return range->contains(*address);
}

std::optional<std::string> sortIpAddressList(std::string_view list) {
  std::string cleaned;
  for (char c : list)
    if (c != ' ' && c != '\t') cleaned += c;
  struct Item {
    std::string text;
    net::IpAddress ip;
  };
  std::vector<Item> items;
  std::string_view rest = cleaned;
  while (!rest.empty()) {
    const std::size_t semi = rest.find(';');
    const std::string_view token = rest.substr(0, semi);
    if (!token.empty()) {
      std::optional<net::IpAddress> ip = literal(token);
      if (!ip) return std::nullopt;
      items.push_back({std::string(token), *ip});
    }
    if (semi == std::string_view::npos) break;
    rest.remove_prefix(semi + 1);
  }
  if (items.empty()) return std::nullopt;
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.ip.v6 != b.ip.v6) return a.ip.v6;  // IPv6 first
    return a.ip.bytes < b.ip.bytes;
  });
  std::string out;
  for (const Item& i : items) {
    if (!out.empty()) out += ';';
    out += i.text;
  }
  return out;
}

std::string joinAddresses(const std::vector<net::IpAddress>& ips) {
  std::string out;
  for (const net::IpAddress& ip : ips) {
    if (!out.empty()) out += ';';
    out += ip.str();
  }
  return out;
}

namespace {

duk_ret_t installAll(duk_context* ctx, void*) {
  // Duktape's own object (finalizers, bytecode dumps, heap info) is no PAC
  // function and no browser has it.
  duk_push_global_object(ctx);
  duk_del_prop_string(ctx, -1, "Duktape");
  duk_pop(ctx);
  for (const Native& n : kNatives) {
    duk_push_c_function(ctx, n.fn, n.nargs);
    duk_push_string(ctx, "name");
    duk_push_string(ctx, n.name);
    duk_def_prop(ctx, -3, DUK_DEFPROP_HAVE_VALUE | DUK_DEFPROP_FORCE);
    duk_put_global_string(ctx, n.name);
  }
  // shExpMatch's native half: the library keeps it in a closure.
  duk_push_c_function(ctx, jsShExpGlob, 2);
  duk_put_global_string(ctx, kShExpGlob);
  duk_push_string(ctx, "pac-library.js");
  duk_compile_lstring_filename(ctx, 0, kLibrary.data(), kLibrary.size());
  duk_call(ctx, 0);
  duk_pop(ctx);
  duk_push_global_object(ctx);
  duk_del_prop_string(ctx, -1, kShExpGlob);
  duk_pop(ctx);
  return 0;
}

}  // namespace

std::string installPacLibrary(duk_context* ctx) {
  if (duk_safe_call(ctx, installAll, nullptr, 0, 1) != DUK_EXEC_SUCCESS) {
    std::string why = duk_safe_to_string(ctx, -1);
    duk_pop(ctx);
    return "installing the PAC functions: " + why;
  }
  duk_pop(ctx);
  return {};
}

}  // namespace h2gate::pac
