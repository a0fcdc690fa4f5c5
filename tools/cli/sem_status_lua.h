/* The script `hilock status` reads a semaphore with (sem_status.c), in a
 * header of its own so that tests/test_script_keys.c checks the keys it
 * touches as it checks the library's scripts.  KEYS: NAME, then the zset
 * of its expirable permits, "{NAME}:timeout". */
#ifndef CLI_SEM_STATUS_LUA_H
#define CLI_SEM_STATUS_LUA_H

#define CLI_SEM_STATUS_KEYS 2

#define CLI_SEM_STATUS_LUA                                                  \
    "local t = redis.call('type', KEYS[1])['ok']\n"                         \
    "local v = false\n"                                                     \
    "if t == 'string' then v = redis.call('get', KEYS[1]) end\n"            \
    "local z = {}\n"                                                        \
    "if redis.call('type', KEYS[2])['ok'] == 'zset' then\n"                 \
    "  z = redis.call('zrange', KEYS[2], 0, -1, 'withscores')\n"            \
    "end\n"                                                                 \
    "local now = redis.call('time')\n"                                      \
    "return {t, v, z, now[1], now[2]}\n"

#endif
