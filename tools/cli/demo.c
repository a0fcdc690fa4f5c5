/* hilock demo: a private redis-server, a connection, and a few workers
 * contending for one lock while the watchdog keeps it alive.  With
 * --cluster, the same on a Redis Cluster (a private one of three masters
 * unless a URL names one), where the stock demo's segments spread over
 * the masters.  --replicas is the failover narrative of failover.c.
 *
 * Each worker has a client of its own, as separate services would, so the
 * hand-offs go through Redis pub/sub exactly as between processes. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "redis_cluster.h"
#include "redis_server.h"

#define DEMO_WORKERS 4
/* Short enough that a renewal comes within the first second. */
#define DEMO_WATCHDOG_MS 1500
/* How long the later workers keep the lock. */
#define DEMO_SHORT_HOLD_MS 300
/* The private cluster: three masters, the fewest a cluster takes, and no
 * replicas: the demo shows where segments live, not a failover, and a
 * replica per master would double the processes sharing the machine. */
#define DEMO_CLUSTER_MASTERS 3

typedef struct demo {
    int64_t t0;
    pthread_mutex_t mu; /* output and the fields below */
    pthread_cond_t cond;
    const char *name;
    int64_t watchdog_ms;
    bool first_holds;     /* worker 1 has the lock */
    int last_releaser;
    int64_t released_at;
    int failures;
} demo;

typedef struct worker {
    demo *d;
    int id;
    pthread_t thread;
    hilock_client *client;
    hilock_lock *lock;
} worker;

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* One line, stamped with the time since the demo started.  Lines from the
 * workers would interleave mid-line without the mutex. */
__attribute__((format(printf, 2, 3))) static void say(demo *d,
                                                      const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&d->mu);
    printf("[%5lld ms] ", (long long)(cli_now_ms() - d->t0));
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    /* Piped output would otherwise arrive all at once at the end. */
    fflush(stdout);
    pthread_mutex_unlock(&d->mu);
}

static void fail(worker *w, const char *what, int rc)
{
    say(w->d, "worker %d: %s failed: %s (%s)", w->id, what,
        hilock_strerror(rc), hilock_last_error());
    pthread_mutex_lock(&w->d->mu);
    w->d->failures++;
    pthread_cond_broadcast(&w->d->cond);
    pthread_mutex_unlock(&w->d->mu);
}

/* The clients waiting for the lock: Redisson keeps no list of them, but
 * each listens on the lock's release channel. */
static long long waiting_clients(worker *w)
{
    hilock_lock_status *st = NULL;
    long long n = -1;
    if (hilock_lock_status_get(w->lock, &st) == HILOCK_OK)
        n = st->subscribers;
    hilock_lock_status_free(st);
    return n;
}

/* Keep the lock past the watchdog timeout, watching its ttl: it falls,
 * then jumps back up at each renewal. */
static void hold_long(worker *w)
{
    demo *d = w->d;
    int64_t wd = d->watchdog_ms, start = cli_now_ms();
    int64_t hold = wd * 7 / 5;
    say(d, "worker %d: keeps it %lld ms, past the %lld ms lease; the "
           "watchdog renews it every %lld ms",
        w->id, (long long)hold, (long long)wd, (long long)(wd / 3));
    int64_t prev = -1, ttl = -1;
    bool counted = false;
    while (cli_now_ms() - start < hold) {
        if (hilock_lock_remaining_ttl(w->lock, &ttl) != HILOCK_OK)
            ttl = -1;
        if (prev >= 0 && ttl > prev + 50)
            say(d, "worker %d: watchdog renewal: ttl %lld -> %lld ms", w->id,
                (long long)prev, (long long)ttl);
        prev = ttl;
        if (!counted && cli_now_ms() - start >= 300) {
            counted = true;
            say(d, "worker %d: %lld waiting clients subscribed to its "
                   "release channel",
                w->id, waiting_clients(w));
        }
        sleep_ms(40);
    }
    say(d, "worker %d: held it %lld ms; ttl still %lld ms", w->id,
        (long long)(cli_now_ms() - start), (long long)ttl);
}

