// Reads from memory-mapped files (Arrow/HF datasets, numpy memmap, LMDB,
// safetensors): each major page fault of the process, sampled by the kernel
// (perf_faults.hpp), becomes a storage read of one page of the file that
// /proc/self/maps names for its address. One background thread
// ("stallscope-mmap") drains the samples and records them on its own track;
// the faulting thread's id is the read's `corr` (docs/attach-preload.md).
// Where perf events are refused, one warning goes into the trace and the
// recorder's per-thread major-fault counters remain the only record.
#pragma once

namespace stallscope::preload {

// Opens the events and starts the drain thread, unless STALLSCOPE_MMAP_FAULTS
// is 0. Call after the recorder started: in the constructor, and in a fork
// child after shim_after_fork_child restarted the recorder.
void fault_sampler_start() noexcept;
// Fork child, before anything else: the parent's descriptors are closed
// and its drain thread forgotten (it does not exist here).
void fault_sampler_forget_after_fork() noexcept;

}  // namespace stallscope::preload
