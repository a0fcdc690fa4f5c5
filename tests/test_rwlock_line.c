/* The read-write lock's waiting writers lined up by client, against a
 * real redis-server: a release that frees the lock, write or read, wakes
 * the first client in the writers' line alone; a client that died in
 * line is passed over once its place runs out; the client first in line
 * hears the releases of Redisson's (Java's) readers and writers on their
 * channel, and Java's waiters hear ours there; the next client takes
 * over that listening when the first leaves; and new readers wait for
 * the writers' line, to be let in by a message once it is empty.
 *
 * The server is observed through the fixture's own connections (raw
 * RESP), never through the library under test. */
/* ctest-timeout: 180 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/rwlock.h"
#include "support/fixture.h"
#include "support/handoff.h"
#include "support/lock_helpers.h"
#include "support/mutex_checker.h"
#include "support/plain_sub.h"
#include "support/raw_reads.h"

/* Each test's server; see hl_lock_fixture. */
static hl_lock_fixture fx;

/* Waiting writers try again on their own, renewing their client's place
 * in line, every third of this, and waiting readers no sooner than the
 * first writer's place runs out: within a test, only releases and
 * messages move them.  Widened with the tests' deadlines under valgrind
 * (waiting_client). */
#define WAITER_MS 60000

/* Leases of the holds a test takes: none runs out within a test, so only
 * a release or a message explains a waiter getting in. */
#define LEASE_MS 300000
#define LEASE_MS_TEXT "300000"

#define OWNER_A UINT64_C(0xA1)
#define OWNER_B UINT64_C(0xB2)

/* A Java (Redisson) client, and its holds' fields: "<uuid>:<thread>", a
 * writer's with ":write" after it. */
#define JAVA_CLIENT "0b7d1f52-5c3e-4a47-9d3c-2f1e6a7b8c9d"
#define JAVA_WRITE_FIELD JAVA_CLIENT ":77:write"
#define JAVA_READ_FIELD JAVA_CLIENT ":78"

#define KEY_CAP 200
#define HERD 8
/* Room for a line of HERD client ids joined by spaces. */
#define LINE_CAP (HERD * (HILOCK_CLIENT_ID_LEN + 1) + 1)

/* ---- names of things in Redis ------------------------------------------ */

/* "<prefix>:{<name>}": the writers' line, their places, the promise and
 * Redisson's channel of the lock called name. */
static void key_of(char *out, const char *prefix, const char *name)
{
    int n = snprintf(out, KEY_CAP, "%s:{%s}", prefix, name);

    assert_true(n > 0 && n < KEY_CAP);
}

static void line_key(char *out, const char *name)
{
    key_of(out, "hilock_rwlock_line", name);
}

static void places_key(char *out, const char *name)
{
    key_of(out, "hilock_rwlock_writers", name);
}

static void promise_key(char *out, const char *name)
{
    key_of(out, "hilock_rwlock_next", name);
}

static void redisson_channel(char *out, const char *name)
{
    key_of(out, "redisson_rwlock", name);
}

/* ---- what the server holds --------------------------------------------- */

/* The client ids in the writers' line, first to last, joined by spaces. */
static void line_of(const char *name, char *out, size_t cap)
{
    char key[KEY_CAP];

    line_key(key, name);
    hl_raw_list(fx.server, key, out, cap);
}

typedef struct line_want {
    const char *name;
    const char *clients;
    char seen[LINE_CAP];
} line_want;

static bool line_reads(void *arg)
{
    line_want *w = arg;

    line_of(w->name, w->seen, sizeof w->seen);
    return strcmp(w->seen, w->clients) == 0;
}

/* Waits for the writers' line to hold clients (ids joined by spaces), in
 * that order: a writer that gives up leaves the line with a script of its
 * own, which may run after it was called back. */
static void expect_line(const char *name, const char *clients)
{
    line_want w;

    w.name = name;
    w.clients = clients;
    if (!hl_wait_until(line_reads, &w, hl_widen(10000)))
        fail_msg("the writers' line is \"%s\", expected \"%s\"", w.seen,
                 clients);
}

