/*
 * test_tokenizer_golden.c — the tokenizer against MarianTokenizer and sentencepiece
 * outputs recorded by tools/make_fixtures.py (tests/fixtures/golden/
 * tokenizer.json): for every sentence the normalised text, the sentencepiece
 * pieces and ids, the Marian ids (source and target side); for target ids the
 * decoded text with and without special tokens. Every mismatch is printed.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tokenizer/spm.h"
#include "tolk.h"


/* cJSON stops a string at an escaped NUL, and the goldens have texts with
 * NULs. Texts are therefore read from the raw JSON too: the n-th
 * {"text": "…" of a section, unescaped here (the goldens escape only with
 * \\uXXXX, \\n-style escapes and surrogate pairs). */
static const char *raw_json;

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
  if (cp < 0x10000)
    return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3F)),
           o[2] = (char)(0x80 | (cp & 0x3F)), 3;
  return o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3F)),
         o[2] = (char)(0x80 | (cp >> 6 & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F)), 4;
}

/* Unescapes the JSON string starting after its opening quote at p into a new
 * buffer; *len receives its length. */
static char *json_unescape(const char *p, size_t *len) {
  char *out = malloc(strlen(p) + 1), *o = out;
  while (*p && *p != '"') {
    if (*p != '\\') {
      *o++ = *p++;
      continue;
    }
    p++;
    char c = *p++;
    if (c == 'u') {
      unsigned cp = (unsigned)strtoul((char[5]){p[0], p[1], p[2], p[3], 0}, NULL, 16);
      p += 4;
      if (cp >= 0xD800 && cp < 0xDC00 && p[0] == '\\' && p[1] == 'u') {
        unsigned lo = (unsigned)strtoul((char[5]){p[2], p[3], p[4], p[5], 0}, NULL, 16);
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        p += 6;
      }
      o += put_utf8(o, cp);
    } else {
      *o++ = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
    }
  }
  *len = (size_t)(o - out);
  *o = '\0';
  return out;
}

/* The next raw text value after *cursor. */
static char *next_raw_text(const char **cursor, size_t *len) {
  const char *p = strstr(*cursor, "{\"text\": \"");
  if (!p) return NULL;
  p += 10;
  *cursor = p;
  return json_unescape(p, len);
}

static int mismatches_shown;

static void show(const char *what, const char *text) {
  if (mismatches_shown++ < 20) fprintf(stderr, "  mismatch (%s) for text: %s\n", what, text);
}

static bool ids_equal(const cJSON *expect, const int32_t *ids, size_t n) {
  if ((size_t)cJSON_GetArraySize(expect) != n) return false;
  size_t i = 0;
  for (const cJSON *e = expect->child; e; e = e->next, i++)
    if ((int32_t)e->valuedouble != ids[i]) return false;
  return true;
}

static void check_encode(const tolk_tokenizer *tok, const cJSON *cases, const char *section,
                         int flags, int *ok, int *total) {
  const char *cursor = strstr(raw_json, section);
  for (const cJSON *c = cases->child; c; c = c->next) {
    size_t len;
    char *text = next_raw_text(&cursor, &len);
    const char *expect = cJSON_GetObjectItem(c, "text")->valuestring;
    (*total)++;
    if (!text || strncmp(text, expect, strlen(expect)) != 0) {
      show("raw text out of step", expect);
      free(text);
      continue;
    }
    tolk_ids ids;
    tolk_error err;
    if (tolk_tokenizer_encode_batch(tok, (const char *const *)&text, &len, 1, flags, &ids, &err)) {
      show(err.message, text);
      free(text);
      continue;
    }
    if (ids_equal(cJSON_GetObjectItem(c, "ids"), ids.ids, ids.n)) (*ok)++;
    else show("ids", text);
    tolk_ids_free(&ids, 1);
    free(text);
  }
}

