#include "read_engine.hpp"

#include <errno.h>

#include <algorithm>
#include <cstring>

#include "log.hpp"

namespace stallscope::loader::detail {

namespace {
constexpr uint8_t kMaxAttempts = 8;  // per request, for -EAGAIN/-EINTR/-ECANCELED

uint64_t align_down(uint64_t v) { return v & ~(kDirectAlign - 1); }
uint64_t align_up(uint64_t v) { return (v + kDirectAlign - 1) & ~(kDirectAlign - 1); }

std::string where(const std::string& path, uint64_t off) {
  return path + ": offset " + std::to_string(off) + ": ";
}
}  // namespace

uint64_t direct_span(uint64_t offset, uint64_t length) noexcept {
  return align_up(offset + length) - align_down(offset);
}

ReadEngine::ReadEngine(StorageReader& reader, FileTable& files, uint64_t read_size, Done done)
    : reader_(reader), files_(files), read_size_(read_size), done_(std::move(done)) {
  const uint32_t qd = reader.capacity();
  slots_.resize(qd);
  for (uint32_t i = qd; i > 0; --i) free_.push_back(i - 1);
  batch_.reserve(qd);
  comps_.resize(qd);
  reaped_.reserve(qd);  // one sample at most ends per completion
}

void ReadEngine::add(SampleRead* s) noexcept {
  s->chunks_left = 0;
  s->err = 0;
  std::string error;
  const OpenFile* f = files_.acquire(s->file, s->offset, &error);
  if (f == nullptr) return fail_sample(s, -EIO, std::move(error));
  split(s, *f);
}

void ReadEngine::split(SampleRead* s, const OpenFile& f) noexcept {
  const uint64_t begin = f.direct ? align_down(s->offset) : s->offset;
  const uint64_t end = f.direct ? align_up(s->offset + s->length) : s->offset + s->length;
  s->view = s->buf + (s->offset - begin);
  if (s->length == 0 || end - begin > s->buf_bytes) {
    files_.release(s->file);
    if (s->length != 0)
      return fail_sample(s, -EINVAL, where(files_.path(s->file), s->offset) + "buffer too small");
    failed_.push_back(s);  // empty sample: done at the next poll
    return;
  }
  const Ticks now = ticks_now();
  try {
    for (uint64_t off = begin; off < end; off += read_size_) {
      Chunk c;
      c.s = s;
      c.off = off;
      c.len = static_cast<uint32_t>(std::min(read_size_, end - off));
      c.dst = s->buf + (off - begin);
      c.created = now;
      c.direct = f.direct;
      pending_.push_back(c);
      ++s->chunks_left;
    }
  } catch (...) {
    fail_sample(s, -ENOMEM, where(files_.path(s->file), s->offset) + "out of memory");
  }
}

void ReadEngine::fail_sample(SampleRead* s, int err, std::string text) noexcept {
  if (s->err == 0) {
    s->err = err;
    s->error = std::move(text);
  }
  if (s->chunks_left == 0) failed_.push_back(s);
}

void ReadEngine::chunk_finished(SampleRead* s) noexcept {
  if (--s->chunks_left > 0) return;
  files_.release(s->file);
  if (reaping_ && reaped_.size() < reaped_.capacity())
    reaped_.push_back(s);  // reported once the freed slots are refilled
  else
    done_(s);
}

void ReadEngine::cancel_pending() noexcept {
  while (!pending_.empty()) {
    Chunk c = pending_.front();
    pending_.pop_front();
    fail_sample(c.s, -ECANCELED, "cancelled");
    chunk_finished(c.s);
  }
  for (uint32_t slot : retry_) {  // prepared but not in flight
    fail_sample(slots_[slot].c.s, -ECANCELED, "cancelled");
    finish(slot);
  }
  retry_.clear();
}

int ReadEngine::poll(int timeout_ms) noexcept {
  while (!failed_.empty()) {  // samples that ended before any read
    SampleRead* s = failed_.back();
    failed_.pop_back();
    done_(s);
  }
  fill_slots();
  if (int rc = submit_ready(); rc < 0) return rc;
  if (in_flight_ == 0) return 0;
  const int n = reader_.reap(comps_, 1, timeout_ms);
  if (n < 0) return n;
  reaping_ = true;
  for (int i = 0; i < n; ++i) on_completion(comps_[i]);
  reaping_ = false;
  // The freed slots go back to the device before anyone hears of the
  // samples that ended: the callback (a batch handed on, a lock, a wake-up)
  // runs while the next reads are in flight, not between two of them.
  fill_slots();
  const int rc = submit_ready();
  for (SampleRead* s : reaped_) done_(s);
  reaped_.clear();
  return rc < 0 ? rc : 0;
}

void ReadEngine::fill_slots() noexcept {
  while (!free_.empty() && !pending_.empty()) {
    Chunk c = pending_.front();
    pending_.pop_front();
    if (c.s->err != 0) {  // its sample already failed: do not read the rest
      chunk_finished(c.s);
      continue;
    }
    const uint32_t slot = free_.back();
    free_.pop_back();
    slots_[slot].c = c;
    slots_[slot].busy = true;
    start_chunk(slot);
    retry_.push_back(slot);
  }
}

// Decides, once per request, how its page-cache state will be known.
void ReadEngine::start_chunk(uint32_t slot) noexcept {
  Chunk& c = slots_[slot].c;
  const OpenFile& f = files_.get(c.s->file);
  c.method = f.tier.method;
  if (c.direct) {
    c.cache = format::Cache::kMiss;  // O_DIRECT bypasses the cache: every byte a miss
    c.method = format::CacheMethod::kDirect;
    c.hit = 0;
  } else if (f.tier.method == format::CacheMethod::kTier) {
    c.cache = format::Cache::kHit;
    c.hit = c.len;
  } else if (f.tier.method == format::CacheMethod::kNowait && f.nowait_ok) {
    c.nowait = true;
  } else if (f.tier.method == format::CacheMethod::kCachestat) {
    const long pages = files_.cachestat(c.s->file, c.off, c.len);
    if (pages >= 0) {
      c.hit = std::min<uint64_t>(c.len, static_cast<uint64_t>(pages) * 4096);
      c.cache = c.hit == c.len ? format::Cache::kHit
                               : (c.hit == 0 ? format::Cache::kMiss : format::Cache::kPartial);
    }
  }
}

int ReadEngine::submit_ready() noexcept {
  if (retry_.empty()) return 0;
  batch_.clear();
  for (uint32_t slot : retry_) {
    Slot& sl = slots_[slot];
    Chunk& c = sl.c;
    const OpenFile& f = files_.get(c.s->file);
    if (c.direct && !f.direct) c.direct = false;  // refused since this chunk was cut
    const uint64_t off = c.off + c.done;
    const bool aligned = off % kDirectAlign == 0 && (c.len - c.done) % kDirectAlign == 0;
    const int fd = c.direct && !aligned ? files_.buffered_fd(c.s->file) : f.fd;
    ++sl.gen;
    batch_.push_back(
        {fd, off, c.len - c.done, c.dst + c.done, (uint64_t{sl.gen} << 32) | slot, c.nowait});
  }
  const int n = reader_.submit(batch_);
  if (n < 0) return n;
  const Ticks now = ticks_now();
  for (int i = 0; i < n; ++i) {
    Slot& sl = slots_[retry_[i]];
    sl.submitted = true;
    ++in_flight_;
    if (sl.c.started == 0) {
      sl.c.started = now;
      sl.c.qd = static_cast<uint16_t>(std::min<uint32_t>(in_flight_, UINT16_MAX));
    }
  }
  retry_.erase(retry_.begin(), retry_.begin() + n);
  return 0;
}

void ReadEngine::on_completion(const Completion& comp) noexcept {
  const uint32_t slot = static_cast<uint32_t>(comp.user_data);
  const uint32_t gen = static_cast<uint32_t>(comp.user_data >> 32);
  if (slot >= slots_.size() || !slots_[slot].submitted || slots_[slot].gen != gen) {
    ++stats_.stray;  // not a request in flight: never applied
    return;
  }
  slots_[slot].submitted = false;
  --in_flight_;
  on_result(slot, comp.res);
}

void ReadEngine::on_result(uint32_t slot, int32_t res) noexcept {
  Chunk& c = slots_[slot].c;
  if (res < 0) return on_error(slot, res);
  if (c.nowait) {  // RWF_NOWAIT: what came back was in the page cache
    c.hit += static_cast<uint64_t>(res);
    c.cache = static_cast<uint32_t>(res) == c.len - c.done
                  ? format::Cache::kHit
                  : (res == 0 ? format::Cache::kMiss : format::Cache::kPartial);
    c.nowait = false;
  }
  c.done += static_cast<uint32_t>(res);
  if (c.done == c.len) return finish(slot);
  const uint64_t sample_end = c.s->offset + c.s->length;
  if (c.off + c.done >= std::min<uint64_t>(c.off + c.len, sample_end))
    return finish(slot);  // the rest is the O_DIRECT alignment tail past the end of file
  if (res == 0) {
    fail_sample(c.s, -EIO,
                where(files_.path(c.s->file), c.off + c.done) +
                    "end of file before the sample's end (" + std::to_string(sample_end) +
                    "): the file shrank");
    return finish(slot);
  }
  ++stats_.short_reads;
  requeue(slot);
}

void ReadEngine::on_error(uint32_t slot, int32_t res) noexcept {
  Chunk& c = slots_[slot].c;
  if (c.nowait && (res == -EAGAIN || res == -EOPNOTSUPP)) {
    if (res == -EAGAIN) c.cache = c.hit > 0 ? format::Cache::kPartial : format::Cache::kMiss;
    c.nowait = false;  // read the rest normally; not a retry
    return requeue(slot);
  }
  if (res == -EINVAL && c.direct) {
    files_.refuse_direct(c.s->file);
    c.direct = false;
    return requeue(slot);
  }
  const bool transient = res == -EAGAIN || res == -EINTR || res == -ECANCELED;
  if (transient && ++c.attempts < kMaxAttempts) {
    ++stats_.retries;
    return requeue(slot);
  }
  fail_sample(
      c.s, res,
      where(files_.path(c.s->file), c.off + c.done) + "read failed" +
          (transient ? " after " + std::to_string(c.attempts) + " attempts" : std::string()) +
          ": " + std::strerror(-res));
  finish(slot);
}

void ReadEngine::requeue(uint32_t slot) noexcept {
  try {
    retry_.push_back(slot);
  } catch (...) {
    on_error(slot, -ENOMEM);
  }
}

void ReadEngine::finish(uint32_t slot) noexcept {
  Slot& sl = slots_[slot];
  Chunk c = sl.c;
  sl.busy = false;
  free_.push_back(slot);
  ++stats_.reads;
  stats_.bytes += c.done;
  trace(c);
  chunk_finished(c.s);
}

void ReadEngine::trace(const Chunk& c) noexcept {
  const Ticks end = ticks_now();
  format::Cache cache = c.cache;
  uint64_t hit = std::min<uint64_t>(c.hit, c.done);
  if (c.method == format::CacheMethod::kLatency && !c.direct) {
    const bool fast =
        latency_says_hit(c.done, static_cast<uint64_t>((end - c.started) * ns_per_tick()));
    cache = fast ? format::Cache::kHit : format::Cache::kMiss;
    hit = fast ? c.done : 0;
  }
  stats_.hit_bytes += hit;
  stats_.miss_bytes += c.done - hit;
  if (!enabled()) return;
  const OpenFile& f = files_.get(c.s->file);
  StorageRead r;
  r.file = f.name;
  r.bytes = c.done;
  r.offset = c.off;
  r.hit_bytes = hit;
  r.queued_ns = static_cast<uint64_t>((c.started - c.created) * ns_per_tick());
  r.sample_id = c.s->trace_sample;
  r.batch_id = c.s->trace_batch;
  r.tier = f.tier.tier;
  r.cache = cache;
  r.cache_method = c.method;
  r.queue_depth = c.qd;
  record_storage_read(c.started, end, r);
}

}  // namespace stallscope::loader::detail
