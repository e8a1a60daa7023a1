#include <csignal>
#include <mutex>

#include "gateway/server/server_signals.h"

namespace h2gate {
namespace {

// requestStop() from another thread reaches the live instance through this.
std::mutex g_mutex;
ServerSignals* g_current = nullptr;

}  // namespace

struct ServerSignals::Impl {
  explicit Impl(asio::io_context& io) : io(io), signals(io, SIGTERM, SIGINT) {
    signals.add(SIGHUP);
  }
  asio::io_context& io;
  asio::signal_set signals;
  Handler handler;  // the pending wait's, for requestStop()
};

void ServerSignals::prepareProcess() {
  std::signal(SIGPIPE, SIG_IGN);  // a closed app socket is an error code, not a signal
}

void ServerSignals::requestStop(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_current) return;
  Impl* impl = g_current->impl_.get();
  asio::post(impl->io, [impl, name] {
    Handler h = std::move(impl->handler);
    impl->handler = nullptr;
    impl->signals.cancel();  // the signal wait ends with operation_aborted
    if (h) h(Kind::Stop, name);
  });
}

ServerSignals::ServerSignals(asio::io_context& io) : impl_(std::make_unique<Impl>(io)) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_current = this;
}

ServerSignals::~ServerSignals() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_current == this) g_current = nullptr;
}

void ServerSignals::asyncWait(Handler h) {
  impl_->handler = std::move(h);
  impl_->signals.async_wait([impl = impl_.get()](const asio::error_code& ec, int sig) {
    if (ec || !impl->handler) return;
    Handler h = std::move(impl->handler);
    impl->handler = nullptr;
    if (sig == SIGHUP) return h(Kind::Reload, "SIGHUP");
    h(Kind::Stop, sig == SIGINT ? "SIGINT" : "SIGTERM");
  });
}

void ServerSignals::cancel() {
  impl_->handler = nullptr;
  impl_->signals.cancel();
}

}  // namespace h2gate
