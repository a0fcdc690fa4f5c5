/* What a hostile cluster node or sentinel can do to a client: name a port
 * beyond 16 bits, a host with a NUL byte in it, a master that answers
 * ROLE with anything but a master's reply, a reply nested a thousand
 * deep.  Each is refused with an error that names it, never followed,
 * and a sentinel that keeps answering badly is asked at a pace that
 * slows down.  The server is the fake of support/hostile_server.h; it
 * plays the cluster node, or the sentinel and the master it names. */
/* ctest-timeout: 240 */
#include <dirent.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/runtime/cluster.h"
#include "core/runtime/sentinel.h"
#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/hostile_server.h"
#include "support/lock_helpers.h"
#include "support/loop_call.h"

/* 2^32: a port of the fake plus this is the fake's port again once cast
 * to 32 bits, so a client that casts before it checks goes back to the
 * fake and seems to work. */
#define WRAP 4294967296LL

/* Bytes of an answer, which may hold NUL bytes. */
typedef struct bytes {
    char text[4096];
    size_t len;
} bytes;

static void bytes_set(bytes *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void bytes_set(bytes *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->text, sizeof b->text, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof b->text);
    b->len = (size_t)n;
}

/* The answers of one test.  Set once the fake listens (they hold its
 * port), then armed before the client is made: the fake's connection
 * threads read them only once armed, which orders the writes before the
 * reads.  Only the sentinel's answer changes later. */
typedef struct fake {
    hl_hostile *server;
    int port;
    atomic_bool armed;
    bytes topology;  /* answers CLUSTER SLOTS, or SHARDS with shards */
    bool shards;
    bytes get;       /* answers GET when set */
    bytes sentinel[2]; /* answers SENTINEL: [answer] */
    atomic_int answer;
    bytes role;      /* answers ROLE; a master's reply when unset */
    bytes pushed;    /* sent after confirming a SUBSCRIBE, when set */
} fake;

static bool send_bytes(hl_hostile_conn *conn, const bytes *b)
{
    hl_hostile_send(conn, b->text, b->len);
    return true;
}

static bool play(hl_hostile_conn *conn, const hl_hostile_req *req,
                 void *data)
{
    fake *f = data;
    if (!atomic_load(&f->armed))
        return false;
    bool cluster = f->topology.len > 0;
    if (cluster && hl_hostile_is(req, "INFO"))
        return hl_hostile_sendf(conn, "$28\r\n# Cluster\r\ncluster_enabled:1"
                                      "\r\n"),
               true;
    if (cluster && hl_hostile_is(req, "CLUSTER") && req->argc > 1) {
        bool shards = strcasecmp(req->argv[1], "SHARDS") == 0;
        if (shards != f->shards)
            return hl_hostile_sendf(conn, "-ERR unknown subcommand\r\n"),
                   true;
        return send_bytes(conn, &f->topology);
    }
    if (f->get.len > 0 && hl_hostile_is(req, "GET"))
        return send_bytes(conn, &f->get);
    if (f->pushed.len > 0 && hl_hostile_is(req, "SUBSCRIBE") &&
        req->argc == 2) {
        hl_hostile_sendf(conn, "*3\r\n$9\r\nsubscribe\r\n$%zu\r\n%s\r\n:1\r\n",
                         req->lens[1], req->argv[1]);
        return send_bytes(conn, &f->pushed);
    }
    if (hl_hostile_is(req, "SENTINEL"))
        return send_bytes(conn, &f->sentinel[atomic_load(&f->answer)]);
    if (hl_hostile_is(req, "ROLE")) {
        if (f->role.len > 0)
            return send_bytes(conn, &f->role);
        return hl_hostile_sendf(conn, "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"),
               true;
    }
    return false;
}

static void fake_start(fake *f)
{
    memset(f, 0, sizeof *f);
    atomic_init(&f->answer, 0);
    atomic_init(&f->armed, false);
    f->server = hl_hostile_start(play, f);
    f->port = hl_hostile_port(f->server);
}

static void fake_stop(fake *f) { hl_hostile_stop(f->server); }

static hilock_options *options_for(const char *url)
{
    hilock_options *o = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    return o;
}

