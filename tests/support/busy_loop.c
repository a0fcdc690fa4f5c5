#include "support/busy_loop.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "support/fixture.h"
#include "support/lock_helpers.h"

static void hold(hilock_lock *lock, int status,
                 const hilock_acquired *acquired, void *data)
{
    hl_busy_loop *bl = data;
    int64_t until = hl_now_ms() + bl->give_up_ms;

    (void)lock;
    (void)status;
    (void)acquired;
    atomic_store(&bl->busy, true);
    while (!atomic_load(&bl->release)) {
        if (hl_now_ms() >= until) {
            atomic_store(&bl->gave_up, true);
            return;
        }
        hl_sleep_ms(1);
    }
}

void hl_busy_loop_hold(hilock_lock *spare, hl_busy_loop *bl, int give_up_ms)
{
    memset(bl, 0, sizeof *bl);
    bl->give_up_ms = give_up_ms;
    assert_status(hilock_lock_acquire_async(spare, 1, 0, 1000, 0, hold, bl,
                                            NULL),
                  HILOCK_OK);
    if (!hl_wait_flag(&bl->busy, hl_widen(10000)))
        fail_msg("the loop did not run the busy callback");
}

bool hl_busy_loop_release(hl_busy_loop *bl)
{
    atomic_store(&bl->release, true);
    return !atomic_load(&bl->gave_up);
}
