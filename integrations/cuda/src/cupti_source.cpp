// The CUPTI activity source: subscribes as "stallscope", stamps records
// with CLOCK_MONOTONIC through CUPTI's timestamp callback, converts each
// completed buffer (cupti_convert.hpp) into trace events, attaches which
// GPU each device that ran work is (cupti_devices.hpp), reads drops
// outside its own locks, and hands CUPTI over to another tool on request.
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <stallscope/trace.hpp>

#include "cuda_config.hpp"
#include "cuda_log.hpp"
#include "cupti_api.hpp"
#include "cupti_buffers.hpp"
#include "cupti_convert.hpp"
#include "cupti_devices.hpp"
#include "gpu_source.hpp"

namespace stallscope::cuda {
namespace {

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET,
                                         CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                         CUPTI_ACTIVITY_KIND_RUNTIME,
                                         CUPTI_ACTIVITY_KIND_DRIVER,
                                         CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
// Device records are not in kKinds, which capture switches off and on:
// they describe hardware, not a time window, and CUPTI makes them when
// CUDA initializes (NVIDIA's samples enable the kind before cuInit for that
// reason), so a device initialized while capture was off would never be
// named. Enabled once at attach, disabled only at hand-over.
constexpr CUpti_ActivityKind kDeviceKind = CUPTI_ACTIVITY_KIND_DEVICE;
// The external correlation kind step indexes are pushed under: not CUSTOM0
// or CUSTOM1, which the PyTorch profiler (Kineto) pushes its operator ids
// under — sharing its stack would hand its records our ids.
constexpr CUpti_ExternalCorrelationKind kStepCorrelation = kStepCorrelationKind;

// After a hand-over the timestamp callback cannot be unregistered; it then
// answers CUPTI's default clock, so the next tool sees what it expects.
std::atomic<bool> g_ts_realtime{false};
uint64_t CUPTIAPI timestamp_now() {
  return static_cast<uint64_t>(g_ts_realtime.load(std::memory_order_relaxed) ? real_ns()
                                                                             : mono_ns());
}

class Names final : public NameResolver {
 public:
  explicit Names(const CuptiApi& api) : api_(api) {}
  uint32_t name(std::string_view text) noexcept override {
    std::lock_guard lock(mu_);
    try {
      auto it = names_.find(text);
      if (it != names_.end()) return it->second;
      const uint32_t id = intern(text);
      names_.emplace(std::string(text), id);
      return id;
    } catch (...) {
      return 0;
    }
  }
  uint32_t api_name(bool driver, uint32_t cbid) noexcept override {
    const char* n = nullptr;
    const auto domain = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
    if (api_.callback_name == nullptr || api_.callback_name(domain, cbid, &n) != CUPTI_SUCCESS ||
        n == nullptr)
      return name(driver ? "cuda driver call" : "cuda runtime call");
    return name(n);
  }

 private:
  const CuptiApi& api_;
  std::mutex mu_;
  std::map<std::string, uint32_t, std::less<>> names_;
};

class CuptiSource final : public GpuSource {
 public:
  std::string_view name() const noexcept override { return "cupti"; }
  int attach() noexcept override;
  int flush() noexcept override;
  void set_capture(bool on) noexcept override;
  bool hand_over(std::string_view api, std::string_view who) noexcept override;
  void on_step(uint64_t index, bool begin) noexcept override;

