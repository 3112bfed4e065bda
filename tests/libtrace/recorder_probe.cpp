// A small traced program driven by the recorder tests: each mode records a
// known set of events and then ends in a chosen way (normal exit, signal,
// _exit, SIGKILL), so the tests can check what the file holds afterwards.
// Usage: recorder_probe MODE [ARGS...]; prints facts the test compares
// against (counts, pids) on stdout, one "key value" per line.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "stallscope/trace.h"
#include "stallscope/trace.hpp"

namespace {

using stallscope::Kind;

void say(const char* key, unsigned long long value) {
  std::printf("%s %llu\n", key, value);
  std::fflush(stdout);
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

stallscope::NameId name(const char* s) { return stallscope::intern(s); }

void spans(stallscope::NameId n, long count, long first = 0) {
  for (long i = first; i < first + count; ++i)
    stallscope::Span span(Kind::kPreprocess, n, uint64_t(i));
}

// T threads x N spans each; every thread reports how many it issued. Every
// thread records its first span (and so registers with the recorder) before
// any goes on: all T are alive at once, whatever the scheduling, so a buffer
// budget too small for T threads leaves some without one.
int mode_threads(int threads, long per_thread) {
  const auto n = name("work");
  std::vector<std::thread> ts;
  std::barrier registered(threads);
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      const long first = per_thread > 0 ? 1 : 0;
      spans(n, first);
      registered.arrive_and_wait();
      spans(n, per_thread - first, first);
    });
  }
  for (auto& t : ts) t.join();
  say("issued", static_cast<unsigned long long>(threads) * per_thread);
  return 0;
}

// One thread records and exits at once (nothing flushed yet); another
// records, then idles until the process exits.
int mode_thread_exit(long count) {
  std::thread([count] { spans(name("exited_thread"), count); }).join();
  // Static: the idle thread outlives main's frame.
  static std::atomic<bool> recorded{false}, quit{false};
  std::thread idle([count] {
    spans(name("idle_thread"), count);
    recorded = true;
    while (!quit) sleep_ms(1);
  });
  while (!recorded) sleep_ms(1);
  say("issued", 2 * count);
  quit = true;
  idle.detach();  // still alive when main returns
  return 0;
}

// A worker thread records `count` reads on behalf of the main thread (and
// of a made-up tid) through emit_for_thread, then exits; main records its
// own spans. Prints the tids.
int mode_on_behalf(long count) {
  const auto main_tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  spans(name("main_own"), count);
  uint32_t worker_tid = 0;
  std::thread([&] {
    worker_tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    stallscope::StorageRead r;
    r.bytes = 4096;
    r.file = name("mapped_file");
    for (long i = 0; i < count; ++i) {
      const auto t = stallscope::ticks_now();
      stallscope::record_storage_read_for(main_tid, t, t + 1000, r);
      stallscope::record_storage_read_for(999999, t, t + 1000, r);
      stallscope::record_storage_read_for(0, t, t + 1000, r);  // no tid: the own track
    }
  }).join();
  say("main_tid", main_tid);
  say("worker_tid", worker_tid);
  return 0;
}

// Starts the recorder, then prints the name of every thread of the process
// ("THREAD <comm>"): the recorder's own threads must carry their names.
int mode_thread_names() {
  spans(name("start"), 1);
  sleep_ms(50);  // the sampler and flusher have started and named themselves
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return 3;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[32] = {};
    std::snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE* f = std::fopen(path, "r");
    if (f == nullptr) continue;
    if (std::fgets(comm, sizeof comm, f) != nullptr) {
      comm[std::strcspn(comm, "\n")] = 0;
      std::printf("THREAD %s\n", comm);
    }
    std::fclose(f);
  }
  closedir(d);
  std::fflush(stdout);
  return 0;
}

// `batches` batches of `per_batch` spans, 2 ms apart: a steady producer
// that fills a small ring many times over between two periodic flushes.
int mode_paced(long batches, long per_batch) {
  const auto n = name("paced");
  for (long b = 0; b < batches; ++b) {
    spans(n, per_batch);
    sleep_ms(2);
  }
  say("issued", static_cast<unsigned long long>(batches * per_batch));
  return 0;
}

