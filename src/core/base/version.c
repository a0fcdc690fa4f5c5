#include "hilock/hilock.h"

unsigned hilock_version(void) { return HILOCK_VERSION_HEX; }

const char *hilock_version_string(void) { return HILOCK_VERSION_STRING; }
