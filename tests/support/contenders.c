/* Holders contending for one lock; see contenders.h. */
#include "support/contenders.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <setjmp.h>
#include <cmocka.h>

#include "support/fixture.h"

/* Told sections whose notice time is kept for the report. */
#define HL_CT_MAX_TOLD 4096
/* Sections whose client is kept for the report. */
#define HL_CT_MAX_LOG 100000
/* The longest a holder waits for another client's turn. */
#define HL_CT_TURN_MS 50

enum { HL_CT_OUT, HL_CT_ACQUIRING, HL_CT_HOLDING, HL_CT_RELEASING,
       HL_CT_PHASES };

static const char *const hl_ct_phase_names[HL_CT_PHASES] = {
    "between holds", "while acquiring", "while holding", "while releasing"};

/* The statuses an acquire may end with while the master changes. */
static const int hl_ct_unavailable[] = {HILOCK_EIO, HILOCK_ETIMEDOUT,
                                        HILOCK_ENOACK, HILOCK_EINDOUBT};
#define HL_CT_NUNAVAILABLE \
    (sizeof hl_ct_unavailable / sizeof hl_ct_unavailable[0])

typedef struct hl_ct_holder {
    pthread_t thread;
    bool started;
    uint32_t id;
    int client; /* index of its client */
    hl_contenders *group;
    hilock_lock *lock;
    unsigned seed;
    atomic_int phase;
    /* The first notice since the holder last cleared it; 0: none. */
    _Atomic int64_t told_ns;
    /* Notices by the phase the holder was in when each came. */
    atomic_int notices[HL_CT_PHASES];
    /* Read after the join. */
    int acquired, busy, unavailable[HL_CT_NUNAVAILABLE];
    int told;              /* sections told of a loss while in them */
    int lost_before_entry; /* grants found lost before the section */
    int stray;             /* notices in a section whose hold stood */
    int lost_at_release;   /* releases that said the lease was lost */
    int released_in_doubt; /* EINDOUBT or EIO from a release */
    int64_t granted_ns;    /* of the hold now held */
    /* The first release that said lost with no notice before it: when
     * its hold was granted, when the release began and ended, and the
     * detail. */
    int64_t unnoticed_at[3];
    char unnoticed_why[192];
} hl_ct_holder;

struct hl_contenders {
    hl_mutex_checker *mc;
    atomic_bool stop;
    /* The client of the last section entered (-1: none yet), and the
     * condition the holders wait on for it to change. */
    pthread_mutex_t turn_mu;
    pthread_cond_t turn_cv;
    int last_client;
    _Atomic int64_t asked_ns;
    _Atomic int64_t switched_ns;
    _Atomic int64_t first_after_ns;
    /* Holders in each phase when the failover was asked for, and when
     * the switch was seen. */
    int phases_at_ask[HL_CT_PHASES];
    int phases_at_switch[HL_CT_PHASES];
    atomic_size_t ntold;
    _Atomic int64_t told_at[HL_CT_MAX_TOLD];
    /* Each section's entry and client, to count the hand-overs from one
     * client to another. */
    atomic_size_t nlog;
    struct hl_ct_entry {
        int64_t entered_ns;
        int client;
    } *log;
    int nholders;
    hl_ct_holder holders[];
};

/* The handle is the holder's alone, so the notice is about its hold. */
static void hl_ct_on_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    (void)lock, (void)owner;
    hl_ct_holder *h = data;
    int64_t none = 0;
    int64_t now = hl_now_ns();

    atomic_fetch_add(&h->notices[atomic_load(&h->phase)], 1);
    atomic_compare_exchange_strong(&h->told_ns, &none, now);
}

static bool hl_ct_lease_lost(hl_ct_holder *h)
{
    bool lost = false;
    int rc = hilock_lock_lease_lost(h->lock, &lost);

    if (rc != HILOCK_OK)
        hl_mutex_checker_fail(h->group->mc, "holder %u: lease_lost: %s",
                              h->id, hilock_errname(rc));
    return lost;
}

static int hl_ct_unavailable_index(int rc)
{
    for (size_t i = 0; i < HL_CT_NUNAVAILABLE; i++)
        if (hl_ct_unavailable[i] == rc)
            return (int)i;
    return -1;
}

