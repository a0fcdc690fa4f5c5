/* Users whose ACL lacks a permission: what the library returns and what
 * the hilock command says and exits with, against a real redis-server
 * with ACL users made for each case. */
/* ctest-timeout: 120 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/base/error_detail.h"
#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/plain_sub.h"

#ifndef HILOCK_TOOL_PATH
#error "HILOCK_TOOL_PATH must name the hilock executable"
#endif

#define OUT_CAP 8192
#define PASSWORD "acl-test-pw"

static hl_redis_server *server;

static int setup(void **state)
{
    (void)state;
    unsetenv("HILOCK_REDIS");
    server = hl_fixture_plain();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_server_stop(server);
    server = NULL;
    return 0;
}

static void url_of(const char *user, char *out, size_t cap)
{
    if (user == NULL)
        snprintf(out, cap, "redis://127.0.0.1:%d",
                 hl_redis_server_port(server));
    else
        snprintf(out, cap, "redis://%s:" PASSWORD "@127.0.0.1:%d", user,
                 hl_redis_server_port(server));
}

/* A client logged in as user (NULL: the default user). */
static hilock_client *client_as(const char *user)
{
    char url[160];
    hilock_options *o;
    hilock_client *c;

    url_of(user, url, sizeof url);
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    if (hilock_client_create(&c, o) != HILOCK_OK)
        fail_msg("client as %s: %s", user ? user : "default",
                 hilock_last_error());
    hilock_options_free(o);
    return c;
}

/* Run the hilock command as user with the NULL-terminated arguments;
 * its stdout and stderr go to out.  Returns its exit status. */
static int tool_as(const char *user, char *out, ...)
{
    const char *argv[24];
    char url[160];
    const char *a;
    int n = 0;
    va_list ap;

    url_of(user, url, sizeof url);
    argv[n++] = HILOCK_TOOL_PATH;
    argv[n++] = "--redis";
    argv[n++] = url;
    va_start(ap, out);
    while ((a = va_arg(ap, const char *)) != NULL && n < 23)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    return hl_run(argv, out, OUT_CAP, hl_widen(20000));
}

static void assert_has(const char *text, const char *needle)
{
    if (strstr(text, needle) == NULL)
        fail_msg("\"%s\" not found in:\n%s", needle, text);
}

static void assert_lacks(const char *text, const char *needle)
{
    if (strstr(text, needle) != NULL)
        fail_msg("\"%s\" should not be in:\n%s", needle, text);
}

static hilock_client_stats stats_of(hilock_client *c)
{
    hilock_client_stats st;
    assert_int_equal(hl_client_counters(c, &st), HILOCK_OK);
    return st;
}

static long long exists(const char *key)
{
    char reply[64];
    assert_int_equal(hl_redis_server_cmd(server, reply, sizeof reply,
                                         "EXISTS", key, (char *)NULL),
                     ':');
    return atoll(reply + 1);
}

/* ---- a command the ACL refuses --------------------------------------- */

/* The server's words for a refusal, as Redis 6 and 7 put them, directly
 * and from inside a script; nothing else may read as one. */
