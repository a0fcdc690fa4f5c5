#include "support/held_failover.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

void hl_command_ok(hl_redis_server *s, const char *a, const char *b,
                   const char *c, const char *d)
{
    char reply[512];
    int t = hl_redis_server_cmd(s, reply, sizeof reply, a, b, c, d,
                                (char *)NULL);
    if (t != '+')
        fail_msg("%s %s on port %d: %s", a, b, hl_redis_server_port(s),
                 reply);
}

/* SENTINEL REPLICAS of the group's master, into reply. */
static bool replicas_of(const hl_failover_probe *p, char *reply, size_t cap)
{
    return hl_redis_server_cmd(p->sentinel, reply, cap, "SENTINEL",
                               "REPLICAS",
                               hl_redis_replicated_master_name(p->group),
                               (char *)NULL) == '*';
}

bool hl_sentinel_knows_priorities(void *probe)
{
    const hl_failover_probe *p = probe;
    char reply[8192];
    if (!replicas_of(p, reply, sizeof reply))
        return false;
    int zeros = 0;
    for (const char *q = reply;
         (q = strstr(q, "slave-priority\r\n$1\r\n0\r\n")) != NULL; q++)
        zeros++;
    return zeros == p->zeros;
}

bool hl_sentinel_chose(void *probe)
{
    char reply[8192];
    return replicas_of(probe, reply, sizeof reply) &&
           strstr(reply, "promoted") != NULL;
}

void *hl_grant_main(void *grant)
{
    hl_grant *g = grant;
    g->rc = hilock_lock_try_acquire(g->lock, 0, 10000);
    snprintf(g->detail, sizeof g->detail, "%s", hilock_last_error());
    atomic_store(&g->done, true);
    return NULL;
}