static void *worker_main(void *p)
{
    worker *w = p;
    demo *d = w->d;
    int64_t asked = cli_now_ms();
    int rc = hilock_lock_try_acquire(w->lock, 0, HILOCK_LEASE_WATCHDOG);
    if (rc == HILOCK_EBUSY) {
        say(d, "worker %d: %s is taken; waiting", w->id, d->name);
        rc = hilock_lock_try_acquire(w->lock, HILOCK_WAIT_FOREVER,
                                     HILOCK_LEASE_WATCHDOG);
        if (rc == HILOCK_OK) {
            pthread_mutex_lock(&d->mu);
            int from = d->last_releaser;
            int64_t gap = cli_now_ms() - d->released_at;
            pthread_mutex_unlock(&d->mu);
            say(d, "worker %d: acquired after waiting %lld ms, %lld ms "
                   "after worker %d let go",
                w->id, (long long)(cli_now_ms() - asked), (long long)gap,
                from);
        }
    } else if (rc == HILOCK_OK) {
        say(d, "worker %d: acquired %s at once", w->id, d->name);
    }
    if (rc != HILOCK_OK) {
        fail(w, "acquire", rc);
        return NULL;
    }
    if (w->id == 1) {
        pthread_mutex_lock(&d->mu);
        d->first_holds = true;
        pthread_cond_broadcast(&d->cond);
        pthread_mutex_unlock(&d->mu);
        hold_long(w);
    } else {
        sleep_ms(DEMO_SHORT_HOLD_MS);
    }
    say(d, "worker %d: releases it", w->id);
    pthread_mutex_lock(&d->mu);
    d->last_releaser = w->id;
    d->released_at = cli_now_ms();
    pthread_mutex_unlock(&d->mu);
    rc = hilock_lock_release(w->lock);
    if (rc != HILOCK_OK)
        fail(w, "release", rc);
    return NULL;
}

/* The value of "field:" in an INFO reply, copied into out. */
static void info_field(const char *info, const char *field, char *out,
                       size_t cap)
{
    snprintf(out, cap, "?");
    const char *p = strstr(info, field);
    if (p == NULL)
        return;
    p += strlen(field);
    size_t n = strcspn(p, "\r\n");
    snprintf(out, cap, "%.*s", (int)n, p);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* What the demo connected to: server version, TLS, round trip. */
static int show_connection(demo *d, const hilock_options *opts,
                           hilock_client *client)
{
    const char *sentinel = hilock_options_sentinel_master(opts);
    if (sentinel != NULL) {
        /* The URL names sentinels; the master is where they sent us. */
        cli_replication r;
        cli_replication_read(client, &r);
        say(d, "connected to master %s ('%s', named by the sentinels) as "
               "client %s",
            r.master[0] ? r.master : "?", sentinel, hilock_client_id(client));
    } else {
        say(d, "connected to %s:%d as client %s", hilock_options_host(opts),
            hilock_options_port(opts), hilock_client_id(client));
    }
    const char *info_argv[] = {"INFO", "server"};
    hilock_reply *reply = NULL;
    char version[64] = "?", mode[64] = "?";
    if (hilock_client_command(client, 2, info_argv, NULL, &reply) ==
            HILOCK_OK &&
        reply->type == HILOCK_REPLY_STRING) {
        info_field(reply->str, "redis_version:", version, sizeof version);
        info_field(reply->str, "redis_mode:", mode, sizeof mode);
    }
    hilock_reply_free(reply);
    say(d, "server: redis %s (%s)", version, mode);
    say(d, "TLS: %s", hilock_client_is_tls(client) ? "on" : "off");

    enum { ROUNDS = 200 };
    int64_t rtt[ROUNDS];
    const char *ping[] = {"PING"};
    for (int i = 0; i < ROUNDS; i++) {
        int64_t t0 = now_us();
        int rc = hilock_client_command(client, 1, ping, NULL, NULL);
        if (rc != HILOCK_OK) {
            fprintf(stderr, "hilock: PING failed: %s (%s)\n",
                    hilock_strerror(rc), hilock_last_error());
            return CLI_EXIT_UNAVAILABLE;
        }
        rtt[i] = now_us() - t0;
    }
    qsort(rtt, ROUNDS, sizeof rtt[0], cmp_i64);
    say(d, "round trip (PING x %d): min %lld us, median %lld us, "
           "p99 %lld us",
        ROUNDS, (long long)rtt[0], (long long)rtt[ROUNDS / 2],
        (long long)rtt[ROUNDS * 99 / 100]);
    return 0;
}

/* The masters of the cluster and their slots. */
static void show_masters(demo *d, const cli_slot_map *map)
{
    say(d, "cluster: %d masters", map->masters);
    for (int m = 0; m < map->masters; m++)
        say(d, "cluster: master %s serves %d slots", map->addr[m],
            map->slots[m]);
}

/* Start the workers: worker 1 first, the others once it holds the lock,
 * so that they have to wait. */
static int contend(demo *d, worker *ws)
{
    say(d, "%d workers, each with its own client, contend for %s",
        DEMO_WORKERS, d->name);
    int started = 0;
    for (int i = 0; i < DEMO_WORKERS; i++) {
        if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]) != 0)
            break;
        started++;
        if (i == 0) {
            pthread_mutex_lock(&d->mu);
            while (!d->first_holds && d->failures == 0)
                pthread_cond_wait(&d->cond, &d->mu);
            pthread_mutex_unlock(&d->mu);
        } else {
            sleep_ms(50);
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(ws[i].thread, NULL);
    if (started < DEMO_WORKERS) {
        fprintf(stderr, "hilock: cannot start a thread\n");
        return CLI_EXIT_SOFTWARE;
    }
    return d->failures ? CLI_EXIT_SOFTWARE : 0;
}

