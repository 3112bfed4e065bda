// gen_shards — writes a synthetic dataset for the loader's tests, benchmarks
// and scenarios: shard files plus an index (docs/loader.md, "Shard format"),
// or one file per sample, and a manifest of content hashes to check that
// every delivered sample is byte-exact.
//
//   gen_shards --out DIR [--samples N] [--min-size B] [--max-size B]
//              [--shard-size B] [--seed S] [--files]
//
// Writes DIR/shard-00000.bin …, DIR/index (the shard index) and
// DIR/manifest ("<sample> <length> <fnv1a64 hex>" per line); with --files,
// DIR/files/sample-0000000.bin … and DIR/list instead of shards and index.
// Sizes are drawn uniformly in [min, max]; content is a pure function of
// (seed, sample, position), so a rerun writes identical bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct Options {
  std::string out;
  uint64_t samples = 1000, min_size = 1, max_size = 65536, shard_size = 64u << 20, seed = 1;
  bool files = false;
};

uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void fill(std::vector<char>& buf, uint64_t seed, uint64_t sample) {
  for (size_t j = 0; j < buf.size(); j += 8) {
    const uint64_t v = mix(seed * 0x100000001b3ull ^ (sample << 24) ^ (j >> 3));
    std::memcpy(buf.data() + j, &v, std::min<size_t>(8, buf.size() - j));
  }
}

uint64_t fnv1a(const std::vector<char>& b) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : b) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto num = [&](uint64_t& v) { return i + 1 < argc && (v = std::strtoull(argv[++i], nullptr, 0), true); };
    if (a == "--out" && i + 1 < argc) o.out = argv[++i];
    else if (a == "--files") o.files = true;
    else if (!((a == "--samples" && num(o.samples)) || (a == "--min-size" && num(o.min_size)) ||
               (a == "--max-size" && num(o.max_size)) ||
               (a == "--shard-size" && num(o.shard_size)) || (a == "--seed" && num(o.seed))))
      return false;
  }
  return !o.out.empty() && o.min_size <= o.max_size;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: gen_shards --out DIR [--samples N] [--min-size B] "
                         "[--max-size B] [--shard-size B] [--seed S] [--files]\n");
    return 2;
  }
  namespace fs = std::filesystem;
  fs::create_directories(o.files ? fs::path(o.out) / "files" : fs::path(o.out));
  std::ofstream manifest(o.out + "/manifest");
  std::ofstream index(o.out + (o.files ? "/list" : "/index"));
  if (!o.files) index << "stallscope-shards 1\n";
  std::ofstream shard;
  uint64_t shard_no = 0, shard_at = 0;
  std::vector<char> buf;
  for (uint64_t i = 0; i < o.samples; ++i) {
    const uint64_t span = o.max_size - o.min_size + 1;
    buf.resize(o.min_size + (span == 0 ? 0 : mix(o.seed ^ (i * 31 + 7)) % span));
    fill(buf, o.seed, i);
    char name[64];
    if (o.files) {
      std::snprintf(name, sizeof name, "files/sample-%07llu.bin", static_cast<unsigned long long>(i));
      std::ofstream(o.out + "/" + name, std::ios::binary).write(buf.data(), static_cast<std::streamsize>(buf.size()));
      index << name << "\n";
    } else {
      if (!shard.is_open() || (shard_at > 0 && shard_at + buf.size() > o.shard_size)) {
        shard.close();
        std::snprintf(name, sizeof name, "shard-%05llu.bin", static_cast<unsigned long long>(shard_no++));
        shard.open(o.out + "/" + name, std::ios::binary);
        shard_at = 0;
      }
      std::snprintf(name, sizeof name, "shard-%05llu.bin", static_cast<unsigned long long>(shard_no - 1));
      shard.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      index << name << " " << shard_at << " " << buf.size() << "\n";
      shard_at += buf.size();
    }
    char line[96];
    std::snprintf(line, sizeof line, "%llu %zu %016llx\n", static_cast<unsigned long long>(i),
                  buf.size(), static_cast<unsigned long long>(fnv1a(buf)));
    manifest << line;
  }
  return manifest && index ? 0 : 1;
}
