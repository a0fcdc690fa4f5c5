/* The shared pub/sub connection: one SUBSCRIBE per channel however many
 * listeners, subscriptions restored after every reconnect, listeners
 * leaving in the middle of a delivery, and teardown telling each one. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/transport/pubsub.h"
#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/loop_call.h"

/* ctest-timeout: 120 */

#define WAIT_MS 30000
#define MAX_MSGS 4
#define MAX_ACTIONS 2

static char reply_buf[4096];

/* Test thread writes, loop thread reads: the actions a listener takes on
 * a message are set up between deliveries. */
static pthread_mutex_t roles_lock = PTHREAD_MUTEX_INITIALIZER;

/* The order in which READY reached the listeners of a channel, which is
 * the order in which messages reach them too. */
static int ready_order[64];
static atomic_int ready_seen;

struct listener {
    hl_sub sub;
    int id;
    hl_pubsub *ps; /* loop thread only */
    atomic_int ready;
    atomic_int closed;
    atomic_int msgs[MAX_MSGS];
    atomic_int detached_calls; /* events after it was detached */
    atomic_int bad_payload;
    /* On message k, detach these, or close this client (under
     * roles_lock). */
    struct listener *detach_on[MAX_MSGS][MAX_ACTIONS];
    hilock_client *close_on[MAX_MSGS];
    atomic_int close_rc;
};

static void on_event(hl_sub *sub, hl_sub_event ev, const char *msg,
                     size_t len)
{
    struct listener *l = sub->data;
    struct listener *todo[MAX_ACTIONS] = { NULL, NULL };
    hilock_client *victim;
    int k;

    if (sub->channel == NULL && ev != HL_SUB_CLOSED)
        atomic_fetch_add(&l->detached_calls, 1);
    switch (ev) {
    case HL_SUB_READY:
        k = atomic_fetch_add(&ready_seen, 1);
        if (k < 64)
            ready_order[k] = l->id;
        atomic_fetch_add(&l->ready, 1);
        break;
    case HL_SUB_MESSAGE:
        if (len != 2 || msg[0] != 'm' || msg[1] < '0' ||
            msg[1] >= '0' + MAX_MSGS) {
            atomic_fetch_add(&l->bad_payload, 1);
            break;
        }
        k = msg[1] - '0';
        pthread_mutex_lock(&roles_lock);
        memcpy(todo, l->detach_on[k], sizeof todo);
        victim = l->close_on[k];
        pthread_mutex_unlock(&roles_lock);
        /* Act before counting, so the count shows the callback went on
         * safely after pulling listeners out from under the delivery. */
        for (int i = 0; i < MAX_ACTIONS; i++)
            if (todo[i] != NULL)
                hl_pubsub_unsubscribe(&todo[i]->sub);
        if (victim != NULL)
            atomic_store(&l->close_rc, hilock_client_close(victim));
        atomic_fetch_add(&l->msgs[k], 1);
        break;
    case HL_SUB_REFUSED:
        /* Every server here gives every user every channel. */
        atomic_fetch_add(&l->bad_payload, 1);
        break;
    case HL_SUB_CLOSED:
        if (sub->channel != NULL)
            atomic_fetch_add(&l->detached_calls, 1);
        /* Detaching a detached listener is documented as harmless. */
        hl_pubsub_unsubscribe(sub);
        atomic_fetch_add(&l->closed, 1);
        break;
    }
}

static void listeners_init(struct listener *l, int n, int first_id)
{
    memset(l, 0, (size_t)n * sizeof *l);
    for (int i = 0; i < n; i++) {
        l[i].id = first_id + i;
        atomic_init(&l[i].ready, 0);
        atomic_init(&l[i].closed, 0);
        atomic_init(&l[i].detached_calls, 0);
        atomic_init(&l[i].bad_payload, 0);
        atomic_init(&l[i].close_rc, -1);
        for (int k = 0; k < MAX_MSGS; k++)
            atomic_init(&l[i].msgs[k], 0);
    }
}

static hilock_client *connect_plain(const hl_redis_server *s)
{
    hilock_options *o = NULL;
    hilock_client *c = NULL;

    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_host(o, "127.0.0.1"), HILOCK_OK);
    assert_int_equal(hilock_options_set_port(o, hl_redis_server_port(s)),
                     HILOCK_OK);
    assert_int_equal(hilock_options_set_reconnect_backoff_ms(o, 20, 200),
                     HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    return c;
}

/* ---- running on the loop thread ------------------------------------- */