/* Nothing of the writers' line is left: no line, no places, no promise. */
static void expect_no_line(const char *name)
{
    char line[KEY_CAP], places[KEY_CAP], promise[KEY_CAP];

    line_key(line, name);
    places_key(places, name);
    promise_key(promise, name);
    assert_int_equal(hl_raw_exists(fx.server, line), 0);
    assert_int_equal(hl_raw_exists(fx.server, places), 0);
    assert_int_equal(hl_raw_exists(fx.server, promise), 0);
}

/* Waits for exactly n subscribers on Redisson's channel of the lock, as
 * the server counts them: a client may have subscribed and not yet been
 * heard. */
static void expect_redisson_listeners(const char *name, long long n)
{
    char channel[KEY_CAP];

    redisson_channel(channel, name);
    hl_expect_numsub(fx.server, channel, n, n);
}

/* ---- clients ----------------------------------------------------------- */

/* A client whose waiters try on their own only every third of
 * WAITER_MS. */
static hilock_client *waiting_client(void)
{
    const hl_client_opts opts = { .waiter_ms = hl_widen(WAITER_MS) };

    return hl_new_client(fx.server, &opts);
}

/* A deadline that a waiter woken by a message meets easily and one that
 * waits for its own next try cannot. */
static int64_t before_own_retry_ms(void)
{
    return hl_widen(WAITER_MS) / 3;
}

/* ---- Java's holds, set and released as Redisson's scripts do ----------- */

/* A write hold as Redisson's write lock takes it. */
static void java_write_hold(const char *name)
{
    assert_int_equal(hl_raw_int(fx.server, "HSET", name, "mode", "write",
                                JAVA_WRITE_FIELD, "1", (char *)NULL),
                     2);
    assert_int_equal(hl_raw_int(fx.server, "PEXPIRE", name, LEASE_MS_TEXT,
                                (char *)NULL),
                     1);
}

/* The write hold's release: the hash goes, and "1" says so. */
static void java_write_release(const char *name)
{
    char channel[KEY_CAP];

    redisson_channel(channel, name);
    assert_int_equal(hl_raw_int(fx.server, "DEL", name, (char *)NULL), 1);
    hl_raw_int(fx.server, "PUBLISH", channel, "1", (char *)NULL);
}

/* A read hold: the reader's count in the hash, and its one hold's own
 * key with the lease. */
static void java_read_hold(const char *name, char *timeout_key)
{
    int n = snprintf(timeout_key, KEY_CAP, "{%s}:%s:rwlock_timeout:1", name,
                     JAVA_READ_FIELD);

    assert_true(n > 0 && n < KEY_CAP);
    assert_int_equal(hl_raw_int(fx.server, "HSET", name, "mode", "read",
                                JAVA_READ_FIELD, "1", (char *)NULL),
                     2);
    hl_raw_cmd(fx.server, NULL, 0, "SET", timeout_key, "1", "PX",
               LEASE_MS_TEXT, (char *)NULL);
    assert_int_equal(hl_raw_int(fx.server, "PEXPIRE", name, LEASE_MS_TEXT,
                                (char *)NULL),
                     1);
}

/* The last read hold's release: both keys go, and "0" says so. */
static void java_read_release(const char *name, const char *timeout_key)
{
    char channel[KEY_CAP];

    redisson_channel(channel, name);
    assert_int_equal(hl_raw_int(fx.server, "DEL", name, timeout_key,
                                (char *)NULL),
                     2);
    hl_raw_int(fx.server, "PUBLISH", channel, "0", (char *)NULL);
}

/* ---- a release wakes one writer client --------------------------------- */

/* held is a hold (of either side) on the lock called name, by a client
 * of its own.  HERD other clients (processes, as far as the server can
 * tell) each start a writer that lets go as soon as it holds, and wait
 * in line in the order they came, only the first listening on Redisson's
 * channel besides its own.  Then held is released.  Each release that
 * frees the lock gives it to the first client in line, whose refused
 * writer recorded its wish, and wakes that client alone, which holds
 * without an attempt of its own: the line drains in exactly one release
 * per client after the holder's release, and one attempt more for each
 * client promised the lock instead; were every
 * waiting writer woken by every release, as when all of them listened
 * on Redisson's channel, each would try and be refused, some HERD^2/2
 * scripts more. */
