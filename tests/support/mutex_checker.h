/* A mutual-exclusion checker for the lock tests.
 *
 * Holders in any number of threads and forked processes record each
 * critical section as an interval on CLOCK_MONOTONIC, which is one clock
 * for the whole machine, and inside it do a deliberately unprotected
 * read-increment-write of a shared counter.  Afterwards the checker shows
 * that no two intervals overlapped and that no increment was lost (two
 * holders at once would lose one); for fenced locks it also shows that
 * the tokens grew in the order the holds began.
 *
 * The records and the counter live in one MAP_SHARED anonymous mapping,
 * so a checker made before fork() is shared with the children.  Slots
 * are handed out with lock-free atomics, which work across processes.
 * Holders never call cmocka (a forked child cannot fail the parent's
 * test): they report problems with hl_mutex_checker_fail(), and the
 * parent's hl_mutex_checker_verify() turns them into a failure. */
#ifndef HL_MUTEX_CHECKER_H
#define HL_MUTEX_CHECKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hl_mutex_checker hl_mutex_checker;

/* Room for capacity critical sections; each spends about spin_us in its
 * read-increment-write, to widen the window in which an overlap would
 * lose an update.  NULL when the mapping cannot be made. */
hl_mutex_checker *hl_mutex_checker_create(size_t capacity, int spin_us);

/* Unmap.  Call it in the process that made the checker, after every
 * holder is done; a child simply exits. */
void hl_mutex_checker_free(hl_mutex_checker *mc);

/* Call right after the lock was acquired.  holder identifies the thread
 * or process for the report; token is the fencing token of the hold, or
 * 0 when the lock is not fenced.  Returns the slot to hand to
 * hl_mutex_checker_exit(), or -1 (and records a failure) when full. */
long hl_mutex_checker_enter(hl_mutex_checker *mc, uint32_t holder,
                            uint64_t token);

/* Call right before the lock is released. */
void hl_mutex_checker_exit(hl_mutex_checker *mc, long slot);

/* The holder of the section in slot was told, at told_ns on
 * CLOCK_MONOTONIC (as hl_now_ns() reads it), that its hold was lost: from
 * then on it may overlap others, and its increment may be lost.  Call it
 * before hl_mutex_checker_exit(), at most once per section.  A holder that
 * learns of the loss only when it lets go (an error from its release, say)
 * was not told in time and must not call this. */
void hl_mutex_checker_told(hl_mutex_checker *mc, long slot, uint64_t told_ns);

/* Record a problem a holder saw, such as an unexpected status.  The first
 * message is kept; every call counts. */
void hl_mutex_checker_fail(hl_mutex_checker *mc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Critical sections recorded so far. */
size_t hl_mutex_checker_count(const hl_mutex_checker *mc);

/* After every holder is done: true when there were no reported failures,
 * every section was closed, none overlapped another, the counter equals
 * the number of sections, and (with check_tokens) tokens strictly
 * increase in order of entry.  Otherwise false, with the first problem
 * described in why.  A told section counts as ended when its holder was
 * told (or when it began, if that was earlier), and each told section
 * may have cost the counter one increment. */
bool hl_mutex_checker_verify(const hl_mutex_checker *mc, bool check_tokens,
                             char *why, size_t cap);

/* After every holder is done: how many closed sections entered before
 * another one (not told of a loss by then) had left: 0 when verify finds
 * no overlap. */
size_t hl_mutex_checker_overlaps(const hl_mutex_checker *mc);

#endif
