/* What the lock tests all need; see lock_helpers.h. */
#include "support/lock_helpers.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/engine/engine_internal.h"
#include "core/transport/pubsub.h"
#include "hilock/fair.h"
#include "hilock/rwlock.h"
#include "semaphore/semaphore_internal.h"
#include "support/loop_call.h"

/* ---- the fixture of a test ---------------------------------------------- */

int hl_lock_fixture_setup(void **state)
{
    hl_lock_fixture *fx = *state;

    fx->server = hl_fixture_plain();
    return 0;
}

int hl_lock_fixture_teardown(void **state)
{
    hl_lock_fixture *fx = *state;

    hl_children_kill_all(&fx->kids);
    hl_redis_server_stop(fx->server);
    fx->server = NULL;
    return 0;
}

/* ---- clients and handles ------------------------------------------------ */

hilock_client *hl_open_client(const hl_redis_server *s,
                              const hl_client_opts *opts, char *why,
                              size_t cap)
{
    static const hl_client_opts none;
    hilock_options *o = NULL;
    hilock_client *c = NULL;
    int rc = hilock_options_create(&o);

    if (opts == NULL)
        opts = &none;
    if (rc == HILOCK_OK)
        rc = hilock_options_set_host(o, "127.0.0.1");
    if (rc == HILOCK_OK)
        rc = hilock_options_set_port(o, hl_redis_server_port(s));
    if (rc == HILOCK_OK)
        rc = hilock_options_set_reconnect_backoff_ms(o, 20, 200);
    if (rc == HILOCK_OK && opts->watchdog_ms > 0)
        rc = hilock_options_set_watchdog_timeout_ms(o, opts->watchdog_ms);
    if (rc == HILOCK_OK && opts->waiter_ms > 0)
        rc = hilock_options_set_waiter_timeout_ms(o, opts->waiter_ms);
    if (rc == HILOCK_OK && opts->lock_delay_ms > 0)
        rc = hilock_options_set_lock_delay_ms(o, opts->lock_delay_ms);
    if (rc == HILOCK_OK)
        rc = hl_set_valgrind_timeouts(o);
    /* After those: a test's own command timeout holds under valgrind too. */
    if (rc == HILOCK_OK && opts->command_timeout_ms > 0)
        rc = hilock_options_set_command_timeout_ms(o,
                                                   opts->command_timeout_ms);
    if (rc == HILOCK_OK)
        rc = hilock_client_create(&c, o);
    if (rc != HILOCK_OK)
        snprintf(why, cap, "%s: %s", hilock_errname(rc),
                 hilock_last_error());
    hilock_options_free(o);
    return c;
}

int hl_set_valgrind_timeouts(hilock_options *o)
{
    int rc = HILOCK_OK;

    if (hl_under_valgrind())
        rc = hilock_options_set_connect_timeout_ms(o, 20000);
    if (rc == HILOCK_OK && hl_under_valgrind())
        rc = hilock_options_set_command_timeout_ms(o, 20000);
    return rc;
}

hilock_client *hl_new_client(const hl_redis_server *s,
                             const hl_client_opts *opts)
{
    char why[300];
    hilock_client *c = hl_open_client(s, opts, why, sizeof why);

    if (c == NULL)
        fail_msg("client: %s", why);
    return c;
}

void hl_free_client(hilock_client *c)
{
    assert_status(hilock_client_destroy(c), HILOCK_OK);
}

typedef int lock_create_fn(hilock_lock **out, hilock_client *c,
                           const char *name, size_t len);

static hilock_lock *new_lock(lock_create_fn *create, const char *kind,
                             hilock_client *c, const char *name)
{
    hilock_lock *l = NULL;
    int rc = create(&l, c, name, strlen(name));

    if (rc != HILOCK_OK)
        fail_msg("%s create: %s: %s", kind, hilock_errname(rc),
                 hilock_last_error());
    assert_non_null(l);
    return l;
}

hilock_lock *hl_new_lock(hilock_client *c, const char *name)
{
    return new_lock(hilock_lock_create_n, "lock", c, name);
}

hilock_lock *hl_new_fair_lock(hilock_client *c, const char *name)
{
    return new_lock(hilock_fair_lock_create_n, "fair lock", c, name);
}

hilock_lock *hl_new_read_lock(hilock_client *c, const char *name)
{
    return new_lock(hilock_read_lock_create_n, "read lock", c, name);
}

