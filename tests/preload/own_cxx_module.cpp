// The C++ module own_cxx_runtime.c loads: it needs libstdc++.so.6, found
// through its RUNPATH in own-runtime/ (tests/preload/CMakeLists.txt).
#include <string>

extern "C" __attribute__((visibility("default"))) const char* own_cxx_module_hello() {
  static const std::string greeting = std::string("own_cxx_module: ") + "loaded";
  return greeting.c_str();
}
