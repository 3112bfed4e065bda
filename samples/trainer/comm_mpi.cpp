// The trainer's MPI module: built where MPI is found, loaded with dlopen by
// comm.cpp only under a launcher, so the trainer itself never links MPI.
// Only MPI's C API: OpenMPI's mpi.h otherwise pulls in its C++ bindings,
// whose symbols (libmpi_cxx) this module does not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "comm_mpi_api.h"

namespace {

int g_token_in = 0, g_token_out = 0;
MPI_Request g_req = MPI_REQUEST_NULL;

int init(int* rank, int* size) {
  int provided = 0;
  const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) return rc;
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  return 0;
}

int start_allreduce() {
  g_token_in = 1;
  return MPI_Iallreduce(&g_token_in, &g_token_out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &g_req);
}

int test(int* done) { return MPI_Test(&g_req, done, MPI_STATUS_IGNORE); }
int barrier() { return MPI_Barrier(MPI_COMM_WORLD); }
int bcast(void* buf, int bytes) { return MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD); }
void finalize() { MPI_Finalize(); }

const stallscope_trainer_mpi_v1 kApi = {STALLSCOPE_TRAINER_MPI_ABI, init, start_allreduce, test,
                                        barrier, bcast, finalize};

}  // namespace

extern "C" __attribute__((visibility("default"))) const stallscope_trainer_mpi_v1*
stallscope_trainer_mpi_get(void) {
  return &kApi;
}
