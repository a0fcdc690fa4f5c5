#include "core/transport/keyslot.h"

#include <string.h>

uint16_t hl_crc16(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint16_t crc = 0;

    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021)
                                 : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned hl_keyslot(const void *key, size_t len)
{
    const char *k = key;
    const char *open = memchr(k, '{', len);

    if (open != NULL) {
        size_t from = (size_t)(open - k) + 1;
        const char *close = memchr(open + 1, '}', len - from);

        if (close != NULL && close > open + 1)
            return hl_crc16(open + 1, (size_t)(close - open - 1)) &
                   (HL_CLUSTER_SLOTS - 1);
    }
    return hl_crc16(k, len) & (HL_CLUSTER_SLOTS - 1);
}
