// Send-buffer tuning, one tuner per TCP connection (gateway/README.md,
// Send buffers).
//
// Windows turns send-buffer autotuning off for non-blocking sockets and
// leaves SO_SNDBUF at 8 KiB: an upload then moves 8 KiB per round trip. Like
// curl (7.61.1), the tuner asks Windows for the ideal send backlog
// (SIO_IDEAL_SEND_BACKLOG_QUERY) after successful sends, at most once a
// second, and sets SO_SNDBUF only when that value changed (it may shrink),
// clamped to kMaxBytes. On Linux and macOS the kernel tunes the buffer
// itself, and setting SO_SNDBUF would switch that off: the default there is
// to leave it alone. `fixed` pins SO_SNDBUF for users who must.
// TCP_NOTSENT_LOWAT (Linux/macOS) caps what waits unsent in the kernel, so
// h2 frames of a new stream are not queued behind megabytes of another.
//
// Platform-neutral: socket operations and the clock are injected, so the
// logic is unit-tested with fakes; systemSocketOps() gives the real ones
// (send_buffer_posix.cc, send_buffer_win.cc). Depends on the standard
// library only, so the Windows part cross-compiles on its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace h2gate::net {

struct SendBufferConfig {
  enum class Mode {
    Auto,          // Windows: ideal backlog; elsewhere: the kernel's autotuning
    Fixed,         // SO_SNDBUF = bytes, set once at connect
    IdealBacklog,  // follow the ideal send backlog where the OS reports one
  };
  Mode mode = Mode::Auto;
  uint32_t bytes = 0;          // Fixed only
  uint32_t notsent_lowat = 0;  // TCP_NOTSENT_LOWAT; 0 = leave unset
};

std::string modeName(SendBufferConfig::Mode m);

// What the tuner does to one socket. Each call reports failure as nullopt /
// false; the tuner never throws and ignores failures (e.g. WSAEINVAL on old
// Windows, WSAENOTCONN before connect).
class SocketOps {
 public:
  virtual ~SocketOps() = default;
  // SIO_IDEAL_SEND_BACKLOG_QUERY; nullopt where unsupported.
  virtual std::optional<uint32_t> idealSendBacklog() = 0;
  virtual bool setSendBuffer(uint32_t bytes) = 0;
  // SO_SNDBUF as the OS reports it (Linux doubles what was set).
  virtual std::optional<uint32_t> sendBuffer() = 0;
  // TCP_NOTSENT_LOWAT; false where unsupported.
  virtual bool setNotsentLowat(uint32_t bytes) = 0;
};

// The real operations on a connected socket (int fd on POSIX, SOCKET on
// Windows, as a 64-bit handle).
std::unique_ptr<SocketOps> systemSocketOps(uint64_t native_handle);
// True where the platform reports an ideal send backlog (Windows).
bool platformHasIdealBacklog();

class SendBufferTuner {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // Called when SO_SNDBUF was changed: (old, new) as the OS reports them.
  using OnChange = std::function<void(uint32_t from, uint32_t to)>;

  static constexpr uint32_t kMaxBytes = 16u << 20;
  static constexpr std::chrono::seconds kQueryInterval{1};

  SendBufferTuner(const SendBufferConfig& config, std::unique_ptr<SocketOps> ops,
                  Clock clock = &std::chrono::steady_clock::now, OnChange on_change = nullptr);

  // Once the socket is connected: applies `fixed` and TCP_NOTSENT_LOWAT.
  void onConnected();
  // After a successful send: follows the ideal backlog (at most once per
  // kQueryInterval). Cheap when nothing is due: one clock read.
  void afterSend();
  // SO_SNDBUF as last read (0 before onConnected).
  uint32_t sendBuffer() const { return current_; }
  // The mode in effect on this platform (Auto resolved).
  SendBufferConfig::Mode effectiveMode() const { return mode_; }

 private:
  void refresh();

  SendBufferConfig config_;
  SendBufferConfig::Mode mode_;
  std::unique_ptr<SocketOps> ops_;
  Clock clock_;
  OnChange on_change_;
  std::optional<std::chrono::steady_clock::time_point> last_query_;
  std::optional<uint32_t> last_set_;  // the ideal value we last applied
  uint32_t current_ = 0;
};

}  // namespace h2gate::net
