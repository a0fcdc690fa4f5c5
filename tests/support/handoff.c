/* What the direct hand-off suites share; see handoff.h. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "support/fixture.h"
#include "support/handoff.h"
#include "support/lock_helpers.h"
#include "support/mutex_checker.h"
#include "support/raw_reads.h"

#define CONTENDERS 4
#define HOLDS 150

struct hl_pubsub_killer {
    pthread_t thread;
    hl_redis_server *server;
    atomic_bool stop;
    atomic_int kills;
};

static void *killer_main(void *arg)
{
    hl_pubsub_killer *k = arg;

    while (!atomic_load(&k->stop)) {
        hl_sleep_ms(15);
        if (hl_fixture_client_kill(k->server, "pubsub") > 0)
            atomic_fetch_add(&k->kills, 1);
    }
    return NULL;
}

hl_pubsub_killer *hl_pubsub_killer_start(hl_redis_server *server)
{
    hl_pubsub_killer *k = calloc(1, sizeof *k);

    assert_non_null(k);
    k->server = server;
    atomic_init(&k->stop, false);
    atomic_init(&k->kills, 0);
    assert_int_equal(pthread_create(&k->thread, NULL, killer_main, k), 0);
    return k;
}

int hl_pubsub_killer_stop(hl_pubsub_killer *k)
{
    atomic_store(&k->stop, true);
    pthread_join(k->thread, NULL);
    int kills = atomic_load(&k->kills);
    free(k);
    return kills;
}

const hl_line_keys hl_lock_line_keys = {
    "hilock_lock_want", "hilock_lock_line", "hilock_lock_alive"};
const hl_line_keys hl_rwlock_line_keys = {
    "hilock_rwlock_want", "hilock_rwlock_line", "hilock_rwlock_writers"};

hl_wish hl_read_wish(hl_redis_server *server, const hl_line_keys *keys,
                     const char *name, const char *client_id)
{
    char key[128], raw[256];
    hl_wish w = {0};

    snprintf(key, sizeof key, "%s:{%s}", keys->want, name);
    if (!hl_raw_bulk(server, raw, sizeof raw, "HGET", key, client_id,
                     (char *)NULL))
        return w;
    /* "W": recorded by an attempt told it was first in line. */
    if ((raw[0] == 'w' || raw[0] == 'W') &&
        sscanf(raw + 1, " %63s %lld %63s", w.nonce, &w.lease_ms, w.field) ==
            3) {
        w.kind = 'w';
        w.first = raw[0] == 'W';
    } else if (raw[0] == 'g' &&
               sscanf(raw, "g %63s %63s", w.nonce, w.field) == 2) {
        w.kind = 'g';
    } else {
        fail_msg("the wish of %s reads \"%s\"", client_id, raw);
    }
    return w;
}

hl_wish hl_expect_wish(hl_redis_server *server, const hl_line_keys *keys,
                       const char *name, hilock_client *c, uint64_t owner)
{
    char field[64];
    hl_wish w = hl_read_wish(server, keys, name, hilock_client_id(c));

    snprintf(field, sizeof field, "%s:%llu", hilock_client_id(c),
             (unsigned long long)owner);
    if (w.kind != 'w')
        fail_msg("no wish recorded for the waiting client");
    assert_string_equal(w.field, field);
    return w;
}

void hl_grant_wish_unheard(hl_redis_server *server, const hl_line_keys *keys,
                           const char *name, const char *client_id,
                           const hl_wish *w)
{
    char key[128], granted[160];

    snprintf(key, sizeof key, "%s:{%s}", keys->want, name);
    snprintf(granted, sizeof granted, "g %s %s", w->nonce, w->field);
    (void)hl_raw_int(server, "HSET", key, client_id, granted, (char *)NULL);
    snprintf(key, sizeof key, "%s:{%s}", keys->line, name);
    (void)hl_raw_int(server, "LREM", key, "1", client_id, (char *)NULL);
    snprintf(key, sizeof key, "%s:{%s}", keys->alive, name);
    (void)hl_raw_int(server, "ZREM", key, client_id, (char *)NULL);
}

