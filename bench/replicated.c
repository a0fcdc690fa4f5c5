/* The replicated rows' servers: a private master with N replicas (no
 * sentinels: nothing fails over in a run), and one client on the master
 * with the run's replica acknowledgement policy.  A client that refuses
 * the policy is no reason to stop: its reason becomes each point's
 * "error", so that a run shows what it could not measure. */
#include <string.h>

#include "bench.h"
#include "redis_replicated.h"

static hl_redis_replicated *group;

bool bench_ack_parse(const char *s, int *ack)
{
    static const char *const names[] = {"none", "one", "majority", "all"};
    static const int values[] = {HILOCK_ACK_NONE, HILOCK_ACK_ONE,
                                 HILOCK_ACK_MAJORITY, HILOCK_ACK_ALL};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i]) == 0) {
            *ack = values[i];
            return true;
        }
    return false;
}

int bench_replicated_start(const bench_args *a, hilock_client **out,
                           char *error, size_t cap)
{
    *out = NULL;
    hl_redis_replicated_config cfg = {.replicas = a->replicas};
    group = hl_redis_replicated_start(&cfg);
    if (group == NULL) {
        snprintf(error, cap, "could not start the master and its replicas");
        return -1;
    }
    hl_redis_server *m = hl_redis_replicated_master(group);
    int port = m ? hl_redis_server_port(m) : 0;
    fprintf(stderr, "hilock-bench: private master on port %d with %d "
                    "replicas, ack %s\n",
            port, a->replicas, a->ack);
    int ack = HILOCK_ACK_NONE;
    bench_ack_parse(a->ack, &ack);
    hilock_options *o;
    int rc = hilock_options_create(&o);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_host(o, "127.0.0.1");
    if (rc == HILOCK_OK)
        rc = hilock_options_set_port(o, port);
    if (rc == HILOCK_OK && a->connections > 0)
        rc = hilock_options_set_connections(o, a->connections);
    if (rc == HILOCK_OK && a->watchdog_ms > 0)
        rc = hilock_options_set_watchdog_timeout_ms(o, a->watchdog_ms);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_replica_ack(o, (hilock_replica_ack)ack);
    if (rc == HILOCK_OK)
        rc = hilock_client_create(out, o);
    hilock_options_free(o);
    if (rc != HILOCK_OK) {
        snprintf(error, cap, "client with replicas=%s: %s (%s)", a->ack,
                 hilock_strerror(rc), hilock_last_error());
        *out = NULL;
        return -2;
    }
    return 0;
}

void bench_replicated_stop(void)
{
    hl_redis_replicated_stop(group);
    group = NULL;
}