hilock_lock *hl_new_write_lock(hilock_client *c, const char *name)
{
    return new_lock(hilock_write_lock_create_n, "write lock", c, name);
}

void hl_wake_channel(const hilock_client *c, const char *key, char *out,
                     size_t cap)
{
    int n = snprintf(out, cap, "hilock_lock_wake:%s:%s", key,
                     hilock_client_id(c));
    assert_true(n > 0 && (size_t)n < cap);
}

void hl_free_lock(hilock_lock *l)
{
    assert_status(hilock_lock_destroy(l), HILOCK_OK);
}

/* ---- acquires pending on the loop --------------------------------------- */

typedef struct pending_read {
    hilock_lock *lock;
    hl_pending seen;
} pending_read;

/* Refused, listening on a confirmed channel, and owing the server
 * nothing: no attempt in flight, none kept for a wake-up that came
 * during one.  Read between the loop's callbacks, where an op that was
 * told to look again is attempting already. */
static bool op_idle(const hl_acquire_op *op)
{
    return op->state == HL_ACQUIRE_WAITING && op->saw_held &&
           op->in_flight == 0 && !op->retry_after && op->subscribed &&
           op->waiter.chan != NULL && hl_waiter_listening(&op->waiter) &&
           hl_waiter_seq(&op->waiter) != HL_WAIT_SEQ_NONE &&
           !op->waiter.trying && !op->waiter.wake_pending;
}

static void read_pending(hilock_client *c, void *arg)
{
    pending_read *r = arg;
    hl_pending *p = &r->seen;

    p->ops = p->subscribed = p->idle = 0;
    for (hl_acquire_op *op = r->lock->ops; op != NULL; op = op->next) {
        p->ops++;
        if (op->subscribed && op->waiter.chan != NULL)
            p->subscribed++;
        if (op_idle(op))
            p->idle++;
    }
    p->channels = c->pubsub ? (int)hl_pubsub_channel_count(c->pubsub) : 0;
}

hl_pending hl_read_pending(hilock_client *c, hilock_lock *lock)
{
    pending_read r = { .lock = lock };

    hl_run_on_loop(c, read_pending, &r);
    return r.seen;
}

typedef struct pending_want {
    hilock_client *client;
    hilock_lock *lock;
    int ops;
} pending_want;

static bool pending_reached(void *arg)
{
    pending_want *w = arg;
    hl_pending p = hl_read_pending(w->client, w->lock);

    return p.ops == w->ops && p.subscribed == w->ops;
}

bool hl_wait_pending(hilock_client *c, hilock_lock *lock, int n,
                     int timeout_ms)
{
    pending_want w = { c, lock, n };

    return hl_wait_until(pending_reached, &w, timeout_ms);
}

void hl_expect_pending(hilock_client *c, hilock_lock *lock, int n)
{
    if (!hl_wait_pending(c, lock, n, hl_widen(10000))) {
        hl_pending p = hl_read_pending(c, lock);

        fail_msg("%d acquires pending, %d subscribed; expected %d", p.ops,
                 p.subscribed, n);
    }
}

typedef struct channels_want {
    hilock_client *client;
    hilock_lock *lock;
    int channels;
} channels_want;

static bool channels_reached(void *arg)
{
    channels_want *w = arg;

    return hl_read_pending(w->client, w->lock).channels == w->channels;
}

void hl_expect_channels(hilock_client *c, hilock_lock *lock, int channels)
{
    channels_want w = { c, lock, channels };

    if (!hl_wait_until(channels_reached, &w, hl_widen(10000)))
        fail_msg("the client listens on %d channels, expected %d",
                 hl_read_pending(c, lock).channels, channels);
}

long long hl_scripts_run(hl_redis_server *s)
{
    return hl_fixture_calls(s, "evalsha") + hl_fixture_calls(s, "eval");
}

static bool idle_reached(void *arg)
{
    pending_want *w = arg;
    hl_pending p = hl_read_pending(w->client, w->lock);

    return p.ops == w->ops && p.idle == w->ops;
}

bool hl_wait_idle(hilock_client *c, hilock_lock *lock, int n, int timeout_ms)
{
    pending_want w = { c, lock, n };

    return hl_wait_until(idle_reached, &w, timeout_ms);
}

