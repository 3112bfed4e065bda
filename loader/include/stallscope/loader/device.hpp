// stallscope loader — staging memory and host-to-device copies.
//
// A Device stages batches in host memory and copies them to the device on
// one copy stream, in issue order. Two implementations behind this
// interface: CUDA (cudaHostAlloc, a copy stream and events; built where the
// toolkit is, used where a driver and a device are) and the emulated device
// of DESIGN.md, which uses no host core: a pageable copy is a real memcpy
// into staging and then a wait of bytes / pageable bandwidth on the device
// thread, a pinned copy only waits bytes / pinned bandwidth. Its model goes
// into the trace as the "device.model" attachment.
//
//   std::string why;
//   auto dev = make_device(DeviceKind::kAuto, {}, &why);  // "no CUDA driver: …" → emulated
//   HostBuffer b = dev->alloc_host(1 << 20, /*pinned=*/true);
//   CopyTicket t = dev->copy_h2d(b, n, batch_id);
//   dev->wait(t);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "stallscope/loader/config.hpp"
#include "stallscope/loader/export.hpp"

namespace stallscope::loader {

struct HostBuffer {
  void* data = nullptr;
  uint64_t bytes = 0;
  bool pinned = false;          // page-locked (cudaHostAlloc or mlock)
  bool locked_refused = false;  // pinned was asked, locking refused (counted)
  void* device = nullptr;       // the device copy's buffer (null on the emulated device)
  void* impl = nullptr;         // backend bookkeeping
};

struct CopyTicket {
  uint64_t seq = 0;  // 0 = no copy issued
};

struct DeviceModel {
  double pinned_gbps = 24.0;
  double pageable_gbps = 8.0;
};

struct DeviceStats {
  uint64_t copies = 0;
  uint64_t bytes = 0;
  uint64_t lock_refused = 0;  // pinned allocations that could not be locked
};

class STALLSCOPE_LOADER_API Device {
 public:
  virtual ~Device() = default;
  // Staging memory of at least `bytes`, page-aligned, with a device buffer
  // of the same size. Pinned where possible; data == nullptr on failure.
  virtual HostBuffer alloc_host(uint64_t bytes, bool pinned) noexcept = 0;
  virtual void free_host(HostBuffer& b) noexcept = 0;
  // Queues a copy of b's first `bytes` to its device buffer on the copy
  // stream; records an h2d event tagged with `batch_id` when it ends.
  virtual CopyTicket copy_h2d(const HostBuffer& b, uint64_t bytes, uint64_t batch_id) noexcept = 0;
  // Blocks until the copy is complete. 0 or -errno.
  virtual int wait(CopyTicket t) noexcept = 0;
  virtual bool done(CopyTicket t) noexcept = 0;
  virtual std::string_view name() const noexcept = 0;
  virtual bool emulated() const noexcept = 0;
  virtual DeviceStats stats() const noexcept = 0;
  // The model as JSON (the "device.model" attachment).
  virtual std::string model_json() const = 0;
};

STALLSCOPE_LOADER_API std::unique_ptr<Device> make_emulated_device(const DeviceModel& m) noexcept;
// Null with *why set ("no CUDA driver: …", "built without CUDA") when CUDA
// cannot be used here.
STALLSCOPE_LOADER_API std::unique_ptr<Device> make_cuda_device(std::string* why) noexcept;
// The registry: kAuto = CUDA where usable, else emulated (with *why saying
// why); kNone = null (batches stay on the host).
STALLSCOPE_LOADER_API std::unique_ptr<Device> make_device(DeviceKind kind, const DeviceModel& m,
                                                          std::string* why) noexcept;

// The pages alloc_locked asks for (Config::huge_pages). kHuge: a buffer of
// 512 KiB or more is mapped 2 MiB-aligned, a whole number of 2 MiB pages,
// and advised MADV_HUGEPAGE (huge pages where THP is "always" or
// "madvise"). kBase: a plain mapping of the same size, not advised — the
// system's default for anonymous memory, as a malloc'd buffer gets (4 KiB
// pages unless THP is "always").
enum class Pages : uint8_t { kHuge, kBase };

// Page-aligned host memory, mlock'ed where permitted. On refusal (EPERM,
// ENOMEM from RLIMIT_MEMLOCK) the memory stays usable, unlocked, and
// *locked is false. nullptr only when no memory could be had. Without
// `pages`: Pages::kHuge. Either kind is freed by free_locked.
STALLSCOPE_LOADER_API void* alloc_locked(uint64_t bytes, bool want_lock, bool* locked) noexcept;
STALLSCOPE_LOADER_API void* alloc_locked(uint64_t bytes, bool want_lock, bool* locked,
                                         Pages pages) noexcept;
STALLSCOPE_LOADER_API void free_locked(void* p, uint64_t bytes, bool locked) noexcept;

}  // namespace stallscope::loader
