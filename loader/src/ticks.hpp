// Nanoseconds per recorder tick (TSC cycles or monotonic ns), calibrated
// once against CLOCK_MONOTONIC; libtrace exports no conversion for live
// processes, only TickConverter for readers.
#pragma once

#include <stallscope/clock.hpp>

namespace stallscope::loader::detail {

double ns_per_tick() noexcept;

inline uint64_t ticks_to_ns(Ticks t) noexcept {
  return static_cast<uint64_t>(static_cast<double>(t) * ns_per_tick());
}

}  // namespace stallscope::loader::detail
