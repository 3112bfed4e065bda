// Is a file stallscope's preload shim? `stallscope run` checks the library
// it is about to put on LD_PRELOAD: the dynamic loader skips a file it
// cannot preload (with a line on stderr the user may never see), and the
// run then ends with no trace. The file is read, never loaded: a regular
// file, an ELF shared object for this machine, which defines the shim's
// marker symbol (the one the NCCL profiler plugin looks the shim up by).
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "cmd_run.hpp"
#include "stallscope/internal/fd.hpp"

namespace stallscope::cli::run {
namespace {

constexpr const char* kMarker = "stallscope_preload_nccl_plugin_v1";
constexpr uint64_t kMaxTable = uint64_t{64} << 20;  // a symbol or string table

#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
#else
constexpr uint16_t kMachine = EM_NONE;  // not checked
#endif

// Reads `n` bytes at `off` of a file of `size` bytes into `out`.
bool read_exact(int fd, uint64_t size, uint64_t off, uint64_t n, void* out) {
  if (off > size || n > size - off) return false;
  return ::pread(fd, out, n, static_cast<off_t>(off)) == static_cast<ssize_t>(n);
}

// A section's bytes, within the file and kMaxTable.
bool read_section(int fd, uint64_t size, const Elf64_Shdr& sh, std::vector<char>& out) {
  if (sh.sh_size > kMaxTable) return false;
  out.resize(sh.sh_size);
  return read_exact(fd, size, sh.sh_offset, sh.sh_size, out.data());
}

// Whether the dynamic symbol table defines `name`; "" or what is wrong.
std::string defines(int fd, uint64_t size, const Elf64_Ehdr& eh, const char* name) {
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0)
    return "an ELF shared object without section headers";
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (!read_exact(fd, size, eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), sh.data()))
    return "a damaged ELF file (its section headers lie past its end)";
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_DYNSYM) continue;
    std::vector<char> syms, strs;
    if (s.sh_entsize != sizeof(Elf64_Sym) || s.sh_link >= sh.size() ||
        !read_section(fd, size, s, syms) || !read_section(fd, size, sh[s.sh_link], strs))
      return "a damaged ELF file (its dynamic symbol table cannot be read)";
    for (size_t at = 0; at + sizeof(Elf64_Sym) <= syms.size(); at += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, syms.data() + at, sizeof sym);
      if (sym.st_shndx == SHN_UNDEF || sym.st_name >= strs.size()) continue;
      const char* n = strs.data() + sym.st_name;
      if (::strnlen(n, strs.size() - sym.st_name) == std::strlen(name) && std::strcmp(n, name) == 0)
        return "";
    }
    break;
  }
  return std::string("a shared object, but not stallscope's preload shim (it does not define ") +
         name + ")";
}

}  // namespace

std::string preload_lib_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  const internal::Fd fd = internal::Fd::open_read(path);
  if (fd.get() < 0) return std::strerror(errno);
  const auto size = static_cast<uint64_t>(st.st_size);
  Elf64_Ehdr eh{};
  if (!read_exact(fd.get(), size, 0, EI_NIDENT, eh.e_ident) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return "not an ELF file";
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return "an ELF file for another kind of machine (not 64-bit little-endian)";
  if (!read_exact(fd.get(), size, 0, sizeof eh, &eh)) return "a damaged ELF file (cut short)";
  if (kMachine != EM_NONE && eh.e_machine != kMachine)
    return "an ELF file for another processor (e_machine " + std::to_string(eh.e_machine) + ")";
  if (eh.e_type != ET_DYN) return "an ELF file, but not a shared object";
  return defines(fd.get(), size, eh, kMarker);
}

}  // namespace stallscope::cli::run
