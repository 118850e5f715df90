/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ckpt_s3 — checkpoints on S3-compatible object storage (AWS S3, MinIO, Ceph RGW, GCS's S3 interface), in a
 * library of its own: libckpt_s3 (pkg-config ckpt-s3, CMake target ckpt::s3), built on libcurl. libckpt itself
 * never links it: it loads libckpt_s3 when a path is an s3:// URL (see ckpt_storage_s3_new_url).
 *
 * The storage maps ckpt's '/'-separated paths to keys under a bucket and an optional prefix. What it does with
 * ckpt's save sequence (docs/object-storage.md has the whole story):
 *  - a file is uploaded straight to its final key: one PUT when it is at most part_size bytes, a multipart upload
 *    above that, whose parts go up in parallel (memory: about (parallelism + 1) x part_size per file being saved).
 *    Nothing is visible under the key until the commit, which is the PUT itself or the CompleteMultipartUpload: a
 *    reader sees the old object or the new one, never a part of one. A save that fails or is abandoned aborts its
 *    multipart upload (a process that is killed cannot: give the bucket a lifecycle rule that aborts incomplete
 *    multipart uploads after a day);
 *  - reads are ranged GETs pinned to the object they opened (If-Match on its ETag: an object replaced while it is
 *    read fails the read instead of mixing two versions); large reads are split into parallel ranges, and a file
 *    read in order has its next part_size bytes fetched while it is read (memory: at most 3 x part_size per file
 *    being read);
 *  - listings are ListObjectsV2 with a delimiter (directories are the common prefixes), removals are DELETEs;
 *  - there is no rename of directories, so sharded steps commit by writing their manifest last; and there is no
 *    lock: the store cannot give one (a manager on S3 trusts that one job writes a directory at a time).
 * Transient failures (HTTP 500, 502, 503, 504, 429 and S3's SlowDown, resets, timeouts) are retried with
 * exponential backoff and full jitter, up to max_attempts tries per request; others fail at once (403, 404, a bad
 * signature) with CKPT_EIO or CKPT_ENOTFOUND and a message naming the bucket, key, HTTP status and S3 error code.
 */
#ifndef CKPT_CKPT_S3_H
#define CKPT_CKPT_S3_H

#include "ckpt/ckpt.h"

#if defined(CKPT_BUILDING_S3_LIBRARY)
#define CKPT_S3_API __attribute__((visibility("default")))
#else
#define CKPT_S3_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ckpt_s3_options.addressing */
#define CKPT_S3_ADDRESSING_AUTO 0u    /* path-style for an explicit endpoint, virtual-host for AWS's own */
#define CKPT_S3_ADDRESSING_PATH 1u    /* http(s)://endpoint/bucket/key */
#define CKPT_S3_ADDRESSING_VIRTUAL 2u /* http(s)://bucket.endpoint/key */

/* Where and how to reach the store. Every field left NULL or 0 takes its value from the environment, as the AWS
 * command-line tools and SDKs do, and then from a default:
 *   endpoint_url       AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's endpoint_url, else
 *                      https://s3.<region>.amazonaws.com
 *   region             AWS_REGION, AWS_DEFAULT_REGION, the profile's region (~/.aws/config), else us-east-1
 *   access_key_id,     AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN when the first two are set,
 *   secret_access_key, else the profile's aws_access_key_id, aws_secret_access_key and aws_session_token from
 *   session_token      ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE), then ~/.aws/config (AWS_CONFIG_FILE)
 *   profile            AWS_PROFILE, else "default"
 *   max_attempts       AWS_MAX_ATTEMPTS, the profile's max_attempts, else as many as retry_window_ms allows
 *   retry_window_ms    CKPT_S3_RETRY_SECONDS (whole seconds), else 60 s
 * Without credentials anywhere, requests go unsigned (a public bucket). */
typedef struct ckpt_s3_options {
    uint32_t version;              /* CKPT_S3_OPTIONS_VERSION */
    const char *bucket;            /* required (ckpt_storage_s3_new_url takes it from the URL) */
    const char *prefix;            /* keys are "<prefix>/<path>"; NULL or "" = the bucket's root */
    const char *endpoint_url;      /* "http://127.0.0.1:9000", "https://storage.googleapis.com" */
    const char *region;
    const char *access_key_id;
    const char *secret_access_key;
    const char *session_token;
    const char *profile;
    uint64_t part_size;            /* bytes per part of a multipart upload and per range of a large read; 0 = 16 MiB;
                                      at least 5 MiB (S3's minimum part) */
    uint32_t parallelism;          /* requests in flight per file; 0 = 4 */
    uint32_t max_attempts;         /* tries per request, the first included; 1 = no retries; 0 = no limit but the
                                      retry window */
    uint32_t connect_timeout_ms;   /* 0 = 10 s */
    uint32_t stall_timeout_ms;     /* a request that moves no byte for this long is abandoned (and retried); 0 = 30 s */
    uint32_t addressing;           /* CKPT_S3_ADDRESSING_*; default AUTO */
    /* Since version 2 (0.12): how long a request keeps being retried after what S3 asks clients to retry (HTTP 5xx,
     * throttling, a dropped or refused connection, a stall), from its first try; 0 = 60 s. A gateway restarting in
     * the middle of a save or a restore then costs a wait, not the checkpoint. Tries back off with full jitter,
     * from 50 ms up to 2 s apart. */
    uint32_t retry_window_ms;
} ckpt_s3_options;
#define CKPT_S3_OPTIONS_VERSION 2
#define CKPT_S3_OPTIONS_INIT \
    { CKPT_S3_OPTIONS_VERSION, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0 }

/* Fills *opts with the defaults of struct version `version` (pass CKPT_S3_OPTIONS_VERSION). Returns CKPT_OK,
 * CKPT_EINVAL (NULL opts, or a version this library does not know). */
CKPT_S3_API int ckpt_s3_options_init(ckpt_s3_options *opts, uint32_t version);

/* Makes a storage over a bucket: pass it as the `storage` of any ckpt options. Nothing is sent until it is used
 * (a wrong bucket or credentials fail the first call that uses it). Returns CKPT_OK; CKPT_EINVAL (NULL argument,
 * no bucket, an unknown version or addressing, an endpoint that is not an http(s) URL, a part size under 5 MiB);
 * CKPT_EFORMAT (an AWS configuration file that cannot be parsed, named with its line); CKPT_ENOMEM; CKPT_ERROR
 * (libcurl could not be initialised). */
CKPT_S3_API int ckpt_storage_s3_new(ckpt_storage **out, const ckpt_s3_options *opts);

/* For "s3://bucket/key/...": a storage over that bucket (opts may be NULL; its bucket and prefix are ignored), and
 * in *path the key part of the URL ("key/..."; "" for "s3://bucket" and "s3://bucket/"), pointing into `url`. This
 * is what libckpt does for an s3:// path given with a NULL storage. Returns the codes of ckpt_storage_s3_new, and
 * CKPT_EINVAL for a URL that is not s3://<bucket>[/<key>]. */
CKPT_S3_API int ckpt_storage_s3_new_url(ckpt_storage **out, const char *url, const ckpt_s3_options *opts,
                                        const char **path);

#ifdef __cplusplus
}
#endif
#endif /* CKPT_CKPT_S3_H */
