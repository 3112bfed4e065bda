// Regressions: the `stallscope` command never waits on a FIFO named as
// input, never replaces a special file named as output (a device stays a
// device, a FIFO receives the output) and never writes through a symlink
// planted where it writes (RELIABILITY.md 27, 28); an input it cannot reach
// is named with the system's reason. Each case failed on the build before
// the fix: the command blocked forever, renamed its output over the device
// or FIFO, overwrote the file a planted symlink named, or said "no such file"
// of a symlink loop.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "skip_visibly.hpp"
#include "cli/cli_run.hpp"
#include "repro/hostile_json.hpp"

using namespace stallscope;
using namespace stallscope::testing;

namespace {

constexpr int kLimitS = 20;  // a hang guard: each command takes well under a second

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

mode_t type_of(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

std::string write_trace(const TempDir& dir) {
  const std::string path = dir.file("t.sst");
  write_trainer_trace(path, R"({"host":"node1","rank":0})", "trainer", 6, 10000000);
  return path;
}

std::string make_victim(const TempDir& dir, const std::string& name) {
  const std::string path = dir.file(name);
  std::ofstream(path) << "precious\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

// Reads a FIFO until its writer closes it, or `kLimitS` passes; never blocks
// in open (O_NONBLOCK) so a command that never opens the FIFO cannot hang
// the test.
std::string drain_fifo(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) return "";
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kLimitS);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    if (n == 0 && (p.revents & POLLHUP)) break;  // the writer closed it
  }
  ::close(fd);
  return out;
}

boost::test_tools::assertion_result can_switch_user(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(::access("/usr/bin/setpriv", X_OK) == 0 &&
                                        ::geteuid() == 0);
  r.message() << "needs root and setpriv to act as another user";
  return r;
}

// `stallscope args...` as user nobody; returns the exit status, stderr in `err`.
int run_cli_as_nobody(const TempDir& dir, const std::vector<std::string>& args, std::string* err) {
  std::string cmd = "exec timeout -k 5 " + std::to_string(kLimitS) +
                    " setpriv --reuid=65534 --regid=65534 --clear-groups " +
                    shell_quote(STALLSCOPE_CLI);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " >/dev/null 2>" + shell_quote(dir.file("err"));
  const int status = std::system(cmd.c_str());
  *err = slurp(dir.file("err"));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(repro_cli_files)

BOOST_AUTO_TEST_CASE(a_fifo_named_as_input_is_refused_without_waiting) {
  TempDir dir;
  const std::string fifo = dir.file("x.sst");
  BOOST_TEST_REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const std::vector<std::vector<std::string>> commands = {
      {"info", fifo}, {"report", fifo}, {"export", "--chrome", dir.file("o.json"), fifo}};
  for (const auto& args : commands) {
    BOOST_TEST_CONTEXT(args[0]) {
      const CliResult r = run_cli(dir, args, "", kLimitS);
      BOOST_TEST(r.exit_code == 1, r.exit_code << ": " << r.err);  // 124: it waited
      BOOST_TEST(has(r.err, "not a regular file"), r.err);
    }
  }
  BOOST_TEST(type_of(fifo) == S_IFIFO);
}

// A symlink loop was "no such file or directory", and so was a path below a
// directory the user may not search: the system's own reason now.
BOOST_AUTO_TEST_CASE(an_input_path_that_cannot_be_reached_is_named_with_the_real_reason) {
  TempDir dir;
  const std::string loop = dir.file("loop1");
  std::filesystem::create_symlink(dir.file("loop2"), loop);
  std::filesystem::create_symlink(loop, dir.file("loop2"));
  const std::vector<std::vector<std::string>> commands = {
      {"info", loop}, {"report", loop}, {"export", "--chrome", dir.file("o.json"), loop}};
  for (const auto& args : commands) {
    BOOST_TEST_CONTEXT(args[0]) {
      const CliResult r = run_cli(dir, args, "", kLimitS);
      BOOST_TEST(r.exit_code == 1, r.err);
      BOOST_TEST(has(r.err, loop + ": too many levels of symbolic links"), r.err);
      BOOST_TEST(!has(r.err, "no such file"), r.err);
    }
  }
  const CliResult absent = run_cli(dir, {"info", dir.file("absent")}, "", kLimitS);
  BOOST_TEST(has(absent.err, dir.file("absent") + ": no such file or directory"), absent.err);
}

BOOST_AUTO_TEST_CASE(an_input_below_a_directory_the_user_may_not_search_says_so,
                     *stallscope::test::skip_unless(can_switch_user)) {
  TempDir dir;
  ::chmod(dir.path().c_str(), 0755);  // nobody may enter the test's directory …
  std::filesystem::create_directories(dir.file("locked/run"));
  ::chmod(dir.file("locked").c_str(), 0700);  // … but not this one
  const std::string below = dir.file("locked/run");
  for (const std::string cmd : {"info", "report"}) {
    BOOST_TEST_CONTEXT(cmd) {
      std::string err;
      BOOST_TEST(run_cli_as_nobody(dir, {cmd, below}, &err) == 1, err);
      BOOST_TEST(has(err, below + ": permission denied"), err);
      BOOST_TEST(!has(err, "no such file"), err);
    }
  }
}

// The same damaged file (a checksum error mid-file): info and export exited
// 1, report 0. One rule now: the readable part is shown, the status is 1.
BOOST_AUTO_TEST_CASE(a_file_damaged_mid_way_gives_every_command_the_same_exit_status) {
  TempDir dir;
  const std::string trace = write_trace(dir);
  std::string bytes = slurp(trace);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0xff);
  std::ofstream(trace, std::ios::binary | std::ios::trunc) << bytes;
  const CliResult info = run_cli(dir, {"info", trace}, "", kLimitS);
  BOOST_TEST(info.exit_code == 1, info.err);
  BOOST_TEST(has(info.err, "checksum mismatch"), info.err);  // the fault meant
  BOOST_TEST(has(info.out, "error"), info.out);              // still summarized
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"report", trace}, {"report", "--json", trace}}) {
    BOOST_TEST_CONTEXT(args[1]) {
      const CliResult r = run_cli(dir, args, "", kLimitS);
      BOOST_TEST(r.exit_code == info.exit_code, r.err);
      BOOST_TEST(has(r.err, "1 file(s) unreadable from an offset on"), r.err);
      BOOST_TEST(has(r.out, "checksum mismatch"), r.out);  // the report, with its warning
    }
  }
  const CliResult exp =
      run_cli(dir, {"export", "--chrome", dir.file("o.json"), trace}, "", kLimitS);
  BOOST_TEST(exp.exit_code == info.exit_code, exp.err);
  BOOST_TEST(slurp(dir.file("o.json")).size() > 10u);
}

