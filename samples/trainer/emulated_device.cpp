#include "emulated_device.hpp"

#include <sstream>

namespace trainer {

struct EmulatedDevice::Stream {
  std::thread thread;
  mutable std::mutex mu;
  std::condition_variable cv;       // work queued, or stop
  std::condition_variable done_cv;  // an op completed
  std::deque<DeviceOp> queue;
  uint64_t queued = 0, completed = 0;
  bool stop = false;
};

EmulatedDevice::EmulatedDevice(int streams, DeviceModel m, Comm* comm) : model_(m), comm_(comm) {
  for (int i = 0; i < streams; ++i) streams_.push_back(std::make_unique<Stream>());
  for (int i = 0; i < streams; ++i) streams_[i]->thread = std::thread([this, i] { run(i); });
}

EmulatedDevice::~EmulatedDevice() {
  for (auto& s : streams_) {
    std::lock_guard lock(s->mu);
    s->stop = true;
    s->cv.notify_all();
  }
  for (auto& s : streams_) s->thread.join();
}

uint64_t EmulatedDevice::enqueue(int stream, DeviceOp op) {
  Stream& s = *streams_.at(stream);
  std::lock_guard lock(s.mu);
  s.queue.push_back(op);
  s.cv.notify_one();
  return ++s.queued;
}

void EmulatedDevice::wait(int stream, uint64_t seq) {
  Stream& s = *streams_.at(stream);
  std::unique_lock lock(s.mu);
  if (seq == 0) seq = s.queued;
  s.done_cv.wait(lock, [&] { return s.completed >= seq; });
}

uint64_t EmulatedDevice::queued(int stream) const {
  std::lock_guard lock(streams_.at(stream)->mu);
  return streams_[stream]->queued;
}

double EmulatedDevice::collective_ms(uint64_t bytes) const {
  const int n = comm_ ? comm_->size() : 1;
  if (n <= 1 || model_.bus_gbps <= 0) return 0;
  return 2.0 * (n - 1) / n * static_cast<double>(bytes) / (model_.bus_gbps * 1e9) * 1e3;
}

std::string EmulatedDevice::model_json() const {
  std::ostringstream o;
  o << "{\"kind\":\"emulated\",\"streams\":" << streams_.size() << ",\"bus_gbps\":" << model_.bus_gbps
    << ",\"burn\":" << (model_.burn ? "true" : "false") << ",\"ranks\":" << (comm_ ? comm_->size() : 1)
    << ",\"collective\":\"token MPI_Iallreduce, then 2(n-1)/n*bytes/bus_gbps\"}";
  return o.str();
}

void EmulatedDevice::run(int index) {
  Stream& s = *streams_[index];
  stallscope_thread_name_set(index == 0 ? "device compute stream" : "device comm stream");
  for (;;) {
    DeviceOp op;
    {
      std::unique_lock lock(s.mu);
      s.cv.wait(lock, [&] { return s.stop || !s.queue.empty(); });
      if (s.queue.empty()) return;
      op = s.queue.front();
    }
    if (op.wait_stream >= 0) wait(op.wait_stream, op.wait_seq);
    execute(index, op);
    std::lock_guard lock(s.mu);
    s.queue.pop_front();
    ++s.completed;
    s.done_cv.notify_all();
  }
}

void EmulatedDevice::hold_for(double ms) const {
  const int64_t until = stallscope::mono_ns() + static_cast<int64_t>(ms * 1e6);
  for (int64_t now = stallscope::mono_ns(); now < until; now = stallscope::mono_ns())
    if (!model_.burn) std::this_thread::sleep_for(std::chrono::nanoseconds(until - now));
}

void EmulatedDevice::execute(int index, const DeviceOp& op) {
  const stallscope::Ticks start = stallscope::ticks_now();
  if (op.type == DeviceOp::Type::kKernel) {
    hold_for(op.ms);
    stallscope::record_kernel(start, stallscope::ticks_now(),
                              {.name = op.name, .stream = static_cast<uint32_t>(index), .emulated = true});
    return;
  }
  if (op.type == DeviceOp::Type::kCopyH2D) {
    hold_for(op.ms);
    stallscope::record_copy(
        start, stallscope::ticks_now(),
        {.kind = stallscope::Kind::kH2D, .bytes = op.bytes,
         .src = op.pinned ? stallscope::format::MemKind::kPinned : stallscope::format::MemKind::kPageable,
         .dst = stallscope::format::MemKind::kDevice, .stream = static_cast<uint32_t>(index), .emulated = true});
    return;
  }
  if (comm_ && comm_->size() > 1) {
    comm_->start_token_allreduce();
    while (!comm_->done()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  hold_for(collective_ms(op.bytes));
  stallscope::record_collective(
      start, stallscope::ticks_now(),
      {.name = op.name, .op = stallscope::format::CollOp::kAllReduce, .bytes = op.bytes, .comm_id = 1,
       .seq = ++collective_seq_, .rank = static_cast<uint32_t>(comm_ ? comm_->rank() : 0),
       .nranks = static_cast<uint32_t>(comm_ ? comm_->size() : 1), .emulated = true});
}

}  // namespace trainer
