// relay_overhead: what the shim's relay tracking (relays.hpp) adds to calls
// that do not block: a tight sem_post + sem_wait loop on one semaphore (a
// mutex-like use: symmetric at once) and pthread_cond_signal with no
// waiter. The same loops run in child processes without the shim, with it
// and with it but STALLSCOPE_PRELOAD_RELAYS=off, in turn; each child times
// its loop thread's CPU (CLOCK_THREAD_CPUTIME_ID: the machine may be
// shared). The verdict takes the best round of each and divides the
// difference by the calls made (2 per sem pair, 1 per signal).
//
//   relay_overhead [--calls N] [--rounds R]
//   RESULT relay_sem_overhead <ns> ns/call target <= 30 PASS|MISS
//   RESULT relay_cond_signal_overhead <ns> ns/call target <= 30 PASS|MISS
#include <pthread.h>
#include <semaphore.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr double kTargetNs = 30;

double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

// The child: both loops, ns per loop iteration on stdout.
int child(long calls) {
  sem_t sem;
  sem_init(&sem, 0, 0);
  const double a = thread_cpu_ns();
  for (long i = 0; i < calls; ++i) {
    sem_post(&sem);
    sem_wait(&sem);
  }
  const double b = thread_cpu_ns();
  pthread_cond_t cond;
  pthread_cond_init(&cond, nullptr);
  for (long i = 0; i < calls; ++i) pthread_cond_signal(&cond);
  const double c = thread_cpu_ns();
  pthread_cond_destroy(&cond);
  sem_destroy(&sem);
  std::printf("%f %f\n", (b - a) / double(calls), (c - b) / double(calls));
  return 0;
}

struct Times {
  double sem = 1e18, signal = 1e18;
};

void run_child(const char* self, long calls, const char* preload, bool relays, Times* best,
               const std::string& out) {
  int fds[2];
  if (pipe(fds) != 0) return;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    if (preload != nullptr) setenv("LD_PRELOAD", preload, 1);
    setenv("STALLSCOPE_OUT", out.c_str(), 1);
    setenv("STALLSCOPE_QUIET", "on", 1);
    setenv("STALLSCOPE_PRELOAD_RELAYS", relays ? "on" : "off", 1);
    const std::string n = std::to_string(calls);
    execl(self, self, "--child", n.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buf[256] = {};
  ssize_t got = 0, n;
  while ((n = read(fds[0], buf + got, sizeof buf - 1 - size_t(got))) > 0) got += n;
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  double s = 0, c = 0;
  if (std::sscanf(buf, "%lf %lf", &s, &c) == 2) {
    best->sem = std::min(best->sem, s);
    best->signal = std::min(best->signal, c);
  }
}

void result(const char* name, double ns, double target) {
  std::printf("RESULT %s %.1f ns/call target <= %.0f %s\n", name, ns, target,
              ns <= target ? "PASS" : "MISS");
}

}  // namespace

int main(int argc, char** argv) {
  long calls = 2000000;
  int rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--child") == 0) return child(std::atol(argv[i + 1]));
    if (std::strcmp(argv[i], "--calls") == 0) calls = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
  }
  char tmpl[] = "/tmp/relay-overhead-XXXXXX";
  const std::string out = mkdtemp(tmpl) != nullptr ? tmpl : "/tmp";
  Times plain, shim, off;
  for (int r = 0; r < rounds; ++r) {
    run_child(argv[0], calls, nullptr, true, &plain, out);
    run_child(argv[0], calls, STALLSCOPE_PRELOAD_LIB, true, &shim, out);
    run_child(argv[0], calls, STALLSCOPE_PRELOAD_LIB, false, &off, out);
  }
  const std::string rm = "rm -rf '" + out + "'";
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", out.c_str());
  std::printf("RESULT relay_sem_pair_ns_plain %.1f ns target >= 0 PASS\n", plain.sem);
  std::printf("RESULT relay_sem_pair_ns_shim %.1f ns target >= 0 PASS\n", shim.sem);
  std::printf("RESULT relay_sem_pair_ns_relays_off %.1f ns target >= 0 PASS\n", off.sem);
  std::printf("RESULT relay_cond_signal_ns_plain %.1f ns target >= 0 PASS\n", plain.signal);
  std::printf("RESULT relay_cond_signal_ns_shim %.1f ns target >= 0 PASS\n", shim.signal);
  // A sem pair is two calls.
  result("relay_sem_overhead", (shim.sem - plain.sem) / 2, kTargetNs);
  result("relay_cond_signal_overhead", shim.signal - plain.signal, kTargetNs);
  return 0;
}
