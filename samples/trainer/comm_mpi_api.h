/* The C ABI between the trainer and its MPI module (comm_mpi.cpp). */
#pragma once
#ifdef __cplusplus
extern "C" {
#endif
#define STALLSCOPE_TRAINER_MPI_ABI 2
typedef struct {
  int abi;
  int (*init)(int* rank, int* size); /* 0 or an MPI error code */
  int (*start_allreduce)(void);      /* one token all-reduce in flight at a time */
  int (*test)(int* done);
  int (*barrier)(void);
  int (*bcast)(void* buf, int bytes); /* from rank 0 to all (ABI 2) */
  void (*finalize)(void);
} stallscope_trainer_mpi_v1;
typedef const stallscope_trainer_mpi_v1* (*stallscope_trainer_mpi_get_fn)(void);
#ifdef __cplusplus
}
#endif
