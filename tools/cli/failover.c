/* hilock demo --replicas: the contention of the plain demo on a master
 * with two replicas watched by three sentinels, with a failover in the
 * middle of it.  Worker 1 holds the lock while the others wait; the
 * master is killed (kill -9, or on a group the URL names, a SENTINEL
 * FAILOVER, which leaves someone else's servers running); the sentinels
 * promote a replica, every client follows, and each worker says what it
 * was told: its hold found on the new master, or reported lost.  The
 * waiters then get the lock in turn from the new master.
 *
 * Replication is asynchronous: the hold survives because it reached the
 * replicas before the kill, which the demo says it waits for. */
#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "redis_replicated.h"

#define FO_WORKERS 3
#define FO_REPLICAS 2
#define FO_SENTINELS 3
/* Long enough for the hold to outlast a failover (a few seconds with
 * the private group's 1 s down-after): a lease that runs out before the
 * new master is in place is lost, and rightly reported so. */
#define FO_WATCHDOG_MS 15000
#define FO_SHORT_HOLD_MS 300
/* How long the sentinels may take to promote a replica, and the waiters
 * to get the lock afterwards. */
#define FO_FAILOVER_DEADLINE_MS 60000

typedef struct fo_demo {
    int64_t t0;
    pthread_mutex_t mu; /* output and failures */
    const char *name;
    int failures;
} fo_demo;

typedef struct fo_worker {
    fo_demo *d;
    int id;
    pthread_t thread;
    hilock_client *client;
    hilock_lock *lock;
    atomic_bool told_lost;
    char acquired_on[80]; /* the master a waiter got the lock from */
} fo_worker;

static void fo_sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

__attribute__((format(printf, 2, 3))) static void say(fo_demo *d,
                                                      const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&d->mu);
    printf("[%5lld ms] ", (long long)(cli_now_ms() - d->t0));
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
    pthread_mutex_unlock(&d->mu);
}

static void worker_failed(fo_worker *w, const char *what, int rc)
{
    say(w->d, "worker %d: %s failed: %s (%s)", w->id, what,
        hilock_strerror(rc), hilock_last_error());
    pthread_mutex_lock(&w->d->mu);
    w->d->failures++;
    pthread_mutex_unlock(&w->d->mu);
}

/* On the loop thread, the moment the library reports the loss. */
static void on_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    (void)lock, (void)owner;
    fo_worker *w = data;
    atomic_store(&w->told_lost, true);
    say(w->d, "worker %d: told its hold on %s is LOST", w->id, w->d->name);
}

/* A waiter: it waits through the failover (its subscription moves to the
 * new master with its client), holds the lock briefly, and lets go. */
static void *waiter_main(void *p)
{
    fo_worker *w = p;
    fo_demo *d = w->d;
    int64_t asked = cli_now_ms();
    say(d, "worker %d: %s is taken; waiting", w->id, d->name);
    int rc = hilock_lock_try_acquire(w->lock, FO_FAILOVER_DEADLINE_MS,
                                     HILOCK_LEASE_WATCHDOG);
    if (rc != HILOCK_OK) {
        worker_failed(w, "acquire", rc);
        return NULL;
    }
    cli_replication r;
    cli_replication_read(w->client, &r);
    snprintf(w->acquired_on, sizeof w->acquired_on, "%s",
             r.master[0] ? r.master : "?");
    say(d, "worker %d: acquired after waiting %lld ms, on master %s", w->id,
        (long long)(cli_now_ms() - asked), w->acquired_on);
    fo_sleep_ms(FO_SHORT_HOLD_MS);
    rc = hilock_lock_release(w->lock);
    if (rc != HILOCK_OK)
        worker_failed(w, "release", rc);
    else
        say(d, "worker %d: releases it", w->id);
    return NULL;
}

/* One command to a sentinel over a socket of its own: the CLI has no
 * client for sentinels, and one line is all it needs.  0 when the
 * sentinel answered "+OK". */
