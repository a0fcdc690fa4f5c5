/* The client's card on a real redis-server: who a client is (host,
 * process id, program, description, library), written when it connects
 * and kept while it runs, read back by client id for `hilock status`; no
 * card for a client id of another library; the card written again after
 * the server restarted without its data; descriptions checked. */
/* ctest-timeout: 120 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/options.h"
#include "hilock/reply.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

static hilock_client *described(const char *description)
{
    hilock_options *o;
    hilock_client *c;
    char url[128];

    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(fx.server));
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    assert_status(hilock_options_set_description(o, description), HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    return c;
}

/* The card says which process the client is, as an operator would look
 * it up from a holder's owner id, through another client. */
static void test_card_names_the_process(void **state)
{
    hilock_client *c = described("nightly billing close");
    hilock_client *reader = hl_new_client(fx.server, NULL);
    hilock_client_card *card = NULL;
    char host[256] = "";
    char key[128];

    (void)state;
    hl_card_wait w = {reader, hilock_client_id(c)};
    assert_true(hl_wait_until(hl_card_is_there, &w, hl_widen(5000)));
    assert_status(hilock_client_card_get(reader, hilock_client_id(c), &card),
                  HILOCK_OK);
    assert_string_equal(card->client_id, hilock_client_id(c));
    assert_int_equal(gethostname(host, sizeof host), 0);
    assert_string_equal(card->host, host);
    assert_int_equal(card->pid, (int64_t)getpid());
    assert_string_equal(card->program, program_invocation_short_name);
    assert_string_equal(card->description, "nightly billing close");
    assert_true(strncmp(card->library, "hilock ", 7) == 0);
    assert_int_equal(card->leases_lost, 0);
    /* Written when it connected, moments ago, and every 5 s since. */
    assert_true(card->written_ms_ago >= 0 && card->written_ms_ago <= 6000);
    hilock_client_card_free(card);
    /* It runs out a minute after its last writing, unless written again. */
    snprintf(key, sizeof key, "hilock_client:{%s}", hilock_client_id(c));
    long long ttl = hl_raw_pttl(fx.server, key);
    assert_true(ttl > 0 && ttl <= 60000);
    hl_free_client(reader);
    hl_free_client(c);
}

/* Another library's client id has no card, nor an id of another length;
 * a client without a description has an empty one. */
static void test_no_card_for_others(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client_card *card = NULL;

    (void)state;
    assert_status(hilock_client_card_get(
                      c, "0b7d1f52-5c3e-4a47-9d3c-2f1e6a7b8c9d", &card),
                  HILOCK_ENOTFOUND);
    assert_null(card);
    assert_non_null(strstr(hilock_last_error(), "not a client of this"));
    assert_status(hilock_client_card_get(c, "short", &card), HILOCK_EINVAL);
    assert_status(hilock_client_card_get(NULL, "x", &card), HILOCK_EINVAL);
    hl_card_wait w = {c, hilock_client_id(c)};
    assert_true(hl_wait_until(hl_card_is_there, &w, hl_widen(5000)));
    assert_status(hilock_client_card_get(c, hilock_client_id(c), &card),
                  HILOCK_OK);
    assert_string_equal(card->description, "");
    hilock_client_card_free(card);
    hilock_client_card_free(NULL);
    hl_free_client(c);
}

/* A server restarted without its data has lost the card: the client
 * writes it again as soon as it is back, not a refresh later. */
static void test_card_back_after_restart(void **state)
{
    hilock_client *c = described("restart");
    hl_card_wait w = {c, hilock_client_id(c)};

    (void)state;
    assert_true(hl_wait_until(hl_card_is_there, &w, hl_widen(5000)));
    hl_fixture_restart(fx.server);
    int64_t t0 = hl_now_ms();
    if (!hl_wait_until(hl_card_is_there, &w, hl_widen(10000)))
        fail_msg("no card after the restart");
    print_message("    card back %lld ms after the restart\n",
                  (long long)(hl_now_ms() - t0));
    hl_free_client(c);
}

/* The server's clock, in ms. */
static int64_t server_ms(hilock_client *c)
{
    const char *argv[] = {"TIME"};
    hilock_reply *r = NULL;
    assert_status(hilock_client_command(c, 1, argv, NULL, &r), HILOCK_OK);
    assert_int_equal(r->type, HILOCK_REPLY_ARRAY);
    assert_int_equal(r->elements, 2);
    int64_t ms = strtoll(r->element[0]->str, NULL, 10) * 1000 +
                 strtoll(r->element[1]->str, NULL, 10) / 1000;
    hilock_reply_free(r);
    return ms;
}

typedef struct since_wait {
    hilock_client *reader;
    const char *name;
    const char *owner;
    int want; /* HILOCK_OK: listed; HILOCK_ENOTFOUND: gone from the list */
    int64_t since, held;
} since_wait;

static bool since_is(void *arg)
{
    since_wait *w = arg;
    int rc = hilock_client_hold_since(w->reader, w->name, strlen(w->name),
                                      w->owner, strlen(w->owner), &w->since,
                                      &w->held);
    return rc == w->want;
}

/* Every hold of a client is listed beside its card with its start on
 * the server's clock, soon after it began, for any reader; once given
 * back it leaves the list at the next writing.  A holder that is no
 * client of this library has no start to show. */