static int connect_url(hilock_client **c, const char *url)
{
    hilock_options *o = options_for(url);
    int rc = hilock_client_create(c, o);
    hilock_options_free(o);
    return rc;
}

static hilock_client *cluster_client(fake *f)
{
    atomic_store(&f->armed, true);
    char url[96];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?connections=1",
             f->port);
    hilock_client *c = NULL;
    assert_status(connect_url(&c, url), HILOCK_OK);
    return c;
}

static void expect_detail(const char *detail, const char *part)
{
    if (strstr(detail, part) == NULL)
        fail_msg("'%s' does not say '%s'", detail, part);
    printf("# %s\n", detail);
}

/* ---- a cluster node ------------------------------------------------------ */

typedef struct map_view {
    bool cluster;
    int nodes;
    unsigned reads;
    unsigned redirects;
    char failure[256];
} map_view;

static void read_view(hilock_client *c, void *arg)
{
    map_view *v = arg;
    v->cluster = c->cluster != NULL;
    if (!v->cluster)
        return;
    v->nodes = hl_cluster_node_count(c->cluster);
    v->reads = hl_cluster_refreshes(c->cluster);
    v->redirects = hl_cluster_redirects(c->cluster);
    snprintf(v->failure, sizeof v->failure, "%s",
             hl_cluster_last_failure(c->cluster));
}

static map_view view_of(hilock_client *c)
{
    map_view v = {0};
    hl_run_on_loop(c, read_view, &v);
    assert_true(v.cluster);
    return v;
}

/* The node's topology names a master at port + 2^32: the read is
 * refused, and no connection goes to the port the cast would make. */
static void expect_topology_refused(fake *f, const char *part)
{
    hilock_client *c = cluster_client(f);
    map_view v = view_of(c);
    if (v.nodes != 0)
        fail_msg("the client keeps %d node(s) from a refused topology",
                 v.nodes);
    assert_int_equal(v.reads, 0);
    expect_detail(v.failure, part);
    hilock_client_destroy(c);
}

static void test_slots_port_beyond_16_bits(void **state)
{
    (void)state;
    fake f;
    fake_start(&f);
    bytes_set(&f.topology,
              "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%lld\r\n",
              f.port + WRAP);
    char part[64];
    snprintf(part, sizeof part, "port %lld", f.port + WRAP);
    expect_topology_refused(&f, part);
    fake_stop(&f);
}

/* One shard of CLUSTER SHARDS whose master has the given ip field bytes
 * and port. */
static void shards_answer(fake *f, const char *ip, size_t ip_len,
                          long long port)
{
    f->shards = true;
    char head[512];
    int n = snprintf(head, sizeof head,
                     "*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n"
                     "$5\r\nnodes\r\n*1\r\n*8\r\n$4\r\nport\r\n:%lld\r\n"
                     "$4\r\nrole\r\n$6\r\nmaster\r\n$6\r\nhealth\r\n"
                     "$6\r\nonline\r\n$2\r\nip\r\n$%zu\r\n",
                     port, ip_len);
    assert_true(n > 0 && (size_t)n + ip_len + 2 < sizeof f->topology.text);
    memcpy(f->topology.text, head, (size_t)n);
    memcpy(f->topology.text + n, ip, ip_len);
    memcpy(f->topology.text + n + ip_len, "\r\n", 2);
    f->topology.len = (size_t)n + ip_len + 2;
}

static void test_shards_port_beyond_16_bits(void **state)
{
    (void)state;
    fake f;
    fake_start(&f);
    shards_answer(&f, "127.0.0.1", 9, f.port + WRAP);
    char part[64];
    snprintf(part, sizeof part, "port %lld", f.port + WRAP);
    expect_topology_refused(&f, part);
    fake_stop(&f);
}

/* A redirection to port + 2^32 ends the request with HILOCK_EPROTO and
 * a detail naming the port; it is not followed, not even once. */
