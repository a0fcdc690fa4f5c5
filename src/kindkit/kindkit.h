/* What the kinds share besides the layout: Lua pieces pasted in front of
 * a script body at compile time, the running of a kind's script with the
 * lock's keys, the readers of the replies every kind's scripts give, and
 * the renew script, queries and status of the kinds whose holders sit in
 * a hash at the lock's name. */
#ifndef HL_KINDKIT_H
#define HL_KINDKIT_H

#include "core/engine/compose.h"
#include "core/engine/lock_handle.h"
#include "core/transport/script.h"
#include "core/transport/script_def.h"

/* The server's clock in ms: deadlines on the server never depend on the
 * clocks of clients.
 *
 * Lua's tonumber() reads a string twice (whether it is a number, then
 * the number), arithmetic once, and each read is a strtod of about a
 * thousand instructions.  So where a string is a number by construction
 * (the server's replies of numbers, our own clients' arguments) the
 * scripts read it by arithmetic ("x + 0" where a comparison needs the
 * number), and use tonumber() where a string may be anything. */
#define HL_LUA_NOW                                                          \
    "local function now_ms()\n"                                             \
    "  local t = redis.call('time')\n"                                      \
    "  return t[1] * 1000 + math.floor(t[2] / 1000)\n"                      \
    "end\n"

/* is_int(v): whether the string v is an integer as Redis's INCR reads
 * and writes one: decimal, '-' before a negative, no leading zero, within
 * 64 bits.  Lua's numbers are doubles, which cannot tell 2^63 - 1 from
 * 2^63 (nor 5 from "5.5" once read), so the range is read off the
 * digits, ten and nine at a time, each exact as a double. */
#define HL_LUA_IS_INT                                                       \
    "local function is_int(v)\n"                                            \
    "  if v == '0' then return true end\n"                                  \
    "  local d = string.match(v, '^%-?([1-9]%d*)$')\n"                      \
    "  if d == nil or #d > 19 then return false end\n"                      \
    "  if #d < 19 then return true end\n"                                   \
    "  local hi = tonumber(string.sub(d, 1, 10))\n"                         \
    "  local lo = tonumber(string.sub(d, 11))\n"                            \
    "  local top = string.sub(v, 1, 1) == '-' and 854775808 or 854775807\n" \
    "  return hi < 9223372036 or (hi == 9223372036 and lo <= top)\n"        \
    "end\n"

/* foreign(key, v, what): the answer of a script that found v at key
 * where it reads what ("a count of permits"), a number no client of the
 * layout writes otherwise; returned before the script changes anything
 * (see HL_FOREIGN_MARK in core/engine/compose.h).  Only so much of v
 * travels back as a message can quote. */
#define HL_LUA_FOREIGN                                                      \
    HL_LUA_IS_INT                                                           \
    "local function foreign(key, v, what)\n"                                \
    "  return {'" HL_FOREIGN_MARK "', key, string.sub(v, 1, 64), what}\n"   \
    "end\n"

/* The fencing token of an acquire: ARGV[3] '1' asks for one, ARGV[4] is
 * the token of the hold being joined ('0' when none).  A first hold draws
 * a new number from the counter; a reentry keeps its hold's.
 *
 * A draw is the counter's next value, raised to the server's clock in us
 * when that is ahead: a server that lost the counter (restarted without
 * persistence, or a replica that missed it) would otherwise count again
 * from 1 and hand out tokens already used.  The clock goes into the
 * counter as TIME's own digits, not through Lua's formatting of a number,
 * so the counter stays a plain integer string that Redisson's INCR goes
 * on from.  The comparison uses Lua numbers, exact below 2^53, which the
 * clock in us reaches in the year 2255 (past 2^53 the counter is ahead of
 * the clock however it rounds).  A token travels as a number below 2^53
 * and as text from there, so that a counter some other program set past
 * 2^53 still gives every hold a token of its own, exactly.
 *
 * token_refused(key), called before the acquire takes anything, answers
 * foreign() for a counter that is no 64-bit integer, which INCR would
 * refuse only after the grant: the lock would stay held by nobody until
 * its lease ran out.  Needs HL_LUA_FOREIGN. */
