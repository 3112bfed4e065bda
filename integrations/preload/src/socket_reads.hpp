// Reads from network sockets (AF_INET, AF_INET6; stream or datagram) are
// storage of the network tier: an object store, an HTTP or gRPC client
// fetching a sample. Unix sockets and pipes never are (DataLoader workers
// hand tensors and descriptors over them; channels.hpp covers those).
//
// What is recorded (docs/attach-preload.md, "Socket reads"): each read that
// returned bytes, as a storage_read named by the peer ("tcp:10.0.0.5:443"),
// tier network, every byte a miss (cache_method tier). Its span starts at
// the thread's blocking poll/select for that socket when the read follows
// one right away (a socket with a timeout waits there, not in recv). Reads
// shorter than STALLSCOPE_PRELOAD_SOCKET_MIN_US are summed per thread and
// socket into one record, so the trace grows with the time spent reading,
// not with the number of calls. EAGAIN, errors and end of stream: nothing.
#pragma once

#include <cstdint>

#include "fd_table.hpp"

namespace stallscope::preload {

// True for the sockets whose reads are storage.
bool is_network_socket(int domain, int type) noexcept;
// The slot for a network socket made by socket() (`type` with its flags):
// kSocket, or kForeign when socket reads are off.
FdInfo network_socket_info(int type) noexcept;
// A socket descriptor the shim did not see made (accept, inherited): what
// it is, from getsockopt. kForeign unless a network socket.
FdInfo classify_socket(int fd, uint8_t flags) noexcept;

// Once, by the constructor, after the clock is calibrated and before any
// read is traced.
void socket_reads_init() noexcept;
// After a read of socket `fd` (slot `info`) that began at `t0` (ticks) and
// returned `bytes` > 0. Leaves errno alone.
void record_socket_read(int fd, FdInfo& info, uint64_t t0, uint64_t bytes) noexcept;
// A blocking poll/select of this thread for input on socket `fd`, from `t0`
// until now, returned with events.
void socket_poll_ended(int fd, uint64_t t0) noexcept;
// Before `fd` is closed: the calling thread's summed short reads of it are
// written out.
void socket_reads_closing(int fd) noexcept;
// Fork child: the parent's pending sums are not the child's.
void socket_reads_after_fork() noexcept;

}  // namespace stallscope::preload
