#include "common/checksum.hpp"

#include <zlib.h>

namespace stallscope::detail {

uint32_t checksum_update(uint32_t crc, const void* data, size_t bytes) noexcept {
  return static_cast<uint32_t>(
      crc32_z(crc, static_cast<const Bytef*>(data), static_cast<z_size_t>(bytes)));
}

uint32_t checksum(const void* data, size_t bytes) noexcept {
  return checksum_update(0, data, bytes);
}

}  // namespace stallscope::detail