/* The section's work: a pause of us microseconds, cut short by a notice
 * of loss, after which the holder must not go on. */
static void hl_ct_work(hl_ct_holder *h, int us)
{
    int64_t until = hl_now_ns() + (int64_t)us * 1000;
    struct timespec step = {0, 100000};

    while (hl_now_ns() < until && atomic_load(&h->told_ns) == 0)
        nanosleep(&step, NULL);
}

static void hl_ct_release(hl_ct_holder *h, bool told)
{
    hl_contenders *g = h->group;
    int64_t began = hl_now_ns();
    int rc;

    atomic_store(&h->phase, HL_CT_RELEASING);
    /* ETIMEDOUT: withdrawn unsent, the hold stands; release again. */
    for (int tries = 0; tries < 5; tries++) {
        rc = hilock_lock_release(h->lock);
        if (rc != HILOCK_ETIMEDOUT)
            break;
    }
    atomic_store(&h->phase, HL_CT_OUT);
    if (rc == HILOCK_OK)
        return;
    if (rc == HILOCK_ELEASELOST) {
        if (!told && h->lost_at_release++ == 0) {
            h->unnoticed_at[0] = h->granted_ns;
            h->unnoticed_at[1] = began;
            h->unnoticed_at[2] = hl_now_ns();
            snprintf(h->unnoticed_why, sizeof h->unnoticed_why, "%s",
                     hilock_last_error());
        }
        return;
    }
    /* The answer was lost with the master: it counts as released. */
    if (rc == HILOCK_EINDOUBT || rc == HILOCK_EIO) {
        h->released_in_doubt++;
        return;
    }
    hl_mutex_checker_fail(g->mc, "holder %u: release: %s (%s)", h->id,
                          hilock_errname(rc), hilock_last_error());
}

static void hl_ct_section(hl_ct_holder *h)
{
    hl_contenders *g = h->group;
    int64_t entered = hl_now_ns();
    long slot = hl_mutex_checker_enter(g->mc, h->id, 0);
    int64_t switched = atomic_load(&g->switched_ns);
    int64_t none = 0;

    if (switched != 0 && entered > switched)
        atomic_compare_exchange_strong(&g->first_after_ns, &none, entered);
    size_t n = atomic_fetch_add(&g->nlog, 1);
    if (n < HL_CT_MAX_LOG)
        g->log[n] = (struct hl_ct_entry){entered, h->client};
    pthread_mutex_lock(&g->turn_mu);
    g->last_client = h->client;
    pthread_cond_broadcast(&g->turn_cv);
    pthread_mutex_unlock(&g->turn_mu);
    hl_ct_work(h, 1000 + (int)(rand_r(&h->seed) % 4001));
    int64_t told = atomic_load(&h->told_ns);
    /* A notice counts when the client agrees the hold is gone; one about
     * an older hold must not excuse this section. */
    if (told != 0 && hl_ct_lease_lost(h)) {
        h->told++;
        hl_mutex_checker_told(g->mc, slot, (uint64_t)told);
        size_t i = atomic_fetch_add(&g->ntold, 1);
        if (i < HL_CT_MAX_TOLD)
            atomic_store(&g->told_at[i], told);
    } else if (told != 0) {
        h->stray++;
        told = 0;
    }
    hl_mutex_checker_exit(g->mc, slot);
    hl_ct_release(h, told != 0);
}

/* A client hands the lock to its own waiters first, so left alone one
 * client would keep it and the holders of the other would hardly ever
 * get it: no test of exclusion between clients.  After its section a
 * holder lets another client's holder have one first, or waits
 * HL_CT_TURN_MS for it (that client may be unable to take it). */
static void hl_ct_await_turn(hl_ct_holder *h)
{
    hl_contenders *g = h->group;
    struct timespec until;

    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += HL_CT_TURN_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&g->turn_mu);
    while (g->last_client == h->client && !atomic_load(&g->stop))
        if (pthread_cond_timedwait(&g->turn_cv, &g->turn_mu, &until) != 0)
            break;
    pthread_mutex_unlock(&g->turn_mu);
}