#define HL_LUA_TOKEN                                                        \
    "local function token_refused(key)\n"                                   \
    "  if ARGV[3] ~= '1' then return false end\n"                           \
    "  local c = redis.call('get', key)\n"                                  \
    "  if c == false or is_int(c) then return false end\n"                  \
    "  return foreign(key, c, 'a fencing token counter')\n"                 \
    "end\n"                                                                 \
    "local function token(key, count)\n"                                    \
    "  if ARGV[3] ~= '1' then return 0 end\n"                               \
    "  if count > 1 and ARGV[4] ~= '0' then return ARGV[4] end\n"           \
    "  local n = redis.call('incr', key)\n"                                 \
    "  local t = redis.call('time')\n"                                      \
    "  local us = t[1] .. string.format('%06d', tonumber(t[2]))\n"          \
    "  if n < tonumber(us) then\n"                                          \
    "    redis.call('set', key, us)\n"                                      \
    "    return us\n"                                                       \
    "  end\n"                                                               \
    "  if n < 2^53 then return n end\n"                                     \
    "  return redis.call('get', key)\n"                                     \
    "end\n"

/* hold_refused(key, v): foreign() when v, the value of the acquiring
 * owner's field in the lock's hash (false: none), is no hold count: an
 * integer from 1 to 2^53 - 2, so that the count one more is still exact
 * in Lua's doubles and in the reply.  false when it is one, or there is
 * none.  Called before the acquire takes anything, as HINCRBY would
 * refuse a string that is no integer and misanswer a count past 2^53.
 * Needs HL_LUA_FOREIGN. */
#define HL_LUA_HOLD_CHECK                                                   \
    "local function hold_refused(key, v)\n"                                 \
    "  if v == false or (is_int(v) and tonumber(v) >= 1 and\n"              \
    "                    tonumber(v) < 2^53 - 1) then\n"                    \
    "    return false\n"                                                    \
    "  end\n"                                                               \
    "  return foreign(key, v, 'a hold count')\n"                            \
    "end\n"

/* The start of a hash kind's release of one hold of field ARGV[2] in
 * KEYS[1]: replies -1 when it holds none, else sets left, the holds left.
 * A last hold, the common case, is left for the script to free without
 * counting it down; a count no client writes is refused by HINCRBY. */
#define HL_LUA_COUNT_DOWN HL_LUA_COUNT_DOWN_FIELD("ARGV[2]")
/* The same for the hold in the field the Lua expression field names. */
#define HL_LUA_COUNT_DOWN_FIELD(field)                                      \
    "local v = redis.call('hget', KEYS[1], " field ")\n"                    \
    "if not v then return -1 end\n"                                         \
    "local left = v == '1' and 0 or\n"                                      \
    "             redis.call('hincrby', KEYS[1], " field ", '-1')\n"

/* The wake-up PUBLISH of a release, which a refusal by the server's ACL
 * (a user without PUBLISH, or without the channel) must not abort: the
 * lock is freed by then, and an error reply would tell the caller it was
 * not.  answer(v) is then the script's reply: v itself, or {v, refusal}
 * when a PUBLISH was refused, which release.c takes apart (see the
 * release hooks in core/lock_handle.h). */
#define HL_LUA_ANNOUNCE                                                     \
    "local refusal = false\n"                                               \
    "local function announce(ch, msg)\n"                                    \
    "  local r = redis.pcall('publish', ch, msg)\n"                         \
    "  if type(r) == 'table' and r.err then refusal = r.err end\n"          \
    "end\n"                                                                 \
    "local function answer(v)\n"                                            \
    "  if refusal then return {v, refusal} end\n"                           \
    "  return v\n"                                                          \
    "end\n"

/* ms_until(s, now): the whole ms from now (ms) to the time s (a zset
 * score, ms), as a reply can carry it: false when s lies 2^53 ms or more
 * ahead (+inf too), a time no wait reaches; at least -(2^53 - 1) when it
 * lies that far behind (-inf too).  Redis casts a Lua number to an
 * integer reply, and +inf comes out as -2^63. */
#define HL_LUA_MS_UNTIL                                                     \
    "local function ms_until(s, now)\n"                                     \
    "  local ms = math.ceil(tonumber(s) - now)\n"                           \
    "  if ms >= 2^53 then return false end\n"                               \
    "  return math.max(ms, 1 - 2^53)\n"                                     \
    "end\n"

