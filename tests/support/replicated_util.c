#include "support/replicated_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/runtime/ack.h"

int hl_online_replicas(const hl_redis_server *s)
{
    char info[4096];
    if (hl_redis_server_cmd(s, info, sizeof info, "INFO", "replication",
                            (char *)NULL) != '$')
        return -1;
    return hl_ack_parse_info(info, strlen(info));
}

bool hl_online_is(void *probe)
{
    const hl_online_probe *p = probe;
    return hl_online_replicas(p->of) == p->want;
}

void hl_replica_of(hl_redis_server *node, const hl_redis_server *of)
{
    char reply[64], port[16];
    snprintf(port, sizeof port, "%d", of ? hl_redis_server_port(of) : 0);
    assert_int_equal(hl_redis_server_cmd(node, reply, sizeof reply,
                                         "REPLICAOF", of ? "127.0.0.1" : "NO",
                                         of ? port : "ONE", (char *)NULL),
                     '+');
}

void hl_sentinel_names(hl_redis_replicated *g, size_t i,
                       const hl_redis_server *node)
{
    char port[16], reply[256];
    snprintf(port, sizeof port, "%d", hl_redis_server_port(node));
    const char *mname = hl_redis_replicated_master_name(g);
    hl_redis_server *s = hl_redis_replicated_sentinel(g, i);
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "SENTINEL",
                                         "REMOVE", mname, (char *)NULL),
                     '+');
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "SENTINEL",
                                         "MONITOR", mname, "127.0.0.1", port,
                                         "2", (char *)NULL),
                     '+');
}

static hilock_client *sentinel_client(hl_redis_replicated *g,
                                      hilock_replica_ack policy,
                                      int64_t ack_timeout_ms,
                                      int64_t command_timeout_ms,
                                      int64_t connect_timeout_ms)
{
    hilock_options *o;
    hilock_client *c;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(
        hilock_options_set_url(o, hl_redis_replicated_sentinel_url(g)),
        HILOCK_OK);
    assert_int_equal(hilock_options_set_replica_ack(o, policy), HILOCK_OK);
    if (ack_timeout_ms != 0)
        assert_int_equal(
            hilock_options_set_replica_ack_timeout_ms(o, ack_timeout_ms),
            HILOCK_OK);
    if (command_timeout_ms != 0)
        assert_int_equal(
            hilock_options_set_command_timeout_ms(o, command_timeout_ms),
            HILOCK_OK);
    if (connect_timeout_ms != 0)
        assert_int_equal(
            hilock_options_set_connect_timeout_ms(o, connect_timeout_ms),
            HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    return c;
}

hilock_client *hl_sentinel_client(hl_redis_replicated *g,
                                  hilock_replica_ack policy,
                                  int64_t ack_timeout_ms,
                                  int64_t command_timeout_ms)
{
    return sentinel_client(g, policy, ack_timeout_ms, command_timeout_ms, 0);
}

hilock_client *hl_sentinel_client_waiting(hl_redis_replicated *g,
                                          hilock_replica_ack policy,
                                          int64_t connect_timeout_ms)
{
    return sentinel_client(g, policy, 0, 0, connect_timeout_ms);
}