static void *hl_ct_main(void *arg)
{
    hl_ct_holder *h = arg;
    hl_contenders *g = h->group;

    while (!atomic_load(&g->stop)) {
        hl_ct_await_turn(h);
        int64_t wait_ms = rand_r(&h->seed) % 200;

        atomic_store(&h->phase, HL_CT_ACQUIRING);
        int rc = hilock_lock_try_acquire(h->lock, wait_ms,
                                         HILOCK_LEASE_WATCHDOG);
        if (rc != HILOCK_OK) {
            atomic_store(&h->phase, HL_CT_OUT);
            int u = hl_ct_unavailable_index(rc);
            if (rc == HILOCK_EBUSY) {
                h->busy++;
            } else if (u >= 0) {
                h->unavailable[u]++;
            } else {
                hl_mutex_checker_fail(g->mc, "holder %u: acquire: %s (%s)",
                                      h->id, hilock_errname(rc),
                                      hilock_last_error());
                break;
            }
            continue;
        }
        h->acquired++;
        h->granted_ns = hl_now_ns();
        atomic_store(&h->phase, HL_CT_HOLDING);
        /* Whatever came before is about an older hold, unless the client
         * already says this one is lost: then the holder stays out. */
        atomic_store(&h->told_ns, 0);
        if (hl_ct_lease_lost(h)) {
            h->lost_before_entry++;
            hl_ct_release(h, true);
            continue;
        }
        hl_ct_section(h);
    }
    atomic_store(&h->phase, HL_CT_OUT);
    return NULL;
}

hl_contenders *hl_contenders_start(hilock_client *const *clients,
                                   int nclients, int per_client,
                                   const char *name, hl_mutex_checker *mc)
{
    int n = nclients * per_client;
    hl_contenders *g = calloc(1, sizeof *g + (size_t)n * sizeof(hl_ct_holder));

    assert_non_null(g);
    pthread_condattr_t ca;
    assert_int_equal(pthread_condattr_init(&ca), 0);
    assert_int_equal(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC), 0);
    assert_int_equal(pthread_cond_init(&g->turn_cv, &ca), 0);
    pthread_condattr_destroy(&ca);
    assert_int_equal(pthread_mutex_init(&g->turn_mu, NULL), 0);
    g->last_client = -1;
    g->log = calloc(HL_CT_MAX_LOG, sizeof *g->log);
    assert_non_null(g->log);
    atomic_init(&g->nlog, 0);
    g->mc = mc;
    g->nholders = n;
    atomic_init(&g->stop, false);
    atomic_init(&g->asked_ns, 0);
    atomic_init(&g->switched_ns, 0);
    atomic_init(&g->first_after_ns, 0);
    atomic_init(&g->ntold, 0);
    for (int i = 0; i < n; i++) {
        hl_ct_holder *h = &g->holders[i];
        h->id = (uint32_t)i;
        h->client = i % nclients;
        h->group = g;
        h->seed = (unsigned)i * 7919u + 17;
        atomic_init(&h->phase, HL_CT_OUT);
        atomic_init(&h->told_ns, 0);
        for (int p = 0; p < HL_CT_PHASES; p++)
            atomic_init(&h->notices[p], 0);
        assert_int_equal(hilock_lock_create(&h->lock, clients[i % nclients],
                                            name),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_set_lost_callback(h->lock,
                                                       hl_ct_on_lost, h),
                         HILOCK_OK);
    }
    for (int i = 0; i < n; i++) {
        hl_ct_holder *h = &g->holders[i];
        assert_int_equal(pthread_create(&h->thread, NULL, hl_ct_main, h), 0);
        h->started = true;
    }
    return g;
}

static void hl_ct_phases_now(const hl_contenders *g, int *into)
{
    for (int i = 0; i < g->nholders; i++)
        into[atomic_load(&g->holders[i].phase)]++;
}

void hl_contenders_mark_asked(hl_contenders *g, int64_t ns)
{
    atomic_store(&g->asked_ns, ns);
    hl_ct_phases_now(g, g->phases_at_ask);
}

void hl_contenders_mark_switched(hl_contenders *g, int64_t ns)
{
    atomic_store(&g->switched_ns, ns);
    hl_ct_phases_now(g, g->phases_at_switch);
}

