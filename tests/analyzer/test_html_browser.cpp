// The HTML pages in a real browser (headless Debian chromium): the single-run
// report of a storage-bound run recorded by analyzer_probe, the diff of that
// run against a compute-bound one, the cross-rank page of 8 synthetic ranks
// with a straggler, and the scaling page of 1, 2 and 4 synthetic ranks.
// For each page: the browser logs no console message and loads nothing but
// the page itself; its DOM holds the verdict and the charts; a screenshot is
// not blank (STALLSCOPE_KEEP_PAGES=DIR keeps the pages). The report's steps chart is scaled to its steady steps (the
// warm-up step, far longer, is clipped). Exits 77 (skipped) without chromium.
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/cli_run.hpp"
#include "multirank/synth_ranks.hpp"
#include "stallscope/analyzer/multirank.hpp"
#include "stallscope/analyzer/render.hpp"
#include "stallscope/analyzer/scaling.hpp"

using namespace stallscope::testing;
namespace an = stallscope::analyzer;
using nlohmann::json;

namespace {

const char* browser() {
  static const char* path = [] {
    for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
      if (std::filesystem::exists(p)) return p;
    return static_cast<const char*>(nullptr);
  }();
  return path;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

// What the browser made of a page: its DOM, its log, a screenshot.
struct Shown {
  std::string dom, log, png;
};

// STALLSCOPE_KEEP_PAGES=DIR keeps a copy of every page checked (the
// screenshots of docs/report-guide.md are taken from them).
Shown show(const TempDir& dir, const std::string& page) {
  if (const char* keep = std::getenv("STALLSCOPE_KEEP_PAGES"); keep != nullptr && *keep != '\0') {
    std::error_code ec;
    std::filesystem::create_directories(keep, ec);
    std::filesystem::copy_file(page, std::filesystem::path(keep) / std::filesystem::path(page).filename(),
                               std::filesystem::copy_options::overwrite_existing, ec);
  }
  const std::string common = std::string(browser()) +
                             " --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run "
                             "--enable-logging=stderr --v=1 --window-size=1000,1400 ";
  const std::string url = "file://" + std::filesystem::absolute(page).string();
  Shown s;
  const std::string dom = dir.file("dom.html"), log = dir.file("log.txt"), png = dir.file("shot.png");
  std::filesystem::remove(png);
  std::string cmd = "timeout 120 " + common + "--dump-dom " + shell_quote(url) + " >" + shell_quote(dom) + " 2>" +
                    shell_quote(log);
  BOOST_REQUIRE_EQUAL(std::system(cmd.c_str()), 0);
  s.dom = slurp(dom);
  s.log = slurp(log);
  cmd = "cd " + shell_quote(dir.path()) + " && timeout 120 " + common + "--screenshot=" + shell_quote(png) + " " +
        shell_quote(url) + " >/dev/null 2>>" + shell_quote(log);
  BOOST_REQUIRE_EQUAL(std::system(cmd.c_str()), 0);
  s.png = slurp(png);
  return s;
}

// The console messages and every file the browser loaded other than `page`.
std::vector<std::string> problems(const Shown& s, const std::string& page) {
  std::vector<std::string> out;
  std::istringstream in(s.log);
  const std::string self = "file://" + std::filesystem::absolute(page).string();
  for (std::string line; std::getline(in, line);) {
    if (line.find(":CONSOLE") != std::string::npos) out.push_back(line);
    const size_t at = line.find("FileURLLoader::Start: ");
    if (at != std::string::npos && line.substr(at + 22) != self) out.push_back(line);
  }
  return out;
}

uint32_t be32(const std::string& b, size_t at) {
  return uint32_t(uint8_t(b[at])) << 24 | uint32_t(uint8_t(b[at + 1])) << 16 | uint32_t(uint8_t(b[at + 2])) << 8 |
         uint32_t(uint8_t(b[at + 3]));
}

// The share of a PNG's pixels (8-bit RGB or RGBA, not interlaced) that are
// not near-white, and the number of distinct colours (quantized) among them.
struct Ink {
  double share = 0;
  size_t colours = 0;
};

Ink ink(const std::string& png) {
  Ink r;
  BOOST_REQUIRE_GT(png.size(), 33u);
  BOOST_REQUIRE(png.compare(0, 8, "\x89PNG\r\n\x1a\n", 8) == 0);
  const uint32_t w = be32(png, 16), h = be32(png, 20);
  const int depth = uint8_t(png[24]), type = uint8_t(png[25]), interlace = uint8_t(png[28]);
  BOOST_REQUIRE(depth == 8 && (type == 2 || type == 6) && interlace == 0);
  const size_t bpp = type == 6 ? 4 : 3;
  std::string idat;
  for (size_t at = 8; at + 8 <= png.size();) {
    const uint32_t len = be32(png, at);
    const std::string kind = png.substr(at + 4, 4);
    if (kind == "IDAT") idat += png.substr(at + 8, len);
    at += 12 + len;
  }
  const size_t stride = size_t(w) * bpp;
  std::vector<unsigned char> raw((stride + 1) * h);
  uLongf got = raw.size();
  BOOST_REQUIRE_EQUAL(uncompress(raw.data(), &got, reinterpret_cast<const Bytef*>(idat.data()), idat.size()), Z_OK);
  std::vector<unsigned char> prev(stride, 0), cur(stride);
  size_t inked = 0;
  std::vector<bool> seen(4096, false);
  for (uint32_t y = 0; y < h; ++y) {
    const unsigned char* row = &raw[y * (stride + 1)];
    const int filter = row[0];
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= bpp ? cur[x - bpp] : 0, b = prev[x], c = x >= bpp ? prev[x - bpp] : 0;
      int v = row[1 + x];
      switch (filter) {
        case 1: v += a; break;
        case 2: v += b; break;
        case 3: v += (a + b) / 2; break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: break;
      }
      cur[x] = static_cast<unsigned char>(v);
    }
    for (size_t x = 0; x < stride; x += bpp) {
      const int R = cur[x], G = cur[x + 1], B = cur[x + 2];
      if (R > 240 && G > 240 && B > 240) continue;
      ++inked;
      const size_t q = size_t(R >> 4) << 8 | size_t(G >> 4) << 4 | size_t(B >> 4);
      if (!seen[q]) {
        seen[q] = true;
        ++r.colours;
      }
    }
    prev.swap(cur);
  }
  r.share = double(inked) / double(size_t(w) * h);
  return r;
}

// Every page: nothing logged or fetched, a screenshot with ink in several colours.
void check_page(const Shown& s, const std::string& page) {
  BOOST_TEST(problems(s, page).empty(), "console messages or loads: " << problems(s, page).size());
  for (const auto& p : problems(s, page)) BOOST_TEST_MESSAGE(p);
  const Ink i = ink(s.png);
  BOOST_TEST_MESSAGE(page << ": " << s.dom.size() << " bytes of DOM, ink " << i.share << ", " << i.colours
                          << " colours");
  BOOST_TEST(i.share > 0.03, "screenshot nearly blank: " << i.share);
  BOOST_TEST(i.colours >= 5u);
}

struct Runs {
  TempDir dir;
  std::string data = record("data"), compute = record("compute");
  std::string record(const std::string& mode) {
    const std::string out = dir.file(mode);
    const std::string cmd = "STALLSCOPE_OUT=" + shell_quote(out) + " " + shell_quote(STALLSCOPE_ANALYZER_PROBE) +
                            " " + mode + " 30 >/dev/null";
    BOOST_REQUIRE_EQUAL(std::system(cmd.c_str()), 0);
    return out;
  }
  static Runs& get() {
    static Runs runs;
    return runs;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(html_browser)

BOOST_AUTO_TEST_CASE(single_run_page_leads_with_the_verdict_and_scales_to_the_steady_steps) {
  Runs& runs = Runs::get();
  const std::string page = runs.dir.file("report.html"), js = runs.dir.file("report.json");
  auto r = run_cli(runs.dir, {"report", "--html", page, runs.data});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  r = run_cli(runs.dir, {"report", "--json", runs.data});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  const json j = json::parse(r.out);
  const json& rank = j["ranks"][0];
  const Shown s = show(runs.dir, page);
  check_page(s, page);
  // The verdict first, then the top remedy.
  const size_t verdict = s.dom.find("<p class=\"summary\">" + rank["summary"].get<std::string>());
  BOOST_TEST(verdict != std::string::npos);
  const size_t top = s.dom.find("<p class=\"top\">Top remedy: <b>" + rank["remedies"][0]["title"].get<std::string>());
  BOOST_TEST(top != std::string::npos);
  BOOST_TEST(top > verdict);
  for (const char* chart : {"<svg class=\"partbar\"", "<svg class=\"steps\"", "<svg class=\"timeline\"",
                            "<div class=\"card\">"})
    BOOST_TEST(count(s.dom, chart) >= 1u, chart);
  // One bar per step (30 steps): each a group with its tooltip.
  const json& buckets = rank["step_buckets"]["buckets"];
  BOOST_TEST(buckets.size() == rank["steps"]["total"].get<size_t>());
  // The scale: the longest steady step that is not an outlier, plus 10 %.
  int64_t steady_max = 0, longest = 0;
  for (const auto& st : rank["step_table"]) {
    longest = std::max(longest, st["wall_ns"].get<int64_t>());
    if (!st["warmup"].get<bool>() && !st["outlier"].get<bool>())
      steady_max = std::max(steady_max, st["wall_ns"].get<int64_t>());
  }
  const int64_t scale = rank["step_buckets"]["scale_ns"].get<int64_t>();
  BOOST_TEST(scale == steady_max + steady_max / 10);
  std::smatch m;
  BOOST_REQUIRE(std::regex_search(s.dom, m, std::regex("scaled to the steady steps \\(([0-9.]+) ms\\)")));
  BOOST_TEST(std::stod(m[1]) == double(scale) / 1e6, boost::test_tools::tolerance(0.01));
  if (longest > scale) BOOST_TEST(count(s.dom, "class=\"clip\"") >= 1u, "a taller step is marked");
  // Self-contained and small.
  BOOST_TEST(std::filesystem::file_size(page) < 500'000u);
}

BOOST_AUTO_TEST_CASE(diff_page_shows_each_part_and_each_remedy_before_and_after) {
  Runs& runs = Runs::get();
  const std::string page = runs.dir.file("diff.html");
  const auto r = run_cli(runs.dir, {"diff", "--html", page, runs.data, runs.compute});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  const Shown s = show(runs.dir, page);
  check_page(s, page);
  for (const char* chart : {"<svg class=\"diffsteps\"", "<svg class=\"diffparts\"", "<svg class=\"diffremedies\""})
    BOOST_TEST(count(s.dom, chart) == 1u, chart);
  BOOST_TEST(count(s.dom, "class=\"predicted\"") >= 1u);
  BOOST_TEST(s.dom.find("storage") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cross_rank_page_names_the_straggler_and_draws_the_heatmaps) {
  SynthSpec spec;
  spec.ranks = 8;
  spec.steps = 40;
  spec.stall_ms.assign(8, 0);
  spec.stall_ms[5] = 30;
  an::Report rep = synth_report(synth_run(spec));
  an::analyze_cross_rank(rep, {});
  TempDir dir;
  const std::string page = dir.file("cross.html");
  {
    std::ofstream f(page);
    an::write_html(f, rep);
  }
  const Shown s = show(dir, page);
  check_page(s, page);
  BOOST_TEST(s.dom.find("across 8 ranks") != std::string::npos);
  BOOST_TEST(s.dom.find("rank 5") != std::string::npos);
  BOOST_TEST(count(s.dom, "<svg class=\"heat\"") == 2u);
  BOOST_TEST(count(s.dom, "<svg class=\"steps\"") == 8u);
}

BOOST_AUTO_TEST_CASE(scaling_page_splits_the_lost_efficiency) {
  std::vector<an::Report> runs;
  std::vector<std::string> inputs;
  for (size_t n : {1u, 2u, 4u}) {
    SynthSpec spec;
    spec.ranks = n;
    spec.steps = 30;
    spec.stall_ms.assign(n, 0);
    if (n > 1) spec.stall_ms[n - 1] = 10.0 * double(n);
    an::Report rep = synth_report(synth_run(spec));
    an::analyze_cross_rank(rep, {});
    runs.push_back(std::move(rep));
    inputs.push_back(std::to_string(n) + " ranks");
  }
  const an::ScalingStudy study = an::scaling_study(runs, inputs);
  BOOST_REQUIRE_EQUAL(study.points.size(), 3u);
  TempDir dir;
  const std::string page = dir.file("scaling.html");
  {
    std::ofstream f(page);
    an::write_scaling_html(f, study);
  }
  const Shown s = show(dir, page);
  check_page(s, page);
  BOOST_TEST(s.dom.find("<p class=\"summary\">4 ranks keep") != std::string::npos);
  BOOST_TEST(count(s.dom, "<svg class=\"scaling\"") == 1u);
  BOOST_TEST(s.dom.find("ideal (1.0)") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

bool init_unit_test() { return true; }

int main(int argc, char** argv) {
  if (browser() == nullptr) {
    std::puts("SKIP: chromium is not installed (scripts/setup.sh installs it)");
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