/* Set a key's expiry to at least ms. */
#define HL_LUA_EXTEND                                                       \
    "local function extend(key, ms)\n"                                      \
    "  if redis.call('pttl', key) < ms + 0 then\n"                          \
    "    redis.call('pexpire', key, ms)\n"                                  \
    "  end\n"                                                               \
    "end\n"

/* Keep a key of a line (its list, places, wishes) for at least ms, a
 * waiter timeout: a key with less left gets twice ms, so that the
 * attempts that renew places within ms find it long enough and write
 * nothing (with exactly ms, nearly every attempt rewrote the expiry of
 * each key, a call apiece).  The keys outlive their last waiter by at
 * most twice the waiter timeout; who is alive in them is told by scores,
 * never by the keys' expiry.  Waiter timeouts are at most an hour. */
#define HL_LUA_KEEP                                                         \
    "local function keep_key(key, ms)\n"                                    \
    "  if redis.call('pttl', key) < ms + 0 then\n"                          \
    "    redis.call('pexpire', key, 2 * ms)\n"                              \
    "  end\n"                                                               \
    "end\n"

/* KEYS: names.  ARGV: lease ms, then one field per name.  Renews each
 * lock whose hash still holds the field; replies 1/0 per lock. */
extern hl_script hl_hash_renew;
extern const hl_script_def hl_hash_renew_def;
/* Make kindkit's scripts ready (any thread, any number of times): every
 * kind that runs one calls it once. */
void hl_kindkit_scripts_init(void);

/* The same for holders whose client sets a lock delay (hl_kind's
 * renew_delayed): KEYS in pairs, a name and its delay key; ARGV: lease
 * ms, delay ms, then one field per lock.  A renewed lock's delay key
 * expires the delay after its lease.  Ready with hl_hash_renew. */
extern hl_script hl_hash_renew_delayed;
extern const hl_script_def hl_hash_renew_delayed_def;

/* A lock's delay key, "hilock_lock_delay:{NAME}" (hl_kind.delay_key of
 * the reentrant and fair kinds).  0 or HILOCK_ENOMEM; release with
 * hl_aux_name_done either way. */
int hl_lock_delay_key(const char *name, size_t name_len, hl_aux_name *out);

/* A lock's channel under prefix, with field appended when given: 0 or
 * HILOCK_ENOMEM.  hl_lock_channel_of is the channel op of the kinds that
 * share Redisson's lock channel (reentrant, fair). */
int hl_channel_under(const char *prefix, const hilock_lock *lock,
                     const char *field, size_t field_len, hl_aux_name *out);
int hl_lock_channel_of(const hilock_lock *lock, const char *field,
                       size_t field_len, hl_aux_name *out);

/* The lock's keys named by prefixes (NULL: the kind's channel for the
 * lock), all or none: 0 or HILOCK_ENOMEM.  Release with
 * hl_aux_names_done. */
int hl_lock_keys(const hilock_lock *lock, int n, const char *const *prefixes,
                 hl_aux_name *out);

/* Most arguments hl_run_def passes after the keys. */
#define HL_LOCK_SCRIPT_MAX_ARGS 16

/* Run def's script on the lock's connection with KEYS as def names them
 * (given[i], of given_lens[i] bytes, standing for its i-th hl_key_given)
 * and ARGV args.  HILOCK_OK, HILOCK_ECLOSED, HILOCK_ENOMEM, or
 * HILOCK_EINVAL for a def this cannot run (a batch, too many keys or
 * arguments, a given key too many or too few): fn not called then. */
int hl_run_def(hilock_lock *lock, const hl_script_def *def, int ngiven,
               const char *const *given, const size_t *given_lens,
               int nargs, const char *const *args, const size_t *arg_lens,
               hl_request_fn *fn, void *data);

/* Run a kind's release into a condition's line (kindkit/cond_lua.h):
 * with_delay when the client has a lock delay, else plain.  args and
 * lens (room for HL_LOCK_SCRIPT_MAX_ARGS) hold the release's first n
 * arguments; the delay (with_delay only), the waiter's id and its waiter
 * timeout follow, and the condition's line and alive are the given
 * keys.  As hl_run_def. */
int hl_run_release_into_cond(hilock_lock *lock, const hl_script_def *plain,
                             const hl_script_def *with_delay, int n,
                             const char **args, size_t *lens,
                             const hl_cond_entry *e, hl_request_fn *fn,
                             void *data);

