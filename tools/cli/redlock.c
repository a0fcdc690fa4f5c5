/* hilock --redlock: run and status over RedLock, one reentrant lock of the
 * same name on each of N independent masters, held with a quorum.
 *
 * --redlock takes the masters' URLs joined by commas; a comma inside one
 * (in a password, say) is written %2C, which the URL parser decodes.  Each
 * URL is applied over the options --watchdog makes, so each master can
 * carry its own query keys (node_timeout, quarantine, ...).  Masters are
 * named in messages and in the JSON by host and port only, never with the
 * user info of their URLs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* "host:port", or "[v6]:port": enough for any host a URL can name within
 * the parser's limits that anyone would type. */
#define LABEL_CAP 300

typedef struct masters {
    char *copy;          /* the list, cut at its commas */
    const char **urls;
    char (*labels)[LABEL_CAP];
    size_t n;
} masters;

static void masters_free(masters *ms)
{
    free(ms->copy);
    free(ms->urls);
    free(ms->labels);
    memset(ms, 0, sizeof *ms);
}

static int redlock_usage(const char *why, const char *what)
{
    fprintf(stderr, "hilock: %s%s%s\n", why, what ? " " : "",
            what ? what : "");
    fprintf(stderr, "usage: hilock --redlock URL1,...,URLn [--watchdog MS] "
                    "run|status ...  (n odd, 3..%d; see --help)\n",
            HILOCK_MAX_MEMBERS);
    return CLI_EXIT_USAGE;
}

/* Split the list and name each master.  Returns 0 or an exit status. */
static int masters_parse(const char *list, masters *ms)
{
    memset(ms, 0, sizeof *ms);
    size_t n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    if (n < 3 || n > HILOCK_MAX_MEMBERS || n % 2 == 0) {
        char count[32];
        snprintf(count, sizeof count, "%zu", n);
        return redlock_usage("--redlock needs an odd number of master URLs "
                             "from 3 up, not",
                             count);
    }
    ms->copy = strdup(list);
    ms->urls = calloc(n, sizeof *ms->urls);
    ms->labels = calloc(n, sizeof *ms->labels);
    if (ms->copy == NULL || ms->urls == NULL || ms->labels == NULL) {
        masters_free(ms);
        fprintf(stderr, "hilock: out of memory\n");
        return CLI_EXIT_SOFTWARE;
    }
    char *p = ms->copy;
    for (size_t i = 0; i < n; i++) {
        char *comma = strchr(p, ',');
        if (comma != NULL)
            *comma = '\0';
        ms->urls[i] = p;
        p = comma != NULL ? comma + 1 : p + strlen(p);
    }
    ms->n = n;
    for (size_t i = 0; i < n; i++) {
        if (ms->urls[i][0] == '\0') {
            masters_free(ms);
            return redlock_usage("--redlock has an empty URL", NULL);
        }
        hilock_options *o;
        if (hilock_options_create(&o) != HILOCK_OK) {
            masters_free(ms);
            fprintf(stderr, "hilock: out of memory\n");
            return CLI_EXIT_SOFTWARE;
        }
        if (hilock_options_set_url(o, ms->urls[i]) != HILOCK_OK) {
            char why[320];
            snprintf(why, sizeof why, "bad URL %zu in --redlock: %s", i + 1,
                     hilock_last_error());
            hilock_options_free(o);
            masters_free(ms);
            return redlock_usage(why, NULL);
        }
        const char *host = hilock_options_host(o);
        int port = hilock_options_port(o);
        if (strchr(host, ':') != NULL)
            snprintf(ms->labels[i], LABEL_CAP, "[%s]:%d", host, port);
        else
            snprintf(ms->labels[i], LABEL_CAP, "%s:%d", host, port);
        hilock_options_free(o);
    }
    return 0;
}

/* Connect to every master; waits until each answered or the connect
 * timeout passed.  Returns 0 or an exit status. */