static void test_hold_since(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *reader = hl_new_client(fx.server, NULL);
    hilock_lock *a = hl_new_lock(c, "since-a");
    hilock_lock *b = hl_new_lock(c, "since-b");
    hilock_lock_status *st = NULL;
    char owner_a[96], owner_b[96];
    int64_t since = 0;

    (void)state;
    int64_t before = server_ms(reader);
    assert_status(hilock_lock_try_acquire(a, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_acquire_as(b, 0x51CE, 0, 60000, 0, NULL),
                  HILOCK_OK);
    assert_status(hilock_lock_status_get(a, &st), HILOCK_OK);
    assert_int_equal(st->holders_len, 1);
    snprintf(owner_a, sizeof owner_a, "%s", st->holders[0].owner);
    hilock_lock_status_free(st);
    snprintf(owner_b, sizeof owner_b, "%s:%llu", hilock_client_id(c),
             (unsigned long long)0x51CE);

    since_wait w = {reader, "since-a", owner_a, HILOCK_OK, -1, -1};
    if (!hl_wait_until(since_is, &w, hl_widen(5000)))
        fail_msg("the hold of since-a was never listed: %s",
                 hilock_last_error());
    int64_t listed_at = server_ms(reader);
    if (w.since < before - 2 || w.since > listed_at)
        fail_msg("since-a began at %lld, outside [%lld, %lld]",
                 (long long)w.since, (long long)before,
                 (long long)listed_at);
    assert_true(w.held >= 0 && w.held <= listed_at - before + 2);
    /* Held on: the age grows with the time since the writing. */
    int64_t first_held = w.held;
    usleep(300 * 1000);
    assert_true(since_is(&w));
    assert_true(w.held >= first_held + 250);
    since_wait wb = {reader, "since-b", owner_b, HILOCK_OK, -1, -1};
    assert_true(hl_wait_until(since_is, &wb, hl_widen(5000)));
    assert_true(wb.since >= before - 2 && wb.since <= server_ms(reader));
    /* The owner's hold on another name is no hold of this one. */
    int64_t held = 0;
    assert_status(hilock_client_hold_since(reader, "since-b", 7, owner_a,
                                           strlen(owner_a), &since, &held),
                  HILOCK_ENOTFOUND);
    assert_int_equal(since, -1);
    assert_int_equal(held, -1);

    /* Given back, it leaves the list with the next writing (every 5 s). */
    assert_status(hilock_lock_release(a), HILOCK_OK);
    w.want = HILOCK_ENOTFOUND;
    if (!hl_wait_until(since_is, &w, hl_widen(12000)))
        fail_msg("since-a is still listed after its release");
    wb.want = HILOCK_OK;
    assert_true(since_is(&wb));

    /* Not a client of this library, and bad arguments. */
    const char *java = "0b7d1f52-5c3e-4a47-9d3c-2f1e6a7b8c9d:1";
    assert_status(hilock_client_hold_since(reader, "since-b", 7, java,
                                           strlen(java), &since, NULL),
                  HILOCK_ENOTFOUND);
    assert_status(hilock_client_hold_since(reader, "since-b", 7, "x:1", 3,
                                           &since, NULL),
                  HILOCK_ENOTFOUND);
    assert_status(hilock_client_hold_since(reader, "since-b", 0, owner_b,
                                           strlen(owner_b), &since, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_client_hold_since(NULL, "since-b", 7, owner_b,
                                           strlen(owner_b), &since, NULL),
                  HILOCK_EINVAL);
    /* Either output may be left out. */
    assert_status(hilock_client_hold_since(reader, "since-b", 7, owner_b,
                                           strlen(owner_b), NULL, NULL),
                  HILOCK_OK);
    assert_status(hilock_lock_release_as(b, 0x51CE), HILOCK_OK);
    hl_free_lock(b);
    hl_free_lock(a);
    hl_free_client(reader);
    hl_free_client(c);
}

/* A description is shown as it is: too long, empty or with a control
 * character it is refused, and a URL may carry one. */
static void test_descriptions_checked(void **state)
{
    hilock_options *o;
    char longer[HILOCK_DESCRIPTION_MAX + 2];

    (void)state;
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_description(o, longer), HILOCK_EINVAL);
    longer[HILOCK_DESCRIPTION_MAX] = '\0';
    assert_status(hilock_options_set_description(o, longer), HILOCK_OK);
    assert_status(hilock_options_set_description(o, ""), HILOCK_EINVAL);
    assert_status(hilock_options_set_description(o, "a\nb"), HILOCK_EINVAL);
    assert_status(hilock_options_set_description(o, "tab\there"),
                  HILOCK_EINVAL);
    assert_string_equal(hilock_options_description(o), longer);
    assert_status(hilock_options_set_description(o, NULL), HILOCK_OK);
    assert_null(hilock_options_description(o));
    assert_status(hilock_options_set_url(
                      o, "redis://127.0.0.1:1/?description=night%20run"),
                  HILOCK_OK);
    assert_string_equal(hilock_options_description(o), "night run");
    assert_status(hilock_options_set_url(
                      o, "redis://127.0.0.1:1/?description=a%0Ab"),
                  HILOCK_EINVAL);
    hilock_options_free(o);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_card_names_the_process),
        T(test_no_card_for_others),
        T(test_card_back_after_restart),
        T(test_descriptions_checked),
        T(test_hold_since),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
