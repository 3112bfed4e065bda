// The storage probe: the dataset's first files read at queue depths 1, 8
// and 32 within a time budget, O_DIRECT where allowed, each depth on fresh
// byte ranges so buffered reads are not served by the previous depth's cache.
#include "stallscope/loader/probe.hpp"

#include <errno.h>
#include <fcntl.h>

#include <cmath>

#include "stallscope/loader/device.hpp"

namespace stallscope::loader {

namespace {

constexpr uint32_t kDepths[] = {1, 8, 32};
constexpr size_t kMaxFiles = 64;

struct Target {
  int fd;
  uint64_t size;
};

struct Cursor {  // where the next probe read starts
  size_t file = 0;
  uint64_t off = 0;
};

bool next_range(const std::vector<Target>& t, Cursor& c, uint64_t rs, ReadRequest* r) {
  for (size_t tries = 0; tries <= t.size(); ++tries) {
    if (c.file >= t.size()) {
      c.file = 0;
      c.off = 0;  // wrapped: later ranges may be cached (buffered only)
    }
    const Target& f = t[c.file];
    if (c.off < f.size) {
      r->fd = f.fd;
      r->offset = c.off;
      r->length = static_cast<uint32_t>(rs);
      c.off += rs;
      return true;
    }
    ++c.file;
    c.off = 0;
  }
  return false;
}

// One queue depth's run. Reads are issued only while the probe's clock
// (Sys::monotonic_ns) is before the deadline; once it has shown the deadline
// nothing more is issued and the reads in flight are reaped, so the probe
// returns after the budget by the time those take.
class DepthRun {
 public:
  DepthRun(StorageReader& rd, Sys& sys, uint64_t read_size, std::byte* bufs)
      : rd_(rd), sys_(sys), read_size_(read_size), bufs_(bufs) {}

  ProbeRate run(const std::vector<Target>& t, Cursor& cur, uint32_t qd, double budget_s) {
    rate_.queue_depth = qd;
    for (uint32_t i = 0; i < qd; ++i) free_bufs_.push_back(i);
    const int64_t start = sys_.monotonic_ns();
    stop_ns_ = start + std::llround(budget_s * 1e9);
    bool more = true;
    while (more || in_flight_ > 0) {
      if (more) more = issue(t, cur) && before_deadline();
      if (in_flight_ == 0 || reap() < 0) break;
    }
    rate_.seconds = static_cast<double>(sys_.monotonic_ns() - start) / 1e9;
    return rate_;
  }

 private:
  bool before_deadline() noexcept { return sys_.monotonic_ns() < stop_ns_; }

  // Fills the free buffers with reads while the deadline has not passed;
  // false when no range is left. A refused read is tried again after the
  // next reap (none in flight: the run ends).
  bool issue(const std::vector<Target>& t, Cursor& cur) {
    while (!free_bufs_.empty() && before_deadline()) {
      ReadRequest r;
      if (!next_range(t, cur, read_size_, &r)) return false;
      r.buf = bufs_ + free_bufs_.back() * read_size_;
      r.user_data = free_bufs_.back();
      if (rd_.submit({&r, 1}) != 1) return true;
      free_bufs_.pop_back();
      ++in_flight_;
      ++rate_.issued;
    }
    return true;
  }

  int reap() {
    Completion comps[32];
    const int n = rd_.reap(comps, 1, 100);
    for (int i = 0; i < n; ++i) {
      --in_flight_;
      free_bufs_.push_back(static_cast<uint32_t>(comps[i].user_data));
      if (comps[i].res > 0) rate_.bytes += static_cast<uint64_t>(comps[i].res), ++rate_.reads;
    }
    return n;
  }

  StorageReader& rd_;
  Sys& sys_;
  const uint64_t read_size_;
  std::byte* const bufs_;
  int64_t stop_ns_ = 0;
  uint32_t in_flight_ = 0;
  std::vector<uint32_t> free_bufs_;
  ProbeRate rate_;
};

std::vector<Target> open_targets(const Dataset& ds, Sys& sys, bool* direct) {
  std::vector<Target> t;
  *direct = true;
  for (size_t i = 0; i < ds.files().size() && t.size() < kMaxFiles; ++i) {
    const auto& f = ds.files()[i];
    if (f.size == 0) continue;
    int fd = *direct ? sys.open(f.path.c_str(), O_RDONLY | O_DIRECT) : -1;
    if (fd < 0) {
      *direct = false;
      fd = sys.open(f.path.c_str(), O_RDONLY);
    }
    if (fd >= 0) t.push_back({fd, f.size});
  }
  return t;
}

}  // namespace

int run_storage_probe(const Dataset& ds, Backend backend, uint64_t read_size, double budget_s,
                      Sys& sys, ProbeReport* out) noexcept {
  try {
    ProbeReport rep;
    rep.read_size = read_size;
    std::vector<Target> t = open_targets(ds, sys, &rep.direct);
    if (t.empty()) return -ENOENT;
    rep.tier = classify_file(sys, t[0].fd);
    std::string why;
    auto rd = make_reader(backend, {32, 8}, sys, &why);
    bool locked = false;
    auto* bufs = static_cast<std::byte*>(alloc_locked(32 * read_size, false, &locked));
    if (rd && bufs) {
      rep.backend = std::string(rd->name());
      Cursor cur;
      for (uint32_t qd : kDepths)
        rep.rates.push_back(DepthRun(*rd, sys, read_size, bufs).run(t, cur, qd, budget_s / 3));
    }
    rd.reset();
    free_locked(bufs, 32 * read_size, false);
    for (const Target& x : t) sys.close(x.fd);
    *out = std::move(rep);
    return out->rates.empty() ? -EIO : 0;
  } catch (...) {
    return -ENOMEM;
  }
}

std::string ProbeReport::json() const {
  std::string s = "{\"tier\":\"" + std::string(tier_name(tier.tier)) + "\",\"fs\":\"" + tier.fs +
                  "\",\"direct\":" + (direct ? "true" : "false") +
                  ",\"read_size\":" + std::to_string(read_size) + ",\"backend\":\"" + backend +
                  "\",\"rates\":[";
  for (size_t i = 0; i < rates.size(); ++i) {
    const ProbeRate& r = rates[i];
    s += (i ? "," : "") + std::string("{\"queue_depth\":") + std::to_string(r.queue_depth) +
         ",\"bytes\":" + std::to_string(r.bytes) + ",\"reads\":" + std::to_string(r.reads) +
         ",\"seconds\":" + std::to_string(r.seconds) +
         ",\"mb_per_s\":" + std::to_string(r.mb_per_s()) + "}";
  }
  return s + "]}";
}

}  // namespace stallscope::loader
