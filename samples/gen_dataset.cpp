// gen_dataset — writes a synthetic training dataset whose samples cost real
// CPU to decode: each sample is a zstd frame of a partly compressible payload
// (like an encoded image), stored one file per sample or back to back in
// shards with an index in the loader's shard format (docs/loader.md).
//
//   gen_dataset --out DIR [--samples N] [--size-kb K] [--dist fixed|uniform|lognormal]
//               [--spread F] [--format shards|files] [--shard-mb M] [--level L]
//               [--compressibility F] [--seed S] [--quiet]
//
// --size-kb is the mean decoded size; the stored (compressed) size is about
// (1 - compressibility) of it. Output: DIR/index (shards) or DIR/list and
// DIR/files/… (files), and DIR/dataset.json (counts, bytes, the options).
// Samples trainer reads either with --data DIR. Same seed, same bytes.
// Progress goes to stderr for datasets of more than 64 MiB.
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cmath>
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
  uint64_t samples = 1000;
  double size_kb = 64, spread = 0.5, compressibility = 0.6;
  std::string dist = "lognormal", format = "shards";
  uint64_t shard_mb = 64, seed = 1;
  int level = 3;
  bool quiet = false;
};

uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double unit(uint64_t& state) { return (mix(state++) >> 11) * (1.0 / 9007199254740992.0); }

// Decoded size of sample i: reproducible from (seed, i), at least 64 bytes.
uint64_t sample_size(const Options& o, uint64_t i) {
  uint64_t st = o.seed * 0x100000001b3ull ^ (i * 0x9e37u);
  const double mean = o.size_kb * 1024;
  double v = mean;
  if (o.dist == "uniform") v = mean * (1 - o.spread + 2 * o.spread * unit(st));
  else if (o.dist == "lognormal") {
    const double u1 = std::max(unit(st), 1e-12), u2 = unit(st);
    const double z = std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    v = mean * std::exp(o.spread * z - o.spread * o.spread / 2);
  }
  return std::max<uint64_t>(64, static_cast<uint64_t>(v));
}

// Runs of repeated bytes (compressible) between random words, mixed so that
// about `compressibility` of the payload compresses away.
void fill(std::vector<char>& buf, const Options& o, uint64_t i) {
  uint64_t st = mix(o.seed ^ (i << 20));
  size_t at = 0;
  while (at < buf.size()) {
    const size_t run = 16 + mix(st++) % 240;
    const bool repeat = unit(st) < o.compressibility;
    const uint64_t word = mix(st++);
    for (size_t k = 0; k < run && at < buf.size(); ++k, ++at)
      buf[at] = static_cast<char>(repeat ? (word & 0xff) : (mix(st + k) >> 17));
    st += run;
  }
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto take = [&]() { ++i; return v; };
    if (a == "--quiet") o.quiet = true;
    else if (!v) return false;
    else if (a == "--out") o.out = take();
    else if (a == "--samples") o.samples = std::strtoull(take(), nullptr, 10);
    else if (a == "--size-kb") o.size_kb = std::strtod(take(), nullptr);
    else if (a == "--dist") o.dist = take();
    else if (a == "--spread") o.spread = std::strtod(take(), nullptr);
    else if (a == "--format") o.format = take();
    else if (a == "--shard-mb") o.shard_mb = std::strtoull(take(), nullptr, 10);
    else if (a == "--level") o.level = std::atoi(take());
    else if (a == "--compressibility") o.compressibility = std::strtod(take(), nullptr);
    else if (a == "--seed") o.seed = std::strtoull(take(), nullptr, 10);
    else return false;
  }
  const bool dist_ok = o.dist == "fixed" || o.dist == "uniform" || o.dist == "lognormal";
  const bool fmt_ok = o.format == "shards" || o.format == "files";
  return !o.out.empty() && o.samples > 0 && o.size_kb > 0 && dist_ok && fmt_ok &&
         o.compressibility >= 0 && o.compressibility <= 1 && o.shard_mb > 0;
}

