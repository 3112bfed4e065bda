// Per-sample preprocessing of the sample trainer, run on the loader's oneTBB
// workers: zstd decode (real CPU work) then an "augment" pass that keeps
// working over the decoded bytes until it used `augment_us` of the thread's
// CPU time — so its cost is set in CPU time and grows in wall time when the
// workers are starved of CPU, as real augmentation does.
#pragma once

#include <cstdint>

#include <stallscope/loader/loader.hpp>

namespace trainer {

struct DecodeCost {
  double augment_us = 0;
};

stallscope::loader::TransformFn make_transform(DecodeCost cost);
// Writes `sample_bytes` per sample (decoded bytes cut or zero-padded), like
// a collate that builds a fixed-shape tensor.
stallscope::loader::CollateFn make_collate(uint64_t sample_bytes);

}  // namespace trainer
