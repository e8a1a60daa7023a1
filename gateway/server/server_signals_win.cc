#include <windows.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "gateway/server/server_signals.h"
#include "gateway/server/server_signals_win.h"

namespace h2gate {
namespace {

// The console control handler runs on a thread of its own: it reaches the
// live instance through these.
std::mutex g_mutex;
ServerSignals* g_current = nullptr;
// Set when the live instance is destroyed (the drain is over): a console
// close, logoff or shutdown waits for it, since Windows ends the process
// as soon as the handler returns (at the latest 5 s after a close, 20 s
// after a shutdown).
HANDLE g_gone = nullptr;
// ignoreSessionEndEvents() was called (a service).
std::atomic<bool> g_service{false};

const char* ctrlName(DWORD type) {
  switch (type) {
    case CTRL_C_EVENT:
      return "Ctrl+C";
    case CTRL_BREAK_EVENT:
      return "Ctrl+Break";
    case CTRL_CLOSE_EVENT:
      return "console close";
    case CTRL_LOGOFF_EVENT:
      return "logoff";
    case CTRL_SHUTDOWN_EVENT:
      return "shutdown";
    default:
      return "console control event";
  }
}

BOOL WINAPI onConsoleCtrl(DWORD type) {
  if (g_service.load() && (type == CTRL_LOGOFF_EVENT || type == CTRL_SHUTDOWN_EVENT))
    return TRUE;  // the service manager stops a service
  ServerSignals::requestStop(ctrlName(type));
  if (type == CTRL_CLOSE_EVENT || type == CTRL_LOGOFF_EVENT || type == CTRL_SHUTDOWN_EVENT) {
    HANDLE gone = nullptr;
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      gone = g_gone;
    }
    if (gone) ::WaitForSingleObject(gone, 20000);
  }
  return TRUE;  // handled: not the default ExitProcess
}

}  // namespace

struct ServerSignals::Impl {
  explicit Impl(asio::io_context& io) : io(io) {}
  asio::io_context& io;
  Handler handler;
  // Stops that came while no wait was pending (main thread only).
  std::vector<std::string> pending;
};

void ignoreSessionEndEvents() {
  g_service.store(true);
}

void ServerSignals::prepareProcess() {
  // WinSock raises no SIGPIPE; asio calls WSAStartup itself.
}

void ServerSignals::requestStop(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_current) return;
  Impl* impl = g_current->impl_.get();
  asio::post(impl->io, [impl, name] {
    if (!impl->handler) {
      impl->pending.push_back(name);
      return;
    }
    Handler h = std::move(impl->handler);
    impl->handler = nullptr;
    h(Kind::Stop, name);
  });
}

ServerSignals::ServerSignals(asio::io_context& io) : impl_(std::make_unique<Impl>(io)) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_current = this;
    if (!g_gone) g_gone = ::CreateEventW(nullptr, TRUE, FALSE, nullptr);
    ::ResetEvent(g_gone);
  }
  ::SetConsoleCtrlHandler(onConsoleCtrl, TRUE);
}

ServerSignals::~ServerSignals() {
  ::SetConsoleCtrlHandler(onConsoleCtrl, FALSE);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_current == this) g_current = nullptr;
  if (g_gone) ::SetEvent(g_gone);
}

void ServerSignals::asyncWait(Handler h) {
  if (!impl_->pending.empty()) {
    std::string name = std::move(impl_->pending.front());
    impl_->pending.erase(impl_->pending.begin());
    asio::post(impl_->io, [h = std::move(h), name] { h(Kind::Stop, name); });
    return;
  }
  impl_->handler = std::move(h);
}

void ServerSignals::cancel() {
  impl_->handler = nullptr;
  impl_->pending.clear();
}

}  // namespace h2gate
