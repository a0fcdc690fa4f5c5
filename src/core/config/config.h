/* What the configuration exports to the layers above it, beside the
 * public getters and setters of hilock/options.h.  The option struct
 * itself is config/options_internal.h, which only the core includes. */
#ifndef HL_CONFIG_H
#define HL_CONFIG_H

#include "hilock/options.h"

/* Have the client learn its server's run id and uptime at every
 * handshake and refuse votes while it is quarantined (RedLock masters). */
void hl_options_track_restarts(hilock_options *opts);

#endif
