/* A program that knows nothing of stallscope, for the process-tree
 * regressions (RELIABILITY.md 42, 43, 45). Each mode prints what it did.
 *   process_tree execfail FILE PROG…  10 reads of FILE (1..10 bytes), then
 *                                     for each PROG an execv that must fail,
 *                                     printing "EXEC <errno>", and 10 reads
 *                                     more (the next sizes); exit 0.
 *                                     "big:PROG" passes PROG an argument
 *                                     of 200 KiB (E2BIG)
 *   process_tree chdirfork FILE DIR   read 31 bytes, chdir DIR, fork a child
 *                                     that reads 32 bytes, read 33 bytes;
 *                                     exit 0 when the child did
 *   process_tree vforkexec PROG…      vfork, execv PROG… in the child; exit
 *                                     with the child's status */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char buf[4096];

static void die(const char* what) { perror(what); exit(3); }

static void read_n(const char* path, size_t n) {
  const int fd = open(path, O_RDONLY);
  if (fd < 0) die(path);
  if (pread(fd, buf, n, 0) != (ssize_t)n) die("pread");
  close(fd);
}

static int execfail(const char* file, char** progs, int n) {
  size_t size = 1;
  for (int i = 0; i < 10; ++i) read_n(file, size++);
  static char big[200 * 1024]; /* past MAX_ARG_STRLEN: E2BIG */
  memset(big, 'x', sizeof big - 1);
  for (int k = 0; k < n; ++k) {
    const int e2big = strncmp(progs[k], "big:", 4) == 0;
    char* prog = e2big ? progs[k] + 4 : progs[k];
    char* argv[] = {prog, e2big ? big : NULL, NULL};
    execv(prog, argv);
    printf("EXEC %d\n", errno);
    fflush(stdout);
    for (int i = 0; i < 10; ++i) read_n(file, size++);
  }
  return 0;
}

static int chdirfork(const char* file, const char* dir) {
  read_n(file, 31);
  if (chdir(dir) != 0) die(dir);
  const pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    read_n(file, 32);
    exit(0);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) die("waitpid");
  read_n(file, 33);
  printf("CHILD %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static int vforkexec(char** argv) {
  const pid_t pid = vfork();
  if (pid == 0) {
    execv(argv[0], argv);
    _exit(127);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) die("vfork");
  printf("STATUS %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* mode = argv[1];
  if (strcmp(mode, "execfail") == 0) return execfail(argv[2], argv + 3, argc - 3);
  if (strcmp(mode, "chdirfork") == 0 && argc == 4) return chdirfork(argv[2], argv[3]);
  if (strcmp(mode, "vforkexec") == 0) return vforkexec(argv + 2);
  return 2;
}
