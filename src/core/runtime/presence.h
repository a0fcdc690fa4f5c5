/* The client's card on the server (presence.c): who it is, for
 * operators. */
#ifndef HL_PRESENCE_H
#define HL_PRESENCE_H

#include "core/transport/conn.h"
#include "core/transport/script_def.h"
#include "hilock/client.h"

typedef struct hl_presence hl_presence;

/* A command connection of c came up: write the card on it when it is the
 * one for the card's key, and keep it written from then on.  Loop
 * thread. */
void hl_presence_conn_up(hilock_client *c, hl_conn *conn);

/* c knows now whether it talks to a cluster, and where each slot lives:
 * write the card where it belongs.  Loop thread. */
void hl_presence_routed(hilock_client *c);

/* A lease of c was lost: the card says so soon, not at its next round
 * (leases_lost, for `hilock top`).  Loop thread. */
void hl_presence_lease_lost(hilock_client *c);

/* A hold of c began: the list of holds beside the card names it soon.
 * Loop thread. */
void hl_presence_hold_started(hilock_client *c);

/* The one script presence runs (hilock_client_hold_since), sent with its
 * text: KEYS a client's list of holds. */
extern const hl_script_def hl_presence_since_def;

#endif
