#include "channels.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "shim.hpp"
#include "stallscope/clock.hpp"

namespace stallscope::preload {

namespace {

constexpr uint32_t kSlots = 4096;  // channels beyond this are not tracked

struct Slot {
  std::atomic<int32_t> creator_pid;
  std::atomic<uint8_t> writers;
  std::atomic<uint8_t> type;             // format::ChannelType
  std::atomic<int32_t> last_writer_tid;  // a thread writing to itself is no producer
  std::atomic<int32_t> last_writer_pid;
  std::atomic<uint64_t> last_write_tick;  // when the last write began
};
struct Board {
  std::atomic<uint32_t> next;
  Slot slots[kSlots];
};
Board* g_board = nullptr;

thread_local pid_t t_tid __attribute__((tls_model("initial-exec"))) = 0;
pid_t my_tid() noexcept {
  if (t_tid == 0) t_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  return t_tid;
}

}  // namespace

void channels_reset_tid_after_fork() noexcept { t_tid = 0; }

bool channels_init() noexcept {
  void* p = ::mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
  if (p == MAP_FAILED) return false;
  g_board = static_cast<Board*>(p);  // zero-filled by the kernel
  g_board->next.store(1, std::memory_order_relaxed);
  return true;
}

uint32_t channel_new(format::ChannelType type) noexcept {
  if (g_board == nullptr) return 0;
  const uint32_t id = g_board->next.fetch_add(1, std::memory_order_relaxed);
  if (id >= kSlots) return 0;
  Slot& s = g_board->slots[id];
  s.creator_pid.store(recorded_pid(), std::memory_order_relaxed);
  s.writers.store(0, std::memory_order_relaxed);
  s.type.store(static_cast<uint8_t>(type), std::memory_order_relaxed);
  s.last_writer_tid.store(0, std::memory_order_relaxed);
  s.last_writer_pid.store(0, std::memory_order_relaxed);
  s.last_write_tick.store(0, std::memory_order_relaxed);
  return id;
}

void channel_note_write(uint32_t channel) noexcept {
  if (g_board == nullptr || channel == 0 || channel >= kSlots) return;
  Slot& s = g_board->slots[channel];
  const uint8_t bit = s.creator_pid.load(std::memory_order_relaxed) == recorded_pid()
                          ? kWriterThread : kWriterForked;
  const pid_t tid = my_tid();
  const pid_t pid = recorded_pid();
  // Only changes are stored: the line stays shared while one producer
  // writes, but for the tick, which every hand-off needs.
  if (s.last_writer_tid.load(std::memory_order_relaxed) != tid) {
    s.last_writer_tid.store(tid, std::memory_order_relaxed);
  }
  if (s.last_writer_pid.load(std::memory_order_relaxed) != pid) {
    s.last_writer_pid.store(pid, std::memory_order_relaxed);
  }
  s.last_write_tick.store(ticks_now(), std::memory_order_relaxed);
  if ((s.writers.load(std::memory_order_relaxed) & bit) == 0) {
    s.writers.fetch_or(bit, std::memory_order_relaxed);
  }
}

uint8_t channel_writers(uint32_t channel, pid_t reader_tid) noexcept {
  if (g_board == nullptr || channel == 0 || channel >= kSlots) return 0;
  const Slot& s = g_board->slots[channel];
  const uint8_t w = s.writers.load(std::memory_order_relaxed);
  // Only the reader itself ever wrote (a self-pipe wake-up): no producer.
  if (w == kWriterThread && s.last_writer_tid.load(std::memory_order_relaxed) == reader_tid) {
    return 0;
  }
  return w;
}

ChannelWrite channel_last_write(uint32_t channel) noexcept {
  ChannelWrite w;
  if (g_board == nullptr || channel == 0 || channel >= kSlots) return w;
  const Slot& s = g_board->slots[channel];
  w.tick = s.last_write_tick.load(std::memory_order_relaxed);
  w.tid = static_cast<uint32_t>(s.last_writer_tid.load(std::memory_order_relaxed));
  w.pid = static_cast<uint32_t>(s.last_writer_pid.load(std::memory_order_relaxed));
  return w;
}

format::ChannelType channel_type(uint32_t channel) noexcept {
  if (g_board == nullptr || channel == 0 || channel >= kSlots) return format::ChannelType::kPipe;
  return static_cast<format::ChannelType>(
      g_board->slots[channel].type.load(std::memory_order_relaxed));
}

uint64_t channel_stable_id(uint32_t channel) noexcept {
  if (g_board == nullptr || channel == 0 || channel >= kSlots) return channel;
  const auto pid = static_cast<uint32_t>(
      g_board->slots[channel].creator_pid.load(std::memory_order_relaxed));
  return (uint64_t{pid} << 32) | channel;
}

}  // namespace stallscope::preload
