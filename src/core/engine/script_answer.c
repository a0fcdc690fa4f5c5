/* What a kind's script answered, once its announcement is set aside. */
#include "core/engine/compose.h"

#include "core/runtime/client_state.h"

const hilock_reply *hl_script_answer(hilock_client *client,
                                     const hilock_reply *reply)
{
    /* {answer, refusal}: the refusal is the error text of the PUBLISH,
     * a string; no script of ours answers a pair ending in one. */
    if (reply == NULL || reply->type != HILOCK_REPLY_ARRAY ||
        reply->elements != 2 ||
        (reply->element[1]->type != HILOCK_REPLY_STRING &&
         reply->element[1]->type != HILOCK_REPLY_STATUS))
        return reply;
    if (client != NULL)
        client->publishes_refused++;
    return reply->element[0];
}