static int masters_connect(const cli_globals *g, const masters *ms,
                           hilock_redlock **out)
{
    hilock_options *base;
    int rc = cli_make_options(g, NULL, &base);
    if (rc != 0)
        return rc;
    rc = hilock_redlock_create(out, ms->urls, ms->n, base);
    hilock_options_free(base);
    if (rc == HILOCK_OK)
        return 0;
    fprintf(stderr, "hilock: cannot reach the masters: %s (%s)\n",
            hilock_strerror(rc), hilock_last_error());
    switch (rc) {
    case HILOCK_EINVAL:
        return CLI_EXIT_USAGE;
    case HILOCK_ENOQUORUM:
        return CLI_EXIT_UNAVAILABLE;
    default:
        return CLI_EXIT_SOFTWARE;
    }
}

/* ---- run ------------------------------------------------------------- */

typedef struct redlock_lock {
    masters ms;
    hilock_redlock *rl;
    hilock_multilock *lock;
    cli_run_state *st;
} redlock_lock;

/* Why a quorum could not be had, master by master. */
static void explain_no_quorum(const redlock_lock *r,
                              const hilock_multi_outcome *out, char *buf,
                              size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "%zu of %zu granted, %zu needed",
                                   out->granted, out->n, out->n / 2 + 1);
    bool quarantine = false;
    for (size_t i = 0; i < out->n && used < cap; i++) {
        const hilock_member_result *m = &out->members[i];
        const char *why;
        if (m->status == HILOCK_OK)
            continue;
        if (m->quarantined)
            why = "quarantined";
        else if (m->status == HILOCK_ECANCELED)
            why = "no answer in time";
        else
            why = hilock_strerror(m->status);
        quarantine |= m->quarantined;
        used += (size_t)snprintf(buf + used, cap - used, "; %s %s",
                                 r->ms.labels[i], why);
    }
    if (quarantine && used < cap)
        snprintf(buf + used, cap - used,
                 " (a master is quarantined when it restarted, or has been "
                 "up for less than the quarantine time)");
}

static void redlock_acquired(hilock_multilock *m, int status,
                             const hilock_multi_outcome *out,
                             void *user_data)
{
    (void)m;
    redlock_lock *r = user_data;
    char detail[1024];
    if (status == HILOCK_ENOQUORUM) {
        explain_no_quorum(r, out, detail, sizeof detail);
        cli_run_acquired(r->st, status, 0, detail);
    } else {
        cli_run_acquired(r->st, status, 0, NULL);
    }
}

static void redlock_lost(hilock_multilock *m, uint64_t owner,
                         void *user_data)
{
    (void)m;
    (void)owner;
    redlock_lock *r = user_data;
    cli_run_lost(r->st, "fewer than a quorum of the masters still hold it");
}

static int redlock_acquire(void *impl, uint64_t owner, int64_t wait_ms,
                           int64_t lease_ms, bool fenced, cli_run_state *st,
                           uint64_t *op)
{
    (void)fenced; /* refused with --redlock before this point */
    redlock_lock *r = impl;
    r->st = st;
    int rc = hilock_multilock_set_lost_callback(r->lock, redlock_lost, r);
    if (rc != HILOCK_OK)
        return rc;
    return hilock_multilock_acquire_async(r->lock, owner, wait_ms, lease_ms,
                                          redlock_acquired, r, op);
}

static void redlock_cancel(void *impl, uint64_t op)
{
    redlock_lock *r = impl;
    hilock_multilock_cancel(r->lock, op);
}

static int redlock_release(void *impl)
{
    redlock_lock *r = impl;
    return hilock_multilock_release(r->lock);
}

static void redlock_close(void *impl)
{
    redlock_lock *r = impl;
    hilock_multilock_destroy(r->lock);
    hilock_redlock_destroy(r->rl);
    masters_free(&r->ms);
    free(r);
}