// `fill` spans, a synchronous flush (a budget they pass is spent by now),
// then `threads` threads burst `burst` spans each at once.
int mode_fill_then_burst(long fill, int threads, long burst) {
  spans(name("fill"), fill);
  if (stallscope_flush() != 0) return 5;
  const auto n = name("burst");
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back([&] { spans(n, burst); });
  for (auto& t : ts) t.join();
  say("issued", static_cast<unsigned long long>(fill + threads * burst));
  return 0;
}

// `fill` spans, a pause of `pause_ms` (no flush asked for), then a burst
// of `burst` as fast as they come.
int mode_pause_then_burst(long fill, int pause_ms, long burst) {
  spans(name("fill"), fill);
  sleep_ms(pause_ms);
  spans(name("burst"), burst);
  say("issued", static_cast<unsigned long long>(fill + burst));
  return 0;
}

int mode_kill_after_flush(long before) {
  spans(name("before_flush"), before);
  if (stallscope_flush() != 0) return 5;
  say("flushed", before);
  for (;;) {  // keeps recording until killed; these may be lost
    spans(name("after_flush"), 10);
    sleep_ms(1);
  }
}

volatile sig_atomic_t g_handler_ran = 0;
const char* g_marker = nullptr;

void own_handler(int) {
  g_handler_ran = 1;
  int fd = ::open(g_marker, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    (void)!::write(fd, "handler ran\n", 12);
    ::close(fd);
  }
  _exit(3);
}

int mode_wait_for_signal(bool own, const char* marker, long count) {
  if (own) {
    g_marker = marker;
    signal(SIGTERM, own_handler);
  }
  spans(name("before_signal"), count);
  say("ready", count);
  for (;;) sleep_ms(5);
}

int mode_underscore_exit(long count) {
  spans(name("before_exit"), count);
  say("issued", count);
  _exit(0);
}

