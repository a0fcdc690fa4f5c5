/* How each lock kind reads the reply to an acquire attempt, for replies
 * the bounded reader builds from any bytes.
 *
 * The kinds are reached through their vtables, on lock handles of a
 * client that runs on a loop nobody runs, so no connection is ever
 * made.  kindkit/kindkit.h states what the scripts reply: {1, count, token}
 * granted, {0, ms} or {0, ms, how} held by another (how: the line's
 * flags, 0 to 7), {2} voided, {3} an upgrade: integers, but for a token,
 * which may also come as the text of a 64-bit integer.
 * A kind may read a reply as one of those only when it has that shape,
 * must take the numbers from it unchanged, and must call anything else a
 * bad reply; every kind reads a reply the same way.  Only the reentrant
 * lock also reads its lean form's answers, a bare integer: the count of
 * a grant when above 0, the attempt sent back for the full form at 0;
 * every other kind, and it below 0, calls a bare integer bad.
 *
 * The semaphores' attempts reply otherwise: {1, free permits}, the count
 * an integer or its text; {0, ms, how} refused, how the line's flags 0 to
 * 15 (4: nothing at the name, a semaphore never set; 8: the attempt's
 * wish was recorded); {2} voided; any of them possibly as {reply,
 * refusal} when a PUBLISH was refused.  Both semaphore kinds read a reply
 * alike. */
/* fuzz-max-len: 512 */
#include <ev.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "hilock/hilock.h"
#include "core/engine/lock_handle.h"
#include "core/transport/reply.h"
#include "core/transport/resp.h"
#include "semaphore/semaphore_internal.h"

enum { KINDS = 4, SEM_KINDS = 2 };
static const hl_kind *kinds[KINDS];
static const hl_kind *sem_kinds[SEM_KINDS];

static const hl_kind *kind_of(int rc, hilock_lock *lock)
{
    FUZZ_CHECK(rc == HILOCK_OK, "cannot make a lock: %s",
               hilock_last_error());
    return lock->kind;
}

/* The client and its handles live as long as the process. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    hilock_options *o = NULL;
    hilock_client *client = NULL;
    hilock_lock *lock = NULL;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    FUZZ_CHECK(loop != NULL, "no event loop");
    FUZZ_CHECK(hilock_options_create(&o) == HILOCK_OK &&
                   hilock_options_set_loop(o, loop) == HILOCK_OK &&
                   hilock_client_create(&client, o) == HILOCK_OK,
               "cannot make a client: %s", hilock_last_error());
    hilock_options_free(o);
    kinds[0] = kind_of(hilock_lock_create(&lock, client, "f"), lock);
    kinds[1] = kind_of(hilock_fair_lock_create(&lock, client, "f"), lock);
    kinds[2] = kind_of(hilock_read_lock_create(&lock, client, "f"), lock);
    kinds[3] = kind_of(hilock_write_lock_create(&lock, client, "f"), lock);
    hilock_semaphore *sem = NULL;
    FUZZ_CHECK(hilock_semaphore_create(&sem, client, "s") == HILOCK_OK,
               "cannot make a semaphore: %s", hilock_last_error());
    sem_kinds[0] = sem->lock->kind;
    hilock_permit_semaphore *permits = NULL;
    FUZZ_CHECK(hilock_permit_semaphore_create(&permits, client, "s") ==
                   HILOCK_OK,
               "cannot make a semaphore: %s", hilock_last_error());
    sem_kinds[1] = hilock_permit_semaphore_base(permits)->lock->kind;
    return 0;
}

/* The number an element stands for: an integer, or from the third on
 * (a token) the text of one too. */
static bool number_at(const hilock_reply *r, size_t i, long long *v)
{
    const hilock_reply *e = r->element[i];
    int64_t t;
    if (e->type == HILOCK_REPLY_INTEGER) {
        *v = e->integer;
        return true;
    }
    if (i < 2 || e->type != HILOCK_REPLY_STRING ||
        !hl_i64_parse(e->str, e->len, &t))
        return false;
    *v = t;
    return true;
}

