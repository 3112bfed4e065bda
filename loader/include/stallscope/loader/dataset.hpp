// stallscope loader — datasets and epoch plans.
//
// A Dataset is a list of files and a list of samples, each sample a byte
// range (offset, length) of one file. Three sources: every regular file of a
// directory (sorted, one sample per file), an explicit list of paths (one
// sample per file), or shard files with an index (docs/loader.md, "Shard
// format"). An EpochPlan is this rank's samples of one epoch, shuffled by a
// seeded generator that gives the same order on every machine.
//
//   Dataset ds;
//   std::string err;
//   if (Dataset::from_shards("/data/index.sst-idx", &ds, &err) != 0) die(err);
//   EpochPlan plan = make_epoch_plan(ds, {.seed = 7, .epoch = 0, .rank = 0, .world_size = 2});
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stallscope/loader/export.hpp"

namespace stallscope::loader {

struct FileEntry {
  std::string path;
  uint64_t size = 0;  // size when the dataset was listed
};

struct SampleRef {
  uint32_t file = 0;  // index into Dataset::files()
  uint64_t offset = 0;
  uint64_t length = 0;
};

class Dataset {
 public:
  // Every regular file under `dir` (recursive, sorted by path), one sample each.
  STALLSCOPE_LOADER_API static int from_directory(const std::string& dir, Dataset* out,
                                                  std::string* error) noexcept;
  // Paths (absolute, or relative to the current directory), one sample each.
  STALLSCOPE_LOADER_API static int from_paths(const std::vector<std::string>& paths, Dataset* out,
                                              std::string* error) noexcept;
  // A text file of paths, one a line (relative ones are relative to the list).
  STALLSCOPE_LOADER_API static int from_file_list(const std::string& list, Dataset* out,
                                                  std::string* error) noexcept;
  // A shard index (format in docs/loader.md). Records are checked against the
  // shard sizes; an error names the index file and line.
  STALLSCOPE_LOADER_API static int from_shards(const std::string& index, Dataset* out,
                                               std::string* error) noexcept;

  const std::vector<FileEntry>& files() const noexcept { return files_; }
  const std::vector<SampleRef>& samples() const noexcept { return samples_; }
  size_t size() const noexcept { return samples_.size(); }
  STALLSCOPE_LOADER_API uint64_t total_bytes() const noexcept;

  // Builders (tests, generators).
  STALLSCOPE_LOADER_API uint32_t add_file(std::string path, uint64_t size);
  void add_sample(SampleRef s) { samples_.push_back(s); }

 private:
  std::vector<FileEntry> files_;
  std::vector<SampleRef> samples_;
};

struct EpochSpec {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint32_t rank = 0;
  uint32_t world_size = 1;
  bool shuffle = true;
};

// This rank's sample indices for one epoch, in delivery order. Every rank
// gets ceil(n / world_size) samples: the shuffled order is padded by
// repeating its start (as PyTorch's DistributedSampler does) and sample i
// goes to rank i % world_size.
struct EpochPlan {
  uint64_t epoch = 0;
  std::vector<uint64_t> samples;
};
STALLSCOPE_LOADER_API EpochPlan make_epoch_plan(const Dataset& ds, const EpochSpec& spec);

// The permutation of [0, n) used for (seed, epoch): Fisher-Yates driven by
// splitmix64, identical on every platform and standard library.
STALLSCOPE_LOADER_API std::vector<uint64_t> shuffled_indices(uint64_t n, uint64_t seed,
                                                             uint64_t epoch);

}  // namespace stallscope::loader
