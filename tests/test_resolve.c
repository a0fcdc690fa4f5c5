/* Host name resolution: how many resolver threads a connection may cost.
 * The name service cannot be broken here, so the resolver threads call a
 * getaddrinfo of the test's that hangs until the test opens its gate:
 * that is a DNS outage as the library sees it.  A connection retrying
 * through such an outage must not pile up threads, and a numeric address
 * must never need one. */
/* ctest-timeout: 120 */
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <setjmp.h>
#include <cmocka.h>

#include <ev.h>

#include "core/transport/conn.h"
#include "core/transport/resolve.h"
#include "hilock/error.h"
#include "hilock/options.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"

/* ---- a name service that hangs ----------------------------------------- */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static atomic_int calls;      /* lookups begun */
static atomic_int inside;     /* lookups hanging now */
static atomic_int max_inside; /* the most that ever hung at once */

static int hanging_getaddrinfo(const char *node, const char *service,
                               const struct addrinfo *hints,
                               struct addrinfo **res)
{
    atomic_fetch_add(&calls, 1);
    int now = atomic_fetch_add(&inside, 1) + 1;
    int seen = atomic_load(&max_inside);
    while (now > seen && !atomic_compare_exchange_weak(&max_inside, &seen,
                                                       now))
        ;
    pthread_mutex_lock(&gate_mu);
    while (!gate_open)
        pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
    atomic_fetch_sub(&inside, 1);
    return getaddrinfo(node, service, hints, res);
}

static void outage_begins(void)
{
    pthread_mutex_lock(&gate_mu);
    gate_open = false;
    pthread_mutex_unlock(&gate_mu);
    atomic_store(&calls, 0);
    atomic_store(&max_inside, 0);
    hilock__getaddrinfo = hanging_getaddrinfo;
}

static void outage_ends(void)
{
    pthread_mutex_lock(&gate_mu);
    gate_open = true;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

static bool no_resolver_threads(void *arg)
{
    (void)arg;
    return hl_resolve_threads() == 0;
}

/* Every test ends with the gate open and its threads gone, so the next
 * test counts only its own. */
static int teardown(void **state)
{
    (void)state;
    outage_ends();
    if (!hl_wait_until(no_resolver_threads, NULL, hl_widen(5000)))
        fail_msg("%d resolver threads outlived the outage",
                 hl_resolve_threads());
    hilock__getaddrinfo = getaddrinfo;
    return 0;
}

/* ---- a connection on the test's own loop -------------------------------- */

typedef struct conn_events {
    int ups;
    int downs;
} conn_events;

static void on_event(hl_conn *conn, hl_conn_event ev, int status,
                     const char *detail, hilock_reply *reply, void *data)
{
    (void)conn;
    (void)status;
    (void)detail;
    conn_events *e = data;
    hilock_reply_free(reply);
    if (ev == HL_CONN_UP)
        e->ups++;
    else if (ev == HL_CONN_DOWN)
        e->downs++;
}

static hilock_options *conn_options(const char *host, int port,
                                    int64_t connect_ms)
{
    hilock_options *o = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_host(o, host), HILOCK_OK);
    assert_status(hilock_options_set_port(o, port), HILOCK_OK);
    assert_status(hilock_options_set_connect_timeout_ms(o, connect_ms),
                  HILOCK_OK);
    assert_status(hilock_options_set_reconnect_backoff_ms(o, 1, 5),
                  HILOCK_OK);
    return o;
}

/* Runs the loop until *count reaches want; false at the deadline. */
static bool run_until(struct ev_loop *loop, const int *count, int want,
                      int timeout_ms)
{
    int64_t deadline = hl_now_ms() + timeout_ms;
    while (*count < want && hl_now_ms() < deadline)
        ev_run(loop, EVRUN_ONCE);
    return *count >= want;
}

/* ---- tests -------------------------------------------------------------- */

static void test_retries_share_one_resolver_thread(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    const int attempts = hl_scaled(20, 8);
    hilock_options *o = conn_options("localhost", hl_redis_server_port(s),
                                     hl_widen(50));
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    conn_events e = {0};
    hl_conn_config cfg = {.loop = loop, .opts = o, .on_event = on_event,
                          .data = &e};

    outage_begins();
    hl_conn *conn = hl_conn_create(&cfg);
    assert_non_null(conn);
    /* Each attempt times out resolving and the next one starts. */
    if (!run_until(loop, &e.downs, attempts, hl_widen(20000)))
        fail_msg("only %d attempts ended", e.downs);
    assert_int_equal(e.ups, 0);
    if (atomic_load(&calls) != 1 || hl_resolve_threads() != 1)
        fail_msg("%d attempts began %d lookups on %d threads", e.downs,
                 atomic_load(&calls), hl_resolve_threads());
    assert_int_equal(atomic_load(&max_inside), 1);

    /* When the name service answers, the lookup every attempt shared
     * serves the attempt waiting now. */
    outage_ends();
    if (!run_until(loop, &e.ups, 1, hl_widen(10000)))
        fail_msg("not up after the outage: %d attempts failed", e.downs);
    hl_conn_free(conn);
    ev_loop_destroy(loop);
    hilock_options_free(o);
    hl_redis_server_stop(s);
}

