// The exec target's file read with raw system calls (the shim's own
// wrappers stay out of it, and a vfork child may run this), into stack
// buffers only.
#include "exec_check.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace stallscope::preload {
namespace {

constexpr size_t kPathMax = 4096;
constexpr unsigned kMaxPhdrs = 64;  // more: not a program worth a verdict

long sys_openat(int dirfd, const char* path, int flags) {
  return ::syscall(SYS_openat, dirfd, path, flags | O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
}
void sys_close(int fd) { (void)::syscall(SYS_close, fd); }
long sys_pread(int fd, void* buf, size_t n, off_t at) {
  return ::syscall(SYS_pread64, fd, buf, n, at);
}
bool sys_fstat(int fd, struct stat* st) {
  return ::syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH) == 0;
}

// The dynamic loader's own file (ld-linux-x86-64.so.2, ld.so, ld64.so.1)
// has no PT_INTERP yet runs programs under LD_PRELOAD: not static.
bool is_dynamic_loader(const char* path) {
  const char* slash = path != nullptr ? std::strrchr(path, '/') : nullptr;
  const char* name = slash != nullptr ? slash + 1 : path;
  return name != nullptr && (std::strncmp(name, "ld-", 3) == 0 || std::strncmp(name, "ld.so", 5) == 0 ||
                             std::strncmp(name, "ld64.so", 7) == 0);
}

template <typename Ehdr, typename Phdr>
bool elf_has_interp(int fd, bool* known) {
  Ehdr eh;
  *known = false;
  if (sys_pread(fd, &eh, sizeof eh, 0) != static_cast<long>(sizeof eh)) return false;
  if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) return false;
  if (eh.e_phentsize != sizeof(Phdr) || eh.e_phnum == 0 || eh.e_phnum > kMaxPhdrs) return false;
  Phdr ph[kMaxPhdrs];
  const size_t bytes = eh.e_phnum * sizeof(Phdr);
  if (sys_pread(fd, ph, bytes, static_cast<off_t>(eh.e_phoff)) != static_cast<long>(bytes))
    return false;
  *known = true;
  for (unsigned i = 0; i < eh.e_phnum; ++i)
    if (ph[i].p_type == PT_INTERP) return true;
  return false;
}

// An ELF program without an interpreter: the loader never runs.
bool elf_is_static(int fd, const char* path) {
  unsigned char ident[EI_NIDENT] = {};
  if (sys_pread(fd, ident, sizeof ident, 0) != EI_NIDENT) return false;
  if (std::memcmp(ident, ELFMAG, SELFMAG) != 0 || is_dynamic_loader(path)) return false;
  bool known = false;
  const bool interp = ident[EI_CLASS] == ELFCLASS64 ? elf_has_interp<Elf64_Ehdr, Elf64_Phdr>(fd, &known)
                                                    : elf_has_interp<Elf32_Ehdr, Elf32_Phdr>(fd, &known);
  return known && !interp;
}

