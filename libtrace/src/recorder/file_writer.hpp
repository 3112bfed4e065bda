// Writes trace chunks to the process's file, within the disk budget.
//
// Files are created, never reused: an existing file of the same name (an
// earlier image of the process before an exec, a reused pid, or anything
// planted there) is left alone and the next free name taken.
//
// Stop mode: once the next events chunk would pass the budget, it and every
// events chunk after it are refused (the caller counts their events as disk
// drops: budget_spent()) and only the End chunk is still written.
// Ring mode: the budget is split into kRingSegments segment files
// <base>.seg<N>.sst, each complete on its own; when one is full the oldest
// is deleted (its events counted as discarded) and a new one starts with
// the string, track, metadata and attachment chunks re-emitted.
//
// A write error (ENOSPC, EIO, …) stops tracing with one warning. Before each
// batch of writes the descriptor is checked to still be our file, so a
// program that closes all descriptors and reuses the number never receives
// our bytes (RELIABILITY.md 5), and to still have a name in a directory
// still at its path: a file deleted with the run directory, or a run
// directory moved away or replaced, stops tracing too (release() then
// gives the disk space back).
//
// The run directory is held by descriptor from open() on, and every name in
// it (segments, the control file, progress/) is reached with openat and
// friends: the directory removed or replaced later, or a symlink planted in
// it, is never followed (RELIABILITY.md 44).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stallscope/format.hpp"

namespace stallscope::detail {

inline constexpr int kRingSegments = 4;

// A directory held by descriptor (moved above the program's numbers). get()
// checks first that the descriptor still names it: a program that closes
// every descriptor may have reused the number for a directory of its own.
class DirHandle {
 public:
  DirHandle() = default;
  ~DirHandle() { release(); }
  DirHandle(const DirHandle&) = delete;
  DirHandle& operator=(const DirHandle&) = delete;

  // Opens `path` (following it: the path as the run directory was claimed).
  // 0 or -errno.
  int open(const std::string& path);
  // The descriptor, or -1 when it no longer names the directory (reopened
  // by path when the program closed it and the path still names it).
  int get();
  // Does its path (the real path at open) still name it? One stat(2).
  bool at_its_path() const;
  // Closes the descriptor if it is still ours (never the program's).
  void release();

 private:
  int fd_ = -1;
  uint64_t dev_ = 0, ino_ = 0;
  std::string path_;  // real path
};

struct WriterOptions {
  std::string dir;
  std::string base;            // "<host>-r<rank>-<pid>"
  uint64_t max_bytes = 0;      // 0 = unlimited
  bool ring = false;
  format::FileHeader header{}; // magic/version/crc filled by the writer
};

class FileWriter {
 public:
  FileWriter() = default;
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  // Creates the first file; returns 0 or -errno (error text in `error`).
  int open(const WriterOptions& opts, std::string* error);
  // Chunks that every ring segment must repeat (strings, tracks, metadata,
  // attachments) are "sticky": the writer keeps a copy.
  enum class Write { kOk, kBudget, kFailed };
  Write write_chunk(format::ChunkType type, const uint8_t* payload, uint32_t bytes,
                    bool sticky, uint64_t events);
  // Writes the End chunk (beyond the budget if need be) and closes.
  void close(const std::vector<uint8_t>& end_payload);
  // Before an exec: writes the End chunk as close() does but keeps the
  // file open (O_CLOEXEC: a successful exec closes it, complete). A failed
  // exec calls unseal(), which cuts the End chunk off again, and writing
  // goes on in the same file. Nothing may be written while sealed.
  bool seal(const std::vector<uint8_t>& end_payload);
  // false when the End chunk could not be taken back (tracing must stop).
  bool unseal();
  bool sealed() const { return sealed_; }

  // Before a batch of writes: is the descriptor still ours, and the file
  // still linked? Reopens the file when the program closed it; false when
  // tracing must stop (failure() says why).
  bool check_descriptor();
  // After a failure, and in a fork child for the parent's writer: the trace
  // file and the run directory closed (where the descriptors are still
  // ours), nothing written; a deleted file's space is released.
  void release();
  // The run directory's descriptor (see DirHandle::get); -1 when lost.
  int dir_fd() { return dir_.get(); }

  // Largest events chunk worth writing: a ring segment holds several.
  uint32_t chunk_target() const;
  bool failed() const { return failed_; }
  // Stop mode: an events chunk was refused for the budget; no more will be written.
  bool budget_spent() const { return budget_spent_; }
  const std::string& failure() const { return failure_; }
  const std::string& path() const { return path_; }
  // The name the files took: opts.base, or "<base>.<N>" when that was taken.
  const std::string& base() const { return opts_.base; }
  // Set when the first name held something other than a regular file.
  const std::string& note() const { return note_; }
  uint64_t bytes_written() const { return total_bytes_; }
  uint64_t ring_discarded() const { return ring_discarded_; }

 private:
  int open_segment(std::string* error);
  bool rotate();
  bool write_all(const void* data, size_t n);
  bool emit(format::ChunkType type, const uint8_t* payload, uint32_t bytes);
  void fail(const std::string& what, int err);
  std::string segment_path(uint32_t seg) const;
  std::string segment_name(uint32_t seg) const;
  bool fd_is_ours() const;

  WriterOptions opts_;
  DirHandle dir_;
  int fd_ = -1;
  uint64_t dev_ = 0, ino_ = 0;
  std::string path_;
  std::string note_;
  uint64_t offset_ = 0;        // size of the current file
  uint64_t total_bytes_ = 0;   // over all segments
  uint64_t seq_ = 0;
  uint32_t segment_ = 0;
  uint64_t segment_events_[kRingSegments] = {};
  uint64_t ring_discarded_ = 0;
  bool failed_ = false;
  bool budget_spent_ = false;
  bool sealed_ = false;
  uint64_t seal_offset_ = 0, seal_total_ = 0, seal_seq_ = 0;  // before the End chunk
  std::string failure_;
  std::vector<std::pair<format::ChunkType, std::vector<uint8_t>>> sticky_;
};

}  // namespace stallscope::detail