// Closes every descriptor, then puts one of its own files on the number the
// recorder used: nothing of the trace may land in that file.
int mode_close_all(const char* own_file, long count) {
  spans(name("before_close"), count);
  stallscope_flush();
  ::syscall(SYS_close_range, 3u, ~0u, 0u);
  for (int fd = 3; fd < 1024; ++fd) {
    int f = ::open(own_file, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (f < 0) return 6;
    if (f != fd) {
      ::dup2(f, fd);
      ::close(f);
    }
  }
  (void)!::write(700, "program data\n", 13);
  spans(name("after_close"), count);
  stallscope_flush();
  say("issued", 2 * count);
  return 0;
}

int mode_fork(long count) {
  spans(name("parent_before"), count);
  stallscope_flush();
  pid_t child = fork();
  if (child == 0) {
    spans(name("child"), count);
    std::exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  spans(name("parent_after"), count);
  say("child", static_cast<unsigned long long>(child));
  say("parent", static_cast<unsigned long long>(getpid()));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 7;
}

// The parent records, waits 100 ms, forks; the child (a worker) idles
// `idle_ms`, records one step, idles again.
int mode_fork_worker(long idle_ms) {
  spans(name("parent"), 10);
  sleep_ms(100);  // the parent's sampler has listed its threads and children
  // Fork right after a flush, as mode_fork does: a flush in progress at the
  // fork would leave its buffers in the child, referenced only from the
  // parent's flusher, which LeakSanitizer reports as leaks in the child.
  stallscope_flush();
  pid_t child = fork();
  if (child == 0) {
    spans(name("child"), 10);
    sleep_ms(static_cast<int>(idle_ms));
    stallscope_step_begin(0);
    stallscope_step_end(0);
    stallscope_flush();
    sleep_ms(static_cast<int>(idle_ms));
    std::exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  say("child", static_cast<unsigned long long>(child));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 7;
}

std::atomic<int> g_hook_calls{0};

// A capture hook records one span per call: "off" must still be recorded
// (called before capture stops), "on" already (called after it starts).
void capture_hook(int on) {
  ++g_hook_calls;
  spans(name(on != 0 ? "hook_on" : "hook_off"), 1);
}

int mode_control(const char* control, long count) {
  if (stallscope_capture_hook_add(&capture_hook) != 0) return 8;
  spans(name("capture_on"), count);
  auto write_control = [control](const char* text) {
    FILE* f = std::fopen(control, "w");
    std::fputs(text, f);
    std::fclose(f);
  };
  write_control("off\n");
  for (int i = 0; i < 2000 && stallscope_capture_enabled(); ++i) sleep_ms(5);
  spans(name("capture_off"), count);
  sleep_ms(20);  // a new mtime for the next write
  write_control("on\n");
  for (int i = 0; i < 2000 && !stallscope_capture_enabled(); ++i) sleep_ms(5);
  spans(name("capture_on_again"), count);
  say("toggled", stallscope_capture_enabled());
  say("hook_calls", static_cast<unsigned long long>(g_hook_calls.load()));
  return 0;
}

// "end" in the control file (stallscope run --exit-after-window): the file
// is completed and tracing stops; then the process is killed.
int mode_control_end(const char* control, long count) {
  spans(name("before_end"), count);
  if (FILE* f = std::fopen(control, "w")) {
    std::fputs("end\n", f);
    std::fclose(f);
  }
  for (int i = 0; i < 2000 && stallscope_capture_enabled(); ++i) sleep_ms(5);
  spans(name("after_end"), count);
  say("ended", !stallscope_capture_enabled());
  std::fflush(stdout);
  ::kill(::getpid(), SIGKILL);
  return 9;
}

int mode_all_kinds() {
  // One of everything the API offers, for the round trip test.
  using namespace stallscope;
  const Ticks t0 = ticks_now();
  stallscope_thread_name_set("probe-main");
  record_step(7, t0, t0 + 1000, format::StepSource::kApi);
  stallscope_step_begin(8);
  stallscope_step_end(8);
  StorageRead io;
  io.file = intern("/data/shard-0001.bin");
  io.bytes = 4096;
  io.offset = 5ull << 32;
  io.hit_bytes = 1024;
  io.queued_ns = 250;
  io.sample_id = 42;
  io.batch_id = 3;
  io.tier = format::Tier::kNetwork;
  io.cache = format::Cache::kPartial;
  io.cache_method = format::CacheMethod::kNowait;
  io.queue_depth = 32;
  record_storage_read(t0, t0 + 2000, io);
  record_preprocess(intern("decode"), t0, t0 + 3000, Work{42, 3, 4, 2});
  record_data_wait(t0, t0 + 4000, 3, format::WaitSource::kHook);
  std::vector<uint64_t> ids(10000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = 1000 + i;
  record_batch_ready(t0 + 5000, 3, ids);
  record_api_call(t0, t0 + 100, ApiCall{intern("cudaLaunchKernel"), 77,
                                        format::ApiDomain::kCudaRuntime, 211, 0});
  record_copy(t0, t0 + 600, Copy{Kind::kH2D, 1 << 20, format::MemKind::kPageable,
                                 format::MemKind::kDevice, 1, 9, 77, true});
  record_copy(t0, t0 + 700, Copy{Kind::kD2H, 64, format::MemKind::kDevice,
                                 format::MemKind::kPinned, 0, 2, 78, false});
  record_copy(t0, t0 + 800, Copy{Kind::kD2D, 128, format::MemKind::kDevice,
                                 format::MemKind::kDevice, 0, 2, 79, false});
  record_copy(t0, t0 + 900, Copy{Kind::kMemset, 256, format::MemKind::kDevice,
                                 format::MemKind::kDevice, 0, 2, 80, false});
  record_kernel(t0, t0 + 5000, DeviceWork{intern("gemm"), 1, 9, 77, false});
  record_sync(t0, t0 + 300, DeviceWork{intern("cudaStreamSynchronize"), 1, 9, 81, false}, 2);
  record_collective(t0, t0 + 9000, Collective{intern("allreduce"), format::CollOp::kAllReduce,
                                              7, 1 << 26, 0xabcdef, 12, 1, 4, -1, 82, true});
  record_range(intern("forward"), t0, t0 + 1200, intern("user"));
  stallscope_range_push("nested");
  stallscope_range_pop();
  record_counter(intern("queue.ready"), 2.5, 1234);
  stallscope_mark("checkpoint");
  stallscope_data_wait_record(t0, t0 + 10, 4);
  return attach("config", "{\"workers\":4}") == 0 ? 0 : 8;
}

void say_rc(const char* what, int rc) {
  std::printf("rc_%s %d\n", what, rc);
  std::fflush(stdout);
}

// The format 1.1 kinds through the C API, for test_recorder_pipeline: known
// values, calls the API must refuse, calls while capture is off. Prints
// the return code of each ("rc_<call> N") and the tids it sampled.
int mode_pipeline_kinds() {
  const uint64_t t0 = stallscope_clock_now();
  const uint64_t id = 0xA11CE;
  say_rc("sample", stallscope_sample_record(t0, t0 + 1500, id, 3, 17, 4242, 2,
                                            STALLSCOPE_SAMPLE_GETITEM, 1));
  say_rc("fetch", stallscope_sample_record(t0, t0 + 5000, id, 3, 17, 0, -1,
                                           STALLSCOPE_SAMPLE_FETCH, 32));
  stallscope_loader_config c{};
  c.size = sizeof c;
  c.generation = 3;
  c.ts = t0 + 10;
  c.loader_id = id;
  c.dataset_len = 50000;
  c.num_workers = 4;
  c.prefetch_factor = 2;
  c.batch_size = 32;
  c.timeout_ms = 1500;
  c.dataset_name = stallscope_name_intern("MapDataset");
  c.collate_name = stallscope_name_intern("default_collate");
  c.sampler_name = stallscope_name_intern("RandomSampler");
  c.batch_sampler_name = stallscope_name_intern("BatchSampler");
  c.site_name = stallscope_name_intern("train.py:42");
  c.pin_memory = STALLSCOPE_PIN_INACTIVE;
  c.persistent_workers = 1;
  c.drop_last = 1;
  c.in_order = 0;
  c.mp_context = STALLSCOPE_MP_FORKSERVER;
  c.dataset_kind = STALLSCOPE_DATASET_MAP;
  c.flags = STALLSCOPE_LOADER_GETITEMS | STALLSCOPE_LOADER_OVERRIDDEN;
  say_rc("loader_config", stallscope_loader_config_record(&c));
  struct {  // a newer caller's struct, with fields this library does not know
    stallscope_loader_config c;
    uint64_t more[2];
  } longer{c, {~0ull, ~0ull}};
  longer.c.size = sizeof longer;
  longer.c.generation = 4;
  longer.c.ts = 0;  // now
  say_rc("loader_config_longer", stallscope_loader_config_record(&longer.c));
  say_rc("batch_handoff",
         stallscope_batch_handoff_record(t0, t0 + 8000, t0 + 2000, id, 3, 17, 1, 31337));
  say_rc("channel_handoff",
         stallscope_channel_handoff_record(t0, t0 + 700, t0 + 300, 0xC4A77E1,
                                           STALLSCOPE_CHANNEL_MP_QUEUE, 101, 102, 201, 202, 555,
                                           65540, 3));
  const stallscope_name_t frames[] = {stallscope_name_intern("leaf"),
                                      stallscope_name_intern("middle"),
                                      stallscope_name_intern("root")};
  say_rc("stack", stallscope_stack_sample_record(t0 + 100, 0, 20000000, 1500,
                                                 STALLSCOPE_CPU_RUNNING, STALLSCOPE_STACK_LATE,
                                                 frames, 3));
  // Another thread, sampled from here: the sample goes on its track.
  std::atomic<uint32_t> other{0};
  std::atomic<bool> quit{false};
  std::thread t([&] {
    other = static_cast<uint32_t>(::syscall(SYS_gettid));
    while (!quit) sleep_ms(1);
  });
  while (other == 0) sleep_ms(1);
  say_rc("stack_other", stallscope_stack_sample_record(t0 + 200, other, 20000000, 900,
                                                       STALLSCOPE_CPU_BLOCKED, 0, frames, 2));
  quit = true;
  t.join();
  std::vector<stallscope_name_t> deep(20000, frames[1]);
  deep[0] = frames[0];
  say_rc("stack_deep", stallscope_stack_sample_record(t0 + 300, 0, 1000, 0, 0,
                                                      STALLSCOPE_STACK_NATIVE, deep.data(),
                                                      static_cast<uint32_t>(deep.size())));
  say_rc("stack_empty", stallscope_stack_sample_record(t0 + 400, 0, 1000, 1, 0, 0, nullptr, 0));
  say("main_tid", static_cast<unsigned long long>(::syscall(SYS_gettid)));
  say("other_tid", other);

  // Refused: nothing of these may reach the file.
  say_rc("bad_sample_end", stallscope_sample_record(t0 + 10, t0, id, 0, 0, 0, 0, 0, 1));
  say_rc("bad_sample_part", stallscope_sample_record(t0, t0, id, 0, 0, 0, 0, 9, 1));
  say_rc("bad_config_null", stallscope_loader_config_record(nullptr));
  stallscope_loader_config bad = c;
  bad.size = 8;
  say_rc("bad_config_size", stallscope_loader_config_record(&bad));
  bad = c;
  bad.pin_memory = 5;
  say_rc("bad_config_enum", stallscope_loader_config_record(&bad));
  bad = c;
  bad.flags = 0x80;
  say_rc("bad_config_flags", stallscope_loader_config_record(&bad));
  say_rc("bad_handoff_end", stallscope_batch_handoff_record(t0 + 5, t0, 0, id, 0, 0, 0, 0));
  say_rc("bad_channel_type",
         stallscope_channel_handoff_record(t0, t0, 0, 1, 99, 0, 0, 0, 0, 0, 0, 0));
  say_rc("bad_channel_end", stallscope_channel_handoff_record(t0 + 5, t0, 0, 1, 0, 0, 0, 0, 0,
                                                              0, 0, 0));
  say_rc("bad_stack_frames", stallscope_stack_sample_record(t0, 0, 0, 0, 0, 0, nullptr, 2));
  say_rc("bad_stack_cpu", stallscope_stack_sample_record(t0, 0, 0, 0, 7, 0, frames, 1));
  say_rc("bad_stack_flags", stallscope_stack_sample_record(t0, 0, 0, 0, 0, 0x80, frames, 1));

  // Not recording: capture off.
  stallscope_capture_set(0);
  say_rc("off_sample", stallscope_sample_record(t0, t0 + 1, id, 0, 0, 0, 0, 0, 1));
  say_rc("off_config", stallscope_loader_config_record(&c));
  say_rc("off_batch", stallscope_batch_handoff_record(t0, t0 + 1, 0, id, 0, 0, 0, 0));
  say_rc("off_channel", stallscope_channel_handoff_record(t0, t0 + 1, 0, 1, 0, 0, 0, 0, 0, 0, 0,
                                                          0));
  say_rc("off_stack", stallscope_stack_sample_record(t0, 0, 0, 0, 0, 0, frames, 1));
  stallscope_capture_set(1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  if (mode == "threads") return mode_threads(int(arg(2, 8)), arg(3, 1000));
  if (mode == "thread-exit") return mode_thread_exit(arg(2, 1000));
  if (mode == "on-behalf") return mode_on_behalf(arg(2, 1000));
  if (mode == "thread-names") return mode_thread_names();
  if (mode == "paced") return mode_paced(arg(2, 800), arg(3, 250));
  if (mode == "kill-after-flush") return mode_kill_after_flush(arg(2, 1000));
  if (mode == "pause-then-burst")
    return mode_pause_then_burst(arg(2, 1000), int(arg(3, 300)), arg(4, 1000));
  if (mode == "fill-then-burst")
    return mode_fill_then_burst(arg(2, 1000), int(arg(3, 1)), arg(4, 1000));
  if (mode == "signal-own") return mode_wait_for_signal(true, argv[2], arg(3, 1000));
  if (mode == "signal-default") return mode_wait_for_signal(false, nullptr, arg(2, 1000));
  if (mode == "underscore-exit") return mode_underscore_exit(arg(2, 1000));
  if (mode == "close-all") return mode_close_all(argv[2], arg(3, 1000));
  if (mode == "fork") return mode_fork(arg(2, 1000));
  if (mode == "fork-worker") return mode_fork_worker(arg(2, 400));
  if (mode == "control") return mode_control(argv[2], arg(3, 100));
  if (mode == "control-end") return mode_control_end(argv[2], arg(3, 100));
  if (mode == "all-kinds") return mode_all_kinds();
  if (mode == "pipeline-kinds") return mode_pipeline_kinds();
  return 2;
}
