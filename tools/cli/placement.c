/* Where keys live on a Redis Cluster, as the cluster itself tells it:
 * the slot map from CLUSTER SLOTS and a key's slot from CLUSTER KEYSLOT.
 * The demo shows it beside what the library does, so it asks the
 * servers rather than repeating the library's own hashing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_is_cluster(hilock_client *c, bool *cluster)
{
    const char *argv[] = {"INFO", "cluster"};
    hilock_reply *r = NULL;
    int rc = hilock_client_command(c, 2, argv, NULL, &r);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "hilock: INFO cluster failed: %s (%s)\n",
                hilock_strerror(rc), hilock_last_error());
        return CLI_EXIT_UNAVAILABLE;
    }
    *cluster = r->type == HILOCK_REPLY_STRING &&
               strstr(r->str, "cluster_enabled:1") != NULL;
    hilock_reply_free(r);
    return 0;
}

static int master_index(cli_slot_map *m, const hilock_reply *node)
{
    if (node->type != HILOCK_REPLY_ARRAY || node->elements < 2 ||
        node->element[0]->type != HILOCK_REPLY_STRING ||
        node->element[1]->type != HILOCK_REPLY_INTEGER)
        return -1;
    char addr[sizeof m->addr[0]];
    const char *host = node->element[0]->str;
    snprintf(addr, sizeof addr, strchr(host, ':') ? "[%s]:%lld" : "%s:%lld",
             host, node->element[1]->integer);
    for (int i = 0; i < m->masters; i++)
        if (strcmp(m->addr[i], addr) == 0)
            return i;
    if (m->masters == CLI_MAX_MASTERS)
        return -1;
    memcpy(m->addr[m->masters], addr, sizeof addr);
    return m->masters++;
}

int cli_slot_map_read(hilock_client *c, cli_slot_map *m)
{
    memset(m, 0, sizeof *m);
    memset(m->owner, 0xff, sizeof m->owner);
    const char *argv[] = {"CLUSTER", "SLOTS"};
    hilock_reply *r = NULL;
    int rc = hilock_client_command(c, 2, argv, NULL, &r);
    if (rc != HILOCK_OK || r->type != HILOCK_REPLY_ARRAY) {
        fprintf(stderr, "hilock: CLUSTER SLOTS failed: %s (%s)\n",
                hilock_strerror(rc), hilock_last_error());
        hilock_reply_free(r);
        return CLI_EXIT_UNAVAILABLE;
    }
    /* Each range: start, end, then its master, then its replicas. */
    for (size_t i = 0; i < r->elements; i++) {
        const hilock_reply *range = r->element[i];
        if (range->type != HILOCK_REPLY_ARRAY || range->elements < 3 ||
            range->element[0]->type != HILOCK_REPLY_INTEGER ||
            range->element[1]->type != HILOCK_REPLY_INTEGER)
            continue;
        long long lo = range->element[0]->integer;
        long long hi = range->element[1]->integer;
        int who = master_index(m, range->element[2]);
        if (who < 0 || lo < 0 || hi >= CLI_CLUSTER_SLOTS || lo > hi)
            continue;
        for (long long s = lo; s <= hi; s++)
            m->owner[s] = (unsigned char)who;
        m->slots[who] += (int)(hi - lo + 1);
    }
    hilock_reply_free(r);
    return 0;
}

int cli_key_master(hilock_client *c, const cli_slot_map *m, const char *key,
                   size_t len, int *slot)
{
    const char *argv[] = {"CLUSTER", "KEYSLOT", key};
    size_t lens[] = {7, 7, len};
    hilock_reply *r = NULL;
    int rc = hilock_client_command(c, 3, argv, lens, &r);
    int who = -1;
    if (rc == HILOCK_OK && r->type == HILOCK_REPLY_INTEGER &&
        r->integer >= 0 && r->integer < CLI_CLUSTER_SLOTS) {
        *slot = (int)r->integer;
        if (m->owner[*slot] != 0xff)
            who = m->owner[*slot];
    }
    hilock_reply_free(r);
    return who;
}
