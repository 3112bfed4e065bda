// Whether a program about to be exec'd or spawned can be traced: the
// dynamic loader never sees a statically linked program, and ignores
// LD_PRELOAD for one whose exec changes identity (setuid/setgid to another
// owner, or file capabilities for a user other than root: the kernel's
// secure-execution mode). Such a child runs untraced; the wrappers say so
// instead of leaving it to look like its parent (RELIABILITY.md 15, 45).
//
// Only raw system calls and the caller's stack: safe in a vfork child
// (RELIABILITY.md 13), where nothing may be allocated, locked or recorded.
#pragma once

#include <cstddef>

namespace stallscope::preload {

inline constexpr size_t kChildNoteBytes = 512;  // a note's text, at most

enum class Untraceable { kNo, kStatic, kSetuid, kSetgid, kCapabilities };

struct ExecTarget {
  int dirfd = -100;           // AT_FDCWD, or execveat's directory
  const char* path = nullptr; // as given to exec (may be null for fexecve)
  int fd = -1;                // fexecve's descriptor (path unused then)
  int at_flags = 0;           // execveat's AT_EMPTY_PATH / AT_SYMLINK_NOFOLLOW
  bool search = false;        // execvp/posix_spawnp: a name without '/' is looked up on PATH
};

// What stands in the way, if anything. A program that cannot be read or
// found is kNo (the exec reports that itself). A script is judged by its
// interpreter (one level: "#!/usr/bin/env python3" checks env, whose own
// exec is checked again under the shim); then `interp` (if given) gets the
// interpreter's path, else it is set to "".
Untraceable check_exec_target(const ExecTarget& target, char* interp = nullptr,
                              size_t interp_size = 0) noexcept;

// "exec of PATH: cannot be traced (REASON)" into `out` (always
// terminated); `verb` is "exec" or "spawn"; `interp` as above, or "". No
// allocation.
void untraceable_text(char* out, size_t size, const char* verb, const char* path,
                      const char* interp, Untraceable why) noexcept;

// A vfork child may not record: its note waits in one of a few fixed slots
// of the (shared) memory, claimed with an atomic exchange, until the
// parent records it as a mark at its next fork, exec, spawn or at exit
// (record_child_notes). A note that finds no free slot is on stderr only.
void leave_child_note(const char* text) noexcept;
// Records the waiting notes (never in a vfork child, nor a signal handler).
void record_child_notes() noexcept;
// A fork child starts with none (they are its parent's).
void forget_child_notes() noexcept;

}  // namespace stallscope::preload