BOOST_AUTO_TEST_CASE(a_device_named_as_output_is_written_in_place) {
  TempDir dir;
  const std::string trace = write_trace(dir);
  const std::string null = dir.file("null"), full = dir.file("full");
  // Our own nodes of /dev/null and /dev/full: the machine's are never risked.
  BOOST_TEST_REQUIRE(::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
  BOOST_TEST_REQUIRE(::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)) == 0);
  CliResult r = run_cli(dir, {"report", "--html", null, trace}, "", kLimitS);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(type_of(null) == S_IFCHR);
  r = run_cli(dir, {"export", "--chrome", null, trace}, "", kLimitS);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(type_of(null) == S_IFCHR);
  r = run_cli(dir, {"report", "--html", full, trace}, "", kLimitS);
  BOOST_TEST(r.exit_code == 1, r.err);
  BOOST_TEST(has(r.err, full + ": No space left on device"), r.err);
  BOOST_TEST(type_of(full) == S_IFCHR);
}

BOOST_AUTO_TEST_CASE(a_fifo_named_as_output_receives_the_output) {
  TempDir dir;
  const std::string trace = write_trace(dir);
  const std::string fifo = dir.file("pipe");
  BOOST_TEST_REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  std::string got;
  std::thread reader([&] { got = drain_fifo(fifo); });
  const CliResult r = run_cli(dir, {"report", "--html", fifo, trace}, "", kLimitS);
  reader.join();
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(has(got, "</html>"), got.size() << " bytes");
  BOOST_TEST(type_of(fifo) == S_IFIFO);
}

BOOST_AUTO_TEST_CASE(outputs_never_write_through_planted_symlinks) {
  TempDir dir;
  const std::string trace = write_trace(dir);
  for (const std::string flag : {"--html", "--chrome"}) {
    BOOST_TEST_CONTEXT(flag) {
      const std::string out = dir.file("out" + flag.substr(2));
      const std::string at_out = make_victim(dir, "victim-out" + flag.substr(2));
      const std::string at_tmp = make_victim(dir, "victim-tmp" + flag.substr(2));
      std::filesystem::create_symlink(at_out, out);
      std::filesystem::create_symlink(at_tmp, out + ".tmp");
      const std::vector<std::string> args =
          flag == "--html" ? std::vector<std::string>{"report", "--html", out, trace}
                           : std::vector<std::string>{"export", "--chrome", out, trace};
      const CliResult r = run_cli(dir, args, "", kLimitS);
      BOOST_TEST(r.exit_code == 0, r.err);
      BOOST_TEST(slurp(at_out) == "precious\n");
      BOOST_TEST(slurp(at_tmp) == "precious\n");
      BOOST_TEST(type_of(out) == S_IFREG);  // the link was replaced, not followed
      BOOST_TEST(slurp(out).size() > 100u);
    }
  }
}

