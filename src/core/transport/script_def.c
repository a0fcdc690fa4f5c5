#include "core/transport/script_def.h"

/* Their text is what a message about a def prints. */
const char hl_key_name[] = "NAME";
const char hl_key_channel[] = "the kind's channel";
const char hl_key_given[] = "a key the caller names";

void hl_script_defs_init(const hl_script_def *const *defs)
{
    for (; *defs != NULL; defs++)
        hl_script_init((*defs)->script, (*defs)->body);
}