static void expect_redirect_refused(const char *kind)
{
    fake f;
    fake_start(&f);
    bytes_set(&f.topology,
              "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
              f.port);
    bytes_set(&f.get, "-%s 0 127.0.0.1:%lld\r\n", kind, f.port + WRAP);
    hilock_client *c = cluster_client(&f);
    const char *argv[] = {"GET", "k"};
    hilock_reply *r = NULL;
    int rc = hilock_client_command(c, 2, argv, NULL, &r);
    char detail[256];
    snprintf(detail, sizeof detail, "%s", hilock_last_error());
    hilock_reply_free(r);
    if (rc != HILOCK_EPROTO)
        fail_msg("%s to a port beyond 16 bits: %s (%s), %ld GET(s) sent",
                 kind, hilock_errname(rc), detail,
                 hl_hostile_count(f.server, "GET"));
    char part[64];
    snprintf(part, sizeof part, "port %lld", f.port + WRAP);
    expect_detail(detail, part);
    assert_int_equal(hl_hostile_count(f.server, "GET"), 1);
    map_view v = view_of(c);
    assert_int_equal(v.redirects, 0);
    assert_int_equal(v.nodes, 1);
    hilock_client_destroy(c);
    fake_stop(&f);
}

static void test_moved_port_beyond_16_bits(void **state)
{
    (void)state;
    expect_redirect_refused("MOVED");
}

static void test_ask_port_beyond_16_bits(void **state)
{
    (void)state;
    expect_redirect_refused("ASK");
}

/* Descriptors open in this process: the fake's ends of its connections
 * count too, so each connection the client makes shows twice. */
static int open_descriptors(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

typedef struct read_wait {
    fake *f;
    long want;
} read_wait;

static bool topology_asked(void *arg)
{
    read_wait *w = arg;
    return hl_hostile_count(w->f->server, "CLUSTER") >= w->want;
}

static void refresh_now(hilock_client *c, void *arg)
{
    (void)arg;
    hl_cluster_refresh_soon(c->cluster);
}

/* A host with a NUL in it was kept cut at the NUL, never found again by
 * its whole name, and added anew, with a connection, at every read.
 * Now each read is refused: no node, and no descriptor more after many
 * reads than after the first. */
static void expect_nul_host_refused(fake *f)
{
    hilock_client *c = cluster_client(f);
    int before = open_descriptors();
    read_wait w = {f, hl_hostile_count(f->server, "CLUSTER")};
    for (int i = 0; i < 4; i++) {
        w.want++;
        hl_run_on_loop(c, refresh_now, NULL);
        assert_true(hl_wait_until(topology_asked, &w, hl_widen(10000)));
    }
    hl_run_on_loop(c, NULL, NULL);
    map_view v = view_of(c);
    int after = open_descriptors();
    if (v.nodes != 0 || after > before)
        fail_msg("after %ld topology reads: %d node(s), descriptors %d -> "
                 "%d",
                 w.want, v.nodes, before, after);
    expect_detail(v.failure, "NUL");
    hilock_client_destroy(c);
}

static void test_slots_host_with_nul(void **state)
{
    (void)state;
    fake f;
    fake_start(&f);
    bytes_set(&f.topology,
              "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$11\r\n127.0.0.1%cx\r\n"
              ":%d\r\n",
              0, f.port);
    expect_nul_host_refused(&f);
    fake_stop(&f);
}

static void test_shards_host_with_nul(void **state)
{
    (void)state;
    fake f;
    fake_start(&f);
    shards_answer(&f, "127.0.0.1\0x", 11, f.port);
    expect_nul_host_refused(&f);
    fake_stop(&f);
}

/* CLUSTER SHARDS must name a host: an empty ip (with no endpoint) is
 * refused, not taken for the seed's address. */
static void test_shards_empty_host(void **state)
{
    (void)state;
    fake f;
    fake_start(&f);
    shards_answer(&f, "", 0, f.port);
    expect_topology_refused(&f, "no host");
    fake_stop(&f);
}

/* ---- a sentinel and the master it names ---------------------------------- */

/* The fake names itself as the master, as a sentinel would. */
static void sentinel_names_itself(fake *f, int which)
{
    char port[16];
    int n = snprintf(port, sizeof port, "%d", f->port);
    bytes_set(&f->sentinel[which], "*2\r\n$9\r\n127.0.0.1\r\n$%d\r\n%s\r\n",
              n, port);
}

static int sentinel_client(fake *f, hilock_client **c)
{
    atomic_store(&f->armed, true);
    char url[96];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#mymaster",
             f->port);
    return connect_url(c, url);
}