static void expect_line_drains_one_client_at_a_time(hilock_lock *held,
                                                    const char *name)
{
    hl_mutex_checker *mc = hl_mutex_checker_create(HERD, 0);
    hilock_client *c[HERD];
    hilock_lock *l[HERD];
    /* Static, as the threads may outlive a failed test. */
    static hl_acquirer w[HERD];
    char want[LINE_CAP], why[256];
    size_t len = 0;

    assert_non_null(mc);
    for (int i = 0; i < HERD; i++) {
        c[i] = waiting_client();
        l[i] = hl_new_write_lock(c[i], name);
        hl_acquirer_start_checked(&w[i], l[i], HILOCK_WAIT_FOREVER,
                                  HILOCK_LEASE_WATCHDOG, true, mc,
                                  (uint32_t)i);
        /* Refused and listening: only a release moves it now. */
        hl_expect_pending(c[i], l[i], 1);
        len += (size_t)snprintf(want + len, sizeof want - len, "%s%s",
                                i ? " " : "", hilock_client_id(c[i]));
    }
    expect_line(name, want);
    hl_expect_channels(c[0], l[0], 2);
    for (int i = 1; i < HERD; i++)
        assert_int_equal(hl_read_pending(c[i], l[i]).channels, 1);

    long long before = hl_scripts_run(fx.server);
    assert_status(hilock_lock_release(held), HILOCK_OK);
    for (int i = 0; i < HERD; i++) {
        hl_acquirer_join(&w[i], hl_widen(20000));
        assert_status(w[i].rc, HILOCK_OK);
        assert_status(w[i].release_rc, HILOCK_OK);
    }
    long long scripts = hl_scripts_run(fx.server) - before;
    print_message("    %d waiting writer clients drained with %lld "
                  "scripts\n", HERD, scripts);
    if (!hl_mutex_checker_verify(mc, false, why, sizeof why))
        fail_msg("%s", why);
    assert_int_equal(hl_mutex_checker_count(mc), HERD);
    /* The holder's release, then each client's release, and the attempt
     * of each client promised the lock rather than handed it: one whose
     * head's unsubscribe from Redisson's channel was still on its way
     * when the release looked there. */
    long long handed = 0;
    for (int i = 0; i < HERD; i++)
        handed += (long long)hl_handed_to(c[i]);
    print_message("    %lld of them handed straight to the client\n", handed);
    assert_true(handed > 0);
    if (scripts != 1 + HERD + (HERD - handed))
        fail_msg("%lld scripts, expected %lld", scripts,
                 1 + HERD + (HERD - handed));
    expect_no_line(name);
    for (int i = 0; i < HERD; i++) {
        hl_free_lock(l[i]);
        hl_free_client(c[i]);
    }
    hl_mutex_checker_free(mc);
}

/* The write release hands the lock to the writers' line one client at a
 * time (expect_line_drains_one_client_at_a_time). */
static void test_write_release_wakes_one_client(void **state)
{
    hilock_client *holder = waiting_client();
    hilock_lock *held = hl_new_write_lock(holder, "wherd");

    (void)state;
    assert_status(hilock_lock_try_acquire(held, 0, LEASE_MS), HILOCK_OK);
    expect_line_drains_one_client_at_a_time(held, "wherd");
    hl_free_lock(held);
    hl_free_client(holder);
}

/* The last read hold's release frees the lock as a write release does,
 * and hands it to the writers' line the same way: one client at a
 * time. */
static void test_read_release_wakes_one_writer_client(void **state)
{
    hilock_client *holder = waiting_client();
    hilock_lock *held = hl_new_read_lock(holder, "rherd");

    (void)state;
    assert_status(hilock_lock_try_acquire(held, 0, LEASE_MS), HILOCK_OK);
    expect_line_drains_one_client_at_a_time(held, "rherd");
    hl_free_lock(held);
    hl_free_client(holder);
}

/* ---- a writer client that died in line --------------------------------- */

#define DEAD_CLIENT "5d1e0b3a-0c4f-4e1b-8a2d-7f6e5d4c3b2a"
#define PLACE_MS 3000

/* A client whose process died stands first in the writers' line, its
 * place running out PLACE_MS after it last tried.  The write release
 * promises it the lock, which is kept for it only until that place runs
 * out: a newcomer's try is refused meanwhile, and says why, and the live
 * writer behind it gets the lock at its next attempt after that, which
 * comes at least every third of its waiter timeout (PLACE_MS too).  The
 * next release drops the dead client from the line and its place. */
