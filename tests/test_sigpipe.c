/* SIGPIPE from the transport.  A peer closes and resets the connection
 * while a client is half-way through writing a large command; the next
 * write on that socket fails with EPIPE, and a write that does not ask
 * otherwise also raises SIGPIPE, which kills a thread that neither
 * blocks nor handles it.  The library must turn that into an error of
 * the command and nothing more, on a loop thread it made (a RedLock's)
 * and on the caller's own loop, over TLS and plain TCP alike.
 *
 * The client runs in a forked child with SIGPIPE at its default
 * disposition and unblocked, so that a death by the signal is seen by
 * the test as a wait status rather than ending the test run.  The peer
 * is a small RESP server of the test's own, in the parent: no real
 * server can be told to stop reading at a chosen byte.
 *
 * Why the peer sends a FIN before its RST: a reset of an established
 * connection makes the next send fail with ECONNRESET, without a signal,
 * and the connection is dropped on that error.  A reset after the peer's
 * FIN (its socket closed, our data still arriving) makes every send fail
 * with EPIPE and the signal; that is how a server that closed a client
 * is seen when the client goes on writing.  Both must reach the client's
 * kernel while its loop is held, or the loop would read the FIN first
 * and drop the connection without writing again. */
/* ctest-timeout: 120 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <ev.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/multi.h"
#include "hilock/options.h"
#include "hilock/reply.h"
#include "support/children.h"
#include "support/fixture.h"

/* The value of the large SET: far more than the peer's receive window
 * (kept small below) and the client's send buffer hold together, so the
 * client still has most of it to write when the peer resets. */
#define BIG_VALUE (16u << 20)
/* A bulk string this long marks the command the peer stops reading. */
#define BIG_BULK (1L << 20)
#define PEER_RCVBUF 65536
#define MAX_LISTENERS 3
#define MAX_CONNS 64

/* ---- the peer ---------------------------------------------------------- */

typedef struct peer_conn {
    struct peer *peer;
    int fd; /* -1 once the victim closed it; else closed by peer_stop */
    int listener;
    SSL *ssl;
    pthread_t thread;
} peer_conn;

typedef struct peer {
    bool tls;
    int nlisteners;
    int listen_fd[MAX_LISTENERS];
    int port[MAX_LISTENERS];
    SSL_CTX *ctx;
    int stop_pipe[2];
    pthread_t acceptor;
    bool acceptor_running;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;
    peer_conn *conns[MAX_CONNS];
    int nconns;
    peer_conn *victim;    /* the connection that sent the large command */
    bool reset_now;       /* the test asks the victim to reset */
    bool reset_done;
    int victim_port;      /* the client's end of the victim connection */
    int victim_listener;
} peer;

typedef struct request {
    char name[16];
    bool big;
} request;

/* One "<type><decimal>\r\n" line at buf + *pos: 1 and the number, 0 when
 * the line is not all there yet, -1 when it is not RESP. */
static int number_line(const char *buf, size_t len, size_t *pos, char type,
                       long *out)
{
    const char *start = buf + *pos;
    const char *nl = memchr(start, '\n', len - *pos);
    char *end;
    long v;

    if (nl == NULL)
        return len - *pos > 32 ? -1 : 0;
    if (*start != type || nl - start < 3 || nl[-1] != '\r')
        return -1;
    errno = 0;
    v = strtol(start + 1, &end, 10);
    if (end != nl - 1 || v < 0 || errno != 0)
        return -1;
    *out = v;
    *pos = (size_t)(nl + 1 - buf);
    return 1;
}

/* One request at buf: 1 with *used, 0 when incomplete, -1 when not RESP.
 * A request with a large argument counts as whole once that argument's
 * header is in: its bytes are never wanted. */
static int parse_request(const char *buf, size_t len, size_t *used,
                         request *rq)
{
    size_t pos = 0;
    long argc, blen;
    int r = number_line(buf, len, &pos, '*', &argc);

    if (r <= 0)
        return r;
    memset(rq, 0, sizeof *rq);
    for (long i = 0; i < argc; i++) {
        r = number_line(buf, len, &pos, '$', &blen);
        if (r <= 0)
            return r;
        if (blen >= BIG_BULK) {
            rq->big = true;
            *used = pos;
            return 1;
        }
        if (len - pos < (size_t)blen + 2)
            return 0;
        if (i == 0) {
            size_t n = (size_t)blen < sizeof rq->name - 1
                           ? (size_t)blen
                           : sizeof rq->name - 1;
            for (size_t k = 0; k < n; k++)
                rq->name[k] = (char)(buf[pos + k] & ~0x20);
        }
        pos += (size_t)blen + 2;
    }
    *used = pos;
    return 1;
}

