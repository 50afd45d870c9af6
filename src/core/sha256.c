/*
 * sha256.c — SHA-256 as FIPS 180-4 specifies it: the portable rounds, and
 * the choice of sha256_shani.c's where the CPU has them (every model load
 * hashes the graphs it runs).
 */
#include "sha256.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static inline uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void block(uint32_t hs[8], const uint8_t *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = hs[0], b = hs[1], c = hs[2], d = hs[3], e = hs[4], f = hs[5], g = hs[6], h = hs[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + sha256_k[i] + w[i];
    uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  hs[0] += a, hs[1] += b, hs[2] += c, hs[3] += d;
  hs[4] += e, hs[5] += f, hs[6] += g, hs[7] += h;
}

void sha256_blocks_ref(uint32_t h[8], const uint8_t *p, size_t n) {
  for (; n; n--, p += 64) block(h, p);
}

/* The blocks function, picked at the first call (relaxed atomics: every
 * thread picks the same). */
static void blocks(uint32_t h[8], const uint8_t *p, size_t n) {
  static int pick; /* 0: not yet, 1: portable, 2: SHA extensions */
  int k = __atomic_load_n(&pick, __ATOMIC_RELAXED);
  if (!k) {
    const char *isa = getenv("TOLK_ISA");
    k = sha256_shani_supported() && !(isa && !strcmp(isa, "scalar")) ? 2 : 1;
    __atomic_store_n(&pick, k, __ATOMIC_RELAXED);
  }
  if (k == 2) sha256_blocks_shani(h, p, n);
  else sha256_blocks_ref(h, p, n);
}

void sha256_init(struct sha256 *s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->len = 0;
  s->used = 0;
}

void sha256_update(struct sha256 *s, const void *data, size_t len) {
  const uint8_t *p = data;
  s->len += len;
  if (s->used) {
    size_t take = 64 - s->used < len ? 64 - s->used : len;
    memcpy(s->buf + s->used, p, take);
    s->used += take;
    p += take;
    len -= take;
    if (s->used < 64) return;
    blocks(s->h, s->buf, 1);
    s->used = 0;
  }
  blocks(s->h, p, len / 64);
  p += len / 64 * 64;
  len %= 64;
  memcpy(s->buf, p, len);
  s->used = len;
}

void sha256_final(struct sha256 *s, uint8_t out[32]) {
  uint64_t bits = s->len * 8;
  uint8_t pad[72] = {0x80};
  size_t n = s->used < 56 ? 56 - s->used : 120 - s->used;
  sha256_update(s, pad, n);
  uint8_t be[8];
  for (int i = 0; i < 8; i++) be[i] = (uint8_t)(bits >> (56 - 8 * i));
  sha256_update(s, be, 8);
  for (int i = 0; i < 8; i++) {
    out[4 * i] = (uint8_t)(s->h[i] >> 24);
    out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
    out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
    out[4 * i + 3] = (uint8_t)s->h[i];
  }
}

tolk_status sha256_file(const char *path, char hex[65], uint64_t *size, tolk_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return tolk_fail(err, TOLK_ERR_NOT_FOUND, "%s: cannot open", path);
  struct sha256 s;
  sha256_init(&s);
  static _Thread_local uint8_t buf[1 << 16];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&s, buf, got);
  int bad = ferror(f);
  fclose(f);
  if (bad) return tolk_fail(err, TOLK_ERR_IO, "%s: read error", path);
  uint8_t d[32];
  *size = s.len;
  sha256_final(&s, d);
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
  return TOLK_OK;
}
