/* hilock demo: a private redis-server, a connection, and what it shows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "redis_server.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The value of "field:" in an INFO reply, copied into out. */
static void info_field(const char *info, const char *field, char *out,
                       size_t cap)
{
    snprintf(out, cap, "?");
    const char *p = strstr(info, field);
    if (p == NULL)
        return;
    p += strlen(field);
    size_t n = strcspn(p, "\r\n");
    snprintf(out, cap, "%.*s", (int)n, p);
}

int cli_demo(const cli_globals *g, int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: hilock [--redis URL] demo\n");
        return CLI_EXIT_USAGE;
    }
    hl_redis_server *server = NULL;
    char url[64];
    const char *target = g->redis_url;
    if (!g->redis_given) {
        printf("starting a private redis-server on a free loopback port\n");
        server = hl_redis_server_start(NULL);
        if (server == NULL) {
            fprintf(stderr, "hilock: could not start redis-server\n");
            return CLI_EXIT_UNAVAILABLE;
        }
        snprintf(url, sizeof url, "redis://127.0.0.1:%d",
                 hl_redis_server_port(server));
        target = url;
    }
    hilock_options *opts;
    int rc = cli_make_options(g, target, &opts);
    if (rc != 0)
        goto out;
    hilock_client *client;
    rc = cli_connect(opts, &client);
    if (rc != 0) {
        hilock_options_free(opts);
        goto out;
    }
    printf("connected to %s:%d as client %s\n", hilock_options_host(opts),
           hilock_options_port(opts), hilock_client_id(client));

    const char *info_argv[] = {"INFO", "server"};
    hilock_reply *reply = NULL;
    char version[64] = "?", mode[64] = "?";
    if (hilock_client_command(client, 2, info_argv, NULL, &reply) ==
            HILOCK_OK &&
        reply->type == HILOCK_REPLY_STRING) {
        info_field(reply->str, "redis_version:", version, sizeof version);
        info_field(reply->str, "redis_mode:", mode, sizeof mode);
    }
    hilock_reply_free(reply);
    printf("server: redis %s (%s)\n", version, mode);
    printf("TLS: %s\n", hilock_client_is_tls(client) ? "on" : "off");

    enum { ROUNDS = 200 };
    double rtt[ROUNDS];
    const char *ping[] = {"PING"};
    int ok = 0;
    for (int i = 0; i < ROUNDS; i++) {
        double t0 = now_us();
        if (hilock_client_command(client, 1, ping, NULL, NULL) != HILOCK_OK)
            break;
        rtt[ok++] = now_us() - t0;
    }
    if (ok == ROUNDS) {
        qsort(rtt, ROUNDS, sizeof rtt[0], cmp_double);
        printf("round trip (PING x %d): min %.0f us, median %.0f us, "
               "p99 %.0f us\n",
               ROUNDS, rtt[0], rtt[ROUNDS / 2], rtt[ROUNDS * 99 / 100]);
    } else {
        fprintf(stderr, "hilock: PING failed: %s\n", hilock_last_error());
        rc = CLI_EXIT_UNAVAILABLE;
    }
    hilock_client_destroy(client);
    hilock_options_free(opts);
out:
    if (server) {
        hl_redis_server_stop(server);
        printf("private redis-server stopped\n");
    }
    return rc;
}