void hl_expect_idle(hilock_client *c, hilock_lock *lock, int n)
{
    if (!hl_wait_idle(c, lock, n, hl_widen(10000))) {
        hl_pending p = hl_read_pending(c, lock);

        fail_msg("%d acquires pending, %d idle; expected %d", p.ops, p.idle,
                 n);
    }
}

hilock_lock *hl_semaphore_lock(hilock_semaphore *sem)
{
    return sem->lock;
}

/* ---- records of async callbacks ----------------------------------------- */

void hl_acquire_rec_init(hl_acquire_rec *r, hilock_client *client)
{
    memset(r, 0, sizeof *r);
    r->client = client;
    r->status = -1;
    atomic_init(&r->calls, 0);
    atomic_init(&r->off_loop, 0);
}

void hl_record_acquire(hilock_lock *lock, int status,
                       const hilock_acquired *acquired, void *data)
{
    hl_acquire_rec *r = data;

    (void)lock;
    if (r->client != NULL && !hl_client_in_loop(r->client))
        atomic_fetch_add(&r->off_loop, 1);
    r->status = status;
    r->had_result = acquired != NULL;
    if (acquired != NULL)
        r->got = *acquired;
    r->at_ms = hl_now_ms();
    atomic_fetch_add(&r->calls, 1);
}

int hl_expect_acquire(hl_acquire_rec *r)
{
    int timeout_ms = hl_widen(10000);

    if (!hl_wait_count(&r->calls, 1, timeout_ms))
        fail_msg("an acquire did not complete within %d ms", timeout_ms);
    return r->status;
}

void hl_value_rec_init(hl_value_rec *r)
{
    memset(r, 0, sizeof *r);
    r->status = -1;
    r->value = -1;
    atomic_init(&r->calls, 0);
}

void hl_record_value(hilock_lock *lock, int status, int64_t value,
                     void *data)
{
    hl_value_rec *r = data;

    (void)lock;
    r->status = status;
    r->value = value;
    atomic_fetch_add(&r->calls, 1);
}

int64_t hl_expect_value(hl_value_rec *r, int expected_status)
{
    if (!hl_wait_count(&r->calls, 1, hl_widen(10000)))
        fail_msg("a lock callback did not fire");
    assert_int_equal(atomic_load(&r->calls), 1);
    if (r->status != expected_status)
        fail_msg("callback status %s, expected %s",
                 hilock_errname(r->status), hilock_errname(expected_status));
    return r->value;
}

int hl_client_counters(hilock_client *c, hilock_client_stats *out)
{
    hilock_stats all = {.size = sizeof all};
    int rc = hilock_client_stats_read(c, &all);
    if (rc == HILOCK_OK)
        *out = all.counters;
    return rc;
}

static void record_sem(hl_sem_rec *r, int status, int64_t value,
                       const char *id)
{
    r->status = status;
    r->value = value;
    snprintf(r->id, sizeof r->id, "%s", id ? id : "");
    r->at_ms = hl_now_ms();
    atomic_fetch_add(&r->calls, 1);
}

void hl_record_sem(hilock_semaphore *sem, int status, int64_t value,
                   void *data)
{
    (void)sem;
    record_sem(data, status, value, NULL);
}

void hl_record_permit(hilock_permit_semaphore *ps, int status,
                      const char *id, void *data)
{
    (void)ps;
    record_sem(data, status, 0, id);
}

void hl_lost_rec_init(hl_lost_rec *r, hilock_client *client)
{
    r->client = client;
    atomic_init(&r->calls, 0);
    atomic_init(&r->off_loop, 0);
    atomic_init(&r->owner, 0);
    atomic_init(&r->at_ms, 0);
    r->why[0] = '\0';
}

static void record_lost(hl_lost_rec *r, uint64_t owner)
{
    if (r->client != NULL && !hl_client_in_loop(r->client))
        atomic_fetch_add(&r->off_loop, 1);
    atomic_store(&r->owner, owner);
    atomic_store(&r->at_ms, hl_now_ms());
    if (atomic_load(&r->calls) == 0)
        snprintf(r->why, sizeof r->why, "%s", hilock_last_error());
    atomic_fetch_add(&r->calls, 1);
}

void hl_record_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    (void)lock;
    record_lost(data, owner);
}

void hl_record_group_lost(hilock_multilock *m, uint64_t owner, void *data)
{
    (void)m;
    record_lost(data, owner);
}

