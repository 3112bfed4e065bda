// Process-wide state of the preload shim: whether recording is on in this
// process, its pid (a vfork child sees another), its configuration, and the
// per-thread guard that keeps the shim's own calls (and the recorder's
// threads) out of the trace.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>

#define STALLSCOPE_SHIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace stallscope::preload {

struct ShimConfig {
  bool follow_children = true;  // STALLSCOPE_FOLLOW=none|children
  uint32_t classify_every = 256; // STALLSCOPE_PRELOAD_CLASSIFY_EVERY: 1 read in N
  uint32_t wait_min_ns = 20000; // blocking channel reads shorter are not waits
  bool direct_reads = true;     // STALLSCOPE_PRELOAD_DIRECT=on|off (direct_read.hpp)
  bool socket_reads = true;     // STALLSCOPE_PRELOAD_SOCKETS=on|off (socket_reads.hpp)
  uint32_t socket_min_ns = 20000; // STALLSCOPE_PRELOAD_SOCKET_MIN_US: shorter reads are summed
  bool relays = true;           // STALLSCOPE_PRELOAD_RELAYS=on|off (relays.hpp)
  uint32_t native_stacks_hz = 0; // STALLSCOPE_PRELOAD_NATIVE_STACKS_HZ (native_stacks.hpp)
};

// False until the constructor ran, and for good in an excluded program;
// never cleared once set (Guard relies on it).
extern std::atomic<bool> g_active;
extern ShimConfig g_config;  // set once by the constructor
inline const ShimConfig& config() noexcept { return g_config; }
// The pid recorded at start and after each fork.
pid_t recorded_pid() noexcept;
void set_recorded_pid(pid_t pid) noexcept;
// True in a vfork child (or any context where getpid() is not the
// recorded pid): nothing may be written there.
bool in_foreign_process() noexcept;

// Entered around the shim's own work: calls made meanwhile by the same
// thread (the recorder opening its file, interning a name) pass through.
// Threads of the recorder itself are marked once and never traced.
namespace detail {
enum : uint8_t { kThreadUnknown = 0, kThreadUser = 1, kThreadInternal = 2 };
// constinit: no TLS wrapper call on the hot path.
extern thread_local constinit int t_depth __attribute__((tls_model("initial-exec")));
extern thread_local constinit uint8_t t_kind __attribute__((tls_model("initial-exec")));
uint8_t classify_thread() noexcept;
}  // namespace detail

class Guard {
 public:
  Guard() noexcept : entered_(false) {
    if (__builtin_expect(detail::t_depth++ != 0, 0)) return;
    // A thread's kind is learnt only once g_active is set, and g_active is
    // never cleared: a known user thread need not read it (one page less
    // touched per call).
    if (__builtin_expect(detail::t_kind == detail::kThreadUser, 1)) {
      entered_ = true;
      return;
    }
    if (!g_active.load(std::memory_order_relaxed)) return;
    if (detail::t_kind == detail::kThreadUnknown) detail::t_kind = detail::classify_thread();
    entered_ = detail::t_kind == detail::kThreadUser;
  }
  ~Guard() { --detail::t_depth; }
  bool entered() const noexcept { return entered_; }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  bool entered_;
};

// The fork child's restart (pid, thread ids, recorder).
void shim_after_fork_child() noexcept;
// One line on stderr, prefixed "stallscope: " (unless STALLSCOPE_QUIET).
void shim_note(const char* text) noexcept;
void load_shim_config() noexcept;

}  // namespace stallscope::preload
