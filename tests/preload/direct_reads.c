/* Checks of the shim's direct reads (integrations/preload/src/direct_read.hpp),
 * from a program that knows nothing of stallscope:
 *
 *   direct_reads where FILE    which object made the read and pread system
 *                              calls: a seccomp filter traps both on one
 *                              descriptor, and the SIGSYS handler names the
 *                              object holding the calling instruction
 *                              ("pread_by libstallscope_preload.so"); the
 *                              trapped call "reads" all it was asked for.
 *                              Prints "pread_counted N", the preads of that
 *                              descriptor an interposer exporting
 *                              pread_counter_calls saw, when one is loaded.
 *   direct_reads errors FILE   errors come back as libc's: EINVAL, EFAULT,
 *                              EBADF with -1; 0 at the end of the file; a
 *                              successful read leaves errno alone.
 *   direct_reads cancel FILE   a thread reading FILE in a loop with nothing
 *                              but pread is cancelled and joined.
 * Exits 0 when every check held, 1 otherwise (a line names the failure),
 * 77 where the check cannot run (not x86-64, seccomp refused). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#endif

enum { kFd = 100 };
static int failures;

static void check(int ok, const char* what) {
  if (!ok) {
    printf("FAIL %s (errno %d)\n", what, errno);
    ++failures;
  }
}

static const char* base_name(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}

#if defined(__x86_64__)
static void* volatile g_call_addr;

static void on_sigsys(int sig, siginfo_t* si, void* ctx) {
  (void)sig;
  ucontext_t* uc = (ucontext_t*)ctx;
  g_call_addr = si->si_call_addr;
  uc->uc_mcontext.gregs[REG_RAX] = uc->uc_mcontext.gregs[REG_RDX];  /* all bytes "read" */
}

/* Traps read and pread64 on descriptor kFd, in this thread only. */
static int trap_reads(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 5),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kFd, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pread64, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_read, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  if (sigaction(SIGSYS, &sa, NULL) != 0) return -1;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

static const char* caller(void) {
  Dl_info info;
  void* at = g_call_addr;
  g_call_addr = NULL;
  if (at == NULL) return "(not trapped)";
  if (dladdr(at, &info) == 0 || info.dli_fname == NULL) return "(unknown)";
  return base_name(info.dli_fname);
}

static int where(const char* file) {
  const int fd = open(file, O_RDONLY);
  if (fd < 0 || dup2(fd, kFd) != kFd) { perror(file); return 1; }
  close(fd);
  if (trap_reads() != 0) { printf("SKIP seccomp refused (errno %d)\n", errno); return 77; }
  static char buf[8192];
  errno = 4242;
  check(pread(kFd, buf, 4096, 8192) == 4096, "trapped pread");
  check(errno == 4242, "errno kept by pread");
  printf("pread_by %s\n", caller());
  check(read(kFd, buf, 512) == 512, "trapped read");
  printf("read_by %s\n", caller());
  long (*counted)(int) = (long (*)(int))dlsym(RTLD_DEFAULT, "pread_counter_calls");
  if (counted != NULL) printf("pread_counted %ld\n", counted(kFd));
  return failures != 0;
}
#endif

static int errors(const char* file) {
  const int fd = open(file, O_RDONLY);
  if (fd < 0) { perror(file); return 1; }
  char buf[64];
  errno = 0;
  check(pread(fd, buf, sizeof buf, -1) == -1 && errno == EINVAL, "pread at offset -1: EINVAL");
  errno = 0;
  check(pread(fd, NULL, sizeof buf, 0) == -1 && errno == EFAULT, "pread into NULL: EFAULT");
  errno = 0;
  check(read(fd, NULL, sizeof buf) == -1 && errno == EFAULT, "read into NULL: EFAULT");
  errno = 4242;
  check(pread(fd, buf, sizeof buf, 1L << 40) == 0 && errno == 4242, "pread past the end: 0");
  errno = 4242;
  check(read(fd, buf, sizeof buf) == (ssize_t)sizeof buf && errno == 4242, "read: errno kept");
  check(lseek(fd, 0, SEEK_CUR) == (off_t)sizeof buf, "read advances the position");
  const int wr = open(file, O_WRONLY);
  errno = 0;
  check(wr >= 0 && pread(wr, buf, sizeof buf, 0) == -1 && errno == EBADF, "pread of O_WRONLY: EBADF");
  errno = 0;
  check(read(wr, buf, sizeof buf) == -1 && errno == EBADF, "read of O_WRONLY: EBADF");
  close(wr);
  close(fd);
  if (failures == 0) printf("errors_ok\n");
  return failures != 0;
}

static volatile long g_reads;

static void* spin(void* arg) {
  const int fd = *(const int*)arg;
  char buf[4096];
  for (;;) {
    if (pread(fd, buf, sizeof buf, 0) < 0) return NULL;
    g_reads = g_reads + 1;
  }
  return NULL;
}

static int cancel(const char* file) {
  int fd = open(file, O_RDONLY);
  if (fd < 0) { perror(file); return 1; }
  alarm(30);  /* a read loop that ignores the cancellation would hang here */
  pthread_t t;
  check(pthread_create(&t, NULL, spin, &fd) == 0, "pthread_create");
  while (g_reads < 20000) usleep(1000);
  check(pthread_cancel(t) == 0, "pthread_cancel");
  void* result = NULL;
  check(pthread_join(t, &result) == 0, "pthread_join");
  check(result == PTHREAD_CANCELED, "the thread was cancelled");
  printf("cancelled_after %ld\n", (long)g_reads);
  return failures != 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: direct_reads where|errors|cancel FILE\n");
    return 2;
  }
  if (strcmp(argv[1], "errors") == 0) return errors(argv[2]);
  if (strcmp(argv[1], "cancel") == 0) return cancel(argv[2]);
#if defined(__x86_64__)
  if (strcmp(argv[1], "where") == 0) return where(argv[2]);
#else
  if (strcmp(argv[1], "where") == 0) return 77;
#endif
  fprintf(stderr, "direct_reads: unknown mode %s\n", argv[1]);
  return 2;
}
