/*
 * test_tokenizer_diff.c — the large differential check of the tokenizer: the
 * strings and id sequences tools/tokenizer_diff.py generated (the same seeded
 * generator, reimplemented here) are encoded and decoded by tolk, and the
 * FNV-1a hashes of the results are compared block by block (1,000 items) with
 * the reference's, committed in tests/data/tokenizer_diff.json. Covers the
 * Marian fixture (100,000 strings) and the sentencepiece models of
 * tests/data/spm (BPE, byte fallback, user-defined symbols, …).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tokenizer/spm.h"
#include "tolk.h"

#define SEED 0x70C42026ull

struct rng {
  uint64_t s;
};

static uint64_t rng_next(struct rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint32_t below(struct rng *r, uint64_t n) { return (uint32_t)(rng_next(r) % n); }

static const uint32_t WS[] = {0x20, 0x20, 0x20, 0x09, 0x0A, 0x0D, 0x3000, 0xA0, 0x2009, 0x200A};
static const uint32_t ZW[] = {0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2060, 0xFEFF, 0xFE0F};
static const uint32_t COMPAT[][2] = {{0xFF01, 0xFF5E}, {0xFB00, 0xFB06}, {0x2460, 0x24FF},
                                     {0x2070, 0x209F}, {0x2160, 0x217F}, {0x3300, 0x33FF},
                                     {0xFF61, 0xFF9F}, {0x1D400, 0x1D4FF}};
static const char *const WORDS[] = {
    ">>cmn_Hans<<", ">>yue_Hant<<", ">>cmn_Hant<<", ">>", "<<", "</s>", "<unk>", "<pad>",
    ">>xx<<", "%s", "<x>", "http://example.com/a?b=1", "user@example.org", "3.14", "...",
    "\xE2\x80\xA6", "don't", "e\xCC\x81", "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB"};
enum { ASCII, WSP, LATIN, COMBINING, CJK, COMPATC, CONTROL, ZWE, ANY, WORD, LONGWORD };
static const int WEIGHTS[][2] = {{38, ASCII}, {10, WSP},    {6, LATIN}, {4, COMBINING},
                                 {12, CJK},   {6, COMPATC}, {3, CONTROL}, {5, ZWE},
                                 {5, ANY},    {9, WORD},    {2, LONGWORD}};

struct str {
  char *p;
  size_t len, cap;
};

static void put(struct str *s, const char *b, size_t n) {
  if (s->len + n + 1 > s->cap) {
    s->cap = (s->len + n + 1) * 2;
    s->p = realloc(s->p, s->cap);
  }
  memcpy(s->p + s->len, b, n);
  s->len += n;
  s->p[s->len] = '\0';
}

static void put_cp(struct str *s, uint32_t cp) {
  char b[4];
  size_t n;
  if (cp < 0x80) b[0] = (char)cp, n = 1;
  else if (cp < 0x800) b[0] = (char)(0xC0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
  else if (cp < 0x10000)
    b[0] = (char)(0xE0 | cp >> 12), b[1] = (char)(0x80 | (cp >> 6 & 0x3F)), b[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
  else
    b[0] = (char)(0xF0 | cp >> 18), b[1] = (char)(0x80 | (cp >> 12 & 0x3F)),
    b[2] = (char)(0x80 | (cp >> 6 & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
  put(s, b, n);
}

static void gen_char(struct rng *r, struct str *s) {
  uint32_t w = below(r, 100);
  int cat = LONGWORD;
  for (size_t i = 0; i < sizeof WEIGHTS / sizeof WEIGHTS[0]; i++) {
    if (w < (uint32_t)WEIGHTS[i][0]) {
      cat = WEIGHTS[i][1];
      break;
    }
    w -= (uint32_t)WEIGHTS[i][0];
  }
  switch (cat) {
  case ASCII: put_cp(s, 0x20 + below(r, 0x5F)); break;
  case WSP: {
    uint32_t n = 1 + below(r, 4), c = WS[below(r, 10)];
    while (n--) put_cp(s, c);
    break;
  }
  case LATIN: put_cp(s, 0xC0 + below(r, 0xC0)); break;
  case COMBINING: put_cp(s, 0x300 + below(r, 0x70)); break;
  case CJK: put_cp(s, 0x4E00 + below(r, 0x5200)); break;
  case COMPATC: {
    const uint32_t *c = COMPAT[below(r, 8)];
    put_cp(s, c[0] + below(r, c[1] - c[0] + 1));
    break;
  }
  case CONTROL: {
    uint32_t c = below(r, 0x41);
    put_cp(s, c < 0x20 ? c : 0x7F + (c - 0x20));
    break;
  }
  case ZWE:
    if (below(r, 2)) put_cp(s, ZW[below(r, 8)]);
    else put_cp(s, 0x1F300 + below(r, 0x800));
    break;
  case ANY: {
    uint32_t c = below(r, 0x110000);
    put_cp(s, c >= 0xD800 && c <= 0xDFFF ? 0xFFFD : c);
    break;
  }
  case WORD: {
    const char *wd = WORDS[below(r, sizeof WORDS / sizeof WORDS[0])];
    put(s, wd, strlen(wd));
    break;
  }
  default: {
    uint32_t n = 50 + below(r, 250);
    while (n--) put_cp(s, 0x61 + below(r, 26));
  }
  }
}

static void gen_string(uint64_t i, struct str *s) {
  struct rng r = {SEED ^ (i * 0x9E3779B97F4A7C15ull)};
  s->len = 0;
  put(s, "", 0);
  uint32_t n = below(&r, 40);
  while (n--) gen_char(&r, s);
}

static size_t gen_ids(uint64_t i, uint64_t vocab, int32_t *ids) {
  struct rng r = {SEED ^ 0xD1CEull ^ (i * 0x9E3779B97F4A7C15ull)};
  size_t n = below(&r, 30);
  for (size_t k = 0; k < n; k++) ids[k] = (int32_t)below(&r, vocab);
  return n;
}

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
  const uint8_t *b = data;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
  return h;
}

static uint64_t hash_ids(uint64_t h, const int32_t *ids, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint8_t le[4] = {(uint8_t)ids[i], (uint8_t)(ids[i] >> 8), (uint8_t)(ids[i] >> 16), (uint8_t)(ids[i] >> 24)};
    h = fnv(h, le, 4);
  }
  return fnv(h, "\xff\xff\xff\xff", 4);
}

/* Text and its terminating NUL (decoded text may contain NULs itself). */
static uint64_t hash_text(uint64_t h, const char *s, size_t len) { return fnv(h, s, len + 1); }

