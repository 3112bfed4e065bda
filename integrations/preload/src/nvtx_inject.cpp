// NVTX injection: every NVTX copy in the process (the program's, PyTorch's,
// NCCL's) loads the library named by NVTX_INJECTION64_PATH — the shim — and
// calls InitializeInjectionNvtx2 with its own export table. Each call fills
// that copy's function tables, so ranges from every copy arrive; nothing is
// global but the open-range tables, so the call is idempotent.
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdint>

#include "shim.hpp"
#include "stallscope/trace.hpp"

namespace {

using stallscope::NameId;

constexpr int kMaxDepth = 64;
struct Open {
  NameId name;
  NameId domain;
  uint64_t start;
};
thread_local Open t_stack[kMaxDepth] __attribute__((tls_model("initial-exec")));
thread_local int t_depth __attribute__((tls_model("initial-exec"))) = 0;

// Start/end ranges may end on another thread: a ring keyed by range id.
constexpr uint64_t kOpenRanges = 4096;
struct Started {
  std::atomic<uint64_t> id{0};
  std::atomic<uint64_t> start{0};
  std::atomic<uint32_t> name{0}, domain{0};
};
Started g_started[kOpenRanges];
std::atomic<uint64_t> g_next_range{1};

NameId name_of(const nvtxEventAttributes_t* a) {
  if (a == nullptr) return 0;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return stallscope::intern(a->message.ascii ? a->message.ascii : "");
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return static_cast<NameId>(reinterpret_cast<uintptr_t>(a->message.registered));
    case NVTX_MESSAGE_TYPE_UNICODE: {
      static const NameId unicode = stallscope::intern("(NVTX unicode message)");
      return unicode;
    }
    default: return 0;
  }
}
NameId domain_of(nvtxDomainHandle_t d) {
  return static_cast<NameId>(reinterpret_cast<uintptr_t>(d));
}

int push(NameId name, NameId domain) {
  const int depth = t_depth++;
  if (depth >= 0 && depth < kMaxDepth) t_stack[depth] = Open{name, domain, stallscope::ticks_now()};
  return depth;
}
int pop() {
  if (t_depth <= 0) return -1;
  const int depth = --t_depth;
  if (depth < kMaxDepth) {
    const Open& o = t_stack[depth];
    stallscope::record_range(o.name, o.start, stallscope::ticks_now(), o.domain);
  }
  return depth;
}

nvtxRangeId_t start(NameId name, NameId domain) {
  const uint64_t id = g_next_range.fetch_add(1, std::memory_order_relaxed);
  Started& s = g_started[id % kOpenRanges];
  s.start.store(stallscope::ticks_now(), std::memory_order_relaxed);
  s.name.store(name, std::memory_order_relaxed);
  s.domain.store(domain, std::memory_order_relaxed);
  s.id.store(id, std::memory_order_release);
  return id;
}
void end(nvtxRangeId_t id) {
  Started& s = g_started[id % kOpenRanges];
  if (s.id.load(std::memory_order_acquire) != id) return;  // overwritten: too many open
  stallscope::record_range(s.name.load(std::memory_order_relaxed),
                           s.start.load(std::memory_order_relaxed), stallscope::ticks_now(),
                           s.domain.load(std::memory_order_relaxed));
}

// ---- the callbacks, with NVTX's signatures
void mark_ex(const nvtxEventAttributes_t* a) { stallscope::record_mark(name_of(a)); }
void mark_a(const char* m) { stallscope_mark(m); }
nvtxRangeId_t start_ex(const nvtxEventAttributes_t* a) { return start(name_of(a), 0); }
nvtxRangeId_t start_a(const char* m) { return start(stallscope::intern(m ? m : ""), 0); }
int push_ex(const nvtxEventAttributes_t* a) { return push(name_of(a), 0); }
int push_a(const char* m) { return push(stallscope::intern(m ? m : ""), 0); }
void d_mark_ex(nvtxDomainHandle_t, const nvtxEventAttributes_t* a) { mark_ex(a); }
nvtxRangeId_t d_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return start(name_of(a), domain_of(d));
}
void d_end(nvtxDomainHandle_t, nvtxRangeId_t id) { end(id); }
int d_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return push(name_of(a), domain_of(d));
}
int d_pop(nvtxDomainHandle_t) { return pop(); }
nvtxStringHandle_t d_register_a(nvtxDomainHandle_t, const char* s) {
  return reinterpret_cast<nvtxStringHandle_t>(uintptr_t{stallscope::intern(s ? s : "")});
}
nvtxDomainHandle_t d_create_a(const char* name) {
  // A domain handle is its interned name (never 0: "" interns to a real id).
  const NameId id = stallscope::intern(name != nullptr && *name ? name : "(unnamed domain)");
  return reinterpret_cast<nvtxDomainHandle_t>(uintptr_t{id != 0 ? id : 1u});
}
void d_destroy(nvtxDomainHandle_t) {}
void initialize(const void*) {}

template <typename Fn>
void set(NvtxFunctionTable table, unsigned size, unsigned id, Fn fn) {
  if (table != nullptr && id < size && table[id] != nullptr) {
    *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  }
}

bool fill(const NvtxExportTableCallbacks* cb) {
  NvtxFunctionTable t = nullptr;
  unsigned n = 0;
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n) == 0) return false;
  set(t, n, NVTX_CBID_CORE_MarkEx, mark_ex);
  set(t, n, NVTX_CBID_CORE_MarkA, mark_a);
  set(t, n, NVTX_CBID_CORE_RangeStartEx, start_ex);
  set(t, n, NVTX_CBID_CORE_RangeStartA, start_a);
  set(t, n, NVTX_CBID_CORE_RangeEnd, end);
  set(t, n, NVTX_CBID_CORE_RangePushEx, push_ex);
  set(t, n, NVTX_CBID_CORE_RangePushA, push_a);
  set(t, n, NVTX_CBID_CORE_RangePop, pop);
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) == 0) return true;
  set(t, n, NVTX_CBID_CORE2_DomainMarkEx, d_mark_ex);
  set(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, d_start_ex);
  set(t, n, NVTX_CBID_CORE2_DomainRangeEnd, d_end);
  set(t, n, NVTX_CBID_CORE2_DomainRangePushEx, d_push_ex);
  set(t, n, NVTX_CBID_CORE2_DomainRangePop, d_pop);
  set(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, d_register_a);
  set(t, n, NVTX_CBID_CORE2_DomainCreateA, d_create_a);
  set(t, n, NVTX_CBID_CORE2_DomainDestroy, d_destroy);
  set(t, n, NVTX_CBID_CORE2_Initialize, initialize);
  return true;
}

}  // namespace

// Called once by each NVTX copy at its first NVTX call. Returns 1 when
// the copy's tables were filled (NVTX unloads a library returning 0).
STALLSCOPE_SHIM_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  if (get_table == nullptr) return 0;
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (cb == nullptr || cb->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;
  return fill(cb) ? 1 : 0;
}
