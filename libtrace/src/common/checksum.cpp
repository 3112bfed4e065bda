#include "common/checksum.hpp"

#include <zlib.h>

#if defined(STALLSCOPE_HAVE_ISAL)
#include <isa-l/crc.h>
#endif

namespace stallscope::detail {

// The format's checksum is zlib's CRC-32 (reflected IEEE polynomial).
// ISA-L's crc32_gzip_refl computes the same value with carry-less
// multiplication, several times faster than Debian's zlib 1.2.13.
uint32_t checksum_update(uint32_t crc, const void* data, size_t bytes) noexcept {
#if defined(STALLSCOPE_HAVE_ISAL)
  return crc32_gzip_refl(crc, static_cast<const unsigned char*>(data), bytes);
#else
  return static_cast<uint32_t>(
      crc32_z(crc, static_cast<const Bytef*>(data), static_cast<z_size_t>(bytes)));
#endif
}

uint32_t checksum(const void* data, size_t bytes) noexcept {
  return checksum_update(0, data, bytes);
}

}  // namespace stallscope::detail
