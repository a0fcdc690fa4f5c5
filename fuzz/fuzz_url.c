/* hilock_options_set_url on any bytes.  Nothing may crash or leak, a
 * refused URL leaves the options as they were, and no error message
 * quotes a password.
 *
 * A password made of fuzz bytes cannot be looked for in a message: "port"
 * or "URL" would be found in the message's own words.  So each input is
 * also tried with a marker spliced into the text the library treats as a
 * possible password (see url.c): everything between "://" and the last
 * '@', or, with no '@', what follows the ':' of the authority, where a
 * URL missing its "@host" has its password.  The marker is letters and
 * digits, so it moves no delimiter, and no 4 bytes of it in a row read as
 * a word or a number a message could hold. */
/* fuzz-max-len: 1024 */
#include <string.h>

#include "fuzz.h"
#include "hilock/hilock.h"
#include "core/config/option_values.h"

static const char MARKER[] = "Qx7vKz9W";
#define MARKER_LEN (sizeof MARKER - 1)
#define PIECE 4

/* A URL may not be longer than this (url.c); the fuzz inputs never are,
 * which keeps the buffers on the stack. */
#define URL_MAX 8192

static int same_text(const char *a, const char *b)
{
    return (a == NULL) == (b == NULL) && (a == NULL || strcmp(a, b) == 0);
}

/* The fields a URL can set, against the values the options started with;
 * a refused URL must not have changed any of them. */
static void check_unchanged(const hilock_options *o,
                            const hilock_options *before)
{
    FUZZ_CHECK(same_text(o->host, before->host) &&
                   o->port == before->port && o->db == before->db &&
                   same_text(o->user, before->user) &&
                   same_text(o->password, before->password) &&
                   o->tls == before->tls &&
                   o->connect_timeout_ms == before->connect_timeout_ms &&
                   o->command_timeout_ms == before->command_timeout_ms &&
                   same_text(o->tls_ca_file, before->tls_ca_file),
               "a refused URL changed the options");
}

/* Whether text holds 4 bytes in a row of the marker. */
static int holds_marker(const char *text)
{
    char piece[PIECE + 1];
    for (size_t i = 0; i + PIECE <= MARKER_LEN; i++) {
        memcpy(piece, &MARKER[i], PIECE);
        piece[PIECE] = '\0';
        if (strstr(text, piece) != NULL)
            return 1;
    }
    return 0;
}

/* Returns the message of a refusal, or NULL when the URL was taken. */
static const char *try_url(const char *url)
{
    hilock_options *o = NULL;
    hilock_options *before = NULL;
    if (hilock_options_create(&o) != HILOCK_OK)
        return NULL;
    if (hilock_options_copy(&before, o) != HILOCK_OK) {
        hilock_options_free(o);
        return NULL;
    }
    int rc = hilock_options_set_url(o, url);
    if (rc != HILOCK_OK)
        check_unchanged(o, before);
    hilock_options_free(before);
    hilock_options_free(o);
    return rc == HILOCK_OK ? NULL : hilock_last_error();
}

/* Where the text that may hold a password lies, as [*lo, *hi) offsets;
 * 0 when the URL has none. */
static int secret_span(const char *url, size_t *lo, size_t *hi)
{
    const char *sep = strstr(url, "://");
    if (sep == NULL)
        return 0;
    const char *auth = sep + 3;
    const char *last_at = strrchr(auth, '@');
    if (last_at != NULL) {
        *lo = (size_t)(auth - url);
        *hi = (size_t)(last_at - url);
        return 1;
    }
    size_t auth_len = strcspn(auth, "/?#");
    if (auth[0] == '[')
        return 0;
    const char *colon = memchr(auth, ':', auth_len);
    if (colon == NULL)
        return 0;
    *lo = (size_t)(colon + 1 - url);
    *hi = (size_t)(auth + auth_len - url);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char url[URL_MAX + 1];
    char marked[URL_MAX + MARKER_LEN + 1];
    if (size > URL_MAX)
        return 0;
    memcpy(url, data, size);
    url[size] = '\0';
    try_url(url);

    /* A piece of the marker that the input holds already, outside the
     * password, could be quoted from there. */
    size_t lo, hi;
    if (!secret_span(url, &lo, &hi) || holds_marker(url))
        return 0;
    /* The place in the span comes from the input, so that mutations move
     * the marker as well as the text around it. */
    unsigned sum = 0;
    for (size_t i = 0; i < size; i++)
        sum += data[i];
    size_t at = lo + sum % (hi - lo + 1);
    size_t len = strlen(url);
    memcpy(marked, url, at);
    memcpy(marked + at, MARKER, MARKER_LEN);
    memcpy(marked + at + MARKER_LEN, url + at, len - at + 1);
    const char *why = try_url(marked);
    FUZZ_CHECK(why == NULL || !holds_marker(why),
               "the error for '%s' quotes the password: %s", marked, why);
    return 0;
}
