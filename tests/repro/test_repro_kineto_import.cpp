// Regressions of the PyTorch profiler importer (issue 46; RELIABILITY.md
// cases 6, 31-33 and 46):
//   - an import held the whole JSON text, simdjson's index of all of it and
//     the mapped events: about twice to three times the text in memory;
//   - a gzip bomb got its first buffer sized from the trailer's ISIZE (up
//     to 64 times the compressed size) before the ratio check ran;
//   - one event name with invalid UTF-8 failed the whole file, and that
//     message, like a lost quote's, gave the file's size as if an offset.
// Memory is measured in a forked child: writing 5 to /proc/self/clear_refs
// resets its peak RSS (VmHWM) to its RSS, the import runs, and the child
// reports its peak minus that start. The fixed part (the window, simdjson's
// index of one batch, zlib) is calibrated with a tiny trace in each test.
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <boost/test/unit_test.hpp>

#include "kineto/kineto.hpp"
#include "kineto/kineto_writer.hpp"

namespace kin = stallscope::analyzer::kineto;
namespace fs = std::filesystem;
using stallscope::testing::KinetoWriter;

namespace {

long status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + key.size());
  return -1;
}

struct ChildImport {
  long growth_kb = -1;  // peak RSS over the RSS at the import's start
  long maxrss_kb = -1;  // wait4's ru_maxrss of the child (for the log)
  uint64_t kept = 0;
  std::string error;  // ImportError's text, empty when it imported
};

