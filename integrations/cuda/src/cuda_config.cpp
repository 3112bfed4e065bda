#include "cuda_config.hpp"

#include <cstring>

namespace stallscope::cuda {

CuptiMode parse_cupti_mode(const char* v, std::string* error) noexcept {
  if (v == nullptr || *v == '\0' || std::strcmp(v, "yield") == 0) return CuptiMode::kYield;
  if (std::strcmp(v, "keep") == 0) return CuptiMode::kKeep;
  if (std::strcmp(v, "off") == 0) return CuptiMode::kOff;
  if (error)
    *error = std::string("STALLSCOPE_CUPTI=") + v + ": expected yield, keep or off; using yield";
  return CuptiMode::kYield;
}

bool parse_step_ids(const char* v, std::string* error) noexcept {
  if (v == nullptr || *v == '\0' || std::strcmp(v, "1") == 0 || std::strcmp(v, "on") == 0)
    return true;
  if (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0) return false;
  if (error)
    *error = std::string("STALLSCOPE_CUPTI_STEP_IDS=") + v + ": expected 1/on or 0/off; using on";
  return true;
}

}  // namespace stallscope::cuda