static ssize_t conn_read(peer_conn *c, char *buf, size_t len)
{
    if (c->ssl != NULL) {
        int n = SSL_read(c->ssl, buf, (int)len);
        return n > 0 ? n : -1;
    }
    for (;;) {
        ssize_t n = recv(c->fd, buf, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        return n > 0 ? n : -1;
    }
}

static bool conn_write(peer_conn *c, const char *buf, size_t len)
{
    if (c->ssl != NULL)
        return SSL_write(c->ssl, buf, (int)len) == (int)len;
    while (len > 0) {
        ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

/* What the handshake of a client and of a RedLock master asks: PING, and
 * INFO for the identity of the server (one per listener). */
static bool answer(peer_conn *c, const request *rq)
{
    char info[128], reply[160];

    if (strcmp(rq->name, "PING") == 0)
        return conn_write(c, "+PONG\r\n", 7);
    if (strcmp(rq->name, "INFO") == 0) {
        int n = snprintf(info, sizeof info,
                         "run_id:%040d\r\nuptime_in_seconds:1000\r\n",
                         c->listener + 1);
        int m = snprintf(reply, sizeof reply, "$%d\r\n%s\r\n", n, info);
        return conn_write(c, reply, (size_t)m);
    }
    return conn_write(c, "+OK\r\n", 5);
}

/* The first connection to send a large command waits for the test's word
 * and then leaves as described at the top: FIN, then RST. */
static void become_victim(peer_conn *c)
{
    peer *p = c->peer;
    struct linger abort_close = { 1, 0 };
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;

    pthread_mutex_lock(&p->mu);
    if (p->victim != NULL) {
        pthread_mutex_unlock(&p->mu);
        return;
    }
    p->victim = c;
    if (getpeername(c->fd, (struct sockaddr *)&sa, &sl) == 0)
        p->victim_port = ntohs(sa.sin_port);
    p->victim_listener = c->listener;
    pthread_cond_broadcast(&p->cv);
    while (!p->reset_now && !p->stopping)
        pthread_cond_wait(&p->cv, &p->mu);
    if (p->reset_now) {
        shutdown(c->fd, SHUT_WR);
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &abort_close,
                   sizeof abort_close);
        close(c->fd);
        c->fd = -1;
        p->reset_done = true;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
}

static void *conn_main(void *arg)
{
    peer_conn *c = arg;
    char buf[65536];
    size_t have = 0;

    if (c->ssl != NULL && SSL_accept(c->ssl) != 1)
        return NULL;
    while (have < sizeof buf) {
        ssize_t n = conn_read(c, buf + have, sizeof buf - have);

        if (n <= 0)
            return NULL;
        have += (size_t)n;
        for (;;) {
            request rq;
            size_t used = 0;
            int r = parse_request(buf, have, &used, &rq);

            if (r < 0)
                return NULL;
            if (r == 0)
                break;
            if (rq.big) {
                become_victim(c);
                return NULL;
            }
            if (!answer(c, &rq))
                return NULL;
            memmove(buf, buf + used, have - used);
            have -= used;
        }
    }
    return NULL;
}

static void peer_add(peer *p, int fd, int listener)
{
    peer_conn *c = calloc(1, sizeof *c);

    if (c == NULL) {
        close(fd);
        return;
    }
    c->peer = p;
    c->fd = fd;
    c->listener = listener;
    if (p->tls) {
        c->ssl = SSL_new(p->ctx);
        if (c->ssl == NULL || SSL_set_fd(c->ssl, fd) != 1) {
            SSL_free(c->ssl);
            free(c);
            close(fd);
            return;
        }
    }
    pthread_mutex_lock(&p->mu);
    if (p->stopping || p->nconns == MAX_CONNS ||
        pthread_create(&c->thread, NULL, conn_main, c) != 0) {
        pthread_mutex_unlock(&p->mu);
        SSL_free(c->ssl);
        free(c);
        close(fd);
        return;
    }
    p->conns[p->nconns++] = c;
    pthread_mutex_unlock(&p->mu);
}

static void *acceptor_main(void *arg)
{
    peer *p = arg;
    struct pollfd pf[MAX_LISTENERS + 1];

    for (;;) {
        for (int i = 0; i < p->nlisteners; i++) {
            pf[i].fd = p->listen_fd[i];
            pf[i].events = POLLIN;
        }
        pf[p->nlisteners].fd = p->stop_pipe[0];
        pf[p->nlisteners].events = POLLIN;
        if (poll(pf, (nfds_t)p->nlisteners + 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        if (pf[p->nlisteners].revents != 0)
            return NULL;
        for (int i = 0; i < p->nlisteners; i++) {
            if (!(pf[i].revents & POLLIN))
                continue;
            int fd = accept4(p->listen_fd[i], NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0)
                peer_add(p, fd, i);
        }
    }
}

/* Listeners only: the child is forked between this and peer_start. */
static void peer_listen(peer *p, bool tls, int nlisteners)
{
    memset(p, 0, sizeof *p);
    p->tls = tls;
    p->nlisteners = nlisteners;
    p->stop_pipe[0] = p->stop_pipe[1] = -1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (int i = 0; i < nlisteners; i++) {
        struct sockaddr_in sa;
        socklen_t len = sizeof sa;
        int rcvbuf = PEER_RCVBUF;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        assert_true(fd >= 0);
        p->listen_fd[i] = fd;
        /* Set before listen(), so accepted sockets advertise a small
         * window from the start. */
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
                                    sizeof rcvbuf),
                         0);
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
        assert_int_equal(listen(fd, 64), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
        p->port[i] = ntohs(sa.sin_port);
    }
}

static void peer_start(peer *p)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    sigset_t pipe_set, old;

    if (p->tls) {
        p->ctx = SSL_CTX_new(TLS_server_method());
        assert_non_null(p->ctx);
        if (SSL_CTX_use_certificate_chain_file(p->ctx, t->server_cert) != 1 ||
            SSL_CTX_use_PrivateKey_file(p->ctx, t->server_key,
                                        SSL_FILETYPE_PEM) != 1)
            fail_msg("peer certificate: %s",
                     ERR_error_string(ERR_get_error(), NULL));
    }
    assert_int_equal(pipe2(p->stop_pipe, O_CLOEXEC), 0);
    /* The peer's own writes go through OpenSSL's socket BIO: its threads
     * (they inherit the acceptor's mask) keep SIGPIPE blocked, so that
     * only the client under test is exposed to the signal. */
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    assert_int_equal(pthread_create(&p->acceptor, NULL, acceptor_main, p),
                     0);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    p->acceptor_running = true;
}

static void peer_stop(peer *p)
{
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->cv);
    for (int i = 0; i < p->nconns; i++)
        if (p->conns[i]->fd >= 0)
            shutdown(p->conns[i]->fd, SHUT_RDWR);
    pthread_mutex_unlock(&p->mu);
    if (p->acceptor_running) {
        (void)!write(p->stop_pipe[1], "", 1);
        pthread_join(p->acceptor, NULL);
        p->acceptor_running = false;
    }
    /* The acceptor is gone, so no connection is added any more. */
    for (int i = 0; i < p->nconns; i++) {
        peer_conn *c = p->conns[i];

        pthread_join(c->thread, NULL);
        SSL_free(c->ssl);
        if (c->fd >= 0)
            close(c->fd);
        free(c);
    }
    p->nconns = 0;
    for (int i = 0; i < p->nlisteners; i++)
        if (p->listen_fd[i] >= 0)
            close(p->listen_fd[i]);
    p->nlisteners = 0;
    for (int i = 0; i < 2; i++)
        if (p->stop_pipe[i] >= 0)
            close(p->stop_pipe[i]);
    p->stop_pipe[0] = p->stop_pipe[1] = -1;
    SSL_CTX_free(p->ctx);
    p->ctx = NULL;
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
}

static bool victim_seen(peer *p, int timeout_ms)
{
    struct timespec until;
    bool seen;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->mu);
    while (p->victim == NULL &&
           pthread_cond_timedwait(&p->cv, &p->mu, &until) == 0)
        ;
    seen = p->victim != NULL;
    pthread_mutex_unlock(&p->mu);
    return seen;
}

static bool reset_victim(peer *p, int timeout_ms)
{
    struct timespec until;
    bool done;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->mu);
    p->reset_now = true;
    pthread_cond_broadcast(&p->cv);
    while (!p->reset_done &&
           pthread_cond_timedwait(&p->cv, &p->mu, &until) == 0)
        ;
    done = p->reset_done;
    pthread_mutex_unlock(&p->mu);
    return done;
}

