/* RedLock: one client per master, all on one loop thread owned by the
 * RedLock, so that a RedLock lock and its members share one thread and
 * the group never waits for another thread to hear its members. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/base/handle.h"
#include "core/base/thread.h"
#include "core/base/monotime.h"
#include "core/loop/io.h"
#include "multi_internal.h"
#include "core/base/cname.h"

struct hilock_redlock {
    struct ev_loop *loop;
    pthread_t thread;
    hl_async stop;
    hl_prepare tried; /* tells create when every master has tried once */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    bool started;
    bool all_tried;   /* every master connected or failed once */
    bool create_done; /* create stopped waiting for all_tried */
    hilock_multilock *groups; /* its RedLock locks not destroyed, under mu */
    size_t n;
    hilock_options *opts[HILOCK_MAX_MEMBERS];
    hilock_client *clients[HILOCK_MAX_MEMBERS];
    hl_restart_watch *watches[HILOCK_MAX_MEMBERS];
    int create_status[HILOCK_MAX_MEMBERS];
};

static void destroy_groups(hilock_redlock *rl);

static void on_stop(hl_async *w)
{
    hilock_redlock *rl = w->data;
    /* Whoever stopped the thread read the master slots, and the clients
     * behind them, before it took mu in stop_thread; taking mu here
     * orders those reads before the clients go, in a way a race detector
     * sees (the wake-up that brought us here it cannot). */
    pthread_mutex_lock(&rl->mu);
    pthread_mutex_unlock(&rl->mu);
    for (size_t i = 0; i < rl->n; i++) {
        if (rl->clients[i] != NULL)
            hilock_client_destroy(rl->clients[i]);
        rl->clients[i] = NULL;
    }
    hl_async_stop(w);
    hl_prepare_stop(&rl->tried);
    hl_loop_break(rl->loop);
}

/* A master that connected may vote only once its INFO is known, so
 * create waits for that too: otherwise the first lock would find the
 * master connected and still without a vote. */
static bool all_tried(const hilock_redlock *rl)
{
    for (size_t i = 0; i < rl->n; i++) {
        hilock_client *c = rl->clients[i];
        if (c == NULL)
            continue;
        if (!hl_client_first_attempt_done(c))
            return false;
        if (hilock_client_is_connected(c) == 1 &&
            !hl_restart_watch_settled(rl->watches[i]))
            return false;
    }
    return true;
}

/* A master's first attempt, and its first INFO, end inside some
 * callback of the loop; a
 * prepare watcher runs after all of them, just before the loop blocks, so
 * it sees the last master's end in the same iteration and create wakes
 * once, not on a timer. */
static void on_prepare(hl_prepare *w)
{
    hilock_redlock *rl = w->data;
    bool done = all_tried(rl);
    pthread_mutex_lock(&rl->mu);
    if (done && !rl->all_tried) {
        rl->all_tried = true;
        pthread_cond_broadcast(&rl->cv);
    }
    bool stop = done || rl->create_done;
    pthread_mutex_unlock(&rl->mu);
    if (stop)
        hl_prepare_stop(w);
}

static void *loop_main(void *arg)
{
    hilock_redlock *rl = arg;
    /* Clients on a caller's loop belong to the thread that makes them. */
    for (size_t i = 0; i < rl->n; i++) {
        rl->create_status[i] =
            hilock_client_create(&rl->clients[i], rl->opts[i]);
        /* The loop has not run yet, so no connection of the client has
         * come up without the watch. */
        if (rl->clients[i] == NULL)
            continue;
        rl->create_status[i] = hl_restart_watch_attach(
            &rl->watches[i], rl->clients[i],
            hilock_options_quarantine_ms(rl->opts[i]));
        if (rl->create_status[i] != HILOCK_OK) {
            hilock_client_destroy(rl->clients[i]);
            rl->clients[i] = NULL;
        }
    }
    hl_async_start(&rl->stop);
    hl_prepare_start(&rl->tried);
    pthread_mutex_lock(&rl->mu);
    rl->started = true;
    pthread_cond_broadcast(&rl->cv);
    pthread_mutex_unlock(&rl->mu);
    hl_loop_run(rl->loop);
    return NULL;
}

static void redlock_free(hilock_redlock *rl)
{
    for (size_t i = 0; i < rl->n; i++) {
        hilock_options_free(rl->opts[i]);
        hl_restart_watch_free(rl->watches[i]);
    }
    if (rl->loop != NULL)
        hl_loop_destroy(rl->loop);
    pthread_cond_destroy(&rl->cv);
    pthread_mutex_destroy(&rl->mu);
    /* As for clients: a stale copy of the handle must not find a new
     * RedLock at the same address. */
    hl_handle_release(rl);
}