BOOST_AUTO_TEST_CASE(ctl_never_writes_through_a_planted_symlink_or_into_a_fifo) {
  TempDir dir;
  const std::string run = dir.file("run");
  std::filesystem::create_directories(run);
  std::ofstream(run + "/run.json") << R"({"id":"job","key":"k"})" << "\n";
  // A process recording there (of another host: not checked here), or ctl
  // refuses before it writes anything.
  std::filesystem::create_directories(run + "/progress");
  std::ofstream(run + "/progress/elsewhere-r0-1")
      << "pid=1 steps=0 capture=on windows_closed=0 ended=0\n";
  const std::string victim = make_victim(dir, "victim");
  std::filesystem::create_symlink(victim, run + "/control.tmp");
  CliResult r = run_cli(dir, {"ctl", run, "off"}, "", kLimitS);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(slurp(victim) == "precious\n");
  BOOST_TEST(slurp(run + "/control") == "off\n");
  // stallscope's own file: a FIFO there is refused, never opened or replaced.
  std::filesystem::remove(run + "/control");
  BOOST_TEST_REQUIRE(::mkfifo((run + "/control").c_str(), 0644) == 0);
  r = run_cli(dir, {"ctl", run, "on"}, "", kLimitS);
  BOOST_TEST(r.exit_code != 0);
  BOOST_TEST(r.exit_code != 124);
  BOOST_TEST(has(r.err, "not a regular file"), r.err);
  BOOST_TEST(type_of(run + "/control") == S_IFIFO);
}

// A FIFO, socket or dangling link named like an input inside a run
// directory was skipped without a word by report, info and scaling.
BOOST_AUTO_TEST_CASE(special_files_in_a_run_directory_are_named_once_and_skipped) {
  TempDir dir;
  const std::string run = dir.file("run");
  std::filesystem::create_directories(run);
  write_trainer_trace(run + "/t.sst", R"({"host":"node1","rank":0})", "trainer", 6, 10000000);
  BOOST_TEST_REQUIRE(::mkfifo((run + "/x.sst").c_str(), 0644) == 0);
  BOOST_TEST_REQUIRE(::mkfifo((run + "/trace.json").c_str(), 0644) == 0);
  std::filesystem::create_symlink(run + "/gone.sst", run + "/y.sst");
  const std::vector<std::vector<std::string>> commands = {
      {"report", run}, {"info", run}, {"scaling", run, run}};
  for (const auto& args : commands) {
    BOOST_TEST_CONTEXT(args[0]) {
      const CliResult r = run_cli(dir, args, "", kLimitS);
      BOOST_TEST(r.exit_code != 124, r.err);  // never waited on the FIFOs
      const std::string fifo = run + "/x.sst: not a regular file (FIFO); skipped";
      const size_t at = r.err.find(fifo);
      BOOST_TEST(at != std::string::npos, r.err);
      if (args[0] != "scaling")  // two runs, the same directory: named for each
        BOOST_TEST(r.err.find(fifo, at + 1) == std::string::npos, r.err);
      BOOST_TEST(has(r.err, run + "/trace.json: not a regular file (FIFO); skipped"), r.err);
      BOOST_TEST(has(r.err, run + "/y.sst: a symlink that cannot be followed ("), r.err);
      BOOST_TEST(!has(r.err, "t.sst:"), r.err);  // the regular file is read, not named
    }
  }
  // The readable file is still reported.
  const CliResult r = run_cli(dir, {"report", run}, "", kLimitS);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.size() > 100u);
}

