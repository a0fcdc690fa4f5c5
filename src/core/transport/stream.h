/* A byte stream over a connected socket: plain TCP or TLS, with the same
 * non-blocking contract for both, so the connection code has one path.
 * Neither ever raises SIGPIPE, whatever the calling thread's signal mask:
 * a reset connection is an error result, not the death of the process. */
#ifndef HL_STREAM_H
#define HL_STREAM_H

#include <stddef.h>
#include <sys/types.h>

#include <openssl/ssl.h>

/* Negative results of the stream calls. */
enum {
    HL_STREAM_WANT_READ = -1,  /* retry when the socket is readable */
    HL_STREAM_WANT_WRITE = -2, /* retry when the socket is writable */
    HL_STREAM_EOF = -3,        /* the peer closed the connection */
    HL_STREAM_ERROR = -4,      /* see the detail text */
    HL_STREAM_TLS_ERROR = -5   /* TLS refused us (e.g. a TLS 1.3 alert
                                * after the handshake): not a network
                                * failure */
};

typedef struct hl_stream {
    int fd;
    SSL *ssl; /* NULL for plain TCP */
} hl_stream;

/* Start TLS on a connected socket: SNI and peer name check for name
 * (a DNS name or an IP literal; NULL skips both).  0 or HL_STREAM_ERROR. */
int hl_stream_tls_begin(hl_stream *s, SSL_CTX *ctx, const char *name,
                        int verify, char *err, size_t errlen);
/* Drive the TLS handshake: 0 when done, else a negative result. */
int hl_stream_handshake(hl_stream *s, char *err, size_t errlen);
/* Bytes read (> 0) or a negative result. */
ssize_t hl_stream_read(hl_stream *s, void *buf, size_t len, char *err,
                       size_t errlen);
/* Bytes written (> 0) or a negative result.  After a WANT result, retry
 * with the same bytes (OpenSSL's rule for a pending record). */
ssize_t hl_stream_write(hl_stream *s, const void *buf, size_t len,
                        char *err, size_t errlen);
/* Free TLS state and close the socket. */
void hl_stream_close(hl_stream *s);

/* An SSL_CTX for the client's TLS options; NULL with err set on failure. */
struct hilock_options;
SSL_CTX *hl_tls_context_create(const struct hilock_options *opts, char *err,
                               size_t errlen);

#endif
