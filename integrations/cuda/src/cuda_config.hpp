// STALLSCOPE_CUPTI, parsed once: what stallscope does with CUPTI.
#pragma once

#include <string>

namespace stallscope::cuda {

enum class CuptiMode {
  kYield,  // default: record; hand CUPTI to another tool that asks for it
  kKeep,   // record; another tool's request fails as CUPTI makes it fail
  kOff,    // never touch CUPTI
};

// Parses a STALLSCOPE_CUPTI value (null = unset = yield). On a bad value
// returns yield and sets *error to a message naming the variable.
CuptiMode parse_cupti_mode(const char* value, std::string* error) noexcept;

// Parses STALLSCOPE_CUPTI_STEP_IDS (null = unset = on): whether the CUDA
// calls of each step are tagged with the step's index. "1"/"on" or "0"/"off";
// another value keeps it on and sets *error naming the variable.
bool parse_step_ids(const char* value, std::string* error) noexcept;

}  // namespace stallscope::cuda
