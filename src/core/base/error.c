#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error_detail.h"

static _Thread_local char thread_detail[HL_DETAIL_MAX];

const char *hilock_strerror(int status)
{
    switch (status) {
#define HL_MSG_CASE_(name, num, msg)                                         \
    case num:                                                                \
        return msg;
        HILOCK_ERROR_TABLE(HL_MSG_CASE_)
#undef HL_MSG_CASE_
    default:
        return "unknown error";
    }
}

const char *hilock_errname(int status)
{
    switch (status) {
#define HL_NAME_CASE_(name, num, msg)                                        \
    case num:                                                                \
        return #name;
        HILOCK_ERROR_TABLE(HL_NAME_CASE_)
#undef HL_NAME_CASE_
    default:
        return "UNKNOWN";
    }
}

const char *hilock_last_error(void) { return thread_detail; }

void hl_set_detail(const char *text)
{
    if (text == NULL) {
        thread_detail[0] = '\0';
        return;
    }
    if (text == thread_detail)
        return;
    snprintf(thread_detail, sizeof thread_detail, "%s", text);
}

void hl_clear_detail(void) { thread_detail[0] = '\0'; }

int hl_redis_error_status(const char *text)
{
    /* Redis 7.0 words a refusal inside a script as a plain ERR. */
    static const char script_refusal[] =
        "ERR The user executing the script can't";
    if (text == NULL)
        return HILOCK_EREDIS;
    if (strncmp(text, "NOPERM", 6) == 0 &&
        (text[6] == ' ' || text[6] == '\0'))
        return HILOCK_EPERM;
    if (strncmp(text, script_refusal, sizeof script_refusal - 1) == 0)
        return HILOCK_EPERM;
    /* A replica's refusal of a write, first in the reply (Redis, also
     * from inside a script) or after the script's own words. */
    if (strncmp(text, "READONLY ", 9) == 0 ||
        strstr(text, ": READONLY ") != NULL ||
        strstr(text, " READONLY You can't write") != NULL)
        return HILOCK_EREADONLY;
    return HILOCK_EREDIS;
}

int hl_fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(thread_detail, sizeof thread_detail, fmt, ap);
    va_end(ap);
    return status;
}

const char *hl_send_failure(int status)
{
    return status == HILOCK_EINVAL ? hilock_last_error()
                                   : "could not send the request";
}