typedef struct tuple {
    unsigned client_port;
    unsigned server_port;
} tuple;

/* Whether the client's kernel has taken the reset: its socket then leaves
 * the table of connections, even while the descriptor stays open. */
static bool client_socket_gone(void *arg)
{
    const tuple *t = arg;
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    bool found = false;

    if (f == NULL)
        return false;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned la, lp, ra, rp;

        if (sscanf(line, " %*u: %x:%x %x:%x", &la, &lp, &ra, &rp) == 4 &&
            lp == t->client_port && rp == t->server_port)
            found = true;
    }
    fclose(f);
    return !found;
}

/* ---- the client, in the forked child ----------------------------------- */

typedef enum {
    CASE_REDLOCK_TLS, /* on the loop thread a RedLock makes */
    CASE_LOOP_TLS,    /* on the caller's loop */
    CASE_LOOP_PLAIN
} case_kind;

typedef struct child {
    int cmd_fd;    /* from the parent: 'V' (victim seen), then 'G' (go) */
    int report_fd; /* to the parent: "paused", then "result ..." */
    const peer *p;
    /* What the large SET ended with. */
    atomic_bool set_done;
    int set_status;
    char set_detail[200];
    /* The loop hold (RedLock case), run on the loop thread. */
    bool held;
    struct ev_loop *loop; /* the caller's loop cases */
} child;