#define FNV0 0xCBF29CE484222325ull

/* What one kind computes for item i, folded into h. */
typedef uint64_t (*item_fn)(void *ctx, uint64_t i, uint64_t h);

static void check_kind(const cJSON *kinds, const char *kind, item_fn fn, void *ctx) {
  const cJSON *k = cJSON_GetObjectItem(kinds, kind);
  CHECK_MSG(k != NULL, "no reference for %s", kind);
  if (!k) return;
  const cJSON *blocks = cJSON_GetObjectItem(k, "blocks");
  int n_blocks = cJSON_GetArraySize(blocks), bad = 0;
  uint64_t i = 0;
  for (const cJSON *b = blocks->child; b; b = b->next) {
    uint64_t h = FNV0;
    for (int j = 0; j < 1000; j++, i++) h = fn(ctx, i, h);
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    if (strcmp(hex, b->valuestring) != 0 && bad++ < 5)
      fprintf(stderr, "  %s: block %llu differs (tools/tokenizer_diff.py --show %s:%llu)\n", kind,
              (unsigned long long)(i / 1000 - 1), kind, (unsigned long long)(i / 1000 - 1));
  }
  printf("%-36s %7llu items, %d/%d blocks identical\n", kind, (unsigned long long)i, n_blocks - bad, n_blocks);
  CHECK_MSG(bad == 0, "%s: %d blocks differ", kind, bad);
}

struct marian_ctx {
  tolk_tokenizer *tok;
  struct str s;
};

static uint64_t marian_encode(void *p, uint64_t i, uint64_t h) {
  struct marian_ctx *c = p;
  gen_string(i, &c->s);
  tolk_ids ids;
  tolk_error err;
  const char *text = c->s.p;
  if (tolk_tokenizer_encode_batch(c->tok, &text, &c->s.len, 1, 0, &ids, &err)) return 0;
  h = hash_ids(h, ids.ids, ids.n);
  tolk_ids_free(&ids, 1);
  return h;
}

