/*
 * test_core_sha256.c — SHA-256 (src/core/sha256.c) on the FIPS 180-4 /
 * NIST examples, through sha256_update in pieces of every size, and the SHA
 * extensions' blocks (sha256_shani.c) against the portable ones on random
 * states and messages, where the CPU has them (the test says which ran).
 */
#include <string.h>

#include "core/sha256.h"
#include "testutil.h"

static void hex_of(const uint8_t d[32], char out[65]) {
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The digest of msg fed to sha256_update `piece` bytes at a time. */
static void digest(const void *msg, size_t len, size_t piece, char out[65]) {
  struct sha256 s;
  sha256_init(&s);
  for (size_t at = 0; at < len; at += piece) sha256_update(&s, (const uint8_t *)msg + at, len - at < piece ? len - at : piece);
  uint8_t d[32];
  sha256_final(&s, d);
  hex_of(d, out);
}

static void known_answers(void) {
  static const struct {
    const char *msg, *hex;
  } kat[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
  };
  char got[65];
  for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++)
    for (size_t piece = 1; piece <= 130; piece += 43) {
      digest(kat[i].msg, strlen(kat[i].msg), piece, got);
      CHECK_MSG(!strcmp(got, kat[i].hex), "\"%s\" in pieces of %zu: %s", kat[i].msg, piece, got);
    }
  size_t n = 1000000;
  char *a = malloc(n);
  memset(a, 'a', n);
  digest(a, n, 65536, got);
  CHECK_MSG(!strcmp(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "a million a: %s", got);
  free(a);
}

static void shani_matches_portable(void) {
  if (!sha256_shani_supported()) {
    printf("sha256: SHA extensions lacking on this CPU, portable rounds only\n");
    return;
  }
  tu_seed(0x5eed5ba256ull);
  uint8_t msg[64 * 9];
  int cases = 0;
  for (int t = 0; t < 2000; t++) {
    uint32_t h_ref[8], h_ni[8];
    for (int i = 0; i < 8; i++) h_ref[i] = h_ni[i] = (uint32_t)tu_next();
    for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)tu_next();
    size_t blocks = 1 + (size_t)t % 9;
    sha256_blocks_ref(h_ref, msg, blocks);
    sha256_blocks_shani(h_ni, msg, blocks);
    CHECK_MSG(!memcmp(h_ref, h_ni, sizeof h_ref), "case %d (%zu blocks): SHA extensions differ", t, blocks);
    cases++;
  }
  printf("sha256: SHA extensions ran, %d random cases identical to the portable rounds\n", cases);
}

int main(void) {
  known_answers();
  shani_matches_portable();
  return tu_finish("core_sha256");
}