// `report --json > file` on a full disk exited 0 with a cut report.
BOOST_AUTO_TEST_CASE(standard_output_that_cannot_be_written_exits_1) {
  TempDir dir;
  const std::string trace = write_trace(dir);
  const std::string full = dir.file("full");
  BOOST_TEST_REQUIRE(::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)) == 0);
  const std::vector<std::vector<std::string>> commands = {
      {"info", trace}, {"report", trace}, {"report", "--json", trace},
      {"export", "--chrome", "-", trace}};
  for (const auto& args : commands) {
    BOOST_TEST_CONTEXT(args[0] << " " << args[1]) {
      std::string cmd = "exec timeout -k 5 " + std::to_string(kLimitS) + " " +
                        shell_quote(STALLSCOPE_CLI);
      for (const auto& a : args) cmd += " " + shell_quote(a);
      cmd += " >" + shell_quote(full) + " 2>" + shell_quote(dir.file("err"));
      const int status = std::system(cmd.c_str());
      BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 1), "status " << status);
      BOOST_TEST(has(slurp(dir.file("err")), "cannot write standard output"),
                 slurp(dir.file("err")));
    }
  }
}

// A thread named "\e]0;PWNED\a\e[2J" retitled and cleared the terminal of
// whoever ran `info` or `report` on its trace.
BOOST_AUTO_TEST_CASE(names_from_a_trace_never_reach_the_terminal_raw) {
  TempDir dir;
  const std::string trace = dir.file("evil.sst");
  write_trainer_trace(trace, R"({"host":"node\u001b]0;HOST\u0007\u00ff","rank":0})",
                      "\x1b]0;PWNED\a\x1b[2J\xff", 6, 10000000);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"info", trace}, {"report", trace}, {"report", "--color", trace}}) {
    BOOST_TEST_CONTEXT(args[0] << " " << args[1]) {
      const CliResult r = run_cli(dir, args, "", kLimitS);
      BOOST_TEST(r.exit_code == 0, r.err);
      BOOST_TEST(!has(r.out, "\x1b]"), r.out);  // no OSC (retitle)
      BOOST_TEST(!has(r.out, "\x1b[2J"));       // no clear screen
      BOOST_TEST(!has(r.out, "\a"));
      BOOST_TEST(!has(r.err, "\x1b]"), r.err);
    }
  }
  const CliResult info = run_cli(dir, {"info", trace}, "", kLimitS);
  BOOST_TEST(has(info.out, "\\x1b]0;PWNED\\x07\\x1b[2J\\xff"), info.out);
  const CliResult color = run_cli(dir, {"report", "--color", trace}, "", kLimitS);
  BOOST_TEST(has(color.out, "\x1b[1m"), color.out);  // stallscope's own colours stay
}

// A .json.gz of `spaces` bytes of blanks inside a trace's traceEvents
// array: deflate packs it about 1000-fold.
std::string write_blank_trace_gz(const TempDir& dir, const std::string& name, size_t spaces) {
  const std::string path = dir.file(name);
  gzFile g = gzopen(path.c_str(), "wb1");  // fast: the test's time goes here
  gzputs(g, "{\"traceEvents\":[");
  const std::string blanks(1 << 20, ' ');
  for (size_t done = 0; done < spaces; done += blanks.size())
    gzwrite(g, blanks.data(), static_cast<unsigned>(std::min(blanks.size(), spaces - done)));
  gzputs(g, "]}");
  gzclose(g);
  return path;
}

// A 5 MB gzip inflated to 5 GiB of memory (23 s) before the 4 GiB refusal.
BOOST_AUTO_TEST_CASE(a_gzip_bomb_is_refused_while_it_inflates) {
  TempDir dir;
  const std::string bomb = write_blank_trace_gz(dir, "bomb.json.gz", size_t{512} << 20);
  const CliResult r = run_cli_measured(dir, {"report", bomb});
  BOOST_TEST(r.exit_code == 1, r.err);
  BOOST_TEST(has(r.err, bomb + ": inflates "), r.err);
  BOOST_TEST(has(r.err, "-fold ("), r.err);
  BOOST_TEST(has(r.err, "a profiler trace at most 100-fold"), r.err);
  BOOST_TEST(r.max_rss_kb < 256 * 1024, r.max_rss_kb << " KiB");
}

BOOST_AUTO_TEST_CASE(decompressed_json_past_the_limit_names_the_flag) {
  TempDir dir;
  const std::string gz = write_blank_trace_gz(dir, "big.json.gz", size_t{3} << 20);
  const CliResult r = run_cli(dir, {"report", "--max-json-mb", "1", gz}, "", kLimitS);
  BOOST_TEST(r.exit_code == 1, r.err);
  BOOST_TEST(has(r.err, "passes the limit of 1 MiB (raise it with --max-json-mb"), r.err);
  const CliResult bad = run_cli(dir, {"report", "--max-json-mb", "0", gz}, "", kLimitS);
  BOOST_TEST(bad.exit_code == 2, bad.err);
}

BOOST_AUTO_TEST_SUITE_END()