__attribute__((format(printf, 2, 3)))
static void say(int fd, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    (void)!write(fd, line, (size_t)n);
}

/* Paths go into a URL query, where '/' and friends are percent-encoded. */
static void pct_encode(char *out, size_t cap, const char *in)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    for (; *in != '\0' && n + 4 < cap; in++) {
        unsigned char ch = (unsigned char)*in;
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' ||
                     ch == '_' || ch == '~';

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

static void url_for(char *out, size_t cap, const peer *p, int i)
{
    char ca[1024];

    if (!p->tls) {
        snprintf(out, cap, "redis://127.0.0.1:%d", p->port[i]);
        return;
    }
    pct_encode(ca, sizeof ca, hl_fixture_tls_files()->ca_cert);
    snprintf(out, cap, "rediss://127.0.0.1:%d?ca_file=%s", p->port[i], ca);
}

static void on_set_done(hilock_client *c, int status, hilock_reply *reply,
                        void *user_data)
{
    child *ch = user_data;

    (void)c;
    ch->set_status = status;
    snprintf(ch->set_detail, sizeof ch->set_detail, "%s",
             hilock_last_error());
    hilock_reply_free(reply);
    atomic_store(&ch->set_done, true);
    if (ch->loop != NULL)
        ev_break(ch->loop, EVBREAK_ALL);
}

static int send_big_set(hilock_client *c, child *ch)
{
    static const char key[] = "sigpipe:big";
    const char *argv[3] = { "SET", key, NULL };
    size_t lens[3] = { 3, sizeof key - 1, BIG_VALUE };
    char *value = malloc(BIG_VALUE);
    int rc;

    if (value == NULL)
        return HILOCK_ENOMEM;
    memset(value, 'v', BIG_VALUE);
    argv[2] = value;
    rc = hilock_client_command_async(c, 3, argv, lens, on_set_done, ch);
    free(value);
    return rc;
}

static hilock_options *child_options(const char *url)
{
    hilock_options *o = NULL;

    if (hilock_options_create(&o) != HILOCK_OK)
        return NULL;
    /* No request may time out while the test holds the loop: the write
     * that meets the reset must be the first thing the loop does next. */
    if ((url != NULL && hilock_options_set_url(o, url) != HILOCK_OK) ||
        hilock_options_set_connect_timeout_ms(o, hl_widen(10000)) !=
            HILOCK_OK ||
        hilock_options_set_command_timeout_ms(o, hl_widen(60000)) !=
            HILOCK_OK ||
        hilock_options_set_node_timeout_ms(o, hl_widen(60000)) !=
            HILOCK_OK) {
        hilock_options_free(o);
        return NULL;
    }
    return o;
}

/* Called on the loop thread with the large SET stuck in the socket: keeps
 * the loop here while the parent has the peer send its FIN and RST. */
static void hold_loop(hilock_client *c, int status, hilock_reply *reply,
                      void *user_data)
{
    child *ch = user_data;
    char go = 0;

    (void)c;
    (void)status;
    hilock_reply_free(reply);
    say(ch->report_fd, "paused");
    ch->held = hl_read_exact(ch->cmd_fd, &go, 1, hl_widen(20000)) &&
               go == 'G';
}

static int child_redlock(child *ch)
{
    char bufs[MAX_LISTENERS][1200];
    const char *urls[MAX_LISTENERS];
    const char *ping[] = { "PING" };
    hilock_options *o = child_options(NULL);
    hilock_redlock *rl = NULL;
    char v = 0;
    int rc;

    for (int i = 0; i < ch->p->nlisteners; i++) {
        url_for(bufs[i], sizeof bufs[i], ch->p, i);
        urls[i] = bufs[i];
    }
    rc = o ? hilock_redlock_create(&rl, urls, (size_t)ch->p->nlisteners, o)
           : HILOCK_ENOMEM;
    hilock_options_free(o);
    if (rc != HILOCK_OK) {
        say(ch->report_fd, "error hilock_redlock_create: %s %s",
            hilock_errname(rc), hilock_last_error());
        return 3;
    }
    rc = send_big_set(hilock_redlock_client(rl, 0), ch);
    if (rc != HILOCK_OK) {
        say(ch->report_fd, "error SET: %s", hilock_errname(rc));
        return 3;
    }
    if (!hl_read_exact(ch->cmd_fd, &v, 1, hl_widen(20000)) || v != 'V') {
        say(ch->report_fd, "error no word of the peer reading the SET");
        return 3;
    }
    /* Master 1 shares master 0's loop thread: its PING's callback holds
     * that thread. */
    rc = hilock_client_command_async(hilock_redlock_client(rl, 1), 1, ping,
                                     NULL, hold_loop, ch);
    if (rc != HILOCK_OK) {
        say(ch->report_fd, "error PING: %s", hilock_errname(rc));
        return 3;
    }
    if (!hl_wait_flag(&ch->set_done, hl_widen(20000))) {
        say(ch->report_fd, "error the SET never completed (held: %d)",
            ch->held);
        return 3;
    }
    say(ch->report_fd, "result %d %s", ch->set_status, ch->set_detail);
    hilock_redlock_destroy(rl);
    return ch->held ? 0 : 4;
}

static void on_cmd(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    ev_io_stop(loop, w);
    ev_break(loop, EVBREAK_ALL);
}

static void on_guard(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

static int child_loop(child *ch)
{
    char url[1200];
    hilock_options *o;
    hilock_client *c = NULL;
    ev_io cmd;
    ev_timer guard;
    char v = 0;
    int rc;

    ch->loop = ev_loop_new(EVFLAG_AUTO);
    url_for(url, sizeof url, ch->p, 0);
    o = child_options(url);
    rc = o && ch->loop ? hilock_options_set_loop(o, ch->loop) : HILOCK_ENOMEM;
    if (rc == HILOCK_OK)
        rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    if (rc == HILOCK_OK)
        rc = send_big_set(c, ch);
    if (rc != HILOCK_OK) {
        say(ch->report_fd, "error client: %s %s", hilock_errname(rc),
            hilock_last_error());
        return 3;
    }
    ev_io_init(&cmd, on_cmd, ch->cmd_fd, EV_READ);
    ev_io_start(ch->loop, &cmd);
    ev_timer_init(&guard, on_guard, hl_widen(20000) / 1000.0, 0.0);
    ev_timer_start(ch->loop, &guard);
    /* Connects, and writes the SET until the socket is full. */
    ev_run(ch->loop, 0);
    if (!hl_read_exact(ch->cmd_fd, &v, 1, hl_widen(1000)) || v != 'V' ||
        atomic_load(&ch->set_done)) {
        say(ch->report_fd, "error no word of the peer reading the SET "
                           "(SET done: %d)",
            (int)atomic_load(&ch->set_done));
        return 3;
    }
    /* Off the loop now, which is the hold. */
    say(ch->report_fd, "paused");
    if (!hl_read_exact(ch->cmd_fd, &v, 1, hl_widen(20000)) || v != 'G') {
        say(ch->report_fd, "error no go from the parent");
        return 3;
    }
    ev_run(ch->loop, 0);
    ev_timer_stop(ch->loop, &guard);
    if (!atomic_load(&ch->set_done)) {
        say(ch->report_fd, "error the SET never completed");
        return 3;
    }
    say(ch->report_fd, "result %d %s", ch->set_status, ch->set_detail);
    hilock_client_destroy(c);
    ev_loop_destroy(ch->loop);
    return 0;
}

/* ---- the test ---------------------------------------------------------- */

static peer the_peer;
static bool peer_made;
static hl_children kids;
static int to_child[2] = { -1, -1 };
static int from_child[2] = { -1, -1 };

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_children_kill_all(&kids);
    if (peer_made)
        peer_stop(&the_peer);
    peer_made = false;
    for (int i = 0; i < 2; i++) {
        close_fd(&to_child[i]);
        close_fd(&from_child[i]);
    }
    return 0;
}

static void run_case(case_kind kind)
{
    bool tls = kind != CASE_LOOP_PLAIN;
    char line[512];
    int status, set_status = -1, detail_at = 0;
    tuple t;

    /* Made before the fork, so that both sides know the paths. */
    hl_fixture_tls_files();
    peer_listen(&the_peer, tls, kind == CASE_REDLOCK_TLS ? 3 : 1);
    peer_made = true;
    assert_int_equal(pipe2(to_child, O_CLOEXEC), 0);
    assert_int_equal(pipe2(from_child, O_CLOEXEC), 0);
    fflush(NULL);
    if (hl_children_fork(&kids, 0) == 0) {
        static child ch;
        sigset_t none;

        for (int i = 0; i < the_peer.nlisteners; i++)
            close(the_peer.listen_fd[i]);
        close(to_child[1]);
        close(from_child[0]);
        /* Exposed as a host that never thought of SIGPIPE would be. */
        signal(SIGPIPE, SIG_DFL);
        sigemptyset(&none);
        pthread_sigmask(SIG_SETMASK, &none, NULL);
        ch.cmd_fd = to_child[0];
        ch.report_fd = from_child[1];
        ch.p = &the_peer;
        atomic_init(&ch.set_done, false);
        _exit(kind == CASE_REDLOCK_TLS ? child_redlock(&ch)
                                       : child_loop(&ch));
    }
    close_fd(&to_child[0]);
    close_fd(&from_child[1]);
    peer_start(&the_peer);

    if (!victim_seen(&the_peer, hl_widen(20000))) {
        if (!hl_read_line(from_child[0], line, sizeof line, 1000))
            snprintf(line, sizeof line, "(nothing)");
        fail_msg("the peer never got the large SET; the client said: %s",
                 line);
    }
    assert_int_equal(write(to_child[1], "V", 1), 1);
    if (!hl_read_line(from_child[0], line, sizeof line, hl_widen(20000)) ||
        strcmp(line, "paused") != 0)
        fail_msg("the client did not hold its loop: %s", line);
    if (!reset_victim(&the_peer, hl_widen(5000)))
        fail_msg("the peer did not reset the connection");
    assert_int_equal(the_peer.victim_listener, 0);
    t.client_port = (unsigned)the_peer.victim_port;
    t.server_port = (unsigned)the_peer.port[0];
    if (!hl_wait_until(client_socket_gone, &t, hl_widen(5000)))
        fail_msg("the client's socket never took the reset");
    assert_int_equal(write(to_child[1], "G", 1), 1);

    if (!hl_children_wait(&kids, hl_widen(30000)))
        fail_msg("the client process did not finish");
    status = kids.status[0];
    if (WIFSIGNALED(status))
        fail_msg("the client process was killed by signal %d (%s)",
                 WTERMSIG(status), strsignal(WTERMSIG(status)));
    if (!hl_read_line(from_child[0], line, sizeof line, hl_widen(1000)))
        fail_msg("the client exited with %d and said nothing",
                 WEXITSTATUS(status));
    if (sscanf(line, "result %d %n", &set_status, &detail_at) != 1)
        fail_msg("the client exited with %d: %s", WEXITSTATUS(status),
                 line);
    if (set_status != HILOCK_EIO)
        fail_msg("the SET ended with %s (%s), want HILOCK_EIO",
                 hilock_errname(set_status), line + detail_at);
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_redlock_tls_reset_mid_write(void **state)
{
    (void)state;
    run_case(CASE_REDLOCK_TLS);
}

static void test_caller_loop_tls_reset_mid_write(void **state)
{
    (void)state;
    run_case(CASE_LOOP_TLS);
}

static void test_caller_loop_plain_reset_mid_write(void **state)
{
    (void)state;
    run_case(CASE_LOOP_PLAIN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_redlock_tls_reset_mid_write,
                                  teardown),
        cmocka_unit_test_teardown(test_caller_loop_tls_reset_mid_write,
                                  teardown),
        cmocka_unit_test_teardown(test_caller_loop_plain_reset_mid_write,
                                  teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