static bool all_numbers(const hilock_reply *r)
{
    long long v;
    for (size_t i = 0; i < r->elements; i++)
        if (!number_at(r, i, &v))
            return false;
    return true;
}

/* A held reply's third element: the line's flags, 0 to 7 (first in
 * line, promised to another, the wish recorded). */
static bool held_flags_ok(const hilock_reply *r)
{
    long long how;
    return number_at(r, 2, &how) && how >= 0 && how <= 7;
}

/* A bare integer, which only the lean form answers. */
static void check_lean_reading(const hilock_reply *r,
                               const hl_acquire_result *res, bool lean)
{
    if (!lean || r->integer < 0) {
        FUZZ_CHECK(res->outcome == HL_ACQ_BAD_REPLY,
                   "a bare integer read as outcome %d", (int)res->outcome);
    } else if (r->integer == 0) {
        FUZZ_CHECK(res->outcome == HL_ACQ_FULL_FORM,
                   "0 from a lean form read as outcome %d",
                   (int)res->outcome);
    } else {
        FUZZ_CHECK(res->outcome == HL_ACQ_ACQUIRED &&
                       res->count == r->integer && res->token == 0,
                   "a lean grant not as the reply says");
    }
}

static void check_reading(const hilock_reply *r, const hl_acquire_result *res,
                          bool lean)
{
    if (r->type == HILOCK_REPLY_INTEGER) {
        check_lean_reading(r, res, lean);
        return;
    }
    bool shaped = r->type == HILOCK_REPLY_ARRAY && r->elements >= 1 &&
                  all_numbers(r);
    long long what = shaped ? r->element[0]->integer : -1;
    long long token = 0;
    switch (res->outcome) {
    case HL_ACQ_ACQUIRED:
        FUZZ_CHECK(shaped && what == 1 && r->elements == 3,
                   "granted on a reply that does not say so");
        (void)number_at(r, 2, &token);
        FUZZ_CHECK(res->count == r->element[1]->integer &&
                       res->token == (uint64_t)token,
                   "the count or token is not the reply's");
        break;
    case HL_ACQ_HELD: {
        long long how = 0;
        FUZZ_CHECK(shaped && what == 0 &&
                       (r->elements == 2 ||
                        (r->elements == 3 && held_flags_ok(r) &&
                         number_at(r, 2, &how))),
                   "held on a reply that does not say so");
        FUZZ_CHECK(res->ttl_ms == r->element[1]->integer,
                   "the ttl is not the reply's");
        FUZZ_CHECK(res->first_in_line == ((how & 1) != 0) &&
                       res->promised == ((how & 2) != 0) &&
                       res->wanted == ((how & 4) != 0),
                   "the line's flags are not the reply's");
        break;
    }
    case HL_ACQ_VOID:
        FUZZ_CHECK(shaped && what == 2, "voided on a reply that is not");
        break;
    case HL_ACQ_SELF_WAIT:
        FUZZ_CHECK(shaped && what == 3, "an upgrade on a reply that is not");
        break;
    case HL_ACQ_BAD_REPLY:
        /* The four shapes above must not be turned away. */
        FUZZ_CHECK(!(shaped && ((what == 1 && r->elements == 3) ||
                                (what == 0 && r->elements == 2) ||
                                (what == 0 && r->elements == 3 &&
                                 held_flags_ok(r)) ||
                                (what == 2 && r->elements == 1) ||
                                (what == 3 && r->elements == 1))),
                   "a reply of a known shape called bad");
        break;
    default:
        FUZZ_CHECK(0, "outcome %d", (int)res->outcome);
    }
}

