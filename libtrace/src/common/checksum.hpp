// Checksums of trace headers and chunks (zlib's CRC-32).
#pragma once

#include <cstddef>
#include <cstdint>

namespace stallscope::detail {

uint32_t checksum(const void* data, size_t bytes) noexcept;
// Continues a running checksum (start with 0).
uint32_t checksum_update(uint32_t crc, const void* data, size_t bytes) noexcept;

}  // namespace stallscope::detail
