/* Reads one file through every wrapped libc entry point, each call with its
 * own size and offset, and prints what it asked for ("EXPECT bytes offset")
 * so the test can match the trace call by call. Links nothing of
 * stallscope; built plain, with -D_FILE_OFFSET_BITS=64 and with
 * -D_FORTIFY_SOURCE=3 -O2. The file is sparse beyond 4 GiB with a text
 * region (lines of 100 + k bytes) at kText.
 *   probe_reads FILE            all read variants
 *   probe_reads --symbols LIST  checks that each symbol of LIST resolves
 *                               to the preloaded shim */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define GiB (1024LL * 1024 * 1024)
static const long long kBase = 4 * GiB + 4096; /* positional reads: above 4 GiB */
static const long long kText = 4 * GiB + 64 * 1024 * 1024; /* the text lines */

/* libc entry points without a declaration in the headers. */
extern ssize_t __read(int, void*, size_t);
extern ssize_t __pread64(int, void*, size_t, off64_t);
#ifndef __USE_FORTIFY_LEVEL
#define __USE_FORTIFY_LEVEL 0
#endif
#if __USE_FORTIFY_LEVEL == 0 /* else <unistd.h> declares them */
extern ssize_t __read_chk(int, void*, size_t, size_t);
extern ssize_t __pread_chk(int, void*, size_t, off_t, size_t);
extern ssize_t __pread64_chk(int, void*, size_t, off64_t, size_t);
#endif
extern int __open(const char*, int, ...);
extern int __open64(const char*, int, ...);
extern int __open_2(const char*, int);
extern int __open64_2(const char*, int);
extern int __openat_2(int, const char*, int);
extern int __openat64_2(int, const char*, int);
extern FILE* _IO_fopen(const char*, const char*);
extern FILE* _IO_fdopen(int, const char*);
extern size_t _IO_fread(void*, size_t, size_t, FILE*);
extern char* _IO_fgets(char*, int, FILE*);
extern int _IO_getc(FILE*);
extern size_t __fread_chk(void*, size_t, size_t, size_t, FILE*);
extern size_t __fread_unlocked_chk(void*, size_t, size_t, size_t, FILE*);
extern char* __fgets_chk(char*, size_t, int, FILE*);
extern char* __fgets_unlocked_chk(char*, size_t, int, FILE*);
extern ssize_t __getdelim(char**, size_t*, int, FILE*);
extern size_t _IO_getline(FILE*, char*, size_t, int, int);
extern size_t _IO_getline_info(FILE*, char*, size_t, int, int, int*);

static char buf[1 << 20];
static int size_k = 0; /* each call gets a distinct size: 100 + k */

static void expect(long long bytes, long long off) { printf("EXPECT %lld %lld\n", bytes, off); }
static size_t next_size(void) { return (size_t)(100 + size_k++); }
static long long next_off(void) { return kBase + (long long)size_k * 8192; }
static void check(int ok, const char* what) {
  if (!ok) { fprintf(stderr, "probe: %s failed\n", what); exit(2); }
}

/* Offset of text line k (lines 0..): each line is 100 + k bytes. */
static long long line_off(int k) { return kText + (long long)k * 100 + (long long)k * (k - 1) / 2; }

