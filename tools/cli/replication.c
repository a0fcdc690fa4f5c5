/* The master a client writes its locks to, and its replicas, as the
 * servers tell it: the master's address is the local end of the client's
 * own connection (CLIENT INFO laddr), so it is the address the client
 * reached, whether it came from the URL or from the sentinels; the
 * replicas are those the master reports (INFO replication), the same
 * count the replica acknowledgement policy is measured against.  Both go
 * through hilock_client_command, which sends them to the master. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char *cli_ack_name(int ack)
{
    switch (ack) {
    case HILOCK_ACK_NONE:
        return "none";
    case HILOCK_ACK_ONE:
        return "one";
    case HILOCK_ACK_MAJORITY:
        return "majority";
    case HILOCK_ACK_ALL:
        return "all";
    }
    return "?";
}

/* The reply to a command without arguments beyond argv, as a string; NULL
 * when it failed or is not one (a user whose ACL refuses it, say). */
static hilock_reply *string_reply(hilock_client *c, int argc,
                                  const char *const *argv)
{
    hilock_reply *r = NULL;
    if (hilock_client_command(c, argc, argv, NULL, &r) != HILOCK_OK ||
        r->type != HILOCK_REPLY_STRING) {
        hilock_reply_free(r);
        return NULL;
    }
    return r;
}

/* The value of key=... in a line of key=value pairs separated by ' ' or
 * ',', copied into out; false when absent. */
static bool pair_value(const char *line, const char *key, char *out,
                       size_t cap)
{
    size_t klen = strlen(key);
    for (const char *p = line; *p != '\0' && *p != '\r' && *p != '\n';) {
        if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
            p += klen + 1;
            size_t n = strcspn(p, " ,\r\n");
            snprintf(out, cap, "%.*s", (int)n, p);
            return true;
        }
        p += strcspn(p, " ,\r\n");
        if (*p == ' ' || *p == ',')
            p++;
    }
    return false;
}

/* One "slaveN:ip=...,port=...,state=..." line of INFO replication. */
static void read_replica(cli_replication *r, const char *line)
{
    if (r->replicas == CLI_MAX_REPLICAS)
        return;
    char ip[64], port[16];
    if (!pair_value(line, "ip", ip, sizeof ip) ||
        !pair_value(line, "port", port, sizeof port))
        return;
    int i = r->replicas++;
    snprintf(r->replica[i], sizeof r->replica[i],
             strchr(ip, ':') ? "[%s]:%s" : "%s:%s", ip, port);
    if (!pair_value(line, "state", r->state[i], sizeof r->state[i]))
        snprintf(r->state[i], sizeof r->state[i], "?");
}

void cli_replication_read(hilock_client *c, cli_replication *r)
{
    memset(r, 0, sizeof *r);
    const char *client_info[] = {"CLIENT", "INFO"};
    hilock_reply *ci = string_reply(c, 2, client_info);
    if (ci != NULL) {
        /* laddr is the line's own key=value form; redis 6.2 and later. */
        char *laddr = strstr(ci->str, " laddr=");
        if (laddr != NULL)
            pair_value(laddr + 1, "laddr", r->master, sizeof r->master);
        hilock_reply_free(ci);
    }
    const char *info[] = {"INFO", "replication"};
    hilock_reply *ir = string_reply(c, 2, info);
    if (ir == NULL)
        return;
    r->info_read = true;
    for (const char *line = ir->str; *line != '\0';) {
        size_t n = strcspn(line, "\r\n");
        if (strncmp(line, "role:", 5) == 0)
            snprintf(r->role, sizeof r->role, "%.*s", (int)(n - 5),
                     line + 5);
        else if (strncmp(line, "slave", 5) == 0 && line[5] >= '0' &&
                 line[5] <= '9' && strchr(line, ':') != NULL &&
                 (size_t)(strchr(line, ':') - line) < n)
            read_replica(r, strchr(line, ':') + 1);
        line += n;
        line += strspn(line, "\r\n");
    }
    hilock_reply_free(ir);
}

void cli_replication_json(FILE *out, const cli_replication *r,
                          const hilock_options *opts)
{
    fputs("{\"master\":", out);
    if (r->master[0] != '\0')
        cli_json_string(out, r->master, strlen(r->master));
    else
        fputs("null", out);
    if (r->info_read && strcmp(r->role, "master") != 0) {
        /* A URL that names a replica: say so rather than call it the
         * master. */
        fputs(",\"role\":", out);
        cli_json_string(out, r->role, strlen(r->role));
    }
    fputs(",\"replicas\":", out);
    if (!r->info_read) {
        fputs("null", out);
    } else {
        putc('[', out);
        for (int i = 0; i < r->replicas; i++) {
            fputs(i > 0 ? ",{\"addr\":" : "{\"addr\":", out);
            cli_json_string(out, r->replica[i], strlen(r->replica[i]));
            fputs(",\"state\":", out);
            cli_json_string(out, r->state[i], strlen(r->state[i]));
            putc('}', out);
        }
        putc(']', out);
    }
    const char *sentinel = hilock_options_sentinel_master(opts);
    fputs(",\"sentinel_master\":", out);
    if (sentinel != NULL)
        cli_json_string(out, sentinel, strlen(sentinel));
    else
        fputs("null", out);
    fprintf(out, ",\"ack\":\"%s\",\"ack_timeout_ms\":%lld}",
            cli_ack_name(hilock_options_replica_ack(opts)),
            (long long)hilock_options_replica_ack_timeout_ms(opts));
}
