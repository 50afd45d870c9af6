/*
 * test_tokenizer_malformed.c — hostile and broken tokenizer inputs: a
 * SentencePiece model truncated at every byte offset and with corrupted
 * bytes, a charsmap whose trie points outside itself, missing files, broken
 * vocab.json, and text that is not UTF-8. Each must give a clear error or a
 * defined result — never a crash (the suite also runs under ASan+UBSan).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "tokenizer/spm.h"
#include "tolk.h"


static void write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  fwrite(data, 1, len, f);
  fclose(f);
}

/* Every prefix either loads (a prefix can be a valid message) or fails with
 * a message; loaded ones must encode without trouble. */
static void truncations(const unsigned char *model, size_t len) {
  int failed = 0, loaded = 0;
  for (size_t cut = 0; cut < len; cut += cut < 4096 ? 1 : 97) {
    struct spm_model *m = NULL;
    tolk_error err = {0};
    tolk_status st = spm_model_load(model, cut, &m, &err);
    if (st) {
      failed++;
      CHECK_MSG(err.message[0] != '\0', "no message at cut %zu", cut);
      continue;
    }
    loaded++;
    struct spm_encoding enc = {0};
    spm_encode(m, "hello world", 11, &enc, &err);
    spm_encoding_free(&enc);
    spm_model_free(m);
  }
  printf("truncated model: %d prefixes rejected, %d loaded\n", failed, loaded);
  CHECK(failed > 0);
}

/* Flips bytes all over the model; whatever loads must still encode. */
static void corruptions(const unsigned char *model, size_t len) {
  unsigned char *copy = malloc(len);
  uint64_t x = 88172645463325252ull;
  for (int round = 0; round < 400; round++) {
    memcpy(copy, model, len);
    for (int k = 0; k < 8; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      copy[x % len] = (unsigned char)(x >> 32);
    }
    struct spm_model *m = NULL;
    tolk_error err;
    if (spm_model_load(copy, len, &m, &err) == TOLK_OK) {
      struct spm_encoding enc = {0};
      spm_encode(m, "Hello, \xE4\xB8\xAD world \xF0\x9F\x98\x80", 20, &enc, &err);
      spm_encoding_free(&enc);
      spm_model_free(m);
    }
  }
  free(copy);
}

static void bad_folders(const char *fixture) {
  char dir[] = "/tmp/tolk-tok-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[8192], src[8192];
  tolk_tokenizer *tok = NULL;
  tolk_error err = {0};
  CHECK(tolk_tokenizer_create(dir, tolk_tokenizer_default_params(), &tok, &err) != TOLK_OK);
  CHECK_MSG(strstr(err.message, "source.spm") != NULL, "message: %s", err.message);
  const char *files[] = {"source.spm", "target.spm"};
  for (int i = 0; i < 2; i++) {
    size_t len;
    snprintf(src, sizeof src, "%s/%s", fixture, files[i]);
    unsigned char *b = (unsigned char *)tu_slurp(src, &len);
    CHECK_MSG(b != NULL, "cannot read %s", src);
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    write_file(path, b, len);
    free(b);
  }
  snprintf(path, sizeof path, "%s/vocab.json", dir);
  static const char *const vocabs[] = {
      "{\"</s>\": 0, \"<unk>\": 1",                  /* truncated */
      "[1, 2, 3]",                                   /* not an object */
      "{\"</s>\": 0, \"<unk>\": 1, \"<pad>\": -4}",  /* negative id */
      "{\"</s>\": 0, \"<unk>\": 1, \"<pad>\": 1e12}", /* huge id */
      "{\"</s>\": 0, \"<unk>\": 1, \"<pad>\": \"2\"}",
      "{\"</s>\": 0, \"<unk>\": 1, \"x\": 1, \"<pad>\": 2}", /* id twice */
      "{\"</s>\": 0, \"<pad>\": 2}",                 /* no <unk> */
  };
  for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
    write_file(path, vocabs[i], strlen(vocabs[i]));
    err.message[0] = '\0';
    CHECK_MSG(tolk_tokenizer_create(dir, tolk_tokenizer_default_params(), &tok, &err) != TOLK_OK,
              "vocab %zu accepted", i);
    CHECK_MSG(strstr(err.message, "vocab.json") != NULL, "vocab %zu: %s", i, err.message);
    CHECK(tok == NULL);
  }
  static const char good[] = "{\"</s>\": 0, \"<unk>\": 1, \"<pad>\": 2, \"\xE2\x96\x81" "a\": 3}";
  write_file(path, good, strlen(good));
  CHECK(tolk_tokenizer_create(dir, tolk_tokenizer_default_params(), &tok, &err) == TOLK_OK);
  if (tok) {
    /* Invalid UTF-8 is accepted: each bad byte becomes U+FFFD, as in
     * sentencepiece, so the text still encodes. */
    const char *text = "a \xFF\xC0\x80 \xED\xA0\x80 a";
    tolk_ids ids;
    CHECK(tolk_tokenizer_encode_batch(tok, &text, NULL, 1, 0, &ids, &err) == TOLK_OK);
    CHECK(ids.n >= 2 && ids.ids[ids.n - 1] == 0);
    tolk_ids_free(&ids, 1);
    /* Ids out of range decode as <unk>; "▁a" is no target.spm piece, so it
     * stays as it is and its ▁ becomes a space (MarianTokenizer gives the
     * same '<unk>  a<unk>'). */
    int32_t bad[] = {-5, 3, 1 << 30};
    tolk_ids in = {bad, 3, 0};
    char *out;
    CHECK(tolk_tokenizer_decode_batch(tok, &in, 1, 0, &out, &err) == TOLK_OK);
    CHECK_MSG(strcmp(out, "<unk>  a<unk>") == 0, "got '%s'", out);
    tolk_strings_free(&out, 1);
    tolk_tokenizer_free(tok);
  }
  const char *rm[] = {"source.spm", "target.spm", "vocab.json"};
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, rm[i]);
    unlink(path);
  }
  rmdir(dir);
}

