/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ckpt/sys/comm.h: for implementers of a communicator — the collectives over which the ranks of a sharded save
 * agree (docs/distributed.md). libckpt_mpi (ckpt/ckpt_mpi.h) is one; a program using NCCL, Gloo or
 * torch.distributed fills this table with its own.
 *
 * Every callback receives `payload` first and returns CKPT_OK or a negative CKPT_* code (which then fails the ckpt
 * call that made it). Every call but rank and size is collective: ckpt makes the same calls in the same order on
 * every rank, from the thread that called the ckpt function. Buffers are small (a few KiB: statuses, names, the
 * variables' descriptions), never array data.
 */
#ifndef CKPT_SYS_COMM_H
#define CKPT_SYS_COMM_H

#include "ckpt/ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_REDUCE_MIN 0u
#define CKPT_REDUCE_MAX 1u
#define CKPT_REDUCE_SUM 2u
typedef struct ckpt_comm_ops {
    uint32_t version; /* CKPT_COMM_OPS_VERSION */
    void *payload;
    /* This process's rank (0 <= rank < size) and the number of ranks; called once, by ckpt_comm_new. */
    int (*rank)(void *payload, int32_t *out);
    int (*size)(void *payload, int32_t *out);
    /* Returns once every rank has called it. */
    int (*barrier)(void *payload);
    /* Replaces *value on every rank with the minimum, maximum or sum (op: CKPT_REDUCE_*) of every rank's. */
    int (*all_reduce_i64)(void *payload, int64_t *value, uint32_t op);
    /* Replaces buf[0..size) on every rank with rank root's bytes; every rank passes the same size. */
    int (*broadcast)(void *payload, void *buf, size_t size, int32_t root);
    /* recv[r*size .. (r+1)*size) gets rank r's send[0..size); every rank passes the same size, and recv holds
     * size times the number of ranks bytes. */
    int (*all_gather)(void *payload, const void *send, size_t size, void *recv);
    /* Called once when nothing uses the communicator any more (may be NULL). */
    void (*destroy)(void *payload);
} ckpt_comm_ops;
#define CKPT_COMM_OPS_VERSION 1

/* Makes a communicator from a callback table (copied; `ops->payload` is kept), asking rank and size once.
 * Every callback except destroy is required. Returns CKPT_OK; CKPT_EINVAL (NULL argument, unknown version, a
 * callback missing, a size < 1 or a rank outside [0, size)); the code a rank or size callback returned;
 * CKPT_ENOMEM. On failure destroy is not called: the payload stays the caller's. Since 0.6. */
CKPT_API int ckpt_comm_new(ckpt_comm **out, const ckpt_comm_ops *ops);

#ifdef __cplusplus
}
#endif
#endif /* CKPT_SYS_COMM_H */
