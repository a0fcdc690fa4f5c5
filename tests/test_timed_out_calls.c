/* A blocking call that times out leaks nothing and lies about nothing:
 * a call given up before anything of it was written never runs and says
 * HILOCK_ETIMEDOUT; one whose request was written says HILOCK_EINDOUBT,
 * and a release said so counts as done.  A caller that releases again
 * only after HILOCK_ETIMEDOUT then believes exactly the holds the server
 * and the client have.  Run under valgrind and AddressSanitizer too,
 * where a given-up operation that is never freed is a failure. */
/* ctest-timeout: 240 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include <ev.h>

#include "core/engine/engine_internal.h"
#include "core/runtime/client_state.h"
#include "core/transport/conn_internal.h"
#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/options.h"
#include "support/busy_loop.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/loop_call.h"

static hl_lock_fixture fx;

/* ---- what each side counts ---------------------------------------------- */

typedef struct count_read {
    hilock_lock *lock;
    uint64_t owner;
    int64_t count;
} count_read;

static void read_client_count(hilock_client *c, void *arg)
{
    count_read *r = arg;
    hl_hold *h = hl_hold_find(r->lock, r->owner);

    (void)c;
    r->count = h != NULL && !h->lost ? h->count : 0;
}

/* The holds of the calling thread the client counts. */
static int64_t client_count(hilock_client *c, hilock_lock *lock)
{
    count_read r = { lock, hilock_thread_owner(), -1 };

    hl_run_on_loop(c, read_client_count, &r);
    return r.count;
}

/* The holds of the calling thread the server counts. */
static int64_t server_count(hilock_lock *lock)
{
    int64_t n = -1;

    assert_status(hilock_lock_hold_count(lock, &n), HILOCK_OK);
    return n;
}

typedef struct settled {
    hilock_client *client;
    hilock_lock *lock;
    int64_t want;
} settled;

static bool counts_settled(void *arg)
{
    settled *s = arg;

    return server_count(s->lock) == s->want &&
           client_count(s->client, s->lock) == s->want;
}

/* Fails unless the server and the client both come to count want holds. */
static void expect_counts(hilock_client *c, hilock_lock *lock, int64_t want)
{
    settled s = { c, lock, want };

    if (!hl_wait_until(counts_settled, &s, hl_widen(15000)))
        fail_msg("the server counts %lld holds, the client %lld; the "
                 "caller believes %lld",
                 (long long)server_count(lock),
                 (long long)client_count(c, lock), (long long)want);
}

/* The caller's rule from lock.h: HILOCK_ETIMEDOUT means the release did
 * not run, so it is released again; HILOCK_EINDOUBT means it counts. */
static int release_as_documented(hilock_lock *lock, int64_t *believed)
{
    int rc = hilock_lock_release(lock);

    if (rc == HILOCK_ETIMEDOUT)
        rc = hilock_lock_release(lock);
    if (rc == HILOCK_OK || rc == HILOCK_EINDOUBT)
        (*believed)--;
    return rc;
}

/* ---- a loop held busy --------------------------------------------------- */

/* Holds the loop in a callback until released: no operation starts and
 * nothing is written meanwhile, so a blocking call runs out of time. */
/* A client whose blocking calls give up soon. */
static hilock_client *impatient_client(void)
{
    const hl_client_opts opts = { .command_timeout_ms = hl_widen(300) };

    return hl_new_client(fx.server, &opts);
}

/* ---- tests -------------------------------------------------------------- */

/* A release queued while the loop is busy is given up before it starts:
 * it must never run, or the caller's second release would drop a second
 * hold. */
