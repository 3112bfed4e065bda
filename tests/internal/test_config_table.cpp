// The STALLSCOPE_* configuration table (internal/include/stallscope/
// internal/config.hpp): its rows, its parsers' messages, and that the
// documentation, the sources and the loader's knobs agree with it.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <boost/test/unit_test.hpp>

#include "stallscope/internal/config.hpp"
#include "stallscope/internal/note.hpp"
#include "stallscope/loader/config.hpp"

namespace config = stallscope::config;
namespace fs = std::filesystem;

namespace {

// quiet_takes_every_switch_spelling_in_the_note_helper's child: one note,
// then out, before the test runner starts.
__attribute__((constructor)) void note_probe() {
  if (std::getenv("STALLSCOPE_TEST_NOTE_PROBE") == nullptr) return;
  stallscope::internal::note("stallscope: ", "hello %d", 42);
  ::_exit(0);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const fs::path kSource = STALLSCOPE_SOURCE_DIR;

const char* const kBegin =
    "<!-- BEGIN generated: the configuration table (scripts/config_doc.sh) -->\n";
const char* const kEnd = "<!-- END generated -->\n";

// Every STALLSCOPE_X named in `text` (not prefixes such as STALLSCOPE_LOADER_*).
std::set<std::string> names_in(const std::string& text, const std::regex& re) {
  std::set<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
    const std::string n = (*it)[1].str();
    if (n.back() != '_') out.insert(n);
  }
  return out;
}

std::string message(config::Id id, const char* text, config::Read want) {
  char why[config::kMessageBytes] = "unchanged";
  const config::Var& v = config::var(id);
  int64_t i = 7;
  bool b = false;
  int w = 7;
  config::Read got{};
  if (v.type == config::Type::kInteger) got = config::read_integer(v, text, &i, why, sizeof why);
  if (v.type == config::Type::kSwitch) got = config::read_switch(v, text, &b, why, sizeof why);
  if (v.type == config::Type::kWord) got = config::read_word(v, text, &w, why, sizeof why);
  BOOST_TEST((got == want), v.name << "='" << text << "'");
  if (want == config::Read::kBad) BOOST_TEST((i == 7 && w == 7), "value left unchanged");
  return why;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(config_table)

BOOST_AUTO_TEST_CASE(every_row_is_well_formed_and_its_default_valid) {
  std::set<std::string> seen;
  const std::regex name_re("STALLSCOPE_[A-Z0-9_]*[A-Z0-9]");
  for (const config::Var& v : config::table()) {
    BOOST_TEST(std::regex_match(v.name, name_re), v.name);
    BOOST_TEST(seen.insert(v.name).second, v.name << " is listed twice");
    BOOST_TEST(&config::var(v.id) == &v);
    BOOST_TEST(config::find(v.name) == &v);
    BOOST_TEST(*v.doc != '\0', v.name);
    BOOST_TEST(*v.readers != '\0', v.name);
    int64_t i = 0;
    bool b = false;
    int w = 0;
    if (v.type == config::Type::kInteger && *v.dflt != '\0')
      BOOST_TEST((config::read_integer(v, v.dflt, &i, nullptr, 0) == config::Read::kOk), v.name);
    if (v.type == config::Type::kSwitch)
      BOOST_TEST((config::read_switch(v, v.dflt, &b, nullptr, 0) == config::Read::kOk), v.name);
    if (v.type == config::Type::kWord)
      BOOST_TEST((config::read_word(v, v.dflt, &w, nullptr, 0) == config::Read::kOk), v.name);
  }
  BOOST_TEST(config::find("STALLSCOPE_NO_SUCH") == nullptr);
}

BOOST_AUTO_TEST_CASE(bad_values_are_named_with_what_was_expected_and_the_default) {
  using config::Id;
  using config::Read;
  BOOST_TEST(message(Id::kPreloadWaitMinUs, "abc", Read::kBad) ==
             "STALLSCOPE_PRELOAD_WAIT_MIN_US='abc': not a number (expected 0..1000000 µs); "
             "using the default 20");
  BOOST_TEST(message(Id::kSampleMs, "60001", Read::kBad) ==
             "STALLSCOPE_SAMPLE_MS='60001': out of range (expected 0..60000 ms); using the "
             "default 10");
  BOOST_TEST(message(Id::kSampleMs, "10ms", Read::kBad) ==
             "STALLSCOPE_SAMPLE_MS='10ms': not a number (expected 0..60000 ms); using the "
             "default 10");
  BOOST_TEST(message(Id::kQuiet, "maybe", Read::kBad) ==
             "STALLSCOPE_QUIET='maybe': not on or off (expected on, off, 1, 0, true, false); "
             "using the default off");
  BOOST_TEST(message(Id::kCupti, "grab", Read::kBad) ==
             "STALLSCOPE_CUPTI='grab': not one of yield, keep, off; using the default yield");
  BOOST_TEST(message(Id::kMaxMode, "a\nb", Read::kBad) ==
             "STALLSCOPE_MAX_MODE='a?b': not one of stop, ring; using the default stop");
  // The one integer syntax: no blanks, no '+', no unit.
  for (const char* bad : {" 5", "+8", "5 ", "", "-"}) {
    const config::Var& v = config::var(Id::kFlushMs);
    int64_t x = 7;
    const Read r = config::read_integer(v, bad, &x, nullptr, 0);
    BOOST_TEST((r == (*bad == '\0' ? Read::kUnset : Read::kBad)), "'" << bad << "'");
    BOOST_TEST(x == 7);
  }
}

BOOST_AUTO_TEST_CASE(good_values_and_unset_ones_say_nothing) {
  using config::Id;
  using config::Read;
  BOOST_TEST(message(Id::kSampleMs, "0", Read::kOk) == "unchanged");
  BOOST_TEST(message(Id::kQuiet, "true", Read::kOk) == "unchanged");
  BOOST_TEST(message(Id::kFollow, "none", Read::kOk) == "unchanged");
  BOOST_TEST(message(Id::kFollow, "", Read::kUnset) == "unchanged");
  int w = -1;
  BOOST_TEST((config::read_word(config::var(Id::kCupti), "off", &w, nullptr, 0) == Read::kOk));
  BOOST_TEST(w == 2);
}

BOOST_AUTO_TEST_CASE(defaults_are_read_as_values_of_their_rows) {
  using config::Id;
  BOOST_TEST(config::default_integer(config::var(Id::kSampleMs)) == 10);
  BOOST_TEST(config::default_integer(config::var(Id::kBufferMb)) == 64);
  BOOST_TEST(config::default_switch(config::var(Id::kEnable)));
  BOOST_TEST(!config::default_switch(config::var(Id::kQuiet)));
  BOOST_TEST(config::default_word(config::var(Id::kMaxMode)) == 0);
  BOOST_TEST(config::default_word(config::var(Id::kCupti)) == 0);
}

// STALLSCOPE_QUIET=true silences the note helper the loader, the GPU side
// and the shim write through, as on and 1 do; off or a bad value does not.
// The note is written by this program executed afresh with its stderr on
// the pipe (note_probe): the helper writes only to the descriptor 2 a
// process image started with (RELIABILITY.md 41).
BOOST_AUTO_TEST_CASE(quiet_takes_every_switch_spelling_in_the_note_helper) {
  for (const auto& [value, silent] : std::initializer_list<std::pair<const char*, bool>>{
           {"true", true}, {"on", true}, {"1", true}, {"off", false}, {"loud", false}}) {
    int fds[2];
    BOOST_REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], 2);
      ::setenv("STALLSCOPE_QUIET", value, 1);
      ::setenv("STALLSCOPE_TEST_NOTE_PROBE", "1", 1);
      ::execl("/proc/self/exe", "/proc/self/exe", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    char buf[256];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    const std::string got = n > 0 ? std::string(buf, size_t(n)) : "";
    BOOST_TEST(got == (silent ? "" : "stallscope: hello 42\n"), "STALLSCOPE_QUIET=" << value);
  }
}

// docs/configuration.md holds the table generated from the rows
// (scripts/config_doc.sh), and names no variable the table lacks.
BOOST_AUTO_TEST_CASE(configuration_md_is_the_generated_table) {
  const std::string page = slurp(kSource / "docs/configuration.md");
  const size_t b = page.find(kBegin), e = page.find(kEnd);
  BOOST_REQUIRE_MESSAGE(b != std::string::npos && e != std::string::npos && b < e,
                        "docs/configuration.md lacks the generated table's marker lines");
  const std::string section = page.substr(b + std::strlen(kBegin), e - b - std::strlen(kBegin));
  BOOST_TEST(section == config::markdown_table(),
             "docs/configuration.md is not the table: run scripts/config_doc.sh");
  for (const std::string& n : names_in(page, std::regex("(STALLSCOPE_[A-Z0-9_]+)")))
    BOOST_TEST(config::find(n) != nullptr,
               "docs/configuration.md names " << n << ", which the configuration table lacks");
}

// Every variable a source file names in a string (getenv, setenv,
// os.environ) is a row of the table: a new variable cannot go undocumented.
BOOST_AUTO_TEST_CASE(sources_name_only_variables_of_the_table) {
  const std::regex re("[\"'](STALLSCOPE_[A-Z0-9_]+)");
  for (const char* dir :
       {"libtrace", "loader", "analyzer", "integrations", "internal", "samples"}) {
    for (const auto& f : fs::recursive_directory_iterator(kSource / dir)) {
      const std::string ext = f.path().extension().string();
      if (!f.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".c" && ext != ".py"))
        continue;
      for (const std::string& n : names_in(slurp(f.path()), re))
        BOOST_TEST(config::find(n) != nullptr, fs::relative(f.path(), kSource).string()
                                                   << " reads " << n
                                                   << ", which the configuration table lacks");
    }
  }
}

