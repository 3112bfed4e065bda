// Reads from memory-mapped files (Arrow/HF datasets, numpy memmap, LMDB,
// safetensors): each major page fault of the process, sampled by the kernel
// (perf_faults.hpp), becomes a storage read of one page of the file that
// /proc/self/maps names for its address. One background thread
// ("stallscope-mmap") drains the samples and records them on a track of the
// faulting thread (docs/attach-preload.md). Where perf events are refused,
// one warning goes into the trace and the recorder's per-thread major-fault
// counters remain the only record.
//
// The sampler starts in a process at its first mapping of a file for
// reading (the shim's mmap wrapper), or at once in a fork child whose parent
// had started one (the child inherits the parent's mappings): a process
// that never maps a data file (most tools a trainer spawns) pays nothing.
#pragma once

namespace stallscope::preload {

// Constructor, after the recorder started: the sampler may start later in
// this process, unless STALLSCOPE_MMAP_FAULTS is 0.
void fault_sampler_arm() noexcept;
// A file was mapped for reading: starts the sampler once per process.
void fault_sampler_on_mapping() noexcept;
// Fork child, before anything else: the parent's descriptors are closed
// and its drain thread forgotten (it does not exist here).
void fault_sampler_forget_after_fork() noexcept;
// Fork child, after shim_after_fork_child restarted the recorder: starts
// the child's sampler if the parent had one, else arms it.
void fault_sampler_after_fork_child() noexcept;

}  // namespace stallscope::preload