int64_t hl_release_one(hilock_lock *lock, uint64_t owner)
{
    hl_value_rec rel;

    hl_value_rec_init(&rel);
    assert_status(hilock_lock_release_async(lock, owner, hl_record_value,
                                            &rel),
                  HILOCK_OK);
    return hl_expect_value(&rel, HILOCK_OK);
}

uint64_t hl_handed_to(hilock_client *c)
{
    hilock_stats s = {.size = sizeof s};

    assert_status(hilock_client_stats_read(c, &s), HILOCK_OK);
    return s.acquires_handed;
}

void hl_java_hold(hl_redis_server *server, const char *name)
{
    assert_int_equal(
        hl_raw_int(server, "HSET", name, HL_JAVA_FIELD, "1", (char *)NULL), 1);
    assert_int_equal(
        hl_raw_int(server, "PEXPIRE", name, "30000", (char *)NULL), 1);
}

long long hl_hold_of(hl_redis_server *server, const char *name,
                     const char *field)
{
    char v[32];

    if (!hl_raw_bulk(server, v, sizeof v, "HGET", name, field, (char *)NULL))
        return 0;
    return atoll(v);
}

void hl_wait_in_line(hilock_client *c, hilock_lock *lock, uint64_t owner,
                     hl_acquire_rec *rec, uint64_t *id)
{
    hl_acquire_rec_init(rec, c);
    assert_status(hilock_lock_acquire_async(lock, owner, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, rec, id),
                  HILOCK_OK);
    hl_expect_idle(c, lock, 1);
}

typedef struct pttl_above {
    hl_redis_server *server;
    const char *key;
    long long ms;
} pttl_above;

static bool pttl_is_above(void *arg)
{
    pttl_above *p = arg;
    return hl_raw_pttl(p->server, p->key) > p->ms;
}

bool hl_wait_pttl_above(hl_redis_server *server, const char *key,
                        long long ms, int timeout_ms)
{
    pttl_above p = {server, key, ms};
    return hl_wait_until(pttl_is_above, &p, timeout_ms);
}

void hl_expect_handoffs(hl_mutex_checker *mc, int holds, int kills,
                        long long handed)
{
    char why[256];

    print_message("    %d holds, %d pub/sub kills, %lld of them handed "
                  "straight to a waiter\n",
                  holds, kills, handed);
    if (!hl_mutex_checker_verify(mc, false, why, sizeof why))
        fail_msg("%s", why);
    assert_int_equal(hl_mutex_checker_count(mc), holds);
    assert_true(kills > 0);
    assert_true(handed > 0);
}

void hl_handoffs_under_pubsub_kills(hl_redis_server *server,
                                    hilock_lock *(*make)(hilock_client *,
                                                         const char *),
                                    const char *name)
{
    const hl_client_opts opts = {.waiter_ms = 900};
    hl_mutex_checker *mc = hl_mutex_checker_create(CONTENDERS * HOLDS, 0);
    hilock_client *c[CONTENDERS];
    hilock_lock *l[CONTENDERS];
    hl_checked_holder hold[CONTENDERS];

    assert_non_null(mc);
    for (int i = 0; i < CONTENDERS; i++) {
        c[i] = hl_new_client(server, &opts);
        l[i] = make(c[i], name);
        hold[i] = (hl_checked_holder){.lock = l[i], .mc = mc,
                                      .id = (uint32_t)i, .holds = HOLDS};
    }
    hl_pubsub_killer *k = hl_pubsub_killer_start(server);
    for (int i = 0; i < CONTENDERS; i++)
        assert_int_equal(pthread_create(&hold[i].thread, NULL,
                                        hl_checked_holder_main, &hold[i]),
                         0);
    for (int i = 0; i < CONTENDERS; i++)
        pthread_join(hold[i].thread, NULL);
    int kills = hl_pubsub_killer_stop(k);
    long long handed = 0;
    for (int i = 0; i < CONTENDERS; i++)
        handed += (long long)hl_handed_to(c[i]);
    hl_expect_handoffs(mc, CONTENDERS * HOLDS, kills, handed);
    for (int i = 0; i < CONTENDERS; i++) {
        hl_free_lock(l[i]);
        hl_free_client(c[i]);
    }
    hl_mutex_checker_free(mc);
}
