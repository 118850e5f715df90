/* SPDX-License-Identifier: Apache-2.0 */
/*
 * train_resume: a training loop that survives kill -9.
 *
 * Logistic regression trained by full-batch gradient descent on a fixed data set (512 points in 8 dimensions,
 * generated from a fixed-seed LCG). The training state — the weights w[8], the bias b and the step counter — is
 * checkpointed every few steps through a checkpoint manager (the newest 10 are kept), with the step as the index
 * and the loss recorded as a metric (`ckpt report logdir -o report.html` draws it).
 * At start the program resumes from the latest checkpoint, if any. Since the state saved is everything the loop
 * needs, a run that is killed and restarted prints exactly the losses an uninterrupted run prints.
 *
 *     train_resume logdir [steps [save_every [sleep_us]]]
 *
 *   logdir      checkpoints go to logdir/ckpt/0000000100.npz, … (numpy.load opens them)
 *   steps       train until this step (default 2000)
 *   save_every  save every this many steps, and at the last step (default 100)
 *   sleep_us    sleep this many microseconds per step, to leave time to kill it mid-run (default 0)
 *
 * Prints "resumed at step N, loss L" or "starting from scratch", then "step N loss L saved" after each save.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <ckpt/ckpt.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N_POINTS 512
#define N_DIMS 8
#define LEARNING_RATE 0.5

/* The data set: fixed, regenerated identically by every run, so it is not part of the checkpoint. */
static double xs[N_POINTS][N_DIMS];
static double ys[N_POINTS];

