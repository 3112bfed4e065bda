#include "mapped_files.hpp"

#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "classify.hpp"
#include "proc_maps.hpp"
#include "stallscope/format.hpp"
#include "stallscope/trace.h"

namespace stallscope::preload {

namespace {
constexpr size_t kMaxFiles = 1u << 16;  // distinct paths remembered (names stay interned)
}  // namespace

bool MappedFiles::resolve(uint64_t addr, int64_t now_ns, FileHit* out) noexcept {
  const Entry* e = now_ns - read_at_ns_ > kMaxAgeNs ? nullptr : find(addr);
  if (e == nullptr && now_ns - read_at_ns_ >= kMinRefreshNs) {
    if (!refresh(now_ns)) return false;
    e = find(addr);
  }
  if (e == nullptr || e->file == 0) return false;
  static const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t page_addr = addr & ~(page - 1);
  out->file = e->file;
  out->tier = e->tier;
  out->offset = e->offset + (page_addr > e->start ? page_addr - e->start : 0);
  return true;
}

bool MappedFiles::refresh(int64_t now_ns) noexcept {
  read_at_ns_ = now_ns;
  if (!read_self_maps(&text_)) return false;
  try {
    const std::vector<Mapping> maps = parse_maps(text_);
    // A file with an executable mapping is a program or a library: faults
    // on its read-only data are loading code, not reading data.
    std::unordered_set<std::string_view> code;
    for (const Mapping& m : maps) {
      if (m.exec && !m.path.empty()) code.insert(m.path);
    }
    entries_.clear();
    entries_.reserve(maps.size());
    if (files_.size() > kMaxFiles) files_.clear();
    for (const Mapping& m : maps) {
      Entry e{m.start, m.end, m.offset, 0, 0};
      if (!m.path.empty() && code.count(m.path) == 0) {
        const FileInfo f = file_info(m.path);
        if (f.storage) {
          e.file = f.id;
          e.tier = f.tier;
        }
      }
      entries_.push_back(e);
    }
  } catch (...) {  // out of memory: resolve nothing until the next refresh
    entries_.clear();
    return false;
  }
  return true;
}

// Same tier rule as a descriptor's (classify.cpp): the filesystem's magic.
// A file that is gone (deleted, statfs refused) is still storage, tier unknown.
MappedFiles::FileInfo MappedFiles::file_info(const std::string& path) {
  auto it = files_.find(path);
  if (it != files_.end()) return it->second;
  FileInfo f{0, static_cast<uint8_t>(format::Tier::kUnknown), true};
  struct statfs sf {};
  if (::syscall(SYS_statfs, path.c_str(), &sf) == 0) {
    f.storage = storage_tier_of_magic(static_cast<uint64_t>(sf.f_type), &f.tier);
  }
  if (f.storage) f.id = stallscope_name_intern(path.c_str());
  if (f.id == 0) f.storage = false;
  files_.emplace(path, f);
  return f;
}

const MappedFiles::Entry* MappedFiles::find(uint64_t addr) const noexcept {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                             [](uint64_t a, const Entry& e) { return a < e.start; });
  if (it == entries_.begin()) return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

}  // namespace stallscope::preload
