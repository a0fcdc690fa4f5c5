/* A RedLock master votes only once its INFO is known: the answer may say
 * it restarted, and a restarted master may grant a lock another owner
 * still holds through it.  The masters are fake servers, so that one of
 * them can come up and then keep its INFO answer back, which a real
 * server never does on its own. */
/* ctest-timeout: 120 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/hostile_server.h"
#include "support/lock_helpers.h"

#define NMASTERS 3

/* How one fake master answers INFO.  Read on its connection threads. */
typedef struct master {
    hl_hostile *server;
    bool silent;           /* never answer INFO */
    atomic_bool gate_open; /* with gated: answer INFO only once open */
    bool gated;
    int free_server_infos; /* with gated: INFO server answered at once */
    atomic_int server_infos; /* INFO server requests seen */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} master;

static void send_info(hl_hostile_conn *conn)
{
    char text[160];
    /* Up for eleven days: far longer than any quarantine here, so only a
     * missing answer can keep the master from voting. */
    int n = snprintf(text, sizeof text,
                     "# Server\r\nrun_id:%040d\r\nuptime_in_seconds:1000000"
                     "\r\n",
                     42);
    hl_hostile_sendf(conn, "$%d\r\n%s\r\n", n, text);
}

static bool answer(hl_hostile_conn *conn, const hl_hostile_req *req,
                   void *data)
{
    master *m = data;
    /* Every acquire finds the lock held elsewhere, for 5 s: what a vote
     * says is then visible in the member's result without a grant to
     * give back. */
    if (hl_hostile_is(req, "EVALSHA") || hl_hostile_is(req, "EVAL")) {
        hl_hostile_sendf(conn, "*2\r\n:0\r\n:5000\r\n");
        return true;
    }
    if (!hl_hostile_is(req, "INFO"))
        return false;
    if (m->silent)
        return true;
    bool server = req->argc == 2 && req->lens[1] == 6 &&
                  strncasecmp(req->argv[1], "server", 6) == 0;
    int nth = server ? atomic_fetch_add(&m->server_infos, 1) + 1 : 0;
    /* With free_server_infos, only the INFO server questions after those
     * wait; without, every INFO does. */
    bool held = m->gated && (server ? nth > m->free_server_infos
                                    : m->free_server_infos == 0);
    if (held) {
        /* The test opens the gate; the deadline only keeps a failing test
         * from hanging the server's thread. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 60;
        pthread_mutex_lock(&m->mu);
        while (!atomic_load(&m->gate_open))
            if (pthread_cond_timedwait(&m->cv, &m->mu, &until) != 0)
                break;
        pthread_mutex_unlock(&m->mu);
    }
    send_info(conn);
    return true;
}

static void masters_start(master *ms)
{
    for (int i = 0; i < NMASTERS; i++) {
        pthread_mutex_init(&ms[i].mu, NULL);
        pthread_cond_init(&ms[i].cv, NULL);
        ms[i].server = hl_hostile_start(answer, &ms[i]);
    }
}

static void masters_stop(master *ms)
{
    for (int i = 0; i < NMASTERS; i++) {
        pthread_mutex_lock(&ms[i].mu);
        atomic_store(&ms[i].gate_open, true);
        pthread_cond_broadcast(&ms[i].cv);
        pthread_mutex_unlock(&ms[i].mu);
        hl_hostile_stop(ms[i].server);
        pthread_cond_destroy(&ms[i].cv);
        pthread_mutex_destroy(&ms[i].mu);
    }
}

static void open_gate(master *m)
{
    pthread_mutex_lock(&m->mu);
    atomic_store(&m->gate_open, true);
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

typedef struct creation {
    master *ms;
    int64_t node_timeout_ms;
    int connections; /* 0: one */
    hilock_redlock *rl;
    int status;
    atomic_bool done;
} creation;

static void *create_main(void *arg)
{
    creation *cr = arg;
    char urls[NMASTERS][64];
    const char *list[NMASTERS];
    for (int i = 0; i < NMASTERS; i++) {
        snprintf(urls[i], sizeof urls[i], "redis://127.0.0.1:%d",
                 hl_hostile_port(cr->ms[i].server));
        list[i] = urls[i];
    }
    hilock_options *o = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_node_timeout_ms(o, cr->node_timeout_ms),
                  HILOCK_OK);
    assert_status(hilock_options_set_quarantine_ms(o, 60000), HILOCK_OK);
    assert_status(hilock_options_set_connections(
                      o, cr->connections ? cr->connections : 1),
                  HILOCK_OK);
    cr->status = hilock_redlock_create(&cr->rl, list, NMASTERS, o);
    hilock_options_free(o);
    atomic_store(&cr->done, true);
    return NULL;
}

static long acquires(master *m)
{
    return hl_hostile_count(m->server, "EVALSHA") +
           hl_hostile_count(m->server, "EVAL");
}

