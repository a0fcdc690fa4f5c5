/* The direct hand-off of a plain semaphore's permits: a waiting client's
 * attempt records its wish, and a release that would promise the permits
 * to that client grants them outright, so that the woken client sends
 * no attempt.  What must hold around it: a lost message is claimed, a
 * waiter that gives up gives the grant back, a client nobody hears is
 * promised, not granted, a Java waiter is told, and under pub/sub
 * connections killed no permit is lost or counted twice. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/handoff.h"
#include "support/lock_helpers.h"
#include "support/mutex_checker.h"
#include "support/plain_sub.h"
#include "support/raw_reads.h"

static hl_redis_server *server;

static int group_setup(void **state)
{
    (void)state;
    server = hl_fixture_plain();
    return server ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    hl_redis_server_stop(server);
    return 0;
}

/* ---- helpers ------------------------------------------------------------ */

/* A client whose waiters renew their place only every third of
 * hl_widen(60000) ms, which no test here lasts: every attempt they make
 * answers a wake-up. */
static hilock_client *patient_client(void)
{
    return hl_new_client(server,
                         &(hl_client_opts){.waiter_ms = hl_widen(60000)});
}

/* "<prefix>:{name}", one of the semaphore's keys of ours. */
static void key_of(char *out, size_t cap, const char *prefix,
                   const char *name)
{
    snprintf(out, cap, "%s:{%s}", prefix, name);
}

static long long count_of(const char *name)
{
    char v[32];
    return hl_raw_bulk(server, v, sizeof v, "GET", name, (char *)NULL)
               ? atoll(v)
               : -1;
}

/* The grants the releases made that nobody consumed yet. */
static long long grants_left(const char *name)
{
    char key[128];
    key_of(key, sizeof key, "hilock_sem_granted", name);
    return hl_raw_int(server, "HLEN", key, (char *)NULL);
}

/* The permits granted to the wish nonce; 0 for none. */
static long long granted_to(const char *name, const char *nonce)
{
    char key[128], v[32];
    key_of(key, sizeof key, "hilock_sem_granted", name);
    return hl_raw_bulk(server, v, sizeof v, "HGET", key, nonce, (char *)NULL)
               ? atoll(v)
               : 0;
}

/* Whether the client id has a wish recorded on name. */
static bool has_wish(const char *name, const char *client_id)
{
    char key[128];
    key_of(key, sizeof key, "hilock_sem_want", name);
    return hl_raw_int(server, "HEXISTS", key, client_id, (char *)NULL) == 1;
}

/* The wish c recorded on name, for permits: its nonce into nonce, its
 * letter returned ('W' when its attempt was told it was first in line).
 * Fails the test when there is none, or of another shape. */
static char expect_wish(const char *name, hilock_client *c, long long permits,
                        char *nonce, size_t cap)
{
    char key[128], raw[160], n[96];
    long long asked = 0;
    char letter = 0;

    key_of(key, sizeof key, "hilock_sem_want", name);
    if (!hl_raw_bulk(server, raw, sizeof raw, "HGET", key,
                     hilock_client_id(c), (char *)NULL))
        fail_msg("no wish recorded for %s", hilock_client_id(c));
    if (sscanf(raw, "%c %95s %lld", &letter, n, &asked) != 3 ||
        (letter != 'w' && letter != 'W'))
        fail_msg("a wish of an unexpected shape: %s", raw);
    assert_int_equal(asked, permits);
    assert_true(strncmp(n, hilock_client_id(c), HILOCK_CLIENT_ID_LEN) == 0);
    snprintf(nonce, cap, "%s", n);
    return letter;
}

/* An async acquire of one permit by c on s, waiting as long as it takes
 * (its id in *id), recorded in r; returns once it was refused, recorded
 * its wish (nonce into nonce) and asks nothing more of the server. */
static void wait_with_wish(hilock_client *c, hilock_semaphore *s,
                           const char *name, hl_sem_rec *r, uint64_t *id,
                           char *nonce, size_t cap)
{
    memset(r, 0, sizeof *r);
    assert_status(hilock_semaphore_try_acquire_async(
                      s, 1, HILOCK_WAIT_FOREVER, hl_record_sem, r, id),
                  HILOCK_OK);
    hl_expect_idle(c, hl_semaphore_lock(s), 1);
    (void)expect_wish(name, c, 1, nonce, cap);
}

