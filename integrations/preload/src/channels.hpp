// Channels made in this process tree (pipes, socketpairs, eventfds) and who
// wrote into them. The board is a shared anonymous mapping made before any
// fork, so a forked data worker's writes are visible to the trainer; an
// exec'd program starts without it, so its writes never make a channel look
// like a producer's.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "stallscope/format.hpp"

namespace stallscope::preload {

enum ChannelWriter : uint8_t {
  kWriterThread = 1u << 0,   // a thread of the creating process wrote
  kWriterForked = 1u << 1,   // a forked (not exec'd) descendant wrote
};

// Maps the board (constructor); false when mmap failed (no channel is then
// recognised and pipe waits are not recorded).
bool channels_init() noexcept;
// A new channel slot (0 = none left or no board); `type` is kPipe,
// kSocket (a socketpair) or kEventfd.
uint32_t channel_new(format::ChannelType type) noexcept;
// Called on every write into a channel, before the write: sets the writer
// bit once and notes this thread and the tick as the channel's last write.
void channel_note_write(uint32_t channel) noexcept;
// The channel's last write (zeros when unknown). The three fields are
// stored apart: under concurrent writers they may come from two writes.
struct ChannelWrite {
  uint32_t pid = 0, tid = 0;
  uint64_t tick = 0;
};
ChannelWrite channel_last_write(uint32_t channel) noexcept;
format::ChannelType channel_type(uint32_t channel) noexcept;
// A stable id for hand-off records: the creator's pid (high 32 bits) and
// the board slot (low 32), unique within the process tree.
uint64_t channel_stable_id(uint32_t channel) noexcept;
// Fork child: the cached thread id is the parent's.
void channels_reset_tid_after_fork() noexcept;
// ChannelWriter bits seen so far, excluding writes by `reader_tid` itself.
uint8_t channel_writers(uint32_t channel, pid_t reader_tid) noexcept;

}  // namespace stallscope::preload