/* One attempt of a fresh lock; the per-master results. */
static void try_once(hilock_redlock *rl, hilock_member_result *res)
{
    hilock_multilock *m = NULL;
    assert_status(hilock_redlock_multilock_create(&m, rl, "info"), HILOCK_OK);
    int rc = hilock_multilock_try_acquire(m, 0, HILOCK_LEASE_WATCHDOG, res,
                                          sizeof *res, NULL);
    /* Held elsewhere on every master that was asked. */
    assert_true(rc == HILOCK_EBUSY || rc == HILOCK_ENOQUORUM);
    assert_status(hilock_multilock_destroy(m), HILOCK_OK);
}

/* A master that connected but never tells its INFO is up, yet counts as
 * quarantined: it is not even asked. */
static void test_master_without_info_does_not_vote(void **state)
{
    (void)state;
    master ms[NMASTERS] = {0};
    ms[0].silent = true;
    masters_start(ms);
    creation cr = {.ms = ms, .node_timeout_ms = hl_widen(300)};
    create_main(&cr);
    assert_status(cr.status, HILOCK_OK);
    assert_true(hl_hostile_count(ms[0].server, "INFO") >= 1);

    hilock_member_result res[NMASTERS];
    try_once(cr.rl, res);
    assert_true(res[0].quarantined);
    assert_int_equal(acquires(&ms[0]), 0);
    for (int i = 1; i < NMASTERS; i++) {
        assert_false(res[i].quarantined);
        assert_status(res[i].status, HILOCK_EBUSY);
    }
    assert_status(hilock_redlock_destroy(cr.rl), HILOCK_OK);
    masters_stop(ms);
}

/* One attempt, in which no master is quarantined.  Two answers decide
 * it, so the third may end canceled; what matters is that each master
 * was asked like the others. */
static void expect_every_master_votes(hilock_redlock *rl)
{
    hilock_member_result res[NMASTERS];
    try_once(rl, res);
    for (int i = 0; i < NMASTERS; i++) {
        assert_false(res[i].quarantined);
        if (res[i].status != HILOCK_ECANCELED)
            assert_status(res[i].status, HILOCK_EBUSY);
    }
}

static bool info_asked(void *arg)
{
    return hl_hostile_count(((master *)arg)->server, "INFO") >= 1;
}

static bool acquire_received(void *arg)
{
    return acquires(arg) >= 1;
}

/* Create returns only once every connected master's INFO is in, so the
 * first lock finds each master's vote decided. */
static void test_create_waits_for_info(void **state)
{
    (void)state;
    master ms[NMASTERS] = {0};
    ms[0].gated = true;
    masters_start(ms);
    /* Long enough that only the answer can end the wait. */
    creation cr = {.ms = ms, .node_timeout_ms = hl_widen(20000)};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, create_main, &cr), 0);
    if (!hl_wait_until(info_asked, &ms[0], hl_widen(10000)))
        fail_msg("master 0 was never asked its INFO");
    /* The question is out and its answer held back: create is waiting. */
    assert_false(atomic_load(&cr.done));
    open_gate(&ms[0]);
    pthread_join(t, NULL);
    assert_status(cr.status, HILOCK_OK);

    expect_every_master_votes(cr.rl);
    if (!hl_wait_until(acquire_received, &ms[0], hl_widen(10000)))
        fail_msg("master 0 was never asked to vote");
    assert_status(hilock_redlock_destroy(cr.rl), HILOCK_OK);
    masters_stop(ms);
}

static bool two_server_infos(void *arg)
{
    return atomic_load(&((master *)arg)->server_infos) >= 2;
}

/* A client of several connections asks each one's INFO: the first answer
 * settles nothing while another is out, since that one may still say
 * "restarted".  Create waits for every one, so that the first lock does
 * not find the master quarantined by its own second connection. */
static void test_create_waits_for_every_connections_info(void **state)
{
    (void)state;
    master ms[NMASTERS] = {0};
    ms[0].gated = true;
    ms[0].free_server_infos = 1;
    masters_start(ms);
    creation cr = {.ms = ms, .node_timeout_ms = hl_widen(20000),
                   .connections = 2};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, create_main, &cr), 0);
    if (!hl_wait_until(two_server_infos, &ms[0], hl_widen(10000)))
        fail_msg("master 0 was not asked INFO on both connections");
    /* One answer is in and one held back: create still waits, however
     * long it is given to return early. */
    assert_false(hl_wait_flag(&cr.done, 1000));
    open_gate(&ms[0]);
    pthread_join(t, NULL);
    assert_status(cr.status, HILOCK_OK);

    expect_every_master_votes(cr.rl);
    assert_status(hilock_redlock_destroy(cr.rl), HILOCK_OK);
    masters_stop(ms);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_master_without_info_does_not_vote),
        cmocka_unit_test(test_create_waits_for_info),
        cmocka_unit_test(test_create_waits_for_every_connections_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