/* What a release does for client_id's wish nonce of one permit, by hand
 * and without the message that would tell the client (lost): the permit
 * holder's permit becomes the grant, the client leaves the line. */
static void grant_unheard(const char *name, const char *client_id,
                          const char *nonce)
{
    char want[128], grants[128], line[128], alive[128];

    key_of(want, sizeof want, "hilock_sem_want", name);
    key_of(grants, sizeof grants, "hilock_sem_granted", name);
    key_of(line, sizeof line, "hilock_sem_line", name);
    key_of(alive, sizeof alive, "hilock_sem_alive", name);
    assert_int_equal(hl_raw_int(server, "HDEL", want, client_id, (char *)NULL),
                     1);
    assert_int_equal(
        hl_raw_int(server, "HSET", grants, nonce, "1", (char *)NULL), 1);
    assert_int_equal(hl_raw_int(server, "LREM", line, "1", client_id,
                                (char *)NULL),
                     1);
    assert_int_equal(hl_raw_int(server, "ZREM", alive, client_id,
                                (char *)NULL),
                     1);
}

typedef struct count_is {
    const char *name;
    long long count;
    long long grants;
} count_is;

static bool count_and_grants_are(void *arg)
{
    count_is *c = arg;
    return count_of(c->name) == c->count && grants_left(c->name) == c->grants;
}

/* Waits hl_widen(10000) ms for name's count and unconsumed grants. */
static void expect_count_and_grants(const char *name, long long count,
                                    long long grants)
{
    count_is c = {name, count, grants};
    if (!hl_wait_until(count_and_grants_are, &c, hl_widen(10000)))
        fail_msg("%s: %lld free and %lld grants left, not %lld and %lld",
                 name, count_of(name), grants_left(name), count, grants);
}

/* A holder's client a with the one permit of name taken, and a waiter's
 * client b whose acquire waits for it, its wish recorded (nonce). */
typedef struct scene {
    const char *name;
    hilock_client *a, *b;
    hilock_semaphore *held, *waiting;
    uint64_t id; /* the waiting acquire's */
    char nonce[96];
} scene;

static void scene_open(scene *sc, const char *name, hl_sem_rec *got)
{
    memset(sc, 0, sizeof *sc);
    sc->name = name;
    sc->a = patient_client();
    sc->b = patient_client();
    sc->held = hl_new_semaphore(sc->a, name, false);
    sc->waiting = hl_new_semaphore(sc->b, name, false);
    assert_status(hilock_semaphore_set(sc->held, 1), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire(sc->held, 1, 0), HILOCK_OK);
    wait_with_wish(sc->b, sc->waiting, name, got, &sc->id, sc->nonce,
                   sizeof sc->nonce);
}

static void scene_close(scene *sc)
{
    assert_status(hl_semaphore_destroy_any(sc->waiting), HILOCK_OK);
    assert_status(hl_semaphore_destroy_any(sc->held), HILOCK_OK);
    hl_free_client(sc->b);
    hl_free_client(sc->a);
}

/* ---- the hand-off ------------------------------------------------------- */

/* The holder's release is the one script between the holder letting go
 * and the waiter holding: the waiter's wish is granted in it, the grant
 * kept until the waiter's release consumes it. */
static void test_release_hands_over(void **state)
{
    static hl_sem_rec got;
    scene sc;

    (void)state;
    scene_open(&sc, "hand-over", &got);
    long long before = hl_scripts_run(server);
    assert_status(hilock_semaphore_release(sc.held, 1), HILOCK_OK);
    hl_expect_count(&got.calls, 1, hl_widen(10000));
    assert_status(got.status, HILOCK_OK);
    assert_int_equal(hl_scripts_run(server) - before, 1);
    assert_int_equal(hl_handed_to(sc.b), 1);
    assert_int_equal(count_of(sc.name), 0);
    assert_int_equal(granted_to(sc.name, sc.nonce), 1);
    assert_false(has_wish(sc.name, hilock_client_id(sc.b)));

    /* The waiter's release consumes the grant, and gives its permit
     * back once. */
    assert_status(hilock_semaphore_release(sc.waiting, 1), HILOCK_OK);
    assert_int_equal(count_of(sc.name), 1);
    assert_int_equal(grants_left(sc.name), 0);
    scene_close(&sc);
}

/* A grant whose message is lost is the waiter's next attempt's, which
 * takes it as its own record: the permit is counted once. */
