// Shim state, configuration and the per-thread guard.
#include "shim.hpp"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/env_integer.hpp"

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

// Parsed as the recorder parses its variables (common/env_integer.hpp), and
// a bad value named as it names them.
uint32_t env_u32(const char* var, uint32_t dflt, uint32_t lo, uint32_t hi) noexcept {
  const char* s = std::getenv(var);
  if (s == nullptr || *s == '\0') return dflt;
  int64_t v = 0;
  if (!parse_env_integer(s, lo, hi, &v)) {
    char note[384];
    std::snprintf(note, sizeof note, "%s='%.200s' is not an integer in [%u, %u]; using the default",
                  var, s, lo, hi);
    shim_note(note);
    return dflt;
  }
  return static_cast<uint32_t>(v);
}

bool env_on_off(const char* var, bool dflt) noexcept {
  const char* s = std::getenv(var);
  if (s == nullptr || *s == '\0') return dflt;
  if (std::strcmp(s, "on") == 0) return true;
  if (std::strcmp(s, "off") == 0) return false;
  char note[384];
  std::snprintf(note, sizeof note, "%s='%.200s' must be 'on' or 'off'; using '%s'", var, s,
                dflt ? "on" : "off");
  shim_note(note);
  return dflt;
}

}  // namespace

pid_t recorded_pid() noexcept { return g_pid.load(std::memory_order_relaxed); }
void set_recorded_pid(pid_t pid) noexcept { g_pid.store(pid, std::memory_order_relaxed); }

bool in_foreign_process() noexcept {
  return static_cast<pid_t>(::syscall(SYS_getpid)) != recorded_pid();
}

void shim_note(const char* text) noexcept {
  const char* quiet = std::getenv("STALLSCOPE_QUIET");
  // As the recorder reads it (docs/configuration.md): "on"; "1" is accepted too.
  if (quiet != nullptr && (std::strcmp(quiet, "on") == 0 || std::strcmp(quiet, "1") == 0)) return;
  char line[512];
  const size_t n = std::strlen(text);
  const size_t k = n < sizeof line - 14 ? n : sizeof line - 14;
  std::memcpy(line, "stallscope: ", 12);
  std::memcpy(line + 12, text, k);
  line[12 + k] = '\n';
  (void)!::syscall(SYS_write, 2, line, 13 + k);
}

void load_shim_config() noexcept {
  const char* follow = std::getenv("STALLSCOPE_FOLLOW");
  if (follow != nullptr && std::strcmp(follow, "none") == 0) {
    g_config.follow_children = false;
  } else if (follow != nullptr && *follow != '\0' && std::strcmp(follow, "children") != 0) {
    shim_note("STALLSCOPE_FOLLOW must be 'none' or 'children'; using 'children'");
  }
  g_config.classify_every = env_u32("STALLSCOPE_PRELOAD_CLASSIFY_EVERY", 256, 1, 1u << 20);
  g_config.wait_min_ns = env_u32("STALLSCOPE_PRELOAD_WAIT_MIN_US", 20, 0, 1000000) * 1000u;
  g_config.socket_min_ns = env_u32("STALLSCOPE_PRELOAD_SOCKET_MIN_US", 20, 0, 1000000) * 1000u;
  g_config.socket_reads = env_on_off("STALLSCOPE_PRELOAD_SOCKETS", true);
  g_config.relays = env_on_off("STALLSCOPE_PRELOAD_RELAYS", true);
  const char* direct = std::getenv("STALLSCOPE_PRELOAD_DIRECT");
  if (direct != nullptr && std::strcmp(direct, "off") == 0) {
    g_config.direct_reads = false;
  } else if (direct != nullptr && *direct != '\0' && std::strcmp(direct, "on") != 0) {
    shim_note("STALLSCOPE_PRELOAD_DIRECT must be 'on' or 'off'; using 'on'");
  }
}

}  // namespace stallscope::preload
