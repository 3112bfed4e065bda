// The GPU side's variables, read through the configuration table
// (stallscope/internal/config.hpp): its words, its message.
#include "cuda_config.hpp"

#include "stallscope/internal/config.hpp"

namespace stallscope::cuda {

CuptiMode parse_cupti_mode(const char* v, std::string* error) noexcept {
  char why[config::kMessageBytes];
  int i = 0;
  const config::Read r = config::read_word(config::var(config::Id::kCupti), v, &i, why, sizeof why);
  if (r == config::Read::kBad && error != nullptr) *error = why;
  if (r != config::Read::kOk) return CuptiMode::kYield;
  return i == 1 ? CuptiMode::kKeep : i == 2 ? CuptiMode::kOff : CuptiMode::kYield;
}

bool parse_step_ids(const char* v, std::string* error) noexcept {
  char why[config::kMessageBytes];
  bool on = true;
  const config::Read r =
      config::read_switch(config::var(config::Id::kCuptiStepIds), v, &on, why, sizeof why);
  if (r == config::Read::kBad && error != nullptr) *error = why;
  return r == config::Read::kOk ? on : true;
}

}  // namespace stallscope::cuda
