// Claiming a run directory on disk. Many ranks of one job start at the same
// moment and may share the directory (a shared file system), so the claim
// must be race-free: run.json is written to a private temp file and then
// published with a rename that refuses to replace (or a hard link, which
// refuses too). Whoever loses the race reads the winner's run.json, which is
// always complete, and compares keys.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "stallscope/internal/proc_text.hpp"
#include "stallscope/internal/run_identity.hpp"

namespace stallscope::sys {
namespace {

constexpr int kMaxSuffix = 100;

// mkdir -p: 0, or an errno; ENOTDIR (with *in_way set to it) when something
// that is not a directory holds the path or one of its parents.
// Concurrent creators are fine: EEXIST on a directory is ok.
int make_dirs(const std::string& path, std::string* in_way) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0777) == 0) continue;
    const int err = errno;
    struct stat st {};
    if (::stat(prefix.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    if (err == EEXIST || err == ENOTDIR) {
      *in_way = prefix;
      return ENOTDIR;
    }
    return err;
  }
  return 0;
}

const char* kind_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "something else";
  if (S_ISREG(st.st_mode)) return "a regular file";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "something else";
}

// "STALLSCOPE_OUT=/dev/full" or "run directory x" (derived from the job).
std::string named(const RunDirChoice& choice, const std::string& path) {
  if (choice.source == "STALLSCOPE_OUT" || choice.source.rfind("--", 0) == 0)
    return choice.source + "=" + path;
  return "run directory " + path + " (from " + choice.source + ")";
}

// Only printable ASCII in keys, so that what we write (JSON) compares
// byte-for-byte with what a racer reads back.
std::string printable(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '_';
  }
  return out;
}

// The key in `dir`/run.json: nullopt when there is none yet; "" when the
// file exists but is unreadable or not ours to understand (never reused).
std::optional<std::string> read_claim_key(const std::string& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0 && errno == ENOENT) return std::nullopt;
  std::string text;
  if (!read_text_file(file, text, 64 * 1024)) return std::string();
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("key") || !j["key"].is_string()) return std::string();
  return j["key"].get<std::string>();
}

std::string temp_name(const std::string& dir) {
  static std::atomic<unsigned> counter{0};
  return dir + "/.run.json." + std::to_string(::getpid()) + "." +
         std::to_string(::syscall(SYS_gettid)) + "." + std::to_string(counter++);
}

int write_file(const std::string& path, const std::string& body) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  size_t done = 0;
  int err = 0;
  while (done < body.size() && err == 0) {
    const ssize_t n = ::write(fd, body.data() + done, body.size() - done);
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

// Moves tmp to target unless target exists: 0, EEXIST, or another errno.
int publish_no_replace(const std::string& tmp, const std::string& target) {
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) == 0) {
    return 0;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) return errno;
  // File systems without RENAME_NOREPLACE (NFS, some FUSE): link refuses too.
  const int rc = ::link(tmp.c_str(), target.c_str()) == 0 ? 0 : errno;
  ::unlink(tmp.c_str());
  return rc;
}

enum class Claim { kOurs, kOther, kError };

Claim try_claim(const std::string& dir, const std::string& key, const std::string& body,
                std::string* error) {
  const std::string target = dir + "/run.json";
  if (const auto existing = read_claim_key(target)) {
    return *existing == key ? Claim::kOurs : Claim::kOther;
  }
  const std::string tmp = temp_name(dir);
  int rc = write_file(tmp, body);
  if (rc == 0) rc = publish_no_replace(tmp, target);
  ::unlink(tmp.c_str());  // still there after a lost race or a failure
  if (rc == 0) return Claim::kOurs;
  if (rc == EEXIST) {  // lost the race: the winner's file is complete
    const auto winner = read_claim_key(target);
    return winner && *winner == key ? Claim::kOurs : Claim::kOther;
  }
  if (error != nullptr) *error = target + ": " + std::strerror(rc);
  return Claim::kError;
}

std::string candidate(const std::string& base, int n) {
  return n == 1 ? base : base + "-" + std::to_string(n);
}

// `path` against the working directory, "." components and repeated
// slashes dropped (".." kept: a symlink may stand before it). "" when the
// working directory cannot be had.
std::string absolute_of(const std::string& path) {
  std::string joined;
  if (!path.empty() && path[0] == '/') {
    joined = path;
  } else {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) == nullptr) return {};
    joined = std::string(cwd) + "/" + path;
  }
  std::string out;
  size_t at = 0;
  while (at < joined.size()) {
    const size_t next = std::min(joined.find('/', at), joined.size());
    const std::string_view part(joined.data() + at, next - at);
    if (!part.empty() && part != ".") (out += '/') += part;
    at = next + 1;
  }
  return out.empty() ? "/" : out;
}

}  // namespace

std::string claim_run_dir(const RunDirChoice& choice, const std::string& key, std::string* error) {
  try {
    if (choice.path.empty()) {
      if (error != nullptr) *error = "run directory: empty path";
      return {};
    }
    // Absolute once, here: the path is exported to children, and a process
    // that changes directory (Hydra's outputs/…) must not take its
    // children, or its own control file, elsewhere (RELIABILITY.md 43).
    const std::string base = absolute_of(choice.path);
    if (base.empty()) {
      if (error != nullptr)
        *error = named(choice, choice.path) + ": relative, and the working directory is unknown: " +
                 std::strerror(errno);
      return {};
    }
    const std::string k = printable(key);
    const std::string body = nlohmann::json{{"id", printable(choice.id)}, {"key", k}}.dump() + "\n";
    for (int n = 1; n <= kMaxSuffix; ++n) {
      const std::string dir = candidate(base, n);
      std::string in_way;
      if (const int rc = make_dirs(dir, &in_way); rc == ENOTDIR && n > 1) {
        continue;  // a file in the way of a suffixed name: that name is taken
      } else if (rc == ENOTDIR) {
        // Never silently moved elsewhere: the path named must be a directory.
        if (error != nullptr)
          *error = named(choice, base) + ": not a directory (" + in_way + " is " +
                   kind_of(in_way) + ")";
        return {};
      } else if (rc != 0) {
        if (error != nullptr)
          *error = named(choice, dir) + ": cannot create directory: " + std::strerror(rc);
        return {};
      }
      const Claim c = try_claim(dir, k, body, error);
      if (c == Claim::kOurs) return dir;
      if (c == Claim::kError) return {};
    }
    if (error != nullptr) {
      *error = base + " and " + base + "-2 … -" + std::to_string(kMaxSuffix) +
               " all hold other runs (run.json with another key)";
    }
  } catch (const std::exception& e) {  // allocation failure: degrade, never throw
    if (error != nullptr) *error = std::string("run directory: ") + e.what();
  }
  return {};
}

}  // namespace stallscope::sys