/* The same for a def that names no given key. */
int hl_run_lock_def(hilock_lock *lock, const hl_script_def *def, int nargs,
                    const char *const *args, const size_t *arg_lens,
                    hl_request_fn *fn, void *data);

/* The text of an attempt's numbers, for hl_attempt_argv. */
typedef struct hl_attempt_text {
    char lease[24], token[24], wait[24], keep[24], delay[24];
} hl_attempt_text;

/* An attempt's ARGV as the lock kinds' acquire scripts read it, into args
 * and lens (room for HL_LOCK_SCRIPT_MAX_ARGS), of text t: lease ms,
 * field, fenced (0/1), known token, nonce, waiter timeout ms; with
 * with_keep (a line of clients) how long the client stays in line; with
 * a wish (a->want) what to do with it and the claim; and last, only where
 * delay_ms > 0, the lock delay, so that clients without one send what
 * they always sent.  Returns how many. */
int hl_attempt_argv(const hl_attempt_args *a, bool with_keep,
                    int64_t delay_ms, hl_attempt_text *t, const char **args,
                    size_t *lens);

/* A lock's request channel and request (hl_kind.request_channel and
 * request_release), the same for every kind that has them. */
int hl_release_request_channel(const hilock_lock *lock, hl_aux_name *out);
int hl_release_request_send(hilock_lock *lock, const char *reason,
                            size_t reason_len, hl_request_fn *fn, void *data);

/* Before an acquire: HILOCK_OK, or HILOCK_EINVAL (with the detail set)
 * on a cluster for a name whose keys cannot share its slot (see
 * hl_layout_one_slot), which is refused before anything is granted. */
int hl_check_name_slot(const hilock_lock *lock);

/* A number a script answered: an integer reply, or a 64-bit integer as
 * text (hl_i64_parse), which is how a script answers a value that may
 * lie beyond the 2^53 of Lua's doubles.  false for anything else. */
bool hl_reply_i64(const hilock_reply *r, int64_t *out);

/* Every kind's acquire script replies {1, count, token} when granted
 * (the token a number, or text: see HL_LUA_TOKEN), {0, ms to wait at
 * most} (line_per_client kinds: {0, ms, 1 when first in line, plus 2 when
 * free but promised to another client, plus 4 when its wish was recorded})
 * when held by another, {2} when voided, {3} when it would wait for
 * a hold of the same owner. */
void hl_parse_acquire_reply(const hilock_reply *r, hl_acquire_result *out);

/* Every kind's release script replies -1 (nothing held by the owner),
 * the count left, 0 (freed), -2 (the owner's holds are gone, others
 * still hold the lock), or for line_per_client kinds -3 (freed and
 * promised to another client) or -4 (freed, promised to nobody). */
hl_release_outcome hl_parse_release_reply(const hilock_reply *r,
                                          int64_t *remaining);

/* The queries of a lock whose holders are fields of the hash at its name:
 * EXISTS, HGET of "<field><suffix>" (hl_hash_query: no suffix) and PTTL. */
int hl_hash_query(hilock_lock *lock, hl_query q, const char *field,
                  size_t field_len, hl_request_fn *fn, void *data);
int hl_hash_query_suffixed(hilock_lock *lock, hl_query q, const char *field,
                           size_t field_len, const char *suffix,
                           hl_request_fn *fn, void *data);
bool hl_hash_parse_query(hl_query q, const hilock_reply *r, int64_t *value);

/* Every kind's status is made here, in memory that
 * hilock_lock_status_free (also here) knows how to free.
 * A status script of a hash kind replies {pttl, HGETALL of the name,
 * waiters, subscribers, seen[, delay]}: waiters a flat list of member and
 * ms its place has left (false: no time kept), subscribers -1 when not
 * counted, seen 1 when the server holds data only this kind writes, and
 * for kinds that keep a lock delay the PTTL of its key.
 * rwlock says that the hash holds a mode field and writers' fields with
 * the layout's suffix.  Takes reply; HILOCK_OK, HILOCK_EPROTO or
 * HILOCK_ENOMEM. */
int hl_hash_parse_status(hilock_reply *reply, const char *kind_label,
                         bool rwlock, hilock_lock_status **out);

#endif
