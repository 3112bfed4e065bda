/* A program that knows nothing of stallscope, for the regressions of its
 * notes and of its run directory (test_repro_notes, test_repro_run_dir).
 *   note_target lines N        print "LINE i" for i < N on stdout, exit 0
 *   note_target fd2file DATA   close 0-2, put /dev/null at 0 and 1 and
 *                              DATA at descriptor 2, write a record, fork
 *                              a child that reads and exits, write another
 *                              record, exit 0 (4, 5: an open or dup2
 *                              failed; 6: the child failed)
 *   note_target wait FILE      read FILE, print "READY <pid>", wait for
 *                              stdin to close, read FILE again, print
 *                              "DONE", exit 0 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char buf[4096];

static int read_some(const char* path) {
  const int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  const ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  return n < 0 ? -1 : 0;
}

static int put(int fd, const char* text) {
  return write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -1;
}

static int fd2file(const char* data) {
  close(0);
  close(1);
  close(2);
  /* Placed with dup2 rather than taken as the lowest free numbers: the
   * recorder's threads open files of their own (/proc, progress/) and may
   * hold a low number for a moment while this runs. */
  int want[3] = {open("/dev/null", O_RDONLY), open("/dev/null", O_WRONLY),
                 open(data, O_WRONLY | O_CREAT | O_TRUNC, 0644)};
  for (int i = 0; i < 3; ++i) {  /* out of 0-2 first, whichever numbers they got */
    if (want[i] < 0) return 4;
    const int high = fcntl(want[i], F_DUPFD, 10);
    if (high < 0) return 4;
    close(want[i]);
    want[i] = high;
  }
  for (int i = 0; i < 3; ++i) {
    /* EBUSY: another thread (the recorder's sampler) is opening a file
     * that may take number i; Linux asks the caller to try again. */
    int tries = 0, got;
    while ((got = dup2(want[i], i)) < 0 && errno == EBUSY && ++tries < 1000) usleep(100);
    if (got != i) return 5;
    close(want[i]);
  }
  const int fd = 2;
  if (put(fd, "program record 1\n") != 0) return 7;
  const pid_t child = fork();
  if (child == 0) _exit(read_some("/proc/self/stat") == 0 ? 0 : 1);
  int st = 0;
  if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return 6;
  if (put(fd, "program record 2\n") != 0) return 7;
  return 0;
}

static int wait_for_stdin(const char* path) {
  if (read_some(path) != 0) return 3;
  printf("READY %d\n", (int)getpid());
  fflush(stdout);
  while (read(0, buf, sizeof buf) > 0) {
  }
  if (read_some(path) != 0) return 3;
  printf("DONE\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "lines") == 0) {
    const int n = atoi(argv[2]);
    for (int i = 0; i < n; ++i) printf("LINE %d\n", i);
    return fflush(stdout) == 0 ? 0 : 2;
  }
  if (argc >= 3 && strcmp(argv[1], "fd2file") == 0) return fd2file(argv[2]);
  if (argc >= 3 && strcmp(argv[1], "wait") == 0) return wait_for_stdin(argv[2]);
  fprintf(stderr, "usage: note_target lines N | fd2file DATA | wait FILE\n");
  return 2;
}
