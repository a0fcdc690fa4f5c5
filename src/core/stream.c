#include "stream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "options_internal.h"

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

int hl_stream_tls_begin(hl_stream *s, SSL_CTX *ctx, const char *name,
                        int verify, char *err, size_t errlen)
{
    ERR_clear_error();
    s->ssl = SSL_new(ctx);
    if (s->ssl == NULL || SSL_set_fd(s->ssl, s->fd) != 1) {
        tls_error_text("TLS session", err, errlen);
        return HL_STREAM_ERROR;
    }
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

int hl_stream_handshake(hl_stream *s, char *err, size_t errlen)
{
    ERR_clear_error();
    errno = 0;
    int rc = SSL_do_handshake(s->ssl);
    if (rc == 1)
        return 0;
    int r = tls_result(s, rc, "TLS handshake", err, errlen);
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