static void test_dead_writer_client_passed_over(void **state)
{
    static const char name[] = "wdead";
    const hl_client_opts opts = { .waiter_ms = PLACE_MS };
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *c = hl_new_client(fx.server, &opts);
    hilock_client *d = hl_new_client(fx.server, NULL);
    hilock_lock *la = hl_new_write_lock(a, name);
    hilock_lock *lc = hl_new_write_lock(c, name);
    hilock_lock *ld = hl_new_write_lock(d, name);
    char line[KEY_CAP], places[KEY_CAP], promise[KEY_CAP], at[32];
    char got[LINE_CAP], want[LINE_CAP];
    static hl_acquirer w;

    (void)state;
    line_key(line, name);
    places_key(places, name);
    promise_key(promise, name);
    assert_status(hilock_lock_try_acquire(la, 0, LEASE_MS), HILOCK_OK);
    /* Read before the server's clock: the place runs out no sooner than
     * PLACE_MS after this on the local one. */
    int64_t placed_at = hl_now_ms();
    snprintf(at, sizeof at, "%lld",
             hl_raw_server_ms(fx.server) + PLACE_MS);
    assert_int_equal(hl_raw_int(fx.server, "RPUSH", line, DEAD_CLIENT,
                                (char *)NULL),
                     1);
    assert_int_equal(hl_raw_int(fx.server, "ZADD", places, at, DEAD_CLIENT,
                                (char *)NULL),
                     1);
    hl_acquirer_start(&w, lc, HILOCK_WAIT_FOREVER, HILOCK_LEASE_WATCHDOG,
                      true);
    hl_expect_pending(c, lc, 1);
    snprintf(want, sizeof want, "%s %s", DEAD_CLIENT, hilock_client_id(c));
    expect_line(name, want);

    int64_t released_at = hl_now_ms();
    assert_status(hilock_lock_release(la), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, name), 0);
    assert_true(hl_raw_bulk(fx.server, got, sizeof got, "GET", promise,
                            (char *)NULL));
    assert_string_equal(got, DEAD_CLIENT);
    assert_status(hilock_lock_try_acquire(ld, 0, LEASE_MS), HILOCK_EBUSY);
    if (strstr(hilock_last_error(), "promised") == NULL)
        fail_msg("refused with \"%s\"", hilock_last_error());

    hl_acquirer_join(&w, PLACE_MS + hl_widen(10000));
    assert_status(w.rc, HILOCK_OK);
    assert_status(w.release_rc, HILOCK_OK);
    print_message("    dead writer client in line: the next writer got the "
                  "lock %lld ms after the release\n",
                  (long long)(w.acquired_at - released_at));
    /* Both clocks tick alike; a few ms allow for one being slewed. */
    if (w.acquired_at < placed_at + PLACE_MS - 5)
        fail_msg("the writer got the lock %lld ms after the dead client's "
                 "place was set, before it ran out",
                 (long long)(w.acquired_at - placed_at));
    assert_false(hl_raw_bulk(fx.server, got, sizeof got, "ZSCORE", places,
                             DEAD_CLIENT, (char *)NULL));
    expect_no_line(name);
    hl_free_lock(ld);
    hl_free_lock(lc);
    hl_free_lock(la);
    hl_free_client(d);
    hl_free_client(c);
    hl_free_client(a);
}

/* ---- Java's releases wake our writers ---------------------------------- */

#define OUR_WRITERS 3

/* Behind a Java writer, only the client first in our writers' line
 * listens on Redisson's channel, however many wait.  The Java release
 * ("1") wakes it there, and the others follow through our line, each
 * woken by the release before it: all are through well before the third
 * of the waiter timeout at which they would try on their own. */
