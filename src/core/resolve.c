#include "resolve.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "alloc.h"

struct hl_resolve {
    atomic_int refs;  /* the loop's side and the thread's side */
    atomic_bool done; /* the answer below is written */
    int fd;
    int port;
    int gai_status;
    struct addrinfo *result;
    char host[];
};

static void resolve_unref(hl_resolve *r)
{
    if (atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    if (r->result != NULL)
        freeaddrinfo(r->result);
    close(r->fd);
    hl_free(r);
}

static void lookup(const char *host, int port, int flags, int *status,
                   struct addrinfo **out)
{
    struct addrinfo hints;
    char service[8];
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = flags;
    snprintf(service, sizeof service, "%d", port);
    *status = getaddrinfo(host, service, &hints, out);
}

static void *resolve_thread(void *arg)
{
    hl_resolve *r = arg;
    lookup(r->host, r->port, AI_ADDRCONFIG, &r->gai_status, &r->result);
    uint64_t one = 1;
    atomic_store_explicit(&r->done, true, memory_order_release);
    /* An eventfd write cannot fail for want of a reader, so the loop side
     * may have given up already. */
    (void)!write(r->fd, &one, sizeof one);
    resolve_unref(r);
    return NULL;
}

hl_resolve *hl_resolve_start(const char *host, int port, int *fd_out)
{
    size_t len = strlen(host);
    hl_resolve *r = hl_calloc(1, sizeof *r + len + 1);
    if (r == NULL)
        return NULL;
    memcpy(r->host, host, len + 1);
    r->port = port;
    r->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->fd < 0) {
        hl_free(r);
        return NULL;
    }
    atomic_init(&r->refs, 2);
    atomic_init(&r->done, false);
    pthread_attr_t attr;
    pthread_t tid;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, resolve_thread, r);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        close(r->fd);
        hl_free(r);
        return NULL;
    }
    *fd_out = r->fd;
    return r;
}

int hl_resolve_finish(hl_resolve *r, struct addrinfo **out)
{
    /* The eventfd said the answer is there; the flag makes the ordering
     * explicit to the memory model (and to race detectors). */
    if (!atomic_load_explicit(&r->done, memory_order_acquire)) {
        resolve_unref(r);
        *out = NULL;
        return EAI_AGAIN;
    }
    int status = r->gai_status;
    *out = r->result;
    r->result = NULL;
    resolve_unref(r);
    return status;
}

void hl_resolve_cancel(hl_resolve *r)
{
    if (r != NULL)
        resolve_unref(r);
}

int hl_resolve_numeric(const char *host, int port, struct addrinfo **out)
{
    int status;
    lookup(host, port, AI_NUMERICHOST | AI_NUMERICSERV, &status, out);
    return status == 0 ? 0 : -1;
}
