/* SPDX-License-Identifier: Apache-2.0 */
/*
 * save_on_sigterm: a training loop that saves when it is told to stop (SIGTERM, as schedulers send before
 * preempting a job) and resumes from that checkpoint when started again.
 *
 * The signal handler only calls ckpt_manager_request_save, which is async-signal-safe: the next
 * ckpt_manager_should_save returns 1, and the loop saves there, outside the handler, and exits. Between requests
 * the loop saves every `save_every` steps through save_every_steps.
 *
 *     save_on_sigterm logdir [steps [save_every [sleep_us]]]
 *
 *   steps       train until this step (default 100000), then save and exit
 *   save_every  also save every this many steps (default 0: only on SIGTERM and at the end)
 *   sleep_us    sleep this many microseconds per step (default 1000), so that a signal finds it mid-run
 *
 * Prints "resumed at step N" or "starting from scratch", then "running" once the handler is installed, and
 * "saved at step N on SIGTERM" or "finished at step N, state S" (S with 17 significant digits).
 */
#define _POSIX_C_SOURCE 200809L /* sigaction, nanosleep */

#include <ckpt/ckpt.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static ckpt_manager *manager;
static volatile sig_atomic_t stop_requested;

static void on_sigterm(int sig) {
    (void)sig;
    ckpt_manager_request_save(manager); /* async-signal-safe: one atomic store */
    stop_requested = 1;
}

static int fail(const char *what, int rc) {
    fprintf(stderr, "%s: %s (%s)\n", what, ckpt_strerror(rc), ckpt_error_message());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s logdir [steps [save_every [sleep_us]]]\n", argv[0]);
        return 2;
    }
    const int64_t steps = argc > 2 ? strtoll(argv[2], NULL, 10) : 100000;
    const int64_t save_every = argc > 3 ? strtoll(argv[3], NULL, 10) : 0;
    const long sleep_us = argc > 4 ? strtol(argv[4], NULL, 10) : 1000;

    /* The training state: a step counter and a value that depends on every step before it. */
    int64_t step = 0;
    double state = 1.0;
    ckpt_vars *vars = NULL;
    int rc = ckpt_vars_new(&vars);
    if (rc == CKPT_OK) rc = ckpt_vars_add(vars, "step", CKPT_INT64, 0, NULL, &step, CKPT_VARS_BORROW);
    if (rc == CKPT_OK) rc = ckpt_vars_add(vars, "state", CKPT_FLOAT64, 0, NULL, &state, CKPT_VARS_BORROW);
    if (rc != CKPT_OK) return fail("ckpt_vars_add", rc);

    ckpt_manager_options o = CKPT_MANAGER_OPTIONS_INIT;
    o.keep = 3;
    o.save_every_steps = save_every;
    rc = ckpt_manager_open(&manager, argv[1], &o);
    if (rc != CKPT_OK) return fail("ckpt_manager_open", rc);

    int64_t restored = 0;
    rc = ckpt_manager_restore(manager, vars, CKPT_LATEST, &restored);
    if (rc == CKPT_OK) {
        printf("resumed at step %" PRId64 "\n", step);
    } else if (rc == CKPT_ENOTFOUND) {
        printf("starting from scratch\n");
    } else {
        return fail("ckpt_manager_restore", rc);
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0) {
        perror("sigaction");
        return 1;
    }
    printf("running\n");
    fflush(stdout);

    const struct timespec pause = {0, sleep_us * 1000L};
    int64_t last_saved = step;
    while (step < steps) {
        step += 1;
        state = state * 0.999 + 1.0 / (double)step; /* one training step */
        if (sleep_us > 0) nanosleep(&pause, NULL);
        /* Read before asking: the handler requests the save before it sets the flag, so when the flag is seen
         * here, this should_save (or an earlier one, which then saved) has reported the request. */
        const int stopping = stop_requested;
        const int due = ckpt_manager_should_save(manager, step);
        if (due < 0) return fail("ckpt_manager_should_save", due);
        if (due || step == steps) {
            rc = ckpt_manager_save(manager, vars, step);
            if (rc != CKPT_OK) return fail("ckpt_manager_save", rc);
            last_saved = step;
        }
        if (stopping) {
            rc = ckpt_manager_close(manager);
            if (rc != CKPT_OK) return fail("ckpt_manager_close", rc);
            printf("saved at step %" PRId64 " on SIGTERM\n", last_saved);
            ckpt_vars_free(vars);
            return 0;
        }
    }
    printf("finished at step %" PRId64 ", state %.17g\n", step, state);
    rc = ckpt_manager_close(manager);
    ckpt_vars_free(vars);
    return rc == CKPT_OK ? 0 : fail("ckpt_manager_close", rc);
}
