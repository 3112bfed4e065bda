// A pipe that wakes a thread of the shim out of poll. The program may close
// every descriptor and reuse the numbers (closefrom, close_range): each end
// is used only while it still is this pipe (same device and inode), so
// nothing is ever read from or written into the program's files.
#pragma once

#include <sys/types.h>

namespace stallscope::preload {

class WakePipe {
 public:
  // Raw pipe2 (the shim's own wrappers stay out). False when refused.
  bool open() noexcept;
  void wake() noexcept;
  // After poll found the read end readable: empties the pipe. False when
  // the descriptor is no longer this pipe (stop polling it).
  bool clear() noexcept;
  int read_fd() const noexcept { return r_; }
  // Closes whichever end still is this pipe (a fork child's cleanup too).
  void close() noexcept;

 private:
  bool ours(int fd) const noexcept;

  int r_ = -1, w_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace stallscope::preload