static void test_refusal_words(void **state)
{
    (void)state;
    static const char *const refused[] = {
        "NOPERM this user has no permissions to run the 'evalsha' command",
        "NOPERM User u has no permissions to run the 'publish' command",
        "NOPERM",
        "ERR The user executing the script can't run this command or "
        "subcommand script: 1cb7, on @user_script:8.",
        "ERR The user executing the script can't publish to the channel "
        "mentioned in the command",
    };
    static const char *const other[] = {
        "WRONGTYPE Operation against a key holding the wrong kind of value",
        "NOPERMISSION is not a word Redis uses",
        "ERR NOPERM in the middle",
        "ERR The user executing",
        "NOSCRIPT No matching script.",
        "",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        assert_int_equal(hl_redis_error_status(refused[i]), HILOCK_EPERM);
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        assert_int_equal(hl_redis_error_status(other[i]), HILOCK_EREDIS);
    assert_int_equal(hl_redis_error_status(NULL), HILOCK_EREDIS);
}

static void test_refused_command_is_eperm(void **state)
{
    (void)state;
    hl_fixture_acl_user_rules(server, "noscript", PASSWORD,
                              "~* &* +@all -evalsha -eval");
    hilock_client *c = client_as("noscript");
    hilock_lock *lock;

    assert_int_equal(hilock_lock_create(&lock, c, "acl-a"), HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(lock, 0, 5000), HILOCK_EPERM);
    assert_has(hilock_last_error(), "NOPERM");
    assert_int_equal(hilock_lock_release(lock), HILOCK_EPERM);
    bool deleted = true;
    assert_int_equal(hilock_lock_force_release(lock, &deleted),
                     HILOCK_EPERM);
    hilock_lock_destroy(lock);

    /* A raw command: the error reply still comes with it. */
    hl_fixture_acl_user_rules(server, "noset", PASSWORD,
                              "~* &* +@all -set");
    hilock_client *c2 = client_as("noset");
    const char *set_argv[] = {"SET", "acl-k", "v"};
    hilock_reply *r = NULL;
    assert_int_equal(hilock_client_command(c2, 3, set_argv, NULL, &r),
                     HILOCK_EPERM);
    assert_non_null(r);
    assert_int_equal(r->type, HILOCK_REPLY_ERROR);
    assert_true(strncmp(r->str, "NOPERM", 6) == 0);
    hilock_reply_free(r);
    /* Other error replies stay EREDIS. */
    const char *bad_argv[] = {"INCR", "acl-k"};
    const char *str_argv[] = {"APPEND", "acl-k", "x"};
    assert_int_equal(hilock_client_command(c2, 3, str_argv, NULL, &r),
                     HILOCK_OK);
    hilock_reply_free(r);
    assert_int_equal(hilock_client_command(c2, 2, bad_argv, NULL, &r),
                     HILOCK_EREDIS);
    hilock_reply_free(r);
    hilock_client_destroy(c2);
    hilock_client_destroy(c);
}

/* The command exits 69, the code for refused credentials, and not 65,
 * which says the name holds something that is not a lock. */
static void test_cli_refused_exits_unavailable(void **state)
{
    (void)state;
    char out[OUT_CAP];
    hl_fixture_acl_user_rules(server, "noscript", PASSWORD,
                              "~* &* +@all -evalsha -eval");
    hl_fixture_acl_user_rules(server, "nopubsub", PASSWORD,
                              "~* &* +@all -pubsub");

    assert_int_equal(tool_as("noscript", out, "run", "acl-b", "--", "true",
                             (char *)NULL),
                     69);
    assert_has(out, "ACL");
    assert_int_equal(tool_as("noscript", out, "unlock", "--force", "acl-b",
                             (char *)NULL),
                     69);
    assert_has(out, "NOPERM");
    assert_int_equal(tool_as("nopubsub", out, "status", "acl-b",
                             (char *)NULL),
                     69);
    /* The status script asks PUBSUB, and Redis 7.0 words a refusal inside
     * a script as a plain ERR; later servers say NOPERM. */
    if (strstr(out, "NOPERM") == NULL)
        assert_has(out, "can't run this command");
    /* A name that holds a string is 65 for a user the server lets read
     * it; status reads through scripts, so a user without them is
     * refused first. */
    char reply[64];
    hl_redis_server_cmd(server, reply, sizeof reply, "SET", "acl-str", "x",
                        (char *)NULL);
    assert_int_equal(tool_as("nopubsub", out, "status", "acl-str",
                             (char *)NULL),
                     65);
    assert_int_equal(tool_as("noscript", out, "status", "acl-str",
                             (char *)NULL),
                     69);
    assert_int_equal(exists("acl-b"), 0);
}


/* ---- a release whose wake-up PUBLISH is refused ---------------------- */

typedef hilock_lock *(*make_fn)(hilock_client *c, const char *name);

static hilock_lock *make_reentrant(hilock_client *c, const char *name)
{
    hilock_lock *l;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    return l;
}

static hilock_lock *make_fair(hilock_client *c, const char *name)
{
    hilock_lock *l;
    assert_int_equal(hilock_fair_lock_create(&l, c, name),
                     HILOCK_OK);
    return l;
}

static hilock_lock *make_write(hilock_client *c, const char *name)
{
    hilock_lock *l;
    assert_int_equal(hilock_write_lock_create(&l, c, name),
                     HILOCK_OK);
    return l;
}

/* The lock is freed, so the release says so, whatever became of the
 * PUBLISH after it; the refusal is counted, not returned. */
static void release_without_publish(const char *user, const char *rules)
{
    /* A fair lock wakes only the head of its line, and nobody waits
     * here: its releases announce nothing, so nothing is refused.  A
     * reentrant lock announces on Redisson's channel only to someone
     * listening there: a subscriber stands for a Java waiter. */
    static const struct {
        const char *name;
        make_fn make;
        uint64_t per_free; /* PUBLISHes a freeing release makes */
        const char *java_channel;
    } kinds[] = {
        {"acl-rel-reentrant", make_reentrant, 1,
         "redisson_lock__channel:{acl-rel-reentrant}"},
        {"acl-rel-fair", make_fair, 0, NULL},
        {"acl-rel-rw", make_write, 1, NULL},
    };
    hl_fixture_acl_user_rules(server, user, PASSWORD, rules);
    hilock_client *c = client_as(user);

    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        hilock_lock *lock = kinds[i].make(c, kinds[i].name);
        uint64_t per = kinds[i].per_free;
        hl_plain_sub *java = kinds[i].java_channel
                                 ? hl_plain_sub_open(server,
                                                     kinds[i].java_channel)
                                 : NULL;
        uint64_t before = stats_of(c).publishes_refused;
        assert_int_equal(hilock_lock_try_acquire(lock, 0, 30000), HILOCK_OK);
        assert_int_equal(exists(kinds[i].name), 1);
        int rc = hilock_lock_release(lock);
        if (rc != HILOCK_OK)
            fail_msg("%s release as %s: %s (%s)", kinds[i].name, user,
                     hilock_errname(rc), hilock_last_error());
        assert_int_equal(exists(kinds[i].name), 0);
        assert_int_equal(stats_of(c).publishes_refused, before + per);
        /* A release that frees nothing publishes nothing. */
        assert_int_equal(hilock_lock_try_acquire(lock, 0, 30000), HILOCK_OK);
        assert_int_equal(hilock_lock_try_acquire(lock, 0, 30000), HILOCK_OK);
        assert_int_equal(hilock_lock_release(lock), HILOCK_OK);
        assert_int_equal(stats_of(c).publishes_refused, before + per);
        assert_int_equal(hilock_lock_release(lock), HILOCK_OK);
        assert_int_equal(stats_of(c).publishes_refused, before + 2 * per);
        /* A forced release also stands. */
        assert_int_equal(hilock_lock_try_acquire(lock, 0, 30000), HILOCK_OK);
        bool deleted = false;
        assert_int_equal(hilock_lock_force_release(lock, &deleted),
                         HILOCK_OK);
        assert_true(deleted);
        assert_int_equal(exists(kinds[i].name), 0);
        assert_int_equal(stats_of(c).publishes_refused, before + 3 * per);
        if (java)
            hl_plain_sub_close(java);
        hilock_lock_destroy(lock);
    }
    hilock_client_destroy(c);
}