static void test_java_write_release_wakes_our_writers(void **state)
{
    static const char name[] = "jwrite";
    hilock_client *c[OUR_WRITERS];
    hilock_lock *l[OUR_WRITERS];
    static hl_acquirer w[OUR_WRITERS];

    (void)state;
    java_write_hold(name);
    for (int i = 0; i < OUR_WRITERS; i++) {
        c[i] = waiting_client();
        l[i] = hl_new_write_lock(c[i], name);
        hl_acquirer_start(&w[i], l[i], HILOCK_WAIT_FOREVER,
                          HILOCK_LEASE_WATCHDOG, true);
        hl_expect_pending(c[i], l[i], 1);
    }
    hl_expect_channels(c[0], l[0], 2);
    for (int i = 1; i < OUR_WRITERS; i++)
        assert_int_equal(hl_read_pending(c[i], l[i]).channels, 1);
    expect_redisson_listeners(name, 1);

    int64_t released_at = hl_now_ms();
    java_write_release(name);
    for (int i = 0; i < OUR_WRITERS; i++) {
        hl_acquirer_join(&w[i], hl_widen(10000));
        assert_status(w[i].rc, HILOCK_OK);
        assert_status(w[i].release_rc, HILOCK_OK);
    }
    int64_t took = hl_now_ms() - released_at;
    print_message("    Java write release: %d writers through in %lld ms\n",
                  OUR_WRITERS, (long long)took);
    if (took >= before_own_retry_ms())
        fail_msg("the writers took %lld ms: they tried on their own, no "
                 "message woke them", (long long)took);
    expect_no_line(name);
    for (int i = 0; i < OUR_WRITERS; i++) {
        hl_free_lock(l[i]);
        hl_free_client(c[i]);
    }
}

/* Java's last read hold lets go, saying "0" on Redisson's channel: our
 * writer, first in line and listening there, is woken by it. */
static void test_java_read_release_wakes_our_writer(void **state)
{
    static const char name[] = "jread";
    hilock_client *c = waiting_client();
    hilock_lock *l = hl_new_write_lock(c, name);
    char timeout_key[KEY_CAP];
    static hl_acquirer w;

    (void)state;
    java_read_hold(name, timeout_key);
    hl_acquirer_start(&w, l, HILOCK_WAIT_FOREVER, HILOCK_LEASE_WATCHDOG,
                      true);
    hl_expect_pending(c, l, 1);
    hl_expect_channels(c, l, 2);
    expect_redisson_listeners(name, 1);

    int64_t released_at = hl_now_ms();
    java_read_release(name, timeout_key);
    hl_acquirer_join(&w, hl_widen(10000));
    assert_status(w.rc, HILOCK_OK);
    assert_status(w.release_rc, HILOCK_OK);
    int64_t took = w.acquired_at - released_at;
    if (took >= before_own_retry_ms())
        fail_msg("the writer got the lock %lld ms after the Java release: "
                 "it tried on its own, no message woke it",
                 (long long)took);
    expect_no_line(name);
    hl_free_lock(l);
    hl_free_client(c);
}

/* ---- our releases wake Java's waiters ---------------------------------- */

/* The next message on Redisson's channel is msg. */
static void expect_message(hl_plain_sub *java, const char *msg,
                           const char *what)
{
    char got[32];

    if (!hl_plain_sub_next(java, got, sizeof got, hl_widen(5000)))
        fail_msg("%s said nothing on Redisson's channel", what);
    assert_string_equal(got, msg);
}

/* A Java waiter listens on Redisson's channel (a plain subscriber stands
 * in for it) beside our writer client first in line there.  Our release
 * that frees the lock must reach it even though a line of our writers
 * exists, or it would sleep out the lock's lease; so must the waiting
 * writer's own release after it, the line empty then.  The writer waits
 * for a fixed lease, so it records no wish and the release promises:
 * a release that hands the lock over says nothing there, as the lock is
 * held again (test_rwlock_handoff). */
static void test_our_release_wakes_a_java_waiter(void **state)
{
    static const char name[] = "jwait";
    hilock_client *h = waiting_client();
    hilock_client *o = waiting_client();
    hilock_lock *lh = hl_new_write_lock(h, name);
    hilock_lock *lo = hl_new_write_lock(o, name);
    char channel[KEY_CAP];
    static hl_acquirer w;

    (void)state;
    redisson_channel(channel, name);
    hl_plain_sub *java = hl_plain_sub_open(fx.server, channel);
    assert_status(hilock_lock_try_acquire(lh, 0, LEASE_MS), HILOCK_OK);
    hl_acquirer_start(&w, lo, HILOCK_WAIT_FOREVER, LEASE_MS, true);
    hl_expect_pending(o, lo, 1);
    hl_expect_channels(o, lo, 2);
    expect_redisson_listeners(name, 2);

    assert_status(hilock_lock_release(lh), HILOCK_OK);
    expect_message(java, "1", "the holder's release");
    hl_acquirer_join(&w, hl_widen(10000));
    assert_status(w.rc, HILOCK_OK);
    assert_status(w.release_rc, HILOCK_OK);
    expect_message(java, "1", "the waiting writer's release");
    hl_plain_sub_close(java);
    hl_free_lock(lo);
    hl_free_lock(lh);
    hl_free_client(o);
    hl_free_client(h);
}

