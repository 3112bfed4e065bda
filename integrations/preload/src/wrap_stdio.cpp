// stdio: libc's stream functions read through internal calls the shim
// cannot see, so each entry point is wrapped. A stream read is recorded
// with the bytes handed to the caller at the stream's logical position
// (tracked per descriptor; seeks reset it).
// Optimized builds make <stdio.h> define getline, getc_unlocked and
// fgetc_unlocked inline (bits/stdio.h); clang then refuses the wrappers as
// redefinitions. Asking for the out-of-line declarations only:
#define __NO_INLINE__ 1
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "classify.hpp"
#include "io.hpp"
#include "real.hpp"

extern "C" {
FILE* _IO_fopen(const char*, const char*);
FILE* _IO_fdopen(int, const char*);
size_t _IO_fread(void*, size_t, size_t, FILE*);
char* _IO_fgets(char*, int, FILE*);
int _IO_getc(FILE*);
ssize_t __getdelim(char**, size_t*, int, FILE*);
size_t __fread_chk(void*, size_t, size_t, size_t, FILE*);
size_t __fread_unlocked_chk(void*, size_t, size_t, size_t, FILE*);
char* __fgets_chk(char*, size_t, int, FILE*);
char* __fgets_unlocked_chk(char*, size_t, int, FILE*);
size_t _IO_getline(FILE*, char*, size_t, int, int);
size_t _IO_getline_info(FILE*, char*, size_t, int, int, int*);
}

namespace pl = stallscope::preload;

namespace {

STALLSCOPE_REAL(fopen, nullptr);
STALLSCOPE_REAL(fopen64, nullptr);
STALLSCOPE_REAL(_IO_fopen, nullptr);
STALLSCOPE_REAL(freopen, nullptr);
STALLSCOPE_REAL(freopen64, nullptr);
STALLSCOPE_REAL(fdopen, nullptr);
STALLSCOPE_REAL(_IO_fdopen, nullptr);
STALLSCOPE_REAL(fclose, nullptr);
STALLSCOPE_REAL(fread, nullptr);
STALLSCOPE_REAL(_IO_fread, nullptr);
STALLSCOPE_REAL(fread_unlocked, nullptr);
STALLSCOPE_REAL(__fread_chk, nullptr);
STALLSCOPE_REAL(__fread_unlocked_chk, nullptr);
STALLSCOPE_REAL(fgets, nullptr);
STALLSCOPE_REAL(_IO_fgets, nullptr);
STALLSCOPE_REAL(fgets_unlocked, nullptr);
STALLSCOPE_REAL(__fgets_chk, nullptr);
STALLSCOPE_REAL(__fgets_unlocked_chk, nullptr);
STALLSCOPE_REAL(getline, nullptr);
STALLSCOPE_REAL(getdelim, nullptr);
STALLSCOPE_REAL(__getdelim, nullptr);
STALLSCOPE_REAL(_IO_getline, nullptr);
STALLSCOPE_REAL(_IO_getline_info, nullptr);
STALLSCOPE_REAL(getc, nullptr);
STALLSCOPE_REAL(_IO_getc, nullptr);
STALLSCOPE_REAL(fgetc, nullptr);
STALLSCOPE_REAL(getc_unlocked, nullptr);
STALLSCOPE_REAL(fgetc_unlocked, nullptr);
STALLSCOPE_REAL(getw, nullptr);
STALLSCOPE_REAL(fseek, nullptr);
STALLSCOPE_REAL(fseeko, nullptr);
STALLSCOPE_REAL(fseeko64, nullptr);
STALLSCOPE_REAL(rewind, nullptr);
STALLSCOPE_REAL(fsetpos, nullptr);
STALLSCOPE_REAL(fsetpos64, nullptr);

int fd_of(FILE* fp) { return fp != nullptr ? ::fileno_unlocked(fp) : -1; }

FILE* opened(FILE* fp, const char* path) {
  if (fp == nullptr || pl::in_foreign_process()) return fp;
  const int saved = errno;
  const int fd = fd_of(fp);
  pl::Guard guard;
  if (guard.entered()) {
    pl::fd_table().write(fd, pl::classify_fd(fd, path));
  } else {
    pl::fd_table().forget(fd);
  }
  errno = saved;
  return fp;
}

// The logical position after a seek (one lseek, on seeks only).
void repositioned(FILE* fp) {
  const long long pos = ::ftello64(fp);
  if (pos >= 0) pl::fd_table().set_position(fd_of(fp), static_cast<uint64_t>(pos));
}

// Times one stream read; `bytes_of` turns the result into bytes handed out.
template <typename R, typename Fn, typename Bytes>
R stream_read(FILE* fp, uint64_t asked, Fn call, Bytes bytes_of) {
  pl::ReadScope scope(fd_of(fp), pl::kTablePosition, asked);
  const R r = call();
  const int saved = errno;
  scope.done(bytes_of(r));
  errno = saved;
  return r;
}

ssize_t line_bytes(const char* s) { return s != nullptr ? ssize_t(std::strlen(s)) : -1; }
ssize_t char_bytes(int c) { return c == EOF ? -1 : 1; }

}  // namespace