void hl_contenders_stop(hl_contenders *g)
{
    pthread_mutex_lock(&g->turn_mu);
    atomic_store(&g->stop, true);
    pthread_cond_broadcast(&g->turn_cv);
    pthread_mutex_unlock(&g->turn_mu);
    for (int i = 0; i < g->nholders; i++)
        if (g->holders[i].started) {
            pthread_join(g->holders[i].thread, NULL);
            g->holders[i].started = false;
        }
}

static int hl_ct_by_value(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

static double hl_ct_ms(int64_t ns) { return (double)ns / 1e6; }

static int hl_ct_by_entry(const void *a, const void *b)
{
    const struct hl_ct_entry *x = a, *y = b;

    return x->entered_ns < y->entered_ns ? -1
                                         : x->entered_ns > y->entered_ns;
}

/* Sections entered on another client than the one before, in all and
 * after the switch. */
static void hl_ct_handovers(const hl_contenders *g, int *all, int *after)
{
    size_t n = atomic_load(&g->nlog);
    int64_t switched = atomic_load(&g->switched_ns);

    if (n > HL_CT_MAX_LOG)
        n = HL_CT_MAX_LOG;
    qsort(g->log, n, sizeof *g->log, hl_ct_by_entry);
    *all = *after = 0;
    for (size_t i = 1; i < n; i++)
        if (g->log[i].client != g->log[i - 1].client) {
            (*all)++;
            if (switched != 0 && g->log[i - 1].entered_ns > switched)
                (*after)++;
        }
}

void hl_contenders_report(const hl_contenders *g, const char *what)
{
    int acquired = 0, busy = 0, told = 0, told_holders = 0, before = 0;
    int stray = 0, at_release = 0, in_doubt = 0;
    int unavailable[HL_CT_NUNAVAILABLE] = {0};
    int notices[HL_CT_PHASES] = {0};
    int unavailable_all = 0;

    for (int i = 0; i < g->nholders; i++) {
        const hl_ct_holder *h = &g->holders[i];
        acquired += h->acquired;
        busy += h->busy;
        told += h->told;
        told_holders += h->told > 0;
        before += h->lost_before_entry;
        stray += h->stray;
        at_release += h->lost_at_release;
        in_doubt += h->released_in_doubt;
        for (size_t u = 0; u < HL_CT_NUNAVAILABLE; u++) {
            unavailable[u] += h->unavailable[u];
            unavailable_all += h->unavailable[u];
        }
        for (int p = 0; p < HL_CT_PHASES; p++)
            notices[p] += atomic_load(&h->notices[p]);
    }
    printf("# %s: %d grants, %zu sections, %d busy, %d unavailable "
           "(EIO %d, ETIMEDOUT %d, ENOACK %d, EINDOUBT %d)\n",
           what, acquired, hl_mutex_checker_count(g->mc), busy,
           unavailable_all, unavailable[0], unavailable[1], unavailable[2],
           unavailable[3]);
    printf("# %s: %d sections told of a loss, by %d of %d holders; %d "
           "grants lost before their section; %d releases said lost "
           "without a notice in the section; %d releases in doubt; %d "
           "notices about a hold that stood\n",
           what, told, told_holders, g->nholders, before, at_release,
           in_doubt, stray);
    int handovers, handovers_after;
    hl_ct_handovers(g, &handovers, &handovers_after);
    printf("# %s: %d hand-overs from one client to the other, %d of them "
           "after the switch\n",
           what, handovers, handovers_after);
    printf("# %s: lost notices:", what);
    for (int p = 0; p < HL_CT_PHASES; p++)
        printf("%s %d %s", p ? "," : "", notices[p], hl_ct_phase_names[p]);
    printf("\n");

    int64_t asked = atomic_load(&g->asked_ns);
    int64_t switched = atomic_load(&g->switched_ns);
    for (int i = 0; i < g->nholders; i++) {
        const hl_ct_holder *h = &g->holders[i];
        if (h->lost_at_release == 0)
            continue;
        printf("# %s: holder %d: a release said lost with no notice before "
               "it (\"%s\"); the hold was granted at %+.1f ms, the release "
               "began at %+.1f ms and ended at %+.1f ms from the ask\n",
               what, i, h->unnoticed_why,
               hl_ct_ms(h->unnoticed_at[0] - asked),
               hl_ct_ms(h->unnoticed_at[1] - asked),
               hl_ct_ms(h->unnoticed_at[2] - asked));
    }
    const int *at[2] = {g->phases_at_ask, g->phases_at_switch};
    const char *when[2] = {"the failover was asked for",
                           "the switch was seen"};
    for (int k = 0; k < 2; k++)
        if ((k == 0 ? asked : switched) != 0)
            printf("# %s: when %s, holders: %d holding, %d acquiring, %d "
                   "releasing, %d between holds\n",
                   what, when[k], at[k][HL_CT_HOLDING],
                   at[k][HL_CT_ACQUIRING], at[k][HL_CT_RELEASING],
                   at[k][HL_CT_OUT]);
    int64_t first = atomic_load(&g->first_after_ns);
    size_t n = atomic_load(&g->ntold);
    if (n > HL_CT_MAX_TOLD)
        n = HL_CT_MAX_TOLD;
    if (n > 0 && asked != 0) {
        int64_t delays[HL_CT_MAX_TOLD];
        for (size_t i = 0; i < n; i++)
            delays[i] = atomic_load(&g->told_at[i]) - asked;
        qsort(delays, n, sizeof delays[0], hl_ct_by_value);
        printf("# %s: notices in a section came %.1f ms (median) and %.1f "
               "ms (max) after the failover was asked for (min %.1f ms)\n",
               what, hl_ct_ms(delays[n / 2]), hl_ct_ms(delays[n - 1]),
               hl_ct_ms(delays[0]));
    }
    if (switched != 0 && asked != 0)
        printf("# %s: the switch was seen %.1f ms after the failover was "
               "asked for\n",
               what, hl_ct_ms(switched - asked));
    if (switched != 0 && first != 0)
        printf("# %s: the first section after the switch began %.1f ms "
               "after it\n",
               what, hl_ct_ms(first - switched));
    fflush(stdout);
}

/* The policy HL_FAILOVER_POLICY names; NULL when it names none. */
static const char *measured_policy(hilock_replica_ack *policy)
{
    static const struct {
        const char *name;
        hilock_replica_ack policy;
    } names[] = {{"none", HILOCK_ACK_NONE},
                 {"one", HILOCK_ACK_ONE},
                 {"majority", HILOCK_ACK_MAJORITY},
                 {"all", HILOCK_ACK_ALL}};
    const char *want = getenv("HL_FAILOVER_POLICY");
    if (want == NULL || want[0] == '\0')
        return NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(want, names[i].name) == 0) {
            *policy = names[i].policy;
            return names[i].name;
        }
    fail_msg("HL_FAILOVER_POLICY=%s: none, one, majority or all", want);
    return NULL;
}

