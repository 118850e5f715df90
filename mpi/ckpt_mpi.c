/* SPDX-License-Identifier: Apache-2.0 */
/* libckpt_mpi: ckpt_comm_ops over an MPI communicator. Only the public C API of libckpt is used. */
#include "ckpt/ckpt_mpi.h"

#include <limits.h>
#include <stdlib.h>

typedef struct mpi_comm {
    MPI_Comm comm; /* ckpt's own duplicate */
} mpi_comm;

static int status(int mpi_rc) { return mpi_rc == MPI_SUCCESS ? CKPT_OK : CKPT_ERROR; }

static int mpi_rank(void *payload, int32_t *out) {
    int r = 0;
    const int rc = MPI_Comm_rank(((mpi_comm *)payload)->comm, &r);
    *out = r;
    return status(rc);
}

static int mpi_size(void *payload, int32_t *out) {
    int n = 0;
    const int rc = MPI_Comm_size(((mpi_comm *)payload)->comm, &n);
    *out = n;
    return status(rc);
}

static int mpi_barrier(void *payload) { return status(MPI_Barrier(((mpi_comm *)payload)->comm)); }

static int mpi_all_reduce(void *payload, int64_t *value, uint32_t op) {
    MPI_Op mop;
    switch (op) {
        case CKPT_REDUCE_MIN: mop = MPI_MIN; break;
        case CKPT_REDUCE_MAX: mop = MPI_MAX; break;
        case CKPT_REDUCE_SUM: mop = MPI_SUM; break;
        default: return CKPT_EINVAL;
    }
    return status(MPI_Allreduce(MPI_IN_PLACE, value, 1, MPI_INT64_T, mop, ((mpi_comm *)payload)->comm));
}

static int mpi_broadcast(void *payload, void *buf, size_t size, int32_t root) {
    if (size > INT_MAX) return CKPT_EINVAL;
    return status(MPI_Bcast(buf, (int)size, MPI_BYTE, root, ((mpi_comm *)payload)->comm));
}

static int mpi_all_gather(void *payload, const void *send, size_t size, void *recv) {
    if (size > INT_MAX) return CKPT_EINVAL;
    return status(MPI_Allgather(send, (int)size, MPI_BYTE, recv, (int)size, MPI_BYTE, ((mpi_comm *)payload)->comm));
}

static void mpi_destroy(void *payload) {
    mpi_comm *c = (mpi_comm *)payload;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&c->comm);
    free(c);
}

CKPT_MPI_API int ckpt_mpi_comm_new(ckpt_comm **out, MPI_Comm comm) {
    if (out == NULL) return CKPT_EINVAL;
    *out = NULL;
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized || comm == MPI_COMM_NULL) return CKPT_EINVAL;
    mpi_comm *c = (mpi_comm *)malloc(sizeof *c);
    if (c == NULL) return CKPT_ENOMEM;
    if (MPI_Comm_dup(comm, &c->comm) != MPI_SUCCESS) {
        free(c);
        return CKPT_ERROR;
    }
    ckpt_comm_ops ops = {CKPT_COMM_OPS_VERSION, c, mpi_rank, mpi_size, mpi_barrier, mpi_all_reduce, mpi_broadcast,
                         mpi_all_gather, mpi_destroy};
    const int rc = ckpt_comm_new(out, &ops);
    if (rc != CKPT_OK) {
        MPI_Comm_free(&c->comm);
        free(c);
    }
    return rc;
}