// kin::import_file(path) in a forked child, its memory measured there.
ChildImport import_in_child(const std::string& path) {
  malloc_trim(0);  // the child's allocations must not reuse the parent's freed pages
  int fds[2];
  BOOST_REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    {
      std::ofstream reset("/proc/self/clear_refs");
      reset << "5";
      reset.flush();
      if (!reset) {
        out = "-1 0\ncannot write /proc/self/clear_refs to reset the peak RSS";
      } else {
        const long start = status_kb("VmRSS");
        uint64_t kept = 0;
        std::string error;
        try {
          kept = kin::import_file(path).stats.kept;
        } catch (const std::exception& e) {
          error = e.what();
        }
        out =
            std::to_string(status_kb("VmHWM") - start) + " " + std::to_string(kept) + "\n" + error;
      }
    }
    const ssize_t w = ::write(fds[1], out.data(), out.size());
    ::_exit(w == ssize_t(out.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
  ::close(fds[0]);
  int st = 0;
  rusage ru{};
  BOOST_REQUIRE(::wait4(pid, &st, 0, &ru) == pid);
  BOOST_REQUIRE_MESSAGE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the measuring child failed");
  ChildImport r;
  std::istringstream in(text);
  in >> r.growth_kb >> r.kept;
  in.ignore(1);
  std::getline(in, r.error, '\0');
  r.maxrss_kb = ru.ru_maxrss;
  BOOST_REQUIRE_MESSAGE(r.growth_kb >= 0, r.error);
  return r;
}

// A current-schema trace shaped like a real one (Python frames, operators
// with their input shapes, launches, kernels with their launch geometry,
// flows), written as it is generated: about `mb` MB.
uint64_t write_trace(const fs::path& p, double mb) {
  FILE* f = std::fopen(p.c_str(), "wb");
  BOOST_REQUIRE(f != nullptr);
  uint64_t bytes = static_cast<uint64_t>(std::fprintf(
      f,
      "{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, "
      "\"world_size\": 2},\n  \"baseTimeNanoseconds\": 1700000000000000000,\n  "
      "\"traceEvents\": [\n"));
  long corr = 0;
  for (int step = 1; bytes < mb * 1e6; ++step) {
    const long t0 = step * 10'000L;
    bytes += std::fprintf(f,
                          "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": "
                          "\"ProfilerStep#%d\", \"pid\": 4242, \"tid\": 4242, \"ts\": %ld.000, "
                          "\"dur\": 10000.000, \"args\": {\"External id\": %ld}},\n",
                          step, t0, ++corr);
    for (int i = 0; i < 100; ++i, ++corr) {
      const long t = t0 + 50 + i * 90;
      bytes += std::fprintf(
          f,
          "  {\"ph\": \"X\", \"cat\": \"python_function\", \"name\": "
          "\"torch/nn/modules/module.py(1501): _call_impl\", \"pid\": 4242, \"tid\": 4242, "
          "\"ts\": %ld.125, \"dur\": 60.000, \"args\": {\"Python parent id\": %ld, \"Python id\": "
          "%ld, \"Python thread\": 0}},\n"
          "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::addmm\", \"pid\": 4242, "
          "\"tid\": 4242, \"ts\": %ld.250, \"dur\": 40.250, \"args\": {\"External id\": %ld, "
          "\"Input Dims\": [[512], [64, 512], [512, 512], [], []], \"Input type\": [\"float\", "
          "\"float\", \"float\", \"Scalar\", \"Scalar\"]}},\n"
          "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": "
          "4242, \"tid\": 4242, \"ts\": %ld.500, \"dur\": 4.125, \"args\": {\"External id\": %ld, "
          "\"cbid\": 211, \"correlation\": %ld}},\n"
          "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void "
          "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4>(Params)\", "
          "\"pid\": 0, \"tid\": 7, \"ts\": %ld.750, \"dur\": 61.344, \"args\": {\"External id\": "
          "%ld, \"device\": 0, \"stream\": 7, \"correlation\": %ld, \"registers per thread\": 232, "
          "\"grid\": [8, 8, 1], \"block\": [256, 1, 1]}},\n"
          "  {\"ph\": \"f\", \"id\": %ld, \"pid\": 0, \"tid\": 7, \"ts\": %ld.750, \"cat\": "
          "\"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"},\n",
          t, corr, corr, t, corr, t + 8, corr, corr, t + 12, corr, corr, corr, t + 12);
    }
  }
  bytes += std::fprintf(f,
                        "  {\"ph\": \"i\", \"name\": \"end\", \"pid\": 0, \"tid\": 0, \"ts\": "
                        "0, \"s\": \"g\"}\n  ],\n  \"traceName\": \"big.json\"\n}\n");
  std::fclose(f);
  return bytes;
}

std::string deflate_gzip(const std::string& text) {
  z_stream zs{};
  BOOST_REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, text.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  BOOST_REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// A gzip bomb of `members` concatenated members of 64 MiB of instant events
// each (a valid trace's start, ~300-fold), about 5 MB; the last trailer's
// ISIZE says the whole size (mod 2^32), as one member's would.
uint64_t write_bomb(const fs::path& p, int members) {
  const std::string ev = "{\"ph\": \"i\", \"name\": \"x\", \"pid\": 1, \"tid\": 1, \"ts\": 1.0},\n";
  std::string block;
  block.reserve(64u << 20);
  while (block.size() + ev.size() <= (64u << 20)) block += ev;
  const std::string head = deflate_gzip("{\"traceEvents\": [\n" + block);
  const std::string body = deflate_gzip(block);
  std::ofstream out(p, std::ios::binary);
  out << head;
  for (int i = 1; i < members; ++i) out << body;
  out.close();
  const uint64_t total = uint64_t(members) * block.size() + 18;
  std::fstream patch(p, std::ios::in | std::ios::out | std::ios::binary);
  patch.seekp(-4, std::ios::end);
  const unsigned char isize[4] = {uint8_t(total), uint8_t(total >> 8), uint8_t(total >> 16),
                                  uint8_t(total >> 24)};
  patch.write(reinterpret_cast<const char*>(isize), 4);
  return fs::file_size(p);
}

// The fixed part: a trace of a few KB.
long base_kb(const fs::path& dir) {
  const auto tiny = dir / "tiny.json";
  write_trace(tiny, 0.01);
  const ChildImport r = import_in_child(tiny.string());
  BOOST_REQUIRE_MESSAGE(r.error.empty(), r.error);
  BOOST_TEST_MESSAGE("a tiny trace's import: peak RSS +" << r.growth_kb << " KiB");
  return r.growth_kb;
}

std::string import_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const kin::ImportError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(repro_kineto_import)

BOOST_AUTO_TEST_CASE(a_gzip_bomb_is_refused_naming_file_and_ratio_before_any_large_buffer) {
  const auto dir = stallscope::testing::test_dir("repro_kineto_bomb");
  const long base = base_kb(dir);
  const auto bomb = dir / "bomb.json.gz";
  const uint64_t size = write_bomb(bomb, 24);
  BOOST_TEST_MESSAGE("bomb: " << size << " bytes of gzip, 1.5 GiB of JSON");
  const ChildImport r = import_in_child(bomb.string());
  BOOST_TEST(has(r.error, bomb.string()), r.error);
  BOOST_TEST(has(r.error, "-fold"), r.error);
  BOOST_TEST(has(r.error, "refused"), r.error);
  BOOST_TEST_MESSAGE(r.error << "\npeak RSS +" << r.growth_kb << " KiB");
  // The old importer's first buffer alone was 64 x the compressed size (320 MB).
  BOOST_TEST(r.growth_kb <= base + 32 * 1024,
             "peak RSS +" << r.growth_kb << " KiB refusing a bomb (a tiny trace: +" << base
                          << " KiB; ru_maxrss " << r.maxrss_kb << " KiB)");
}

BOOST_AUTO_TEST_CASE(a_large_trace_costs_its_events_not_its_text) {
  const auto dir = stallscope::testing::test_dir("repro_kineto_large");
  const long base = base_kb(dir);
  const auto plain = dir / "large.json";
  const uint64_t bytes = write_trace(plain, 48);
  const ChildImport r = import_in_child(plain.string());
  BOOST_REQUIRE_MESSAGE(r.error.empty(), r.error);
  BOOST_TEST(r.kept > 80'000u);
  const long text_kb = long(bytes >> 10);
  BOOST_TEST_MESSAGE("plain " << text_kb << " KiB of JSON: peak RSS +" << r.growth_kb
                              << " KiB (tiny: +" << base << ")");
  // RELIABILITY.md case 46 allows 1.5 x the text; the importer holds its
  // events and a window, never the text: less than the text itself (the
  // old importer took 2.3 x: the text, simdjson's index of all of it, the
  // events).
  BOOST_TEST(r.growth_kb <= base + text_kb, "peak RSS +" << r.growth_kb << " KiB for " << text_kb
                                                         << " KiB of JSON (tiny: +" << base
                                                         << " KiB)");
  // The same gzipped: no inflated copy held either.
  const auto gz = dir / "large.json.gz";
  {
    std::ifstream in(plain, std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), {}};
    stallscope::testing::write_gzip(gz, text);
  }
  fs::remove(plain);
  const ChildImport g = import_in_child(gz.string());
  BOOST_REQUIRE_MESSAGE(g.error.empty(), g.error);
  BOOST_TEST(g.kept == r.kept);
  BOOST_TEST_MESSAGE("gzip: peak RSS +" << g.growth_kb << " KiB");
  BOOST_TEST(g.growth_kb <= base + text_kb,
             "gzip: peak RSS +" << g.growth_kb << " KiB for " << text_kb << " KiB of JSON");
}

BOOST_AUTO_TEST_CASE(invalid_utf8_in_one_name_is_replaced_with_one_warning_at_its_offset) {
  KinetoWriter clean(KinetoWriter::kCurrent), bad(KinetoWriter::kCurrent);
  for (KinetoWriter* w : {&clean, &bad}) {
    for (int i = 0; i < 20; ++i)
      w->step(i + 1, i * 10.0, i * 10.0 + 10).kernel(i * 10.0 + 1, i * 10.0 + 9);
  }
  clean.annotation("load batch", 3, 4);
  bad.annotation(
      "load\xFF"
      "batch",
      3, 4);  // a stray byte, as a cut multibyte name leaves
  for (KinetoWriter* w : {&clean, &bad})
    for (int i = 20; i < 40; ++i)
      w->step(i + 1, i * 10.0, i * 10.0 + 10).kernel(i * 10.0 + 1, i * 10.0 + 9);
  const std::string json = bad.json();
  const size_t at = json.find("load\xFF") + 4;
  const auto dir = stallscope::testing::test_dir("repro_kineto_utf8");
  for (const std::string name : {"utf8.json", "utf8.json.gz"}) {
    BOOST_TEST_CONTEXT(name) {
      const auto path = (dir / name).string();
      if (name.ends_with(".gz"))
        stallscope::testing::write_gzip(path, json);
      else
        stallscope::testing::write_file(path, json);
      const std::string e = import_error([&] { kin::import_file(path); });
      BOOST_TEST_REQUIRE(e.empty(), e);
      const auto imp = kin::import_file(path);
      const auto ref = kin::import_json(clean.json(), "clean.json");
      BOOST_TEST(imp.stats.events == ref.stats.events);
      BOOST_TEST(imp.stats.kept == ref.stats.kept);
      BOOST_TEST(imp.stats.steps == 40u);
      BOOST_TEST(imp.stats.skipped == 0u);
      const auto& names = imp.trace.names;
      BOOST_TEST((std::find(names.begin(), names.end(),
                            "load\xEF\xBF\xBD"
                            "batch") != names.end()));
      size_t warned = 0;
      for (const auto& w : imp.warnings)
        if (has(w, "UTF-8")) {
          ++warned;
          BOOST_TEST_MESSAGE(w);
          BOOST_TEST(has(w, path), w);
          BOOST_TEST(has(w, "U+FFFD"), w);
          BOOST_TEST(has(w, "at byte " + std::to_string(at)), w << " (expected byte " << at << ")");
        }
      BOOST_TEST(warned == 1u);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_garbled_file_names_the_byte_where_it_breaks_not_its_size) {
  const auto dir = stallscope::testing::test_dir("repro_kineto_garbled");
  const auto import_text = [&](const std::string& text, const std::string& name) {
    stallscope::testing::write_file(dir / name, text);
    kin::import_file((dir / name).string());
  };
  KinetoWriter w(KinetoWriter::kCurrent);
  for (int i = 0; i < 200; ++i)
    w.step(i + 1, i * 10.0, i * 10.0 + 10).kernel(i * 10.0 + 1, i * 10.0 + 9);
  const std::string good = w.json();
  // A closing quote lost in the middle: every quote after it pairs wrongly.
  const size_t q = good.find("\"ProfilerStep#100\"") + std::string("\"ProfilerStep#100").size();
  std::string lost = good;
  lost.erase(q, 1);
  std::string e = import_error([&] { import_text(lost, "lost.json"); });
  BOOST_TEST_MESSAGE(e);
  BOOST_TEST(has(e, "lost.json"), e);
  BOOST_TEST(!has(e, std::to_string(lost.size())), e);
  // The string runs on to the next quote; JSON breaks at the key after it.
  const size_t breaks = lost.find("pid", q);
  BOOST_TEST(has(e, "byte " + std::to_string(breaks)), e << " (expected byte " << breaks << ")");
  // A stray byte that is no UTF-8 between two events.
  std::string stray = good;
  const size_t s = stray.find("},\n", good.size() / 2) + 2;
  stray.insert(s, "\xFF");
  e = import_error([&] { import_text(stray, "stray.json"); });
  BOOST_TEST_MESSAGE(e);
  BOOST_TEST(has(e, "stray.json"), e);
  BOOST_TEST(has(e, "byte " + std::to_string(s)), e << " (expected byte " << s << ")");
  BOOST_TEST(!has(e, std::to_string(stray.size())), e);
  // Cut: the end of the file is where it breaks.
  const std::string cut = good.substr(0, good.size() / 2);
  e = import_error([&] { import_text(cut, "cut.json"); });
  BOOST_TEST(has(e, "ends at byte " + std::to_string(cut.size())), e);
}

BOOST_AUTO_TEST_SUITE_END()
