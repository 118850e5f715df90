/* SPDX-License-Identifier: Apache-2.0 */
/* A program of libckpt_mpi's users: a communicator over MPI_COMM_WORLD reports its rank and size. */
#include <ckpt/ckpt_mpi.h>

#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ckpt_comm *comm = NULL;
    int rc = ckpt_mpi_comm_new(&comm, MPI_COMM_WORLD);
    const int good = rc == CKPT_OK && ckpt_comm_rank(comm) == rank && ckpt_comm_size(comm) == size;
    if (!good) fprintf(stderr, "ckpt_mpi_comm_new: %d, rank %d of %d\n", rc, ckpt_comm_rank(comm), ckpt_comm_size(comm));
    ckpt_comm_free(comm);
    MPI_Finalize();
    return good ? 0 : 1;
}
