#include "lua_common.h"

#include <pthread.h>

static const char renew_lua[] =
    "local out = {}\n"
    "for i = 1, #KEYS do\n"
    "  if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then\n"
    "    redis.call('pexpire', KEYS[i], ARGV[1])\n"
    "    out[i] = 1\n"
    "  else\n"
    "    out[i] = 0\n"
    "  end\n"
    "end\n"
    "return out\n";

hl_script hl_hash_renew;
static pthread_once_t renew_once = PTHREAD_ONCE_INIT;

static void init_renew(void) { hl_script_init(&hl_hash_renew, renew_lua); }

void hl_hash_renew_init(void) { pthread_once(&renew_once, init_renew); }
