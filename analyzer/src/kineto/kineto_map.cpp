// PyTorch profiler events -> the analyzer's events (docs/kineto-import.md
// "Mapping"): ProfilerStep#N -> step, enumerate(DataLoader)#…__next__ ->
// data wait, kernels -> compute (nccl* -> collective), memcpy/memset ->
// copies, CUDA runtime/driver calls -> launch or blocking sync.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <functional>

#include "kineto/kineto_internal.hpp"
#include "stallscope/nccl_bus.hpp"

namespace stallscope::analyzer::kineto {

namespace {

constexpr size_t kMaxRangeNames = 4096;

struct CatName {
  std::string_view name;
  Cat cat;
  bool lower;
};
constexpr CatName kCats[] = {
    {"cpu_op", Cat::kHostOp, true},
    {"Operator", Cat::kHostOp, false},
    {"user_annotation", Cat::kAnnotation, true},
    {"gpu_user_annotation", Cat::kGpuAnnotation, true},
    {"kernel", Cat::kKernel, true},
    {"Kernel", Cat::kKernel, false},
    {"gpu_memcpy", Cat::kMemcpy, true},
    {"Memcpy", Cat::kMemcpy, false},
    {"gpu_memset", Cat::kMemset, true},
    {"Memset", Cat::kMemset, false},
    {"cuda_runtime", Cat::kRuntime, true},
    {"Runtime", Cat::kRuntime, false},
    {"cuda_driver", Cat::kDriver, true},
    {"Driver", Cat::kDriver, false},
    {"cuda_sync", Cat::kSync, true},
    {"python_function", Cat::kPython, true},
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Bytes per element of a c10 ScalarType name ("Float", "BFloat16" …); 0 unknown.
uint64_t dtype_bytes(std::string_view d) {
  struct T {
    std::string_view n;
    uint64_t b;
  };
  static constexpr T kTypes[] = {{"Float", 4},       {"Double", 8},       {"Half", 2},
                                 {"BFloat16", 2},    {"Long", 8},         {"Int", 4},
                                 {"Short", 2},       {"Char", 1},         {"Byte", 1},
                                 {"Bool", 1},        {"ComplexFloat", 8}, {"ComplexDouble", 16},
                                 {"ComplexHalf", 4}, {"QInt8", 1},        {"QUInt8", 1},
                                 {"QInt32", 4},      {"Float8_e5m2", 1},  {"Float8_e4m3fn", 1},
                                 {"UInt16", 2},      {"UInt32", 4},       {"UInt64", 8}};
  for (const T& t : kTypes)
    if (t.n == d) return t.b;
  if (d.starts_with("Float8")) return 1;
  return 0;
}

// NCCL operation from "Collective name" or the kernel name.
format::CollOp coll_op(std::string_view s) {
  std::string n;
  for (char c : s)
    if (c != '_') n.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  using format::CollOp;
  if (n.find("allreduce") != std::string::npos) return CollOp::kAllReduce;
  if (n.find("allgather") != std::string::npos) return CollOp::kAllGather;
  if (n.find("reducescatter") != std::string::npos) return CollOp::kReduceScatter;
  if (n.find("alltoall") != std::string::npos) return CollOp::kAllToAll;
  if (n.find("broadcast") != std::string::npos) return CollOp::kBroadcast;
  if (n.find("barrier") != std::string::npos) return CollOp::kBarrier;
  if (n.find("sendrecv") != std::string::npos || n.find("send") != std::string::npos)
    return CollOp::kSend;
  if (n.find("recv") != std::string::npos) return CollOp::kRecv;
  if (n.find("reduce") != std::string::npos) return CollOp::kReduce;
  return CollOp::kUnknown;
}

format::MemKind mem_kind(std::string_view s) {
  using format::MemKind;
  if (s == "Pageable" || s == "Pagable")
    return MemKind::kPageable;  // older Kineto spelled it "Pagable"
  if (s == "Pinned") return MemKind::kPinned;
  if (s == "Device" || s == "Array" || s == "Device Static") return MemKind::kDevice;
  if (s == "Managed" || s == "Managed Static") return MemKind::kManaged;
  return MemKind::kUnknown;
}

// "Memcpy HtoD (Pageable -> Device)": kind, source and destination memory.
Kind memcpy_kind(std::string_view name, format::MemKind* src, format::MemKind* dst) {
  std::string_view rest = name.starts_with("Memcpy ") ? name.substr(7) : name;
  const std::string_view dir = rest.substr(0, rest.find(' '));
  const size_t open = rest.find('('), arrow = rest.find(" -> "), close = rest.rfind(')');
  if (open != std::string_view::npos && arrow != std::string_view::npos &&
      close != std::string_view::npos && open < arrow && arrow < close) {
    *src = mem_kind(rest.substr(open + 1, arrow - open - 1));
    *dst = mem_kind(rest.substr(arrow + 4, close - arrow - 4));
  }
  if (dir == "HtoD") return Kind::kH2D;
  if (dir == "DtoH") return Kind::kD2H;
  return Kind::kD2D;  // DtoD, HtoH, PtoP, arrays: other device work
}

uint64_t step_number(std::string_view name) {
  uint64_t n = 0;
  const size_t hash = name.find('#');
  if (hash != std::string_view::npos)
    std::from_chars(name.data() + hash + 1, name.data() + name.size(), n);
  return n;
}

}  // namespace

std::string_view Raw::view() const {
  if (p == nullptr) return {};
  const char* q = p;
  while (*q != '"') q += (*q == '\\' && q[1] != '\0') ? 2 : 1;
  return {p, static_cast<size_t>(q - p)};
}

bool Raw::starts_with(std::string_view s) const {
  // The JSON text is padded past its end, and a shorter string stops at its quote.
  return p != nullptr && std::memcmp(p, s.data(), s.size()) == 0;
}

Cat classify_cat(std::string_view c, bool* lower) {
  for (const CatName& n : kCats)
    if (n.name == c) {
      *lower = n.lower;
      return n.cat;
    }
  *lower = !c.empty() && std::islower(static_cast<unsigned char>(c[0]));
  return Cat::kOther;
}

Mapper::Mapper(ImportedRank& out) : out_(out), t_(out.trace), scope_(out.trace) {
  t_.procs.emplace_back();
  t_.procs[0].file = out.file;
  t_.origin = TraceOrigin::kProfilerImport;
}

void Mapper::skip(const RawEvent& e, const char* why) {
  if (out_.stats.skipped++ == 0)
    out_.stats.first_skip = std::string(why) + " (event at byte " + std::to_string(e.offset) + ")";
}

void Mapper::add_skipped(uint64_t offset, const char* why) {
  RawEvent e;
  e.offset = offset;
  ++out_.stats.events;
  skip(e, why);
}

// Names outlive the parser's window only through here.
std::string_view Mapper::intern(std::string_view s) {
  if (auto it = names_.find(s); it != names_.end()) return *it;
  if (names_.size() >= kMaxNames) s = "(other)";
  return *names_.emplace(s).first;
}

void Mapper::add(const RawEvent& e) {
  ++out_.stats.events;
  if (e.ph != 'X') {
    if (e.ph == 0)
      skip(e, "no \"ph\"");
    else if (e.ph == '?')
      skip(e, "not an object");
    return;  // metadata, instants, flows, counters: not needed
  }
  if (e.bad_time != nullptr)
    return skip(e, e.bad_time[0] == 't' ? "\"ts\" out of range" : "\"dur\" out of range");
  if (!e.has_ts) return skip(e, "no \"ts\"");
  if (!e.has_dur) return skip(e, "no \"dur\"");
  if (e.dur_ns < 0) return skip(e, "negative \"dur\"");
  if (e.has_cat) {
    saw_cat_ = true;
    (e.lower_cat ? saw_lower_ : saw_upper_) = true;
  }
  switch (e.cat) {
    case Cat::kNone:
    case Cat::kHostOp:
    case Cat::kAnnotation:
    case Cat::kPython:
      host_event(e);
      break;
    case Cat::kKernel:
    case Cat::kMemcpy:
    case Cat::kMemset:
      device_event(e);
      break;
    case Cat::kRuntime:
    case Cat::kDriver:
      api_event(e);
      break;
    case Cat::kSync:
      if (e.args.correlation > 0) sync_corr_.insert(e.args.correlation);
      break;
    default:
      break;
  }
}

uint32_t Mapper::host_track(const RawEvent& e) {
  uint64_t pid = static_cast<uint32_t>(e.pid.num);
  if (e.pid.is_string) {
    auto [it, fresh] = string_ids_.try_emplace(intern(e.pid.str), string_ids_.size() + 1);
    pid = (uint64_t{1} << 31) | it->second;
  } else if (t_.procs[0].pid == 0 && e.pid.present) {
    t_.procs[0].pid = static_cast<uint32_t>(e.pid.num);
  }
  const uint32_t tid = e.tid.is_string ? 0 : static_cast<uint32_t>(e.tid.num);
  auto [it, fresh] = host_tracks_.try_emplace((pid << 32) | tid, 0);
  if (fresh) {
    it->second = scope_.add_track(
        {0, TrackType::kThread, tid, 0, e.tid.is_string ? std::string(e.tid.str) : ""});
  }
  return it->second;
}

uint32_t Mapper::device_track(const RawEvent& e) {
  int64_t device = e.args.device >= 0 ? e.args.device : (e.pid.is_string ? 0 : e.pid.num);
  int64_t stream = e.args.stream;
  if (stream < 0 && e.tid.is_string && e.tid.str.starts_with("stream "))
    std::from_chars(e.tid.str.data() + 7, e.tid.str.data() + e.tid.str.size(), stream);
  if (stream < 0) stream = e.tid.is_string ? 0 : e.tid.num;
  const auto dev = static_cast<uint32_t>(device), str = static_cast<uint32_t>(stream);
  auto [it, fresh] = device_tracks_.try_emplace((uint64_t{dev} << 32) | str, 0);
  if (fresh) {
    it->second = scope_.add_track({0, TrackType::kGpuStream, str, dev, "stream " + std::to_string(str)});
  }
  return it->second;
}

void Mapper::push(Ev ev) {
  t_.events.push_back(ev);
  ++out_.stats.kept;
}

void Mapper::host_event(const RawEvent& e) {
  if (!e.name) return;
  Ev ev = Ev::span(Kind::kStep, 0, e.ts_ns, e.ts_ns + e.dur_ns);
  if (e.name.starts_with("ProfilerStep#")) {
    ev.corr = step_number(e.name.view());
    ev.step().source = format::StepSource::kRange;
    ++out_.stats.steps;
    ev.track = host_track(e);
    return push(ev);
  }
  // Every other host range may delimit steps when none are marked.
  const uint32_t track = host_track(e);
  host_recs_.push_back({e.ts_ns, e.ts_ns + e.dur_ns, intern(e.name.view()), track, e.cat});
  if (e.name.starts_with("enumerate(DataLoader)#")) {
    if (!ends_with(e.name.view(), "__next__")) return;
    ev.kind = Kind::kDataWait;
    ev.corr = ev.work().batch = ++waits_;
    ++out_.stats.data_waits;
    if (e.name.view().find("_SingleProcessDataLoaderIter") != std::string_view::npos)
      ++out_.stats.single_process_waits;
  } else if (e.cat == Cat::kAnnotation) {
    // Other record_function ranges: candidates for --step-pattern.
    uint32_t name = scope_.known_name(e.name.view());
    if (name == 0) {
      if (range_names_ >= kMaxRangeNames) return;
      ++range_names_;
      name = scope_.name(e.name.view());
    }
    ev.kind = Kind::kRange;
    ev.name = name;
  } else {
    return;  // operators and Python frames: only step inference reads them
  }
  ev.track = track;
  push(ev);
}

void Mapper::device_event(const RawEvent& e) {
  Ev ev = Ev::span(Kind::kKernel, device_track(e), e.ts_ns, e.ts_ns + e.dur_ns);
  if (e.cat == Cat::kKernel) {
    if (e.name.starts_with("nccl")) {
      ev.kind = Kind::kCollective;
      Collective& c = ev.coll();
      const uint64_t size = e.args.dtype ? dtype_bytes(e.args.dtype.view()) : 0;
      if (e.args.in_nelems > 0 && size > 0) {
        c.bytes = nccl::plausible_call_bytes(static_cast<uint64_t>(e.args.in_nelems), size);
        if (c.bytes == 0 && out_.stats.implausible_sizes++ == 0)
          out_.stats.first_implausible = "\"In msg nelems\" " + std::to_string(e.args.in_nelems) +
                                         " of " + std::string(e.args.dtype.view()) +
                                         " (event at byte " + std::to_string(e.offset) + ")";
      }
      c.op = coll_op(e.args.collective ? e.args.collective.view() : e.name.view());
      c.nranks = e.args.group_size > 0 ? static_cast<uint32_t>(e.args.group_size) : 0;
      // "In msg nelems" of a reduce_scatter is its input, every rank's part;
      // the event carries the call's count (recvcount), as NCCL's own does.
      if (c.op == format::CollOp::kReduceScatter && c.nranks > 1) c.bytes /= c.nranks;
      // Communicator: the process group's name (the same on every member rank).
      c.comm = e.args.process_group.empty()
                   ? 1
                   : (std::hash<std::string_view>{}(e.args.process_group) | 1);
      ++out_.stats.collectives;
    } else {
      ++out_.stats.kernels;
    }
    kernel_recs_.push_back(
        {ev.start, ev.end, intern(e.name.view()), ev.track, t_.tracks[ev.track].tid});
  } else {
    format::MemKind src = format::MemKind::kUnknown, dst = format::MemKind::kUnknown;
    ev.kind = e.cat == Cat::kMemset ? Kind::kMemset : memcpy_kind(e.name.view(), &src, &dst);
    ev.copy() = {e.args.bytes > 0 ? static_cast<uint64_t>(e.args.bytes) : 0, src, dst};
    ++out_.stats.copies;
  }
  push(ev);
}

void Mapper::api_event(const RawEvent& e) {
  Ev ev = Ev::span(Kind::kApiCall, host_track(e), e.ts_ns, e.ts_ns + e.dur_ns);
  // cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize …
  if (e.name && e.name.view().find("Synchronize") != std::string_view::npos) ev.kind = Kind::kSync;
  ev.corr = e.args.correlation > 0 ? static_cast<uint64_t>(e.args.correlation) : 0;
  if (e.name) ev.name = span_name(e.name.view());  // few distinct: cudaLaunchKernel, …
  ++(ev.kind == Kind::kSync ? out_.stats.syncs : out_.stats.api_calls);
  push(ev);
}

void Mapper::finish() {
  // A runtime call the device saw as a synchronization (cuda_sync with the
  // same correlation id) blocked the host: a sync, whatever its name.
  if (!sync_corr_.empty()) {
    for (Ev& ev : t_.events) {
      if (ev.kind != Kind::kApiCall || !sync_corr_.contains(static_cast<int64_t>(ev.corr)))
        continue;
      ev.kind = Kind::kSync;
      --out_.stats.api_calls;
      ++out_.stats.syncs;
    }
  }
  // Collectives numbered per communicator in start order (Collective::seq): the k-th NCCL kernel of a process group on each rank
  // is one instance for the cross-rank pass.
  std::vector<uint32_t> coll;
  for (uint32_t i = 0; i < t_.events.size(); ++i)
    if (t_.events[i].kind == Kind::kCollective) coll.push_back(i);
  std::stable_sort(coll.begin(), coll.end(),
                   [&](uint32_t a, uint32_t b) { return t_.events[a].start < t_.events[b].start; });
  std::unordered_map<uint64_t, uint64_t> seq;
  for (size_t k = 0; k < coll.size(); ++k) {
    Ev& ev = t_.events[coll[k]];
    ev.corr = k + 1;
    ev.coll().seq = ++seq[ev.coll().comm];
  }
  if (out_.stats.steps == 0) add_inferred_steps();
  trainer_ops();
  host_recs_ = {};
  kernel_recs_ = {};
  out_.schema = !saw_cat_ ? Schema::kAutograd
                          : (saw_upper_ && !saw_lower_ ? Schema::kLegacy : Schema::kKineto);
  t_.rank = out_.rank;
  if (out_.stats.skipped > 0)
    out_.warnings.push_back(out_.file + ": " + std::to_string(out_.stats.skipped) +
                            " trace event(s) skipped; the first: " + out_.stats.first_skip);
  if (out_.stats.implausible_sizes > 0)
    out_.warnings.push_back(out_.file + ": " + std::to_string(out_.stats.implausible_sizes) +
                            " NCCL collective(s) with an impossible message size (past 1 TiB) "
                            "count as time only, with no bandwidth; the first: " +
                            out_.stats.first_implausible);
}

// The rank's id of an operator's, frame's or call's name; past
// kMaxSpanNames distinct ones, a shared "(other)".
uint32_t Mapper::span_name(std::string_view name) {
  if (const uint32_t known = scope_.known_name(name); known != 0) return known;
  if (span_names_ >= kMaxSpanNames) return scope_.name("(other)");
  ++span_names_;
  return scope_.name(name);
}

// The CPU operators of the thread holding the steps, as one union: what a
// trace without device activity counts as compute (docs/kineto-import.md).
void Mapper::trainer_ops() {
  uint32_t track = 0;
  bool found = false;
  for (const Ev& ev : t_.events)
    if (ev.kind == Kind::kStep) {
      track = ev.track;
      found = true;
      break;
    }
  if (!found) return;
  auto& ops = t_.trainer_ops;
  auto& spans = t_.trainer_spans;
  for (const HostRec& h : host_recs_) {
    // Operators (the autograd profiler writes no categories: all but its
    // DataLoader waits); a DataLoader wait is a data stall, never compute.
    // Python frames and operators, one by one, are what the host did in
    // its gaps (annotations arrive as ranges).
    if (h.track != track || h.b <= h.a || h.name.starts_with("enumerate(DataLoader)#")) continue;
    if (h.cat == Cat::kPython) spans.push_back({h.a, h.b, span_name(h.name), ActivityKind::kPython});
    if (h.cat != Cat::kHostOp && h.cat != Cat::kNone) continue;
    ops.push_back({h.a, h.b});
    spans.push_back({h.a, h.b, span_name(h.name), ActivityKind::kOperator});
  }
  std::stable_sort(spans.begin(), spans.end(),
                   [](const HostActivity& x, const HostActivity& y) { return x.a < y.a; });
  std::sort(ops.begin(), ops.end());
  size_t n = 0;
  for (const auto& x : ops) {
    if (n > 0 && x.first <= ops[n - 1].second)
      ops[n - 1].second = std::max(ops[n - 1].second, x.second);
    else
      ops[n++] = x;
  }
  ops.resize(n);
}

// No ProfilerStep#N: steps inferred from what repeats (kineto_steps.cpp),
// as step events the analyzer takes like marked ones (source kInferred).
void Mapper::add_inferred_steps() {
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const Ev& ev : t_.events) {
    first = std::min(first, ev.start);
    last = std::max(last, ev.end);
  }
  for (const HostRec& h : host_recs_) {
    first = std::min(first, h.a);
    last = std::max(last, h.b);
  }
  InferredSteps inf = infer_steps(host_recs_, kernel_recs_, first, last);
  if (inf.steps.empty()) return;
  for (const Ev& ev : t_.events) {  // no host range: the thread launching the kernels
    if (inf.has_track) break;
    if (ev.kind != Kind::kApiCall && ev.kind != Kind::kSync) continue;
    inf.track = ev.track;
    inf.has_track = true;
  }
  if (!inf.has_track) inf.track = scope_.add_track({0, TrackType::kThread, 0, 0, "steps (inferred)"});
  for (size_t i = 0; i < inf.steps.size(); ++i) {
    Ev ev = Ev::span(Kind::kStep, inf.track, inf.steps[i].first, inf.steps[i].second);
    ev.corr = i + 1;
    ev.step().source = format::StepSource::kInferred;
    push(ev);
  }
  out_.stats.inferred_steps = inf.steps.size();
  out_.step_source = inf.source;
  out_.step_detail = std::move(inf.detail);
}

}  // namespace stallscope::analyzer::kineto