  static void CUPTIAPI on_request(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI on_complete(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size,
                                   size_t valid);

 private:
  enum State : int { kIdle, kActive, kHandedOver, kFailed };
  int subscribe() noexcept;
  void set_clock() noexcept;
  void enable_kinds(bool on) noexcept;
  void enable_kind(CUpti_ActivityKind kind, bool on) noexcept;
  void convert_buffer(uint8_t* buffer, size_t valid) noexcept;
  void attach_devices(DeviceLog::Batch& batch) noexcept;
  void finish_devices() noexcept;
  void count_drops(CUcontext ctx, uint32_t stream) noexcept;
  void record_untrusted() noexcept;
  void start_flusher() noexcept;
  void stop_flusher() noexcept;
  void flusher_loop() noexcept;

  CuptiApi api_;
  CuptiMode mode_ = CuptiMode::kYield;
  bool step_ids_ = true;  // STALLSCOPE_CUPTI_STEP_IDS
  std::atomic<int> state_{kIdle};
  std::mutex control_;  // attach, capture, hand-over, flushes; never taken by the conversion
  CUpti_SubscriberHandle sub_ = nullptr;
  CuptiClock clock_;  // its real_to_mono is real_to_mono_, read per buffer
  std::atomic<int64_t> real_to_mono_{0};
  pid_t owner_pid_ = 0;  // the process that attached; a forked child never calls CUPTI
  bool other_process() const noexcept { return ::getpid() != owner_pid_; }
  CuptiBuffers buffers_;
  Names names_{api_};
  DeviceLog devices_;
  std::atomic<uint64_t> zero_time_{0}, unknown_{0}, dropped_{0}, events_{0};
  // Regular delivery of completed buffers, off the trainer's threads: soon
  // after a step ends (at most every kStepFlush) and every kIdleFlush.
  static constexpr std::chrono::milliseconds kStepFlush{200}, kIdleFlush{1000};
  // Never destroyed: a forked child holds a copy of a thread it does not
  // have, and must neither join it nor let a destructor see it joinable.
  std::atomic<std::thread*> flusher_{nullptr};
  pid_t flusher_pid_ = 0;
  std::mutex flush_mu_;
  std::condition_variable flush_cv_;
  bool flush_stop_ = false, step_ended_ = false;
  std::atomic<int64_t> last_flush_ns_{0};
};

CuptiSource g_source;

void CUPTIAPI dummy_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

int CuptiSource::subscribe() noexcept {
  char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
  CUptiResult rc;
  if (api_.subscribe_v2 != nullptr) {
    CUpti_SubscriberParams p{};
    p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    p.subscriberName = "stallscope";
    p.oldSubscriberName = old;
    p.oldSubscriberSize = sizeof old - 1;
    rc = api_.subscribe_v2(&sub_, dummy_callback, nullptr, &p);
  } else {
    rc = api_.subscribe(&sub_, dummy_callback, nullptr);
  }
  if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    note("CUPTI is already used by %s: GPU activity not recorded (stallscope steps aside)",
         old[0] ? old : "another tool (Nsight Systems?)");
    return -EBUSY;
  }
  return STALLSCOPE_CUPTI_CHECK(rc) == 0 ? 0 : -EIO;
}

void CuptiSource::set_clock() noexcept {
  if (api_.register_timestamp != nullptr &&
      api_.register_timestamp(timestamp_now) == CUPTI_SUCCESS) {
    clock_.monotonic = true;
    return;
  }
  // CUPTI's default clock on Linux is CLOCK_REALTIME: one stored pair
  // shifts it (refreshed at each flush; NTP slewing between is small).
  clock_.monotonic = false;
  real_to_mono_.store(mono_ns() - real_ns(), std::memory_order_relaxed);
  note("CUPTI timestamp callback unavailable: GPU times converted from CLOCK_REALTIME");
}

void CuptiSource::enable_kind(CUpti_ActivityKind k, bool on) noexcept {
  const CUptiResult rc = on ? api_.enable(k) : api_.disable(k);
  if (rc != CUPTI_SUCCESS && rc != CUPTI_ERROR_NOT_COMPATIBLE)
    note("CUPTI activity kind %d not %s (CUPTI error %d)", static_cast<int>(k),
         on ? "enabled" : "disabled", static_cast<int>(rc));
}

void CuptiSource::enable_kinds(bool on) noexcept {
  for (CUpti_ActivityKind k : kKinds) enable_kind(k, on);
}

int CuptiSource::attach() noexcept {
  // A forked child of an attached process (stallscope_cuda_attach_v1 runs
  // this once per process image, so only a direct caller gets here): CUPTI
  // is the parent's, and control_ may have been held at the fork.
  if (owner_pid_ != 0 && other_process()) return -EBUSY;
  std::lock_guard lock(control_);
  std::string why;
  mode_ = parse_cupti_mode(std::getenv("STALLSCOPE_CUPTI"), &why);
  if (!why.empty()) note("%s", why.c_str());
  if (mode_ == CuptiMode::kOff) {
    note("STALLSCOPE_CUPTI=off: GPU activity not recorded");
    return -ECANCELED;
  }
  why.clear();
  step_ids_ = parse_step_ids(std::getenv("STALLSCOPE_CUPTI_STEP_IDS"), &why);
  if (!why.empty()) note("%s", why.c_str());
  const char* driver = std::getenv("STALLSCOPE_CUDA_DRIVER_LIB");
  if (driver == nullptr || *driver == '\0') driver = "libcuda.so.1";
  if (dlopen(driver, RTLD_NOW | RTLD_NOLOAD) == nullptr &&
      dlopen(driver, RTLD_NOW | RTLD_LOCAL) == nullptr) {
    const char* e = dlerror();
    note("no CUDA driver: GPU activity not recorded (%s)", e ? e : driver);
    state_ = kFailed;
    return -ENODEV;
  }
  if (int rc = load_cupti(&api_, &why); rc < 0) {
    note("CUPTI unavailable: GPU activity not recorded (%s)", why.c_str());
    state_ = kFailed;
    return rc;
  }
  if (int rc = subscribe(); rc < 0) return state_ = kFailed, rc;
  // Which CUPTI records this process: on stderr and in the trace.
  const std::string used = "CUPTI " + api_.path + " (" + api_.origin + ")";
  note("%s", used.c_str());
  record_mark(intern(used));
  set_clock();  // before any kind is enabled
  if (STALLSCOPE_CUPTI_CHECK(api_.register_callbacks(on_request, on_complete)) != 0) {
    api_.unsubscribe(sub_);
    return state_ = kFailed, -EIO;
  }
  enable_kind(kDeviceKind, true);
  enable_kinds(true);
  owner_pid_ = ::getpid();
  state_ = kActive;
  start_flusher();
  std::atexit([] {  // runs before the recorder's own exit flush
    g_source.stop_flusher();
    g_source.flush();
    g_source.finish_devices();
  });
  return 0;
}

int CuptiSource::flush() noexcept {
  if (state_.load() != kActive || other_process()) return 0;
  if (!clock_.monotonic) real_to_mono_.store(mono_ns() - real_ns(), std::memory_order_relaxed);
  const int rc = STALLSCOPE_CUPTI_CHECK(api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  record_untrusted();
  return rc == 0 ? 0 : -EIO;
}

void CuptiSource::start_flusher() noexcept {
  try {
    flusher_pid_ = ::getpid();
    // Like the recorder's own threads: every signal blocked (the program's
    // handlers run on its threads), named so the shim knows it for ours.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    try {
      flusher_.store(new std::thread([this] { flusher_loop(); }));
    } catch (...) {
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      throw;
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  } catch (...) {
    note("no CUPTI flush thread (%s): GPU records arrive as buffers fill and at exit",
         "thread creation failed");
  }
}

void CuptiSource::stop_flusher() noexcept {
  std::thread* const t = flusher_.load();
  if (t == nullptr || ::getpid() != flusher_pid_) return;
  {
    std::lock_guard lock(flush_mu_);
    flush_stop_ = true;
  }
  flush_cv_.notify_all();
  if (t->joinable()) t->join();
  flusher_.store(nullptr);
  delete t;
}

// CUPTI's default flush (flag 0) delivers the buffers whose records are all
// complete, full or not, and calls the completion callback on this thread:
// the conversion never runs on the trainer's.
void CuptiSource::flusher_loop() noexcept {
  ::prctl(PR_SET_NAME, "stallscope-cupt", 0, 0, 0);
  stallscope_thread_name_set("cupti-flush");
  std::unique_lock lock(flush_mu_);
  while (!flush_stop_) {
    flush_cv_.wait_for(lock, kIdleFlush, [this] { return flush_stop_ || step_ended_; });
    if (flush_stop_) break;
    step_ended_ = false;
    lock.unlock();
    {
      std::lock_guard control(control_);  // not after a hand-over: the buffers are another tool's
      if (state_.load() == kActive) {
        if (!clock_.monotonic) real_to_mono_.store(mono_ns() - real_ns(), std::memory_order_relaxed);
        api_.flush_all(0);
      }
    }
    last_flush_ns_.store(mono_ns(), std::memory_order_relaxed);
    lock.lock();
  }
}

// Records not converted are shown, never silently lost: running totals.
void CuptiSource::record_untrusted() noexcept {
  static const NameId kZero = intern("cupti.zero_timestamp_records");
  static const NameId kUnknown = intern("cupti.unknown_kind_records");
  if (const uint64_t z = zero_time_.load()) record_counter(kZero, static_cast<double>(z));
  if (const uint64_t u = unknown_.load()) record_counter(kUnknown, static_cast<double>(u));
}

void CuptiSource::set_capture(bool on) noexcept {
  if (other_process()) return;  // a forked child: control_ may have been held at the fork
  std::lock_guard lock(control_);
  if (state_.load() != kActive) return;
  if (on) {
    enable_kinds(true);
  } else {
    enable_kinds(false);
    api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
}

// Tags the CUDA calls of a step: while the step runs, CUPTI writes an
// external correlation record (kind CUSTOM2, id = step index + 1) for each
// runtime or driver call this thread makes, linking the call's correlation
// id, and so its kernels and copies, to the step that launched them. The
// stack is CUPTI's and per thread: what was pushed is popped, even after a
// hand-over, so another tool finds it balanced.
void CuptiSource::on_step(uint64_t index, bool begin) noexcept {
  static thread_local uint64_t pushed = 0;  // the id on CUPTI's stack, 0: none
  if (other_process()) return;
  // A step ended: wake the flush thread, unless it flushed just now. Never
  // blocking (try_lock).
  if (!begin && flusher_.load(std::memory_order_relaxed) != nullptr &&
      mono_ns() - last_flush_ns_.load(std::memory_order_relaxed) >=
          std::chrono::nanoseconds(kStepFlush).count() &&
      flush_mu_.try_lock()) {
    step_ended_ = true;
    flush_mu_.unlock();
    flush_cv_.notify_one();
  }
  if (api_.push_external == nullptr) return;
  if (pushed != 0) {
    uint64_t last = 0;
    if (api_.pop_external(kStepCorrelation, &last) == CUPTI_SUCCESS && last != pushed)
      api_.push_external(kStepCorrelation, last);  // another's id was on top: put it back
    pushed = 0;
  }
  if (begin && step_ids_ && state_.load(std::memory_order_acquire) == kActive &&
      api_.push_external(kStepCorrelation, index + 1) == CUPTI_SUCCESS)
    pushed = index + 1;
}

bool CuptiSource::hand_over(std::string_view api, std::string_view who) noexcept {
  if (other_process()) return true;
  std::lock_guard lock(control_);
  if (state_.load() != kActive) return true;
  if (mode_ == CuptiMode::kKeep) {
    note("STALLSCOPE_CUPTI=keep: refused %.*s from %.*s", static_cast<int>(api.size()), api.data(),
         static_cast<int>(who.size()), who.data());
    return false;
  }
  api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  record_untrusted();
  enable_kinds(false);
  enable_kind(kDeviceKind, false);
  api_.unsubscribe(sub_);
  finish_devices();  // no device record reaches stallscope any more
  g_ts_realtime.store(true);
  state_ = kHandedOver;
  try {
    const std::string text =
        "GPU activity handed to " + std::string(who) + " (" + std::string(api) + ")";
    record_mark(intern(text));
    note("%s; I/O, NVTX and CPU recording go on", text.c_str());
  } catch (...) {
  }
  return true;
}

void CUPTIAPI CuptiSource::on_request(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = g_source.buffers_.take();
  *size = *buffer ? CuptiBuffers::kBufferBytes : 0;
  *max_records = 0;
}

void CuptiSource::convert_buffer(uint8_t* buffer, size_t valid) noexcept {
  static thread_local bool named = false;
  if (!named) stallscope_thread_name_set("cupti"), named = true;
  const CuptiClock clock{clock_.monotonic, real_to_mono_.load(std::memory_order_relaxed)};
  CUpti_Activity* rec = nullptr;
  GpuEvent ev;
  DeviceLog::Batch devices;
  while (api_.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
    devices.add_work(work_device(*rec));
    if (rec->kind == kDeviceKind) {  // a few per process
      try {
        devices.identities.push_back(
            device_identity(*reinterpret_cast<const CUpti_ActivityDevice5*>(rec)));
      } catch (...) {
      }
    }
    switch (convert_record(*rec, clock, names_, &ev)) {
      case Converted::kEvent:
        if (ev.core.ts == 0) ev.core.ts = static_cast<uint64_t>(mono_ns());
        if (enabled() && detail::emit_for_thread(ev.tid, ev.core, ev.ext_data(), ev.ext_bytes))
          ++events_;
        break;
      case Converted::kZeroTime:
        ++zero_time_;
        break;
      case Converted::kUnknownKind:
        ++unknown_;
        break;
      case Converted::kNotRecorded:
        break;
    }
  }
  attach_devices(devices);
}

// After the buffer's loop, outside every lock of ours: a device's
// attachment is decided once under DeviceLog's lock, written here.
void CuptiSource::attach_devices(DeviceLog::Batch& batch) noexcept {
  if (batch.empty()) return;
  try {
    for (const std::string& json : devices_.merge(batch)) stallscope::attach("cuda.device", json);
  } catch (...) {
  }
}

void CuptiSource::finish_devices() noexcept {
  if (other_process()) return;  // a forked child: the devices are the parent's to name
  try {
    for (const std::string& json : devices_.finish()) stallscope::attach("cuda.device", json);
  } catch (...) {
  }
}

void CuptiSource::count_drops(CUcontext ctx, uint32_t stream) noexcept {
  size_t n = 0;
  if (api_.dropped(ctx, stream, &n) != CUPTI_SUCCESS || n == 0) return;
  dropped_ += n;
  static const NameId kDropped = intern("cupti.dropped_records");
  record_counter(kDropped, static_cast<double>(dropped_.load()));
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    note("CUPTI dropped %zu GPU activity records (buffers full); counted in the trace", n);
}

void CUPTIAPI CuptiSource::on_complete(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t,
                                       size_t valid) {
  if (buffer != nullptr && valid > 0) g_source.convert_buffer(buffer, valid);
  g_source.buffers_.give_back(buffer);
  g_source.count_drops(ctx, stream);  // outside every lock of ours
}

}  // namespace

GpuSource& cupti_source() noexcept { return g_source; }

}  // namespace stallscope::cuda
