#include "core/transport/resolve.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/base/alloc.h"
#include "core/base/thread.h"

#ifdef HILOCK_TEST_HOOKS
int (*hilock__getaddrinfo)(const char *node, const char *service,
                           const struct addrinfo *hints,
                           struct addrinfo **res) = getaddrinfo;
#define resolver hilock__getaddrinfo
#else
#define resolver getaddrinfo
#endif

typedef struct lookup lookup;

/* One caller's wait.  Unanswered, it sits in its lookup's list; the
 * thread answers it (result, then a write to fd) and takes it out, both
 * under registry_lock, so the loop side, which also takes the lock before
 * it lets go, never sees a half answer, and the thread never writes to a
 * descriptor that was closed (or reused for another file). */
struct hl_resolve {
    hl_resolve *next; /* in the lookup's list, oldest first */
    lookup *owner;    /* NULL once answered */
    int fd;
    int status;
    struct addrinfo *result;
};

/* A host:port being resolved by its thread, for every caller waiting on
 * it. */
struct lookup {
    lookup *next; /* in the registry */
    hl_resolve *waiting;
    int port;
    char host[];
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static lookup *registry;
static atomic_int threads_running;

static void lookup_unlink(lookup *l)
{
    lookup **p = &registry;
    while (*p != l)
        p = &(*p)->next;
    *p = l->next;
}

static void waiter_unlink(hl_resolve *r)
{
    hl_resolve **p = &r->owner->waiting;
    while (*p != r)
        p = &(*p)->next;
    *p = r->next;
    r->next = NULL;
    r->owner = NULL;
}

static void waiter_append(lookup *l, hl_resolve *r)
{
    hl_resolve **p = &l->waiting;
    while (*p != NULL)
        p = &(*p)->next;
    *p = r;
    r->owner = l;
}

static void signal_fd(int fd)
{
    uint64_t one = 1;
    (void)!write(fd, &one, sizeof one);
}

static int lookup_with(int (*gai)(const char *, const char *,
                                  const struct addrinfo *,
                                  struct addrinfo **),
                       const char *host, int port, int flags,
                       struct addrinfo **out)
{
    struct addrinfo hints;
    char service[8];
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = flags;
    snprintf(service, sizeof service, "%d", port);
    *out = NULL;
    return gai(host, service, &hints, out);
}

/* Answers the oldest waiter with each lookup, and looks up again while
 * others wait: each answer must be a list of its own, since its taker
 * frees it with freeaddrinfo.  A caller that arrives while a lookup runs
 * takes that lookup's answer instead of starting another. */
static void *resolve_thread(void *arg)
{
    lookup *l = arg;
    pthread_mutex_lock(&registry_lock);
    while (l->waiting != NULL) {
        pthread_mutex_unlock(&registry_lock);
        struct addrinfo *result;
        int status = lookup_with(resolver, l->host, l->port,
                                 AI_ADDRCONFIG, &result);
        pthread_mutex_lock(&registry_lock);
        hl_resolve *r = l->waiting;
        if (r == NULL) {
            if (result != NULL)
                freeaddrinfo(result);
            break;
        }
        waiter_unlink(r);
        r->status = status;
        r->result = result;
        signal_fd(r->fd);
    }
    lookup_unlink(l);
    pthread_mutex_unlock(&registry_lock);
    hl_free(l);
    atomic_fetch_sub(&threads_running, 1);
    return NULL;
}

static lookup *registry_find(const char *host, int port)
{
    for (lookup *l = registry; l != NULL; l = l->next)
        if (l->port == port && strcmp(l->host, host) == 0)
            return l;
    return NULL;
}

static int thread_start(lookup *l)
{
    atomic_fetch_add(&threads_running, 1);
    int rc = hl_thread_start(NULL, true, resolve_thread, l);
    if (rc != 0)
        atomic_fetch_sub(&threads_running, 1);
    return rc;
}

/* Joins the lookup of host:port in flight, or starts one. */
static int join_or_start(hl_resolve *r, const char *host, int port)
{
    pthread_mutex_lock(&registry_lock);
    lookup *l = registry_find(host, port);
    if (l != NULL) {
        waiter_append(l, r);
        pthread_mutex_unlock(&registry_lock);
        return 0;
    }
    size_t len = strlen(host);
    l = hl_calloc(1, sizeof *l + len + 1);
    if (l == NULL) {
        pthread_mutex_unlock(&registry_lock);
        return -1;
    }
    memcpy(l->host, host, len + 1);
    l->port = port;
    waiter_append(l, r);
    l->next = registry;
    registry = l;
    if (thread_start(l) != 0) {
        waiter_unlink(r);
        lookup_unlink(l);
        pthread_mutex_unlock(&registry_lock);
        hl_free(l);
        return -1;
    }
    pthread_mutex_unlock(&registry_lock);
    return 0;
}

hl_resolve *hl_resolve_start(const char *host, int port, int *fd_out)
{
    hl_resolve *r = hl_calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->fd < 0) {
        hl_free(r);
        return NULL;
    }
    /* An address needs no name service: answered here, with no thread. */
    r->status = lookup_with(getaddrinfo, host, port,
                            AI_NUMERICHOST | AI_NUMERICSERV, &r->result);
    if (r->status == 0) {
        signal_fd(r->fd);
    } else if (join_or_start(r, host, port) != 0) {
        close(r->fd);
        hl_free(r);
        return NULL;
    }
    *fd_out = r->fd;
    return r;
}

/* The loop's side lets go: out of the list first, so that the thread
 * writes no more, then the descriptor closes. */
static void release(hl_resolve *r)
{
    pthread_mutex_lock(&registry_lock);
    if (r->owner != NULL)
        waiter_unlink(r);
    pthread_mutex_unlock(&registry_lock);
    close(r->fd);
    if (r->result != NULL)
        freeaddrinfo(r->result);
    hl_free(r);
}

int hl_resolve_finish(hl_resolve *r, struct addrinfo **out)
{
    pthread_mutex_lock(&registry_lock);
    bool answered = r->owner == NULL;
    int status = answered ? r->status : EAI_AGAIN;
    *out = answered ? r->result : NULL;
    if (answered)
        r->result = NULL;
    pthread_mutex_unlock(&registry_lock);
    release(r);
    return status;
}

void hl_resolve_cancel(hl_resolve *r)
{
    if (r != NULL)
        release(r);
}

int hl_resolve_numeric(const char *host, int port, struct addrinfo **out)
{
    return lookup_with(getaddrinfo, host, port,
                       AI_NUMERICHOST | AI_NUMERICSERV, out) == 0
               ? 0
               : -1;
}

int hl_resolve_threads(void) { return atomic_load(&threads_running); }