enum op_kind { OP_SUBSCRIBE, OP_UNSUBSCRIBE };

struct op {
    enum op_kind kind;
    struct listener **ls;
    int n;
    const char *channel;
    int rc[64];
    bool no_pubsub;
};

static void op_run(hilock_client *c, void *arg)
{
    struct op *op = arg;
    hl_pubsub *ps = hl_client_pubsub(c);

    op->no_pubsub = ps == NULL;
    for (int i = 0; ps != NULL && i < op->n; i++) {
        struct listener *l = op->ls[i];

        if (op->kind == OP_SUBSCRIBE) {
            l->ps = ps;
            op->rc[i] = hl_pubsub_subscribe(ps, &l->sub, op->channel,
                                            strlen(op->channel), on_event,
                                            l);
        } else {
            hl_pubsub_unsubscribe(&l->sub);
        }
    }
}

static void run_op(hilock_client *c, enum op_kind kind,
                   struct listener **ls, int n, const char *channel,
                   int *rc_out)
{
    struct op op;

    assert_true(n <= 64);
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.ls = ls;
    op.n = n;
    op.channel = channel;
    hl_run_on_loop_within(c, op_run, &op, WAIT_MS);
    assert_false(op.no_pubsub);
    if (rc_out != NULL)
        memcpy(rc_out, op.rc, (size_t)n * sizeof *rc_out);
}

/* Subscribes ls[0..n-1] to a channel none of them is on yet: a fresh
 * channel, so each must be promised a READY. */
static void subscribe_fresh(hilock_client *c, struct listener **ls, int n,
                            const char *channel)
{
    int rc[64];

    run_op(c, OP_SUBSCRIBE, ls, n, channel, rc);
    for (int i = 0; i < n; i++)
        assert_int_equal(rc[i], 0);
}

static void unsubscribe(hilock_client *c, struct listener **ls, int n)
{
    run_op(c, OP_UNSUBSCRIBE, ls, n, NULL, NULL);
}

static void read_pubsub_up(hilock_client *c, void *arg)
{
    hl_pubsub *ps = hl_client_pubsub(c);

    *(bool *)arg = ps != NULL && hl_pubsub_is_up(ps);
}

static bool pubsub_is_down(void *arg)
{
    bool up = false;

    hl_run_on_loop_within(arg, read_pubsub_up, &up, WAIT_MS);
    return !up;
}

/* ---- waiting -------------------------------------------------------- */

static void wait_counter(atomic_int *value, int want, const char *what)
{
    if (!hl_wait_count(value, want, WAIT_MS))
        fail_msg("%s: %d, wanted %d within %d ms", what, atomic_load(value),
                 want, WAIT_MS);
}

struct numsub_wait {
    hl_redis_server *s;
    const char *channel;
    long long want;
};

static bool numsub_is(void *arg)
{
    struct numsub_wait *w = arg;

    return hl_fixture_numsub(w->s, w->channel) == w->want;
}

static void wait_numsub(hl_redis_server *s, const char *channel,
                        long long want)
{
    struct numsub_wait w = { s, channel, want };

    if (!hl_wait_until(numsub_is, &w, WAIT_MS))
        fail_msg("PUBSUB NUMSUB %s stayed %lld, wanted %lld", channel,
                 hl_fixture_numsub(s, channel), want);
}

/* Publishes from outside the client; returns how many connections the
 * server delivered to. */
static long long publish(hl_redis_server *s, const char *channel,
                         const char *msg)
{
    assert_int_equal(hl_redis_server_cmd(s, reply_buf, sizeof reply_buf,
                                         "PUBLISH", channel, msg,
                                         (char *)NULL),
                     ':');
    return strtoll(reply_buf + 1, NULL, 10);
}

static void check_clean(struct listener *l, int n)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(atomic_load(&l[i].detached_calls), 0);
        assert_int_equal(atomic_load(&l[i].bad_payload), 0);
    }
}

/* ---- 1: many listeners, one subscription ---------------------------- */

#define FANOUT 20