static void test_lost_grant_claimed(void **state)
{
    static hl_sem_rec got;
    scene sc;
    char wake[160];

    (void)state;
    scene_open(&sc, "hand-lost", &got);
    /* The holder's permit goes to the wish, unheard. */
    grant_unheard(sc.name, hilock_client_id(sc.b), sc.nonce);
    assert_int_equal(atomic_load(&got.calls), 0);

    /* A wake-up with no grant in it: the waiter attempts, and finds the
     * grant made for its wish. */
    snprintf(wake, sizeof wake, "hilock_sem_wake:{%s}:%s", sc.name,
             hilock_client_id(sc.b));
    hl_raw_int(server, "PUBLISH", wake, "0", (char *)NULL);
    hl_expect_count(&got.calls, 1, hl_widen(10000));
    assert_status(got.status, HILOCK_OK);
    assert_int_equal(hl_handed_to(sc.b), 0);
    assert_int_equal(grants_left(sc.name), 0);
    assert_int_equal(count_of(sc.name), 0);

    assert_status(hilock_semaphore_release(sc.waiting, 1), HILOCK_OK);
    assert_int_equal(count_of(sc.name), 1);
    scene_close(&sc);
}

/* A waiter cancelled before it heard of its grant gives the permit back,
 * and its wish goes. */
static void test_gone_waiter_gives_back(void **state)
{
    static hl_sem_rec got;
    scene sc;
    char rec[192];

    (void)state;
    scene_open(&sc, "hand-gone", &got);
    grant_unheard(sc.name, hilock_client_id(sc.b), sc.nonce);

    assert_status(hilock_semaphore_cancel(sc.waiting, sc.id), HILOCK_OK);
    hl_expect_count(&got.calls, 1, hl_widen(10000));
    assert_status(got.status, HILOCK_ECANCELED);
    expect_count_and_grants(sc.name, 1, 0);
    assert_false(has_wish(sc.name, hilock_client_id(sc.b)));
    /* Its attempts were answered: nothing was voided, and no record of
     * one stays for ten minutes after every wait given up. */
    snprintf(rec, sizeof rec, "hilock_sem_record:{%s}:%s", sc.name,
             sc.nonce);
    assert_int_equal(hl_raw_exists(server, rec), 0);
    scene_close(&sc);
}

/* A wish of a client that listens on no channel (its connection is gone)
 * is not granted: plain permits never run out, so they would be lost
 * with it.  The release promises them instead, which runs out with the
 * client's place. */
static void test_silent_client_is_promised(void **state)
{
    const char *name = "hand-silent";
    const char *ghost = "11111111-2222-4333-8444-555555555555";
    hilock_client *a = patient_client();
    hilock_semaphore *held = hl_new_semaphore(a, name, false);
    char want[128], line[128], alive[128], next[128], at[32], wish[160];
    char who[64];

    (void)state;
    assert_status(hilock_semaphore_set(held, 1), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire(held, 1, 0), HILOCK_OK);
    key_of(want, sizeof want, "hilock_sem_want", name);
    key_of(line, sizeof line, "hilock_sem_line", name);
    key_of(alive, sizeof alive, "hilock_sem_alive", name);
    key_of(next, sizeof next, "hilock_sem_next", name);
    snprintf(at, sizeof at, "%lld", hl_raw_server_ms(server) + 60000);
    snprintf(wish, sizeof wish, "w %s:7 1", ghost);
    hl_raw_int(server, "RPUSH", line, ghost, (char *)NULL);
    hl_raw_int(server, "ZADD", alive, at, ghost, (char *)NULL);
    hl_raw_int(server, "HSET", want, ghost, wish, (char *)NULL);

    assert_status(hilock_semaphore_release(held, 1), HILOCK_OK);
    assert_int_equal(count_of(name), 1);
    assert_int_equal(grants_left(name), 0);
    assert_true(hl_raw_bulk(server, who, sizeof who, "GET", next,
                            (char *)NULL));
    assert_string_equal(who, ghost);
    assert_true(has_wish(name, ghost));
    hl_raw_int(server, "DEL", want, line, alive, next, (char *)NULL);
    assert_status(hl_semaphore_destroy_any(held), HILOCK_OK);
    hl_free_client(a);
}

/* While a Java waiter listens on Redisson's channel, a release promises
 * and announces the permit instead of granting a wish: grants would keep
 * it out for as long as our clients keep wishing. */
