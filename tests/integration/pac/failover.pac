// Failover lists: two proxies then DIRECT for most, TLS proxies for
// https, SOCKS for a few legacy destinations (which h2gate skips), and
// lists written with the spacing and case found in the wild.
function FindProxyForURL(url, host) {
  var https = url.substring(0, 6) == "https:";
  if (isPlainHostName(host) || dnsDomainIs(host, ".corp.test"))
    return "DIRECT";
  if (shExpMatch(host, "*.partner.test"))
    return "SOCKS5 socks.corp.test:1080; PROXY partner-gw.corp.test:3128";
  if (shExpMatch(url, "*:8443/*") || shExpMatch(url, "*:8080/*"))
    return "PROXY alt1.corp.test:8080;PROXY alt2.corp.test:8080;DIRECT";
  if (https)
    return "HTTPS tls1.corp.test:443; HTTPS tls2.corp.test; PROXY proxy.corp.test:8080; DIRECT";
  if (dnsDomainLevels(host) >= 3)
    return "proxy deep1.corp.test:3128 ;  proxy deep2.corp.test:3128 ; direct";
  if (shExpMatch(host, "*.media.test"))
    return "PROXY [2001:db8:ff::1]:3128; PROXY media.corp.test:3128";
  return "PROXY p1.corp.test:8080; PROXY p2.corp.test:8080; DIRECT";
}