/* The sentencepiece stage alone: normalisation and pieces of source.spm. */
static void check_spm(const struct spm_model *m, const cJSON *cases, int *ok, int *total) {
  struct spm_encoding enc = {0};
  const char *cursor = strstr(raw_json, "\"encode\"");
  for (const cJSON *c = cases->child; c; c = c->next) {
    const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
    size_t raw_len;
    free(next_raw_text(&cursor, &raw_len));
    const cJSON *norm = cJSON_GetObjectItem(c, "spm_normalized");
    const cJSON *pieces = cJSON_GetObjectItem(c, "spm_pieces");
    const cJSON *spm_ids = cJSON_GetObjectItem(c, "spm_ids");
    /* Marian splits language tags and special tokens off first; the spm
     * fields were recorded for the whole text, so compare only texts that
     * have neither. */
    if (strstr(text, ">>") || strstr(text, "</s>") || strstr(text, "<unk>") || strstr(text, "<pad>")) continue;
    /* Texts with a NUL are covered by check_encode (cJSON cuts them). */
    if (raw_len != strlen(text)) continue;
    (*total)++;
    tolk_error err;
    if (spm_encode(m, text, strlen(text), &enc, &err)) {
      show(err.message, text);
      continue;
    }
    bool same = strcmp(enc.norm.data ? enc.norm.data : "", norm->valuestring) == 0 &&
                (size_t)cJSON_GetArraySize(pieces) == enc.n_pieces;
    size_t i = 0;
    for (const cJSON *p = pieces->child, *q = spm_ids ? spm_ids->child : NULL; same && p;
         p = p->next, q = q ? q->next : NULL, i++) {
      size_t len;
      const char *s = spm_encoding_piece(m, &enc, i, &len);
      same = strlen(p->valuestring) == len && memcmp(s, p->valuestring, len) == 0 &&
             (!q || (int)q->valuedouble == enc.pieces[i].id);
    }
    if (same) (*ok)++;
    else show("spm", text);
  }
  spm_encoding_free(&enc);
}

static void check_decode(const tolk_tokenizer *tok, const cJSON *cases, int *ok, int *total) {
  for (const cJSON *c = cases->child; c; c = c->next) {
    const cJSON *jids = cJSON_GetObjectItem(c, "ids");
    size_t n = (size_t)cJSON_GetArraySize(jids);
    int32_t *v = malloc((n ? n : 1) * sizeof *v);
    size_t i = 0;
    for (const cJSON *e = jids->child; e; e = e->next) v[i++] = (int32_t)e->valuedouble;
    tolk_ids ids = {v, n, 0};
    static const char *const keys[2] = {"text", "text_with_special"};
    for (int k = 0; k < 2; k++) {
      char *out = NULL;
      tolk_error err;
      (*total)++;
      int flags = k == 0 ? TOLK_DECODE_SKIP_SPECIAL : 0;
      const char *expect = cJSON_GetObjectItem(c, keys[k])->valuestring;
      if (tolk_tokenizer_decode_batch(tok, &ids, 1, flags, &out, &err)) {
        show(err.message, expect);
        continue;
      }
      if (strcmp(out, expect) == 0) (*ok)++;
      else {
        show(keys[k], expect);
        if (mismatches_shown <= 20) fprintf(stderr, "    got: %s\n", out);
      }
      tolk_strings_free(&out, 1);
    }
    free(v);
  }
}

int main(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/golden/tokenizer.json", tu_fixtures());
  size_t len;
  char *json = tu_slurp(path, &len);
  CHECK_MSG(json != NULL, "cannot read %s", path);
  if (!json) return tu_finish("test_tokenizer_golden");
  cJSON *root = cJSON_Parse(json);
  raw_json = json;
  CHECK(root != NULL);
  snprintf(path, sizeof path, "%s/marian-tiny", tu_fixtures());
  tolk_tokenizer *tok = NULL;
  tolk_error err;
  tolk_status st = tolk_tokenizer_create(path, tolk_tokenizer_default_params(), &tok, &err);
  CHECK_MSG(st == TOLK_OK, "%s", err.message);
  snprintf(path, sizeof path, "%s/marian-tiny/source.spm", tu_fixtures());
  struct spm_model *spm = NULL;
  CHECK(spm_model_load_file(path, &spm, &err) == TOLK_OK);
  if (tok && spm && root) {
    int ok = 0, total = 0;
    check_encode(tok, cJSON_GetObjectItem(root, "encode"), "\"encode\"", 0, &ok, &total);
    printf("encode (source): %d / %d identical\n", ok, total);
    CHECK(ok == total && total >= 2000);
    ok = total = 0;
    check_encode(tok, cJSON_GetObjectItem(root, "target_encode"), "\"target_encode\"",
                 TOLK_TOKENIZE_TARGET, &ok, &total);
    printf("encode (target): %d / %d identical\n", ok, total);
    CHECK(ok == total && total > 0);
    ok = total = 0;
    check_spm(spm, cJSON_GetObjectItem(root, "encode"), &ok, &total);
    printf("sentencepiece normalise + pieces: %d / %d identical\n", ok, total);
    CHECK(ok == total && total > 0);
    ok = total = 0;
    check_decode(tok, cJSON_GetObjectItem(root, "decode"), &ok, &total);
    printf("decode: %d / %d identical\n", ok, total);
    CHECK(ok == total && total > 0);
  }
  spm_model_free(spm);
  tolk_tokenizer_free(tok);
  cJSON_Delete(root);
  free(json);
  return tu_finish("test_tokenizer_golden");
}
