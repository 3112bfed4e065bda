#include "convert.hpp"

namespace stallscope::analyzer {

namespace {
constexpr uint64_t kReportEvery = 64u << 20;  // bytes
}  // namespace

FileConverter::FileConverter(const reader::TraceReader& r, RankScope& scope, uint32_t proc)
    : r_(r), scope_(scope), proc_(proc) {
  for (const auto& t : r.tracks()) track_of(t.track_id);
}

uint32_t FileConverter::add_track(uint32_t file_track) {
  auto [it, fresh] = tracks_.try_emplace(file_track, 0);
  if (!fresh) return it->second;
  TrackDesc d;
  d.proc = proc_;
  if (const reader::TrackInfo* t = r_.track(file_track)) {
    d.type = t->type;
    d.tid = t->tid;
    d.device = t->device;
    d.name = std::string(r_.string(t->name_id));
  }
  const uint32_t rank_track = scope_.track(std::move(d));
  if (file_track < kDenseTracks) {
    if (file_track >= dense_.size()) dense_.resize(file_track + 1, 0);
    dense_[file_track] = rank_track + 1;
  }
  it->second = rank_track;
  return rank_track;
}

uint32_t FileConverter::add_name(uint32_t file_name) {
  if (file_name == 0 || file_name >= kMaxStringIds) return 0;
  if (file_name >= names_.size()) names_.resize(file_name + 1, 0);
  uint32_t& slot = names_[file_name];
  if (slot == 0) slot = scope_.name(r_.string(file_name)) + 1;
  return slot - 1;
}

// A path's string id past kMaxStringIds is looked up each time (a trace
// with over a million strings is rare; the scope's map answers).
uint32_t FileConverter::add_file(uint32_t file_name) {
  if (file_name == 0) return 0;
  const uint32_t id = scope_.file(r_.string(file_name));
  if (file_name < kMaxStringIds) {
    if (file_name >= files_.size()) files_.resize(file_name + 1, 0);
    files_[file_name] = id + 1;
  }
  return id;
}

Progress::Progress(std::function<void(uint64_t, uint64_t)> fn,
                   const std::vector<std::unique_ptr<reader::TraceReader>>& readers)
    : fn_(std::move(fn)) {
  for (const auto& r : readers) total_ += r->file_bytes();
}

void Progress::tick(const reader::TraceReader& r, uint64_t offset) const {
  if (!fn_) return;
  std::lock_guard lock(mu_);
  uint64_t& at = at_[&r];
  if (offset > at) {
    done_ += offset - at;
    at = offset;
  }
  if (done_ - last_report_ >= kReportEvery || done_ >= total_) {
    last_report_ = done_;
    fn_(done_, total_);
  }
}

void Progress::finish() const {
  if (!fn_ || total_ == 0) return;  // nothing was read: nothing to say
  std::lock_guard lock(mu_);
  if (last_report_ >= total_) return;  // already said
  done_ = last_report_ = total_;
  fn_(total_, total_);
}

}  // namespace stallscope::analyzer
