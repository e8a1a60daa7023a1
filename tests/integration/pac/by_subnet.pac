// Route by address: private networks direct, the lab through its own proxy,
// branch offices (told apart by this machine's address) through theirs.
function FindProxyForURL(url, host) {
  if (isPlainHostName(host))
    return "DIRECT";
  if (/^\d+\.\d+\.\d+\.\d+$/.test(host)) {
    if (isInNet(host, "10.0.0.0", "255.0.0.0") ||
        isInNet(host, "172.16.0.0", "255.240.0.0") ||
        isInNet(host, "192.168.0.0", "255.255.0.0") ||
        isInNet(host, "127.0.0.0", "255.0.0.0"))
      return "DIRECT";
    return "PROXY proxy.corp.test:8080";
  }
  if (!isResolvable(host))
    return "PROXY proxy.corp.test:8080";  // the proxy resolves what we cannot
  var ip = dnsResolve(host);
  if (isInNet(ip, "10.1.0.0", "255.255.0.0"))
    return "DIRECT";
  if (isInNet(host, "172.16.0.0", "255.240.0.0"))
    return "PROXY lab-proxy.corp.test:3128";
  if (isInNet(ip, "192.168.0.0", "255.255.0.0"))
    return "DIRECT";
  if (isInNet(myIpAddress(), "10.20.0.0", "255.255.0.0"))
    return "PROXY branch-proxy.corp.test:8080; PROXY proxy.corp.test:8080";
  if (isInNet(ip, "192.0.2.0", "255.255.255.0"))
    return "PROXY docnet-proxy.corp.test:8080";
  return "PROXY proxy.corp.test:8080; DIRECT";
}