// The loader parses its knobs with its own table (flags and variables
// alike): the variables it asks for are exactly the table's knob rows.
BOOST_AUTO_TEST_CASE(knob_rows_are_the_variables_the_loader_reads) {
  static std::set<std::string> asked;
  stallscope::loader::Config cfg;
  std::string error;
  BOOST_TEST(stallscope::loader::apply_env(
                 cfg, [](const char* name) -> const char* { return asked.insert(name), nullptr; },
                 &error) == 0);
  std::set<std::string> rows;
  for (const config::Var& v : config::table())
    if (v.type == config::Type::kKnob) rows.insert(v.name);
  BOOST_TEST(asked == rows, boost::test_tools::per_element());
}

// The loader takes its knobs' ranges and choices from the rows: a row's
// bounds are accepted and one past them refused, with the row's range in
// the message; every word of a row is accepted.
BOOST_AUTO_TEST_CASE(loader_knobs_take_ranges_and_words_from_the_rows) {
  for (const config::Var& v : config::table()) {
    if (v.type != config::Type::kKnob) continue;
    std::string name = std::string(v.name).substr(std::strlen("STALLSCOPE_LOADER_"));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    stallscope::loader::Config cfg;
    std::string error;
    if (*v.words != '\0') {
      std::string words = v.words;
      for (size_t from = 0; from <= words.size();) {
        const size_t bar = std::min(words.find('|', from), words.size());
        const std::string w = words.substr(from, bar - from);
        BOOST_TEST(stallscope::loader::set_knob(cfg, name, w, &error) == 0, v.name << "=" << w);
        from = bar + 1;
      }
      BOOST_TEST(stallscope::loader::set_knob(cfg, name, "no-such-word", &error) == -EINVAL);
      continue;
    }
    if (v.lo >= v.hi) continue;  // a range the row cannot hold (seed, GB/s)
    BOOST_TEST(stallscope::loader::set_knob(cfg, name, std::to_string(v.lo), &error) == 0,
               v.name << "=" << v.lo << ": " << error);
    BOOST_TEST(stallscope::loader::set_knob(cfg, name, std::to_string(v.hi), &error) == 0,
               v.name << "=" << v.hi << ": " << error);
    BOOST_TEST(stallscope::loader::set_knob(cfg, name, std::to_string(v.hi + 1), &error) == -EINVAL,
               v.name << "=" << v.hi + 1);
    if (v.lo > 0) {
      BOOST_TEST(stallscope::loader::set_knob(cfg, name, std::to_string(v.lo - 1), &error) ==
                     -EINVAL,
                 v.name << "=" << v.lo - 1);
      if (name != "read_size")
        BOOST_TEST(error.find("[" + std::to_string(v.lo) + ", " + std::to_string(v.hi) + "]") !=
                       std::string::npos,
                   error);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
