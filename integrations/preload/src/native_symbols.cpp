#include "native_symbols.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace stallscope::preload {

namespace {

constexpr size_t kSymChunk = 4096;  // symbols read per pread

bool pread_all(long fd, void* buf, size_t n, uint64_t off) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const long r = ::syscall(SYS_pread64, fd, p, n, static_cast<off_t>(off));
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    off += static_cast<uint64_t>(r);
  }
  return true;
}

bool is_function(const Elf64_Sym& s) {
  const unsigned type = ELF64_ST_TYPE(s.st_info);
  return (type == STT_FUNC || type == STT_GNU_IFUNC) && s.st_value != 0 &&
         s.st_shndx != SHN_UNDEF;
}

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

}  // namespace

std::string demangled(const char* name) {
  if (name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (d == nullptr) return name;
  std::string out(d);
  std::free(d);
  return out;
}

NameId NativeSymbols::name_of(uint64_t pc) noexcept {
  try {
    if (auto it = by_pc_.find(pc); it != by_pc_.end()) return it->second;
    if (by_pc_.size() >= kMaxAddresses) by_pc_.clear();  // names stay interned
    const NameId id = intern(lookup(pc));
    by_pc_.emplace(pc, id);
    return id;
  } catch (...) {
    return 0;
  }
}

std::string NativeSymbols::lookup(uint64_t pc) {
  Dl_info info{};
  link_map* lm = nullptr;
  if (::dladdr1(reinterpret_cast<void*>(pc), &info, reinterpret_cast<void**>(&lm),
                RTLD_DL_LINKMAP) == 0 ||
      lm == nullptr) {
    return "[unknown]";  // not in a loaded object: JIT code, or a garbage frame
  }
  if (info.dli_sname != nullptr && info.dli_saddr != nullptr) return demangled(info.dli_sname);
  const bool main_program = lm->l_name == nullptr || lm->l_name[0] == '\0';
  const char* path = main_program ? "/proc/self/exe" : lm->l_name;
  const Object& o = object(lm->l_addr, path);
  const uint64_t rel = pc - lm->l_addr;
  auto it = std::upper_bound(o.syms.begin(), o.syms.end(), rel,
                             [](uint64_t a, const Sym& s) { return a < s.addr; });
  if (it != o.syms.begin()) {
    const Sym& s = *(it - 1);
    if (rel < s.addr + std::max<uint64_t>(s.size, 1)) return demangled(o.names.c_str() + s.name);
  }
  const char* file = info.dli_fname != nullptr && info.dli_fname[0] != '\0' ? info.dli_fname : path;
  char off[24];
  std::snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(rel));
  return std::string(base_name(file)) + off;
}

const NativeSymbols::Object& NativeSymbols::object(uint64_t base, const char* path) {
  static const Object kNone;
  if (objects_.size() >= kMaxObjects && !objects_.contains(base)) return kNone;
  Object& o = objects_[base];
  if (!o.loaded) {
    o.loaded = true;
    load(o, path);
  }
  return o;
}

// The functions of the object's .symtab (none when stripped, unreadable,
// or past the bounds), sorted by address.
void NativeSymbols::load(Object& o, const char* path) {
  const long fd = ::syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  Elf64_Ehdr eh{};
  std::vector<Elf64_Shdr> sh;
  if (pread_all(fd, &eh, sizeof eh, 0) && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(Elf64_Shdr) &&
      eh.e_shnum > 0 && eh.e_shnum <= 4096) {
    sh.resize(eh.e_shnum);
    if (!pread_all(fd, sh.data(), sh.size() * sizeof(Elf64_Shdr), eh.e_shoff)) sh.clear();
  }
  const auto symtab = std::find_if(sh.begin(), sh.end(),
                                   [](const Elf64_Shdr& s) { return s.sh_type == SHT_SYMTAB; });
  if (symtab == sh.end() || symtab->sh_link >= sh.size() ||
      symtab->sh_entsize != sizeof(Elf64_Sym)) {
    ::syscall(SYS_close, fd);
    return;
  }
  const Elf64_Shdr& strtab = sh[symtab->sh_link];
  if (strtab.sh_size == 0 || string_bytes_ + strtab.sh_size > kMaxStringBytes) {
    ::syscall(SYS_close, fd);
    return;
  }
  o.names.resize(strtab.sh_size);
  if (!pread_all(fd, o.names.data(), o.names.size(), strtab.sh_offset)) o.names.clear();
  o.names.push_back('\0');  // a truncated last name still ends
  const size_t count = symtab->sh_size / sizeof(Elf64_Sym);
  std::vector<Elf64_Sym> chunk(kSymChunk);
  for (size_t at = 0; at < count && o.names.size() > 1 && symbols_ < kMaxSymbols;
       at += kSymChunk) {
    const size_t n = std::min(kSymChunk, count - at);
    if (!pread_all(fd, chunk.data(), n * sizeof(Elf64_Sym), symtab->sh_offset + at * sizeof(Elf64_Sym)))
      break;
    for (size_t i = 0; i < n && symbols_ < kMaxSymbols; ++i) {
      const Elf64_Sym& s = chunk[i];
      if (!is_function(s) || s.st_name >= o.names.size()) continue;
      o.syms.push_back(Sym{s.st_value, static_cast<uint32_t>(std::min<uint64_t>(s.st_size, UINT32_MAX)),
                           s.st_name});
      ++symbols_;
    }
  }
  ::syscall(SYS_close, fd);
  std::sort(o.syms.begin(), o.syms.end(), [](const Sym& a, const Sym& b) { return a.addr < b.addr; });
  o.syms.shrink_to_fit();
  string_bytes_ += o.names.size();
}

}  // namespace stallscope::preload