/* The same when the releasing client is itself first in line, another of
 * its writers waiting: it listens on Redisson's channel then, and the
 * Java waiter beside it must hear the release all the same. */
static void test_first_client_release_wakes_a_java_waiter(void **state)
{
    static const char name[] = "jwait2";
    hilock_client *h = waiting_client();
    hilock_lock *l = hl_new_write_lock(h, name);
    static hl_acquire_rec holder, waiter;
    static hl_value_rec released;
    char channel[KEY_CAP];

    (void)state;
    redisson_channel(channel, name);
    hl_plain_sub *java = hl_plain_sub_open(fx.server, channel);
    hl_acquire_rec_init(&holder, h);
    assert_status(hilock_lock_acquire_async(l, OWNER_A, 0, LEASE_MS, 0,
                                            hl_record_acquire, &holder,
                                            &holder.id),
                  HILOCK_OK);
    assert_status(hl_expect_acquire(&holder), HILOCK_OK);
    hl_acquire_rec_init(&waiter, h);
    assert_status(hilock_lock_acquire_async(l, OWNER_B, HILOCK_WAIT_FOREVER,
                                            LEASE_MS, 0, hl_record_acquire,
                                            &waiter, &waiter.id),
                  HILOCK_OK);
    hl_expect_pending(h, l, 1);
    expect_line(name, hilock_client_id(h));
    hl_expect_channels(h, l, 2);
    expect_redisson_listeners(name, 2);

    hl_value_rec_init(&released);
    assert_status(hilock_lock_release_async(l, OWNER_A, hl_record_value,
                                            &released),
                  HILOCK_OK);
    hl_expect_value(&released, HILOCK_OK);
    expect_message(java, "1", "the first client's release");
    assert_status(hl_expect_acquire(&waiter), HILOCK_OK);
    hl_value_rec_init(&released);
    assert_status(hilock_lock_release_async(l, OWNER_B, hl_record_value,
                                            &released),
                  HILOCK_OK);
    hl_expect_value(&released, HILOCK_OK);
    expect_no_line(name);
    hl_plain_sub_close(java);
    hl_free_lock(l);
    hl_free_client(h);
}

/* ---- the next writer client takes over listening ----------------------- */

/* The first writer client in line gives up behind a Java writer: the
 * next is told it is first now ("h" on its own channel), listens on
 * Redisson's channel in its place, and wakes at the Java release, well
 * before it would try on its own. */
static void test_next_writer_hears_java(void **state)
{
    static const char name[] = "jnext";
    hilock_client *a = waiting_client();
    hilock_client *b = waiting_client();
    hilock_lock *la = hl_new_write_lock(a, name);
    hilock_lock *lb = hl_new_write_lock(b, name);
    static hl_acquire_rec first;
    char want[LINE_CAP];
    static hl_acquirer wb;

    (void)state;
    java_write_hold(name);
    hl_acquire_rec_init(&first, a);
    assert_status(hilock_lock_acquire_async(la, OWNER_A, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &first,
                                            &first.id),
                  HILOCK_OK);
    hl_expect_pending(a, la, 1);
    hl_expect_channels(a, la, 2);
    hl_acquirer_start(&wb, lb, HILOCK_WAIT_FOREVER, HILOCK_LEASE_WATCHDOG,
                      true);
    hl_expect_pending(b, lb, 1);
    assert_int_equal(hl_read_pending(b, lb).channels, 1);
    snprintf(want, sizeof want, "%s %s", hilock_client_id(a),
             hilock_client_id(b));
    expect_line(name, want);

    assert_status(hilock_lock_cancel(la, first.id), HILOCK_OK);
    assert_status(hl_expect_acquire(&first), HILOCK_ECANCELED);
    expect_line(name, hilock_client_id(b));
    /* b listens on Redisson's channel now, a no longer. */
    hl_expect_channels(b, lb, 2);
    expect_redisson_listeners(name, 1);

    int64_t released_at = hl_now_ms();
    java_write_release(name);
    hl_acquirer_join(&wb, hl_widen(10000));
    assert_status(wb.rc, HILOCK_OK);
    assert_status(wb.release_rc, HILOCK_OK);
    int64_t took = wb.acquired_at - released_at;
    if (took >= before_own_retry_ms())
        fail_msg("the writer got the lock %lld ms after the Java release: "
                 "it tried on its own, no message woke it",
                 (long long)took);
    expect_no_line(name);
    hl_free_lock(lb);
    hl_free_lock(la);
    hl_free_client(b);
    hl_free_client(a);
}

