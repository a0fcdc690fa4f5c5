/* The stock demo: workers deduct stock from many products, each deduction
 * under the lock of the product's segment, first with one segment (every
 * deduction queues for the same lock) and then with sixteen.  At the end
 * the stock left in Redis must account for every deduction made.  On a
 * Redis Cluster the segments' locks and the products' keys spread over
 * the masters, and the demo shows where each segment lives. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define STOCK_PRODUCTS 1000
#define STOCK_WORKERS 64
#define STOCK_START 1000000LL
#define STOCK_RUN_MS 3000

typedef struct stock_run stock_run;

typedef struct stock_worker {
    stock_run *run;
    int id;
    int product;
    unsigned segment;
    hilock_lock *lock;
    unsigned rng;
} stock_worker;

struct stock_run {
    hilock_client *client;
    hilock_segmented *segments;
    const char *prefix;
    int64_t end_ms;
    atomic_llong deductions;
    atomic_llong waits;    /* acquires that found the segment taken */
    atomic_llong handoffs; /* a segment passing to another worker */
    atomic_int running;
    atomic_int failures;
    /* Loop thread only: per segment, who holds it, who held it last, and
     * how many workers are asking for it. */
    int holder[64];
    int last_holder[64];
    int asking[64];
    long long deducted[64];
    stock_worker workers[STOCK_WORKERS];
};

static int stock_key(const stock_run *r, int product, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%s:stock:%d", r->prefix, product);
}

static void cycle(stock_worker *w);

static void stop(stock_worker *w, int failed)
{
    if (failed)
        atomic_fetch_add(&w->run->failures, 1);
    atomic_fetch_sub(&w->run->running, 1);
}

static void on_released(hilock_lock *lock, int status, int64_t left,
                        void *user_data)
{
    (void)lock;
    (void)left;
    stock_worker *w = user_data;
    if (status != HILOCK_OK) {
        stop(w, 1);
        return;
    }
    if (cli_now_ms() < w->run->end_ms)
        cycle(w);
    else
        stop(w, 0);
}

static void on_deducted(hilock_client *c, int status, hilock_reply *reply,
                        void *user_data)
{
    (void)c;
    stock_worker *w = user_data;
    if (status == HILOCK_OK && reply->type == HILOCK_REPLY_INTEGER) {
        atomic_fetch_add(&w->run->deductions, 1);
        w->run->deducted[w->segment]++;
    }
    hilock_reply_free(reply);
    w->run->holder[w->segment] = -1;
    if (hilock_lock_release_async(w->lock, (uint64_t)w->id + 1, on_released,
                                  w) != HILOCK_OK)
        stop(w, 1);
}

static void on_acquired(hilock_lock *lock, int status,
                        const hilock_acquired *acquired, void *user_data)
{
    (void)lock;
    (void)acquired;
    stock_worker *w = user_data;
    stock_run *r = w->run;
    if (status != HILOCK_OK) {
        stop(w, 1);
        return;
    }
    r->asking[w->segment]--;
    if (r->last_holder[w->segment] != w->id)
        atomic_fetch_add(&r->handoffs, 1);
    r->holder[w->segment] = r->last_holder[w->segment] = w->id;
    char key[128];
    int n = stock_key(r, w->product, key, sizeof key);
    const char *argv[] = {"DECR", key};
    size_t lens[] = {4, (size_t)n};
    if (hilock_client_command_async(r->client, 2, argv, lens, on_deducted,
                                    w) != HILOCK_OK)
        stop(w, 1);
}

static void cycle(stock_worker *w)
{
    stock_run *r = w->run;
    char key[128];
    w->product = (int)(rand_r(&w->rng) % STOCK_PRODUCTS);
    int n = stock_key(r, w->product, key, sizeof key);
    /* The product's key picks its segment, as a service would do it. */
    w->segment = hilock_segmented_index(r->segments, key, (size_t)n);
    w->lock = hilock_segmented_lock(r->segments, w->segment);
    if (r->holder[w->segment] != -1 || r->asking[w->segment] > 0)
        atomic_fetch_add(&r->waits, 1);
    r->asking[w->segment]++;
    if (hilock_lock_acquire_async(w->lock, (uint64_t)w->id + 1,
                                  HILOCK_WAIT_FOREVER, 10000, 0, on_acquired,
                                  w, NULL) != HILOCK_OK)
        stop(w, 1);
}

