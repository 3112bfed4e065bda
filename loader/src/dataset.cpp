// Dataset listing: directories, file lists and shard indexes.
#include "stallscope/loader/dataset.hpp"

#include <errno.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace stallscope::loader {

namespace fs = std::filesystem;

namespace {

int fail(std::string* error, std::string text, int rc = -EINVAL) {
  if (error) *error = std::move(text);
  return rc;
}

// Adds `path` as one whole-file sample.
int add_whole_file(Dataset& ds, const std::string& path, std::string* error) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return fail(error, path + ": " + ec.message(), -ec.value());
  const uint32_t f = ds.add_file(path, size);
  ds.add_sample({f, 0, size});
  return 0;
}

std::string resolve(const fs::path& base_dir, const std::string& p) {
  const fs::path path(p);
  return path.is_absolute() ? p : (base_dir / path).lexically_normal().string();
}

}  // namespace

uint32_t Dataset::add_file(std::string path, uint64_t size) {
  files_.push_back({std::move(path), size});
  return static_cast<uint32_t>(files_.size() - 1);
}

uint64_t Dataset::total_bytes() const noexcept {
  uint64_t n = 0;
  for (const auto& s : samples_) n += s.length;
  return n;
}

int Dataset::from_directory(const std::string& dir, Dataset* out, std::string* error) noexcept {
  try {
    std::error_code ec;
    std::vector<std::string> paths;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_regular_file(ec)) paths.push_back(it->path().string());
    if (ec) return fail(error, dir + ": " + ec.message(), -ec.value());
    std::sort(paths.begin(), paths.end());
    return from_paths(paths, out, error);
  } catch (...) {
    return fail(error, dir + ": out of memory", -ENOMEM);
  }
}

int Dataset::from_paths(const std::vector<std::string>& paths, Dataset* out,
                        std::string* error) noexcept {
  try {
    Dataset ds;
    for (const auto& p : paths)
      if (int rc = add_whole_file(ds, p, error); rc != 0) return rc;
    *out = std::move(ds);
    return 0;
  } catch (...) {
    return fail(error, "dataset: out of memory", -ENOMEM);
  }
}

int Dataset::from_file_list(const std::string& list, Dataset* out, std::string* error) noexcept {
  try {
    std::ifstream in(list);
    if (!in) return fail(error, list + ": cannot open file list", -ENOENT);
    const fs::path base = fs::path(list).parent_path();
    std::vector<std::string> paths;
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#') paths.push_back(resolve(base, line));
    return from_paths(paths, out, error);
  } catch (...) {
    return fail(error, list + ": out of memory", -ENOMEM);
  }
}

namespace {

// One "<shard> <offset> <length>" line: adds the sample, or names the line.
int add_shard_record(Dataset& ds, std::vector<std::string>& names, const fs::path& base,
                     const std::string& where, const std::string& line, std::string* error) {
  std::istringstream ls(line);
  std::string shard;
  uint64_t off = 0, len = 0;
  if (!(ls >> shard >> off >> len))
    return fail(error, where + ": expected '<shard> <offset> <length>'");
  uint32_t f = 0;
  auto it = std::find(names.begin(), names.end(), shard);
  if (it == names.end()) {
    std::error_code ec;
    const std::string path = resolve(base, shard);
    const auto size = fs::file_size(path, ec);
    if (ec) return fail(error, where + ": shard " + path + ": " + ec.message(), -ec.value());
    f = ds.add_file(path, size);
    names.push_back(shard);
  } else {
    f = static_cast<uint32_t>(it - names.begin());
  }
  const uint64_t size = ds.files()[f].size;
  if (off > size || len > size - off)
    return fail(error, where + ": record [" + std::to_string(off) + ", +" + std::to_string(len) +
                           ") ends past the end of " + ds.files()[f].path + " (" +
                           std::to_string(size) + " bytes)");
  ds.add_sample({f, off, len});
  return 0;
}

}  // namespace

int Dataset::from_shards(const std::string& index, Dataset* out, std::string* error) noexcept {
  try {
    std::ifstream in(index);
    if (!in) return fail(error, index + ": cannot open shard index", -ENOENT);
    std::string line;
    if (!std::getline(in, line) || line != "stallscope-shards 1")
      return fail(error, index + ":1: expected the header 'stallscope-shards 1'");
    Dataset ds;
    std::vector<std::string> names;  // shard names as written, by file index
    const fs::path base = fs::path(index).parent_path();
    for (size_t n = 2; std::getline(in, line); ++n) {
      if (line.empty() || line[0] == '#') continue;
      const std::string where = index + ":" + std::to_string(n);
      if (int rc = add_shard_record(ds, names, base, where, line, error); rc != 0) return rc;
    }
    *out = std::move(ds);
    return 0;
  } catch (...) {
    return fail(error, index + ": out of memory", -ENOMEM);
  }
}

}  // namespace stallscope::loader
