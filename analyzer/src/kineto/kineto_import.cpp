// Files and directories in: which paths hold PyTorch profiler traces (by
// content), and the import of each file as one rank.
#include <algorithm>
#include <filesystem>
#include <functional>

#include "kineto/kineto_internal.hpp"

namespace stallscope::analyzer::kineto {

namespace {

namespace fs = std::filesystem;

struct Found {
  std::vector<std::string> files;  // profiler traces
  bool rest = false;               // the path also (or only) holds other inputs
};

Found scan_dir(const std::string& dir) {
  Found f;
  std::error_code ec;
  bool own = false;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string p = it->path().string();
    if (it->path().extension() == ".sst")
      own = true;
    else if (it->path().filename().string()[0] != '.' && sniff(p))
      f.files.push_back(p);
  }
  std::sort(f.files.begin(), f.files.end());
  // stallscope's reader lists the .sst files, or says why there are none.
  f.rest = own || f.files.empty() || ec;
  return f;
}

Found scan(const std::string& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!ec && fs::is_directory(st)) return scan_dir(path);
  Found f;
  if (!ec && fs::is_regular_file(st) && sniff(path))
    f.files.push_back(path);
  else
    f.rest = true;
  return f;
}

void for_each_import(const std::vector<std::string>& paths, std::vector<std::string>& errors,
                     std::vector<std::string>& rest, uint64_t max_bytes,
                     const std::function<void(ImportedRank&&)>& fn) {
  for (const auto& p : paths) {
    Found f = scan(p);
    if (f.rest) rest.push_back(p);
    for (const auto& file : f.files) {
      try {
        fn(import_file(file, max_bytes));
      } catch (const ImportError& e) {
        errors.push_back(e.what());
      }
    }
  }
}

}  // namespace

std::string_view schema_name(Schema s) noexcept {
  switch (s) {
    case Schema::kKineto:
      return "Kineto";
    case Schema::kLegacy:
      return "Kineto (older schema)";
    case Schema::kAutograd:
      return "autograd profiler";
  }
  return "?";
}

namespace {

std::string source_note(const ImportedRank& imp) {
  const ImportStats& s = imp.stats;
  std::string n =
      "PyTorch profiler trace (" + std::string(schema_name(imp.schema)) +
      "): " + std::to_string(s.events) + " events; " + std::to_string(s.steps) +
      " ProfilerStep#N steps; " + std::to_string(s.data_waits) +
      " data waits from enumerate(DataLoader)#...__next__ (detection: profiler annotation); " +
      std::to_string(s.kernels) + " kernels, " + std::to_string(s.collectives) + " NCCL kernels, " +
      std::to_string(s.copies) + " copies/memsets, " + std::to_string(s.api_calls) +
      " CUDA API calls, " + std::to_string(s.syncs) + " syncs";
  if (imp.rank >= 0)
    n += "; rank " + std::to_string(imp.rank) + " of " + std::to_string(imp.world_size);
  return n;
}

ImportedRank import_source(Source& src, const std::string& name) {
  ImportedRank out;
  out.file = name;
  Mapper m(out);
  parse_trace(src, name, m, out);
  m.finish();
  // What the analysis needs of the import beside the events.
  ImportFacts& f = out.trace.imported;
  f.summary = source_note(out);
  f.warnings = out.warnings;
  f.profiler_steps = out.stats.steps;
  // Every wait in _SingleProcessDataLoaderIter.__next__: the DataLoader had
  // no workers and loaded on the trainer thread.
  f.single_process_loader =
      out.stats.single_process_waits > 0 && out.stats.single_process_waits == out.stats.data_waits;
  f.step_source = out.step_source;
  f.step_detail = out.step_detail;
  return out;
}

}  // namespace

ImportedRank import_json(std::string_view json, const std::string& name) {
  const auto src = memory_source(json);
  return import_source(*src, name);
}

ImportedRank import_file(const std::string& path, uint64_t max_bytes) {
  const auto src = open_source(path, max_bytes, false);
  return import_source(*src, path);
}

Imported import_paths(const std::vector<std::string>& paths) {
  Imported out;
  for_each_import(paths, out.errors, out.rest, kDefaultMaxJsonBytes,
                  [&](ImportedRank&& r) { out.ranks.push_back(std::move(r)); });
  return out;
}

std::vector<std::string> import_each(const std::vector<std::string>& paths, uint64_t max_bytes,
                                     std::vector<std::string>& errors,
                                     const std::function<void(ImportedRank&&)>& fn) {
  std::vector<std::string> rest;
  for_each_import(paths, errors, rest, max_bytes, fn);
  return rest;
}

}  // namespace stallscope::analyzer::kineto
