#include "core/transport/stream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "core/config/option_values.h"

/* The OpenSSL error queue is per thread; take its newest entry as text
 * and leave the queue empty for the next call on this thread. */
static void tls_error_text(const char *what, char *err, size_t errlen)
{
    unsigned long code = ERR_peek_last_error();
    char detail[200] = "";
    if (code != 0)
        ERR_error_string_n(code, detail, sizeof detail);
    else if (errno != 0)
        snprintf(detail, sizeof detail, "%s", strerror(errno));
    ERR_clear_error();
    snprintf(err, errlen, "%s: %s", what, detail[0] ? detail : "failed");
}

static int is_ip_literal(const char *name)
{
    unsigned char tmp[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, name, tmp) == 1 ||
           inet_pton(AF_INET6, name, tmp) == 1;
}

/* OpenSSL reads a CA directory only when it looks a certificate up, so a
 * missing one would surface as a failed verification of the server. */
static bool ca_location_usable(const char *path, bool dir, char *err,
                               size_t errlen)
{
    struct stat st;
    if (path == NULL)
        return true;
    const char *what = dir ? "ca_dir" : "ca_file";
    if (stat(path, &st) != 0 || access(path, dir ? R_OK | X_OK : R_OK) != 0) {
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
        return false;
    }
    if (dir != S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s %s: %s", what, path,
                 dir ? "not a directory" : "is a directory");
        return false;
    }
    return true;
}

SSL_CTX *hl_tls_context_create(const hilock_options *o, char *err,
                               size_t errlen)
{
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        tls_error_text("TLS context", err, errlen);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* A partial write must be retried with the same record; allowing the
     * buffer to move lets our output buffer grow between the retries. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(ctx, o->tls_verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE,
                       NULL);
    if (!ca_location_usable(o->tls_ca_file, false, err, errlen) ||
        !ca_location_usable(o->tls_ca_dir, true, err, errlen))
        goto fail;
    if (o->tls_ca_file || o->tls_ca_dir) {
        if (SSL_CTX_load_verify_locations(ctx, o->tls_ca_file,
                                          o->tls_ca_dir) != 1) {
            tls_error_text("loading CA", err, errlen);
            goto fail;
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        tls_error_text("loading default CA store", err, errlen);
        goto fail;
    }
    if ((o->tls_cert_file == NULL) != (o->tls_key_file == NULL)) {
        snprintf(err, errlen, "a client certificate needs its key, and a "
                              "key its certificate");
        goto fail;
    }
    if (o->tls_cert_file != NULL) {
        if (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert_file) != 1) {
            tls_error_text("loading client certificate", err, errlen);
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, o->tls_key_file,
                                        SSL_FILETYPE_PEM) != 1) {
            tls_error_text("loading client key", err, errlen);
            goto fail;
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            tls_error_text("client key does not match certificate", err,
                           errlen);
            goto fail;
        }
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

/* ---- the socket under TLS -------------------------------------------
 * OpenSSL's own socket BIO writes with write(2), which raises SIGPIPE on a
 * connection the peer has reset, and SIGPIPE kills by default.  The loop
 * may run on any thread (the caller's loop, a RedLock's), whose signal
 * mask is not ours to change, and the process's disposition belongs to the
 * application.  So TLS goes through this BIO, which writes with
 * MSG_NOSIGNAL and otherwise behaves like the socket BIO: retry flags on
 * EAGAIN, an end-of-file flag that SSL asks for with BIO_eof(), and the
 * descriptor for SSL_get_fd().  It never closes the descriptor: the
 * stream does, after SSL_free. */

/* Made at the first TLS connection and kept for the life of the process;
 * a failure to make it (out of memory) is retried at the next one. */
static BIO_METHOD *socket_method;
static pthread_mutex_t socket_method_lock = PTHREAD_MUTEX_INITIALIZER;

static int bio_fd(BIO *b)
{
    return (int)(intptr_t)BIO_get_data(b);
}

static int sock_bio_write(BIO *b, const char *buf, int len)
{
    BIO_clear_retry_flags(b);
    if (len <= 0)
        return 0;
    ssize_t n;
    do
        n = send(bio_fd(b), buf, (size_t)len, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_write(b);
    return (int)n;
}

static int sock_bio_read(BIO *b, char *buf, int len)
{
    BIO_clear_retry_flags(b);
    if (buf == NULL || len <= 0)
        return 0;
    ssize_t n;
    do
        n = recv(bio_fd(b), buf, (size_t)len, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_read(b);
    else if (n == 0)
        BIO_set_flags(b, BIO_FLAGS_IN_EOF);
    return (int)n;
}

static long sock_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)num;
    switch (cmd) {
    case BIO_C_SET_FD: {
        int fd = *(const int *)ptr;
        BIO_set_data(b, (void *)(intptr_t)fd);
        BIO_set_init(b, 1);
        BIO_clear_flags(b, BIO_FLAGS_IN_EOF);
        return 1;
    }
    case BIO_C_GET_FD:
        if (!BIO_get_init(b))
            return -1;
        if (ptr != NULL)
            *(int *)ptr = bio_fd(b);
        return bio_fd(b);
    case BIO_CTRL_EOF:
        return BIO_test_flags(b, BIO_FLAGS_IN_EOF) != 0;
    case BIO_CTRL_FLUSH:
        /* Every write went straight to the socket: nothing is held. */
        return 1;
    default:
        /* PUSH, POP, the kTLS queries, GET_CLOSE (BIO_NOCLOSE is 0) and
         * the rest: a plain socket has nothing to add, and 0 is what SSL
         * expects then. */
        return 0;
    }
}

static int sock_bio_create(BIO *b)
{
    BIO_set_data(b, (void *)(intptr_t)-1);
    BIO_set_init(b, 0);
    return 1;
}

static BIO_METHOD *make_socket_method(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK |
                                     BIO_TYPE_DESCRIPTOR,
                                 "hilock socket");
    if (m == NULL)
        return NULL;
    if (BIO_meth_set_write(m, sock_bio_write) != 1 ||
        BIO_meth_set_read(m, sock_bio_read) != 1 ||
        BIO_meth_set_ctrl(m, sock_bio_ctrl) != 1 ||
        BIO_meth_set_create(m, sock_bio_create) != 1) {
        BIO_meth_free(m);
        return NULL;
    }
    return m;
}

