// IPv6-aware proxy auto-config with Microsoft's extensions: destinations in
// the company's IPv6 and IPv4 ranges go direct, IPv6-only services through
// the v6 gateway. Clients without the extensions use FindProxyForURL.
var CORP6 = ["fd12:3456:789a::/48", "2001:db8:10::/48"];
var CORP4 = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"];

function inAny(list, prefixes) {
  var addrs = list.split(";");
  for (var i = 0; i < addrs.length; i++)
    for (var j = 0; j < prefixes.length; j++)
      if (isInNetEx(addrs[i], prefixes[j])) return true;
  return false;
}

function FindProxyForURLEx(url, host) {
  if (isPlainHostName(host))
    return "DIRECT";
  if (host.indexOf(":") >= 0)  // an IPv6 literal
    return inAny(host, CORP6) ? "DIRECT" : "HTTPS v6gw.corp.test:443; PROXY proxy.corp.test:8080";
  // Partners' new services appear in their DNS before ours: ask their gateway.
  if (dnsDomainIs(host, ".partner.test") && !isResolvableEx(host))
    return "PROXY partner-gw.corp.test:3128";
  var addrs = dnsResolveEx(host);
  if (!addrs)
    return "PROXY proxy.corp.test:8080";  // the proxy resolves what we cannot
  if (inAny(addrs, CORP6) || inAny(addrs, CORP4))
    return "DIRECT";
  if (addrs.indexOf(".") < 0)  // IPv6 only
    return "HTTPS v6gw.corp.test:443; PROXY proxy.corp.test:8080";
  if (inAny(myIpAddressEx(), ["10.20.0.0/16"]))
    return "PROXY branch-proxy.corp.test:8080";
  return "PROXY proxy.corp.test:8080";
}

function FindProxyForURL(url, host) {
  return "PROXY legacy.corp.test:8080";
}
