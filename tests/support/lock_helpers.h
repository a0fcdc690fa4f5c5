/* What the lock tests (test_lock, test_lock_faults, test_fair,
 * test_rwlock, test_redlock) all need: clients of a fixture server, lock
 * handles of each kind, a status assertion, records of the async
 * callbacks, the acquires a handle has pending, and threads that take a
 * lock for a test.
 *
 * Every function here fails the running cmocka test (fail_msg) when it
 * cannot do its job, except those whose comment starts "No cmocka": they
 * only report, and only they may be called in a forked child, where
 * cmocka must not run, or on a thread that outlives a failed test.  As
 * in fixture.h, hl_wait_* say whether a condition came in time and
 * hl_expect_* fail the test when it did not. */
#ifndef HL_LOCK_HELPERS_H
#define HL_LOCK_HELPERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/multi.h"
#include "hilock/options.h"
#include "hilock/semaphore.h"
#include "support/children.h"
#include "support/fixture.h"
#include "support/mutex_checker.h"

/* Compares statuses by name, so a failure says which codes differ and
 * what the library said last.  Named after cmocka's assert_int_equal,
 * which it stands in for wherever a status is checked. */
#define assert_status(actual, expected)                                    \
    do {                                                                   \
        int a_ = (actual), e_ = (expected);                                \
        if (a_ != e_)                                                      \
            fail_msg("%s returned %s (%s), expected %s", #actual,          \
                     hilock_errname(a_), hilock_last_error(),              \
                     hilock_errname(e_));                                  \
    } while (0)

/* ---- the fixture of a test ---------------------------------------------- */

/* A fresh plain server for each test, and the children the test forks:
 * those still running when the test ends, failed or not, are killed, so
 * that nothing outlives it.  A test file keeps one and lists each test
 * with it as hl_lock_test(test, &fx). */
typedef struct hl_lock_fixture {
    hl_redis_server *server;
    hl_children kids;
} hl_lock_fixture;

/* cmocka setup and teardown; the state is the hl_lock_fixture. */
int hl_lock_fixture_setup(void **state);
int hl_lock_fixture_teardown(void **state);

#define hl_lock_test(fn, fixture)                                          \
    cmocka_unit_test_prestate_setup_teardown(fn, hl_lock_fixture_setup,     \
                                             hl_lock_fixture_teardown,      \
                                             fixture)

/* ---- clients and handles ------------------------------------------------ */

/* What a test client sets beyond the common options; a zero field keeps
 * the library's default. */
typedef struct hl_client_opts {
    int64_t watchdog_ms;
    int64_t waiter_ms;
    /* Zero gives 20 s under valgrind, where the default is too short. */
    int64_t command_timeout_ms;
    int64_t lock_delay_ms;
} hl_client_opts;

/* No cmocka: a client of s with opts (NULL: none).  Every such client
 * reconnects after 20 to 200 ms, since a test that breaks connections
 * should not wait seconds for it to come back, and under valgrind gets
 * 20 s to connect.  NULL on failure, with the reason in why. */
hilock_client *hl_open_client(const hl_redis_server *s,
                              const hl_client_opts *opts, char *why,
                              size_t cap);

/* No cmocka: under valgrind, 20 s to connect and for each command,
 * where the defaults would time out on mere slowness; nothing otherwise.
 * For clients made from options of the test's own.  Returns the status
 * of the first option call that failed. */
int hl_set_valgrind_timeouts(hilock_options *o);

/* hl_open_client, failing the test instead of returning NULL. */
hilock_client *hl_new_client(const hl_redis_server *s,
                             const hl_client_opts *opts);
void hl_free_client(hilock_client *c);

/* A handle on the lock called name, of each kind. */
hilock_lock *hl_new_lock(hilock_client *c, const char *name);
/* A plain semaphore's handle, or with expirable the base handle of a
 * permit semaphore (hilock_permit_semaphore_base). */
hilock_semaphore *hl_new_semaphore(hilock_client *c, const char *name,
                                   bool expirable);
/* A permit semaphore from the base handle hl_new_semaphore gave, and a
 * destroy for either kind's handle. */
hilock_permit_semaphore *hl_permits_of(hilock_semaphore *s);
int hl_semaphore_destroy_any(hilock_semaphore *s);
hilock_lock *hl_new_fair_lock(hilock_client *c, const char *name);
hilock_lock *hl_new_read_lock(hilock_client *c, const char *name);
hilock_lock *hl_new_write_lock(hilock_client *c, const char *name);
void hl_free_lock(hilock_lock *l);

/* The channel where client c's waiters for a reentrant lock listen:
 * "hilock_lock_wake:<key>:<client id>", key being the name as its keys
 * carry it ("{name}", or the name itself when it has a hash tag). */
void hl_wake_channel(const hilock_client *c, const char *key, char *out,
                     size_t cap);

