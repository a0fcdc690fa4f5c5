#include "support/cluster_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/transport/keyslot.h"
#include "support/fixture.h"

hilock_client *hl_fx_cluster_client(const char *url, int64_t watchdog_ms,
                                    int64_t command_ms)
{
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    if (watchdog_ms > 0)
        assert_int_equal(hilock_options_set_watchdog_timeout_ms(o,
                                                                watchdog_ms),
                         HILOCK_OK);
    if (command_ms > 0)
        assert_int_equal(hilock_options_set_command_timeout_ms(o, command_ms),
                         HILOCK_OK);
    hilock_client *c = NULL;
    int rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    if (rc != HILOCK_OK)
        fail_msg("client on %s: %s: %s", url, hilock_errname(rc),
                 hilock_last_error());
    return c;
}

typedef struct slot_probe {
    hl_redis_cluster *c;
    int slot;
    hl_redis_server *master;
} slot_probe;

static bool slot_served(void *arg)
{
    slot_probe *p = arg;
    p->master = hl_redis_cluster_master_of(p->c, p->slot);
    return p->master != NULL;
}

hl_redis_server *hl_fx_master_of(hl_redis_cluster *c, int slot)
{
    slot_probe p = {c, slot, NULL};
    if (!hl_wait_until(slot_served, &p, hl_widen(15000)))
        fail_msg("no master serves slot %d", slot);
    return p.master;
}

hl_redis_server *hl_fx_master(hl_redis_cluster *c, int i)
{
    const int probes[3] = {0, HL_CLUSTER_SLOTS / 2, HL_CLUSTER_SLOTS - 1};
    assert_true(i >= 0 && i < 3);
    return hl_fx_master_of(c, probes[i]);
}

void hl_fx_key_on(hl_redis_cluster *c, hl_redis_server *m,
                  const char *prefix, char *out, size_t cap)
{
    for (int n = 0; n < 1000; n++) {
        snprintf(out, cap, "%s-%d", prefix, n);
        if (hl_redis_cluster_master_of(c, (int)hl_keyslot(out,
                                                          strlen(out))) == m)
            return;
    }
    fail_msg("no key of prefix %s on the master", prefix);
}

void hl_fx_node_id(hl_redis_server *s, char *out, size_t cap)
{
    char reply[256];
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "CLUSTER",
                                         "MYID", (char *)NULL),
                     '$');
    const char *id = strstr(reply, "\r\n");
    assert_non_null(id);
    snprintf(out, cap, "%.*s", (int)strcspn(id + 2, "\r"), id + 2);
}

void hl_fx_assign_slot(hl_redis_cluster *c, int slot, hl_redis_server *dst)
{
    char id[64], slot_text[16], reply[256];
    hl_fx_node_id(dst, id, sizeof id);
    snprintf(slot_text, sizeof slot_text, "%d", slot);
    /* SETSLOT NODE raises no epoch on a node that was not importing the
     * slot: a heartbeat the old owner sent before it let go, carrying a
     * greater epoch, would hand the slot back to it wherever it lands
     * after the SETSLOT, the new owner included, and requests would
     * bounce between the two.  The new owner takes the greatest epoch
     * first, so its claim wins every such conflict. */
    if (hl_redis_server_cmd(dst, reply, sizeof reply, "CLUSTER", "BUMPEPOCH",
                            (char *)NULL) != '+')
        fail_msg("CLUSTER BUMPEPOCH on the slot's new master: %s", reply);
    if (hl_redis_server_cmd(dst, reply, sizeof reply, "CLUSTER", "SETSLOT",
                            slot_text, "NODE", id, (char *)NULL) != '+')
        fail_msg("SETSLOT %d NODE on its new master: %s", slot, reply);
    for (size_t i = 0; i < hl_redis_cluster_size(c); i++) {
        hl_redis_server *n = hl_redis_cluster_node(c, i);
        if (n == dst)
            continue;
        /* Replicas refuse SETSLOT; they follow their masters. */
        assert_true(hl_redis_server_cmd(n, reply, sizeof reply, "CLUSTER",
                                        "SETSLOT", slot_text, "NODE", id,
                                        (char *)NULL) > 0);
    }
}
