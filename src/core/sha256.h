/*
 * sha256.h — SHA-256 (FIPS 180-4), for verifying model files against the
 * checksums tools/export.py writes into tolk-manifest.json.
 */
#ifndef TOLK_SHA256_H
#define TOLK_SHA256_H

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

/* Hashes the file at `path` into hex[65] (lower-case, NUL-terminated). */
tolk_status sha256_file(const char *path, char hex[65], uint64_t *size, tolk_error *err);

#endif /* TOLK_SHA256_H */
