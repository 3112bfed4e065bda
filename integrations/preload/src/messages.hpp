// Reads of a producer's channel put back together into messages: one
// channel_handoff record per message received (docs/attach-preload.md,
// "Hand-offs"), and one data wait per message that blocked long enough.
//
// Each thread assembles one message at a time in its own TLS (no lock, no
// allocation):
// - multiprocessing framing (Connection._recv_bytes): a 4-byte read whose
//   bytes are a big-endian int32 N > 0, then reads that each ask for what
//   is left of the N payload bytes; N == -1: an 8-byte length first. The
//   message ends with its last payload byte.
// - otherwise a burst: reads of the same descriptor, each starting less
//   than kBurstGapNs after the previous one ended. An eventfd read is one
//   message by itself. A burst ends at the thread's next read that does
//   not continue it, at close() of its descriptor, at thread exit (once the
//   recorder has a buffer for the thread) and at process exit (the exiting
//   thread's only).
// A blocking poll/select/epoll_wait of the channel that returned less than
// kPollGapNs before the message's first read is the start of the get.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "fd_table.hpp"

namespace stallscope::preload {

inline constexpr int64_t kBurstGapNs = 100000;  // reads closer than this: one message
inline constexpr int64_t kPollGapNs = 1000000;  // a poll this close before a read: its get

// One read of channel `info.channel` on `fd`, [t0, t1) in ticks, that asked
// for `asked` bytes into `buf` and returned `result`. Call inside the read's
// Guard; keeps errno.
void channel_read(int fd, const FdInfo& info, const void* buf, uint64_t asked, ssize_t result,
                  uint64_t t0, uint64_t t1) noexcept;
// A blocking wait for input that returned ready, [t0, t1): on `channel`, or
// on an epoll instance (`any`: the next read of any channel may follow it).
void channel_polled(uint32_t channel, bool any, uint64_t t0, uint64_t t1) noexcept;
// close(fd) by this thread: its message on fd ends.
void channel_closing(int fd) noexcept;
// Ends this thread's message (process exit).
void channel_flush_thread() noexcept;
// Fork child: the forking thread's message and thread id are the parent's.
void messages_after_fork() noexcept;

}  // namespace stallscope::preload