static void read_with_every_kind(const hilock_reply *r)
{
    hl_acquire_result first = {0};
    /* kinds[0], the reentrant lock, reads lean answers besides. */
    bool lean_answer = r->type == HILOCK_REPLY_INTEGER;
    for (int k = 0; k < KINDS; k++) {
        hl_acquire_result res;
        /* Whatever the parser leaves unset must not matter, so start
         * from noise rather than zeros. */
        memset(&res, 0xa5, sizeof res);
        kinds[k]->parse_attempt(r, &res);
        check_reading(r, &res, k == 0);
        if (k == (lean_answer ? 1 : 0))
            first = res;
        if (k == 0 && lean_answer)
            continue;
        FUZZ_CHECK(res.outcome == first.outcome,
                   "the %s kind reads a reply as %d, the %s kind as %d",
                   kinds[k]->name, (int)res.outcome, kinds[0]->name,
                   (int)first.outcome);
    }
}

/* An integer element, or the text of one. */
static bool count_at(const hilock_reply *e, int64_t *v)
{
    if (e->type == HILOCK_REPLY_INTEGER) {
        *v = e->integer;
        return true;
    }
    return e->type == HILOCK_REPLY_STRING && hl_i64_parse(e->str, e->len, v);
}

static void check_semaphore_reading(const hilock_reply *reply,
                                    const hl_acquire_result *res)
{
    const hilock_reply *r = reply;
    if (r->type == HILOCK_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == HILOCK_REPLY_ARRAY)
        r = r->element[0];
    bool array = r->type == HILOCK_REPLY_ARRAY && r->elements >= 1 &&
                 r->elements <= 3 &&
                 r->element[0]->type == HILOCK_REPLY_INTEGER;
    long long what = array ? r->element[0]->integer : -1;
    int64_t v = 0, how = -1;
    bool granted = array && what == 1 && r->elements == 2 &&
                   count_at(r->element[1], &v);
    bool held = array && what == 0 && r->elements == 3 &&
                count_at(r->element[1], &v) &&
                r->element[2]->type == HILOCK_REPLY_INTEGER &&
                (how = r->element[2]->integer) >= 0 && how <= 15;
    bool voided = array && what == 2 && r->elements == 1;
    switch (res->outcome) {
    case HL_ACQ_ACQUIRED:
        FUZZ_CHECK(granted && res->free == v && res->count == 1,
                   "a semaphore grant not as the reply says");
        break;
    case HL_ACQ_HELD:
        FUZZ_CHECK(held && res->ttl_ms == v &&
                       res->first_in_line == ((how & 1) != 0) &&
                       res->promised == ((how & 2) != 0) &&
                       res->unset == ((how & 4) != 0) &&
                       res->wanted == ((how & 8) != 0),
                   "a semaphore refusal not as the reply says");
        break;
    case HL_ACQ_VOID:
        FUZZ_CHECK(voided, "a semaphore attempt voided on a reply that "
                           "is not");
        break;
    case HL_ACQ_BAD_REPLY:
        FUZZ_CHECK(!granted && !held && !voided,
                   "a semaphore reply of a known shape called bad");
        break;
    default:
        FUZZ_CHECK(0, "semaphore outcome %d", (int)res->outcome);
    }
}

static void read_with_semaphores(const hilock_reply *r)
{
    hl_acquire_result first = {0};
    for (int k = 0; k < SEM_KINDS; k++) {
        hl_acquire_result res;
        memset(&res, 0xa5, sizeof res);
        sem_kinds[k]->parse_attempt(r, &res);
        check_semaphore_reading(r, &res);
        if (k == 0)
            first = res;
        FUZZ_CHECK(res.outcome == first.outcome,
                   "the semaphore kinds read a reply differently");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hl_reply_limits lim = {.max_bytes = HILOCK_DEFAULT_MAX_REPLY_BYTES,
                           .max_elements = HILOCK_DEFAULT_MAX_REPLY_ELEMENTS,
                           .max_depth = HILOCK_DEFAULT_MAX_REPLY_DEPTH};
    redisReader *reader = hl_reader_create(&lim);
    if (reader == NULL)
        return 0;
    if (redisReaderFeed(reader, (const char *)data, size) == REDIS_OK) {
        hilock_reply *r;
        while (hl_reader_next(reader, &lim, &r) == 1) {
            read_with_every_kind(r);
            read_with_semaphores(r);
            hilock_reply_free(r);
        }
    }
    redisReaderFree(reader);
    return 0;
}