static void positional(int fd) {
  size_t n; long long off;
/* errno is set before each read: a successful traced read must leave it. */
#define KEPT(what) check(errno == 4242, "errno kept by " what)
#define POS(call) do { off = next_off(); n = next_size(); errno = 4242; check(call == (ssize_t)n, #call); KEPT(#call); expect(n, off); } while (0)
  POS(pread(fd, buf, n, off));
  POS(pread64(fd, buf, n, off));
  POS(__pread64(fd, buf, n, off));
  POS(__pread_chk(fd, buf, n, off, sizeof buf));
  POS(__pread64_chk(fd, buf, n, off, sizeof buf));
  { off = next_off(); n = next_size(); struct iovec v[2] = {{buf, 10}, {buf + 10, n - 10}};
    check(preadv(fd, v, 2, off) == (ssize_t)n, "preadv"); expect(n, off); }
  { off = next_off(); n = next_size(); struct iovec v[1] = {{buf, n}};
    check(preadv64(fd, v, 1, off) == (ssize_t)n, "preadv64"); expect(n, off); }
  { off = next_off(); n = next_size(); struct iovec v[1] = {{buf, n}};
    check(preadv2(fd, v, 1, off, 0) == (ssize_t)n, "preadv2"); expect(n, off); }
  { off = next_off(); n = next_size(); struct iovec v[1] = {{buf, n}};
    check(preadv64v2(fd, v, 1, off, 0) == (ssize_t)n, "preadv64v2"); expect(n, off); }
#define SEQ(call) do { off = next_off(); n = next_size(); check(lseek(fd, off, SEEK_SET) == off, "lseek"); errno = 4242; check(call == (ssize_t)n, #call); KEPT(#call); expect(n, off); } while (0)
  SEQ(read(fd, buf, n));
  SEQ(__read(fd, buf, n));
  SEQ(__read_chk(fd, buf, n, sizeof buf));
  { off = next_off(); n = next_size(); struct iovec v[2] = {{buf, 7}, {buf + 7, n - 7}};
    check(lseek(fd, off, SEEK_SET) == off, "lseek"); check(readv(fd, v, 2) == (ssize_t)n, "readv");
    expect(n, off); }
}

static void opens(const char* path) {
  int fds[10], k = 0;
  fds[k++] = open(path, O_RDONLY);
  fds[k++] = open64(path, O_RDONLY);
  fds[k++] = __open(path, O_RDONLY);
  fds[k++] = __open64(path, O_RDONLY);
  fds[k++] = openat(AT_FDCWD, path, O_RDONLY);
  fds[k++] = openat64(AT_FDCWD, path, O_RDONLY);
  fds[k++] = __open_2(path, O_RDONLY);
  fds[k++] = __open64_2(path, O_RDONLY);
  fds[k++] = __openat_2(AT_FDCWD, path, O_RDONLY);
  fds[k++] = __openat64_2(AT_FDCWD, path, O_RDONLY);
  for (int i = 0; i < k; ++i) {
    check(fds[i] >= 0, "open variant");
    long long off = next_off(); size_t n = next_size();
    check(pread(fds[i], buf, n, off) == (ssize_t)n, "pread after open"); expect(n, off);
    close(fds[i]);
  }
}

static FILE* at(FILE* f, long long off) { check(fseeko(f, off, SEEK_SET) == 0, "fseeko"); return f; }

