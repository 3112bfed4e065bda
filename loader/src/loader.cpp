// The loader's public side: construction (backend, device, probe, memory),
// epochs, and the consumer's next_batch() with its data_wait span.
#include "stallscope/loader/loader.hpp"

#include <errno.h>

#include <algorithm>

#include "loader_impl.hpp"
#include "log.hpp"
#include "stallscope/loader/probe.hpp"

namespace stallscope::loader {

namespace {

constexpr double kProbeBudgetS = 0.5;

std::string quoted(std::string_view v) {
  std::string s = "\"";
  for (const char c : v) {
    if (c == '"' || c == '\\') s += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) s += c;
  }
  return s + '"';
}

std::string_view toggle_name(Toggle t) noexcept {
  return t == Toggle::kOn ? "on" : t == Toggle::kOff ? "off" : "auto";
}

}  // namespace

Loader::Loader(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}

Loader::~Loader() {
  if (!impl_) return;
  impl_->stop_epoch();
  impl_->free_slots();
}

int Loader::create(Dataset ds, const Config& cfg, Pipeline p, std::unique_ptr<Loader>* out,
                   std::string* error, Sys& sys) noexcept {
  try {
    if (int rc = validate(cfg, error); rc != 0) return rc;
    auto impl = std::make_unique<Impl>(std::move(ds), cfg, std::move(p), sys);
    if (int rc = impl->setup(error); rc != 0) return rc;
    out->reset(new Loader(std::move(impl)));
    return 0;
  } catch (...) {
    if (error) *error = "loader: out of memory";
    return -ENOMEM;
  }
}

int Loader::Impl::setup(std::string* err) noexcept {
  std::string probe_json;
  if (cfg.probe) {
    ProbeReport rep;
    if (run_storage_probe(ds, cfg.backend, cfg.read_size, kProbeBudgetS, sys, &rep) == 0)
      probe_json = rep.json();
  }
  reader = make_reader(cfg.backend, {cfg.queue_depth, cfg.pread_threads}, sys, &backend_why);
  if (!reader) {
    if (err) *err = backend_why;
    return -ENODEV;
  }
  STALLSCOPE_LOADER_NOTE_ONCE("%s", backend_why.c_str());
  device = make_device(cfg.device, {cfg.pinned_gbps, cfg.pageable_gbps}, &device_why);
  if (cfg.device != DeviceKind::kNone && device && device->emulated() &&
      cfg.device != DeviceKind::kEmulated)
    STALLSCOPE_LOADER_NOTE_ONCE("%s", device_why.c_str());
  if (pipe.transform)  // without one, batches need no pool (batch_process.cpp)
    pool = std::make_unique<detail::PreprocessPool>(cfg.workers, cfg.group_size);
  files = std::make_unique<detail::FileTable>(ds, sys, cfg.direct);
  if (int rc = alloc_slots(); rc != 0) {
    if (err) *err = "loader: cannot allocate batch memory";
    return rc;
  }
  attach_facts(probe_json);
  return 0;
}

uint64_t Loader::Impl::max_batch_bytes(bool direct_slack) const noexcept {
  std::vector<uint64_t> sizes;
  sizes.reserve(ds.size());
  for (const auto& s : ds.samples())
    sizes.push_back(direct_slack ? detail::direct_span(s.offset, s.length) + detail::kDirectAlign
                                 : s.length);
  const size_t k = std::min<size_t>(cfg.batch_size, sizes.size());
  std::partial_sort(sizes.begin(), sizes.begin() + k, sizes.end(), std::greater<>());
  uint64_t sum = 0;
  for (size_t i = 0; i < k; ++i) sum += sizes[i];
  return std::max<uint64_t>(sum, 4096);
}

int Loader::Impl::alloc_slots() noexcept {
  slots = std::vector<Slot>(cfg.prefetch_batches + 1);  // Slot holds atomics: not movable
  const uint64_t arena = max_batch_bytes(true);
  const uint64_t staging = pipe.staging_bytes ? pipe.staging_bytes : max_batch_bytes(false);
  const Pages pages = cfg.huge_pages ? Pages::kHuge : Pages::kBase;
  std::vector<BufferRange> ranges;
  try {
    arenas.assign(slots.size(), {});
    free_arenas.reserve(slots.size());
  } catch (...) {
    return -ENOMEM;
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& s = slots[i];
    Arena& a = arenas[i];
    a.base = static_cast<std::byte*>(alloc_locked(arena, false, &a.locked, pages));
    a.bytes = arena;
    s.arena = static_cast<uint32_t>(i);
    s.staging = device ? device->alloc_host(staging, cfg.pinned) : HostBuffer{};
    if (!device) {
      s.staging.data = alloc_locked(staging, cfg.pinned, &s.staging.pinned, pages);
      s.staging.bytes = staging;
    }
    if (a.base == nullptr || s.staging.data == nullptr) return -ENOMEM;
    ranges.push_back({a.base, arena});
  }
  reset_arenas();
  if (const int rc = reader->register_buffers(ranges); rc < 0 && rc != -EOPNOTSUPP)
    STALLSCOPE_LOADER_NOTE_ONCE("registered buffers refused (%s): unregistered reads",
                                rc == -ENOMEM ? "ENOMEM, memlock limit" : "error");
  return 0;
}

