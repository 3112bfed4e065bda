#include "comm.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "comm_mpi_api.h"

namespace trainer {

namespace {

class LocalComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void start_token_allreduce() override {}
  bool done() override { return true; }
  void barrier() override {}
  bool broadcast(void*, size_t) override { return true; }
  std::string name() const override { return "local (1 rank)"; }
};

class MpiComm final : public Comm {
 public:
  MpiComm(void* lib, const stallscope_trainer_mpi_v1* api, int rank, int size)
      : lib_(lib), api_(api), rank_(rank), size_(size) {}
  ~MpiComm() override {
    api_->finalize();
    // The module stays loaded: MPI libraries do not survive being unloaded.
    static_cast<void>(lib_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void start_token_allreduce() override { api_->start_allreduce(); }
  bool done() override {
    int d = 0;
    return api_->test(&d) != 0 || d != 0;
  }
  void barrier() override { api_->barrier(); }
  bool broadcast(void* buf, size_t bytes) override {
    return bytes <= static_cast<size_t>(INT32_MAX) && api_->bcast(buf, static_cast<int>(bytes)) == 0;
  }
  std::string name() const override { return "MPI (" + std::to_string(size_) + " ranks)"; }

 private:
  void* lib_;
  const stallscope_trainer_mpi_v1* api_;
  int rank_, size_;
};

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

std::string module_path() {
  if (const char* p = std::getenv("STALLSCOPE_TRAINER_MPI_MODULE")) return p;
  Dl_info info{};
  std::string dir = ".";
  if (dladdr(reinterpret_cast<void*>(&launched_by_mpi), &info) && info.dli_fname) {
    dir = info.dli_fname;
    dir = dir.substr(0, dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/'));
  }
  return (dir.empty() ? std::string(".") : dir) + "/libstallscope_trainer_mpi.so";
}

}  // namespace

std::unique_ptr<Comm> make_comm(std::string* note) {
  if (!launched_by_mpi()) {
    *note = "single rank: no launcher, MPI not loaded";
    return std::make_unique<LocalComm>();
  }
  const std::string path = module_path();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  auto get = lib ? reinterpret_cast<stallscope_trainer_mpi_get_fn>(dlsym(lib, "stallscope_trainer_mpi_get"))
                 : nullptr;
  const stallscope_trainer_mpi_v1* api = get ? get() : nullptr;
  int rank = 0, size = 1;
  if (!api || api->abi != STALLSCOPE_TRAINER_MPI_ABI || api->init(&rank, &size) != 0) {
    *note = "launched under MPI but " + path + " could not be used (" +
            (lib ? "bad module or MPI_Init failed" : dlerror()) + "); running as one rank";
    return std::make_unique<LocalComm>();
  }
  *note = "MPI: rank " + std::to_string(rank) + " of " + std::to_string(size);
  return std::make_unique<MpiComm>(lib, api, rank, size);
}

}  // namespace trainer
