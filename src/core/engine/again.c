/* A lock write a replica refused, made again on the master (again.h). */
#include "core/engine/again.h"

#include "core/base/error_detail.h"
#include "core/config/option_values.h"
#include "core/runtime/client_state.h"

static void on_due(hl_timer *t)
{
    hl_again *a = t->data;
    a->waiting = false;
    a->fn(a->data);
}

void hl_again_init(hl_again *a, hilock_lock *lock, hl_again_fn *fn,
                   void *data)
{
    hl_timer_init(&a->timer, lock->client->loop, on_due, a);
    a->fn = fn;
    a->data = data;
    a->until = 0;
    a->waiting = false;
}

bool hl_again_after_refusal(hl_again *a, hilock_lock *lock, const char *why)
{
    hilock_client *c = lock->client;
    if (c == NULL || why == NULL || lock->destroyed ||
        hl_redis_error_status(why) != HILOCK_EREADONLY ||
        (c->sentinel == NULL && c->cluster == NULL))
        return false;
    hl_monotime now = hl_monotime_now();
    if (a->until == 0)
        a->until = hl_after_ms(now, c->opts->command_timeout_ms);
    if (now >= a->until)
        return false;
    hl_client_replica_answered(c);
    a->waiting = true;
    hl_monotime left = a->until - now;
    hl_timer_arm(&a->timer,
                 left < HL_AGAIN_EVERY_US ? left : HL_AGAIN_EVERY_US);
    return true;
}

bool hl_again_stop(hl_again *a)
{
    if (!a->waiting)
        return false;
    hl_timer_stop(&a->timer);
    a->waiting = false;
    return true;
}
