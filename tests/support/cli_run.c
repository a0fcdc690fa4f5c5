#include "support/cli_run.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/fixture.h"

#ifndef HILOCK_TOOL_PATH
#error "HILOCK_TOOL_PATH must name the hilock executable"
#endif

hl_redis_server *hl_cli_server;
char hl_cli_url[64];

int hl_cli_group_setup(void **state)
{
    (void)state;
    unsetenv("HILOCK_REDIS");
    hl_cli_server = hl_fixture_plain();
    snprintf(hl_cli_url, sizeof hl_cli_url, "redis://127.0.0.1:%d",
             hl_redis_server_port(hl_cli_server));
    return 0;
}

int hl_cli_group_teardown(void **state)
{
    (void)state;
    hl_redis_server_stop(hl_cli_server);
    return 0;
}

int hl_cli_run(char *out, size_t cap, ...)
{
    const char *argv[16];
    int n = 0;
    argv[n++] = HILOCK_TOOL_PATH;
    argv[n++] = "--redis";
    argv[n++] = hl_cli_url;
    va_list ap;
    va_start(ap, cap);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && n < 15;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    static char scratch[4096];
    if (out == NULL) {
        out = scratch;
        cap = sizeof scratch;
    }
    return hl_run(argv, out, cap, hl_widen(20000));
}