static void test_release_without_publish_command(void **state)
{
    (void)state;
    release_without_publish("nopublish", "~* &* +@all -publish");
}

static void test_release_without_channel(void **state)
{
    (void)state;
    release_without_publish("nochannel", "~* resetchannels +@all");
}

/* A user with all permissions counts no refusal. */
static void test_release_with_publish_counts_nothing(void **state)
{
    (void)state;
    hilock_client *c = client_as(NULL);
    hilock_lock *lock = make_reentrant(c, "acl-rel-ok");
    assert_int_equal(hilock_lock_try_acquire(lock, 0, 30000), HILOCK_OK);
    assert_int_equal(hilock_lock_release(lock), HILOCK_OK);
    assert_int_equal(stats_of(c).publishes_refused, 0);
    hilock_lock_destroy(lock);
    hilock_client_destroy(c);
}

/* Semaphores and latches change their count and then announce it.  With
 * the PUBLISH refused the change has happened all the same: each call
 * says what it did, and the refusal is counted.  Were a release told
 * HILOCK_EPERM, its caller would give the permits back twice. */
static void test_semaphore_and_latch_without_publish(void **state)
{
    (void)state;
    hl_fixture_acl_user_rules(server, "nopublish", PASSWORD,
                              "~* &* +@all -publish");
    hilock_client *c = client_as("nopublish");
    uint64_t refused = stats_of(c).publishes_refused;

    hilock_semaphore *s;
    assert_int_equal(hilock_semaphore_create(&s, c, "acl-sem"), HILOCK_OK);
    bool set = false;
    assert_int_equal(hilock_semaphore_try_set(s, 2, &set), HILOCK_OK);
    assert_true(set);
    assert_int_equal(stats_of(c).publishes_refused, refused + 1);
    assert_int_equal(hilock_semaphore_try_acquire(s, 2, 0), HILOCK_OK);
    int rc = hilock_semaphore_release(s, 1);
    if (rc != HILOCK_OK)
        fail_msg("release: %s (%s)", hilock_errname(rc), hilock_last_error());
    int64_t available = -1;
    assert_int_equal(hilock_semaphore_available(s, &available), HILOCK_OK);
    assert_int_equal(available, 1);
    assert_int_equal(stats_of(c).publishes_refused, refused + 2);
    int64_t count = 0;
    assert_int_equal(hilock_semaphore_add(s, 3, &count), HILOCK_OK);
    assert_int_equal(count, 4);
    assert_int_equal(hilock_semaphore_set(s, 5), HILOCK_OK);
    assert_int_equal(stats_of(c).publishes_refused, refused + 4);
    hilock_semaphore_destroy(s);

    /* Expirable permits: an expired permit taken back by the next call
     * announces the new count too. */
    hilock_permit_semaphore *p;
    assert_int_equal(hilock_permit_semaphore_create(&p, c, "acl-permits"),
                     HILOCK_OK);
    assert_int_equal(
        hilock_semaphore_try_set(hilock_permit_semaphore_base(p), 1, &set),
        HILOCK_OK);
    char id[HILOCK_PERMIT_ID_MAX];
    assert_int_equal(hilock_permit_acquire(p, 0, 1, id), HILOCK_OK);
    /* Its lease of 1 ms runs out; the acquire takes it back and gets it. */
    assert_int_equal(hilock_permit_acquire(p, hl_widen(2000), 30000, id),
                     HILOCK_OK);
    uint64_t before = stats_of(c).publishes_refused;
    assert_int_equal(hilock_permit_release(p, id), HILOCK_OK);
    assert_int_equal(stats_of(c).publishes_refused, before + 1);
    assert_int_equal(
        hilock_semaphore_available(hilock_permit_semaphore_base(p),
                                   &available),
        HILOCK_OK);
    assert_int_equal(available, 1);
    hilock_permit_semaphore_destroy(p);

    hilock_latch *l;
    assert_int_equal(hilock_latch_create(&l, c, "acl-latch"), HILOCK_OK);
    before = stats_of(c).publishes_refused;
    assert_int_equal(hilock_latch_try_set_count(l, 1, &set), HILOCK_OK);
    assert_true(set);
    int64_t left = -1;
    assert_int_equal(hilock_latch_count_down(l, &left), HILOCK_OK);
    assert_int_equal(left, 0);
    assert_int_equal(stats_of(c).publishes_refused, before + 2);
    hilock_latch_destroy(l);
    hilock_client_destroy(c);
}