/* The client is refused with status, and a detail that says part; case
 * names what the fake answered, for the message. */
static void expect_refused(fake *f, const char *case_, int status,
                           const char *part)
{
    hilock_client *c = NULL;
    int rc = sentinel_client(f, &c);
    if (rc != status) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", hilock_last_error());
        if (c != NULL)
            hilock_client_destroy(c);
        fail_msg("%s: client %s (%s), expected %s", case_,
                 hilock_errname(rc), detail, hilock_errname(status));
    }
    assert_null(c);
    expect_detail(hilock_last_error(), part);
}

/* Only ["master", offset, [replicas]] is a master's ROLE: anything else
 * refuses the node, with a detail that names the answer, so the client
 * is never made on it. */
static void test_role_must_be_a_masters(void **state)
{
    (void)state;
    static const char *const answers[] = {
        "*0\r\n",
        ":1\r\n",
        "*1\r\n:5\r\n",
        "*1\r\n$-1\r\n",
        "+master\r\n",
        "*1\r\n$6\r\nmaster\r\n",
        "*3\r\n+master\r\n:0\r\n*0\r\n",
        "*3\r\n$6\r\nmaster\r\n$1\r\n0\r\n*0\r\n",
        "*3\r\n$6\r\nmaster\r\n:0\r\n:0\r\n",
    };
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
        fake f;
        fake_start(&f);
        sentinel_names_itself(&f, 0);
        bytes_set(&f.role, "%s", answers[i]);
        char case_[64];
        snprintf(case_, sizeof case_, "ROLE answered #%zu", i);
        expect_refused(&f, case_, HILOCK_EPROTO, "ROLE");
        fake_stop(&f);
    }
}

/* A sentinel's answer is exactly two bulk strings: a host with no NUL,
 * space or control byte in it, and a port of digits only in 1..65535.
 * Anything else is a protocol error that says what came, never an
 * address cut or stretched into one. */
typedef struct bad_answer {
    const char *answer; /* '@': the fake's port, '~': a NUL byte */
    const char *says;
} bad_answer;

static void bytes_fill(bytes *b, const char *answer, int port)
{
    char digits[16];
    int n = snprintf(digits, sizeof digits, "%d", port);
    b->len = 0;
    for (const char *p = answer; *p; p++) {
        assert_true(b->len + (size_t)n < sizeof b->text);
        if (*p == '@') {
            memcpy(b->text + b->len, digits, (size_t)n);
            b->len += (size_t)n;
        } else {
            b->text[b->len++] = *p == '~' ? '\0' : *p;
        }
    }
}

static void test_sentinel_answer_is_host_and_port(void **state)
{
    (void)state;
    /* The port is five digits (the kernel's range for a free port), so
     * the bulk lengths below hold. */
    static const bad_answer answers[] = {
        {"*2\r\n$11\r\n127.0.0.1~x\r\n$5\r\n@\r\n", "NUL"},
        {"*2\r\n$0\r\n\r\n$5\r\n@\r\n", "empty host"},
        {"*2\r\n+127.0.0.1\r\n$5\r\n@\r\n", "a status"},
        {"*2\r\n$9\r\n127.0.0.1\r\n:@\r\n", "an integer"},
        {"*2\r\n$9\r\n127.0.0.1\r\n$6\r\n+@\r\n", "port '+"},
        {"*2\r\n$9\r\n127.0.0.1\r\n$6\r\n @\r\n", "port ' "},
        {"*2\r\n$9\r\n127.0.0.1\r\n$6\r\n@x\r\n", "port '"},
        {"*2\r\n$9\r\n127.0.0.1\r\n$5\r\n65536\r\n", "port '65536'"},
        {"*2\r\n$9\r\n127.0.0.1\r\n$1\r\n0\r\n", "port '0'"},
        {"*3\r\n$9\r\n127.0.0.1\r\n$5\r\n@\r\n$1\r\nx\r\n",
         "an array of 3"},
        {"*1\r\n:1\r\n", "an array of 1"},
    };
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
        fake f;
        fake_start(&f);
        assert_true(f.port >= 10000);
        bytes_fill(&f.sentinel[0], answers[i].answer, f.port);
        char case_[64];
        snprintf(case_, sizeof case_, "sentinel answer #%zu", i);
        expect_refused(&f, case_, HILOCK_EPROTO, answers[i].says);
        fake_stop(&f);
    }
}

