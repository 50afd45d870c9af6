/*
 * sha256.h — SHA-256 (FIPS 180-4), for verifying model files against the
 * checksums tools/export.py writes into tolk-manifest.json.
 */
#ifndef TOLK_SHA256_H
#define TOLK_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"

struct sha256 {
  uint32_t h[8];
  uint64_t len;
  uint8_t buf[64];
  size_t used;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
void sha256_final(struct sha256 *s, uint8_t out[32]);

/* The compression function over n 64-byte blocks: portable, and with the
 * x86 SHA extensions where sha256_shani_supported() (sha256_shani.c);
 * sha256_update picks once, TOLK_ISA=scalar keeping the portable one. */
extern const uint32_t sha256_k[64];
void sha256_blocks_ref(uint32_t h[8], const uint8_t *p, size_t n);
bool sha256_shani_supported(void);
void sha256_blocks_shani(uint32_t h[8], const uint8_t *p, size_t n);

/* Hashes the file at `path` into hex[65] (lower-case, NUL-terminated). */
tolk_status sha256_file(const char *path, char hex[65], uint64_t *size, tolk_error *err);

#endif /* TOLK_SHA256_H */