/* `hilock run` reports the release as what it was. */
static void test_cli_run_without_publish(void **state)
{
    (void)state;
    char out[OUT_CAP];
    hl_fixture_acl_user_rules(server, "nopublish", PASSWORD,
                              "~* &* +@all -publish");
    /* A Java waiter, whom the release has to tell. */
    hl_plain_sub *java =
        hl_plain_sub_open(server, "redisson_lock__channel:{acl-run}");
    assert_int_equal(tool_as("nopublish", out, "run", "acl-run", "--",
                             "sh", "-c", "exit 3", (char *)NULL),
                     3);
    hl_plain_sub_close(java);
    assert_lacks(out, "could not release");
    assert_lacks(out, "expires by itself");
    assert_has(out, "released, but the server's ACL refused");
    assert_int_equal(exists("acl-run"), 0);
    /* --verbose tells the refusal as it happens, with the server's words. */
    assert_int_equal(tool_as("nopublish", out, "-v", "run", "acl-run", "--",
                             "true", (char *)NULL),
                     0);
    assert_has(out, "hilock: [publish refused]: ERR The user executing");
    /* With the permission, nothing is said. */
    assert_int_equal(tool_as(NULL, out, "run", "acl-run", "--", "true",
                             (char *)NULL),
                     0);
    assert_string_equal(out, "");
}

/* ---- a SUBSCRIBE the ACL refuses ------------------------------------- */

typedef struct waited {
    atomic_bool done;
    atomic_int status;
} waited;

static void on_acquired(hilock_lock *lock, int status,
                        const hilock_acquired *acquired, void *user_data)
{
    waited *w = user_data;
    (void)lock;
    (void)acquired;
    atomic_store(&w->status, status);
    atomic_store(&w->done, true);
}

static void on_released(hilock_lock *lock, int status, int64_t value,
                        void *user_data)
{
    waited *w = user_data;
    (void)lock;
    (void)value;
    atomic_store(&w->status, status);
    atomic_store(&w->done, true);
}

typedef struct refusals_probe {
    hilock_client *c;
    uint64_t want;
} refusals_probe;

static bool refusals_reached(void *arg)
{
    refusals_probe *p = arg;
    return stats_of(p->c).subscribes_refused >= p->want;
}

/* A waiter whose user may not SUBSCRIBE to the lock's channel: the
 * refusal is counted once, the waiter still gets the lock, at the
 * holder's lease at the latest, and the connection stays usable for the
 * channels it may have. */