/* ---- readers wait for the writers' line -------------------------------- */

/* A writer waits in line behind a reader: a new reader of a third client
 * is refused, though only readers hold the lock, so that a stream of
 * readers cannot keep the writer out; a waiting one keeps waiting while
 * the writer holds.  Once the writer has let go, the line being empty,
 * the release's message on Redisson's channel lets the reader in, well
 * before it would try on its own. */
static void test_readers_wait_for_the_writers_line(void **state)
{
    static const char name[] = "rline";
    hilock_client *a = waiting_client();
    hilock_client *b = waiting_client();
    hilock_client *c = waiting_client();
    hilock_lock *ra = hl_new_read_lock(a, name);
    hilock_lock *wb = hl_new_write_lock(b, name);
    hilock_lock *rc = hl_new_read_lock(c, name);
    static hl_acquire_rec writer;
    static hl_value_rec released;
    static hl_acquirer reader;

    (void)state;
    assert_status(hilock_lock_try_acquire(ra, 0, LEASE_MS), HILOCK_OK);
    hl_acquire_rec_init(&writer, b);
    assert_status(hilock_lock_acquire_async(wb, OWNER_B, HILOCK_WAIT_FOREVER,
                                            LEASE_MS, 0, hl_record_acquire,
                                            &writer, &writer.id),
                  HILOCK_OK);
    hl_expect_pending(b, wb, 1);
    assert_status(hilock_lock_try_acquire(rc, 0, LEASE_MS), HILOCK_EBUSY);
    hl_acquirer_start(&reader, rc, HILOCK_WAIT_FOREVER,
                      HILOCK_LEASE_WATCHDOG, true);
    hl_expect_pending(c, rc, 1);

    /* The read hold goes: the lock is the writer's, not the reader's. */
    assert_status(hilock_lock_release(ra), HILOCK_OK);
    assert_status(hl_expect_acquire(&writer), HILOCK_OK);
    hl_expect_pending(c, rc, 1);
    assert_false(atomic_load(&reader.done));

    int64_t released_at = hl_now_ms();
    hl_value_rec_init(&released);
    assert_status(hilock_lock_release_async(wb, OWNER_B, hl_record_value,
                                            &released),
                  HILOCK_OK);
    hl_expect_value(&released, HILOCK_OK);
    hl_acquirer_join(&reader, hl_widen(10000));
    assert_status(reader.rc, HILOCK_OK);
    assert_status(reader.release_rc, HILOCK_OK);
    int64_t took = reader.acquired_at - released_at;
    if (took >= before_own_retry_ms())
        fail_msg("the reader got the lock %lld ms after the writer let go: "
                 "it tried on its own, no message woke it",
                 (long long)took);
    expect_no_line(name);
    hl_free_lock(rc);
    hl_free_lock(wb);
    hl_free_lock(ra);
    hl_free_client(c);
    hl_free_client(b);
    hl_free_client(a);
}

/* The only writer in line gives up while a reader holds the lock: the
 * line empty, a waiting reader of another client is let in at once by
 * the message the writer's leaving sends on Redisson's channel. */
