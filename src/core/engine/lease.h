/* The lease engine (watchdog), shared by every lock kind.
 *
 * Each held lock has a lease with a local deadline on the monotonic clock:
 * the time its grant or last confirmed renewal was sent, plus the lease,
 * minus a safety margin for clock drift (1 % + 2 ms).  Watchdog leases are
 * renewed together every third of the watchdog timeout, in batched script
 * calls of at most 100 leases each.  A lease is lost when a renewal says
 * it is no longer held, or when its deadline passes without a confirmed
 * renewal; its owner is told once.  Loop thread only. */
#ifndef HL_LEASE_H
#define HL_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/loop/io.h"
#include "core/base/monotime.h"

struct hilock_client;

/* The client's lease engine, created on first use; NULL when memory runs
 * out or the client is closed.  Loop thread only. */
struct hl_lease_engine *hl_client_leases(struct hilock_client *client);

struct hl_kind;
struct hilock_client;
typedef struct hl_lease_engine hl_lease_engine;
typedef struct hl_lease hl_lease;

/* A lease lives inside its owner's structure (one allocation per held
 * lock), which also says what it renews (hl_lease_subject_fn): a client
 * may hold a hundred thousand leases, and the owner knows its kind, key
 * and owner already.  The engine may still name a lease in a renewal in
 * flight after the owner stopped it; the owner then frees it only when
 * told. */
struct hl_lease {
    hl_lease_engine *engine;
    hl_lease *prev; /* in the engine's running leases, by deadline */
    hl_lease *next;
    hl_monotime deadline;
    hl_monotime started;
    int32_t batches;     /* renewal batches in flight that name it */
    uint16_t slot;       /* the key's cluster slot */
    bool watchdog;
    bool releasing;
    bool stopped;        /* neither renewed nor reported any more */
    bool owner_released; /* the owner called hl_lease_stop */
};

/* What a lease renews, read from its owner's structure whenever the
 * engine needs it; it stays the same from hl_lease_start until the
 * engine gives the lease back, and the key stays valid as long. */
typedef struct hl_lease_subject {
    const struct hl_kind *kind;
    const char *key;
    size_t key_len;
    uint64_t owner;
} hl_lease_subject;
typedef hl_lease_subject hl_lease_subject_fn(const hl_lease *lease);

/* Told once, when the lease is lost, with why (a sentence, static); the
 * lease is stopped by then (the owner still calls hl_lease_stop to let
 * go of it). */
typedef void hl_lease_lost_fn(hl_lease *lease, const char *why);
/* The engine is done with a lease whose hl_lease_stop returned false: the
 * owner may free the memory around it now. */
typedef void hl_lease_release_fn(hl_lease *lease);

#define HL_LEASE_BATCH 100

/* max_hold_ms > 0 stops renewing a lease once it has been held that
 * long. */
hl_lease_engine *hl_lease_engine_create(struct hilock_client *client,
                                        int64_t watchdog_ms,
                                        int64_t max_hold_ms,
                                        hl_lease_subject_fn *subject,
                                        hl_lease_lost_fn *on_lost,
                                        hl_lease_release_fn *on_release);
/* Stops every lease without reporting; the owners still stop theirs. */
void hl_lease_engine_free(hl_lease_engine *e);

/* Start the lease at l (the owner's memory, whose subject the engine's
 * subject function already tells) for a grant sent at granted_at.
 * lease_ms 0 means the watchdog (the engine's timeout, renewed); > 0 a
 * fixed lease.  The owner's field is written when a renewal is sent. */
void hl_lease_start(hl_lease_engine *e, hl_lease *l, hl_monotime granted_at,
                    int64_t lease_ms);

/* A grant sent at granted_at set the lease again (an owner took its lock again):
 * move the deadline if that is later.  lease_ms as in hl_lease_start. */
void hl_lease_regranted(hl_lease *l, hl_monotime granted_at,
                        int64_t lease_ms);

/* The server keeps the grant no longer than lease_ms from granted_at (a
 * direct hand-off's, which lasts as long as the waiting client's place):
 * the deadline comes no later than that, and a renewal round comes
 * before it for a watchdog lease. */
void hl_lease_cap(hl_lease *l, hl_monotime granted_at, int64_t lease_ms);

/* While a release that may free the lock is in flight, renewals skip the
 * lease and a "not held" answer is no loss. */
void hl_lease_set_releasing(hl_lease *l, bool releasing);

/* Report the lease lost now, for why (static): its owner learnt so from
 * an answer of its own.  Nothing for a stopped lease. */
void hl_lease_lose(hl_lease *l, const char *why);

/* No more renewals or reports.  Returns true when the owner may free the
 * lease's memory at once; false when a renewal in flight still names it,
 * and the engine's on_release will say when. */
bool hl_lease_stop(hl_lease *l);

int64_t hl_lease_engine_watchdog_ms(const hl_lease_engine *e);

/* A renewal round now, besides the timer's: the timer keeps its rhythm.
 * Tests use it to place a round exactly. */
void hl_lease_engine_renew_now(hl_lease_engine *e);
/* A round now, and a check of every lease of a fixed time besides (the
 * master behind them changed): a lease whose grant is missing is
 * reported lost when the answers come. */
void hl_lease_engine_check_all(hl_lease_engine *e);

/* Report every running lease lost now (its server restarted).  Leases
 * being released are left to their release. */
void hl_lease_engine_lose_all(hl_lease_engine *e);

/* Counters for tests and the benchmark. */
typedef struct hl_lease_stats {
    uint64_t renew_calls;   /* script calls sent */
    uint64_t renewed;       /* leases confirmed */
    uint64_t lost;          /* leases reported lost */
    uint64_t active;        /* leases running now */
    uint64_t renewing;      /* script calls sent and not yet answered */
} hl_lease_stats;
hl_lease_stats hl_lease_engine_stats(const hl_lease_engine *e);

#endif