/* A BIO on fd that can never raise SIGPIPE; NULL when out of memory. */
static BIO *socket_bio(int fd)
{
    pthread_mutex_lock(&socket_method_lock);
    if (socket_method == NULL)
        socket_method = make_socket_method();
    BIO_METHOD *m = socket_method;
    pthread_mutex_unlock(&socket_method_lock);
    if (m == NULL)
        return NULL;
    BIO *b = BIO_new(m);
    if (b != NULL)
        BIO_set_fd(b, fd, BIO_NOCLOSE);
    return b;
}

int hl_stream_tls_begin(hl_stream *s, SSL_CTX *ctx, const char *name,
                        int verify, char *err, size_t errlen)
{
    ERR_clear_error();
    s->ssl = SSL_new(ctx);
    BIO *bio = s->ssl != NULL ? socket_bio(s->fd) : NULL;
    if (bio == NULL) {
        tls_error_text("TLS session", err, errlen);
        return HL_STREAM_ERROR;
    }
    /* One BIO both ways: SSL takes over our single reference. */
    SSL_set_bio(s->ssl, bio, bio);
    if (name != NULL && name[0] != '\0') {
        int ip = is_ip_literal(name);
        /* SNI carries host names only, never addresses (RFC 6066). */
        if (!ip && SSL_set_tlsext_host_name(s->ssl, name) != 1) {
            tls_error_text("setting SNI", err, errlen);
            return HL_STREAM_ERROR;
        }
        if (verify) {
            int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(
                              SSL_get0_param(s->ssl), name)
                        : SSL_set1_host(s->ssl, name);
            if (ok != 1) {
                /* A name we cannot enforce must not silently pass. */
                tls_error_text("setting the name to verify", err, errlen);
                return HL_STREAM_ERROR;
            }
        }
    }
    SSL_set_connect_state(s->ssl);
    return 0;
}