static int sentinel_failover(const char *host, int port, const char *name)
{
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, portstr, &hints, &res) != 0)
        return -1;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0;
    freeaddrinfo(res);
    if (!ok) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char req[512];
    int n = snprintf(req, sizeof req,
                     "*3\r\n$8\r\nSENTINEL\r\n$8\r\nFAILOVER\r\n$%zu\r\n%s"
                     "\r\n",
                     strlen(name), name);
    char buf[256] = "";
    ok = n > 0 && n < (int)sizeof req && send(fd, req, (size_t)n,
                                              MSG_NOSIGNAL) == n;
    ssize_t got = ok ? recv(fd, buf, sizeof buf - 1, 0) : -1;
    close(fd);
    if (got > 0)
        buf[got] = '\0';
    if (got <= 0 || strncmp(buf, "+OK", 3) != 0) {
        fprintf(stderr, "hilock: SENTINEL FAILOVER %s: %s\n", name,
                got > 0 ? strtok(buf, "\r\n") : "no answer");
        return -1;
    }
    return 0;
}

static void show_replication(fo_demo *d, hilock_client *c,
                             const hilock_options *opts, const char *when)
{
    cli_replication r;
    cli_replication_read(c, &r);
    char list[CLI_MAX_REPLICAS * 96] = "";
    for (int i = 0; i < r.replicas; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s (%s)",
                 i ? ", " : "", r.replica[i], r.state[i]);
    }
    say(d, "%s: master %s, %d replica%s%s%s; acknowledgement policy %s",
        when, r.master[0] ? r.master : "?", r.replicas,
        r.replicas == 1 ? "" : "s", r.replicas ? ": " : "", list,
        cli_ack_name(hilock_options_replica_ack(opts)));
}

/* Wait until the client reaches a master other than before. */
static bool wait_new_master(hilock_client *c, const char *before,
                            char *now, size_t cap)
{
    int64_t deadline = cli_now_ms() + FO_FAILOVER_DEADLINE_MS;
    while (cli_now_ms() < deadline) {
        cli_replication r;
        cli_replication_read(c, &r);
        if (r.master[0] != '\0' && strcmp(r.master, before) != 0 &&
            strcmp(r.role, "master") == 0) {
            snprintf(now, cap, "%s", r.master);
            return true;
        }
        fo_sleep_ms(100);
    }
    return false;
}

/* The master dies (or, on someone else's group, steps down): returns 0
 * once it was made to, or an exit status. */
static int bring_down(fo_demo *d, hl_redis_replicated *g,
                      const hilock_options *opts)
{
    if (g != NULL) {
        hl_redis_server *m = hl_redis_replicated_master(g);
        if (m == NULL) {
            fprintf(stderr, "hilock: the private group has no settled "
                            "master\n");
            return CLI_EXIT_SOFTWARE;
        }
        say(d, "kill -9 of the master (pid %ld, port %d)",
            (long)hl_redis_server_pid(m), hl_redis_server_port(m));
        kill(hl_redis_server_pid(m), SIGKILL);
        return 0;
    }
    /* Not ours to kill: a failover the sentinels run gracefully. */
    say(d, "SENTINEL FAILOVER %s, asked of the sentinel at %s:%d",
        hilock_options_sentinel_master(opts), hilock_options_host(opts),
        hilock_options_port(opts));
    if (sentinel_failover(hilock_options_host(opts),
                          hilock_options_port(opts),
                          hilock_options_sentinel_master(opts)) != 0)
        return CLI_EXIT_UNAVAILABLE;
    return 0;
}

/* Worker 1 (the calling thread, whose hold it is) after the failover:
 * what the library told it, and what the new master holds. */
static void tell_fate(fo_demo *d, fo_worker *w)
{
    bool lost = false;
    hilock_lock_lease_lost(w->lock, &lost);
    hilock_lock_status *st = NULL;
    bool on_master = false;
    if (hilock_lock_status_get(w->lock, &st) == HILOCK_OK)
        on_master = st->locked;
    long long ttl = st ? (long long)st->ttl_ms : -1;
    hilock_lock_status_free(st);
    if (lost || atomic_load(&w->told_lost))
        say(d, "worker %d: fate: LOST (the new master did not have its "
               "hold)", w->id);
    else if (on_master)
        say(d, "worker %d: fate: held on the new master (ttl %lld ms); "
               "no loss reported", w->id, ttl);
    else
        say(d, "worker %d: fate: not reported lost, but the new master "
               "shows no hold yet", w->id);
}

