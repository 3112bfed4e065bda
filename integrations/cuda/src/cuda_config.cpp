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

}  // namespace stallscope::cuda