/* First worker calls run on the loop thread, so the holder table is only
 * ever touched there. */
typedef struct starter {
    stock_run *run;
    atomic_bool done;
} starter;

static void start_all(hilock_client *c, int status, hilock_reply *reply,
                      void *user_data)
{
    (void)c;
    (void)status;
    hilock_reply_free(reply);
    starter *s = user_data;
    for (int i = 0; i < STOCK_WORKERS; i++)
        cycle(&s->run->workers[i]);
    atomic_store(&s->done, true);
}

/* One command per key: on a cluster the products' keys lie in many
 * slots, which no single MSET or DEL may span. */
static int preset(hilock_client *c, const char *prefix)
{
    char value[24];
    snprintf(value, sizeof value, "%lld", STOCK_START);
    for (int i = 0; i < STOCK_PRODUCTS; i++) {
        char key[128];
        snprintf(key, sizeof key, "%s:stock:%d", prefix, i);
        const char *argv[] = {"SET", key, value};
        if (hilock_client_command(c, 3, argv, NULL, NULL) != HILOCK_OK)
            return -1;
    }
    return 0;
}

/* Stock taken out of Redis, summed over the products. */
static long long stock_taken(hilock_client *c, const char *prefix)
{
    long long taken = 0;
    for (int i = 0; i < STOCK_PRODUCTS; i++) {
        char key[128];
        int n = snprintf(key, sizeof key, "%s:stock:%d", prefix, i);
        const char *argv[] = {"GET", key};
        size_t lens[] = {3, (size_t)n};
        hilock_reply *r;
        if (hilock_client_command(c, 2, argv, lens, &r) != HILOCK_OK)
            return -1;
        if (r->type == HILOCK_REPLY_STRING)
            taken += STOCK_START - strtoll(r->str, NULL, 10);
        hilock_reply_free(r);
    }
    return taken;
}

static void cleanup(hilock_client *c, const char *prefix)
{
    for (int i = 0; i < STOCK_PRODUCTS; i++) {
        char key[128];
        snprintf(key, sizeof key, "%s:stock:%d", prefix, i);
        const char *argv[] = {"DEL", key};
        hilock_client_command(c, 2, argv, NULL, NULL);
    }
}

/* Where each segment's lock lives: its master, by the cluster's own
 * map.  *where gets each segment's master index (-1 unknown). */
static void show_segments(hilock_client *c, const cli_slot_map *map,
                          const stock_run *r, unsigned segments,
                          int64_t t0, int *where)
{
    for (unsigned s = 0; s < segments; s++) {
        size_t len;
        const char *name =
            hilock_lock_name(hilock_segmented_lock(r->segments, s), &len);
        int slot = -1;
        where[s] = cli_key_master(c, map, name, len, &slot);
        printf("[%5lld ms] S=%-2u segment %2u: lock %.*s, slot %5d, on "
               "master %s\n",
               (long long)(cli_now_ms() - t0), segments, s, (int)len, name,
               slot, where[s] >= 0 ? map->addr[where[s]] : "?");
    }
}

/* Per master: its segments and the deductions made under their locks. */
static void show_masters(const cli_slot_map *map, const stock_run *r,
                         unsigned segments, int64_t t0, const int *where)
{
    for (int m = 0; m < map->masters; m++) {
        char list[256] = "";
        size_t used = 0;
        int count = 0;
        long long made = 0;
        for (unsigned s = 0; s < segments; s++) {
            if (where[s] != m)
                continue;
            count++;
            made += r->deducted[s];
            int n = snprintf(list + used, sizeof list - used, "%s%u",
                             used ? " " : "", s);
            if (n > 0 && (size_t)n < sizeof list - used)
                used += (size_t)n;
        }
        printf("[%5lld ms] S=%-2u master %s (%d slots): %d segment%s%s%s%s, "
               "%lld deductions\n",
               (long long)(cli_now_ms() - t0), segments, map->addr[m],
               map->slots[m], count, count == 1 ? "" : "s",
               count ? " (" : "", list, count ? ")" : "", made);
    }
}

