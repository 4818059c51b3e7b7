/*
 * Helpers every format plugin's C accelerator shares (each _speedups.c under formats/ includes it; setup.py
 * adds this directory to the include path, and a build's SOURCE_HASH covers this file too:
 * segstore.speedups.stale).  Header-only, static inline: each extension gets its own copy.
 */
#ifndef SEGSTORE_SPEEDUPS_COMMON_H
#define SEGSTORE_SPEEDUPS_COMMON_H

#include <stdint.h>
#include <string.h>

/* The high bit of each byte of a word: none set, eight ASCII bytes (the UTF-8 checks' fast step). */
#define ASCII_MASK 0x8080808080808080ull

/*
 * Copy n bytes (short ones, as topics, property names, keys and header values mostly are) without
 * a call: two overlapping loads and stores of the widest size that fits, memcpy beyond 32 bytes.
 * Reads and writes only src[0:n] and dst[0:n].
 */
static inline void
copy_short(uint8_t *dst, const uint8_t *src, size_t n)
{
    if (n > 32) {
        memcpy(dst, src, n);
    } else if (n >= 16) {
        uint64_t a[2], b[2];
        memcpy(a, src, 16);
        memcpy(b, src + n - 16, 16);
        memcpy(dst, a, 16);
        memcpy(dst + n - 16, b, 16);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else if (n) {
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
}

#endif
