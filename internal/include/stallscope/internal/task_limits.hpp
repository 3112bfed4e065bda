// Whether stallscope may start threads of its own under a process or
// thread limit (RELIABILITY.md 40). Each thread counts against the user's
// RLIMIT_NPROC and the cgroup's pids.max like one of the program's own: a
// program that forks workers near its limit must not find its budget spent
// by the recorder. Header-only and raw system calls (no allocation: the
// check runs at the recorder's start, possibly with memory exhausted).
//
//   room = min(RLIMIT_NPROC - the real user's tasks,     (when it binds: not
//              pids.max - pids.current, for the cgroup    root, no
//              and each ancestor that has a limit)        CAP_SYS_RESOURCE/ADMIN)
//   room < threads + max(kMinSpareTasks, limit / 16): no threads, tracing off
#pragma once

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace stallscope::sys {

// Tasks left to the program beyond stallscope's threads, at the least.
inline constexpr int64_t kMinSpareTasks = 8;

struct TaskRoom {
  int64_t room = INT64_MAX;   // tasks that may still start; INT64_MAX: no limit binds
  int64_t limit = 0;          // the binding limit
  int64_t used = 0;           // tasks counted against it
  const char* what = nullptr;  // "RLIMIT_NPROC (ulimit -u)" or "the cgroup's pids.max"
};

namespace task_limits_detail {

// Reads a small file into buf (NUL-terminated); bytes read or -1.
inline ssize_t read_small(const char* path, char* buf, size_t size) noexcept {
  const int fd = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
  if (fd < 0) return -1;
  ssize_t n = ::syscall(SYS_read, fd, buf, size - 1);
  ::syscall(SYS_close, fd);
  buf[n > 0 ? n : 0] = '\0';
  return n;
}

// The number after `key` in /proc text (`key` includes the colon).
inline int64_t field(const char* text, const char* key) noexcept {
  const char* at = std::strstr(text, key);
  return at != nullptr ? std::strtoll(at + std::strlen(key), nullptr, 10) : -1;
}

inline bool has_resource_caps() noexcept {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  if (::syscall(SYS_capget, &h, d) != 0) return false;
  auto has = [&d](int cap) { return (d[cap / 32].effective >> (cap % 32)) & 1u; };
  return has(CAP_SYS_RESOURCE) || has(CAP_SYS_ADMIN);
}

// Tasks (threads) of real user `uid`, as the kernel counts them for
// RLIMIT_NPROC; -1 when /proc cannot be listed.
inline int64_t tasks_of_user(uid_t uid) noexcept {
  const int dir = static_cast<int>(
      ::syscall(SYS_openat, AT_FDCWD, "/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir < 0) return -1;
  int64_t tasks = 0;
  alignas(8) char dents[4096];
  char path[64], text[1024];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, dents, sizeof dents);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      const auto reclen = *reinterpret_cast<const unsigned short*>(dents + off + 16);
      const char* name = dents + off + 19;
      off += reclen;
      if (name[0] < '1' || name[0] > '9') continue;
      struct stat st {};
      std::snprintf(path, sizeof path, "/proc/%s", name);
      if (::stat(path, &st) != 0 || st.st_uid != uid) continue;  // owner: the effective uid
      std::snprintf(path, sizeof path, "/proc/%s/status", name);
      if (read_small(path, text, sizeof text) <= 0) continue;
      if (field(text, "\nUid:") != static_cast<int64_t>(uid)) continue;  // the real uid
      const int64_t threads = field(text, "\nThreads:");
      tasks += threads > 0 ? threads : 1;
    }
  }
  ::syscall(SYS_close, dir);
  return tasks;
}

// Tasks on the whole machine (/proc/loadavg's "running/total"): a bound on
// any user's, read before counting theirs; -1 when unknown.
inline int64_t tasks_on_machine() noexcept {
  char text[128];
  if (read_small("/proc/loadavg", text, sizeof text) <= 0) return -1;
  const char* slash = std::strchr(text, '/');
  return slash != nullptr ? std::strtoll(slash + 1, nullptr, 10) : -1;
}

inline void consider(TaskRoom& r, int64_t limit, int64_t used, const char* what) noexcept {
  if (limit < 0 || used < 0) return;
  const int64_t room = limit > used ? limit - used : 0;
  if (room < r.room) r = TaskRoom{room, limit, used, what};
}

// The pids controller's limits on this process's cgroup and its ancestors.
inline void consider_cgroup(TaskRoom& r) noexcept {
  char text[1024];
  if (read_small("/proc/self/cgroup", text, sizeof text) <= 0) return;
  // cgroup v2 ("0::/path") or the v1 pids hierarchy ("N:pids:/path").
  const char* line = std::strstr(text, ":pids:");
  const char* base = "/sys/fs/cgroup/pids";
  if (line != nullptr) {
    line += 6;
  } else if ((line = std::strstr(text, "0::")) != nullptr &&
             (line == text || line[-1] == '\n')) {
    line += 3;
    base = "/sys/fs/cgroup";
  } else {
    return;
  }
  char cg[512];
  size_t len = std::strcspn(line, "\n");
  if (len >= sizeof cg) return;
  std::memcpy(cg, line, len);
  cg[len] = '\0';
  char path[700], value[64];
  for (;;) {
    std::snprintf(path, sizeof path, "%s%s/pids.max", base, len > 1 ? cg : "");
    if (read_small(path, value, sizeof value) > 0 && value[0] >= '0' && value[0] <= '9') {
      const int64_t max = std::strtoll(value, nullptr, 10);
      std::snprintf(path, sizeof path, "%s%s/pids.current", base, len > 1 ? cg : "");
      if (read_small(path, value, sizeof value) > 0)
        consider(r, max, std::strtoll(value, nullptr, 10), "the cgroup's pids.max");
    }
    if (len <= 1) break;
    char* slash = std::strrchr(cg, '/');
    if (slash == nullptr) break;
    *slash = '\0';
    len = slash == cg ? 1 : static_cast<size_t>(slash - cg);
    if (slash == cg) cg[0] = '/', cg[1] = '\0';
  }
}

}  // namespace task_limits_detail

// How many more tasks this process may start, by the tightest limit.
inline TaskRoom task_room() noexcept {
  namespace d = task_limits_detail;
  TaskRoom r;
  rlimit lim{};
  const uid_t uid = ::getuid();
  if (::getrlimit(RLIMIT_NPROC, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && uid != 0 &&
      !d::has_resource_caps()) {
    // The machine's count when it leaves room enough: no walk through /proc.
    const auto limit = static_cast<int64_t>(lim.rlim_cur);
    const int64_t machine = d::tasks_on_machine();
    const bool roomy = machine >= 0 && machine + limit / 8 + kMinSpareTasks + 8 < limit;
    d::consider(r, limit, roomy ? machine : d::tasks_of_user(uid), "RLIMIT_NPROC (ulimit -u)");
  }
  d::consider_cgroup(r);
  return r;
}

// Whether `threads` more tasks of stallscope's leave the program enough.
inline bool room_for_threads(const TaskRoom& r, int64_t threads) noexcept {
  if (r.room == INT64_MAX) return true;
  const int64_t spare = r.limit / 16 > kMinSpareTasks ? r.limit / 16 : kMinSpareTasks;
  return r.room >= threads + spare;
}

}  // namespace stallscope::sys
