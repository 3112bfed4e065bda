#include "mount.hpp"

#include <sys/vfs.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace scenarios {

namespace {
constexpr long kFuseMagic = 0x65735546;

bool is_fuse(const std::string& p) {
  struct statfs st {};
  return statfs(p.c_str(), &st) == 0 && st.f_type == kFuseMagic;
}
}  // namespace

SlowMount::SlowMount(const std::string& slowfs, const std::string& src, const std::string& parent,
                     const std::vector<std::string>& flags, const std::string& name) {
  if (slowfs.empty()) {
    why_ = "slowfs was not built (libfuse3 missing)";
    return;
  }
  if (access("/dev/fuse", R_OK | W_OK) != 0) {
    why_ = "/dev/fuse is not available";
    return;
  }
  path_ = parent + "/" + name;
  std::filesystem::create_directories(path_);
  std::string cmd = "'" + slowfs + "' '" + src + "' '" + path_ + "'";
  for (const auto& f : flags) cmd += " '" + f + "'";
  if (std::system((cmd + " 2>&1").c_str()) != 0) {
    why_ = "slowfs mount refused: " + cmd;
    return;
  }
  for (int i = 0; i < 50 && !is_fuse(path_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  mounted_ = is_fuse(path_);
  if (!mounted_) why_ = "slowfs did not mount " + path_;
}

SlowMount::~SlowMount() {
  if (!mounted_) return;
  if (std::system(("fusermount3 -u '" + path_ + "' 2>/dev/null").c_str()) != 0)
    static_cast<void>(std::system(("umount -l '" + path_ + "' 2>/dev/null").c_str()));
}

}  // namespace scenarios