#define EXPORT STALLSCOPE_SHIM_EXPORT

EXPORT FILE* fopen(const char* p, const char* m) { return opened(real_fopen.get()(p, m), p); }
EXPORT FILE* fopen64(const char* p, const char* m) { return opened(real_fopen64.get()(p, m), p); }
EXPORT FILE* _IO_fopen(const char* p, const char* m) {
  return opened(real__IO_fopen.get()(p, m), p);
}
EXPORT FILE* freopen(const char* p, const char* m, FILE* fp) {
  return opened(real_freopen.get()(p, m, fp), p);
}
EXPORT FILE* freopen64(const char* p, const char* m, FILE* fp) {
  return opened(real_freopen64.get()(p, m, fp), p);
}
EXPORT FILE* fdopen(int fd, const char* m) { return real_fdopen.get()(fd, m); }
EXPORT FILE* _IO_fdopen(int fd, const char* m) { return real__IO_fdopen.get()(fd, m); }
EXPORT int fclose(FILE* fp) {
  // fclose closes the descriptor inside libc: forget it first.
  if (fp != nullptr && !pl::in_foreign_process()) pl::fd_table().forget(fd_of(fp));
  return real_fclose.get()(fp);
}

#define FREAD_WRAPPER(name)                                                              \
  EXPORT size_t name(void* buf, size_t size, size_t n, FILE* fp) {                      \
    return stream_read<size_t>(fp, uint64_t(size) * n,                                   \
                               [&] { return real_##name.get()(buf, size, n, fp); },      \
                               [&](size_t k) { return ssize_t(k * size); });             \
  }
FREAD_WRAPPER(fread)
FREAD_WRAPPER(_IO_fread)
FREAD_WRAPPER(fread_unlocked)

#define FREAD_CHK_WRAPPER(name)                                                           \
  EXPORT size_t name(void* buf, size_t buflen, size_t size, size_t n, FILE* fp) {        \
    return stream_read<size_t>(fp, uint64_t(size) * n,                                    \
                               [&] { return real_##name.get()(buf, buflen, size, n, fp); }, \
                               [&](size_t k) { return ssize_t(k * size); });              \
  }
FREAD_CHK_WRAPPER(__fread_chk)
FREAD_CHK_WRAPPER(__fread_unlocked_chk)

#define FGETS_WRAPPER(name)                                                                \
  EXPORT char* name(char* s, int n, FILE* fp) {                                           \
    return stream_read<char*>(fp, n > 0 ? uint64_t(n) : 0,                                 \
                              [&] { return real_##name.get()(s, n, fp); }, line_bytes);    \
  }
FGETS_WRAPPER(fgets)
FGETS_WRAPPER(_IO_fgets)
FGETS_WRAPPER(fgets_unlocked)

#define FGETS_CHK_WRAPPER(name)                                                            \
  EXPORT char* name(char* s, size_t size, int n, FILE* fp) {                              \
    return stream_read<char*>(fp, n > 0 ? uint64_t(n) : 0,                                 \
                              [&] { return real_##name.get()(s, size, n, fp); },           \
                              line_bytes);                                                 \
  }
FGETS_CHK_WRAPPER(__fgets_chk)
FGETS_CHK_WRAPPER(__fgets_unlocked_chk)

EXPORT ssize_t getline(char** line, size_t* n, FILE* fp) {
  return stream_read<ssize_t>(fp, 0, [&] { return real_getline.get()(line, n, fp); },
                              [](ssize_t k) { return k; });
}
#define GETDELIM_WRAPPER(name)                                                              \
  EXPORT ssize_t name(char** line, size_t* n, int delim, FILE* fp) {                       \
    return stream_read<ssize_t>(fp, 0, [&] { return real_##name.get()(line, n, delim, fp); }, \
                                [](ssize_t k) { return k; });                               \
  }
GETDELIM_WRAPPER(getdelim)
GETDELIM_WRAPPER(__getdelim)

EXPORT size_t _IO_getline(FILE* fp, char* buf, size_t n, int delim, int extract) {
  return stream_read<size_t>(fp, n,
                             [&] { return real__IO_getline.get()(fp, buf, n, delim, extract); },
                             [](size_t k) { return ssize_t(k); });
}
EXPORT size_t _IO_getline_info(FILE* fp, char* buf, size_t n, int delim, int extract, int* eof) {
  return stream_read<size_t>(
      fp, n, [&] { return real__IO_getline_info.get()(fp, buf, n, delim, extract, eof); },
      [](size_t k) { return ssize_t(k); });
}

#define GETC_WRAPPER(name)                                                                 \
  EXPORT int name(FILE* fp) {                                                             \
    return stream_read<int>(fp, 1, [&] { return real_##name.get()(fp); }, char_bytes);     \
  }
GETC_WRAPPER(getc)
GETC_WRAPPER(_IO_getc)
GETC_WRAPPER(fgetc)
GETC_WRAPPER(getc_unlocked)
GETC_WRAPPER(fgetc_unlocked)

EXPORT int getw(FILE* fp) {
  return stream_read<int>(fp, sizeof(int), [&] { return real_getw.get()(fp); },
                          [&](int w) { return w == EOF && (feof(fp) || ferror(fp))
                                                  ? ssize_t(-1) : ssize_t(sizeof(int)); });
}

EXPORT int fseek(FILE* fp, long off, int whence) {
  const int r = real_fseek.get()(fp, off, whence);
  if (r == 0) repositioned(fp);
  return r;
}
EXPORT int fseeko(FILE* fp, off_t off, int whence) {
  const int r = real_fseeko.get()(fp, off, whence);
  if (r == 0) repositioned(fp);
  return r;
}
EXPORT int fseeko64(FILE* fp, off64_t off, int whence) {
  const int r = real_fseeko64.get()(fp, off, whence);
  if (r == 0) repositioned(fp);
  return r;
}
EXPORT void rewind(FILE* fp) {
  real_rewind.get()(fp);
  pl::fd_table().set_position(fd_of(fp), 0);
}
EXPORT int fsetpos(FILE* fp, const fpos_t* pos) {
  const int r = real_fsetpos.get()(fp, pos);
  if (r == 0) repositioned(fp);
  return r;
}
EXPORT int fsetpos64(FILE* fp, const fpos64_t* pos) {
  const int r = real_fsetpos64.get()(fp, pos);
  if (r == 0) repositioned(fp);
  return r;
}
