/* Forked children of a test, and the pipes they report on.
 *
 * A test forks before it makes any client: a child inherits only the
 * forking thread, so a client's loop thread, and any lock another thread
 * held at that moment, would not come along.  Children report over
 * pipes; hl_read_exact and hl_read_line read those with a deadline.
 *
 * A test that fails half-way leaves fail_msg with its children still
 * running, so keep an hl_children where teardown reaches it and call
 * hl_children_kill_all there.
 *
 * hl_children_fork fails the running cmocka test when fork() fails; the
 * other helpers only report and are safe in a child. */
#ifndef HL_CHILDREN_H
#define HL_CHILDREN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define HL_CHILDREN_MAX 4

typedef struct hl_children {
    pid_t pid[HL_CHILDREN_MAX]; /* 0: no child in the slot, or reaped */
    int status[HL_CHILDREN_MAX]; /* the wait status, once reaped */
} hl_children;

/* fork(), with the child listed in slot i in the parent.  Returns what
 * fork() returned: 0 in the child, which must end with _exit(). */
pid_t hl_children_fork(hl_children *ch, int i);

/* Whether every listed child exited within timeout_ms; each one that did
 * leaves its slot, with its wait status in status[]. */
bool hl_children_wait(hl_children *ch, int timeout_ms);

/* SIGKILLs the child in slot i and reaps it; returns what kill()
 * returned. */
int hl_children_kill(hl_children *ch, int i);

/* hl_children_kill for every child still listed. */
void hl_children_kill_all(hl_children *ch);

/* Reads exactly len bytes from fd within timeout_ms.  False on a
 * timeout, an error or end of file. */
bool hl_read_exact(int fd, void *buf, size_t len, int timeout_ms);

/* Reads one line from fd within timeout_ms into out, without its
 * newline.  False on a timeout, an error, end of file or a line that
 * does not fit. */
bool hl_read_line(int fd, char *out, size_t cap, int timeout_ms);

#endif