// Set-id bits and file capabilities count for nothing on a nosuid mount
// or under no_new_privs: the exec changes no identity then.
bool privileges_apply(int fd) {
  struct statfs fs {};
  if (::syscall(SYS_fstatfs, fd, &fs) == 0 && (fs.f_flags & ST_NOSUID)) return false;
  return ::syscall(SYS_prctl, PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1;
}

// Secure-execution mode: the loader drops LD_PRELOAD of a path.
Untraceable identity_change(int fd, const struct stat& st) {
  if (!(st.st_mode & (S_ISUID | S_ISGID)) && ::syscall(SYS_getuid) == 0) return Untraceable::kNo;
  if (!privileges_apply(fd)) return Untraceable::kNo;
  if ((st.st_mode & S_ISUID) && st.st_uid != static_cast<uid_t>(::syscall(SYS_getuid)))
    return Untraceable::kSetuid;
  if ((st.st_mode & S_ISGID) && (st.st_mode & S_IXGRP) &&
      st.st_gid != static_cast<gid_t>(::syscall(SYS_getgid)))
    return Untraceable::kSetgid;
  // File capabilities raise a user other than root (commoncap.c: secureexec
  // unless the real uid is root and no id changes).
  char caps[64];
  if (::syscall(SYS_getuid) != 0 &&
      ::syscall(SYS_fgetxattr, fd, "security.capability", caps, sizeof caps) > 0)
    return Untraceable::kCapabilities;
  return Untraceable::kNo;
}

// "#!interp …": the interpreter's path into `out` ("" if not a script).
void script_interpreter(int fd, char* out, size_t size) {
  out[0] = '\0';
  char head[256];
  const long n = sys_pread(fd, head, sizeof head - 1, 0);
  if (n < 3 || head[0] != '#' || head[1] != '!') return;
  head[n] = '\0';
  const char* p = head + 2;
  while (*p == ' ' || *p == '\t') ++p;
  size_t k = 0;
  while (p[k] != '\0' && p[k] != ' ' && p[k] != '\t' && p[k] != '\n' && k + 1 < size) {
    out[k] = p[k];
    ++k;
  }
  out[k] = '\0';
}

Untraceable check_fd(int fd, const char* path, char* interp, size_t interp_size, int depth);

Untraceable check_path(int dirfd, const char* path, int at_flags, char* interp, size_t interp_size,
                       int depth) {
  // Only a regular file is opened: opening a device can do something.
  struct stat st {};
  if (::syscall(SYS_newfstatat, dirfd, path, &st, at_flags & AT_SYMLINK_NOFOLLOW) != 0 ||
      !S_ISREG(st.st_mode))
    return Untraceable::kNo;
  const long fd = sys_openat(dirfd, path, (at_flags & AT_SYMLINK_NOFOLLOW) ? O_NOFOLLOW : 0);
  if (fd < 0) return Untraceable::kNo;  // unreadable or missing: exec says what it says
  const Untraceable why = check_fd(static_cast<int>(fd), path, interp, interp_size, depth);
  sys_close(static_cast<int>(fd));
  return why;
}

Untraceable check_fd(int fd, const char* path, char* interp, size_t interp_size, int depth) {
  struct stat st {};
  if (!sys_fstat(fd, &st) || !S_ISREG(st.st_mode)) return Untraceable::kNo;
  if (elf_is_static(fd, path)) return Untraceable::kStatic;
  char script[256];
  script_interpreter(fd, script, sizeof script);
  if (script[0] == '/' && depth == 0) {  // set-id bits of a script are ignored by Linux
    const Untraceable why = check_path(-100, script, 0, nullptr, 0, depth + 1);
    if (why != Untraceable::kNo && interp != nullptr && interp_size > 0) {
      std::strncpy(interp, script, interp_size - 1);
      interp[interp_size - 1] = '\0';
    }
    return why;
  }
  return script[0] != '\0' ? Untraceable::kNo : identity_change(fd, st);
}

// execvp's search: the first regular, executable file of that name on
// PATH (default "/bin:/usr/bin", as glibc's), into `out`.
bool search_path(const char* name, char* out) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) path = "/bin:/usr/bin";
  const size_t name_len = std::strlen(name);
  while (true) {
    const char* end = std::strchr(path, ':');
    const size_t dir_len = end != nullptr ? static_cast<size_t>(end - path) : std::strlen(path);
    if (dir_len + 1 + name_len + 1 <= kPathMax) {
      size_t k = 0;
      if (dir_len == 0) {
        out[k++] = '.';
      } else {
        std::memcpy(out, path, dir_len);
        k = dir_len;
      }
      out[k++] = '/';
      std::memcpy(out + k, name, name_len + 1);
      struct stat st {};
      if (::syscall(SYS_newfstatat, -100, out, &st, 0) == 0 && S_ISREG(st.st_mode) &&
          ::syscall(SYS_faccessat, -100, out, X_OK) == 0)
        return true;
    }
    if (end == nullptr) return false;
    path = end + 1;
  }
}

void append(char* out, size_t size, size_t* at, const char* text) {
  while (*text != '\0' && *at + 1 < size) out[(*at)++] = *text++;
  out[*at] = '\0';
}

const char* reason_text(Untraceable why) {
  switch (why) {
    case Untraceable::kStatic: return "statically linked: LD_PRELOAD cannot reach it";
    case Untraceable::kSetuid: return "setuid: the dynamic loader ignores LD_PRELOAD for it";
    case Untraceable::kSetgid: return "setgid: the dynamic loader ignores LD_PRELOAD for it";
    case Untraceable::kCapabilities:
      return "file capabilities: the dynamic loader ignores LD_PRELOAD for it";
    case Untraceable::kNo: break;
  }
  return "";
}

}  // namespace

Untraceable check_exec_target(const ExecTarget& t, char* interp, size_t interp_size) noexcept {
  if (interp != nullptr && interp_size > 0) interp[0] = '\0';
  if (t.fd >= 0) return check_fd(t.fd, t.path, interp, interp_size, 0);
  if (t.path == nullptr) return Untraceable::kNo;
  if (t.path[0] == '\0' && (t.at_flags & AT_EMPTY_PATH))
    return check_fd(t.dirfd, nullptr, interp, interp_size, 0);
  if (t.search && std::strchr(t.path, '/') == nullptr) {
    char found[kPathMax];
    if (t.path[0] == '\0' || !search_path(t.path, found)) return Untraceable::kNo;
    return check_path(-100, found, 0, interp, interp_size, 0);
  }
  return check_path(t.dirfd, t.path, t.at_flags, interp, interp_size, 0);
}

void untraceable_text(char* out, size_t size, const char* verb, const char* path,
                      const char* interp, Untraceable why) noexcept {
  if (size == 0) return;
  size_t at = 0;
  out[0] = '\0';
  append(out, size, &at, verb);
  append(out, size, &at, " of ");
  append(out, size, &at, path != nullptr ? path : "(descriptor)");
  append(out, size, &at, ": cannot be traced (");
  if (interp != nullptr && interp[0] != '\0') {
    append(out, size, &at, "its interpreter ");
    append(out, size, &at, interp);
    append(out, size, &at, ": ");
  }
  append(out, size, &at, reason_text(why));
  append(out, size, &at, ")");
}

}  // namespace stallscope::preload
