/* The client on a Redis Cluster whose nodes speak TLS only (no plain
 * port; TLS on the cluster bus and for replication too): a rediss:// URL
 * finds the cluster, takes each master's tls-port from CLUSTER SHARDS,
 * and locks on every master over TLS.  Since the nodes have no plain port,
 * every answer is proof of a TLS connection. */
/* ctest-timeout: 180 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/runtime/cluster.h"
#include "core/transport/keyslot.h"
#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/options.h"
#include "hilock/reply.h"
#include "support/cluster_util.h"
#include "support/fixture.h"
#include "support/loop_call.h"

static hl_redis_cluster *cluster;
static char reply[65536];

static int setup(void **state)
{
    (void)state;
    cluster = hl_fixture_cluster_tls();
    return cluster ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_cluster_stop(cluster);
    return 0;
}

/* Percent-encode s for a URL query value. */
static void encode(char *out, size_t cap, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || strchr("-._~", ch);
        assert_true(n + 4 < cap);
        if (plain) {
            out[n++] = (char)ch;
        } else {
            out[n++] = '%';
            out[n++] = hex[ch >> 4];
            out[n++] = hex[ch & 15];
        }
    }
    out[n] = '\0';
}

/* base ("rediss://host:port[,...]") with the CA and the client's
 * certificate. */
static hilock_client *tls_client(const char *base)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    char ca[1024], cert[1024], key[1024], url[4096];
    encode(ca, sizeof ca, t->ca_cert);
    encode(cert, sizeof cert, t->client_cert);
    encode(key, sizeof key, t->client_key);
    int n = snprintf(url, sizeof url, "%s?ca_file=%s&cert_file=%s&key_file=%s",
                     base, ca, cert, key);
    assert_true(n > 0 && (size_t)n < sizeof url);
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    if (hl_under_valgrind()) {
        /* A TLS handshake under valgrind can outlast the defaults. */
        assert_int_equal(hilock_options_set_connect_timeout_ms(o, 20000),
                         HILOCK_OK);
        assert_int_equal(hilock_options_set_command_timeout_ms(o, 20000),
                         HILOCK_OK);
    }
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    hilock_client *c = NULL;
    int rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    if (rc != HILOCK_OK)
        fail_msg("client on %s: %s: %s", base, hilock_errname(rc),
                 hilock_last_error());
    return c;
}

static hl_redis_server *master(int i) { return hl_fx_master(cluster, i); }

static void key_on(hl_redis_server *m, const char *prefix, char *out,
                   size_t cap)
{
    hl_fx_key_on(cluster, m, prefix, out, cap);
}

static void expect_set(hilock_client *c, const char *key, const char *value)
{
    const char *argv[] = {"SET", key, value};
    hilock_reply *r = NULL;
    int rc = hilock_client_command(c, 3, argv, NULL, &r);
    if (rc != HILOCK_OK)
        fail_msg("SET %s: %s: %s", key, hilock_errname(rc),
                 hilock_last_error());
    assert_int_equal(r->type, HILOCK_REPLY_STATUS);
    hilock_reply_free(r);
}

/* What s itself holds under key (GET). */
static void expect_on_node(hl_redis_server *s, const char *key,
                           const char *value)
{
    char want[64];
    snprintf(want, sizeof want, "$%zu\r\n%s\r\n", strlen(value), value);
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "GET", key,
                                         (char *)NULL), '$');
    assert_string_equal(reply, want);
}

typedef struct probe {
    unsigned slot;
    const char *host;
    int port;
    bool cluster;
    int nodes;
    unsigned redirects;
    unsigned reads; /* map reads completed */
} probe;

static void read_map(hilock_client *c, void *arg)
{
    probe *p = arg;
    p->cluster = c->cluster != NULL;
    if (c->cluster) {
        p->nodes = hl_cluster_node_count(c->cluster);
        p->redirects = hl_cluster_redirects(c->cluster);
        p->reads = hl_cluster_refreshes(c->cluster);
    }
}

static void point_slot(hilock_client *c, void *arg)
{
    probe *p = arg;
    assert_int_equal(hl_cluster_set_slot(c->cluster, p->slot, p->host,
                                         p->port),
                     0);
}

