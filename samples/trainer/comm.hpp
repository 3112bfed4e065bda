// Collectives of the sample trainer behind one narrow interface. Two
// backends: local (one rank; nothing to exchange) and MPI, which lives in a
// separate module (libstallscope_trainer_mpi.so) loaded with dlopen only when
// a launcher started this process — so a single-rank run needs no MPI at all.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace trainer {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Starts an all-reduce of a small token; poll done() until true.
  virtual void start_token_allreduce() = 0;
  virtual bool done() = 0;
  virtual void barrier() = 0;
  // Rank 0's `bytes` at `buf` to every rank; false if it failed.
  virtual bool broadcast(void* buf, size_t bytes) = 0;
  virtual std::string name() const = 0;
};

// MPI when the environment says a launcher started us (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE, PMIX_RANK), else local. `note` says which and why.
std::unique_ptr<Comm> make_comm(std::string* note);

}  // namespace trainer
