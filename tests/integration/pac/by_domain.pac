// Acme's proxy auto-config: internal names go direct, partners through
// their gateway, big downloads through the bulk proxy, the rest through the
// office proxies (TLS to the secure one first).
function FindProxyForURL(url, host) {
  host = host.toLowerCase();
  if (isPlainHostName(host) || localHostOrDomainIs(host, "intranet.corp.test"))
    return "DIRECT";
  if (dnsDomainIs(host, ".corp.test") || host == "corp.test")
    return "DIRECT";
  if (shExpMatch(host, "*.partner.test") || shExpMatch(host, "partner-*.test"))
    return "PROXY partner-gw.corp.test:3128";
  if (shExpMatch(url, "http://*/downloads/*") || shExpMatch(url, "*.iso"))
    return "PROXY bulk.corp.test:8080; DIRECT";
  if (dnsDomainIs(host, ".example.test") && dnsDomainLevels(host) > 2)
    return "PROXY deep.corp.test:8080";
  if (shExpMatch(host, "cdn?.media.test"))
    return "PROXY cdn-proxy.corp.test:8080";
  if (shExpMatch(host, "*.media.test"))
    return "PROXY media.corp.test:8080";
  if (url.substring(0, 6) == "https:")
    return "HTTPS secure-proxy.corp.test:443; PROXY proxy.corp.test:8080";
  return "PROXY proxy.corp.test:8080";
}
