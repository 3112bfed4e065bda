// Names of native code addresses of this process, for the native stack
// sampler's drain thread (never a program thread): the dynamic symbol
// dladdr finds; else the function of the object's .symtab (read once per
// object with raw preads, so that nothing of it is traced); else
// "object+0xoffset" (the offset addr2line takes). C++ names are demangled.
// Names are interned in the recorder's string table. Memory is bounded:
// at most kMaxAddresses cached addresses, kMaxObjects objects, kMaxSymbols
// symbols and kMaxStringBytes of symbol names over all objects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "stallscope/trace.hpp"

namespace stallscope::preload {

class NativeSymbols {
 public:
  static constexpr size_t kMaxAddresses = 65536;
  static constexpr size_t kMaxSymbols = size_t{1} << 20;
  static constexpr size_t kMaxStringBytes = size_t{64} << 20;
  static constexpr size_t kMaxObjects = 1024;

  // The interned name of the function holding `pc`; 0 when out of memory.
  // Not thread-safe.
  NameId name_of(uint64_t pc) noexcept;

 private:
  struct Sym {
    uint64_t addr;
    uint32_t size;
    uint32_t name;  // offset in Object::names
  };
  struct Object {
    bool loaded = false;
    std::string names;      // the .strtab
    std::vector<Sym> syms;  // functions, by address
  };
  std::string lookup(uint64_t pc);
  const Object& object(uint64_t base, const char* path);
  void load(Object& o, const char* path);

  std::unordered_map<uint64_t, NameId> by_pc_;
  std::unordered_map<uint64_t, Object> objects_;  // by load bias
  size_t symbols_ = 0, string_bytes_ = 0;
};

// "_ZN3foo3barEv" -> "foo::bar()"; other names as they are.
std::string demangled(const char* name);

}  // namespace stallscope::preload
