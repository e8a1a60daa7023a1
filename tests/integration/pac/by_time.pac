// Time-dependent routing: backups at night and at weekends through the bulk
// proxy, the inspecting proxy in office hours, an evening proxy (UTC), a
// year-end change freeze.
function FindProxyForURL(url, host) {
  if (dnsDomainIs(host, ".corp.test"))
    return "DIRECT";
  if (shExpMatch(host, "backup*.example.test") &&
      (weekdayRange("SAT", "SUN") || timeRange(0, 5)))
    return "PROXY bulk.corp.test:8080";
  if (weekdayRange("MON", "FRI") && timeRange(8, 17))
    return "PROXY inspect.corp.test:8080; PROXY proxy.corp.test:8080";
  if (timeRange(18, 0, 23, 59, "GMT"))
    return "PROXY evening.corp.test:8080";
  if (dateRange(20, "DEC", 31, "DEC"))
    return "PROXY freeze.corp.test:8080";
  if (dateRange("MAR", "MAY") && weekdayRange("SAT"))
    return "DIRECT";
  if (shExpMatch(host, "*.media.test") && weekdayRange("FRI", "MON"))
    return "PROXY weekend-media.corp.test:8080";
  if (dateRange(2024) && timeRange(12, 13))
    return "PROXY lunch.corp.test:8080";
  return "PROXY proxy.corp.test:8080";
}
