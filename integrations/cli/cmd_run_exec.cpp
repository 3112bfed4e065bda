// Can LD_PRELOAD reach the program, and starting it. The dynamic loader
// applies LD_PRELOAD only to dynamically linked programs (an ELF with a
// PT_INTERP header) and ignores it for setuid/setgid programs that change
// identity and for programs with file capabilities run by a user other than
// root (secure-execution mode), so these are refused with a clear message
// instead of producing an empty trace (RELIABILITY.md 15, 45).
#include <elf.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli_files.hpp"
#include "cmd_run.hpp"
#include "commands.hpp"

namespace stallscope::cli::run {
namespace {

// Reads the ELF program headers of `fd`; true when one is PT_INTERP.
template <typename Ehdr, typename Phdr>
bool has_interp(int fd) {
  Ehdr eh;
  if (::pread(fd, &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh)) return false;
  if (eh.e_phentsize != sizeof(Phdr) || eh.e_phnum > 4096) return false;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Phdr ph;
    const off_t at = static_cast<off_t>(eh.e_phoff + i * sizeof(Phdr));
    if (::pread(fd, &ph, sizeof ph, at) != static_cast<ssize_t>(sizeof ph)) return false;
    if (ph.p_type == PT_INTERP) return true;
  }
  return false;
}

// "#!/usr/bin/env python3 -u" -> the interpreter file that will run.
std::string script_interpreter(const std::string& first_line) {
  std::istringstream in(first_line.substr(2));
  std::string interp, arg;
  in >> interp >> arg;
  if (interp.size() >= 4 && interp.compare(interp.size() - 4, 4, "/env") == 0 && !arg.empty() &&
      arg[0] != '-')
    return resolve_command(arg);
  return interp;
}

std::string elf_obstacle(const std::string& path, int fd) {
  unsigned char ident[EI_NIDENT] = {};
  if (::pread(fd, ident, sizeof ident, 0) != EI_NIDENT) return "";
  const bool interp = ident[EI_CLASS] == ELFCLASS64 ? has_interp<Elf64_Ehdr, Elf64_Phdr>(fd)
                                                    : has_interp<Elf32_Ehdr, Elf32_Phdr>(fd);
  if (interp) return "";
  return path +
         " is statically linked: LD_PRELOAD cannot attach to it. Link it with "
         "libstallscope_trace (docs/attach.md, \"C and C++ trainers\") instead";
}

}  // namespace

std::string resolve_command(const std::string& argv0) {
  if (argv0.find('/') != std::string::npos) return argv0;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string p = (dir.empty() ? "." : dir) + "/" + argv0;
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0)
      return p;
  }
  return "";
}

std::string attach_obstacle(const std::string& path) {
  struct stat st {};
  // Spawning reports a missing or non-regular program (never opened here:
  // a FIFO would block).
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  if (((st.st_mode & S_ISUID) && st.st_uid != ::getuid()) ||
      ((st.st_mode & S_ISGID) && st.st_gid != ::getgid()))
    return path +
           " is setuid or setgid: the dynamic loader ignores LD_PRELOAD for it, so "
           "stallscope cannot attach. Run it without the setuid bit, or as its owner";
  // File capabilities put a user other than root in secure-execution mode
  // too (root keeps LD_PRELOAD: no privilege is gained).
  char caps[64];
  if (::getuid() != 0 && ::getxattr(path.c_str(), "security.capability", caps, sizeof caps) > 0)
    return path +
           " has file capabilities (security.capability): the dynamic loader ignores "
           "LD_PRELOAD for it, so stallscope cannot attach. Run it as root, or a copy "
           "without capabilities (setcap -r)";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char head[256] = {};
  const ssize_t n = ::pread(fd, head, sizeof head - 1, 0);
  std::string out;
  if (n >= 4 && std::memcmp(head, ELFMAG, SELFMAG) == 0) {
    out = elf_obstacle(path, fd);
  } else if (n >= 2 && head[0] == '#' && head[1] == '!') {
    std::string line(head, static_cast<size_t>(n));
    line = line.substr(0, line.find('\n'));
    const std::string interp = script_interpreter(line);
    if (!interp.empty() && interp != path) out = attach_obstacle(interp);
  }
  ::close(fd);
  return out;
}

std::string script_interpreter_of(const std::string& path) {
  if (!not_a_regular_file(path).empty()) return "";
  std::ifstream in(path, std::ios::binary);
  std::string line;
  if (!std::getline(in, line) || line.rfind("#!", 0) != 0) return "";
  return script_interpreter(line);
}

pid_t spawn_child(const std::string& path, const std::vector<std::string>& argv,
                  const std::vector<std::string>& env, const sigset_t& child_mask) {
  std::vector<char*> a, e;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigmask(&attr, &child_mask);
  // Dispositions pass to the command as stallscope inherited them (a
  // signal ignored under nohup stays ignored), but for the ones stallscope
  // ignores itself. Its handled signals are blocked (the signalfd), and the
  // mask above restores them.
  const sigset_t dflt = child_signal_defaults();
  posix_spawnattr_setsigdefault(&attr, &dflt);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, path.c_str(), nullptr, &attr, a.data(), e.data());
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? pid : -rc;
}

}  // namespace stallscope::cli::run