/* ---- acquires pending on the loop --------------------------------------- */

/* What a handle has pending, as its client's loop thread sees it. */
typedef struct hl_pending {
    int ops;        /* acquires of the handle still pending */
    int subscribed; /* of those, the ones listening on the lock's channel
                     * (kinds whose waiters go in line: in the client's
                     * line, which they join as they start) */
    int idle;       /* of those, the ones that were refused and now listen
                     * on a confirmed channel, with no attempt in flight
                     * or owed to a wake-up */
    int channels;   /* channels of the client's pub/sub with listeners */
} hl_pending;

hl_pending hl_read_pending(hilock_client *c, hilock_lock *lock);

/* Whether exactly n acquires of lock came to be pending within
 * timeout_ms, each listening on the lock's channel: from then on only a
 * release message or a timer moves them. */
bool hl_wait_pending(hilock_client *c, hilock_lock *lock, int n,
                     int timeout_ms);

/* hl_wait_pending for hl_widen(10000) ms. */
void hl_expect_pending(hilock_client *c, hilock_lock *lock, int n);

/* Waits hl_widen(10000) ms for c's pub/sub to listen on exactly channels
 * channels (hl_pending.channels): a client first in a lock's line listens
 * on other libraries' channel besides its own. */
void hl_expect_channels(hilock_client *c, hilock_lock *lock, int channels);

/* The scripts s has run so far, EVAL and EVALSHA together, as INFO
 * commandstats counts them: what a lock's waiters cost the server. */
long long hl_scripts_run(hl_redis_server *s);

/* Whether exactly n acquires of lock came to be pending within
 * timeout_ms, each of them idle (see hl_pending): the server has nothing
 * more to hear from them until a message or a timer of theirs moves
 * them.  Where waiters join the client's line as they start (semaphores),
 * hl_wait_pending says only that they started; this says they asked. */
bool hl_wait_idle(hilock_client *c, hilock_lock *lock, int n,
                  int timeout_ms);

/* hl_wait_idle for hl_widen(10000) ms. */
void hl_expect_idle(hilock_client *c, hilock_lock *lock, int n);

/* The lock handle under a semaphore handle, whose acquires the helpers
 * above read. */
hilock_lock *hl_semaphore_lock(hilock_semaphore *sem);

/* ---- records of async callbacks -----------------------------------------
 * A callback writes its record's fields before it counts the call, so a
 * reader that saw the count sees them.  A record a callback may still
 * write after a failed assertion ended the test early belongs in static
 * storage, not in the test's stack frame. */

typedef struct hl_acquire_rec {
    hilock_client *client; /* whose loop thread should call; may be NULL */
    atomic_int calls;
    atomic_int off_loop;  /* calls made on another thread than client's */
    int status;           /* of the last call; -1 before the first */
    bool had_result;      /* the last call came with a hilock_acquired */
    hilock_acquired got;  /* the last one that came */
    int64_t at_ms;        /* hl_now_ms() at the last call */
    uint64_t id;          /* room for the acquire's id, for the caller */
} hl_acquire_rec;

void hl_acquire_rec_init(hl_acquire_rec *r, hilock_client *client);

/* No cmocka: a hilock_acquire_cb whose data is an hl_acquire_rec. */
void hl_record_acquire(hilock_lock *lock, int status,
                       const hilock_acquired *acquired, void *data);

/* Waits hl_widen(10000) ms for the first call; returns its status. */
int hl_expect_acquire(hl_acquire_rec *r);

typedef struct hl_value_rec {
    atomic_int calls;
    int status; /* of the last call; -1 before the first */
    int64_t value;
} hl_value_rec;

void hl_value_rec_init(hl_value_rec *r);

/* No cmocka: a hilock_lock_cb whose data is an hl_value_rec. */
void hl_record_value(hilock_lock *lock, int status, int64_t value,
                     void *data);

/* Waits hl_widen(10000) ms for the one call, which must have brought
 * expected_status; returns its value. */
int64_t hl_expect_value(hl_value_rec *r, int expected_status);

/* The record of a semaphore call; zeroed memory is a fresh one. */
typedef struct hl_sem_rec {
    atomic_int calls;
    int status;     /* of the last call */
    int64_t value;  /* its value */
    char id[HILOCK_PERMIT_ID_MAX]; /* its permit id, "" for none */
    int64_t at_ms;  /* hl_now_ms() at the last call */
} hl_sem_rec;

/* No cmocka: the client's counters (hilock_stats.counters), with the
 * status of hilock_client_stats_read; out untouched on an error. */
int hl_client_counters(hilock_client *c, hilock_client_stats *out);

/* No cmocka: a hilock_semaphore_cb, and a hilock_permit_cb, whose data
 * is an hl_sem_rec. */
void hl_record_sem(hilock_semaphore *sem, int status, int64_t value,
                   void *data);
