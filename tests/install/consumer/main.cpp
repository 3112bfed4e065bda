// Records a few steps and spans through the installed C++ API and one event
// through the C API, then exits; the trace file is completed at exit.
#include <cstdint>
#include <cstdio>

#include <stallscope/trace.h>
#include <stallscope/trace.hpp>

namespace {

uint64_t work(uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

}  // namespace

int main() {
  if (int rc = stallscope_init(); rc != 0) {
    std::fprintf(stderr, "consumer: stallscope_init failed: %d\n", rc);
    return 1;
  }
  uint64_t sink = 0;
  for (uint64_t i = 0; i < 3; ++i) {
    stallscope::StepScope step(i);
    STALLSCOPE_SPAN(stallscope::Kind::kRange, "x");
    sink += work(i);
  }
  stallscope_mark("consumer done");
  std::printf("consumer: %llu\n", static_cast<unsigned long long>(sink));
  return 0;
}
