// Native stacks of a program's threads, sampled by the kernel: with
// STALLSCOPE_PRELOAD_NATIVE_STACKS_HZ=N (default 0, off), one
// perf_event_open(PERF_COUNT_SW_TASK_CLOCK) per online CPU for this process
// (perf_faults.hpp), N samples per second of a thread's CPU time, user
// space only, with the user call chain the kernel walks through frame
// pointers (at most kMaxFrames). One background thread ("stallscope-stack")
// drains the rings, names the frames (native_symbols.hpp) and records each
// sample as a stack_sample of the sampled thread (format::kStackNative).
// Where perf_event_open is refused, one mark says why
// ("native stacks: perf_event_open refused (…)"), and the analyzer puts it
// among the report's warnings (docs/attach-preload.md, "Native stacks").
#pragma once

#include <cstddef>

namespace stallscope::preload {

inline constexpr size_t kMaxNativeFrames = 32;

// Constructor, after the recorder started: starts the sampler when asked for.
void native_stacks_start() noexcept;
// Fork child, before anything else: the parent's descriptors are closed
// and its drain thread forgotten (it does not exist here).
void native_stacks_forget_after_fork() noexcept;
// Fork child, after the recorder restarted: the child's own sampler.
void native_stacks_after_fork_child() noexcept;

}  // namespace stallscope::preload
