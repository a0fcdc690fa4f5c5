/* The mutual-exclusion checker; see mutex_checker.h. */
#include "support/mutex_checker.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef struct hl_mc_record {
    uint64_t enter_ns;
    uint64_t exit_ns;
    uint64_t told_ns; /* 0: never told */
    uint64_t token;
    uint32_t holder;
} hl_mc_record;

struct hl_mutex_checker {
    size_t map_len;
    size_t capacity;
    int spin_us;
    atomic_size_t used;
    /* Read and written without a read-modify-write on purpose: the lock
     * under test is the only thing that keeps the increments apart. */
    atomic_uint_fast64_t counter;
    atomic_uint failures;
    atomic_size_t told;
    atomic_flag message_taken;
    char message[256];
    hl_mc_record records[];
};

static uint64_t hl_mc_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

hl_mutex_checker *hl_mutex_checker_create(size_t capacity, int spin_us)
{
    size_t len = sizeof(hl_mutex_checker) + capacity * sizeof(hl_mc_record);
    hl_mutex_checker *mc = mmap(NULL, len, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (mc == MAP_FAILED)
        return NULL;
    /* The mapping starts zeroed, which is every field's initial state
     * except these. */
    mc->map_len = len;
    mc->capacity = capacity;
    mc->spin_us = spin_us;
    atomic_init(&mc->used, 0);
    atomic_init(&mc->counter, 0);
    atomic_init(&mc->failures, 0);
    atomic_init(&mc->told, 0);
    atomic_flag_clear(&mc->message_taken);
    return mc;
}

void hl_mutex_checker_free(hl_mutex_checker *mc)
{
    if (mc != NULL)
        munmap(mc, mc->map_len);
}

void hl_mutex_checker_fail(hl_mutex_checker *mc, const char *fmt, ...)
{
    va_list ap;

    atomic_fetch_add(&mc->failures, 1);
    if (atomic_flag_test_and_set(&mc->message_taken))
        return;
    va_start(ap, fmt);
    vsnprintf(mc->message, sizeof mc->message, fmt, ap);
    va_end(ap);
}

long hl_mutex_checker_enter(hl_mutex_checker *mc, uint32_t holder,
                            uint64_t token)
{
    size_t slot = atomic_fetch_add(&mc->used, 1);
    uint64_t seen, until;
    hl_mc_record *r;

    if (slot >= mc->capacity) {
        hl_mutex_checker_fail(mc, "more than %zu critical sections",
                              mc->capacity);
        return -1;
    }
    r = &mc->records[slot];
    r->enter_ns = hl_mc_now_ns();
    r->holder = holder;
    r->token = token;
    seen = atomic_load_explicit(&mc->counter, memory_order_relaxed);
    until = hl_mc_now_ns() + (uint64_t)mc->spin_us * 1000u;
    while (hl_mc_now_ns() < until)
        ;
    atomic_store_explicit(&mc->counter, seen + 1, memory_order_relaxed);
    return (long)slot;
}

void hl_mutex_checker_exit(hl_mutex_checker *mc, long slot)
{
    if (slot >= 0 && (size_t)slot < mc->capacity)
        mc->records[slot].exit_ns = hl_mc_now_ns();
}

void hl_mutex_checker_told(hl_mutex_checker *mc, long slot, uint64_t told_ns)
{
    if (slot < 0 || (size_t)slot >= mc->capacity)
        return;
    /* Never 0, which means "not told". */
    mc->records[slot].told_ns = told_ns ? told_ns : 1;
    atomic_fetch_add(&mc->told, 1);
}

size_t hl_mutex_checker_count(const hl_mutex_checker *mc)
{
    size_t n = atomic_load(&mc->used);

    return n < mc->capacity ? n : mc->capacity;
}

static int hl_mc_by_entry(const void *a, const void *b)
{
    const hl_mc_record *x = a, *y = b;

    return x->enter_ns < y->enter_ns ? -1 : x->enter_ns > y->enter_ns;
}

bool hl_mutex_checker_verify(const hl_mutex_checker *mc, bool check_tokens,
                             char *why, size_t cap)
{
    size_t n = hl_mutex_checker_count(mc);
    unsigned failures = atomic_load(&mc->failures);
    uint64_t counter = atomic_load(&mc->counter);
    size_t told = atomic_load(&mc->told);
    hl_mc_record *sorted;
    const hl_mc_record *latest = NULL;
    bool ok = true;
    size_t i;

    if (failures != 0) {
        snprintf(why, cap, "%u holder failure(s), the first: %s", failures,
                 mc->message);
        return false;
    }
    if (told == 0 ? counter != n : counter > n || counter + told < n) {
        snprintf(why, cap,
                 "the counter is %llu after %zu critical sections (%zu of "
                 "them told of a loss): updates were lost",
                 (unsigned long long)counter, n, told);
        return false;
    }
    sorted = malloc(n ? n * sizeof *sorted : 1);
    if (sorted == NULL) {
        snprintf(why, cap, "out of memory");
        return false;
    }
    memcpy(sorted, mc->records, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, hl_mc_by_entry);
    for (i = 0; i < n; i++) {
        hl_mc_record *r = &sorted[i];

        /* A holder told of a loss must stop at once; what it does after
         * that is no overlap of the lock's making.  Closed sections
         * only: an unclosed one is reported below as it is. */
        if (r->told_ns != 0 && r->exit_ns != 0 && r->told_ns < r->exit_ns)
            r->exit_ns = r->told_ns > r->enter_ns ? r->told_ns : r->enter_ns;
    }
    for (i = 0; i < n && ok; i++) {
        const hl_mc_record *r = &sorted[i];

        if (r->exit_ns == 0 || r->exit_ns < r->enter_ns) {
            snprintf(why, cap, "the section of holder %u entered at %llu ns "
                     "was never closed", r->holder,
                     (unsigned long long)r->enter_ns);
            ok = false;
        } else if (latest != NULL && r->enter_ns <= latest->exit_ns) {
            /* Compared with the section that ends last so far, not only
             * the previous one: a long section can cover several. */
            snprintf(why, cap, "holder %u entered at %llu ns, before holder "
                     "%u left at %llu ns", r->holder,
                     (unsigned long long)r->enter_ns, latest->holder,
                     (unsigned long long)latest->exit_ns);
            ok = false;
        } else if (check_tokens && i > 0 && r->token <= sorted[i - 1].token) {
            snprintf(why, cap, "token %llu of holder %u follows token %llu "
                     "of holder %u", (unsigned long long)r->token, r->holder,
                     (unsigned long long)sorted[i - 1].token,
                     sorted[i - 1].holder);
            ok = false;
        }
        if (latest == NULL || r->exit_ns > latest->exit_ns)
            latest = r;
    }
    free(sorted);
    return ok;
}

size_t hl_mutex_checker_overlaps(const hl_mutex_checker *mc)
{
    size_t n = hl_mutex_checker_count(mc), overlaps = 0;
    hl_mc_record *sorted = malloc(n ? n * sizeof *sorted : 1);
    uint64_t latest_exit = 0;

    if (sorted == NULL)
        return 0;
    memcpy(sorted, mc->records, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, hl_mc_by_entry);
    for (size_t i = 0; i < n; i++) {
        hl_mc_record *r = &sorted[i];
        if (r->exit_ns == 0)
            continue;
        /* As verify reads it: a told section ends when it was told. */
        if (r->told_ns != 0 && r->told_ns < r->exit_ns)
            r->exit_ns = r->told_ns > r->enter_ns ? r->told_ns : r->enter_ns;
        if (i > 0 && r->enter_ns <= latest_exit)
            overlaps++;
        if (r->exit_ns > latest_exit)
            latest_exit = r->exit_ns;
    }
    free(sorted);
    return overlaps;
}