/* A charsmap whose double array sends the search outside itself. */
static void hostile_charsmap(void) {
  struct spm_buf b = {0};
  /* ModelProto: one unknown piece, one normal piece, a normalizer with a
   * 2-unit trie whose root offset jumps far away. */
  static const unsigned char pieces[] = {
      0x0A, 0x0E, 0x0A, 0x05, '<', 'u', 'n', 'k', '>', 0x15, 0, 0, 0, 0, 0x18, 0x02,
      0x0A, 0x08, 0x0A, 0x01, 'a', 0x15, 0, 0, 0x80, 0xBF};
  spm_buf_append(&b, pieces, sizeof pieces);
  unsigned char charsmap[4 + 8 + 2] = {8, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0x7F, 0x61, 0x01, 0, 0, 'x', 0};
  unsigned char norm[2 + 2 + sizeof charsmap];
  norm[0] = 0x1A;
  norm[1] = (unsigned char)(2 + sizeof charsmap);
  norm[2] = 0x12;
  norm[3] = (unsigned char)sizeof charsmap;
  memcpy(norm + 4, charsmap, sizeof charsmap);
  spm_buf_append(&b, norm, sizeof norm);
  struct spm_model *m = NULL;
  tolk_error err;
  CHECK_MSG(spm_model_load(b.data, b.len, &m, &err) == TOLK_OK, "%s", err.message);
  if (m) {
    struct spm_encoding enc = {0};
    CHECK(spm_encode(m, "aaa", 3, &enc, &err) == TOLK_OK);
    spm_encoding_free(&enc);
    spm_model_free(m);
  }
  spm_buf_free(&b);
}

int main(void) {
  char fixture[4096], path[8192];
  snprintf(fixture, sizeof fixture, "%s/marian-tiny", tu_fixtures());
  snprintf(path, sizeof path, "%s/../data/spm/unigram-bytefb.model", tu_fixtures());
  size_t len = 0;
  unsigned char *model = (unsigned char *)tu_slurp(path, &len);
  CHECK_MSG(model != NULL, "cannot read %s", path);
  if (model) {
    truncations(model, len);
    corruptions(model, len);
    free(model);
  }
  hostile_charsmap();
  bad_folders(fixture);
  return tu_finish("test_tokenizer_malformed");
}
