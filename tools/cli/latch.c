/* hilock latch set|down|count|wait: a count-down latch from the shell,
 * for scripts that start N workers and wait for them.  Exit statuses are
 * those of the command (64 usage, 65 the name holds something that is not
 * a latch count, 69 Redis unreachable or refused, 70 internal), plus:
 * set exits 1 when the latch had a count already (left alone), and wait
 * exits 75 when the count was still above zero at the end of --timeout,
 * and 66 at once for a latch nobody set through hilock (a typo, most
 * likely), unless --missing-ok takes that for open as Redisson does.
 * down refuses what is no latch of ours: a name with no count (66, unless
 * --missing-ok), a count hilock marked as a semaphore (65), or an integer
 * no client of ours set as a latch (65: another program's counter, or a
 * latch only Redisson set, which --foreign-ok counts down). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CLI_EXIT_NOT_SET 1
#define CLI_EXIT_NO_LATCH 66

static int latch_usage(const char *why, const char *what)
{
    return cli_usage_error("latch", why, what);
}

static int latch_failed(const char *what, const char *name, int rc)
{
    char step[300];
    snprintf(step, sizeof step, "latch %s %s failed", what, name);
    return cli_failed(step, rc, NULL);
}

/* A count: digits only, 1..HILOCK_LATCH_MAX_COUNT. */
static bool parse_count(const char *s, int64_t *out)
{
    long long v;
    if (!cli_parse_ms(s, false, HILOCK_LATCH_MAX_COUNT, &v))
        return false;
    *out = v;
    return true;
}

/* A latch that counts 0 and that no client of ours set or opened lately
 * is a name nobody set: 0 when it is a latch to wait for, else the exit
 * status after saying so. */
static int check_was_set(hilock_latch *l, const char *name)
{
    int64_t now = 0;
    int rc = hilock_latch_count(l, &now);
    if (rc != HILOCK_OK)
        return latch_failed("wait", name, rc);
    if (now > 0)
        return 0;
    bool seen = false;
    rc = hilock_latch_was_set(l, &seen);
    if (rc != HILOCK_OK)
        return latch_failed("wait", name, rc);
    if (seen)
        return 0;
    fprintf(stderr,
            "hilock: no latch %s: none was set through hilock, or it opened "
            "more than a day ago (a typo?); --missing-ok takes it for open, "
            "as Redisson does\n",
            name);
    return CLI_EXIT_NO_LATCH;
}

/* What down may count down: 0, or the exit status after saying why not
 * (see the top of this file). */
static int check_down(hilock_client *client, hilock_latch *l,
                      const char *name, bool missing_ok, bool foreign_ok)
{
    const char *marked = NULL;
    int rc = hilock_client_name_kind_n(client, name, strlen(name), &marked);
    if (rc != HILOCK_OK)
        return latch_failed("down", name, rc);
    if (marked != NULL && strcmp(marked, "latch") == 0)
        return 0;
    if (marked != NULL) {
        fprintf(stderr, "hilock: %s is a %s, not a latch: not counted "
                        "down\n", name, marked);
        return CLI_EXIT_DATAERR;
    }
    int64_t now = 0;
    rc = hilock_latch_count(l, &now);
    if (rc != HILOCK_OK)
        return latch_failed("down", name, rc);
    if (now == 0 && !missing_ok) {
        fprintf(stderr, "hilock: no latch %s: none was set through hilock, "
                        "or it opened more than a day ago (a typo?); "
                        "--missing-ok counts down nothing, as Redisson "
                        "does\n", name);
        return CLI_EXIT_NO_LATCH;
    }
    if (now > 0 && !foreign_ok) {
        fprintf(stderr, "hilock: %s counts %lld, but no hilock client set "
                        "it as a latch: another program's counter, or a "
                        "latch only Redisson set; --foreign-ok counts it "
                        "down\n", name, (long long)now);
        return CLI_EXIT_DATAERR;
    }
    return 0;
}

typedef struct latch_flags {
    bool missing_ok;
    bool foreign_ok;
} latch_flags;

static int run_step(hilock_client *client, hilock_latch *l, const char *step,
                    const char *name, int64_t count, long long timeout_ms,
                    latch_flags flags)
{
    int rc;
    bool missing_ok = flags.missing_ok;
    if (strcmp(step, "set") == 0) {
        bool set = false;
        rc = hilock_latch_try_set_count(l, count, &set);
        if (rc != HILOCK_OK)
            return latch_failed(step, name, rc);
        int64_t now = 0;
        if (!set && hilock_latch_count(l, &now) == HILOCK_OK)
            printf("not set: the latch counts %lld already\n",
                   (long long)now);
        else if (!set)
            printf("not set: the latch has a count already\n");
        else
            printf("set %lld\n", (long long)count);
        return set ? 0 : CLI_EXIT_NOT_SET;
    }
    if (strcmp(step, "down") == 0 &&
        (rc = check_down(client, l, name, missing_ok, flags.foreign_ok)) != 0)
        return rc;
    if (strcmp(step, "down") == 0 || strcmp(step, "count") == 0) {
        int64_t n = 0;
        rc = step[0] == 'd' ? hilock_latch_count_down(l, &n)
                            : hilock_latch_count(l, &n);
        if (rc != HILOCK_OK)
            return latch_failed(step, name, rc);
        printf("%lld\n", (long long)n);
        return 0;
    }
    if (!missing_ok && (rc = check_was_set(l, name)) != 0)
        return rc;
    bool opened = false;
    rc = hilock_latch_await(l, timeout_ms, &opened);
    if (rc != HILOCK_OK)
        return latch_failed(step, name, rc);
    if (!opened) {
        fprintf(stderr, "hilock: latch %s still counts above zero after "
                        "%lld ms\n", name, timeout_ms);
        return CLI_EXIT_NOT_ACQUIRED;
    }
    printf("open\n");
    return 0;
}