class Writer {
 public:
  explicit Writer(const Options& o) : o_(o) {
    namespace fs = std::filesystem;
    fs::create_directories(o.format == "files" ? fs::path(o.out) / "files" : fs::path(o.out));
    index_.open(o.out + (o.format == "files" ? "/list" : "/index"));
    if (o.format == "shards") index_ << "stallscope-shards 1\n";
  }
  bool put(uint64_t i, const char* data, size_t n) {
    char name[64];
    if (o_.format == "files") {
      std::snprintf(name, sizeof name, "files/sample-%07llu.zst", static_cast<unsigned long long>(i));
      std::ofstream f(o_.out + "/" + name, std::ios::binary);
      f.write(data, static_cast<std::streamsize>(n));
      index_ << name << "\n";
      return static_cast<bool>(f);
    }
    if (!shard_.is_open() || (shard_at_ > 0 && shard_at_ + n > (o_.shard_mb << 20))) {
      shard_.close();
      std::snprintf(shard_name_, sizeof shard_name_, "shard-%05llu.bin",
                    static_cast<unsigned long long>(shard_no_++));
      shard_.open(o_.out + "/" + shard_name_, std::ios::binary);
      shard_at_ = 0;
    }
    shard_.write(data, static_cast<std::streamsize>(n));
    index_ << shard_name_ << " " << shard_at_ << " " << n << "\n";
    shard_at_ += n;
    return static_cast<bool>(shard_);
  }
  bool close() {
    shard_.close();
    index_.close();
    return static_cast<bool>(index_) && !shard_.fail();
  }

 private:
  const Options& o_;
  std::ofstream index_, shard_;
  char shard_name_[32] = {};
  uint64_t shard_no_ = 0, shard_at_ = 0;
};

void write_summary(const Options& o, uint64_t raw, uint64_t stored) {
  std::ofstream j(o.out + "/dataset.json");
  j << "{\"samples\":" << o.samples << ",\"decoded_bytes\":" << raw << ",\"stored_bytes\":" << stored
    << ",\"size_kb\":" << o.size_kb << ",\"dist\":\"" << o.dist << "\",\"spread\":" << o.spread
    << ",\"format\":\"" << o.format << "\",\"compressibility\":" << o.compressibility
    << ",\"level\":" << o.level << ",\"seed\":" << o.seed << ",\"codec\":\"zstd\"}\n";
}

void progress(const Options& o, uint64_t i, uint64_t raw, uint64_t expected, int& shown) {
  if (o.quiet || expected < (64ull << 20)) return;
  const int pct = static_cast<int>(100.0 * (i + 1) / o.samples);
  if (pct / 5 == shown / 5 && i + 1 != o.samples) return;
  shown = pct;
  const bool tty = isatty(2) != 0;
  std::fprintf(stderr, "%sgen_dataset: %3d %%  %llu/%llu samples, %.1f MiB decoded%s", tty ? "\r" : "", pct,
               static_cast<unsigned long long>(i + 1), static_cast<unsigned long long>(o.samples),
               raw / 1048576.0, tty ? "" : "\n");
  if (tty && i + 1 == o.samples) std::fputc('\n', stderr);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: gen_dataset --out DIR [--samples N] [--size-kb K] "
                 "[--dist fixed|uniform|lognormal] [--spread F] [--format shards|files] "
                 "[--shard-mb M] [--level L] [--compressibility 0..1] [--seed S] [--quiet]\n");
    return 2;
  }
  Writer w(o);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  std::vector<char> raw, packed;
  uint64_t raw_total = 0, stored_total = 0;
  const uint64_t expected = static_cast<uint64_t>(o.samples * o.size_kb * 1024);
  int shown = -5;
  bool ok = true;
  for (uint64_t i = 0; i < o.samples && ok; ++i) {
    raw.resize(sample_size(o, i));
    fill(raw, o, i);
    packed.resize(ZSTD_compressBound(raw.size()));
    const size_t n = ZSTD_compressCCtx(cctx, packed.data(), packed.size(), raw.data(), raw.size(), o.level);
    if (ZSTD_isError(n)) {
      std::fprintf(stderr, "gen_dataset: sample %llu: zstd: %s\n",
                   static_cast<unsigned long long>(i), ZSTD_getErrorName(n));
      ok = false;
      break;
    }
    ok = w.put(i, packed.data(), n);
    raw_total += raw.size();
    stored_total += n;
    progress(o, i, raw_total, expected, shown);
  }
  ZSTD_freeCCtx(cctx);
  if (!w.close() || !ok) {
    std::fprintf(stderr, "gen_dataset: writing %s failed: %s\n", o.out.c_str(), std::strerror(errno));
    return 1;
  }
  write_summary(o, raw_total, stored_total);
  if (!o.quiet)
    std::printf("gen_dataset: %llu samples in %s (%s), %.1f MiB decoded, %.1f MiB stored\n",
                static_cast<unsigned long long>(o.samples), o.out.c_str(), o.format.c_str(),
                raw_total / 1048576.0, stored_total / 1048576.0);
  return 0;
}