static void test_subscribe_refused(void **state)
{
    (void)state;
    hl_fixture_acl_user_rules(server, "nochannel", PASSWORD,
                              "~* resetchannels &other:* +@all");
    hilock_client *holder_c = client_as(NULL);
    hilock_client *waiter_c = client_as("nochannel");
    hilock_lock *held, *wanted;
    assert_int_equal(hilock_lock_create(&held, holder_c, "acl-sub"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_create(&wanted, waiter_c, "acl-sub"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(held, 0, 1500), HILOCK_OK);

    waited w;
    atomic_init(&w.done, false);
    atomic_init(&w.status, -1);
    assert_int_equal(hilock_lock_acquire_async(wanted, 7, 20000, 30000, 0,
                                               on_acquired, &w, NULL),
                     HILOCK_OK);
    refusals_probe p = {waiter_c, 1};
    if (!hl_wait_until(refusals_reached, &p, hl_widen(5000)))
        fail_msg("the refused SUBSCRIBE was not counted");
    assert_int_equal(hilock_lock_release(held), HILOCK_OK);
    /* No message can reach the waiter: it looks again when the lease it
     * saw runs out. */
    if (!hl_wait_flag(&w.done, hl_widen(10000)))
        fail_msg("the waiter never got the lock");
    assert_int_equal(atomic_load(&w.status), HILOCK_OK);
    assert_int_equal(stats_of(waiter_c).subscribes_refused, 1);
    atomic_store(&w.done, false);
    assert_int_equal(hilock_lock_release_async(wanted, 7, on_released, &w),
                     HILOCK_OK);
    assert_true(hl_wait_flag(&w.done, hl_widen(5000)));
    assert_int_equal(atomic_load(&w.status), HILOCK_OK);
    hilock_lock_destroy(wanted);
    hilock_lock_destroy(held);
    hilock_client_destroy(waiter_c);
    hilock_client_destroy(holder_c);
}

/* A wait that no release could wake, because the ACL refuses the
 * subscription, tells its caller so when it runs out. */
static void test_subscribe_refused_told_to_caller(void **state)
{
    (void)state;
    hl_fixture_acl_user_rules(server, "nochannel2", PASSWORD,
                              "~* resetchannels +@all");
    hilock_client *holder_c = client_as(NULL);
    hilock_client *waiter_c = client_as("nochannel2");
    hilock_lock *held, *wanted;
    assert_int_equal(hilock_lock_create(&held, holder_c, "acl-told"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_create(&wanted, waiter_c, "acl-told"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(held, 0, 10000), HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(wanted, 800, 10000),
                     HILOCK_EBUSY);
    if (strstr(hilock_last_error(), "refuses SUBSCRIBE") == NULL)
        fail_msg("detail: %s", hilock_last_error());
    assert_int_equal(hilock_lock_release(held), HILOCK_OK);
    hilock_lock_destroy(wanted);
    hilock_lock_destroy(held);
    hilock_client_destroy(waiter_c);
    hilock_client_destroy(holder_c);
}

/* `hilock run` says why its wait was slow. */
static void test_cli_run_subscribe_refused(void **state)
{
    (void)state;
    char out[OUT_CAP];
    hl_fixture_acl_user_rules(server, "nochannel", PASSWORD,
                              "~* resetchannels +@all");
    hilock_client *c = client_as(NULL);
    hilock_lock *held;
    assert_int_equal(hilock_lock_create(&held, c, "acl-subrun"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(held, 0, 1000), HILOCK_OK);
    assert_int_equal(tool_as("nochannel", out, "run", "--wait", "20000",
                             "acl-subrun", "--", "true", (char *)NULL),
                     0);
    assert_has(out, "refused this user SUBSCRIBE");
    assert_int_equal(hilock_lock_try_acquire(held, 0, 1000), HILOCK_OK);
    assert_int_equal(tool_as("nochannel", out, "-v", "run", "--wait",
                             "20000", "acl-subrun", "--", "true",
                             (char *)NULL),
                     0);
    assert_has(out, "hilock: [subscribe refused]: NOPERM");
    hilock_lock_destroy(held);
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusal_words),
        cmocka_unit_test_setup_teardown(test_refused_command_is_eperm, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_refused_exits_unavailable,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_without_publish_command,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_without_channel, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_release_with_publish_counts_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_without_publish, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_semaphore_and_latch_without_publish, setup, teardown),
        cmocka_unit_test_setup_teardown(test_subscribe_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_subscribe_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_subscribe_refused_told_to_caller, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
