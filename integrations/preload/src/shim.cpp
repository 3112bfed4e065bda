// Shim state, configuration and the per-thread guard.
#include "shim.hpp"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "stallscope/internal/config.hpp"
#include "stallscope/internal/note.hpp"

namespace cfg = ::stallscope::config;

namespace stallscope::preload {

std::atomic<bool> g_active{false};

ShimConfig g_config;

namespace detail {
thread_local constinit int t_depth __attribute__((tls_model("initial-exec"))) = 0;
thread_local constinit uint8_t t_kind __attribute__((tls_model("initial-exec"))) = kThreadUnknown;

// The recorder names its threads "stallscope-…" before doing anything else.
uint8_t classify_thread() noexcept {
  char name[17] = {};
  if (::prctl(PR_GET_NAME, name, 0, 0, 0) != 0) return kThreadUser;
  return std::strncmp(name, "stallscope", 10) == 0 ? kThreadInternal : kThreadUser;
}
}  // namespace detail

namespace {

std::atomic<pid_t> g_pid{0};

// Every variable through the configuration table (stallscope/internal/
// config.hpp): its parser, its range, its message. No allocation: this runs
// in the shim's constructor.
uint32_t env_u32(cfg::Id id) noexcept {
  char why[cfg::kMessageBytes];
  const int64_t v = cfg::env_integer(id, why, sizeof why);
  if (why[0] != '\0') shim_note(why);
  return static_cast<uint32_t>(v);
}

bool env_switch(cfg::Id id) noexcept {
  char why[cfg::kMessageBytes];
  const bool on = cfg::env_switch(id, why, sizeof why);
  if (why[0] != '\0') shim_note(why);
  return on;
}

}  // namespace

pid_t recorded_pid() noexcept { return g_pid.load(std::memory_order_relaxed); }
void set_recorded_pid(pid_t pid) noexcept { g_pid.store(pid, std::memory_order_relaxed); }

bool in_foreign_process() noexcept {
  return static_cast<pid_t>(::syscall(SYS_getpid)) != recorded_pid();
}

void shim_note(const char* text) noexcept { internal::note_text("stallscope: ", text); }

void load_shim_config() noexcept {
  char why[cfg::kMessageBytes];
  g_config.follow_children = cfg::env_word(cfg::Id::kFollow, why, sizeof why) == 0;
  if (why[0] != '\0') shim_note(why);
  g_config.classify_every = env_u32(cfg::Id::kPreloadClassifyEvery);
  g_config.wait_min_ns = env_u32(cfg::Id::kPreloadWaitMinUs) * 1000u;
  g_config.socket_min_ns = env_u32(cfg::Id::kPreloadSocketMinUs) * 1000u;
  g_config.socket_reads = env_switch(cfg::Id::kPreloadSockets);
  g_config.relays = env_switch(cfg::Id::kPreloadRelays);
  g_config.direct_reads = env_switch(cfg::Id::kPreloadDirect);
  g_config.native_stacks_hz = env_u32(cfg::Id::kPreloadNativeStacksHz);
}

}  // namespace stallscope::preload
