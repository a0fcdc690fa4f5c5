#include "resolve.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "alloc.h"

/* The eventfd belongs to the loop: only the loop closes it, after it has
 * stopped watching it.  The thread writes to it only under the lock and
 * only while the loop still wants the answer, so it never writes to a
 * closed descriptor (or to another file that got its number). */
struct hl_resolve {
    pthread_mutex_t lock;
    bool abandoned;  /* the loop took its answer or gave up */
    atomic_int refs; /* the loop's side and the thread's side */
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
    pthread_mutex_destroy(&r->lock);
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
    int status;
    struct addrinfo *result = NULL;
    lookup(r->host, r->port, AI_ADDRCONFIG, &status, &result);
    pthread_mutex_lock(&r->lock);
    r->gai_status = status;
    r->result = result;
    if (!r->abandoned) {
        uint64_t one = 1;
        (void)!write(r->fd, &one, sizeof one);
    }
    pthread_mutex_unlock(&r->lock);
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
    pthread_mutex_init(&r->lock, NULL);
    atomic_init(&r->refs, 2);
    pthread_attr_t attr;
    pthread_t tid;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, resolve_thread, r);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        close(r->fd);
        pthread_mutex_destroy(&r->lock);
        hl_free(r);
        return NULL;
    }
    *fd_out = r->fd;
    return r;
}

/* The loop's side lets go: no more writes, then the descriptor closes. */
static void abandon(hl_resolve *r)
{
    pthread_mutex_lock(&r->lock);
    r->abandoned = true;
    pthread_mutex_unlock(&r->lock);
    close(r->fd);
    resolve_unref(r);
}

int hl_resolve_finish(hl_resolve *r, struct addrinfo **out)
{
    pthread_mutex_lock(&r->lock);
    int status = r->gai_status;
    *out = r->result;
    r->result = NULL;
    pthread_mutex_unlock(&r->lock);
    abandon(r);
    return status;
}

void hl_resolve_cancel(hl_resolve *r)
{
    if (r != NULL)
        abandon(r);
}

int hl_resolve_numeric(const char *host, int port, struct addrinfo **out)
{
    int status;
    lookup(host, port, AI_NUMERICHOST | AI_NUMERICSERV, &status, out);
    return status == 0 ? 0 : -1;
}