/* A reply nested a thousand deep is beyond the client's bounds: the
 * client says so, and does not take it for a sentinel that knows no
 * such master. */
static void test_sentinel_answer_too_deep(void **state)
{
    (void)state;
    fake f;
    fake_start(&f);
    char *p = f.sentinel[0].text;
    for (int i = 0; i < 1000; i++, p += 4)
        memcpy(p, "*1\r\n", 4);
    memcpy(p, ":1\r\n", 4);
    f.sentinel[0].len = 4004;
    expect_refused(&f, "a reply 1000 deep", HILOCK_EPROTO, "deeper");
    assert_null(strstr(hilock_last_error(), "knows"));
    fake_stop(&f);
}

/* +switch-master announcements are read as strictly as answers: one
 * whose new port is not digits only in 1..65535, or whose host holds a
 * NUL, moves nothing (the sentinels are asked instead). */
static void push_message(bytes *b, const char *payload, size_t len)
{
    char head[128];
    int n = snprintf(head, sizeof head,
                     "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n"
                     "$%zu\r\n",
                     len);
    assert_true(b->len + (size_t)n + len + 2 <= sizeof b->text);
    memcpy(b->text + b->len, head, (size_t)n);
    memcpy(b->text + b->len + n, payload, len);
    memcpy(b->text + b->len + n + len, "\r\n", 2);
    b->len += (size_t)n + len + 2;
}

static void read_switches(hilock_client *c, void *arg)
{
    *(unsigned *)arg = hl_sentinel_switches(c->sentinel);
}

static bool switched(void *arg)
{
    unsigned n = 0;
    hl_run_on_loop(arg, read_switches, &n);
    return n >= 1;
}

static void test_switch_announcement_is_read_strictly(void **state)
{
    (void)state;
    fake f;
    fake_start(&f);
    sentinel_names_itself(&f, 0);
    char msg[128];
    int n = snprintf(msg, sizeof msg, "mymaster 127.0.0.1 1 127.0.0.1 %lld",
                     f.port + WRAP);
    push_message(&f.pushed, msg, (size_t)n);
    n = snprintf(msg, sizeof msg, "mymaster 127.0.0.1 1 127.0.0.1 +%d",
                 f.port);
    push_message(&f.pushed, msg, (size_t)n);
    n = snprintf(msg, sizeof msg, "mymaster 127.0.0.1 1 127.0.0.1 %dx",
                 f.port);
    push_message(&f.pushed, msg, (size_t)n);
    n = snprintf(msg, sizeof msg, "mymaster 127.0.0.1 1 127.0.0.1%cx %d", 0,
                 f.port);
    push_message(&f.pushed, msg, (size_t)n);
    /* The one good announcement, last: once it is counted, the others
     * have been read. */
    n = snprintf(msg, sizeof msg, "mymaster 127.0.0.1 1 127.0.0.1 %d",
                 f.port);
    push_message(&f.pushed, msg, (size_t)n);
    hilock_client *c = NULL;
    assert_status(sentinel_client(&f, &c), HILOCK_OK);
    assert_true(hl_wait_until(switched, c, hl_widen(10000)));
    unsigned switches = 0;
    hl_run_on_loop(c, read_switches, &switches);
    assert_int_equal(switches, 1);
    hilock_client_destroy(c);
    fake_stop(&f);
}

/* ---- a sentinel that keeps answering badly ------------------------------- */

static void ask_sentinels(hilock_client *c, void *arg)
{
    (void)arg;
    hl_sentinel_ask(c->sentinel);
}

static void read_answers(hilock_client *c, void *arg)
{
    *(unsigned *)arg = hl_sentinel_answers(c->sentinel);
}

