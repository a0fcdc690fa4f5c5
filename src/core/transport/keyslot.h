/* The Redis Cluster slot of a key: CRC16 (XMODEM) of the key, or of its
 * hash tag, modulo 16384, as the cluster specification defines it.  Every
 * key and channel of one lock shares a hash tag, and so a slot. */
#ifndef HL_KEYSLOT_H
#define HL_KEYSLOT_H

#include <stddef.h>
#include <stdint.h>

#define HL_CLUSTER_SLOTS 16384

/* CRC16-CCITT, polynomial 0x1021, initial value 0, no reflection. */
uint16_t hl_crc16(const void *data, size_t len);

/* The slot of key: the hash tag is the part between the first '{' and
 * the first '}' after it, when that part is not empty; otherwise the
 * whole key counts. */
unsigned hl_keyslot(const void *key, size_t len);

#endif