static void test_release_given_up_before_start_never_runs(void **state)
{
    hilock_client *c = impatient_client();
    hilock_lock *l = hl_new_lock(c, "giveup:release");
    hilock_lock *spare = hl_new_lock(c, "giveup:spare");
    static hl_busy_loop bl;
    int64_t believed = 2;

    (void)state;
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    hl_busy_loop_hold(spare, &bl, hl_widen(60000));
    int rc = hilock_lock_release(l);
    assert_true(hl_busy_loop_release(&bl));
    assert_status(rc, HILOCK_ETIMEDOUT);
    /* Behind the given-up release on the loop: once these answer, it
     * would have run. */
    expect_counts(c, l, believed);
    assert_status(release_as_documented(l, &believed), HILOCK_OK);
    expect_counts(c, l, 1);
    assert_int_equal(believed, 1);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    expect_counts(c, l, 0);
    hl_free_lock(spare);
    hl_free_lock(l);
    hl_free_client(c);
}

/* A raw command given up before it was written never reaches the
 * server. */
static void test_command_given_up_before_start_never_runs(void **state)
{
    hilock_client *c = impatient_client();
    hilock_lock *spare = hl_new_lock(c, "giveup:spare");
    static hl_busy_loop bl;
    const char *set[] = { "SET", "giveup:key", "written" };
    const char *get[] = { "GET", "giveup:key" };
    hilock_reply *reply = NULL;

    (void)state;
    hl_busy_loop_hold(spare, &bl, hl_widen(60000));
    int rc = hilock_client_command(c, 3, set, NULL, &reply);
    assert_true(hl_busy_loop_release(&bl));
    assert_status(rc, HILOCK_ETIMEDOUT);
    assert_null(reply);
    /* Queued behind the SET on the same loop and connection. */
    assert_status(hilock_client_command(c, 2, get, NULL, &reply), HILOCK_OK);
    assert_non_null(reply);
    assert_int_equal(reply->type, HILOCK_REPLY_NIL);
    hilock_reply_free(reply);
    hl_free_lock(spare);
    hl_free_client(c);
}

/* A release written to a stopped server gets no answer within the
 * command timeout.  Whether the server runs it later is unknown; the
 * client counts it as done and brings the server to agree, and says so,
 * so the caller does not release again. */
static void test_release_sent_without_answer_counts_once(void **state)
{
    hilock_client *c = impatient_client();
    hilock_lock *l = hl_new_lock(c, "indoubt:release");
    int64_t believed = 2;

    (void)state;
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    hl_fixture_pause(fx.server);
    int rc = hilock_lock_release(l);
    hl_fixture_resume(fx.server);
    /* The caller's rule, as in release_as_documented. */
    if (rc == HILOCK_ETIMEDOUT)
        rc = hilock_lock_release(l);
    if (rc == HILOCK_OK || rc == HILOCK_EINDOUBT)
        believed--;
    expect_counts(c, l, believed);
    assert_status(rc, HILOCK_EINDOUBT);
    assert_status(release_as_documented(l, &believed), HILOCK_OK);
    assert_int_equal(believed, 0);
    expect_counts(c, l, 0);
    hl_free_lock(l);
    hl_free_client(c);
}

/* ---- a caller's loop stopped right after a write ------------------------ */

/* The test's own loop, run by a thread of its own that stops running it
 * the moment a request of the client is on the wire, until resumed: the
 * request then gets neither its answer nor its command timeout, and a
 * blocking caller runs out of time after the write. */
typedef struct stepped_loop {
    struct ev_loop *loop;
    hilock_client *client;
    ev_timer tick; /* bounds each turn, so flags are read often */
    atomic_bool taken;
    atomic_bool hold_after_write;
    atomic_bool written;
    atomic_bool resume;
    atomic_bool stop;
    atomic_bool done;
} stepped_loop;

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
}

/* Loop thread: whether a command connection has a request on the wire. */
/* Only a script counts: a keepalive PING or a subscription can be on
 * the wire before the release is, and stopping the loop then would give
 * the release up before it starts. */
static bool request_written(hilock_client *c)
{
    for (int i = 0; i < c->nconns; i++) {
        if (c->conns[i] == NULL)
            continue;
        for (hl_request *r = c->conns[i]->sent.head; r != NULL; r = r->next)
            if (r->script != NULL)
                return true;
    }
    return false;
}

