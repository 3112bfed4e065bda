// Linked into each library that carries its own C++ runtime
// (stallscope_own_cxx_runtime() in cmake/StallscopeOptions.cmake).
//
// GCC 12's static libstdc++ on Debian 12 was built against glibc 2.36: its
// std::random_device calls arc4random (GLIBC_2.36), and the linker pulls
// that code in with std::runtime_error, which every library here uses.
// Nothing of stallscope constructs a random_device. This hidden definition
// keeps the reference inside the library, so the preload shim and the
// recorder ask no newer glibc of the machine than their own code does
// (docs/install.md: the wheel's platform tag). getrandom (glibc 2.25) gives
// the same kind of bytes.
#include <sys/random.h>

#include <cerrno>
#include <cstdint>

extern "C" __attribute__((visibility("hidden"))) uint32_t arc4random(void) noexcept {
  uint32_t value = 0;
  while (::getrandom(&value, sizeof value, 0) < 0 && errno == EINTR) {
  }
  return value;
}