static int run_narrative(fo_demo *d, hl_redis_replicated *g,
                         const hilock_options *opts, hilock_client *client,
                         fo_worker *ws)
{
    show_replication(d, client, opts, "before");
    cli_replication before;
    cli_replication_read(client, &before);
    fo_worker *holder = &ws[0];
    int rc = hilock_lock_try_acquire(holder->lock, 0, HILOCK_LEASE_WATCHDOG);
    if (rc != HILOCK_OK) {
        worker_failed(holder, "acquire", rc);
        return CLI_EXIT_SOFTWARE;
    }
    say(d, "worker 1: acquired %s at once, through the sentinels' master",
        d->name);
    int started = 1;
    for (int i = 1; i < FO_WORKERS; i++, started++)
        if (pthread_create(&ws[i].thread, NULL, waiter_main, &ws[i]) != 0)
            break;
    /* Let the waiters queue, and the grant reach the replicas: the demo
     * runs without acknowledgement, so this wait is what keeps it. */
    fo_sleep_ms(500);
    const char *wait_argv[] = {"WAIT", "2", "2000"};
    hilock_reply *wr = NULL;
    if (hilock_client_command(client, 3, wait_argv, NULL, &wr) ==
            HILOCK_OK &&
        wr->type == HILOCK_REPLY_INTEGER)
        say(d, "the grant reached %lld replica(s) (WAIT)",
            (long long)wr->integer);
    hilock_reply_free(wr);

    int64_t down_at = cli_now_ms();
    hl_redis_server *old = g ? hl_redis_replicated_master(g) : NULL;
    rc = bring_down(d, g, opts);
    /* A private group is watched until every sentinel agrees on the new
     * master and the other replica follows it: the end of the failover,
     * not its first step. */
    if (rc == 0 && g != NULL &&
        hl_redis_replicated_wait_master(g, old, FO_FAILOVER_DEADLINE_MS) ==
            NULL)
        rc = CLI_EXIT_UNAVAILABLE;
    char now[80] = "";
    if (rc == 0 && !wait_new_master(client, before.master, now, sizeof now)) {
        fprintf(stderr, "hilock: no new master within %d ms\n",
                FO_FAILOVER_DEADLINE_MS);
        rc = CLI_EXIT_UNAVAILABLE;
    }
    if (rc == 0) {
        say(d, "failover: %s -> %s after %lld ms; every client follows the "
               "sentinels' +switch-master",
            before.master, now, (long long)(cli_now_ms() - down_at));
        show_replication(d, client, opts, "after");
        /* The hold is checked on the new master at the switch; a moment
         * for that check's answer, then worker 1 keeps it on. */
        fo_sleep_ms(300);
        tell_fate(d, holder);
        fo_sleep_ms(500);
        int rel = hilock_lock_release(holder->lock);
        say(d, "worker 1: releases it: %s", rel == HILOCK_OK
                                               ? "released"
                                               : hilock_strerror(rel));
        if (rel != HILOCK_OK && rel != HILOCK_ELEASELOST)
            rc = CLI_EXIT_SOFTWARE;
    } else {
        hilock_lock_release(holder->lock);
    }
    for (int i = 1; i < started; i++)
        pthread_join(ws[i].thread, NULL);
    if (started < FO_WORKERS) {
        fprintf(stderr, "hilock: cannot start a thread\n");
        return CLI_EXIT_SOFTWARE;
    }
    if (rc == 0 && d->failures)
        rc = CLI_EXIT_SOFTWARE;
    if (rc == 0) {
        /* On a busy machine the sentinels may fail over a second time
         * (the private group's down-after is 1 s); a release made on the
         * master they then left is lost with it, and the waiters wait
         * out the lease.  Say so, and name the master the clients
         * followed last. */
        cli_replication latest;
        cli_replication_read(client, &latest);
        if (latest.master[0] != '\0' && strcmp(latest.master, now) != 0 &&
            strcmp(latest.role, "master") == 0) {
            say(d, "the sentinels moved the master again: %s -> %s", now,
                latest.master);
            snprintf(now, sizeof now, "%s", latest.master);
        }
        for (int i = 1; i < FO_WORKERS; i++)
            say(d, "worker %d: fate: acquired and released on %s",
                ws[i].id,
                strcmp(ws[i].acquired_on, now) == 0 ? "the new master"
                                                    : ws[i].acquired_on);
        bool locked = true;
        hilock_lock_is_locked(holder->lock, &locked);
        say(d, "all workers done; %s is %s", d->name,
            locked ? "still locked" : "free");
    }
    return rc;
}

