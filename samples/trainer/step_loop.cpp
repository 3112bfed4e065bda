#include "step_loop.hpp"

#include <chrono>
#include <ctime>
#include <thread>

#include <stallscope/trace.hpp>

namespace trainer {

namespace {

struct Names {
  stallscope::NameId forward = stallscope::intern("forward");
  stallscope::NameId backward = stallscope::intern("backward");
  stallscope::NameId allreduce = stallscope::intern("allreduce_gradients");
  stallscope::NameId update = stallscope::intern("optimizer_update");
  stallscope::NameId sync = stallscope::intern("loss.item() sync");
  stallscope::NameId host = stallscope::intern("host work");
  stallscope::NameId copy = stallscope::intern("batch to device");
  stallscope::NameId tiny = stallscope::intern("elementwise");
  stallscope::NameId launch = stallscope::intern("cudaLaunchKernel");
};

constexpr int kCompute = 0, kComm = 1, kBuckets = 4;

// Host work that really uses a core (logging, metrics): burns `ms` of
// thread CPU time.
void host_work(double ms) {
  if (ms <= 0) return;
  timespec ts;
  auto cpu = [&] {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  };
  const int64_t until = cpu() + static_cast<int64_t>(ms * 1e6);
  volatile uint64_t sink = 0;
  while (cpu() < until)
    for (int i = 0; i < 1000; ++i) sink = sink + i;
}

// --copy-in-step: the batch goes to the device on the compute stream, so
// forward waits for it and the copy never overlaps compute.
void enqueue_copy(const Options& o, uint64_t bytes, Device& dev, const Names& n) {
  const bool pinned = o.loader.pinned;
  const double gbps = pinned ? o.loader.pinned_gbps : o.loader.pageable_gbps;
  dev.enqueue(kCompute, {.type = DeviceOp::Type::kCopyH2D,
                         .name = n.copy,
                         .ms = static_cast<double>(bytes) / (gbps * 1e9) * 1e3,
                         .bytes = bytes,
                         .pinned = pinned});
}

// Queues one step's device work; returns the update's sequence number.
uint64_t enqueue_step(const Options& o, double slow, uint64_t batch_bytes, Device& dev,
                      const Names& n) {
  using T = DeviceOp::Type;
  const double fwd = o.compute_ms * slow / 3, bwd = o.compute_ms * slow * 2 / 3;
  const auto grad = static_cast<uint64_t>(o.grad_mb * 1e6);
  if (o.copy_in_step) enqueue_copy(o, batch_bytes, dev, n);
  dev.enqueue(kCompute, {.name = n.forward, .ms = fwd});
  if (!o.overlap_comm || grad == 0) {
    dev.enqueue(kCompute, {.name = n.backward, .ms = bwd});
    if (grad > 0)
      dev.enqueue(kCompute, {.type = T::kCollective, .name = n.allreduce, .bytes = grad});
    return dev.enqueue(kCompute, {.name = n.update, .ms = o.update_ms * slow});
  }
  uint64_t last = 0;
  for (int b = 0; b < kBuckets; ++b) {
    const uint64_t chunk = dev.enqueue(kCompute, {.name = n.backward, .ms = bwd / kBuckets});
    last = dev.enqueue(kComm, {.type = T::kCollective,
                               .name = n.allreduce,
                               .bytes = grad / kBuckets,
                               .wait_stream = kCompute,
                               .wait_seq = chunk});
  }
  return dev.enqueue(
      kCompute,
      {.name = n.update, .ms = o.update_ms * slow, .wait_stream = kComm, .wait_seq = last});
}

// --tiny-kernels: N kernels of 10 µs on the device, each launched by a call
// that takes `launch_us` of host CPU (an eager-mode optimizer over many
// small tensors): the device waits for the host between them.
void enqueue_tiny(const Options& o, Device& dev, const Names& n) {
  for (uint64_t i = 0; i < o.tiny_kernels; ++i) {
    const stallscope::Ticks t0 = stallscope::ticks_now();
    host_work(o.launch_us / 1e3);
    dev.enqueue(kCompute, {.name = n.tiny, .ms = 0.01});
    stallscope::record_api_call(t0, stallscope::ticks_now(),
                                {.name = n.launch, .domain = stallscope::format::ApiDomain::kCudaRuntime});
  }
}

int next_batch(stallscope::loader::Loader& loader, uint64_t& epoch, stallscope::loader::Batch* b) {
  int rc = loader.next_batch(b);
  if (rc == stallscope::loader::kEndOfEpoch) {
    if ((rc = loader.start_epoch(++epoch)) != 0) return rc;
    rc = loader.next_batch(b);
  }
  return rc;
}

}  // namespace

int run_steps(const Options& o, int rank, stallscope::loader::Loader& loader, Device& dev,
              StepTimes* out, std::string* error) {
  const Names names;
  const double slow = slow_factor(o, rank);
  uint64_t epoch = 0, prev_update = 0;
  if (const int rc = loader.start_epoch(epoch); rc != 0) return *error = loader.error(), rc;
  const int64_t t0 = stallscope::mono_ns();
  for (uint64_t step = 0; step < o.steps; ++step) {
    const int64_t s0 = stallscope::mono_ns();
    stallscope::StepScope scope(step);
    stallscope::loader::Batch b;
    if (const int rc = next_batch(loader, epoch, &b); rc != 0)
      return *error = loader.error(), rc < 0 ? rc : -EIO;
    out->samples += b.samples.size();
    dev.set_copy_source(b.host.data(), b.host.size());
    uint64_t update = enqueue_step(o, slow, b.host.size(), dev, names);
    if (o.tiny_kernels > 0) {
      enqueue_tiny(o, dev, names);
      update = dev.enqueue(kCompute, {.name = names.tiny, .ms = 0.01});
    }
    if (o.sync_each_step) {
      const stallscope::Ticks w0 = stallscope::ticks_now();
      dev.wait(kCompute, update);
      stallscope::record_sync(w0, stallscope::ticks_now(), {.name = names.sync}, 1);
    } else if (prev_update > 0) {
      dev.wait(kCompute, prev_update);  // at most two steps in flight, as a launch queue allows
    }
    prev_update = update;
    if (o.host_ms > 0) {
      stallscope::Span span(stallscope::Kind::kRange, names.host);
      if (o.host_sleep)
        std::this_thread::sleep_for(
            std::chrono::microseconds(static_cast<int64_t>(o.host_ms * slow * 1e3)));
      else
        host_work(o.host_ms * slow);
    }
    out->step_ms.push_back((stallscope::mono_ns() - s0) / 1e6);
  }
  dev.wait(kCompute);
  out->wall_s = (stallscope::mono_ns() - t0) / 1e9;
  return 0;
}

}  // namespace trainer