void hl_record_permit(hilock_permit_semaphore *ps, int status,
                      const char *id, void *data);

typedef struct hl_lost_rec {
    hilock_client *client; /* whose loop thread should call; may be NULL */
    atomic_int calls;
    atomic_int off_loop;
    _Atomic uint64_t owner; /* of the last call */
    _Atomic int64_t at_ms;  /* hl_now_ms() at the last call */
    char why[256];          /* hilock_last_error() in the first call */
} hl_lost_rec;

void hl_lost_rec_init(hl_lost_rec *r, hilock_client *client);

/* No cmocka: a hilock_lost_cb and a hilock_multi_lost_cb whose data is
 * an hl_lost_rec. */
void hl_record_lost(hilock_lock *lock, uint64_t owner, void *data);
void hl_record_group_lost(hilock_multilock *m, uint64_t owner, void *data);

/* No cmocka: for hl_wait_until, whether the hl_lost_rec at rec has been
 * called. */
bool hl_lost_seen(void *rec);

/* For hl_wait_until: whether reader finds the card of the client with id
 * on the server.  A client reading its own card this way also knows the
 * replies to the card's writes are in: they came on the same connection,
 * before this one.  No cmocka. */
typedef struct hl_card_wait {
    hilock_client *reader;
    const char *id;
} hl_card_wait;
bool hl_card_is_there(void *wait);

/* ---- a loss found by a reentrant acquire --------------------------------- */

/* The calling thread takes lock (a handle of c on the key name) with
 * lease_ms, the key is deleted through other behind its back, and the
 * thread takes the lock again before any renewal can notice: the older
 * hold must be reported lost (lost callback, hilock_lock_lease_lost)
 * before the second acquire returns, the new hold must count 1 as the
 * server does, and the release of the older hold must say
 * HILOCK_ELEASELOST.  c's watchdog should be long enough that no renewal
 * comes within the test.  Leaves no lost callback on lock. */
void hl_expect_reentry_finds_loss(hilock_client *c, hilock_lock *lock,
                                  hilock_client *other, const char *name,
                                  int64_t lease_ms);

/* ---- threads that take a lock ------------------------------------------- */

/* Releases lock on a thread of its own, which is another owner of the
 * same handle; returns the status, and that owner in *owner unless owner
 * is NULL. */
int hl_release_from_other_thread(hilock_lock *lock, uint64_t *owner);

/* A thread that takes lock once, waiting up to wait_ms, and with
 * release lets go as soon as it holds; given a checker, the hold is a
 * critical section for it, as holder id.  Start it with
 * hl_acquirer_start or hl_acquirer_start_checked; what it got is in rc,
 * release_rc and acquired_at once hl_acquirer_join returned.  A thread
 * that may outlive a failed test writes its hl_acquirer still: keep that
 * in static storage then. */
typedef struct hl_acquirer {
    pthread_t thread;
    hilock_lock *lock;
    int64_t wait_ms;
    int64_t lease_ms;
    bool release;
    hl_mutex_checker *mc; /* may be NULL */
    uint32_t id;
    int rc;              /* of the acquire; -1 before it returned */
    int release_rc;      /* of the release; -1 when it made none */
    int64_t acquired_at; /* hl_now_ms() when the acquire returned */
    atomic_bool done;
} hl_acquirer;

void hl_acquirer_start(hl_acquirer *a, hilock_lock *lock, int64_t wait_ms,
                       int64_t lease_ms, bool release);
void hl_acquirer_start_checked(hl_acquirer *a, hilock_lock *lock,
                               int64_t wait_ms, int64_t lease_ms,
                               bool release, hl_mutex_checker *mc,
                               uint32_t id);

/* hl_join_within for the acquirer's thread. */
void hl_acquirer_join(hl_acquirer *a, int timeout_ms);

/* Joins thread once *done is set.  A thread still running after
 * timeout_ms fails the test; it is detached first, so that the process
 * can go on to report. */
void hl_join_within(pthread_t thread, atomic_bool *done, int timeout_ms);

/* A thread that takes lock holds times, each hold a critical section for
 * mc.  A fenced hold hands its token to mc; with rejoin_every n, every
 * n-th hold (the first among them) also takes the lock again inside
 * itself, which must keep the token, and lets go of that once.  Each
 * acquire waits at most hl_widen(30000) ms, so that a lost wake-up is a
 * reported failure rather than a hang.  Set the fields, then start
 * hl_checked_holder_main on it with pthread_create. */
typedef struct hl_checked_holder {
    pthread_t thread;
    hilock_lock *lock;
    hl_mutex_checker *mc;
    uint32_t id; /* the holder, as mc reports it */
    int holds;
    bool fenced;
    int rejoin_every; /* 0: never; only with fenced */
} hl_checked_holder;

/* No cmocka: failures go to the holder's checker, so a forked child may
 * run it too. */
void *hl_checked_holder_main(void *arg);

#endif
