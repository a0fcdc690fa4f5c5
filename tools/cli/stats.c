/* hilock stats: what running clients count, in the Prometheus text
 * format, read from their cards on the server (docs/guide/operators.md), so
 * that a demo, a bench or a service anywhere can be looked at from here.
 * Each client's series carry client="<its id>"; a comment line before
 * them names the process behind each id.  The figures are as of each
 * card's last writing, at most five seconds old.  A card not written
 * for GONE_AFTER_MS is of a client gone (a card outlives its client by
 * a minute) and is left out.  Exits 66 when no running client
 * matched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CLI_EXIT_NO_CLIENT 66
/* Two rounds of card writing missed, and more. */
#define GONE_AFTER_MS 12000

typedef struct stats_filter {
    const char *client_id;
    long long pid; /* 0: any */
    const char *program;
} stats_filter;

static int stats_usage(const char *why, const char *what)
{
    return cli_usage_error("stats", why, what);
}

static bool wanted(const stats_filter *f, const hilock_client_card *card)
{
    return card->stats != NULL && card->written_ms_ago >= 0 &&
           card->written_ms_ago < GONE_AFTER_MS &&
           (f->client_id == NULL ||
            strcmp(f->client_id, card->client_id) == 0) &&
           (f->pid == 0 || f->pid == card->pid) &&
           (f->program == NULL || strcmp(f->program, card->program) == 0);
}

/* The cards of the running clients f wants, from the card keys in
 * names, into cards (n of them), but for self's own: the command's
 * client counts nothing of interest. */
static void read_cards(hilock_client *self, const cli_names *names,
                       const stats_filter *f, hilock_client_card **cards,
                       size_t *n)
{
    *n = 0;
    size_t prefix = strlen("hilock_client:{");
    for (size_t i = 0; i < names->n; i++) {
        const cli_name *k = &names->items[i];
        if (k->len != prefix + HILOCK_CLIENT_ID_LEN + 1)
            continue;
        char id[HILOCK_CLIENT_ID_LEN + 1];
        memcpy(id, k->name + prefix, HILOCK_CLIENT_ID_LEN);
        id[HILOCK_CLIENT_ID_LEN] = '\0';
        hilock_client_card *card = NULL;
        /* Gone meanwhile, or not a card after all: not running. */
        if (strcmp(id, hilock_client_id(self)) == 0 ||
            hilock_client_card_get(self, id, &card) != HILOCK_OK)
            continue;
        if (wanted(f, card))
            cards[(*n)++] = card;
        else
            hilock_client_card_free(card);
    }
}

static int print_stats(hilock_client_card **cards, size_t n)
{
    const hilock_stats **stats = calloc(n ? n : 1, sizeof *stats);
    const char **labels = calloc(n ? n : 1, sizeof *labels);
    char *text = NULL;
    int rc = CLI_EXIT_SOFTWARE;
    if (stats == NULL || labels == NULL)
        goto done;
    for (size_t i = 0; i < n; i++) {
        stats[i] = cards[i]->stats;
        labels[i] = cards[i]->client_id;
        printf("# client %s: %s[%lld]@%s%s%s\n", cards[i]->client_id,
               cards[i]->program, (long long)cards[i]->pid, cards[i]->host,
               cards[i]->description[0] ? " " : "", cards[i]->description);
    }
    size_t need = 0;
    char probe[1];
    (void)hilock_stats_format_prometheus_many(stats, labels, n, probe,
                                              sizeof probe, &need);
    if (need == 0 || (text = malloc(need)) == NULL)
        goto done;
    if (hilock_stats_format_prometheus_many(stats, labels, n, text, need,
                                            NULL) != HILOCK_OK) {
        fprintf(stderr, "hilock: stats: %s\n", hilock_last_error());
        goto done;
    }
    fputs(text, stdout);
    rc = 0;
done:
    if (rc == CLI_EXIT_SOFTWARE && text == NULL)
        fprintf(stderr, "hilock: stats: out of memory\n");
    free(text);
    free(stats);
    free(labels);
    return rc;
}

int cli_stats(const cli_globals *g, int argc, char **argv)
{
    stats_filter f = {0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v;
        bool missing = false;
        if (cli_wants_help(arg))
            return cli_help("stats");
        if ((v = cli_option_value(argc, argv, &i, "--client", NULL,
                                  &missing))) {
            if (strlen(v) != HILOCK_CLIENT_ID_LEN)
                return stats_usage("--client takes a client id (36 "
                                   "characters), not",
                                   v);
            f.client_id = v;
        } else if ((v = cli_option_value(argc, argv, &i, "--pid", NULL,
                                         &missing))) {
            if (!cli_parse_ms(v, false, 4194304, &f.pid))
                return stats_usage("--pid takes a process id, not", v);
        } else if ((v = cli_option_value(argc, argv, &i, "--program", NULL,
                                         &missing))) {
            f.program = v;
        } else {
            return stats_usage(missing ? "missing value after"
                                       : "unexpected argument",
                               arg);
        }
    }
    hilock_options *opts;
    hilock_client *client;
    int rc = cli_open_with(g, &opts, &client);
    if (rc != 0)
        return rc;
    cli_names names;
    rc = cli_scan_cards(client, opts, &names);
    hilock_client_card **cards = NULL;
    size_t n = 0;
    if (rc == 0) {
        cards = calloc(names.n ? names.n : 1, sizeof *cards);
        if (cards == NULL) {
            fprintf(stderr, "hilock: stats: out of memory\n");
            rc = CLI_EXIT_SOFTWARE;
        }
    }
    if (rc == 0)
        read_cards(client, &names, &f, cards, &n);
    if (rc == 0 && n == 0) {
        fprintf(stderr, "hilock: stats: no running client matched (a "
                        "client's card is written when it connects, and "
                        "every 5 s)\n");
        rc = CLI_EXIT_NO_CLIENT;
    } else if (rc == 0) {
        rc = print_stats(cards, n);
    }
    for (size_t i = 0; i < n; i++)
        hilock_client_card_free(cards[i]);
    free(cards);
    cli_names_free(&names);
    hilock_client_destroy(client);
    hilock_options_free(opts);
    return cli_flush_stdout(rc);
}
