// The CUPTI functions stallscope calls, resolved from one loaded libcupti.
//
// CUPTI is process-wide, so stallscope must use the CUPTI the program
// already loaded (PyTorch brings its own) rather than a second copy: the
// table prefers a libcupti already in the process, then STALLSCOPE_CUPTI_LIB,
// then the one beside the CUDA runtime the program loaded (pip's CUDA wheels),
// then the toolkit's; `origin` says which, and the source notes it. Calls through the table's handle also bypass the
// shim's CUPTI interposition, which is meant for other tools' calls only.
#pragma once

#include <cupti.h>

#include <string>

namespace stallscope::cuda {

struct CuptiApi {
  void* handle = nullptr;
  std::string path;    // the library the functions came from, its file once loaded
  std::string origin;  // how it was found: "already loaded", "STALLSCOPE_CUPTI_LIB", ...
  CUptiResult (*subscribe_v2)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                              CUpti_SubscriberParams*) = nullptr;  // CUPTI >= 12.9
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                    CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*register_timestamp)(CUpti_TimestampCallbackFunc) = nullptr;  // optional
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*dropped)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*callback_name)(CUpti_CallbackDomain, uint32_t, const char**) = nullptr;
  CUptiResult (*timestamp)(uint64_t*) = nullptr;
  // External correlation (optional): tags the calling thread's CUDA calls.
  CUptiResult (*push_external)(CUpti_ExternalCorrelationKind, uint64_t) = nullptr;
  CUptiResult (*pop_external)(CUpti_ExternalCorrelationKind, uint64_t*) = nullptr;
};

// Loads the table. Returns 0, or -ENOENT with *why naming what was tried.
int load_cupti(CuptiApi* api, std::string* why) noexcept;

}  // namespace stallscope::cuda
