/* The local line: the waiters of one client on one semaphore, oldest
 * first.  Only the oldest asks the server; the others wait for their turn
 * (or their deadline).  Without it, every message wakes every waiter, and
 * a waiter for many permits loses to waiters for fewer each time a few
 * come free.
 *
 * Lines are found by client and name in a list shared by the process
 * (under a mutex); a line's members are touched only on its client's loop
 * thread. */
#include <pthread.h>
#include <string.h>

#include "core/base/alloc.h"
#include "semaphore/semaphore_internal.h"

struct sem_line {
    sem_line *next;
    const hilock_client *client;
    bool expirable;
    sem_op *head;
    sem_op *tail;
    size_t name_len;
    char name[];
};

static pthread_mutex_t lines_mutex = PTHREAD_MUTEX_INITIALIZER;
static sem_line *lines;

static sem_line *line_get(const hilock_semaphore *sem)
{
    const hilock_lock *lock = sem->lock;
    sem_line *l;
    for (l = lines; l != NULL; l = l->next)
        if (l->client == lock->client && l->expirable == sem->expirable &&
            l->name_len == lock->name_len &&
            memcmp(l->name, lock->name, lock->name_len) == 0)
            return l;
    l = hl_calloc(1, sizeof *l + lock->name_len);
    if (l == NULL)
        return NULL;
    l->client = lock->client;
    l->expirable = sem->expirable;
    l->name_len = lock->name_len;
    memcpy(l->name, lock->name, lock->name_len);
    l->next = lines;
    lines = l;
    return l;
}

sem_line *hl_sem_line_join(sem_op *op)
{
    pthread_mutex_lock(&lines_mutex);
    sem_line *l = line_get(op->sem);
    pthread_mutex_unlock(&lines_mutex);
    if (l == NULL)
        return NULL;
    op->line = l;
    op->line_next = NULL;
    op->line_prev = l->tail;
    if (l->tail)
        l->tail->line_next = op;
    else
        l->head = op;
    l->tail = op;
    return l;
}

bool hl_sem_line_head(const sem_op *op)
{
    return op->line != NULL && op->line->head == op;
}

sem_op *hl_sem_line_first(const sem_op *op)
{
    return op->line != NULL ? op->line->head : NULL;
}

sem_op *hl_sem_line_next(const sem_op *op)
{
    return op->line_next;
}

void hl_sem_line_leave(sem_op *op)
{
    sem_line *l = op->line;
    if (l == NULL)
        return;
    if (op->line_prev)
        op->line_prev->line_next = op->line_next;
    else
        l->head = op->line_next;
    if (op->line_next)
        op->line_next->line_prev = op->line_prev;
    else
        l->tail = op->line_prev;
    op->line = NULL;
    op->line_prev = op->line_next = NULL;
    if (l->head != NULL)
        return;
    /* Empty: free it, so that lines of closed clients never pile up. */
    pthread_mutex_lock(&lines_mutex);
    sem_line **pp = &lines;
    while (*pp != NULL && *pp != l)
        pp = &(*pp)->next;
    if (*pp == l)
        *pp = l->next;
    pthread_mutex_unlock(&lines_mutex);
    hl_free(l);
}