int cli_latch(const cli_globals *g, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (cli_wants_help(argv[i]))
            return cli_help("latch");
    if (argc < 2)
        return latch_usage("missing step: set, down, count or wait", NULL);
    const char *step = argv[1];
    if (strcmp(step, "set") != 0 && strcmp(step, "down") != 0 &&
        strcmp(step, "count") != 0 && strcmp(step, "wait") != 0)
        return latch_usage("unknown step", step);
    const char *name = NULL, *count_text = NULL;
    long long timeout_ms = HILOCK_WAIT_FOREVER;
    latch_flags flags = {false, false};
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i], *v;
        bool missing = false;
        if (arg[0] != '-') {
            if (name == NULL)
                name = arg;
            else if (strcmp(step, "set") == 0 && count_text == NULL)
                count_text = arg;
            else
                return latch_usage("unexpected argument", arg);
        } else if ((strcmp(step, "wait") == 0 || strcmp(step, "down") == 0) &&
                   strcmp(arg, "--missing-ok") == 0) {
            flags.missing_ok = true;
        } else if (strcmp(step, "down") == 0 &&
                   strcmp(arg, "--foreign-ok") == 0) {
            flags.foreign_ok = true;
        } else if (strcmp(step, "wait") == 0 &&
                   (v = cli_option_value(argc, argv, &i, "--timeout", "-t",
                                         &missing))) {
            if (!cli_parse_duration(v, true, INT64_MAX / 2, &timeout_ms))
                return latch_usage("--timeout takes a duration (10s, "
                                   "500ms, 2m; bare: milliseconds), not",
                                   v);
        } else {
            return latch_usage(missing ? "missing value after"
                                       : "unknown option",
                               arg);
        }
    }
    if (name == NULL || name[0] == '\0')
        return latch_usage("missing latch NAME", NULL);
    if (strlen(name) > HILOCK_MAX_NAME_LEN)
        return latch_usage("the latch name is too long", NULL);
    int64_t count = 0;
    if (strcmp(step, "set") == 0) {
        if (count_text == NULL)
            return latch_usage("missing COUNT", NULL);
        if (!parse_count(count_text, &count))
            return latch_usage("COUNT must be a whole number from 1 to "
                               "9007199254740991, not",
                               count_text);
    }
    hilock_client *client;
    int rc = cli_open(g, &client);
    if (rc != 0)
        return rc;
    hilock_latch *l;
    rc = hilock_latch_create(&l, client, name);
    if (rc != HILOCK_OK) {
        rc = latch_failed(step, name, rc);
    } else {
        rc = run_step(client, l, step, name, count, timeout_ms, flags);
        hilock_latch_destroy(l);
    }
    hilock_client_destroy(client);
    return cli_flush_stdout(rc);
}

/* An integer no client of ours marked, as it is: any 64-bit integer,
 * negative ones too, which no latch holds. */
static int unknown_status(hilock_client *client, const char *name)
{
    const char *argv[] = {"GET", name};
    hilock_reply *r = NULL;
    int rc = hilock_client_command(client, 2, argv, NULL, &r);
    if (rc != HILOCK_OK) {
        hilock_reply_free(r);
        return latch_failed("count", name, rc);
    }
    char *end = NULL;
    long long n = 0;
    bool count = r->type == HILOCK_REPLY_STRING && r->len > 0 &&
                 r->len < 21;
    if (count) {
        errno = 0;
        n = strtoll(r->str, &end, 10);
        count = errno == 0 && end == r->str + r->len;
    }
    hilock_reply_free(r);
    if (!count) {
        fprintf(stderr, "hilock: %s holds a string that is no count: no "
                        "lock, latch or semaphore of ours or Redisson's\n",
                name);
        return CLI_EXIT_DATAERR;
    }
    printf("{\"name\":");
    cli_json_string(stdout, name, strlen(name));
    printf(",\"kind\":\"unknown\",\"count\":%lld}\n", n);
    return 0;
}

int cli_latch_status(hilock_client *client, const char *name, bool latch)
{
    if (!latch)
        return unknown_status(client, name);
    hilock_latch *l;
    int rc = hilock_latch_create(&l, client, name);
    int64_t n = 0;
    if (rc == HILOCK_OK) {
        rc = hilock_latch_count(l, &n);
        if (rc != HILOCK_OK)
            rc = latch_failed("count", name, rc);
        hilock_latch_destroy(l);
    } else {
        rc = latch_failed("count", name, rc);
    }
    if (rc != 0)
        return rc;
    printf("{\"name\":");
    cli_json_string(stdout, name, strlen(name));
    printf(",\"kind\":\"latch\",\"count\":%lld,\"open\":%s}\n",
           (long long)n, n == 0 ? "true" : "false");
    return 0;
}

bool cli_holds_string(hilock_client *client, const char *name)
{
    const char *argv[2] = {"TYPE", name};
    hilock_reply *r = NULL;
    bool yes = hilock_client_command(client, 2, argv, NULL, &r) ==
                   HILOCK_OK &&
               r != NULL && r->len == 6 && memcmp(r->str, "string", 6) == 0;
    hilock_reply_free(r);
    return yes;
}
