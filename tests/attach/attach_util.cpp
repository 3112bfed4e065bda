#include "attach_util.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "../keep_traces.hpp"

extern char** environ;

namespace attach {

TempDir::TempDir() {
  char tmpl[] = "/tmp/stallscope-attach-XXXXXX";
  const char* p = ::mkdtemp(tmpl);
  path_ = p != nullptr ? p : "/tmp";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (path_ == "/tmp") return;
  stallscope_tests::keep_traces(path_, "attach");
  std::filesystem::remove_all(path_, ec);
}

bool have_shim() {
  const std::string shim = ATTACH_PRELOAD;
  return !shim.empty() && exists(shim);
}

std::string preload_lib() { return have_shim() ? ATTACH_PRELOAD : ATTACH_TRACE_LIB; }

pid_t start(const std::vector<std::string>& argv, const std::string& log,
            const std::vector<std::string>& extra_env) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.push_back("STALLSCOPE_PRELOAD_LIB=" + preload_lib());
  // extra_env replaces what is set (getenv finds the first of duplicates).
  for (const auto& kv : extra_env) {
    const std::string name = kv.substr(0, kv.find('=') + 1);
    std::erase_if(env, [&](const std::string& v) { return v.rfind(name, 0) == 0; });
    env.push_back(kv);
  }
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
  }
  std::vector<char*> a, e;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  ::execve(a[0], a.data(), e.data());
  ::_exit(126);
}

int wait_for_exit(pid_t pid, double timeout_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < until) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return -1;
}

int exit_code(int st) {
  if (st < 0) return -1;
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  return 128 + WTERMSIG(st);
}

int run(const std::vector<std::string>& argv, const std::string& log, double timeout_s,
        const std::vector<std::string>& extra_env) {
  return exit_code(wait_for_exit(start(argv, log, extra_env), timeout_s));
}

bool eventually(const std::function<bool()>& pred, double timeout_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

double mtime(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) * 1e-9;
}

nlohmann::json report_json(const std::string& run_dir) {
  const std::string text = slurp(run_dir + "/report.json");
  return nlohmann::json::parse(text, nullptr, false);
}

namespace {

std::vector<std::string> progress_texts(const std::string& run_dir) {
  std::vector<std::string> out;
  const std::string dir = run_dir + "/progress";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name[0] == '.' || name.find(".tmp") != std::string::npos) continue;
    out.push_back(slurp(dir + "/" + name));
  }
  ::closedir(d);
  return out;
}

}  // namespace

uint64_t progress_sum(const std::string& run_dir, const std::string& field) {
  uint64_t sum = 0;
  for (const auto& t : progress_texts(run_dir)) {
    const size_t at = t.find(" " + field + "=");
    if (at != std::string::npos)
      sum += std::strtoull(t.c_str() + at + field.size() + 2, nullptr, 10);
  }
  return sum;
}

bool progress_capture_all(const std::string& run_dir, bool on) {
  const auto texts = progress_texts(run_dir);
  if (texts.empty()) return false;
  for (const auto& t : texts)
    if (t.find(on ? "capture=on" : "capture=off") == std::string::npos) return false;
  return true;
}

}  // namespace attach
