// A slowfs mount that is always unmounted: RAII, fusermount3 -u, then a
// lazy umount if that fails (also when the test fails or throws).
#pragma once

#include <string>
#include <vector>

namespace scenarios {

class SlowMount {
 public:
  // Mounts `src` on a new directory `parent`/`name`; ok() false when FUSE
  // is unavailable here (/dev/fuse missing, mount refused), with why().
  SlowMount(const std::string& slowfs, const std::string& src, const std::string& parent,
            const std::vector<std::string>& flags, const std::string& name = "mnt");
  ~SlowMount();
  SlowMount(const SlowMount&) = delete;
  SlowMount& operator=(const SlowMount&) = delete;
  bool ok() const { return mounted_; }
  const std::string& path() const { return path_; }
  const std::string& why() const { return why_; }

 private:
  std::string path_, why_;
  bool mounted_ = false;
};

}  // namespace scenarios