static bool replicas_linked(void *arg)
{
    (void)arg;
    for (size_t i = 3; i < hl_redis_cluster_size(cluster); i++) {
        hl_redis_server *n = hl_redis_cluster_node(cluster, i);
        if (hl_redis_server_cmd(n, reply, sizeof reply, "INFO", "replication",
                                (char *)NULL) != '$' ||
            strstr(reply, "role:slave") == NULL ||
            strstr(reply, "master_link_status:up") == NULL)
            return false;
    }
    return true;
}

/* The fixture's replicas replicate over TLS (the nodes have no plain
 * port to replicate on). */
static void test_tls_cluster_replicas_linked(void **state)
{
    (void)state;
    assert_true(hl_wait_until(replicas_linked, NULL, hl_widen(15000)));
}

/* From one node's rediss:// URL, a replica's included: the cluster is
 * found, each master is reached over TLS, and a lock is taken on each. */
static void test_tls_cluster_every_master(void **state)
{
    (void)state;
    char base[64];
    snprintf(base, sizeof base, "rediss://127.0.0.1:%d",
             hl_redis_server_port(hl_redis_cluster_node(cluster, 4)));
    hilock_client *c = tls_client(base);
    assert_int_equal(hilock_client_is_tls(c), 1);
    probe p = {.slot = 0};
    hl_run_on_loop(c, read_map, &p);
    assert_true(p.cluster);
    assert_int_equal(p.nodes, 3);
    for (int i = 0; i < 3; i++) {
        char key[32], name[32];
        key_on(master(i), "tls", key, sizeof key);
        expect_set(c, key, "over-tls");
        expect_on_node(master(i), key, "over-tls");
        key_on(master(i), "tls-lock", name, sizeof name);
        hilock_lock *l = NULL;
        assert_int_equal(hilock_lock_create(&l, c, name),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                         HILOCK_OK);
        assert_int_equal(hl_redis_server_cmd(master(i), reply, sizeof reply,
                                             "EXISTS", name, (char *)NULL),
                         ':');
        assert_string_equal(reply, ":1\r\n");
        assert_int_equal(hilock_lock_release(l), HILOCK_OK);
        assert_int_equal(hl_redis_server_cmd(master(i), reply, sizeof reply,
                                             "EXISTS", name, (char *)NULL),
                         ':');
        assert_string_equal(reply, ":0\r\n");
        hilock_lock_destroy(l);
    }
    /* No redirection: the map had every master's TLS port. */
    hl_run_on_loop(c, read_map, &p);
    assert_int_equal(p.redirects, 0);
    hilock_client_destroy(c);
}

/* A map that sends a slot to the wrong master: its MOVED names a TLS
 * port, and the client follows it over TLS.  A map read that completes
 * between pointing the slot away and the SET (the periodic one, 5 s
 * apart, which a slow run such as valgrind's can reach) puts the slot
 * right first: that SET needs no redirection and tells nothing, so it
 * goes again.  With no map read between, it must be redirected. */
static void test_tls_cluster_follows_moved(void **state)
{
    (void)state;
    hilock_client *c = tls_client(hl_redis_cluster_url(cluster));
    char key[32];
    key_on(master(1), "tls-moved", key, sizeof key);
    probe p = {.slot = hl_keyslot(key, strlen(key)),
               .host = "127.0.0.1",
               .port = hl_redis_server_port(master(2))};
    bool redirected = false;
    for (int tries = 0; tries < 5 && !redirected; tries++) {
        hl_run_on_loop(c, point_slot, &p);
        hl_run_on_loop(c, read_map, &p);
        unsigned before = p.redirects, reads = p.reads;
        expect_set(c, key, "moved");
        expect_on_node(master(1), key, "moved");
        hl_run_on_loop(c, read_map, &p);
        redirected = p.redirects == before + 1;
        if (!redirected && p.reads == reads)
            fail_msg("the SET reached its master with no redirection and no "
                     "map read since its slot was pointed away");
    }
    assert_true(redirected);
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_cluster_replicas_linked),
        cmocka_unit_test(test_tls_cluster_every_master),
        cmocka_unit_test(test_tls_cluster_follows_moved),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