int cli_redlock_open(const cli_globals *g, const char *name,
                     cli_runlock *out)
{
    redlock_lock *r = calloc(1, sizeof *r);
    if (r == NULL) {
        fprintf(stderr, "hilock: out of memory\n");
        return CLI_EXIT_SOFTWARE;
    }
    int rc = masters_parse(g->redlock, &r->ms);
    if (rc == 0)
        rc = masters_connect(g, &r->ms, &r->rl);
    if (rc != 0) {
        masters_free(&r->ms);
        free(r);
        return rc;
    }
    rc = hilock_redlock_multilock_create(&r->lock, r->rl, name);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "hilock: %s: %s\n", hilock_strerror(rc),
                hilock_last_error());
        hilock_redlock_destroy(r->rl);
        masters_free(&r->ms);
        free(r);
        return rc == HILOCK_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_SOFTWARE;
    }
    *out = (cli_runlock){.impl = r,
                         .acquire = redlock_acquire,
                         .cancel = redlock_cancel,
                         .release = redlock_release,
                         .close = redlock_close};
    return 0;
}

/* ---- status ------------------------------------------------------------ */

/* One master's entry; *locked says whether it holds the lock.  Returns 0
 * when the master was read, else the exit status its failure calls for. */
static int print_master(const masters *ms, size_t i, hilock_client *client,
                        const char *name, FILE *out, bool *locked)
{
    char *body = NULL;
    size_t len = 0;
    int rc = CLI_EXIT_SOFTWARE;
    *locked = false;
    /* A master that fails half-way must not leave half an entry. */
    FILE *mem = open_memstream(&body, &len);
    if (mem != NULL) {
        rc = client != NULL
                 ? cli_status_reentrant(client, name, mem, locked)
                 : CLI_EXIT_UNAVAILABLE;
        if (fclose(mem) != 0 && rc == 0)
            rc = CLI_EXIT_SOFTWARE;
    }
    fputs("{\"url\":", out);
    cli_json_string(out, ms->labels[i], strlen(ms->labels[i]));
    if (rc == 0) {
        putc(',', out);
        fwrite(body, 1, len, out);
    } else {
        fprintf(out, ",\"locked\":null,\"ttl_ms\":null,\"holders\":null,"
                     "\"error\":\"%s\"",
                rc == CLI_EXIT_DATAERR      ? "holds something that is not "
                                              "a lock"
                : rc == CLI_EXIT_UNAVAILABLE ? "unreachable"
                                             : "could not be read");
        fprintf(stderr, "hilock: master %s could not be read\n",
                ms->labels[i]);
    }
    putc('}', out);
    free(body);
    return rc;
}

int cli_redlock_status(const cli_globals *g, const char *name)
{
    masters ms;
    int rc = masters_parse(g->redlock, &ms);
    if (rc != 0)
        return rc;
    hilock_redlock *rl;
    rc = masters_connect(g, &ms, &rl);
    if (rc != 0) {
        masters_free(&ms);
        return rc;
    }
    FILE *out = stdout;
    size_t quorum = ms.n / 2 + 1, locked_on = 0, read = 0;
    bool not_a_lock = false;
    fputs("{\"name\":", out);
    cli_json_string(out, name, strlen(name));
    fputs(",\"kind\":\"redlock\",\"masters\":[", out);
    for (size_t i = 0; i < ms.n; i++) {
        bool locked;
        if (i > 0)
            putc(',', out);
        int mrc = print_master(&ms, i, hilock_redlock_client(rl, i), name,
                               out, &locked);
        read += mrc == 0;
        locked_on += locked;
        not_a_lock |= mrc == CLI_EXIT_DATAERR;
    }
    fprintf(out, "],\"quorum\":%zu,\"locked_on\":%zu}\n", quorum, locked_on);
    hilock_redlock_destroy(rl);
    masters_free(&ms);
    int flushed = cli_flush_stdout(0);
    if (flushed != 0)
        return flushed;
    /* What the masters that answered say is printed either way; the
     * status tells a script whether it is enough to go by. */
    if (not_a_lock)
        return CLI_EXIT_DATAERR;
    return read < quorum ? CLI_EXIT_UNAVAILABLE : 0;
}