static void test_listeners_share_one_subscription(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_plain(s);
    struct listener l[FANOUT + 2];
    struct listener *ls[FANOUT];
    struct listener *late = &l[FANOUT], *probe = &l[FANOUT + 1];
    int rc;

    (void)state;
    listeners_init(l, FANOUT + 2, 0);
    for (int i = 0; i < FANOUT; i++)
        ls[i] = &l[i];
    subscribe_fresh(c, ls, FANOUT, "ch");
    for (int i = 0; i < FANOUT; i++)
        wait_counter(&l[i].ready, 1, "READY");
    wait_numsub(s, "ch", 1);

    /* A listener joining a confirmed channel is told so at once, and
     * gets no READY of its own. */
    run_op(c, OP_SUBSCRIBE, &late, 1, "ch", &rc);
    assert_int_equal(rc, 1);

    assert_int_equal(publish(s, "ch", "m0"), 1);
    /* The stream is ordered: once every listener has m1, a second copy
     * of m0 would already have been counted. */
    assert_int_equal(publish(s, "ch", "m1"), 1);
    for (int i = 0; i <= FANOUT; i++)
        wait_counter(&l[i].msgs[1], 1, "m1");
    for (int i = 0; i <= FANOUT; i++) {
        assert_int_equal(atomic_load(&l[i].msgs[0]), 1);
        assert_int_equal(atomic_load(&l[i].msgs[1]), 1);
    }
    assert_int_equal(atomic_load(&late->ready), 0);

    /* Nineteen of twenty (and the late one) leave: the channel stays. */
    unsubscribe(c, ls, FANOUT - 1);
    unsubscribe(c, &late, 1);
    /* A SUBSCRIBE sent after them on the same connection is answered
     * after any UNSUBSCRIBE they might wrongly have caused. */
    subscribe_fresh(c, &probe, 1, "barrier");
    wait_counter(&probe->ready, 1, "READY of the barrier");
    assert_int_equal(hl_fixture_numsub(s, "ch"), 1);

    assert_int_equal(publish(s, "ch", "m2"), 1);
    wait_counter(&l[FANOUT - 1].msgs[2], 1, "m2");
    for (int i = 0; i <= FANOUT; i++) {
        if (i != FANOUT - 1)
            assert_int_equal(atomic_load(&l[i].msgs[2]), 0);
        assert_int_equal(atomic_load(&l[i].ready), i < FANOUT ? 1 : 0);
    }

    unsubscribe(c, &ls[FANOUT - 1], 1);
    wait_numsub(s, "ch", 0);
    assert_int_equal(hl_fixture_numsub(s, "barrier"), 1);
    assert_int_equal(publish(s, "ch", "m3"), 0);
    check_clean(l, FANOUT + 2);

    hilock_client_destroy(c);
    /* Detached before the close: no CLOSED for them.  The probe was
     * still attached: exactly one. */
    for (int i = 0; i <= FANOUT; i++)
        assert_int_equal(atomic_load(&l[i].closed), 0);
    assert_int_equal(atomic_load(&probe->closed), 1);
    hl_redis_server_stop(s);
}

/* ---- 2 and 3: subscriptions come back after a lost connection ------- */

static bool ping_succeeds(void *arg)
{
    const char *ping[] = { "PING" };
    hilock_reply *r = NULL;
    int rc = hilock_client_command(arg, 1, ping, NULL, &r);

    hilock_reply_free(r);
    return rc == HILOCK_OK;
}

static void check_restored(hl_redis_server *s, hilock_client *c,
                           struct listener *l, int n)
{
    for (int i = 0; i < n; i++)
        wait_counter(&l[i].ready, 2, "READY after the reconnect");
    wait_numsub(s, "ch", 1);
    assert_int_equal(publish(s, "ch", "m1"), 1);
    for (int i = 0; i < n; i++)
        wait_counter(&l[i].msgs[1], 1, "m1 after the reconnect");
    /* One READY per connection, not one per listener or per attempt. */
    for (int i = 0; i < n; i++) {
        assert_int_equal(atomic_load(&l[i].ready), 2);
        assert_int_equal(atomic_load(&l[i].msgs[1]), 1);
    }
    check_clean(l, n);
    /* The command connection recovers as well, on its own schedule. */
    assert_true(hl_wait_until(ping_succeeds, c, WAIT_MS));
}

static void subscribe_two(hl_redis_server *s, hilock_client *c,
                          struct listener *l)
{
    struct listener *ls[2] = { &l[0], &l[1] };

    listeners_init(l, 2, 0);
    subscribe_fresh(c, ls, 2, "ch");
    wait_counter(&l[0].ready, 1, "READY");
    wait_counter(&l[1].ready, 1, "READY");
    wait_numsub(s, "ch", 1);
    assert_int_equal(publish(s, "ch", "m0"), 1);
    wait_counter(&l[0].msgs[0], 1, "m0");
    wait_counter(&l[1].msgs[0], 1, "m0");
}