typedef struct answered {
    hilock_client *c;
    unsigned want;
} answered;

static bool answers_reached(void *arg)
{
    answered *a = arg;
    unsigned n = 0;
    hl_run_on_loop(a->c, read_answers, &n);
    return n >= a->want;
}

/* Once the client is up, the sentinel answers bad: every question is a
 * new round, and rounds that fail come slower and slower, from 50 ms to
 * 2 s apart, not at the speed of a reconnect each.  Within 4 s that is
 * at most 9 questions (the first, and then at least 25, 50, 100, ...,
 * 1000 ms apart; 10 allows a timer's slack), and at most 3 in the last
 * 2 s, where a new connection and question at a reconnect's pace each
 * ask about 80 times.  A good answer ends it. */
static void expect_backoff(const char *label, const char *answer)
{
    fake f;
    fake_start(&f);
    sentinel_names_itself(&f, 0);
    bytes_set(&f.sentinel[1], "%s", answer);
    char url[128];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#mymaster",
             f.port);
    hilock_options *o = options_for(url);
    assert_status(hilock_options_set_reconnect_backoff_ms(o, 50, 2000),
                  HILOCK_OK);
    hilock_client *c = NULL;
    atomic_store(&f.armed, true);
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    unsigned good = 0;
    hl_run_on_loop(c, read_answers, &good);

    atomic_store(&f.answer, 1);
    long start = hl_hostile_count(f.server, "SENTINEL");
    hl_run_on_loop(c, ask_sentinels, NULL);
    hl_sleep_ms(2000);
    long half = hl_hostile_count(f.server, "SENTINEL");
    hl_sleep_ms(2000);
    long end = hl_hostile_count(f.server, "SENTINEL");
    printf("# answered %s: %ld questions in 4 s, %ld in the last 2 s\n",
           label, end - start, end - half);
    if (end - start > 10 || end - half > 3)
        fail_msg("answered %s: %ld questions in 4 s, %ld in the last 2 s",
                 label, end - start, end - half);
    assert_true(end - start >= 2);

    atomic_store(&f.answer, 0);
    answered a = {c, good + 1};
    assert_true(hl_wait_until(answers_reached, &a, hl_widen(5000)));
    hilock_client_destroy(c);
    fake_stop(&f);
}

static void test_sentinel_error_is_asked_again_slower(void **state)
{
    (void)state;
    expect_backoff("an error", "-ERR no such command\r\n");
}

static void test_sentinel_nil_is_asked_again_slower(void **state)
{
    (void)state;
    expect_backoff("nil", "$-1\r\n");
}

static void test_sentinel_wrong_shape_is_asked_again_slower(void **state)
{
    (void)state;
    expect_backoff("[1]", "*1\r\n:1\r\n");
}

/* ---- many sentinels ------------------------------------------------------- */

/* A URL naming the same sentinel n times. */
static void sentinel_list(char *url, size_t cap, int port, int n,
                          int64_t connect_ms)
{
    size_t at = (size_t)snprintf(url, cap, "redis-sentinel://");
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(url + at, cap - at, "%s127.0.0.1:%d",
                               i ? "," : "", port);
    /* A question that outlives the command timeout ends there: longer
     * than the connect timeout, so that only the round's end counts,
     * also where the connect timeout is widened (valgrind). */
    snprintf(url + at, cap - at,
             "?connect_timeout=%lld&command_timeout=%lld#mymaster",
             (long long)connect_ms, (long long)(2 * connect_ms + 1000));
}

static int connect_exactly(hilock_client **c, const char *url)
{
    hilock_options *o = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    int rc = hilock_client_create(c, o);
    hilock_options_free(o);
    return rc;
}

/* 16 sentinels that refuse connections are asked all at once: the
 * client hears the last refusal at once, not after 16 attempts and
 * their backoffs (33 s against a 1.5 s connect timeout). */