/* A private server, or with cluster a private cluster, on free loopback
 * ports; its URL goes to url.  0, or the exit status after saying why. */
static int start_private(demo *d, bool cluster, hl_redis_server **server,
                         hl_redis_cluster **cl, char *url, size_t cap)
{
    if (cluster) {
        say(d, "starting a private Redis Cluster of %d masters, no "
               "replicas, on free loopback ports",
            DEMO_CLUSTER_MASTERS);
        hl_redis_cluster_config cfg = {.masters = DEMO_CLUSTER_MASTERS};
        *cl = hl_redis_cluster_start(&cfg);
        if (*cl == NULL) {
            fprintf(stderr, "hilock: could not start the cluster\n");
            return CLI_EXIT_UNAVAILABLE;
        }
        snprintf(url, cap, "%s", hl_redis_cluster_url(*cl));
        return 0;
    }
    say(d, "starting a private redis-server on a free loopback port");
    *server = hl_redis_server_start(NULL);
    if (*server == NULL) {
        fprintf(stderr, "hilock: could not start redis-server\n");
        return CLI_EXIT_UNAVAILABLE;
    }
    snprintf(url, cap, "redis://127.0.0.1:%d", hl_redis_server_port(*server));
    return 0;
}

/* With --cluster, the map of the cluster the client reached, which must
 * be one; NULL in *out otherwise. */
static int cluster_map(demo *d, hilock_client *client, bool want,
                       cli_slot_map **out)
{
    *out = NULL;
    if (!want)
        return 0;
    bool cluster = false;
    int rc = cli_is_cluster(client, &cluster);
    if (rc != 0)
        return rc;
    if (!cluster) {
        fprintf(stderr, "hilock: --cluster: the server is not a Redis "
                        "Cluster node (cluster_enabled:0)\n");
        return CLI_EXIT_UNAVAILABLE;
    }
    cli_slot_map *map = malloc(sizeof *map);
    if (map == NULL) {
        fprintf(stderr, "hilock: out of memory\n");
        return CLI_EXIT_SOFTWARE;
    }
    rc = cli_slot_map_read(client, map);
    if (rc != 0) {
        free(map);
        return rc;
    }
    show_masters(d, map);
    *out = map;
    return 0;
}

