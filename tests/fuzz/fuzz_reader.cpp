// libFuzzer target: any bytes through TraceReader (tables and events), the
// info summary and the Chrome exporter. Must stay clean under ASan/UBSan
// (RELIABILITY.md 6). Run through scripts/fuzz.sh.
//
// Each input runs twice: as given, and with its checksums recomputed, so
// mutations also reach the record decoders behind the CRC checks.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <ostream>
#include <span>
#include <streambuf>
#include <vector>

#include "common/checksum.hpp"
#include "stallscope/chrome_export.hpp"
#include "stallscope/file_summary.hpp"
#include "stallscope/reader.hpp"

namespace {

// Discards output but counts it, so the exporter's writes are exercised.
class NullBuf : public std::streambuf {
 protected:
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
  int_type overflow(int_type c) override { return traits_type::not_eof(c); }
};

// A copy of the input with the header CRC and every whole chunk's payload
// CRC made to match (chunks found by walking payload_bytes).
std::vector<uint8_t> resealed(const uint8_t* data, size_t size) {
  using stallscope::detail::checksum;
  std::vector<uint8_t> b(data, data + size);
  if (size < 96) return b;
  const uint32_t hcrc = checksum(b.data(), 92);
  std::memcpy(&b[92], &hcrc, 4);
  uint32_t header_bytes;
  std::memcpy(&header_bytes, &b[12], 4);
  uint64_t off = header_bytes < 96 ? 96 : header_bytes;
  while (off <= size && size - off >= 48) {
    uint32_t len;
    std::memcpy(&len, &b[off + 8], 4);
    if (len > size - off - 48) break;
    const uint32_t crc = checksum(&b[off + 48], len);
    std::memcpy(&b[off + 12], &crc, 4);
    off += 48 + uint64_t{len};
  }
  return b;
}

struct Seen {
  uint8_t kind;
  uint32_t ext_mask;
  int64_t ts_ns, dur_ns;
  size_t ids;
  size_t frames;
  int64_t requested_ns;
  bool operator==(const Seen&) const = default;
};

// Format 1 sizes of the extension types (IdList, StackSample: the part
// before the ids or frames).
constexpr size_t kExtV1Bytes[] = {
    sizeof(stallscope::format::IoExt),           sizeof(stallscope::format::WorkExt),
    sizeof(stallscope::format::ExtHeader),       sizeof(stallscope::format::CopyExt),
    sizeof(stallscope::format::DeviceExt),       sizeof(stallscope::format::CollectiveExt),
    sizeof(stallscope::format::ApiExt),          sizeof(stallscope::format::StepExt),
    sizeof(stallscope::format::RangeExt),        sizeof(stallscope::format::SampleExt),
    sizeof(stallscope::format::LoaderConfigExt), sizeof(stallscope::format::BatchHandoffExt),
    sizeof(stallscope::format::ChannelHandoffExt), sizeof(stallscope::format::StackSampleExt)};
static_assert(std::size(kExtV1Bytes) == stallscope::reader::kExtTypes);

void run_one(std::span<const uint8_t> bytes) {
  using namespace stallscope::reader;
  {
    TraceReader r("fuzz.sst", bytes);
    (void)summarize_file(r);
    r.rewind();
    Event e;
    std::vector<Seen> seen;
    while (r.next(e)) {
      for (uint64_t id : e.ids) (void)id;  // the spans must be readable
      for (uint32_t f : e.frames) (void)r.string(f);
      (void)r.string(e.name_id);
      (void)r.track(e.track_id);
      seen.push_back(
          {e.kind, e.ext_mask, e.ts_ns, e.dur_ns, e.ids.size(), e.frames.size(), e.requested_ns});
    }
    (void)r.to_real_ns(0);
    // The same records as views: every byte they point to readable, and
    // what they say the same as the events.
    r.rewind();
    RecordView v;
    size_t n = 0;
    while (r.next(v, kAllExts)) {
      using stallscope::format::Ext;
      const bool handoff = v.has(Ext::kBatchHandoff) || v.has(Ext::kChannelHandoff);
      const Seen got{v.kind,
                     v.ext_mask,
                     v.ts_ns,
                     v.dur_ns,
                     v.ids.size(),
                     v.has(Ext::kStackSample) ? v.frames.size() : 0,
                     handoff ? v.requested_ns : 0};
      if (n >= seen.size() || !(got == seen[n])) __builtin_trap();
      uint8_t core[sizeof(stallscope::format::CoreRecord)];
      std::memcpy(core, v.core, sizeof core);
      for (size_t k = 0; k < kExtTypes; ++k) {
        if ((v.ext_mask & (1u << k)) == 0) continue;
        uint8_t ext[128];
        std::memcpy(ext, v.ext[k], kExtV1Bytes[k]);
      }
      for (uint64_t id : v.ids) (void)id;
      if (v.has(stallscope::format::Ext::kStackSample))
        for (uint32_t f : v.frames) (void)f;
      ++n;
    }
    if (n != seen.size()) __builtin_trap();
  }
  std::vector<TraceReader> readers;
  readers.emplace_back("fuzz.sst", bytes);
  NullBuf buf;
  std::ostream out(&buf);
  ChromeExportOptions opt;
  if (!bytes.empty() && (bytes.back() & 1) != 0) opt.steps = {{0, 3}};
  (void)export_chrome(readers, out, opt);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  run_one({data, size});
  const auto sealed = resealed(data, size);
  run_one(sealed);
  return 0;
}