static void test_java_waiter_is_told(void **state)
{
    static hl_sem_rec got;
    scene sc;
    char channel[128], heard[64];

    (void)state;
    scene_open(&sc, "hand-java", &got);
    snprintf(channel, sizeof channel, "redisson_sc:{%s}", sc.name);
    hl_plain_sub *java = hl_plain_sub_open(server, channel);
    assert_non_null(java);

    assert_status(hilock_semaphore_release(sc.held, 1), HILOCK_OK);
    if (!hl_plain_sub_next(java, heard, sizeof heard, hl_widen(10000)))
        fail_msg("the Java waiter was not told of the release");
    assert_string_equal(heard, "1");
    /* Ours takes it by its attempt, as before hand-offs. */
    hl_expect_count(&got.calls, 1, hl_widen(10000));
    assert_status(got.status, HILOCK_OK);
    assert_int_equal(hl_handed_to(sc.b), 0);
    assert_int_equal(grants_left(sc.name), 0);
    hl_plain_sub_close(java);
    assert_status(hilock_semaphore_release(sc.waiting, 1), HILOCK_OK);
    assert_int_equal(count_of(sc.name), 1);
    scene_close(&sc);
}

/* ---- under faults ------------------------------------------------------- */

#define TAKERS 4
#define TAKES 150

typedef struct taker {
    pthread_t thread;
    hilock_semaphore *sem;
    hl_mutex_checker *mc;
    uint32_t id;
    int failures;
} taker;

static void *taker_main(void *arg)
{
    taker *t = arg;
    for (int i = 0; i < TAKES; i++) {
        /* Bounded: a permit lost would leave the others waiting. */
        if (hilock_semaphore_try_acquire(t->sem, 1, hl_widen(30000)) !=
            HILOCK_OK) {
            t->failures++;
            continue;
        }
        long slot = hl_mutex_checker_enter(t->mc, t->id, 0);
        hl_mutex_checker_exit(t->mc, slot);
        if (hilock_semaphore_release(t->sem, 1) != HILOCK_OK)
            t->failures++;
    }
    return NULL;
}

/* One permit passed among four clients, 150 times each, while their
 * pub/sub connections are killed every 15 ms: grants go out unheard and
 * are claimed, or given back by waiters that gave up.  Nobody held at
 * once, every take happened, and at the end the one permit is free and
 * every grant consumed: none lost, none counted twice. */
static void test_handoffs_under_pubsub_kills(void **state)
{
    const char *name = "hand-kills";
    hilock_client *c[TAKERS];
    hilock_semaphore *s[TAKERS];
    taker t[TAKERS];
    hl_mutex_checker *mc = hl_mutex_checker_create(TAKERS * TAKES, 0);

    (void)state;
    assert_non_null(mc);
    for (int i = 0; i < TAKERS; i++) {
        c[i] = hl_new_client(server, &(hl_client_opts){.waiter_ms = 900});
        s[i] = hl_new_semaphore(c[i], name, false);
        t[i] = (taker){.sem = s[i], .mc = mc, .id = (uint32_t)i};
    }
    assert_status(hilock_semaphore_set(s[0], 1), HILOCK_OK);
    hl_pubsub_killer *k = hl_pubsub_killer_start(server);
    for (int i = 0; i < TAKERS; i++)
        assert_int_equal(pthread_create(&t[i].thread, NULL, taker_main, &t[i]),
                         0);
    for (int i = 0; i < TAKERS; i++)
        pthread_join(t[i].thread, NULL);
    int kills = hl_pubsub_killer_stop(k);
    long long handed = 0;
    for (int i = 0; i < TAKERS; i++) {
        assert_int_equal(t[i].failures, 0);
        handed += (long long)hl_handed_to(c[i]);
    }
    hl_expect_handoffs(mc, TAKERS * TAKES, kills, handed);
    expect_count_and_grants(name, 1, 0);
    for (int i = 0; i < TAKERS; i++) {
        assert_status(hl_semaphore_destroy_any(s[i]), HILOCK_OK);
        hl_free_client(c[i]);
    }
    hl_mutex_checker_free(mc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_hands_over),
        cmocka_unit_test(test_lost_grant_claimed),
        cmocka_unit_test(test_gone_waiter_gives_back),
        cmocka_unit_test(test_silent_client_is_promised),
        cmocka_unit_test(test_java_waiter_is_told),
        cmocka_unit_test(test_handoffs_under_pubsub_kills),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
