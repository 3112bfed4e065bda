// The small chunks the index pass loads whole: strings, tracks, metadata,
// attachments and the End chunk. Every length is checked against its
// container with 64-bit arithmetic before use.
#include <cstring>

#include "stallscope/internal/bounded_json.hpp"
#include "reader/reader_impl.hpp"

namespace stallscope::reader {

namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

uint64_t pad8_64(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

}  // namespace

void StringTable::add(uint32_t id, std::string_view s) {
  if (id == 0) return;
  ++count_;
  // Dense ids stay in the vector; its growth is bounded by the entries seen.
  if (id < dense_.size() || id <= 2 * count_ + 1024) {
    if (id >= dense_.size()) {
      dense_.resize(size_t{id} + 1);
      dense_set_.resize(size_t{id} + 1);
    }
    dense_[id].assign(s);
    dense_set_[id] = true;
    return;
  }
  sparse_[id].assign(s);
}

std::string_view StringTable::get(uint32_t id) const noexcept {
  if (id < dense_.size()) return dense_set_[id] ? std::string_view(dense_[id]) : std::string_view();
  auto it = sparse_.find(id);
  return it == sparse_.end() ? std::string_view() : std::string_view(it->second);
}

bool TraceReader::Impl::parse_strings(std::span<const uint8_t> p, uint64_t off) {
  size_t pos = 0;
  while (p.size() - pos >= sizeof(format::StringEntry)) {
    const auto e = load<format::StringEntry>(p.data() + pos);
    const uint64_t room = p.size() - pos - sizeof e;
    if (e.bytes > room)
      return fail(off + pos, "string entry of " + std::to_string(e.bytes) +
                                 " bytes runs past its chunk (" + std::to_string(room) + " left)");
    const auto* text = reinterpret_cast<const char*>(p.data() + pos + sizeof e);
    strings.add(e.id, std::string_view(text, e.bytes));
    pos += sizeof e + static_cast<size_t>(std::min<uint64_t>(pad8_64(e.bytes), room));
  }
  return true;
}

bool TraceReader::Impl::parse_tracks(std::span<const uint8_t> p, uint64_t off) {
  const size_t n = p.size() / sizeof(format::TrackEntry);
  for (size_t i = 0; i < n; ++i) {
    const auto t = load<format::TrackEntry>(p.data() + i * sizeof(format::TrackEntry));
    if (t.track_id == 0 && t.type == 0) continue;  // padding
    TrackInfo info{t.track_id, static_cast<format::TrackType>(t.type),
                   t.tid,      t.device,
                   t.name_id,  t.parent_track};
    auto [it, added] = track_index.emplace(t.track_id, tracks.size());
    if (added) {
      tracks.push_back(info);
    } else {
      tracks[it->second] = info;  // a later entry for the same id wins
    }
  }
  const size_t rest = p.size() % sizeof(format::TrackEntry);
  for (size_t i = p.size() - rest; i < p.size(); ++i) {
    if (p[i] != 0) return fail(off + i, "track table entry runs past its chunk");
  }
  return true;
}

// Checked before the payload is read: metadata and attachments stay in
// memory as long as the reader, so each file gets a budget for them.
bool TraceReader::Impl::admit_kept_chunk(format::ChunkType type, uint64_t off, uint32_t bytes) {
  const bool meta = type == format::ChunkType::kMetadata;
  uint64_t& used = meta ? metadata_bytes : attachment_bytes;
  const uint64_t limit = meta ? kMaxMetadataBytes : kMaxAttachmentBytes;
  if (bytes <= limit - used) {
    used += bytes;
    return true;
  }
  const std::string what = std::string(meta ? "metadata" : "attachment") + " chunk at offset " +
                           std::to_string(off) + " is " + std::to_string(bytes) + " bytes";
  const std::string budget = std::to_string(limit >> 20) + " MiB limit";
  if (meta) {
    warn(what + ", over the " + budget + " for a file's metadata" +
         (used > 0 ? " (" + std::to_string(used) + " bytes before it)" : "") + "; skipped unread");
  } else if (skipped_attachments++ == 0) {
    warn(what + ": with the " + std::to_string(used) + " bytes before it, over the " + budget +
         " for a file's attachments; skipped unread (later ones past the limit too)");
  }
  return false;
}

void TraceReader::Impl::parse_metadata(std::span<const uint8_t> p, uint64_t off) {
  size_t n = p.size();
  while (n > 0 && (p[n - 1] == 0 || p[n - 1] == ' ' || p[n - 1] == '\n')) --n;
  const std::string_view text(reinterpret_cast<const char*>(p.data()), n);
  const std::string where = "metadata chunk at offset " + std::to_string(off);
  std::string why;
  auto j = stallscope::detail::parse_bounded_json(
      text, &why, {kMaxMetadataBytes, stallscope::detail::kMaxJsonDepth});
  if (j.is_discarded()) {
    warn(where + " " + why + "; ignored");
    return;
  }
  if (!j.is_object()) {
    warn(where + " is not a JSON object; ignored");
    return;
  }
  // Moved, not copied: later keys win, as update() would make them.
  for (auto& item : j.items()) metadata[item.key()] = std::move(item.value());
  metadata_text = metadata.dump();
}

bool TraceReader::Impl::parse_attachment(std::span<const uint8_t> p, uint64_t off) {
  if (p.size() < sizeof(format::AttachmentHeader))
    return fail(off, "attachment chunk too small for its header");
  const auto h = load<format::AttachmentHeader>(p.data());
  const uint64_t room = p.size() - sizeof h;
  if (h.name_bytes > room || h.data_bytes > room - h.name_bytes)
    return fail(off, "attachment name (" + std::to_string(h.name_bytes) + " bytes) and data (" +
                         std::to_string(h.data_bytes) + " bytes) run past their chunk (" +
                         std::to_string(room) + " bytes)");
  const auto* base = reinterpret_cast<const char*>(p.data() + sizeof h);
  attachments.push_back({std::string(base, h.name_bytes),
                         std::string(base + h.name_bytes, static_cast<size_t>(h.data_bytes))});
  return true;
}

bool TraceReader::Impl::parse_end(std::span<const uint8_t> p, uint64_t off) {
  static_assert(sizeof(format::EndSummary) == 32 && sizeof(format::TrackTotals) == 32);
  if (p.size() < sizeof(format::EndSummary))
    return fail(off, "End chunk too small for its summary");
  end.summary = load<format::EndSummary>(p.data());
  const uint64_t room = (p.size() - sizeof(format::EndSummary)) / sizeof(format::TrackTotals);
  if (end.summary.n_tracks > room)
    return fail(off, "End chunk claims " + std::to_string(end.summary.n_tracks) +
                         " track totals but holds " + std::to_string(room));
  end.tracks.resize(end.summary.n_tracks);
  for (uint32_t i = 0; i < end.summary.n_tracks; ++i) {
    end.tracks[i] = load<format::TrackTotals>(p.data() + sizeof(format::EndSummary) +
                                              size_t{i} * sizeof(format::TrackTotals));
  }
  end.present = true;
  return true;
}

// ---------------------------------------------------------------- identity --

namespace {

const nlohmann::json* find_first(const nlohmann::json& j, std::initializer_list<const char*> ptrs) {
  for (const char* p : ptrs) {
    const nlohmann::json::json_pointer ptr(p);
    if (j.contains(ptr)) return &j.at(ptr);
  }
  return nullptr;
}

}  // namespace

// Host and rank may sit at the top level or under "identity"/"process"
// (docs/trace-format.md, "Metadata").
void TraceReader::Impl::extract_identity() {
  try {
    if (const auto* h = find_first(metadata, {"/host", "/identity/host", "/process/host"});
        h != nullptr && h->is_string())
      host = h->get<std::string>();
    const auto* r = find_first(metadata, {"/rank", "/identity/rank", "/process/rank"});
    if (r != nullptr && r->is_object() && r->contains("rank")) r = &r->at("rank");
    if (r != nullptr && r->is_number_integer()) rank = r->get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    warn(std::string("metadata identity unreadable: ") + e.what());
  }
}

std::optional<std::string> TraceReader::metadata_value(std::string_view pointer) const {
  try {
    const nlohmann::json::json_pointer ptr{std::string(pointer)};
    if (!impl_->metadata.contains(ptr)) return std::nullopt;
    const auto& v = impl_->metadata.at(ptr);
    return v.is_string() ? v.get<std::string>() : v.dump();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a malformed pointer names nothing
  }
}

double Event::number() const noexcept {
  if ((flags & format::kValueDouble) != 0) {
    double d;
    std::memcpy(&d, &value, sizeof d);
    return d;
  }
  return static_cast<double>(value);
}

}  // namespace stallscope::reader