static void *run_stepped(void *arg)
{
    stepped_loop *s = arg;
    int64_t give_up = hl_now_ms() + hl_widen(60000);

    hilock_client_set_loop_thread(s->client);
    atomic_store(&s->taken, true);
    ev_timer_init(&s->tick, on_tick, 0.01, 0.01);
    ev_timer_start(s->loop, &s->tick);
    while (!atomic_load(&s->stop) && hl_now_ms() < give_up) {
        ev_run(s->loop, EVRUN_ONCE);
        if (atomic_load(&s->hold_after_write) &&
            !atomic_load(&s->written) && request_written(s->client)) {
            atomic_store(&s->written, true);
            while (!atomic_load(&s->resume) && hl_now_ms() < give_up)
                hl_sleep_ms(1);
        }
    }
    ev_timer_stop(s->loop, &s->tick);
    hilock_client_destroy(s->client);
    atomic_store(&s->done, true);
    return NULL;
}

/* A release written to a stopped server while its loop stops turning:
 * the blocking caller runs out of time after the write and hears
 * HILOCK_EINDOUBT; the release counts as done once the loop turns again,
 * and a caller that releases again only after HILOCK_ETIMEDOUT believes
 * the holds both sides count. */
static void test_release_given_up_after_write_counts_once(void **state)
{
    static stepped_loop s;
    hilock_options *o;
    hilock_lock *l;
    pthread_t runner;
    char url[96];
    int64_t believed = 2;

    (void)state;
    memset(&s, 0, sizeof s);
    s.loop = ev_loop_new(EVFLAG_AUTO);
    assert_non_null(s.loop);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(fx.server));
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    assert_status(hilock_options_set_loop(o, s.loop), HILOCK_OK);
    assert_status(hilock_options_set_command_timeout_ms(o, hl_widen(300)),
                  HILOCK_OK);
    assert_status(hilock_options_set_connect_timeout_ms(o, hl_widen(500)),
                  HILOCK_OK);
    assert_status(hilock_client_create(&s.client, o), HILOCK_OK);
    hilock_options_free(o);
    assert_status(hilock_lock_create(&l, s.client, "indoubt:stepped"),
                  HILOCK_OK);
    assert_int_equal(pthread_create(&runner, NULL, run_stepped, &s), 0);
    if (!hl_wait_flag(&s.taken, hl_widen(10000)))
        fail_msg("the loop thread did not start");
    /* A fixed lease: no renewal is on the wire but the release. */
    assert_status(hilock_lock_try_acquire(l, hl_widen(10000), 60000),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, 60000), HILOCK_OK);
    hl_fixture_pause(fx.server);
    atomic_store(&s.hold_after_write, true);
    int rc = hilock_lock_release(l);
    bool written = atomic_load(&s.written);
    atomic_store(&s.resume, true);
    hl_fixture_resume(fx.server);
    assert_true(written);
    /* The caller's rule, as in release_as_documented. */
    if (rc == HILOCK_ETIMEDOUT)
        rc = hilock_lock_release(l);
    if (rc == HILOCK_OK || rc == HILOCK_EINDOUBT)
        believed--;
    expect_counts(s.client, l, believed);
    assert_status(rc, HILOCK_EINDOUBT);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    expect_counts(s.client, l, 0);
    assert_status(hilock_lock_destroy(l), HILOCK_OK);
    atomic_store(&s.stop, true);
    hl_join_within(runner, &s.done, hl_widen(10000));
    ev_loop_destroy(s.loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        hl_lock_test(test_release_given_up_before_start_never_runs, &fx),
        hl_lock_test(test_command_given_up_before_start_never_runs, &fx),
        hl_lock_test(test_release_sent_without_answer_counts_once, &fx),
        hl_lock_test(test_release_given_up_after_write_counts_once, &fx),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
