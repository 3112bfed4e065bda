#include "messages.hpp"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "channels.hpp"
#include "stallscope/internal/inline_records.hpp"
#include "shim.hpp"
#include "stallscope/clock.hpp"
#include "stallscope/trace.hpp"

namespace stallscope::preload {

namespace {

enum class Stage : uint8_t {
  kNone = 0,
  kMpLength,   // an mp header of -1 was read: the 8-byte length follows
  kMpPayload,  // mp payload bytes are due (`left`)
  kBurst,      // a plain message: reads close together
};

// Trivial, so that TLS access is one instruction and fork copies it plainly.
struct Message {
  Stage stage = Stage::kNone;
  bool mp_started = false;  // a payload read came: this is mp framing for sure
  int fd = -1;
  uint32_t channel = 0;
  uint32_t parts = 0;
  uint64_t left = 0;       // mp payload bytes not read yet
  uint64_t unfilled = 0;   // what the last read asked for and did not get
  uint64_t bytes = 0;
  uint64_t requested = 0;  // ticks: the get began (first read or its poll)
  uint64_t last_end = 0;   // ticks: the last read ended
  uint64_t blocked = 0;    // ticks spent in the reads and the poll
  ChannelWrite put;        // the last write seen before one of the reads returned
};

struct Poll {
  uint32_t channel = 0;
  bool any = false;
  uint64_t t0 = 0, t1 = 0;
};

thread_local constinit Message t_msg __attribute__((tls_model("initial-exec")));
thread_local constinit Poll t_poll __attribute__((tls_model("initial-exec")));
thread_local constinit pid_t t_tid __attribute__((tls_model("initial-exec"))) = 0;

pid_t current_tid() noexcept {
  if (t_tid == 0) t_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  return t_tid;
}

int64_t ns_of(uint64_t ticks) noexcept {
  return static_cast<int64_t>(static_cast<double>(ticks) * ns_per_tick());
}

uint32_t wait_name(uint8_t writers) {
  static const uint32_t forked = stallscope_name_intern("channel written by a forked worker");
  static const uint32_t thread = stallscope_name_intern("channel written by a producer thread");
  return (writers & kWriterForked) ? forked : thread;
}

void record_data_wait(uint8_t writers, uint64_t t0, uint64_t t1) noexcept {
  format::WorkExt e{};
  e.h.type = static_cast<uint8_t>(format::Ext::kWork);
  e.h.bytes = sizeof e;
  e.h.aux = static_cast<uint32_t>(format::WaitSource::kPipe);
  stallscope_event_record(STALLSCOPE_DATA_WAIT, wait_name(writers), t0, t1, 0, &e, sizeof e);
}

// Emits the message in progress, if any, as `type`, and clears it.
void finish(format::ChannelType type) noexcept {
  Message m = t_msg;
  t_msg = Message{};
  if (m.stage == Stage::kNone || m.parts == 0) return;
  const uint8_t writers = channel_writers(m.channel, current_tid());
  if (writers == 0) return;  // nobody of ours writes it: no hand-off
  const int saved = errno;
  ChannelHandoff h;
  h.channel_id = channel_stable_id(m.channel);
  h.type = type;
  h.producer_pid = m.put.pid;
  h.producer_tid = m.put.tid;
  h.consumer_pid = static_cast<uint32_t>(recorded_pid());
  h.consumer_tid = static_cast<uint32_t>(current_tid());
  h.bytes = m.bytes;
  h.parts = m.parts;
  h.requested = m.requested;
  // A write before the get began: the data was there already (put <= requested).
  const uint64_t put = m.put.tick != 0 && m.put.tick <= m.last_end ? m.put.tick : m.requested;
  record_channel_handoff(put, m.last_end, h);
  if (ns_of(m.blocked) >= static_cast<int64_t>(config().wait_min_ns)) {
    record_data_wait(writers, m.requested, m.last_end);
  }
  errno = saved;
}

format::ChannelType plain_type(uint32_t channel) noexcept { return channel_type(channel); }

void finish_current() noexcept {
  finish(t_msg.mp_started ? format::ChannelType::kMpQueue : plain_type(t_msg.channel));
}

// Thread exit: TLS destructors run in reverse order of registration, so one
// registered once the recorder's own (armed with the thread's buffer) runs
// before the buffer is retired.
struct ExitFlush {
  ~ExitFlush() {
    Guard guard;
    if (guard.entered()) finish_current();
  }
};
thread_local ExitFlush t_exit_flush;
thread_local constinit bool t_exit_armed __attribute__((tls_model("initial-exec"))) = false;

void arm_exit_flush() noexcept {
  if (t_exit_armed || stallscope_inline_v1_thread_buffer == nullptr) return;
  t_exit_armed = true;
  (void)&t_exit_flush;
}

uint32_t be32(const void* p) noexcept {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return __builtin_bswap32(v);
}
uint64_t be64(const void* p) noexcept {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return __builtin_bswap64(v);
}

// The read adds to the message in progress.
void add_part(uint64_t asked, uint64_t got, uint64_t t0, uint64_t t1,
              const ChannelWrite& w) noexcept {
  Message& m = t_msg;
  m.unfilled = asked > got ? asked - got : 0;
  ++m.parts;
  m.bytes += got;
  m.blocked += t1 - t0;
  m.last_end = t1;
  if (w.tick != 0 && w.tick <= t1) m.put = w;
}

// True when the read continues the message in progress (and was added).
bool continues(int fd, uint32_t channel, const void* buf, uint64_t asked, ssize_t result,
               uint64_t t0, uint64_t t1, const ChannelWrite& w) noexcept {
  Message& m = t_msg;
  if (m.stage == Stage::kNone || m.fd != fd || m.channel != channel || result <= 0) return false;
  const auto got = static_cast<uint64_t>(result);
  switch (m.stage) {
    case Stage::kMpLength:
      if (asked != 8 || got != 8 || buf == nullptr) return false;
      add_part(asked, got, t0, t1, w);
      m.left = be64(buf);
      m.stage = Stage::kMpPayload;
      m.mp_started = true;
      if (m.left == 0) finish(format::ChannelType::kMpQueue);
      return true;
    case Stage::kMpPayload:
      // Connection._recv asks for exactly what is left each time.
      if (asked != m.left || got > m.left) return false;
      add_part(asked, got, t0, t1, w);
      m.left -= got;
      m.mp_started = true;
      if (m.left == 0) finish(format::ChannelType::kMpQueue);
      return true;
    case Stage::kBurst:
      // A read asking for exactly what the last one left unfilled is the
      // rest of the reader's buffer, however late it comes (a preempted
      // reader); any other read must follow closely.
      if ((m.unfilled == 0 || asked != m.unfilled) &&
          (t0 < m.last_end || ns_of(t0 - m.last_end) >= kBurstGapNs)) {
        return false;
      }
      add_part(asked, got, t0, t1, w);
      return true;
    case Stage::kNone:
      break;
  }
  return false;
}

// The get began at the read, or at a poll of the channel just before it.
uint64_t get_start(uint32_t channel, uint64_t t0, uint64_t* poll_ticks) noexcept {
  const Poll p = t_poll;
  t_poll = Poll{};
  *poll_ticks = 0;
  if (p.t1 == 0 || !(p.any || p.channel == channel) || t0 < p.t1) return t0;
  if (ns_of(t0 - p.t1) >= kPollGapNs) return t0;
  *poll_ticks = p.t1 - p.t0;
  return p.t0;
}

void start(int fd, uint32_t channel, const void* buf, uint64_t asked, ssize_t result, uint64_t t0,
           uint64_t t1, const ChannelWrite& w) noexcept {
  uint64_t poll_ticks = 0;
  const uint64_t requested = get_start(channel, t0, &poll_ticks);
  if (result <= 0) return;  // EAGAIN, an error, end of file: nothing received
  Message& m = t_msg;
  m = Message{};
  m.fd = fd;
  m.channel = channel;
  m.requested = requested;
  m.stage = Stage::kBurst;
  add_part(asked, static_cast<uint64_t>(result), t0, t1, w);
  m.blocked += poll_ticks;
  const format::ChannelType type = channel_type(channel);
  if (type == format::ChannelType::kEventfd) {
    finish(type);
    return;
  }
  if (asked == 4 && result == 4 && buf != nullptr) {
    const auto n = static_cast<int32_t>(be32(buf));
    if (n > 0) {
      m.stage = Stage::kMpPayload;
      m.left = static_cast<uint64_t>(n);
    } else if (n == -1) {
      m.stage = Stage::kMpLength;
    }
  }
  arm_exit_flush();
}

}  // namespace

void channel_read(int fd, const FdInfo& info, const void* buf, uint64_t asked, ssize_t result,
                  uint64_t t0, uint64_t t1) noexcept {
  const ChannelWrite w = channel_last_write(info.channel);
  if (continues(fd, info.channel, buf, asked, result, t0, t1, w)) return;
  // A header whose payload never came is no mp message: its own type.
  finish_current();
  start(fd, info.channel, buf, asked, result, t0, t1, w);
}

void channel_polled(uint32_t channel, bool any, uint64_t t0, uint64_t t1) noexcept {
  t_poll = Poll{channel, any, t0, t1};
}

void channel_closing(int fd) noexcept {
  if (t_msg.stage == Stage::kNone || t_msg.fd != fd) return;
  Guard guard;
  if (guard.entered()) finish_current();
}

void channel_flush_thread() noexcept {
  if (t_msg.stage == Stage::kNone) return;
  Guard guard;
  if (guard.entered()) finish_current();
}

void messages_after_fork() noexcept {
  t_msg = Message{};
  t_poll = Poll{};
  t_tid = 0;
}

}  // namespace stallscope::preload
