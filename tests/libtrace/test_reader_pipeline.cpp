// The kinds of trace format 1.1 (sample, loader_config, batch_handoff,
// channel_handoff, stack_sample) through the reader, the info summary and
// the Chrome exporter, on files made by trace_builder.hpp: every field read
// back, requested times converted, malformed extensions refused.
#include <cstring>
#include <filesystem>
#include <sstream>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "libtrace/pipeline_records.hpp"
#include "libtrace/trace_builder.hpp"
#include "stallscope/chrome_export.hpp"
#include "stallscope/clock.hpp"
#include "stallscope/file_summary.hpp"
#include "stallscope/reader.hpp"

using namespace stallscope;
using namespace stallscope::testing;
using format::Ext;
using format::Kind;
using reader::Event;
using reader::Status;
using reader::TraceReader;

namespace {

template <typename T>
bool same_bytes(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

std::vector<std::string> frame_names(const TraceReader& r, std::span<const uint32_t> frames) {
  std::vector<std::string> out;
  for (uint32_t f : frames) out.emplace_back(r.string(f));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reader_pipeline)

BOOST_AUTO_TEST_CASE(every_pipeline_kind_is_read_back_field_by_field) {
  TempDir dir;
  pipeline_file().write(dir.file("p.sst"));
  TraceReader r(dir.file("p.sst"));
  std::vector<Event> got;
  std::vector<std::vector<std::string>> frames;
  Event e;
  while (r.next(e)) {
    got.push_back(e);
    frames.push_back(frame_names(r, e.frames));
  }
  BOOST_TEST((r.status() == Status::kComplete), r.error());
  BOOST_REQUIRE_EQUAL(got.size(), 5u);
  const std::vector<std::string> none;

  BOOST_TEST(reader::kind_name(got[0].kind) == "sample");
  BOOST_TEST(got[0].phase == format::kComplete);
  BOOST_TEST(got[0].dur_ns == 500);
  BOOST_TEST(got[0].corr == 17u);
  BOOST_TEST(got[0].has(Ext::kSample));
  BOOST_TEST(same_bytes(got[0].sample, sample_ext()));
  BOOST_TEST(got[0].requested_ns == 0);
  BOOST_TEST(frames[0] == none);

  BOOST_TEST(reader::kind_name(got[1].kind) == "loader_config");
  BOOST_TEST(got[1].phase == format::kInstant);
  BOOST_TEST(r.string(got[1].name_id) == "MapDataset");
  BOOST_TEST(got[1].has(Ext::kLoaderConfig));
  BOOST_TEST(same_bytes(got[1].loader_config, loader_ext()));
  BOOST_TEST(r.string(got[1].loader_config.h.aux) == "default_collate");
  BOOST_TEST(r.string(got[1].loader_config.site_name) == "train.py:42");

  BOOST_TEST(reader::kind_name(got[2].kind) == "batch_handoff");
  BOOST_TEST(got[2].async());
  BOOST_TEST(same_bytes(got[2].batch_handoff, handoff_ext(1300)));
  BOOST_TEST(got[2].requested_ns == 1300);

  BOOST_TEST(reader::kind_name(got[3].kind) == "channel_handoff");
  BOOST_TEST(same_bytes(got[3].channel_handoff, channel_ext(2200)));
  BOOST_TEST(got[3].requested_ns == 2200);

  BOOST_TEST(reader::kind_name(got[4].kind) == "stack_sample");
  BOOST_TEST(r.string(got[4].name_id) == "leaf");
  BOOST_TEST(got[4].has(Ext::kStackSample));
  BOOST_TEST(got[4].stack_sample.frame_count == 3);
  BOOST_TEST(got[4].stack_sample.interval_ns == 20000000u);
  BOOST_TEST(got[4].stack_sample.cost_ns == 1500u);
  BOOST_TEST(got[4].stack_sample.tid == 100u);
  BOOST_TEST(got[4].stack_sample.on_cpu == uint8_t(format::OnCpu::kRunning));
  BOOST_TEST(got[4].stack_sample.flags == format::kStackLate);
  BOOST_TEST(got[4].stack_sample.h.bytes == 48);  // 32 + 12, padded
  BOOST_TEST((frames[4] == std::vector<std::string>{"leaf", "middle", "root"}));

  // The same through views, where each record has them.
  r.rewind();
  reader::RecordView v;
  std::vector<std::pair<size_t, int64_t>> seen;
  while (r.next(v, reader::kAllExts)) {
    const bool handoff = v.has(Ext::kBatchHandoff) || v.has(Ext::kChannelHandoff);
    seen.emplace_back(v.has(Ext::kStackSample) ? v.frames.size() : 0,
                      handoff ? v.requested_ns : 0);
  }
  const std::vector<std::pair<size_t, int64_t>> want = {
      {0, 0}, {0, 0}, {0, 1300}, {0, 2200}, {3, 0}};
  BOOST_TEST(seen == want);
}

BOOST_AUTO_TEST_CASE(requested_times_convert_as_the_records_own_times) {
  TempDir dir;
  TraceBuilder b;
  b.header.flags = 0;  // TSC ticks, 2 per ns between the triples
  b.header.start = {2000, 1000, 5000000000};
  b.clock = {2002000, 1001000, 5001000000};
  b.events({{1, Records()
                    .core(Kind::kBatchHandoff, format::kAsync, 1002000, 2000)
                    .ext(handoff_ext(1003000))
                    .core(Kind::kChannelHandoff, rec_flags(format::kComplete, format::kTimesNs),
                          400000, 100)
                    .ext(channel_ext(400050))  // kTimesNs: already ns
                    .core(Kind::kBatchHandoff, format::kAsync, 1004000, 10)
                    .ext(handoff_ext(0))}});  // unknown
  b.end();
  b.write(dir.file("tsc.sst"));
  TickConverter conv(false, 1.0);
  conv.add(b.header.start);
  conv.add({2002000, 1001000, 5001000000});
  TraceReader r(dir.file("tsc.sst"));
  Event e;
  BOOST_REQUIRE(r.next(e));
  BOOST_TEST(e.ts_ns == conv.to_mono_ns(1002000));
  BOOST_TEST(e.requested_ns == conv.to_mono_ns(1003000));
  BOOST_TEST(e.requested_ns == e.ts_ns + 500);
  BOOST_REQUIRE(r.next(e));
  BOOST_TEST(e.requested_ns == 400050);
  BOOST_REQUIRE(r.next(e));
  BOOST_TEST(e.requested_ns == 0);
  BOOST_TEST((r.status() == Status::kComplete), r.error());
}

BOOST_AUTO_TEST_CASE(a_lengthened_extension_keeps_its_known_prefix_and_unwanted_ones_are_left_out) {
  TempDir dir;
  auto longer = sample_ext();
  longer.h.bytes = sizeof longer + 8;  // a later minor's field after it
  const uint64_t later = 0xFEEDFACE;
  TraceBuilder b;
  b.events({{1, Records()
                    .core(Kind::kSample, 0, 10, 5)
                    .ext(longer)
                    .ext(later)
                    .core(Kind::kStackSample, format::kInstant, 20)
                    .stack(stack_head(), kFrames)
                    .core(Kind::kBatchHandoff, format::kAsync, 30, 5)
                    .ext(handoff_ext(32))}});
  b.end();
  b.write(dir.file("long.sst"));
  TraceReader r(dir.file("long.sst"));
  Event e;
  BOOST_REQUIRE(r.next(e));
  BOOST_TEST(e.sample.sample_index == 4242u);
  BOOST_TEST(e.sample.h.bytes == sizeof(format::SampleExt) + 8);
  BOOST_REQUIRE(r.next(e));
  BOOST_TEST(e.frames.size() == 3u);
  BOOST_REQUIRE(r.next(e));
  BOOST_TEST(!r.next(e));
  BOOST_TEST((r.status() == Status::kComplete), r.error());
  // Not wanted: checked, not copied, no frames, no converted time.
  r.rewind();
  size_t n = 0;
  while (r.next(e, reader::ext_bit(Ext::kSample))) {
    ++n;
    BOOST_TEST(!e.has(Ext::kStackSample));
    BOOST_TEST(e.frames.empty());
    BOOST_TEST(e.requested_ns == 0);
  }
  BOOST_TEST(n == 3u);
  BOOST_TEST(r.skipped().unknown_exts == 0u);
}

BOOST_AUTO_TEST_CASE(a_short_new_extension_is_an_error_naming_its_offset) {
  struct Short {
    Ext type;
    uint16_t bytes;
    const char* label;
  };
  const Short cases[] = {{Ext::kSample, 40, "sample"},
                         {Ext::kLoaderConfig, 56, "loader_config"},
                         {Ext::kBatchHandoff, 40, "batch_handoff"},
                         {Ext::kChannelHandoff, 56, "channel_handoff"},
                         {Ext::kStackSample, 24, "stack_sample"}};
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.label) {
      TempDir dir;
      std::vector<uint8_t> ext(c.bytes, 0);
      const format::ExtHeader h{static_cast<uint8_t>(c.type), 0, c.bytes, 0};
      std::memcpy(ext.data(), &h, sizeof h);
      TraceBuilder b;
      b.events({{1, Records()
                        .core(Kind::kMark, format::kInstant, 5)
                        .core(Kind::kSample, 0, 10, 5)
                        .raw(ext)
                        .core(Kind::kMark, format::kInstant, 20)}});
      b.end();
      b.write(dir.file("short.sst"));
      // chunk header, track block header, two core records
      const uint64_t at = b.chunks()[0].offset + 48 + 8 + 64;
      TraceReader r(dir.file("short.sst"));
      Event e;
      size_t n = 0;
      while (r.next(e)) ++n;
      BOOST_TEST(n == 1u);  // the mark before it
      BOOST_TEST((r.status() == Status::kError));
      const std::string want = std::string("extension ") + c.label + " of " +
                               std::to_string(c.bytes) + " bytes is shorter than format 1 defines";
      BOOST_TEST(r.error().find(want) != std::string::npos, r.error());
      BOOST_TEST(r.error().find("at offset " + std::to_string(at)) != std::string::npos, r.error());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_stack_sample_claiming_more_frames_than_it_holds_is_an_error) {
  TempDir dir;
  const uint32_t two[] = {6, 7};
  TraceBuilder b;
  b.events({{1, Records()
                    .core(Kind::kStackSample, format::kInstant, 10)
                    .stack(stack_head(), two)  // 40 bytes: 2 frames
                    .core(Kind::kStackSample, format::kInstant, 20)
                    .stack(stack_head(), two, 3)}});
  b.end();
  b.write(dir.file("frames.sst"));
  const uint64_t at = b.chunks()[0].offset + 48 + 8 + 32 + 40 + 32;
  TraceReader r(dir.file("frames.sst"));
  Event e;
  BOOST_REQUIRE(r.next(e));
  BOOST_TEST(e.frames.size() == 2u);
  BOOST_TEST(!r.next(e));
  BOOST_TEST((r.status() == Status::kError));
  BOOST_TEST(r.error().find("stack sample claims 3 frames but holds 2") != std::string::npos,
             r.error());
  BOOST_TEST(r.error().find("at offset " + std::to_string(at)) != std::string::npos, r.error());
}

BOOST_AUTO_TEST_CASE(info_counts_the_new_kinds_by_name) {
  TempDir dir;
  pipeline_file().write(dir.file("p.sst"));
  const auto f = reader::summarize_file(dir.file("p.sst"));
  BOOST_TEST(f.events == 5u);
  BOOST_TEST(f.events_by_kind[static_cast<size_t>(Kind::kStackSample)] == 1u);
  BOOST_TEST(f.skipped.unknown_kinds == 0u);
  std::ostringstream out;
  reader::print_file_summary(out, f);
  BOOST_TEST(out.str().find("events    5: sample 1, loader_config 1, batch_handoff 1, "
                            "channel_handoff 1, stack_sample 1") != std::string::npos,
             out.str());
}

BOOST_AUTO_TEST_CASE(chrome_export_shows_the_new_kinds_with_their_fields) {
  TempDir dir;
  // A stack sample on a Begin record: its frames outlive the reader's buffer.
  pipeline_file(Records()
                    .core(Kind::kRange, format::kBegin, 4000, 0, 7)
                    .stack(stack_head(), kFrames)
                    .core(Kind::kMark, format::kInstant, 4100)
                    .core(Kind::kRange, format::kEnd, 4200))
      .write(dir.file("p.sst"));
  std::ostringstream out;
  const auto res = reader::export_chrome({dir.file("p.sst")}, out, {});
  BOOST_TEST(res.errors.empty());
  const auto doc = nlohmann::json::parse(out.str());
  std::map<std::string, nlohmann::json> by_cat;
  for (const auto& ev : doc["traceEvents"])
    if (ev.contains("cat") && ev["ph"] != "e") by_cat[ev["cat"].get<std::string>()] = ev;
  const auto& s = by_cat["sample"];
  BOOST_TEST(s["name"] == "sample 4242");
  BOOST_TEST(s["args"]["loader_id"] == 0xA11CE);
  BOOST_TEST(s["args"]["worker"] == -1);
  BOOST_TEST(s["args"]["part"] == "getitem");
  const auto& c = by_cat["loader_config"];
  BOOST_TEST(c["ph"] == "i");
  BOOST_TEST(c["name"] == "MapDataset");
  BOOST_TEST(c["args"]["collate_fn"] == "default_collate");
  BOOST_TEST(c["args"]["site"] == "train.py:42");
  BOOST_TEST(c["args"]["pin_memory"] == "inactive");
  BOOST_TEST(c["args"]["mp_context"] == "forkserver");
  BOOST_TEST(c["args"]["in_order"] == false);
  BOOST_TEST(c["args"]["getitems"] == true);
  const auto& h = by_cat["batch_handoff"];
  BOOST_TEST(h["ph"] == "b");  // kAsync: an async pair
  BOOST_TEST(h["name"] == "batch 17");
  BOOST_TEST(h["args"]["worker_pid"] == 31337);
  const double ts = h["ts"].get<double>(), requested = h["args"]["requested_ts"].get<double>();
  BOOST_TEST(requested - ts == 0.3, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(by_cat["channel_handoff"]["args"]["channel_type"] == "mp_queue");
  const auto& st = by_cat["stack_sample"];
  BOOST_TEST(st["name"] == "leaf");
  BOOST_TEST(st["args"]["on_cpu"] == "running");
  BOOST_TEST(st["args"]["late"] == true);
  BOOST_TEST((st["args"]["frames"] == nlohmann::json{"leaf", "middle", "root"}));
  const auto& range = by_cat["range"];
  BOOST_TEST(range["name"] == "middle");
  BOOST_TEST((range["args"]["frames"] == nlohmann::json{"leaf", "middle", "root"}));
}

// Valid files with the new kinds for scripts/fuzz.sh's seed corpus.
BOOST_AUTO_TEST_CASE(writes_readable_pipeline_fuzz_seed_files) {
  const std::string seeds = std::string(STALLSCOPE_TEST_BINARY_DIR) + "/fuzz-seeds";
  std::filesystem::create_directories(seeds);
  pipeline_file().write(seeds + "/pipeline.sst");
  TraceReader r(seeds + "/pipeline.sst");
  Event e;
  size_t n = 0;
  while (r.next(e)) ++n;
  BOOST_TEST(n == 5u);
  BOOST_TEST(r.error() == "");
}

BOOST_AUTO_TEST_SUITE_END()
