#include "ticks.hpp"

#include <time.h>

namespace stallscope::loader::detail {

double ns_per_tick() noexcept {
  static const double v = [] {
    const Ticks t0 = ticks_now();
    const int64_t m0 = mono_ns();
    const timespec pause{0, 2000000};
    ::nanosleep(&pause, nullptr);
    const Ticks t1 = ticks_now();
    const int64_t m1 = mono_ns();
    return t1 > t0 ? static_cast<double>(m1 - m0) / static_cast<double>(t1 - t0) : 1.0;
  }();
  return v;
}

}  // namespace stallscope::loader::detail