/* Map an SSL_* result to our contract. */
static int tls_result(hl_stream *s, int rc, const char *what, char *err,
                      size_t errlen)
{
    int e = SSL_get_error(s->ssl, rc);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        return HL_STREAM_WANT_READ;
    case SSL_ERROR_WANT_WRITE:
        return HL_STREAM_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN:
        snprintf(err, errlen, "server closed the TLS connection");
        return HL_STREAM_EOF;
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0) {
            if (errno == 0 || errno == ECONNRESET || errno == EPIPE) {
                snprintf(err, errlen, "connection closed by server");
                return HL_STREAM_EOF;
            }
            snprintf(err, errlen, "%s: %s", what, strerror(errno));
            ERR_clear_error();
            return HL_STREAM_ERROR;
        }
        /* fall through */
    default: {
        long vr = SSL_get_verify_result(s->ssl);
        if (vr != X509_V_OK) {
            snprintf(err, errlen, "%s: certificate verification failed: %s",
                     what, X509_verify_cert_error_string(vr));
            ERR_clear_error();
        } else {
            tls_error_text(what, err, errlen);
        }
        return HL_STREAM_TLS_ERROR;
    }
    }
}

/* What a plaintext server's answer to a TLS hello looks like to OpenSSL:
 * its "-ERR ..." read as a record header. */
static bool plaintext_answer(unsigned long e)
{
    int reason = ERR_GET_REASON(e);
    return ERR_GET_LIB(e) == ERR_LIB_SSL &&
           (reason == SSL_R_WRONG_VERSION_NUMBER ||
            reason == SSL_R_PACKET_LENGTH_TOO_LONG);
}

int hl_stream_handshake(hl_stream *s, char *err, size_t errlen)
{
    ERR_clear_error();
    errno = 0;
    int rc = SSL_do_handshake(s->ssl);
    if (rc == 1)
        return 0;
    bool plaintext = plaintext_answer(ERR_peek_error());
    int r = tls_result(s, rc, "TLS handshake", err, errlen);
    if (plaintext) {
        snprintf(err, errlen, "TLS handshake: the server answered in "
                              "plaintext; it does not speak TLS on this port "
                              "(a plaintext server needs redis://)");
    } else if (r == HL_STREAM_EOF) {
        snprintf(err, errlen, "the server closed the connection during the "
                              "TLS handshake; it may not speak TLS on this "
                              "port, or it refused us");
    }
    /* A peer that hangs up mid-handshake is a TLS failure, not an EOF. */
    return r == HL_STREAM_EOF ? HL_STREAM_ERROR : r;
}

ssize_t hl_stream_read(hl_stream *s, void *buf, size_t len, char *err,
                       size_t errlen)
{
    if (s->ssl != NULL) {
        ERR_clear_error();
        errno = 0;
        int n = SSL_read(s->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
        return n > 0 ? n : tls_result(s, n, "TLS read", err, errlen);
    }
    for (;;) {
        ssize_t n = read(s->fd, buf, len);
        if (n > 0)
            return n;
        if (n == 0) {
            snprintf(err, errlen, "connection closed by server");
            return HL_STREAM_EOF;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return HL_STREAM_WANT_READ;
        if (errno == ECONNRESET) {
            snprintf(err, errlen, "connection reset by server");
            return HL_STREAM_EOF;
        }
        snprintf(err, errlen, "read: %s", strerror(errno));
        return HL_STREAM_ERROR;
    }
}

ssize_t hl_stream_write(hl_stream *s, const void *buf, size_t len,
                        char *err, size_t errlen)
{
    if (s->ssl != NULL) {
        ERR_clear_error();
        errno = 0;
        int n =
            SSL_write(s->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
        return n > 0 ? n : tls_result(s, n, "TLS write", err, errlen);
    }
    for (;;) {
        ssize_t n = send(s->fd, buf, len, MSG_NOSIGNAL);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return HL_STREAM_WANT_WRITE;
        if (errno == EPIPE || errno == ECONNRESET) {
            snprintf(err, errlen, "connection closed by server");
            return HL_STREAM_EOF;
        }
        snprintf(err, errlen, "write: %s", strerror(errno));
        return HL_STREAM_ERROR;
    }
}

void hl_stream_close(hl_stream *s)
{
    if (s->ssl != NULL) {
        SSL_free(s->ssl);
        s->ssl = NULL;
    }
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
}