static uint64_t marian_decode(void *p, uint64_t i, uint64_t h) {
  struct marian_ctx *c = p;
  int32_t v[32];
  tolk_ids ids = {v, gen_ids(i, tolk_tokenizer_vocab_size(c->tok), v), 0};
  for (int flags = TOLK_DECODE_SKIP_SPECIAL, k = 0; k < 2; k++, flags = 0) {
    char *out;
    tolk_error err;
    if (tolk_tokenizer_decode_batch(c->tok, &ids, 1, flags, &out, &err)) return 0;
    h = hash_text(h, out, strlen(out));
    tolk_strings_free(&out, 1);
  }
  return h;
}

struct spm_ctx {
  struct spm_model *m;
  struct spm_encoding enc;
  struct str s;
};

static uint64_t spm_enc(void *p, uint64_t i, uint64_t h) {
  struct spm_ctx *c = p;
  gen_string(i, &c->s);
  tolk_error err;
  if (spm_encode(c->m, c->s.p, c->s.len, &c->enc, &err)) return 0;
  int32_t *ids = malloc((c->enc.n_pieces + 1) * sizeof *ids);
  for (size_t k = 0; k < c->enc.n_pieces; k++) ids[k] = c->enc.pieces[k].id;
  h = hash_ids(h, ids, c->enc.n_pieces);
  free(ids);
  return h;
}

static uint64_t spm_dec(void *p, uint64_t i, uint64_t h) {
  struct spm_ctx *c = p;
  int32_t v[32];
  size_t n = gen_ids(i, spm_piece_count(c->m), v);
  const char *pieces[32];
  size_t lens[32];
  for (size_t k = 0; k < n; k++) pieces[k] = spm_id_to_piece(c->m, v[k], &lens[k]);
  struct spm_buf out = {0};
  tolk_error err;
  if (spm_decode_pieces(c->m, pieces, lens, n, &out, &err)) return 0;
  h = out.data ? hash_text(h, out.data, out.len) : hash_text(h, "", 0);
  spm_buf_free(&out);
  return h;
}


int main(int argc, char **argv) {
  char path[8192], dir[4096];
  snprintf(dir, sizeof dir, "%s/../data", tu_fixtures());
  const char *data = argc > 1 ? argv[1] : dir;
  snprintf(path, sizeof path, "%s/tokenizer_diff.json", data);
  char *json = tu_slurp(path, NULL);
  CHECK_MSG(json != NULL, "cannot read %s", path);
  if (!json) return tu_finish("test_tokenizer_diff");
  cJSON *root = cJSON_Parse(json);
  free(json);
  const cJSON *kinds = cJSON_GetObjectItem(root, "kinds");
  struct marian_ctx mc = {0};
  tolk_error err;
  snprintf(path, sizeof path, "%s/marian-tiny", tu_fixtures());
  CHECK(tolk_tokenizer_create(path, tolk_tokenizer_default_params(), &mc.tok, &err) == TOLK_OK);
  if (mc.tok) {
    check_kind(kinds, "marian_encode", marian_encode, &mc);
    check_kind(kinds, "marian_decode", marian_decode, &mc);
  }
  tolk_tokenizer_free(mc.tok);
  free(mc.s.p);
  for (const cJSON *k = kinds->child; k; k = k->next) {
    if (strncmp(k->string, "spm_encode:", 11) != 0) continue;
    const char *model = k->string + 11;
    struct spm_ctx sc = {0};
    snprintf(path, sizeof path, "%s/spm/%s", data, model);
    CHECK_MSG(spm_model_load_file(path, &sc.m, &err) == TOLK_OK, "%s", err.message);
    if (!sc.m) continue;
    char kind[256];
    check_kind(kinds, k->string, spm_enc, &sc);
    snprintf(kind, sizeof kind, "spm_decode:%s", model);
    check_kind(kinds, kind, spm_dec, &sc);
    spm_model_free(sc.m);
    spm_encoding_free(&sc.enc);
    free(sc.s.p);
  }
  cJSON_Delete(root);
  return tu_finish("test_tokenizer_diff");
}
