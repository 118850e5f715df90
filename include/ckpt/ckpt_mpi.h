/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ckpt_mpi — ckpt's coordination callbacks (ckpt_comm_ops) over MPI, in their own library: libckpt_mpi
 * (pkg-config ckpt-mpi, CMake target ckpt::mpi). libckpt itself never links MPI.
 */
#ifndef CKPT_CKPT_MPI_H
#define CKPT_CKPT_MPI_H

#include <mpi.h>

#include "ckpt/ckpt.h"

#if defined(CKPT_BUILDING_MPI_LIBRARY)
#define CKPT_MPI_API __attribute__((visibility("default")))
#else
#define CKPT_MPI_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Makes a communicator over the ranks of `comm` for a manager's options (ckpt_manager_options.comm). The MPI
 * communicator is duplicated (MPI_Comm_dup, collective over `comm`), so ckpt's messages never mix with the
 * program's; the duplicate is freed when the last user of the ckpt_comm releases it, which must happen before
 * MPI_Finalize. MPI must be initialised; ckpt calls MPI from the thread that calls ckpt, so MPI_THREAD_SINGLE
 * suffices as long as that is the thread that initialised MPI (MPI_THREAD_FUNNELED).
 * An MPI call that fails later makes the ckpt call fail with CKPT_ERROR — under MPI's default error handler
 * (MPI_ERRORS_ARE_FATAL) the job aborts first.
 * Returns CKPT_OK; CKPT_EINVAL (NULL out, MPI not initialised or already finalised, MPI_COMM_NULL); CKPT_ERROR
 * (MPI_Comm_dup failed); CKPT_ENOMEM. */
CKPT_MPI_API int ckpt_mpi_comm_new(ckpt_comm **out, MPI_Comm comm);

#ifdef __cplusplus
}
#endif
#endif /* CKPT_CKPT_MPI_H */