bool hl_lost_seen(void *rec)
{
    return atomic_load(&((hl_lost_rec *)rec)->calls) > 0;
}

bool hl_card_is_there(void *wait)
{
    hl_card_wait *w = wait;
    hilock_client_card *card = NULL;
    int rc = hilock_client_card_get(w->reader, w->id, &card);
    hilock_client_card_free(card);
    return rc == HILOCK_OK;
}

/* ---- threads that take a lock ------------------------------------------- */

typedef struct other_release {
    hilock_lock *lock;
    int rc;
    uint64_t owner;
} other_release;

static void *other_release_main(void *arg)
{
    other_release *j = arg;

    j->owner = hilock_thread_owner();
    j->rc = hilock_lock_release(j->lock);
    return NULL;
}

int hl_release_from_other_thread(hilock_lock *lock, uint64_t *owner)
{
    other_release job = { .lock = lock, .rc = -1 };
    pthread_t t;

    assert_int_equal(pthread_create(&t, NULL, other_release_main, &job), 0);
    pthread_join(t, NULL);
    if (owner != NULL)
        *owner = job.owner;
    return job.rc;
}

static void *acquirer_main(void *arg)
{
    hl_acquirer *a = arg;

    a->rc = hilock_lock_try_acquire(a->lock, a->wait_ms, a->lease_ms);
    a->acquired_at = hl_now_ms();
    if (a->rc == HILOCK_OK && a->release) {
        if (a->mc != NULL)
            hl_mutex_checker_exit(a->mc,
                                  hl_mutex_checker_enter(a->mc, a->id, 0));
        a->release_rc = hilock_lock_release(a->lock);
    }
    atomic_store(&a->done, true);
    return NULL;
}

void hl_acquirer_start_checked(hl_acquirer *a, hilock_lock *lock,
                               int64_t wait_ms, int64_t lease_ms,
                               bool release, hl_mutex_checker *mc,
                               uint32_t id)
{
    memset(a, 0, sizeof *a);
    a->lock = lock;
    a->wait_ms = wait_ms;
    a->lease_ms = lease_ms;
    a->release = release;
    a->mc = mc;
    a->id = id;
    a->rc = -1;
    a->release_rc = -1;
    atomic_init(&a->done, false);
    assert_int_equal(pthread_create(&a->thread, NULL, acquirer_main, a), 0);
}

void hl_acquirer_start(hl_acquirer *a, hilock_lock *lock, int64_t wait_ms,
                       int64_t lease_ms, bool release)
{
    hl_acquirer_start_checked(a, lock, wait_ms, lease_ms, release, NULL, 0);
}

void hl_acquirer_join(hl_acquirer *a, int timeout_ms)
{
    hl_join_within(a->thread, &a->done, timeout_ms);
}

void hl_join_within(pthread_t thread, atomic_bool *done, int timeout_ms)
{
    if (!hl_wait_flag(done, timeout_ms)) {
        pthread_detach(thread);
        fail_msg("a thread did not finish within %d ms", timeout_ms);
    }
    pthread_join(thread, NULL);
}

/* The hold taken again inside itself: joining one's own hold must neither
 * fail nor bump the token. */
static void rejoin(hl_checked_holder *h, int hold, uint64_t token)
{
    uint64_t again = 0;
    int rc = hilock_lock_acquire_fenced(h->lock, 0, HILOCK_LEASE_WATCHDOG,
                                        &again);

    if (rc != HILOCK_OK || again != token)
        hl_mutex_checker_fail(h->mc, "holder %u, hold %d: reentrant "
                              "acquire %s, token %llu in a hold with %llu",
                              h->id, hold, hilock_errname(rc),
                              (unsigned long long)again,
                              (unsigned long long)token);
    if (rc == HILOCK_OK && hilock_lock_release(h->lock) != HILOCK_OK)
        hl_mutex_checker_fail(h->mc, "holder %u, hold %d: inner release",
                              h->id, hold);
}

