// A loader program the tests run as a child process: under a seccomp filter
// that refuses io_uring, as another user (setpriv), with a memlock limit,
// or traced (STALLSCOPE_OUT). Prints "key value" lines.
//
//   loader_probe epoch DIR [--loader-…] [--fault=F]   one epoch; checks every sample
//   loader_probe seccomp ENOSYS|EPERM DIR    the same, io_uring_setup refused
// Faults (through the syscall seam): direct-open-einval (open with O_DIRECT
// fails EINVAL), direct-read-einval (reads of O_DIRECT fds fail EINVAL; pread
// backend).
//   loader_probe classify FILE [nonowait]    tier and page-cache method
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "stallscope/loader/device.hpp"
#include "stallscope/loader/loader.hpp"
#include "stallscope/loader/tier.hpp"

namespace sl = stallscope::loader;

namespace {

void say(const char* key, const std::string& v) { std::printf("%s %s\n", key, v.c_str()); }
void say(const char* key, unsigned long long v) { std::printf("%s %llu\n", key, v); }

// Refuses io_uring_setup with `err`; everything else is allowed.
int refuse_io_uring(int err) {
  sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(err) & 0xffff)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof f / sizeof f[0]), f};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -errno;
  return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0 ? 0 : -errno;
}

// True when the delivered bytes equal the file's bytes at the sample's range.
bool matches(const sl::Dataset& ds, const sl::Sample& s) {
  const sl::SampleRef& r = ds.samples()[s.index];
  std::vector<char> want(r.length);
  const int fd = ::open(ds.files()[r.file].path.c_str(), O_RDONLY);
  const ssize_t n = ::pread(fd, want.data(), want.size(), static_cast<off_t>(r.offset));
  ::close(fd);
  return n == static_cast<ssize_t>(r.length) && s.bytes.size() == r.length &&
         (r.length == 0 || std::memcmp(want.data(), s.bytes.data(), r.length) == 0);
}

// O_DIRECT refused as a filesystem without it refuses it: at open, or at
// the first read of an O_DIRECT fd.
struct DirectRefusedSys : sl::Sys {
  bool at_open = true;
  std::mutex mu;
  std::set<int> direct_fds;
  int open(const char* path, int flags) noexcept override {
    if (at_open && (flags & O_DIRECT)) return errno = EINVAL, -1;
    const int fd = Sys::open(path, flags);
    std::lock_guard lock(mu);
    if (fd >= 0 && (flags & O_DIRECT)) direct_fds.insert(fd);
    return fd;
  }
  int close(int fd) noexcept override {
    {
      std::lock_guard lock(mu);
      direct_fds.erase(fd);
    }
    return Sys::close(fd);
  }
  ssize_t preadv2(int fd, const iovec* iov, int n, off_t off, int flags) noexcept override {
    {
      std::lock_guard lock(mu);
      if (direct_fds.count(fd)) return errno = EINVAL, -1;
    }
    return Sys::preadv2(fd, iov, n, off, flags);
  }
};

int epoch(const std::string& dir, const std::vector<std::string>& flags) {
  sl::Dataset ds;
  sl::Config cfg;
  cfg.probe = true;
  cfg.batch_size = 4;
  cfg.read_size = 16384;
  std::string err;
  if (sl::Dataset::from_directory(dir, &ds, &err) != 0 || sl::apply_env(cfg, &err) != 0 ||
      sl::apply_flags(cfg, flags, &err) != 0) {
    say("error", err);
    return 2;
  }
  sl::Pipeline p;
  p.transform = [](sl::Sample& s) {
    for (auto& b : s.bytes) b = b;  // touches every byte, changes none
    return 0;
  };
  DirectRefusedSys refused;
  refused.at_open =
      std::find(flags.begin(), flags.end(), "--fault=direct-read-einval") == flags.end();
  const bool fault = std::find_if(flags.begin(), flags.end(), [](const std::string& f) {
                       return f.rfind("--fault=direct-", 0) == 0;
                     }) != flags.end();
  std::unique_ptr<sl::Loader> l;
  if (sl::Loader::create(ds, cfg, p, &l, &err, fault ? refused : sl::real_sys()) != 0) {
    say("error", err);
    return 3;
  }
  l->start_epoch(0);
  sl::Batch b;
  int rc;
  unsigned long long samples = 0, bad = 0;
  while ((rc = l->next_batch(&b)) == 0)
    for (const auto& s : b.samples) ++samples, bad += matches(ds, s) ? 0 : 1;
  const auto st = l->stats();
  say("rc", static_cast<unsigned long long>(rc == sl::kEndOfEpoch ? 0 : -rc));
  say("error", l->error().empty() ? "-" : l->error());
  say("backend", std::string(l->backend()));
  say("device", std::string(l->device()));
  say("samples", samples);
  say("mismatches", bad);
  say("batches", st.batches);
  say("fixed_reads", st.fixed_reads);
  say("direct_fallbacks", st.direct_fallbacks);
  say("skipped", st.skipped_samples);
  return 0;
}

// A seam that refuses RWF_NOWAIT, as FUSE and network filesystems do.
struct NoNowaitSys : sl::Sys {
  ssize_t preadv2(int fd, const iovec* iov, int n, off_t off, int flags) noexcept override {
    if (flags & RWF_NOWAIT) return errno = EOPNOTSUPP, -1;
    return Sys::preadv2(fd, iov, n, off, flags);
  }
};

int classify(const std::string& file, bool nonowait) {
  const int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) return say("error", std::strerror(errno)), 2;
  NoNowaitSys no_nowait;
  sl::Sys& sys = nonowait ? no_nowait : sl::real_sys();
  const sl::TierInfo t = sl::classify_file(sys, fd);
  say("tier", std::string(sl::tier_name(t.tier)));
  say("fs", t.fs);
  say("method", std::string(sl::cache_method_name(t.method)));
  ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() >= 2 && a[0] == "epoch") return epoch(a[1], {a.begin() + 2, a.end()});
  if (a.size() >= 3 && a[0] == "seccomp") {
    const int err = a[1] == "EPERM" ? EPERM : ENOSYS;
    if (int rc = refuse_io_uring(err); rc != 0) return say("error", "seccomp refused"), 77;
    return epoch(a[2], {a.begin() + 3, a.end()});
  }
  if (a.size() >= 2 && a[0] == "classify") return classify(a[1], a.size() > 2);
  std::fprintf(stderr, "usage: loader_probe epoch|seccomp|classify …\n");
  return 2;
}