static void test_callers_of_one_name_each_get_an_answer(void **state)
{
    (void)state;
    int fd[3];
    hl_resolve *r[3];
    outage_begins();
    r[0] = hl_resolve_start("localhost", 6379, &fd[0]);
    assert_non_null(r[0]);
    hl_expect_count(&calls, 1, hl_widen(5000));
    r[1] = hl_resolve_start("localhost", 6379, &fd[1]);
    r[2] = hl_resolve_start("localhost", 6379, &fd[2]);
    assert_non_null(r[1]);
    assert_non_null(r[2]);
    /* A caller that gave up leaves the others their answers. */
    hl_resolve_cancel(r[1]);
    assert_int_equal(hl_resolve_threads(), 1);
    assert_int_equal(atomic_load(&calls), 1);

    outage_ends();
    struct pollfd p[2] = {{.fd = fd[0], .events = POLLIN},
                          {.fd = fd[2], .events = POLLIN}};
    /* An eventfd stays readable until read: poll says 2 once both are. */
    int64_t deadline = hl_now_ms() + hl_widen(5000);
    int ready = 0;
    while (ready < 2 && hl_now_ms() < deadline)
        ready = poll(p, 2, (int)(deadline - hl_now_ms()));
    if (ready != 2)
        fail_msg("answers: first %s, third %s",
                 p[0].revents & POLLIN ? "yes" : "no",
                 p[1].revents & POLLIN ? "yes" : "no");
    struct addrinfo *a = NULL, *b = NULL;
    assert_int_equal(hl_resolve_finish(r[0], &a), 0);
    assert_int_equal(hl_resolve_finish(r[2], &b), 0);
    assert_non_null(a);
    assert_non_null(b);
    /* Each owns its list: both are freed. */
    assert_ptr_not_equal(a, b);
    freeaddrinfo(a);
    freeaddrinfo(b);
}

static int addr_port(const struct addrinfo *ai)
{
    if (ai->ai_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)(const void *)ai->ai_addr)
                         ->sin_port);
    return ntohs(((const struct sockaddr_in6 *)(const void *)ai->ai_addr)
                     ->sin6_port);
}

static void test_numeric_hosts_start_no_thread(void **state)
{
    (void)state;
    static const struct {
        const char *host;
        int family;
    } numeric[] = {{"127.0.0.1", AF_INET}, {"::1", AF_INET6}};
    outage_begins();
    for (size_t i = 0; i < sizeof numeric / sizeof numeric[0]; i++) {
        int fd = -1;
        hl_resolve *r = hl_resolve_start(numeric[i].host, 7000, &fd);
        assert_non_null(r);
        /* Answered already: no thread, nothing asked of the name service. */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 0), 1);
        assert_int_equal(hl_resolve_threads(), 0);
        assert_int_equal(atomic_load(&calls), 0);
        struct addrinfo *ai = NULL;
        assert_int_equal(hl_resolve_finish(r, &ai), 0);
        assert_non_null(ai);
        assert_int_equal(ai->ai_family, numeric[i].family);
        assert_int_equal(addr_port(ai), 7000);
        freeaddrinfo(ai);
    }

    /* A connection to an address comes up in the middle of the outage. */
    hl_redis_server *s = hl_fixture_plain();
    hilock_options *o = conn_options("127.0.0.1", hl_redis_server_port(s),
                                     hl_widen(2000));
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    conn_events e = {0};
    hl_conn_config cfg = {.loop = loop, .opts = o, .on_event = on_event,
                          .data = &e};
    hl_conn *conn = hl_conn_create(&cfg);
    assert_non_null(conn);
    if (!run_until(loop, &e.ups, 1, hl_widen(5000)))
        fail_msg("127.0.0.1 not up: %d attempts failed", e.downs);
    assert_int_equal(atomic_load(&calls), 0);
    assert_int_equal(hl_resolve_threads(), 0);
    hl_conn_free(conn);
    ev_loop_destroy(loop);
    hilock_options_free(o);
    hl_redis_server_stop(s);
}

int main(void)
{
#define T(fn) cmocka_unit_test_teardown(fn, teardown)
    const struct CMUnitTest tests[] = {
        T(test_retries_share_one_resolver_thread),
        T(test_callers_of_one_name_each_get_an_answer),
        T(test_numeric_hosts_start_no_thread),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
