/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ckpt/sys/errors.h: for libraries that extend ckpt with C functions of their own (libckpt_s3 is one), to fail
 * the way ckpt's functions do.
 */
#ifndef CKPT_SYS_ERRORS_H
#define CKPT_SYS_ERRORS_H

#include "ckpt/ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For libraries that extend ckpt with functions of their own (libckpt_s3 is one): makes `message` the calling
 * thread's last failure, which ckpt_error_message() then returns, as a failing ckpt call would, and returns `code`
 * (so `return ckpt_error_set(CKPT_EINVAL, "...");` ends such a function). NULL means "". Never fails (out of
 * memory, ckpt_error_message() says "out of memory"). Since 0.6. */
CKPT_API int ckpt_error_set(int code, const char *message);

#ifdef __cplusplus
}
#endif
#endif /* CKPT_SYS_ERRORS_H */