static void stop_thread(hilock_redlock *rl)
{
    pthread_mutex_lock(&rl->mu); /* see on_stop */
    pthread_mutex_unlock(&rl->mu);
    hl_async_send(&rl->stop);
    pthread_join(rl->thread, NULL);
}

static int master_options(hilock_options **out, const hilock_options *base,
                          const char *url, struct ev_loop *loop)
{
    int rc = base ? hilock_options_copy(out, base) : hilock_options_create(out);
    if (rc != HILOCK_OK)
        return rc;
    hilock_options *o = *out;
    rc = hilock_options_set_url(o, url);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_command_timeout_ms(
            o, hilock_options_node_timeout_ms(o));
    if (rc == HILOCK_OK)
        rc = hilock_options_set_loop(o, loop);
    /* The default busy poll keeps a loop thread awake for about one
     * server's round trip after it sends, and a blocking caller awake
     * for its answer: a core well spent while that one server answers
     * on the other.  A RedLock's loop sends to every master at once, and
     * each master's client would keep the thread awake for its own;
     * masters sharing the host then answer later for the core the
     * spinning takes.  Masters on other hosts would save a wake-up per
     * answer at most.  So its loop sleeps, and so do blocking callers of
     * its locks (multi_api.c), unless the caller asked for a busy poll. */
    if (rc == HILOCK_OK && hilock_options_busy_poll_us(o) == 0)
        rc = hilock_options_set_busy_poll_us(o, -1);
    if (rc != HILOCK_OK) {
        hilock_options_free(o);
        *out = NULL;
    }
    return rc;
}

static size_t connected_count(const hilock_redlock *rl)
{
    size_t up = 0;
    for (size_t i = 0; i < rl->n; i++)
        if (rl->clients[i] != NULL &&
            hilock_client_is_connected(rl->clients[i]) == 1)
            up++;
    return up;
}

static void wait_all_tried(hilock_redlock *rl, int64_t timeout_ms)
{
    struct timespec until = hl_monotonic_deadline(HL_MS(timeout_ms));
    int rc = 0;
    pthread_mutex_lock(&rl->mu);
    while (!rl->all_tried && rc == 0)
        rc = pthread_cond_timedwait(&rl->cv, &rl->mu, &until);
    rl->create_done = true;
    pthread_mutex_unlock(&rl->mu);
}

