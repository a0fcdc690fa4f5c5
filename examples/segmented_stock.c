/* Segmented stock: products spread over 16 locks, so deductions of
 * different products rarely wait for each other.  Each deduction takes
 * its product's segment lock, reads and writes the stock, releases.
 *
 *   segmented_stock [redis://host:port]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hilock/hilock.h>

static int command(hilock_client *c, const char *a, const char *b,
                   const char *d, long long *out)
{
    const char *argv[] = {a, b, d};
    hilock_reply *r = NULL;
    int rc = hilock_client_command(c, d ? 3 : 2, argv, NULL, &r);

    if (rc == HILOCK_OK && out != NULL && r != NULL)
        *out = r->type == HILOCK_REPLY_INTEGER ? r->integer
               : r->type == HILOCK_REPLY_STRING ? strtoll(r->str, NULL, 10)
                                                 : 0;
    hilock_reply_free(r);
    return rc;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    hilock_options *opts;
    hilock_client *client;
    hilock_segmented *set;
    const char *name = "example:stock";
    int rc;

    if ((rc = hilock_options_create(&opts)) != HILOCK_OK)
        return 1;
    rc = hilock_options_set_url(opts, url);
    if (rc == HILOCK_OK)
        rc = hilock_client_create(&client, opts);
    hilock_options_free(opts);
    if (rc == HILOCK_OK)
        rc = hilock_segmented_create(&set, client, name, 16);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "%s: %s\n", hilock_strerror(rc), hilock_last_error());
        return 1;
    }
    for (int i = 0; i < 10 && rc == HILOCK_OK; i++) {
        char product[32], key[64];
        long long stock = 0;

        snprintf(product, sizeof product, "product-%d", i % 4);
        snprintf(key, sizeof key, "example:stock:%s", product);
        hilock_lock *lock =
            hilock_segmented_lock_for(set, product, strlen(product));
        if ((rc = hilock_lock_acquire(lock)) != HILOCK_OK)
            break;
        rc = command(client, "SETNX", key, "100", NULL);
        if (rc == HILOCK_OK)
            rc = command(client, "GET", key, NULL, &stock);
        if (rc == HILOCK_OK && stock > 0)
            rc = command(client, "DECR", key, NULL, &stock);
        int released = hilock_lock_release(lock);
        if (rc == HILOCK_OK)
            rc = released;
        printf("%s: %lld left\n", product, stock);
    }
    if (rc != HILOCK_OK)
        fprintf(stderr, "%s: %s\n", hilock_strerror(rc), hilock_last_error());
    hilock_segmented_destroy(set);
    hilock_client_destroy(client);
    return rc == HILOCK_OK ? 0 : 1;
}