static hl_redis_replicated *start_group(fo_demo *d)
{
    say(d, "starting a private master with %d replicas and %d sentinels "
           "on free loopback ports",
        FO_REPLICAS, FO_SENTINELS);
    hl_redis_replicated_config cfg = {.replicas = FO_REPLICAS,
                                      .sentinels = FO_SENTINELS};
    hl_redis_replicated *g = hl_redis_replicated_start(&cfg);
    if (g == NULL) {
        fprintf(stderr, "hilock: could not start the master, replicas and "
                        "sentinels\n");
        return NULL;
    }
    say(d, "sentinels: %s", hl_redis_replicated_sentinel_url(g));
    return g;
}

int cli_failover_demo(const cli_globals *g)
{
    fo_demo d = {.t0 = cli_now_ms()};
    pthread_mutex_init(&d.mu, NULL);
    cli_globals dg = *g;
    if (dg.watchdog_ms == 0)
        dg.watchdog_ms = FO_WATCHDOG_MS;
    char name[64];
    snprintf(name, sizeof name, "hilock-demo-%ld", (long)getpid());
    hl_redis_replicated *group = NULL;
    const char *target = g->redis_url;
    int rc = 0;
    if (!g->redis_given) {
        group = start_group(&d);
        if (group == NULL)
            rc = CLI_EXIT_UNAVAILABLE;
        else
            target = hl_redis_replicated_sentinel_url(group);
        snprintf(name, sizeof name, "demo");
    }
    d.name = name;
    hilock_options *opts = NULL;
    hilock_client *client = NULL;
    fo_worker ws[FO_WORKERS];
    memset(ws, 0, sizeof ws);
    if (rc == 0)
        rc = cli_make_options(&dg, target, &opts);
    if (rc == 0 && hilock_options_sentinel_master(opts) == NULL) {
        fprintf(stderr, "hilock: demo --replicas needs a "
                        "redis-sentinel://...#master URL, or none\n");
        rc = CLI_EXIT_USAGE;
    }
    if (rc == 0)
        rc = cli_connect(opts, &client);
    for (int i = 0; i < FO_WORKERS && rc == 0; i++) {
        ws[i].d = &d;
        ws[i].id = i + 1;
        rc = cli_connect(opts, &ws[i].client);
        if (rc == 0 && (hilock_lock_create(&ws[i].lock, ws[i].client,
                                           name) != HILOCK_OK ||
                        hilock_lock_set_lost_callback(ws[i].lock, on_lost,
                                                      &ws[i]) != HILOCK_OK)) {
            fprintf(stderr, "hilock: %s\n", hilock_last_error());
            rc = CLI_EXIT_SOFTWARE;
        }
    }
    if (rc == 0)
        say(&d, "%d workers, each with its own client through the "
                "sentinels, contend for %s",
            FO_WORKERS, name);
    if (rc == 0)
        rc = run_narrative(&d, group, opts, client, ws);
    for (int i = 0; i < FO_WORKERS; i++) {
        if (ws[i].lock)
            hilock_lock_destroy(ws[i].lock);
        if (ws[i].client)
            hilock_client_destroy(ws[i].client);
    }
    if (client)
        hilock_client_destroy(client);
    hilock_options_free(opts);
    if (group) {
        hl_redis_replicated_stop(group);
        say(&d, "private master, replicas and sentinels stopped");
    }
    pthread_mutex_destroy(&d.mu);
    return rc;
}