/* One run with `segments` segments; returns deductions per second, or -1. */
static double run_once(hilock_client *c, const char *base, unsigned segments,
                       int64_t t0, const cli_slot_map *map, bool *consistent)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s:s%u", base, segments);
    stock_run *r = calloc(1, sizeof *r);
    if (r == NULL || preset(c, prefix) != 0) {
        free(r);
        return -1;
    }
    r->client = c;
    r->prefix = prefix;
    if (hilock_segmented_create(&r->segments, c, prefix,
                                segments) != HILOCK_OK) {
        fprintf(stderr, "hilock: %s\n", hilock_last_error());
        free(r);
        return -1;
    }
    for (unsigned s = 0; s < 64; s++)
        r->holder[s] = r->last_holder[s] = -1;
    int where[64];
    if (map != NULL)
        show_segments(c, map, r, segments, t0, where);
    for (int i = 0; i < STOCK_WORKERS; i++) {
        r->workers[i].run = r;
        r->workers[i].id = i;
        r->workers[i].rng = (unsigned)i * 7919u + segments;
    }
    atomic_store(&r->running, STOCK_WORKERS);
    int64_t start = cli_now_ms();
    r->end_ms = start + STOCK_RUN_MS;
    starter st = {.run = r};
    const char *ping[] = {"PING"};
    hilock_client_command_async(c, 1, ping, NULL, start_all, &st);
    bool tty = isatty(STDOUT_FILENO);
    int64_t next_line = start + 500;
    long long last = 0;
    while (atomic_load(&r->running) > 0 || !atomic_load(&st.done)) {
        usleep(20000);
        int64_t now = cli_now_ms();
        if (now < next_line)
            continue;
        long long d = atomic_load(&r->deductions);
        printf("%s[%5lld ms] S=%-2u %7lld deductions, %6.0f/s now, %lld "
               "waits, %lld hand-offs%s",
               tty ? "\r" : "", (long long)(now - t0), segments, d,
               (double)(d - last) * 1000.0 / (double)(now - next_line + 500),
               (long long)atomic_load(&r->waits),
               (long long)atomic_load(&r->handoffs), tty ? "" : "\n");
        fflush(stdout);
        last = d;
        next_line = now + 500;
    }
    int64_t took = cli_now_ms() - start;
    if (tty)
        printf("\n");
    long long made = atomic_load(&r->deductions);
    long long taken = stock_taken(c, prefix);
    *consistent = taken == made && atomic_load(&r->failures) == 0;
    printf("[%5lld ms] S=%-2u stock check: %lld taken from Redis, %lld "
           "deductions made: %s\n",
           (long long)(cli_now_ms() - t0), segments, taken, made,
           *consistent ? "consistent" : "MISMATCH");
    if (map != NULL)
        show_masters(map, r, segments, t0, where);
    cleanup(c, prefix);
    hilock_segmented_destroy(r->segments);
    free(r);
    return (double)made * 1000.0 / (double)took;
}

int cli_stock_demo(hilock_client *c, const char *base, int64_t t0,
                   const cli_slot_map *map)
{
    printf("[%5lld ms] stock: %d workers deduct from %d products; each "
           "deduction is a DECR under the lock of its product's segment\n",
           (long long)(cli_now_ms() - t0), STOCK_WORKERS, STOCK_PRODUCTS);
    bool ok1 = false, ok16 = false;
    double one = run_once(c, base, 1, t0, map, &ok1);
    double sixteen = run_once(c, base, 16, t0, map, &ok16);
    if (one <= 0 || sixteen <= 0) {
        fprintf(stderr, "hilock: the stock demo failed\n");
        return CLI_EXIT_SOFTWARE;
    }
    printf("[%5lld ms] throughput: S=1 %.0f deductions/s | S=16 %.0f "
           "deductions/s (%.1fx)\n",
           (long long)(cli_now_ms() - t0), one, sixteen, sixteen / one);
    return ok1 && ok16 ? 0 : CLI_EXIT_SOFTWARE;
}