/* Knuth's MMIX LCG; the top 53 bits as a double in [-1, 1). */
static double lcg_uniform(uint64_t *state) {
    *state = *state * 6364136223846793005u + 1442695040888963407u;
    return (double)(*state >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* Points uniform in [-1, 1)^8, labelled by a hidden linear model plus noise (so the loss never reaches 0). */
static void make_data(void) {
    uint64_t state = 20240601u;
    double true_w[N_DIMS];
    int i, j;
    for (j = 0; j < N_DIMS; ++j) true_w[j] = 2.0 * lcg_uniform(&state);
    for (i = 0; i < N_POINTS; ++i) {
        double z = 0.25;
        for (j = 0; j < N_DIMS; ++j) {
            xs[i][j] = lcg_uniform(&state);
            z += true_w[j] * xs[i][j];
        }
        ys[i] = z + 0.5 * lcg_uniform(&state) > 0.0 ? 1.0 : 0.0;
    }
}

static double logit(const double *w, double b, const double *x) {
    double z = b;
    int j;
    for (j = 0; j < N_DIMS; ++j) z += w[j] * x[j];
    return z;
}

/* Mean binary cross-entropy, computed stably: max(z, 0) - z*y + log(1 + exp(-|z|)). */
static double loss(const double *w, double b) {
    double total = 0.0;
    int i;
    for (i = 0; i < N_POINTS; ++i) {
        const double z = logit(w, b, xs[i]);
        total += (z > 0.0 ? z : 0.0) - z * ys[i] + log1p(exp(-fabs(z)));
    }
    return total / N_POINTS;
}

/* One step of gradient descent on the whole data set. */
static void train_step(double *w, double *b) {
    double grad_w[N_DIMS] = {0}, grad_b = 0.0;
    int i, j;
    for (i = 0; i < N_POINTS; ++i) {
        const double err = 1.0 / (1.0 + exp(-logit(w, *b, xs[i]))) - ys[i];
        for (j = 0; j < N_DIMS; ++j) grad_w[j] += err * xs[i][j];
        grad_b += err;
    }
    for (j = 0; j < N_DIMS; ++j) w[j] -= LEARNING_RATE * grad_w[j] / N_POINTS;
    *b -= LEARNING_RATE * grad_b / N_POINTS;
}

/* Prints the failure of a ckpt call; returns 1 if rc is a failure. */
static int failed(int rc, const char *what) {
    if (rc == CKPT_OK) return 0;
    fprintf(stderr, "train_resume: %s failed: %s: %s\n", what, ckpt_strerror(rc), ckpt_error_message());
    return 1;
}

/* argv[i] as a number in [min, max], or `fallback` when absent. Exits with a usage message when malformed. */
static long long number_arg(int argc, char **argv, int i, long long fallback, long long min, long long max) {
    char *end = NULL;
    long long value;
    if (i >= argc) return fallback;
    errno = 0;
    value = strtoll(argv[i], &end, 10);
    if (errno != 0 || end == argv[i] || *end != '\0' || value < min || value > max) {
        fprintf(stderr, "train_resume: bad argument '%s' (expected %lld to %lld)\n", argv[i], min, max);
        fprintf(stderr, "usage: train_resume logdir [steps [save_every [sleep_us]]]\n");
        exit(1);
    }
    return value;
}

int main(int argc, char **argv) {
    /* The training state: every byte the loop depends on. Borrowed by the collection, so a restore writes
     * straight into these variables. */
    double w[N_DIMS] = {0};
    double b = 0.0;
    int64_t step = 0;
    const int64_t w_shape[1] = {N_DIMS};

    long long total, save_every, sleep_us;
    ckpt_vars *state = NULL;
    ckpt_manager *manager = NULL;
    ckpt_manager_options opts = CKPT_MANAGER_OPTIONS_INIT;
    int rc, status = 1;

    if (argc < 2 || argc > 5) {
        fprintf(stderr, "usage: train_resume logdir [steps [save_every [sleep_us]]]\n");
        return 1;
    }
    total = number_arg(argc, argv, 2, 2000, 0, INT64_MAX);
    save_every = number_arg(argc, argv, 3, 100, 1, INT64_MAX);
    sleep_us = number_arg(argc, argv, 4, 0, 0, 60000000);
    make_data();

    if (failed(ckpt_vars_new(&state), "ckpt_vars_new") ||
        failed(ckpt_vars_add(state, "w", CKPT_FLOAT64, 1, w_shape, w, CKPT_VARS_BORROW), "ckpt_vars_add(w)") ||
        failed(ckpt_vars_add(state, "b", CKPT_FLOAT64, 0, NULL, &b, CKPT_VARS_BORROW), "ckpt_vars_add(b)") ||
        failed(ckpt_vars_add(state, "step", CKPT_INT64, 0, NULL, &step, CKPT_VARS_BORROW), "ckpt_vars_add(step)")) {
        goto done;
    }

    opts.keep = 10;
    if (failed(ckpt_manager_open(&manager, argv[1], &opts), "ckpt_manager_open")) goto done;

    /* Resume: the newest checkpoint that reads back whole (older ones are tried past a corrupt file). */
    rc = ckpt_manager_restore(manager, state, CKPT_LATEST, NULL);
    if (rc == CKPT_OK) {
        printf("resumed at step %" PRId64 ", loss %.17g\n", step, loss(w, b));
    } else if (rc == CKPT_ENOTFOUND) {
        printf("starting from scratch\n");
    } else {
        failed(rc, "ckpt_manager_restore");
        goto done;
    }
    fflush(stdout); /* a kill -9 must not swallow what was printed */

    while (step < total) {
        train_step(w, &b);
        ++step;
        if (step % save_every == 0 || step == total) {
            /* Durable when it returns: the next run resumes from here at the latest. */
            const char *metric_names[1] = {"loss"};
            const double metric_values[1] = {loss(w, b)};
            if (failed(ckpt_manager_save_metrics(manager, state, step, metric_names, metric_values, 1),
                       "ckpt_manager_save_metrics"))
                goto done;
            printf("step %" PRId64 " loss %.17g saved\n", step, metric_values[0]);
            fflush(stdout);
        }
        if (sleep_us > 0) {
            struct timespec pause;
            pause.tv_sec = (time_t)(sleep_us / 1000000);
            pause.tv_nsec = (long)(sleep_us % 1000000) * 1000L;
            while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
            }
        }
    }
    printf("trained to step %" PRId64 "\n", step);
    status = 0;

done:
    if (failed(ckpt_manager_close(manager), "ckpt_manager_close")) status = 1;
    ckpt_vars_free(state);
    fflush(stdout);
    return status;
}