void hl_contenders_policy(hilock_options *o)
{
    hilock_replica_ack policy;
    if (measured_policy(&policy) != NULL)
        assert_int_equal(hilock_options_set_replica_ack(o, policy),
                         HILOCK_OK);
    else
        assert_int_equal(hilock_options_replica_ack(o), HILOCK_ACK_MAJORITY);
}

bool hl_contenders_verdict(const hl_contenders *g, const char *what,
                           char *why, size_t cap)
{
    hilock_replica_ack policy;
    bool clean = hl_mutex_checker_verify(g->mc, false, why, cap);
    const char *name = measured_policy(&policy);
    if (name == NULL)
        return clean;
    printf("# %s: replicas=%s: %zu overlapping sections of %zu; %s\n", what,
           name, hl_mutex_checker_overlaps(g->mc),
           hl_mutex_checker_count(g->mc), clean ? "clean" : why);
    fflush(stdout);
    return true;
}

void hl_contenders_free(hl_contenders *g)
{
    if (g == NULL)
        return;
    hl_contenders_stop(g);
    for (int i = 0; i < g->nholders; i++)
        hilock_lock_destroy(g->holders[i].lock);
    free(g->log);
    pthread_cond_destroy(&g->turn_cv);
    pthread_mutex_destroy(&g->turn_mu);
    free(g);
}