void *hl_checked_holder_main(void *arg)
{
    hl_checked_holder *h = arg;

    for (int i = 0; i < h->holds; i++) {
        uint64_t token = 0;
        long slot;
        int rc = h->fenced
                     ? hilock_lock_acquire_fenced(h->lock, hl_widen(30000),
                                                  HILOCK_LEASE_WATCHDOG,
                                                  &token)
                     : hilock_lock_try_acquire(h->lock, hl_widen(30000),
                                               HILOCK_LEASE_WATCHDOG);

        if (rc != HILOCK_OK) {
            hl_mutex_checker_fail(h->mc, "holder %u, hold %d: acquire: %s "
                                  "(%s)", h->id, i, hilock_errname(rc),
                                  hilock_last_error());
            return NULL;
        }
        slot = hl_mutex_checker_enter(h->mc, h->id, token);
        if (h->rejoin_every > 0 && i % h->rejoin_every == 0)
            rejoin(h, i, token);
        hl_mutex_checker_exit(h->mc, slot);
        rc = hilock_lock_release(h->lock);
        if (rc != HILOCK_OK) {
            hl_mutex_checker_fail(h->mc, "holder %u, hold %d: release: %s "
                                  "(%s)", h->id, i, hilock_errname(rc),
                                  hilock_last_error());
            return NULL;
        }
    }
    return NULL;
}

void hl_expect_reentry_finds_loss(hilock_client *c, hilock_lock *lock,
                                  hilock_client *other, const char *name,
                                  int64_t lease_ms)
{
    /* Static: the callback may still write it after a failed assertion. */
    static hl_lost_rec lr;
    const char *argv[] = { "DEL", name };
    hilock_reply *r = NULL;
    int64_t count = -1;
    bool lost = false;

    hl_lost_rec_init(&lr, c);
    assert_status(hilock_lock_set_lost_callback(lock, hl_record_lost, &lr),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(lock, 0, lease_ms), HILOCK_OK);
    assert_status(hilock_client_command(other, 2, argv, NULL, &r),
                  HILOCK_OK);
    assert_non_null(r);
    assert_int_equal(r->type, HILOCK_REPLY_INTEGER);
    assert_int_equal(r->integer, 1);
    hilock_reply_free(r);
    assert_status(hilock_lock_try_acquire(lock, 0, lease_ms), HILOCK_OK);
    /* Told on the loop thread before the acquire came back, not at some
     * renewal later: no waiting here. */
    assert_int_equal(atomic_load(&lr.calls), 1);
    assert_int_equal(atomic_load(&lr.owner), hilock_thread_owner());
    assert_int_equal(atomic_load(&lr.off_loop), 0);
    assert_status(hilock_lock_lease_lost(lock, &lost), HILOCK_OK);
    assert_true(lost);
    assert_status(hilock_lock_hold_count(lock, &count), HILOCK_OK);
    assert_int_equal(count, 1);
    /* The new hold is the server's one hold. */
    assert_status(hilock_lock_release(lock), HILOCK_OK);
    assert_status(hilock_lock_hold_count(lock, &count), HILOCK_OK);
    assert_int_equal(count, 0);
    assert_status(hilock_lock_lease_lost(lock, &lost), HILOCK_OK);
    assert_true(lost);
    /* The older hold's release, answered without the server. */
    assert_status(hilock_lock_release(lock), HILOCK_ELEASELOST);
    assert_status(hilock_lock_lease_lost(lock, &lost), HILOCK_OK);
    assert_false(lost);
    assert_status(hilock_lock_release(lock), HILOCK_ENOTOWNER);
    assert_int_equal(atomic_load(&lr.calls), 1);
    assert_status(hilock_lock_set_lost_callback(lock, NULL, NULL),
                  HILOCK_OK);
}

hilock_semaphore *hl_new_semaphore(hilock_client *c, const char *name,
                                   bool expirable)
{
    hilock_semaphore *s = NULL;
    hilock_permit_semaphore *p = NULL;
    if (!expirable) {
        assert_status(hilock_semaphore_create(&s, c, name), HILOCK_OK);
        return s;
    }
    assert_status(hilock_permit_semaphore_create(&p, c, name), HILOCK_OK);
    return hilock_permit_semaphore_base(p);
}

/* The base handle of a permit semaphore is the permit semaphore's own
 * (semaphore.c), so that a test may run one body over both kinds. */
hilock_permit_semaphore *hl_permits_of(hilock_semaphore *s)
{
    return (hilock_permit_semaphore *)s;
}

int hl_semaphore_destroy_any(hilock_semaphore *s)
{
    if (s != NULL && s->expirable)
        return hilock_permit_semaphore_destroy(hl_permits_of(s));
    return hilock_semaphore_destroy(s);
}
