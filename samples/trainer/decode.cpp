#include "decode.hpp"

#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace trainer {

namespace {

int64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// A cheap "augmentation": mixes neighbouring bytes; repeated until the
// budget of thread CPU time is spent. The result feeds back into the data so
// the compiler cannot drop the work.
void augment(std::span<std::byte> data, double us) {
  if (us <= 0 || data.empty()) return;
  const int64_t until = thread_cpu_ns() + static_cast<int64_t>(us * 1e3);
  uint32_t acc = 2166136261u;
  size_t at = 0;
  while (true) {
    for (int k = 0; k < 4096; ++k, ++at) {
      if (at >= data.size()) at = 0;
      acc = (acc ^ static_cast<uint32_t>(data[at])) * 16777619u;
      data[at] = static_cast<std::byte>(acc >> 24);
    }
    if (thread_cpu_ns() >= until) break;
  }
}

}  // namespace

stallscope::loader::TransformFn make_transform(DecodeCost cost) {
  return [cost](stallscope::loader::Sample& s) -> int {
    const unsigned long long n = ZSTD_getFrameContentSize(s.bytes.data(), s.bytes.size());
    if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n > (1ull << 30)) return -EBADMSG;
    s.output.resize(n);
    const size_t got = ZSTD_decompress(s.output.data(), n, s.bytes.data(), s.bytes.size());
    if (ZSTD_isError(got) || got != n) return -EBADMSG;
    s.bytes = std::span<std::byte>(s.output.data(), s.output.size());
    augment(s.bytes, cost.augment_us);
    return 0;
  };
}

stallscope::loader::CollateFn make_collate(uint64_t sample_bytes) {
  return [sample_bytes](std::span<const stallscope::loader::Sample> samples,
                        std::span<std::byte> dst) -> int64_t {
    if (samples.size() * sample_bytes > dst.size()) return -ENOSPC;
    std::byte* out = dst.data();
    for (const auto& s : samples) {
      const size_t n = std::min<size_t>(s.bytes.size(), sample_bytes);
      std::memcpy(out, s.bytes.data(), n);
      std::memset(out + n, 0, sample_bytes - n);
      out += sample_bytes;
    }
    return static_cast<int64_t>(samples.size() * sample_bytes);
  };
}

}  // namespace trainer