static void test_refusing_sentinels_within_connect_timeout(void **state)
{
    (void)state;
    int fd = -1;
    int port = hl_refusing_port(&fd);
    char url[2048];
    int64_t connect_ms = hl_widen(1500);
    sentinel_list(url, sizeof url, port, HILOCK_MAX_SENTINELS, connect_ms);
    hilock_client *c = NULL;
    int64_t t0 = hl_now_ms();
    int rc = connect_exactly(&c, url);
    int64_t took = hl_now_ms() - t0;
    close(fd);
    printf("# 16 refusing sentinels: %s after %lld ms\n", hilock_errname(rc),
           (long long)took);
    assert_status(rc, HILOCK_EIO);
    assert_null(c);
    expect_detail(hilock_last_error(), "no sentinel (of 16)");
    assert_true(took < connect_ms);
}

/* 16 sentinels that accept and never answer: the whole round ends at
 * the connect timeout. */
static bool say_nothing(hl_hostile_conn *conn, const hl_hostile_req *req,
                        void *data)
{
    (void)conn, (void)data;
    return hl_hostile_is(req, "SENTINEL");
}

static void test_silent_sentinels_within_connect_timeout(void **state)
{
    (void)state;
    hl_hostile *h = hl_hostile_start(say_nothing, NULL);
    char url[2048];
    int64_t connect_ms = hl_widen(1500);
    sentinel_list(url, sizeof url, hl_hostile_port(h), HILOCK_MAX_SENTINELS,
                  connect_ms);
    hilock_client *c = NULL;
    int64_t t0 = hl_now_ms();
    int rc = connect_exactly(&c, url);
    int64_t took = hl_now_ms() - t0;
    printf("# 16 silent sentinels: %s after %lld ms\n", hilock_errname(rc),
           (long long)took);
    assert_status(rc, HILOCK_ETIMEDOUT);
    assert_null(c);
    expect_detail(hilock_last_error(), "no sentinel (of 16)");
    assert_true(took >= connect_ms - 50);
    assert_true(took < connect_ms + hl_widen(1000));
    /* Each was asked (a second round may start before the client is
     * gone). */
    assert_true(hl_hostile_count(h, "SENTINEL") >= HILOCK_MAX_SENTINELS);
    hl_hostile_stop(h);
}

/* More sentinels than HILOCK_MAX_SENTINELS are refused, in a URL and in
 * options that name them otherwise, never cut to the first 16. */
static void test_too_many_sentinels_refused(void **state)
{
    (void)state;
    char url[2048];
    sentinel_list(url, sizeof url, 26379, HILOCK_MAX_SENTINELS + 1, 1000);
    hilock_options *o = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_EINVAL);
    expect_detail(hilock_last_error(), "at most 16");

    /* The same hosts as a cluster's seeds, then a master name. */
    memmove(url + 5, url + 14, strlen(url + 14) + 1);
    *strchr(url, '#') = '\0';
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    assert_status(hilock_options_set_sentinel_master(o, "mymaster"),
                  HILOCK_OK);
    hilock_client *c = NULL;
    assert_status(hilock_client_create(&c, o), HILOCK_EINVAL);
    assert_null(c);
    expect_detail(hilock_last_error(), "at most 16");
    hilock_options_free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots_port_beyond_16_bits),
        cmocka_unit_test(test_shards_port_beyond_16_bits),
        cmocka_unit_test(test_moved_port_beyond_16_bits),
        cmocka_unit_test(test_ask_port_beyond_16_bits),
        cmocka_unit_test(test_slots_host_with_nul),
        cmocka_unit_test(test_shards_host_with_nul),
        cmocka_unit_test(test_shards_empty_host),
        cmocka_unit_test(test_role_must_be_a_masters),
        cmocka_unit_test(test_sentinel_answer_is_host_and_port),
        cmocka_unit_test(test_sentinel_answer_too_deep),
        cmocka_unit_test(test_switch_announcement_is_read_strictly),
        cmocka_unit_test(test_sentinel_error_is_asked_again_slower),
        cmocka_unit_test(test_sentinel_nil_is_asked_again_slower),
        cmocka_unit_test(test_sentinel_wrong_shape_is_asked_again_slower),
        cmocka_unit_test(test_refusing_sentinels_within_connect_timeout),
        cmocka_unit_test(test_silent_sentinels_within_connect_timeout),
        cmocka_unit_test(test_too_many_sentinels_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
