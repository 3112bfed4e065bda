// slowfs — a read-only FUSE passthrough that makes a local directory behave
// like network storage: every read request waits a fixed latency, and all
// reads together are capped at a bandwidth. A stand-in for the FUSE/NFS
// mounts training jobs read from (scenarios 1, 2 and 9).
//
//   slowfs SRC MNT [--latency-us U] [--mbps M] [-f] [-o opt,...]
//   fusermount3 -u MNT
//
// Requests are served concurrently (a deeper queue overlaps latencies, as
// on a real network mount); the bandwidth cap is one token bucket shared by
// all requests. Kernel caching is off (direct_io), so dropping nothing from
// the page cache is needed between runs.
#define FUSE_USE_VERSION 35
#include <fuse3/fuse.h>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Settings {
  std::string src;
  int64_t latency_us = 0;
  double mbps = 0;  // 0 = no cap
};

Settings g;
std::mutex g_bucket_mu;
std::chrono::steady_clock::time_point g_next_free;

std::string real(const char* path) { return g.src + path; }

// Reserves `bytes` of the shared bandwidth; returns when they may be sent.
std::chrono::steady_clock::time_point reserve(size_t bytes) {
  const auto now = std::chrono::steady_clock::now();
  if (g.mbps <= 0) return now;
  std::lock_guard lock(g_bucket_mu);
  const auto cost = std::chrono::nanoseconds(static_cast<int64_t>(bytes / (g.mbps * 1e6) * 1e9));
  g_next_free = std::max(g_next_free, now) + cost;
  return g_next_free;
}

int fs_getattr(const char* path, struct stat* st, fuse_file_info*) {
  return lstat(real(path).c_str(), st) == 0 ? 0 : -errno;
}

int fs_readdir(const char* path, void* buf, fuse_fill_dir_t fill, off_t, fuse_file_info*,
               fuse_readdir_flags) {
  DIR* d = opendir(real(path).c_str());
  if (!d) return -errno;
  while (dirent* e = readdir(d)) fill(buf, e->d_name, nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
  closedir(d);
  return 0;
}

int fs_open(const char* path, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EROFS;
  const int fd = open(real(path).c_str(), O_RDONLY);
  if (fd < 0) return -errno;
  fi->fh = static_cast<uint64_t>(fd);
  fi->direct_io = 1;
  return 0;
}

int fs_read(const char*, char* buf, size_t size, off_t off, fuse_file_info* fi) {
  const auto start = std::chrono::steady_clock::now();
  const ssize_t n = pread(static_cast<int>(fi->fh), buf, size, off);
  if (n < 0) return -errno;
  const auto ready = std::max(start + std::chrono::microseconds(g.latency_us), reserve(static_cast<size_t>(n)));
  std::this_thread::sleep_until(ready);
  return static_cast<int>(n);
}

int fs_release(const char*, fuse_file_info* fi) { return close(static_cast<int>(fi->fh)); }

int fs_statfs(const char*, struct statvfs* st) { return statvfs(g.src.c_str(), st) == 0 ? 0 : -errno; }

fuse_operations make_ops() {
  fuse_operations ops{};
  ops.getattr = fs_getattr;
  ops.readdir = fs_readdir;
  ops.open = fs_open;
  ops.read = fs_read;
  ops.release = fs_release;
  ops.statfs = fs_statfs;
  return ops;
}

// Takes our own flags out of argv; what remains goes to fuse_main.
bool take_flags(int argc, char** argv, std::vector<char*>* rest) {
  rest->push_back(argv[0]);
  std::vector<char*> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--latency-us" && i + 1 < argc) g.latency_us = std::atoll(argv[++i]);
    else if (a == "--mbps" && i + 1 < argc) g.mbps = std::atof(argv[++i]);
    else if (a == "-o" && i + 1 < argc) rest->push_back(argv[i]), rest->push_back(argv[++i]);
    else if (a.rfind("-", 0) == 0) rest->push_back(argv[i]);
    else positional.push_back(argv[i]);
  }
  if (positional.size() != 2) return false;
  char* src = realpath(positional[0], nullptr);
  if (!src) return false;
  g.src = src;
  std::free(src);
  rest->push_back(positional[1]);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args;
  if (!take_flags(argc, argv, &args)) {
    std::fprintf(stderr, "usage: slowfs SRC MNT [--latency-us U] [--mbps M] [-f] [-o opt,...]\n");
    return 2;
  }
  static const fuse_operations ops = make_ops();
  return fuse_main(static_cast<int>(args.size()), args.data(), &ops, nullptr);
}