static void test_restore_after_client_kill(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_plain(s);
    struct listener l[2];

    (void)state;
    subscribe_two(s, c, l);
    assert_int_equal(hl_fixture_client_kill(s, "pubsub"), 1);
    check_restored(s, c, l, 2);
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

static void test_restore_after_restart(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_plain(s);
    struct listener l[3];

    struct listener *newcomer = &l[2];

    (void)state;
    subscribe_two(s, c, l);
    listeners_init(newcomer, 1, 2);
    hl_fixture_kill9(s);
    /* Joining while the connection is down: nothing can be sent now, so
     * the subscription has to go out with the others on reconnect. */
    assert_true(hl_wait_until(pubsub_is_down, c, WAIT_MS));
    subscribe_fresh(c, &newcomer, 1, "ch2");
    hl_fixture_restart(s);
    check_restored(s, c, l, 2);
    wait_counter(&newcomer->ready, 1, "READY of the newcomer");
    wait_numsub(s, "ch2", 1);
    assert_int_equal(publish(s, "ch2", "m2"), 1);
    wait_counter(&newcomer->msgs[2], 1, "m2 to the newcomer");
    assert_int_equal(atomic_load(&newcomer->ready), 1);
    check_clean(newcomer, 1);
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

/* ---- 4: listeners leaving during a delivery ------------------------- */

static struct listener *by_position(struct listener *l, int pos)
{
    return &l[ready_order[pos]];
}

static void test_detach_during_delivery(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_plain(s);
    struct listener l[5];
    struct listener *ls[5], *p[5];

    (void)state;
    listeners_init(l, 5, 0);
    for (int i = 0; i < 5; i++)
        ls[i] = &l[i];
    atomic_store(&ready_seen, 0);
    subscribe_fresh(c, ls, 5, "ch");
    for (int i = 0; i < 5; i++)
        wait_counter(&l[i].ready, 1, "READY");
    assert_int_equal(atomic_load(&ready_seen), 5);
    for (int i = 0; i < 5; i++)
        p[i] = by_position(l, i);

    /* m0: the first detaches itself and the next one (where the cursor
     * stands); the third detaches the fifth (ahead of the cursor). */
    pthread_mutex_lock(&roles_lock);
    p[0]->detach_on[0][0] = p[0];
    p[0]->detach_on[0][1] = p[1];
    p[2]->detach_on[0][0] = p[4];
    /* m1: the third detaches itself and the fourth, the last two, so the
     * channel empties in the middle of its own delivery. */
    p[2]->detach_on[1][0] = p[2];
    p[2]->detach_on[1][1] = p[3];
    pthread_mutex_unlock(&roles_lock);

    assert_int_equal(publish(s, "ch", "m0"), 1);
    wait_counter(&p[3]->msgs[0], 1, "m0 to the fourth listener");
    assert_int_equal(atomic_load(&p[0]->msgs[0]), 1);
    assert_int_equal(atomic_load(&p[1]->msgs[0]), 0);
    assert_int_equal(atomic_load(&p[2]->msgs[0]), 1);
    assert_int_equal(atomic_load(&p[3]->msgs[0]), 1);
    assert_int_equal(atomic_load(&p[4]->msgs[0]), 0);
    assert_int_equal(hl_fixture_numsub(s, "ch"), 1);

    assert_int_equal(publish(s, "ch", "m1"), 1);
    /* The UNSUBSCRIBE leaves only after the delivery has finished, so a
     * zero here means the fourth listener's turn has come and gone. */
    wait_numsub(s, "ch", 0);
    assert_int_equal(atomic_load(&p[2]->msgs[1]), 1);
    for (int i = 0; i < 5; i++)
        if (i != 2)
            assert_int_equal(atomic_load(&p[i]->msgs[1]), 0);
    check_clean(l, 5);

    /* The emptied channel is not left half alive: joining it again is a
     * fresh subscription with its own READY. */
    subscribe_fresh(c, &ls[0], 1, "ch");
    wait_counter(&l[0].ready, 2, "READY after joining again");
    wait_numsub(s, "ch", 1);
    assert_int_equal(publish(s, "ch", "m2"), 1);
    wait_counter(&l[0].msgs[2], 1, "m2");

    hilock_client_destroy(c);
    assert_int_equal(atomic_load(&l[0].closed), 1);
    for (int i = 1; i < 5; i++)
        assert_int_equal(atomic_load(&l[i].closed), 0);
    hl_redis_server_stop(s);
}

/* ---- 5: closing the client with listeners attached ------------------ */

static void test_close_tells_every_listener(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_plain(s);
    struct listener l[10];
    struct listener *ls[10];

    (void)state;
    listeners_init(l, 10, 0);
    for (int i = 0; i < 10; i++)
        ls[i] = &l[i];
    subscribe_fresh(c, ls, 4, "a");
    subscribe_fresh(c, ls + 4, 3, "b");
    for (int i = 0; i < 7; i++)
        wait_counter(&l[i].ready, 1, "READY");
    /* Channel c may or may not be confirmed when the close comes; its
     * listeners are owed a CLOSED either way. */
    subscribe_fresh(c, ls + 7, 3, "c");

    assert_int_equal(hilock_client_close(c), HILOCK_OK);
    /* close waited for the loop thread; nothing is still on its way. */
    for (int i = 0; i < 10; i++) {
        assert_int_equal(atomic_load(&l[i].closed), 1);
        assert_null(l[i].sub.channel);
    }
    check_clean(l, 10);
    wait_numsub(s, "a", 0);
    wait_numsub(s, "b", 0);
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(atomic_load(&l[i].closed), 1);
    hl_redis_server_stop(s);
}

/* ---- 6: closing the client from inside a delivery ------------------ */

static void test_close_inside_delivery(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_plain(s);
    struct listener l[3];
    struct listener *ls[3], *p[3];

    (void)state;
    listeners_init(l, 3, 0);
    for (int i = 0; i < 3; i++)
        ls[i] = &l[i];
    atomic_store(&ready_seen, 0);
    subscribe_fresh(c, ls, 3, "ch");
    for (int i = 0; i < 3; i++)
        wait_counter(&l[i].ready, 1, "READY");
    for (int i = 0; i < 3; i++)
        p[i] = by_position(l, i);

    /* The middle listener closes the client while the channel is being
     * delivered: the pub/sub state goes away under the delivery loop. */
    pthread_mutex_lock(&roles_lock);
    p[1]->close_on[0] = c;
    pthread_mutex_unlock(&roles_lock);
    assert_int_equal(publish(s, "ch", "m0"), 1);
    wait_counter(&p[1]->msgs[0], 1, "m0 to the closing listener");
    assert_int_equal(atomic_load(&p[1]->close_rc), HILOCK_OK);
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);

    /* Everyone attached at the close hears CLOSED once; the listener
     * after the closing one is detached by then and gets no message. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(atomic_load(&l[i].closed), 1);
    assert_int_equal(atomic_load(&p[0]->msgs[0]), 1);
    assert_int_equal(atomic_load(&p[2]->msgs[0]), 0);
    check_clean(l, 3);
    hl_redis_server_stop(s);
}

/* ---- 7: a message beyond the reply bounds --------------------------- */

static void test_oversized_message(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_options *o = NULL;
    hilock_client *c = NULL;
    struct listener l[1];
    struct listener *ls[1] = { &l[0] };
    char *big = malloc(256 * 1024 + 1);

    (void)state;
    assert_non_null(big);
    memset(big, 'm', 256 * 1024);
    big[256 * 1024] = '\0';
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_host(o, "127.0.0.1"), HILOCK_OK);
    assert_int_equal(hilock_options_set_port(o, hl_redis_server_port(s)),
                     HILOCK_OK);
    assert_int_equal(hilock_options_set_max_reply_bytes(o, 64 * 1024),
                     HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);

    listeners_init(l, 1, 0);
    subscribe_fresh(c, ls, 1, "ch");
    wait_counter(&l[0].ready, 1, "READY");
    wait_numsub(s, "ch", 1);
    /* Too big to be taken in: the connection is dropped instead, and the
     * subscription comes back on a new one. */
    assert_int_equal(publish(s, "ch", big), 1);
    wait_counter(&l[0].ready, 2, "READY after the oversized message");
    wait_numsub(s, "ch", 1);
    assert_int_equal(publish(s, "ch", "m0"), 1);
    wait_counter(&l[0].msgs[0], 1, "m0");
    assert_int_equal(atomic_load(&l[0].bad_payload), 0);
    check_clean(l, 1);
    free(big);
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listeners_share_one_subscription),
        cmocka_unit_test(test_restore_after_client_kill),
        cmocka_unit_test(test_restore_after_restart),
        cmocka_unit_test(test_detach_during_delivery),
        cmocka_unit_test(test_close_tells_every_listener),
        cmocka_unit_test(test_close_inside_delivery),
        cmocka_unit_test(test_oversized_message),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