void Loader::Impl::free_slots() noexcept {
  reader.reset();  // unregisters the arenas with the ring
  for (Arena& a : arenas) free_locked(a.base, a.bytes, a.locked);
  arenas.clear();
  free_arenas.clear();
  for (Slot& s : slots) {
    if (device)
      device->free_host(s.staging);
    else
      free_locked(s.staging.data, s.staging.bytes, s.staging.pinned);
  }
  slots.clear();
}

void Loader::Impl::reset_arenas() noexcept {
  free_arenas.clear();  // capacity reserved for every arena: no allocation
  for (size_t i = arenas.size(); i-- > 0;) free_arenas.push_back(static_cast<uint32_t>(i));
}

// The "loader.config" attachment (fields in docs/loader.md).
std::string Loader::Impl::config_json() const {
  const auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  return "{\"backend\":" + quoted(reader->name()) + ",\"backend_reason\":" + quoted(backend_why) +
         ",\"device\":" + quoted(device ? device->name() : "none") +
         ",\"pool\":" + b(pool != nullptr) + ",\"workers\":" + std::to_string(cfg.workers) +
         ",\"group_size\":" + std::to_string(cfg.group_size) +
         ",\"queue_depth\":" + std::to_string(cfg.queue_depth) +
         ",\"prefetch_batches\":" + std::to_string(cfg.prefetch_batches) +
         ",\"batch_size\":" + std::to_string(cfg.batch_size) +
         ",\"read_size\":" + std::to_string(cfg.read_size) +
         ",\"direct\":" + quoted(toggle_name(cfg.direct)) + ",\"pinned\":" + b(cfg.pinned) +
         ",\"huge_pages\":" + b(cfg.huge_pages) +
         ",\"error_policy\":" + quoted(cfg.on_error == ErrorPolicy::kSkip ? "skip" : "fail") + "}";
}

void Loader::Impl::attach_facts(const std::string& probe_json) noexcept {
  try {
    if (!probe_json.empty()) attach("loader.probe", probe_json);
    if (device) attach("device.model", device->model_json());
    attach("loader.config", config_json());
  } catch (...) {
  }
}

void Loader::Impl::stop_epoch() noexcept {
  {
    std::lock_guard lock(mu);
    stop = stopped = true;
  }
  io_cv.notify_all();
  ready_cv.notify_all();
  if (io.joinable()) io.join();
  cancel.store(true);
  wake_prep();
  if (prep.joinable()) prep.join();
  for (Slot& s : slots)  // copies still running read the staging memory
    if (device && s.batch.ready && s.batch.copy.seq != 0) device->wait(s.batch.copy);
}

int Loader::start_epoch(uint64_t epoch) noexcept {
  Impl& L = *impl_;
  L.stop_epoch();
  try {
    L.plan =
        make_epoch_plan(L.ds, {L.cfg.seed, epoch, L.cfg.rank, L.cfg.world_size, L.cfg.shuffle});
  } catch (...) {
    return -ENOMEM;
  }
  const size_t n = L.plan.samples.size();
  L.n_batches =
      L.cfg.drop_last ? n / L.cfg.batch_size : (n + L.cfg.batch_size - 1) / L.cfg.batch_size;
  L.epoch = epoch;
  L.past_io.reads += L.io_stats.reads;
  L.past_io.bytes += L.io_stats.bytes;
  L.past_io.retries += L.io_stats.retries;
  L.past_io.short_reads += L.io_stats.short_reads;
  L.past_io.stray += L.io_stats.stray;
  L.past_io.hit_bytes += L.io_stats.hit_bytes;
  L.past_io.miss_bytes += L.io_stats.miss_bytes;
  L.io_stats = {};
  L.released = L.next = 0;
  L.reset_arenas();  // the batches of the last epoch are gone
  L.holding = L.stop = L.stopped = false;
  L.cancel.store(false);
  L.ready_count = 0;
  L.error.clear();
  L.prep_next_index = 0;
  // Without a pool the I/O thread runs the serial stages unless the last
  // epoch showed them slower than a hand-off.
  L.io_runs_stages = !L.pool && !L.serial_cost.too_slow_for_io();
  L.prep_handoff = !L.pool && !L.io_runs_stages;
  L.prep_io_done = false;
  for (Slot& s : L.slots) {
    s.batch.ready = false;
    s.batch.read_seq.store(0);
  }
  try {
    L.prep = std::thread([&L] { L.run_prep(); });
    L.io = std::thread([&L] { L.run_io(); });
  } catch (...) {
    L.stop_epoch();
    return -EAGAIN;
  }
  return 0;
}

}  // namespace stallscope::loader
