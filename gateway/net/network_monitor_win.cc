// NetworkMonitor's Windows parts: iphlpapi change notifications (interfaces,
// unicast addresses, routes) posted to the io_context, and unbiased vs biased
// interrupt time for suspend detection. Not in the main (Linux) build: CMake
// excludes *_win.cc there; tests/windows/ cross-builds it with mingw-w64 and
// runs its test under wine (which may deliver no notifications at all).
//
// Windows calls the callbacks on its own threads. They only format a line
// and post it; the state they share with the io_context's thread lives in a
// Shared object that outlives every registration (CancelMibChangeNotify2
// waits for callbacks in progress) and every posted handler (each holds a
// shared_ptr to it).
#include "gateway/net/network_monitor.h"

#include <winsock2.h>
#include <ws2tcpip.h>

#include <iphlpapi.h>
#include <netioapi.h>
#include <windows.h>

#include <atomic>
#include <map>
#include <mutex>
#include <utility>

namespace h2gate::net {
namespace {

std::string ipText(const SOCKADDR_INET& a) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (a.si_family == AF_INET)
    ::inet_ntop(AF_INET, &a.Ipv4.sin_addr, text, sizeof text);
  else if (a.si_family == AF_INET6)
    ::inet_ntop(AF_INET6, &a.Ipv6.sin6_addr, text, sizeof text);
  return text;
}

const char* familyText(ADDRESS_FAMILY f) {
  return f == AF_INET ? "IPv4" : f == AF_INET6 ? "IPv6" : "IP";
}

class Shared : public std::enable_shared_from_this<Shared> {
 public:
  Shared(asio::io_context& io, NetworkWatcher::Note note) : io_(io), note_(std::move(note)) {}

  // Any thread.
  void post(std::string what) {
    if (stopped_) return;
    asio::post(io_, [self = shared_from_this(), what = std::move(what)]() mutable {
      if (!self->stopped_) self->note_(std::move(what));
    });
  }
  // The io_context's thread, after the registrations are cancelled.
  void stop() { stopped_ = true; }

  // Whether the interface's connected state changed (parameter
  // notifications also come for metrics, MTU and the like).
  bool connectedChanged(ADDRESS_FAMILY family, NET_IFINDEX index, bool connected) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, fresh] = connected_.try_emplace({family, index}, connected);
    if (fresh) return false;
    if (it->second == connected) return false;
    it->second = connected;
    return true;
  }
  void forget(ADDRESS_FAMILY family, NET_IFINDEX index) {
    std::lock_guard<std::mutex> lock(mu_);
    connected_.erase({family, index});
  }

 private:
  asio::io_context& io_;
  NetworkWatcher::Note note_;
  std::atomic<bool> stopped_{false};
  std::mutex mu_;
  std::map<std::pair<ADDRESS_FAMILY, NET_IFINDEX>, bool> connected_;
};

void NETIOAPI_API_ onInterface(PVOID ctx, PMIB_IPINTERFACE_ROW row, MIB_NOTIFICATION_TYPE type) {
  auto* s = static_cast<Shared*>(ctx);
  if (!row) return;  // MibInitialNotification
  const std::string name =
      std::string(familyText(row->Family)) + " interface " + std::to_string(row->InterfaceIndex);
  switch (type) {
    case MibAddInstance:
      s->connectedChanged(row->Family, row->InterfaceIndex, row->Connected);
      if (row->Connected) s->post(name + " up");
      break;
    case MibDeleteInstance:
      s->forget(row->Family, row->InterfaceIndex);
      s->post(name + " removed");
      break;
    case MibParameterNotification:
      if (s->connectedChanged(row->Family, row->InterfaceIndex, row->Connected))
        s->post(name + (row->Connected ? " up" : " down"));
      break;
    default:
      break;
  }
}

void NETIOAPI_API_ onAddress(PVOID ctx, PMIB_UNICASTIPADDRESS_ROW row, MIB_NOTIFICATION_TYPE type) {
  auto* s = static_cast<Shared*>(ctx);
  if (!row) return;
  // Parameter notifications are lifetime refreshes and DAD progress.
  if (type != MibAddInstance && type != MibDeleteInstance) return;
  s->post("address " + ipText(row->Address) + "/" + std::to_string(row->OnLinkPrefixLength) +
          (type == MibAddInstance ? " added on interface " : " removed from interface ") +
          std::to_string(row->InterfaceIndex));
}

void NETIOAPI_API_ onRoute(PVOID ctx, PMIB_IPFORWARD_ROW2 row, MIB_NOTIFICATION_TYPE type) {
  auto* s = static_cast<Shared*>(ctx);
  if (!row) return;
  if (type != MibAddInstance && type != MibDeleteInstance) return;  // metric/lifetime updates
  std::string text = row->DestinationPrefix.PrefixLength == 0
                         ? std::string("default")
                         : ipText(row->DestinationPrefix.Prefix) + "/" +
                               std::to_string(row->DestinationPrefix.PrefixLength);
  const std::string hop = ipText(row->NextHop);
  if (hop != "0.0.0.0" && hop != "::" && hop != "?") text += " via " + hop;
  text += " on interface " + std::to_string(row->InterfaceIndex);
  s->post("route " + text + (type == MibAddInstance ? " added" : " removed"));
}

class WinWatcher final : public NetworkWatcher {
 public:
  WinWatcher(asio::io_context& io, Note note)
      : shared_(std::make_shared<Shared>(io, std::move(note))) {}
  ~WinWatcher() override { stop(); }

  std::string start() override {
    std::string problems;
    auto check = [&](const char* what, NETIO_STATUS status) {
      if (status == NO_ERROR) return;
      problems += (problems.empty() ? "" : "; ") + std::string(what) + " failed (error " +
                  std::to_string(status) + ")";
    };
    check("NotifyIpInterfaceChange",
          ::NotifyIpInterfaceChange(AF_UNSPEC, &onInterface, shared_.get(), FALSE, &interfaces_));
    check("NotifyUnicastIpAddressChange",
          ::NotifyUnicastIpAddressChange(AF_UNSPEC, &onAddress, shared_.get(), FALSE, &addresses_));
    check("NotifyRouteChange2",
          ::NotifyRouteChange2(AF_UNSPEC, &onRoute, shared_.get(), FALSE, &routes_));
    return problems;
  }

  void stop() override {
    // Cancelling waits for callbacks in progress; none runs afterwards.
    for (HANDLE* h : {&interfaces_, &addresses_, &routes_}) {
      if (*h) ::CancelMibChangeNotify2(*h);
      *h = nullptr;
    }
    shared_->stop();
  }

 private:
  std::shared_ptr<Shared> shared_;
  HANDLE interfaces_ = nullptr;
  HANDLE addresses_ = nullptr;
  HANDLE routes_ = nullptr;
};

}  // namespace

SuspendClock systemSuspendClock() {
  return [] {
    // Interrupt time in 100 ns units without the time spent asleep; the
    // tick count (ms) with it.
    ULONGLONG unbiased = 0;
    ::QueryUnbiasedInterruptTime(&unbiased);
    const ULONGLONG ticks = ::GetTickCount64();
    return SuspendClockReading{std::chrono::nanoseconds(static_cast<int64_t>(unbiased) * 100),
                               std::chrono::milliseconds(static_cast<int64_t>(ticks))};
  };
}

std::unique_ptr<NetworkWatcher> makeNetworkWatcher(asio::io_context& io,
                                                   NetworkWatcher::Note note) {
  return std::make_unique<WinWatcher>(io, std::move(note));
}

}  // namespace h2gate::net