int hilock_redlock_create(hilock_redlock **out, const char *const *urls,
                          size_t n, const hilock_options *base)
{
    if (out == NULL || urls == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    *out = NULL;
    if (n < 3 || n > HILOCK_MAX_MEMBERS || n % 2 == 0)
        return hl_fail(HILOCK_EINVAL,
                       "RedLock needs an odd number of masters, 3..%d: %zu",
                       HILOCK_MAX_MEMBERS, n);
    for (size_t i = 0; i < n; i++)
        if (urls[i] == NULL)
            return hl_fail(HILOCK_EINVAL, "URL %zu is NULL", i);
    if (!hl_op_caller_may_wait())
        return hl_fail(HILOCK_EDEADLK,
                       "a RedLock waits for its masters' first connections: "
                       "not on a loop thread of the library");
    hilock_redlock *rl = hl_calloc(1, sizeof *rl);
    if (rl == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&rl->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&rl->cv, &attr);
    pthread_condattr_destroy(&attr);
    rl->n = n;
    rl->loop = hl_loop_new();
    if (rl->loop == NULL) {
        redlock_free(rl);
        return hl_fail(HILOCK_ENOMEM, "could not make an event loop");
    }
    hl_async_init(&rl->stop, rl->loop, on_stop, rl);
    hl_prepare_init(&rl->tried, rl->loop, on_prepare, rl);
    for (size_t i = 0; i < n; i++) {
        int rc = master_options(&rl->opts[i], base, urls[i], rl->loop);
        if (rc != HILOCK_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", hilock_last_error());
            redlock_free(rl);
            return hl_fail(rc, "master %zu: %s", i, why);
        }
    }
    if (hl_thread_start(&rl->thread, false, loop_main, rl) != 0) {
        redlock_free(rl);
        return hl_fail(HILOCK_ENOMEM, "could not start the loop thread");
    }
    pthread_mutex_lock(&rl->mu);
    while (!rl->started)
        pthread_cond_wait(&rl->cv, &rl->mu);
    pthread_mutex_unlock(&rl->mu);
    size_t quorum = n / 2 + 1;
    for (size_t i = 0; i < n; i++) {
        /* Not a master being down: this process cannot make clients. */
        int st = rl->create_status[i];
        if (st == HILOCK_ENOMEM || st == HILOCK_ERANDOM) {
            stop_thread(rl);
            redlock_free(rl);
            return hl_fail(st, "master %zu: %s", i,
                           st == HILOCK_ENOMEM
                               ? "out of memory"
                               : "the CSPRNG could not make a client id");
        }
    }
    /* Connecting happens on the loop; wait until every master has
     * connected and told its INFO, or failed its first attempt, at most
     * the connect timeout and then the node timeout its INFO has.  A
     * master whose INFO is still out after that does not vote until it
     * arrives.  Masters still down keep reconnecting in the background. */
    wait_all_tried(rl, hl_sat_add(
                           hilock_options_connect_timeout_ms(rl->opts[0]),
                           hilock_options_node_timeout_ms(rl->opts[0])));
    if (connected_count(rl) < quorum) {
        stop_thread(rl);
        redlock_free(rl);
        return hl_fail(HILOCK_ENOQUORUM,
                       "fewer than %zu of %zu masters reachable", quorum, n);
    }
    if (hl_handle_add(rl) != 0) {
        stop_thread(rl);
        redlock_free(rl);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    *out = rl;
    return HILOCK_OK;
}

int hilock_redlock_destroy(hilock_redlock *rl)
{
    if (rl == NULL)
        return hl_fail(HILOCK_EINVAL, "RedLock is NULL");
    if (!hl_handle_is_live(rl))
        return hl_fail(HILOCK_ECLOSED, "RedLock destroyed already");
    /* The RedLock's loop thread runs its clients: any one of them tells
     * whether this is that thread. */
    if (pthread_equal(pthread_self(), rl->thread))
        return hl_fail(HILOCK_EDEADLK, "destroy on the RedLock's thread");
    if (!hl_handle_remove(rl))
        return hl_fail(HILOCK_ECLOSED, "RedLock destroyed already");
    destroy_groups(rl);
    stop_thread(rl);
    redlock_free(rl);
    return HILOCK_OK;
}

size_t hilock_redlock_masters(const hilock_redlock *rl)
{
    return rl ? rl->n : 0;
}

hilock_client *hilock_redlock_client(const hilock_redlock *rl, size_t i)
{
    return rl && i < rl->n ? rl->clients[i] : NULL;
}

void hl_redlock_lock_gone(hilock_redlock *rl, hilock_multilock *m)
{
    pthread_mutex_lock(&rl->mu);
    if (m->rl_prev != NULL)
        m->rl_prev->rl_next = m->rl_next;
    else
        rl->groups = m->rl_next;
    if (m->rl_next != NULL)
        m->rl_next->rl_prev = m->rl_prev;
    m->rl_prev = m->rl_next = NULL;
    pthread_mutex_unlock(&rl->mu);
}

static void group_made(hilock_redlock *rl, hilock_multilock *m)
{
    pthread_mutex_lock(&rl->mu);
    m->rl_next = rl->groups;
    if (rl->groups != NULL)
        rl->groups->rl_prev = m;
    rl->groups = m;
    pthread_mutex_unlock(&rl->mu);
}

/* Destroy the groups the user has not, as hilock_client_destroy does a
 * client's locks.  A group a user's destroy is taking apart meanwhile
 * refuses this one (HILOCK_ECLOSED) and leaves the list soon after; the
 * reference taken under the mutex keeps its memory until then. */
static void destroy_groups(hilock_redlock *rl)
{
    for (;;) {
        pthread_mutex_lock(&rl->mu);
        hilock_multilock *m = rl->groups;
        if (m != NULL)
            hl_multi_ref(m);
        pthread_mutex_unlock(&rl->mu);
        if (m == NULL)
            return;
        if (hilock_multilock_destroy(m) != HILOCK_OK)
            sched_yield();
        hl_multi_unref(m);
    }
}

int hilock_redlock_multilock_create_n(hilock_multilock **out,
                                      hilock_redlock *rl, const char *name,
                                      size_t name_len)
{
    if (out == NULL || rl == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    *out = NULL;
    if (!hl_handle_is_live(rl))
        return hl_fail(HILOCK_ECLOSED, "RedLock destroyed");
    hilock_lock *locks[HILOCK_MAX_MEMBERS];
    for (size_t i = 0; i < rl->n; i++) {
        int rc = rl->clients[i] == NULL
                     ? hl_fail(HILOCK_ECLOSED, "master %zu has no client", i)
                     : hilock_lock_create_n(&locks[i], rl->clients[i], name,
                                          name_len);
        if (rc != HILOCK_OK) {
            for (size_t j = 0; j < i; j++)
                hilock_lock_destroy(locks[j]);
            return rc;
        }
    }
    int rc = hl_multi_create(out, locks, rl->n, rl->n / 2 + 1, rl);
    if (rc != HILOCK_OK) {
        for (size_t i = 0; i < rl->n; i++)
            hilock_lock_destroy(locks[i]);
        return rc;
    }
    group_made(rl, *out);
    return HILOCK_OK;
}

int hilock_redlock_multilock_create(hilock_multilock **out,
                                    hilock_redlock *rl, const char *name)
{
    return hilock_redlock_multilock_create_n(out, rl, name,
                                             hl_cname_len(name));
}
