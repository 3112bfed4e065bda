// A program that does not link stallscope, started by `stallscope run` in
// the attach tests. It finds the recorder's C API with dlsym when the shim
// (or the recorder itself) was preloaded, like an NVTX-annotated program
// finds its injection, and otherwise runs untraced.
//
//   attach_child exit N                 exit with status N
//   attach_child raise SIG              kill itself with signal SIG
//   attach_child wait-signal FILE       on SIGINT/SIGTERM write FILE, exit 0
//   attach_child steps N MS DONE_FILE   N steps of MS ms of CPU work each,
//                                       then write DONE_FILE and exit 0
//   attach_child ranges N MS DONE_FILE  the same, each step a range named
//                                       "train_step <i>" instead of step marks
//   attach_child waits N MS DONE_FILE   N steps, each a recorded data wait
//                                       of MS ms (asleep) and MS/4 ms of CPU
//   attach_child family MS PID_FILE     forks a worker and a setsid()
//                                       grandchild (double fork), all three
//                                       ignoring SIGTERM; writes "main worker
//                                       grandchild" pids to PID_FILE, then
//                                       steps of MS ms forever (the worker
//                                       and grandchild record ranges)
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using StepFn = void (*)(uint64_t);
using InitFn = int (*)();
using PushFn = void (*)(const char*);
using PopFn = void (*)();

volatile sig_atomic_t g_signal = 0;

void on_signal(int sig) { g_signal = sig; }

void write_file(const char* path, const std::string& text) {
  if (FILE* f = std::fopen(path, "w")) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
}

void burn_ms(int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  volatile uint64_t x = 1;
  while (std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 1000; ++i) x = x * 6364136223846793005ull + 1;
  }
}

int wait_signal(const char* file) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (auto init = reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "stallscope_init"))) init();
  write_file((std::string(file) + ".ready").c_str(), "ready\n");
  for (int i = 0; i < 3000 && g_signal == 0; ++i) usleep(10000);
  if (g_signal == 0) return 9;  // nobody forwarded anything in 30 s
  write_file(file, "signal " + std::to_string(g_signal) + "\n");
  return 0;
}

int steps(int n, int ms, const char* done) {
  auto begin = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "stallscope_step_begin"));
  auto end = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "stallscope_step_end"));
  for (int i = 0; i < n; ++i) {
    if (begin) begin(static_cast<uint64_t>(i));
    burn_ms(ms);
    if (end) end(static_cast<uint64_t>(i));
  }
  write_file(done, "done\n");
  return 0;
}

// Steps that mostly wait for data: each records a data wait of `ms` (a
// sleep) and then burns a quarter of that.
int waits(int n, int ms, const char* done) {
  using NowFn = uint64_t (*)();
  using WaitFn = void (*)(uint64_t, uint64_t, uint64_t);
  auto begin = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "stallscope_step_begin"));
  auto end = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "stallscope_step_end"));
  auto now = reinterpret_cast<NowFn>(dlsym(RTLD_DEFAULT, "stallscope_clock_now"));
  auto wait = reinterpret_cast<WaitFn>(dlsym(RTLD_DEFAULT, "stallscope_data_wait_record"));
  for (int i = 0; i < n; ++i) {
    if (begin) begin(static_cast<uint64_t>(i));
    const uint64_t t0 = now ? now() : 0;
    ::usleep(static_cast<useconds_t>(ms) * 1000);
    if (now && wait) wait(t0, now(), static_cast<uint64_t>(i));
    burn_ms(ms / 4);
    if (end) end(static_cast<uint64_t>(i));
  }
  write_file(done, "done\n");
  return 0;
}

int ranges(int n, int ms, const char* done) {
  auto push = reinterpret_cast<PushFn>(dlsym(RTLD_DEFAULT, "stallscope_range_push"));
  auto pop = reinterpret_cast<PopFn>(dlsym(RTLD_DEFAULT, "stallscope_range_pop"));
  for (int i = 0; i < n; ++i) {
    const std::string name = "train_step " + std::to_string(i);
    if (push) push(name.c_str());
    burn_ms(ms);
    if (pop) pop();
  }
  write_file(done, "done\n");
  return 0;
}

// A process of the family: records a range every 20 ms, forever.
[[noreturn]] void busy_forever(const char* name) {
  auto push = reinterpret_cast<PushFn>(dlsym(RTLD_DEFAULT, "stallscope_range_push"));
  auto pop = reinterpret_cast<PopFn>(dlsym(RTLD_DEFAULT, "stallscope_range_pop"));
  for (;;) {
    if (push) push(name);
    burn_ms(2);
    if (pop) pop();
    usleep(20000);
  }
}

int family(int ms, const char* pid_file) {
  signal(SIGTERM, SIG_IGN);  // inherited by both children
  const pid_t worker = fork();
  if (worker == 0) busy_forever("worker fetch");
  int pipe_fd[2];
  if (worker < 0 || pipe(pipe_fd) != 0) return 3;
  const pid_t middle = fork();
  if (middle == 0) {
    setsid();
    const pid_t grandchild = fork();
    if (grandchild == 0) busy_forever("daemon poll");
    const std::string text = std::to_string(grandchild);
    (void)!write(pipe_fd[1], text.data(), text.size());
    _exit(0);
  }
  close(pipe_fd[1]);
  char buf[32] = {};
  const ssize_t n = read(pipe_fd[0], buf, sizeof buf - 1);
  waitpid(middle, nullptr, 0);
  if (n <= 0) return 4;
  write_file(pid_file, std::to_string(getpid()) + " " + std::to_string(worker) + " " +
                           std::string(buf, static_cast<size_t>(n)) + "\n");
  auto begin = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "stallscope_step_begin"));
  auto end = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "stallscope_step_end"));
  for (uint64_t i = 0;; ++i) {
    if (begin) begin(i);
    burn_ms(ms);
    if (end) end(i);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "exit" && argc == 3) return std::atoi(argv[2]);
  if (mode == "raise" && argc == 3) {
    signal(std::atoi(argv[2]), SIG_DFL);
    raise(std::atoi(argv[2]));
    return 99;
  }
  if (mode == "wait-signal" && argc == 3) return wait_signal(argv[2]);
  if (mode == "steps" && argc == 5) return steps(std::atoi(argv[2]), std::atoi(argv[3]), argv[4]);
  if (mode == "waits" && argc == 5) return waits(std::atoi(argv[2]), std::atoi(argv[3]), argv[4]);
  if (mode == "ranges" && argc == 5) return ranges(std::atoi(argv[2]), std::atoi(argv[3]), argv[4]);
  if (mode == "family" && argc == 4) return family(std::atoi(argv[2]), argv[3]);
  std::fprintf(stderr,
               "usage: attach_child exit N | raise SIG | wait-signal FILE | "
               "steps|ranges|waits N MS DONE_FILE | family MS PID_FILE\n");
  return 2;
}
