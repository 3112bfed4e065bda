// The process's memory map (/proc/self/maps) as a sorted index, so that a
// page-fault address can be turned into a file and an offset in it. Only
// the fault sampler's thread uses it; nothing here is on a traced path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stallscope::preload {

struct Mapping {
  uint64_t start = 0, end = 0;  // [start, end) virtual addresses
  uint64_t offset = 0;          // file offset of `start`
  bool exec = false;            // program or library code, not data
  std::string path;             // absolute; empty for anonymous memory
};

// Parses the text of /proc/<pid>/maps, in address order. Lines that do not
// parse are skipped; " (deleted)" is dropped from a path; pseudo names
// ("[heap]", "[vdso]", …) count as anonymous.
std::vector<Mapping> parse_maps(std::string_view text);

// Reads /proc/self/maps with raw syscalls (the shim's own wrappers stay
// out of it). False when it cannot be read.
bool read_self_maps(std::string* out) noexcept;

// The mapping that holds `addr`, or nullptr. `maps` sorted by start.
const Mapping* find_mapping(const std::vector<Mapping>& maps, uint64_t addr) noexcept;

}  // namespace stallscope::preload