int cli_demo(const cli_globals *g, int argc, char **argv)
{
    if (argc == 2 && cli_wants_help(argv[1]))
        return cli_help("demo");
    bool want_cluster = argc == 2 && strcmp(argv[1], "--cluster") == 0;
    if (argc == 2 && strcmp(argv[1], "--replicas") == 0)
        return cli_failover_demo(g);
    if (argc > 1 && !want_cluster)
        return cli_usage_error("demo", argc > 2 ? "one option at most, not"
                                                : "unknown option",
                               argv[argc > 2 ? 2 : 1]);
    demo d = {.t0 = cli_now_ms(), .last_releaser = 1};
    pthread_mutex_init(&d.mu, NULL);
    pthread_cond_init(&d.cond, NULL);
    cli_globals dg = *g;
    if (dg.watchdog_ms == 0)
        dg.watchdog_ms = DEMO_WATCHDOG_MS;
    d.watchdog_ms = dg.watchdog_ms;

    hl_redis_server *server = NULL;
    hl_redis_cluster *cluster = NULL;
    cli_slot_map *map = NULL;
    char url[1024], name[64];
    const char *target = g->redis_url;
    int rc = 0;
    /* On someone else's server, a name of our own leaves their locks be. */
    snprintf(name, sizeof name, "hilock-demo-%ld", (long)getpid());
    if (!g->redis_given) {
        rc = start_private(&d, want_cluster, &server, &cluster, url,
                           sizeof url);
        target = url;
        snprintf(name, sizeof name, "demo");
    }
    d.name = name;
    worker ws[DEMO_WORKERS];
    memset(ws, 0, sizeof ws);
    hilock_options *opts = NULL;
    hilock_client *client = NULL;
    if (rc == 0)
        rc = cli_make_options(&dg, target, &opts);
    if (rc == 0)
        rc = cli_connect(opts, &client);
    if (rc == 0)
        rc = show_connection(&d, opts, client);
    if (rc == 0)
        rc = cluster_map(&d, client, want_cluster, &map);
    for (int i = 0; i < DEMO_WORKERS && rc == 0; i++) {
        ws[i].d = &d;
        ws[i].id = i + 1;
        rc = cli_connect(opts, &ws[i].client);
        if (rc == 0 &&
            hilock_lock_create(&ws[i].lock, ws[i].client, name) != HILOCK_OK) {
            fprintf(stderr, "hilock: %s\n", hilock_last_error());
            rc = CLI_EXIT_SOFTWARE;
        }
    }
    if (rc == 0 && map != NULL) {
        int slot = -1;
        int m = cli_key_master(client, map, name, strlen(name), &slot);
        say(&d, "%s is in slot %d, on master %s", name, slot,
            m >= 0 ? map->addr[m] : "?");
    }
    if (rc == 0)
        rc = contend(&d, ws);
    if (rc == 0) {
        bool locked = true;
        hilock_lock_is_locked(ws[0].lock, &locked);
        say(&d, "all workers done; %s is %s", name,
            locked ? "still locked" : "free");
    }
    if (rc == 0)
        rc = cli_stock_demo(client, name, d.t0, map);
    for (int i = 0; i < DEMO_WORKERS; i++) {
        if (ws[i].lock)
            hilock_lock_destroy(ws[i].lock);
        if (ws[i].client)
            hilock_client_destroy(ws[i].client);
    }
    if (client)
        hilock_client_destroy(client);
    hilock_options_free(opts);
    free(map);
    if (server) {
        hl_redis_server_stop(server);
        say(&d, "private redis-server stopped");
    }
    if (cluster) {
        hl_redis_cluster_stop(cluster);
        say(&d, "private cluster stopped");
    }
    pthread_cond_destroy(&d.cond);
    pthread_mutex_destroy(&d.mu);
    return rc;
}