static void test_readers_let_in_when_the_last_writer_leaves(void **state)
{
    static const char name[] = "rleave";
    hilock_client *a = waiting_client();
    hilock_client *b = waiting_client();
    hilock_client *c = waiting_client();
    hilock_lock *ra = hl_new_read_lock(a, name);
    hilock_lock *wb = hl_new_write_lock(b, name);
    hilock_lock *rc = hl_new_read_lock(c, name);
    static hl_acquire_rec writer;
    static hl_acquirer reader;

    (void)state;
    assert_status(hilock_lock_try_acquire(ra, 0, LEASE_MS), HILOCK_OK);
    hl_acquire_rec_init(&writer, b);
    assert_status(hilock_lock_acquire_async(wb, OWNER_B, HILOCK_WAIT_FOREVER,
                                            LEASE_MS, 0, hl_record_acquire,
                                            &writer, &writer.id),
                  HILOCK_OK);
    hl_expect_pending(b, wb, 1);
    hl_acquirer_start(&reader, rc, HILOCK_WAIT_FOREVER,
                      HILOCK_LEASE_WATCHDOG, true);
    hl_expect_pending(c, rc, 1);

    int64_t left_at = hl_now_ms();
    assert_status(hilock_lock_cancel(wb, writer.id), HILOCK_OK);
    assert_status(hl_expect_acquire(&writer), HILOCK_ECANCELED);
    hl_acquirer_join(&reader, hl_widen(10000));
    assert_status(reader.rc, HILOCK_OK);
    assert_status(reader.release_rc, HILOCK_OK);
    int64_t took = reader.acquired_at - left_at;
    if (took >= before_own_retry_ms())
        fail_msg("the reader got the lock %lld ms after the writer left: "
                 "it tried on its own, no message woke it",
                 (long long)took);
    expect_no_line(name);
    assert_status(hilock_lock_release(ra), HILOCK_OK);
    hl_free_lock(rc);
    hl_free_lock(wb);
    hl_free_lock(ra);
    hl_free_client(c);
    hl_free_client(b);
    hl_free_client(a);
}

/* ---- the first client leaves a free lock ------------------------------- */

/* The first writer client in line leaves while the lock is free and
 * promised to nobody, as when a Java writer's release, which only the
 * first client hears, comes just before that client's last writer gives
 * up.  The next client is first now and the lock is free: it must be
 * woken and get the lock well before it would try on its own.  Here the
 * Java hold's key goes without a message, so that the first client
 * cannot take the lock before it leaves; the server then holds what the
 * race leaves behind. */
static void test_first_leaving_a_free_lock_wakes_the_next_writer(
    void **state)
{
    static const char name[] = "jfree";
    hilock_client *a = waiting_client();
    hilock_client *b = waiting_client();
    hilock_lock *la = hl_new_write_lock(a, name);
    hilock_lock *lb = hl_new_write_lock(b, name);
    static hl_acquire_rec first;
    static hl_acquirer wb;

    (void)state;
    java_write_hold(name);
    hl_acquire_rec_init(&first, a);
    assert_status(hilock_lock_acquire_async(la, OWNER_A, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &first,
                                            &first.id),
                  HILOCK_OK);
    hl_expect_pending(a, la, 1);
    hl_expect_channels(a, la, 2);
    hl_acquirer_start(&wb, lb, HILOCK_WAIT_FOREVER, HILOCK_LEASE_WATCHDOG,
                      true);
    hl_expect_pending(b, lb, 1);

    assert_int_equal(hl_raw_int(fx.server, "DEL", name, (char *)NULL), 1);
    int64_t left_at = hl_now_ms();
    assert_status(hilock_lock_cancel(la, first.id), HILOCK_OK);
    assert_status(hl_expect_acquire(&first), HILOCK_ECANCELED);
    if (!hl_wait_flag(&wb.done, hl_widen(10000))) {
        int channels = hl_read_pending(b, lb).channels;
        pthread_detach(wb.thread);
        fail_msg("the next writer client, first in line now and the lock "
                 "free, still waits %lld ms after the first left: it was "
                 "not woken, and listens on %d channel(s)",
                 (long long)(hl_now_ms() - left_at), channels);
    }
    hl_acquirer_join(&wb, 0);
    assert_status(wb.rc, HILOCK_OK);
    assert_status(wb.release_rc, HILOCK_OK);
    expect_no_line(name);
    hl_free_lock(lb);
    hl_free_lock(la);
    hl_free_client(b);
    hl_free_client(a);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_write_release_wakes_one_client),
        T(test_read_release_wakes_one_writer_client),
        T(test_dead_writer_client_passed_over),
        T(test_java_write_release_wakes_our_writers),
        T(test_java_read_release_wakes_our_writer),
        T(test_our_release_wakes_a_java_waiter),
        T(test_first_client_release_wakes_a_java_waiter),
        T(test_next_writer_hears_java),
        T(test_readers_wait_for_the_writers_line),
        T(test_readers_let_in_when_the_last_writer_leaves),
        T(test_first_leaving_a_free_lock_wakes_the_next_writer),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