static void streams(FILE* f) {
  size_t n; long long off;
#define FREAD(call) do { off = next_off(); n = next_size(); check(call == n, #call); expect(n, off); } while (0)
  FREAD(fread(buf, 1, n, at(f, off)));
  FREAD(fread_unlocked(buf, 1, n, at(f, off)));
  FREAD(_IO_fread(buf, 1, n, at(f, off)));
  FREAD(__fread_chk(buf, sizeof buf, 1, n, at(f, off)));
  FREAD(__fread_unlocked_chk(buf, sizeof buf, 1, n, at(f, off)));
  /* Line readers on text line k: 100 + k bytes with the newline. */
  int k = 0;
#define LINE(call, expected) do { off = line_off(k); at(f, off); check((call), #call); expect(expected, off); ++k; } while (0)
  LINE(fgets(buf, sizeof buf, f) != NULL, 100 + k);
  LINE(fgets_unlocked(buf, sizeof buf, f) != NULL, 100 + k);
  LINE(_IO_fgets(buf, sizeof buf, f) != NULL, 100 + k);
  LINE(__fgets_chk(buf, sizeof buf, sizeof buf, f) != NULL, 100 + k);
  LINE(__fgets_unlocked_chk(buf, sizeof buf, sizeof buf, f) != NULL, 100 + k);
  char* line = NULL; size_t cap = 0;
  LINE(getline(&line, &cap, f) == 100 + k, 100 + k);
  LINE(getdelim(&line, &cap, '\n', f) == 100 + k, 100 + k);
  LINE(__getdelim(&line, &cap, '\n', f) == 100 + k, 100 + k);
  LINE(_IO_getline(f, buf, sizeof buf, '\n', 1) == (size_t)(100 + k), 100 + k);
  { int eof = 0; LINE(_IO_getline_info(f, buf, sizeof buf, '\n', 1, &eof) == (size_t)(100 + k), 100 + k); }
  free(line);
  off = line_off(k);
#define CHAR(call) do { at(f, off); check((call) != EOF, #call); expect(1, off); off += 1; } while (0)
  CHAR(getc(f)); CHAR(fgetc(f)); CHAR(_IO_getc(f));
  /* Optimized builds inline getc_unlocked/fgetc_unlocked (bits/stdio.h):
   * such uses never call libc and are not seen. Called through a pointer
   * here, so that the symbols themselves are exercised. */
  int (*volatile gu)(FILE*) = getc_unlocked;
  int (*volatile fgu)(FILE*) = fgetc_unlocked;
  CHAR(gu(f)); CHAR(fgu(f));
  at(f, off); check(getw(f) != EOF || !ferror(f), "getw"); expect(sizeof(int), off);
}

static int check_symbols(const char* list) {
  FILE* f = fopen(list, "r");
  if (f == NULL) { perror(list); return 2; }
  char sym[256]; int bad = 0, n = 0;
  while (fgets(sym, sizeof sym, f) != NULL) {
    sym[strcspn(sym, "\n")] = '\0';
    if (sym[0] == '#' || sym[0] == '\0') continue;
    void* p = dlsym(RTLD_DEFAULT, sym);
    Dl_info info;
    const int ours = p != NULL && dladdr(p, &info) != 0 && info.dli_fname != NULL &&
                     strstr(info.dli_fname, "libstallscope_preload") != NULL;
    if (!ours) { printf("UNWRAPPED %s\n", sym); ++bad; }
    ++n;
  }
  fclose(f);
  printf("SYMBOLS %d\nUNWRAPPED %d\n", n, bad);
  return bad == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--symbols") == 0) return check_symbols(argv[2]);
  if (argc != 2) { fprintf(stderr, "usage: probe_reads FILE | --symbols LIST\n"); return 2; }
  const int fd = open(argv[1], O_RDONLY);
  check(fd >= 0, "open");
  positional(fd);
  opens(argv[1]);
  FILE* f = fopen(argv[1], "r"); check(f != NULL, "fopen"); streams(f); fclose(f);
  f = fopen64(argv[1], "r"); check(f != NULL, "fopen64");
  long long off = next_off(); size_t n = next_size();
  check(fread(buf, 1, n, at(f, off)) == n, "fread fopen64"); expect(n, off);
  f = freopen64(argv[1], "r", f); check(f != NULL, "freopen64");
  off = next_off(); n = next_size();
  check(fread(buf, 1, n, at(f, off)) == n, "fread freopen64"); expect(n, off);
  fclose(f);
  f = _IO_fopen(argv[1], "r"); check(f != NULL, "_IO_fopen");
  off = next_off(); n = next_size();
  check(fread(buf, 1, n, at(f, off)) == n, "fread _IO_fopen"); expect(n, off);
  fclose(f);
  f = fdopen(dup(fd), "r"); check(f != NULL, "fdopen");
  off = next_off(); n = next_size();
  check(fread(buf, 1, n, at(f, off)) == n, "fread fdopen"); expect(n, off);
  fclose(f);
  close(fd);
  printf("DONE %d\n", size_k);
  return 0;
}
