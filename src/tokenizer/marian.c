/*
 * marian.c — the Marian tokenizer as HuggingFace's MarianTokenizer
 * (transformers 4.57) behaves: special-token strings in the text are split
 * out first; each remaining chunk loses a leading ">>tag<<" (kept whole as one
 * token) and is encoded by source.spm; tokens map to ids through vocab.json
 * (unknown → <unk>) and </s> is appended. Decoding maps ids back to pieces
 * (unknown ids → <unk>) and decodes runs between special tokens with
 * target.spm.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spm.h"
#include "tolk.h"

enum { MAX_JSON_BYTES = 256 << 20, MAX_VOCAB = 1 << 22, MAX_SPECIAL = 3 };

/* piece -> id, open addressing over the vocabulary's piece array. */
struct vocab {
  char **pieces; /* id -> piece (NULL for ids the file does not define) */
  size_t n;      /* max id + 1 */
  int32_t *slots;
  size_t mask;
};

struct tolk_tokenizer {
  struct spm_model *src, *tgt;
  struct vocab vocab, tgt_vocab; /* tgt_vocab.n == 0 unless separate vocabs */
  char *special[MAX_SPECIAL];    /* eos, unk, pad strings */
  size_t special_len[MAX_SPECIAL];
  int32_t eos, unk, pad;
  const char **tags;
  size_t n_tags;
  int max_length;
  bool clean_up_spaces;
};

tolk_tokenizer_params tolk_tokenizer_default_params(void) {
  tolk_tokenizer_params p = {0};
  return p;
}

/* ------------------------------------------------------------------ files */

static tolk_status path_join(char *buf, size_t size, const char *dir, const char *name,
                             tolk_error *err) {
  int n = snprintf(buf, size, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= size)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "path too long: %s/%s", dir, name);
  return TOLK_OK;
}

static tolk_status parse_json_file(const char *path, cJSON **out, tolk_error *err) {
  char *text;
  size_t len;
  tolk_status st = tolk_read_file(path, MAX_JSON_BYTES, &text, &len, err);
  if (st) return st;
  const char *end = NULL;
  *out = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if (!*out) {
    size_t at = end ? (size_t)(end - text) : 0;
    free(text);
    return tolk_fail(err, TOLK_ERR_MALFORMED, "%s: invalid JSON near byte %zu", path, at);
  }
  free(text);
  return TOLK_OK;
}

/* ------------------------------------------------------------------ vocab */

static uint64_t hash_str(const char *s, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
  return h;
}

static int32_t vocab_find(const struct vocab *v, const char *s, size_t len) {
  for (size_t i = hash_str(s, len) & v->mask;; i = (i + 1) & v->mask) {
    int32_t id = v->slots[i];
    if (id < 0) return -1;
    const char *p = v->pieces[id];
    if (strlen(p) == len && memcmp(p, s, len) == 0) return id;
  }
}

static void vocab_free(struct vocab *v) {
  for (size_t i = 0; i < v->n; i++) free(v->pieces[i]);
  free(v->pieces);
  free(v->slots);
  memset(v, 0, sizeof *v);
}

/* vocab.json: {"piece": id, …}. Marian vocabularies are one-to-one; a
 * repeated piece or id is reported rather than resolved silently. */
static tolk_status vocab_load(const char *path, struct vocab *v, tolk_error *err) {
  cJSON *root;
  tolk_status st = parse_json_file(path, &root, err);
  if (st) return st;
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return tolk_fail(err, TOLK_ERR_MALFORMED, "%s: expected a JSON object of piece: id", path);
  }
  size_t count = 0, max_id = 0;
  for (cJSON *it = root->child; it; it = it->next) {
    double d = it->valuedouble;
    if (!cJSON_IsNumber(it) || d < 0 || d >= MAX_VOCAB || d != (double)(int32_t)d || !it->string) {
      st = tolk_fail(err, TOLK_ERR_MALFORMED, "%s: entry %zu ('%.40s') is not a piece with an id in [0, %d)",
                     path, count, it->string ? it->string : "", MAX_VOCAB);
      cJSON_Delete(root);
      return st;
    }
    if ((size_t)d > max_id) max_id = (size_t)d;
    count++;
  }
  if (count == 0) {
    cJSON_Delete(root);
    return tolk_fail(err, TOLK_ERR_MALFORMED, "%s: empty vocabulary", path);
  }
  size_t cap = 16;
  while (cap < 2 * count + 1) cap *= 2;
  v->n = max_id + 1;
  v->pieces = calloc(v->n, sizeof *v->pieces);
  v->slots = malloc(cap * sizeof *v->slots);
  v->mask = cap - 1;
  if (!v->pieces || !v->slots) {
    cJSON_Delete(root);
    vocab_free(v);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "%s: out of memory", path);
  }
  for (size_t i = 0; i < cap; i++) v->slots[i] = -1;
  for (cJSON *it = root->child; it; it = it->next) {
    int32_t id = (int32_t)it->valuedouble;
    size_t len = strlen(it->string);
    if (vocab_find(v, it->string, len) >= 0 || v->pieces[id]) {
      st = tolk_fail(err, TOLK_ERR_MALFORMED, "%s: piece '%.40s' or id %d appears twice", path,
                     it->string, (int)id);
      cJSON_Delete(root);
      vocab_free(v);
      return st;
    }
    v->pieces[id] = malloc(len + 1);
    if (!v->pieces[id]) {
      cJSON_Delete(root);
      vocab_free(v);
      return tolk_fail(err, TOLK_ERR_NO_MEMORY, "%s: out of memory", path);
    }
    memcpy(v->pieces[id], it->string, len + 1);
    size_t s = hash_str(it->string, len) & v->mask;
    while (v->slots[s] >= 0 && v->slots[s] != id) s = (s + 1) & v->mask;
    v->slots[s] = id;
  }
  cJSON_Delete(root);
  return TOLK_OK;
}

/* ------------------------------------------------------------------ config */

/* A special token in tokenizer_config.json is a string or {"content": …}. */
static const char *config_token(const cJSON *cfg, const char *key, const char *dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
  if (cJSON_IsString(v)) return v->valuestring;
  if (cJSON_IsObject(v)) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (cJSON_IsString(c)) return c->valuestring;
  }
  return dflt;
}

static tolk_status set_special(tolk_tokenizer *t, int i, const char *s, tolk_error *err) {
  size_t len = strlen(s);
  t->special[i] = malloc(len + 1);
  if (!t->special[i]) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "tokenizer: out of memory");
  memcpy(t->special[i], s, len + 1);
  t->special_len[i] = len;
  return TOLK_OK;
}

/* Reads tokenizer_config.json (optional) for special tokens, vocab layout,
 * max length and decoding clean-up; *separate receives separate_vocabs. */
static tolk_status load_config(tolk_tokenizer *t, const char *dir, bool *separate,
                               int *model_max, tolk_error *err) {
  char path[4096];
  tolk_status st = path_join(path, sizeof path, dir, "tokenizer_config.json", err);
  if (st) return st;
  cJSON *cfg = NULL;
  FILE *probe = fopen(path, "rb");
  if (probe) {
    fclose(probe);
    if ((st = parse_json_file(path, &cfg, err))) return st;
  }
  static const char *const keys[MAX_SPECIAL] = {"eos_token", "unk_token", "pad_token"};
  static const char *const dflt[MAX_SPECIAL] = {"</s>", "<unk>", "<pad>"};
  for (int i = 0; i < MAX_SPECIAL && !st; i++)
    st = set_special(t, i, config_token(cfg, keys[i], dflt[i]), err);
  *separate = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "separate_vocabs"));
  t->clean_up_spaces =
      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "clean_up_tokenization_spaces"));
  const cJSON *ml = cJSON_GetObjectItemCaseSensitive(cfg, "model_max_length");
  *model_max = cJSON_IsNumber(ml) && ml->valuedouble >= 1 && ml->valuedouble < 1e9
                   ? (int)ml->valuedouble
                   : 512;
  cJSON_Delete(cfg);
  return st;
}

static tolk_status collect_tags(tolk_tokenizer *t, tolk_error *err) {
  const struct vocab *v = &t->vocab;
  t->tags = calloc(v->n ? v->n : 1, sizeof *t->tags);
  if (!t->tags) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "tokenizer: out of memory");
  for (size_t id = 0; id < v->n; id++) {
    const char *p = v->pieces[id];
    size_t len = p ? strlen(p) : 0;
    if (len >= 4 && !memcmp(p, ">>", 2) && !memcmp(p + len - 2, "<<", 2)) t->tags[t->n_tags++] = p;
  }
  return TOLK_OK;
}

static tolk_status load_all(tolk_tokenizer *t, const char *dir, tolk_tokenizer_params params,
                            tolk_error *err) {
  char path[4096];
  bool separate = false;
  int model_max = 512;
  tolk_status st = load_config(t, dir, &separate, &model_max, err);
  if (!st) st = path_join(path, sizeof path, dir, "source.spm", err);
  if (!st) st = spm_model_load_file(path, &t->src, err);
  if (!st) st = path_join(path, sizeof path, dir, "target.spm", err);
  if (!st) st = spm_model_load_file(path, &t->tgt, err);
  if (!st) st = path_join(path, sizeof path, dir, "vocab.json", err);
  if (!st) st = vocab_load(path, &t->vocab, err);
  if (!st && separate) {
    st = path_join(path, sizeof path, dir, "target_vocab.json", err);
    if (!st) st = vocab_load(path, &t->tgt_vocab, err);
  }
  if (st) return st;
  int32_t *ids[MAX_SPECIAL] = {&t->eos, &t->unk, &t->pad};
  for (int i = 0; i < MAX_SPECIAL; i++) {
    *ids[i] = vocab_find(&t->vocab, t->special[i], t->special_len[i]);
    if (*ids[i] < 0)
      return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "%s/vocab.json: special token '%s' is missing",
                       dir, t->special[i]);
  }
  t->max_length = params.max_length < 0 ? model_max : params.max_length;
  /* Without separate vocabularies, only the shared one lists language tags. */
  return separate ? TOLK_OK : collect_tags(t, err);
}

tolk_status tolk_tokenizer_create(const char *model_dir, tolk_tokenizer_params params,
                                  tolk_tokenizer **out, tolk_error *err) {
  *out = NULL;
  if (!model_dir) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "tokenizer: no model folder");
  tolk_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "tokenizer: out of memory");
  tolk_status st = load_all(t, model_dir, params, err);
  if (st) {
    tolk_tokenizer_free(t);
    return st;
  }
  *out = t;
  return TOLK_OK;
}

void tolk_tokenizer_free(tolk_tokenizer *t) {
  if (!t) return;
  spm_model_free(t->src);
  spm_model_free(t->tgt);
  vocab_free(&t->vocab);
  vocab_free(&t->tgt_vocab);
  for (int i = 0; i < MAX_SPECIAL; i++) free(t->special[i]);
  free(t->tags);
  free(t);
}

/* ------------------------------------------------------------------ encode */

/* Receives each token of a text: special tokens and language tags whole,
 * then sentencepiece pieces. */
typedef bool (*token_fn)(void *ctx, const char *p, size_t len);

/* The special token starting at text[0..len), longest first; 0 if none. */
static size_t special_at(const tolk_tokenizer *t, const char *s, size_t len) {
  size_t best = 0;
  for (int i = 0; i < MAX_SPECIAL; i++) {
    size_t n = t->special_len[i];
    if (n > best && n <= len && memcmp(s, t->special[i], n) == 0) best = n;
  }
  return best;
}

static tolk_status tokenize_chunk(const struct spm_model *spm, const char *s, size_t len,
                                  token_fn fn, void *ctx, struct spm_encoding *enc,
                                  tolk_error *err) {
  /* MarianTokenizer.remove_language_code: ">>" at the start and the first
   * "<<" anywhere after it delimit a tag. */
  if (len >= 2 && s[0] == '>' && s[1] == '>') {
    const char *close = memmem(s, len, "<<", 2);
    if (close) {
      size_t tag = (size_t)(close - s) + 2;
      if (!fn(ctx, s, tag)) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "tokenize: out of memory");
      s += tag;
      len -= tag;
    }
  }
  tolk_status st = spm_encode(spm, s, len, enc, err);
  if (st) return st;
  for (size_t i = 0; i < enc->n_pieces; i++) {
    size_t plen;
    const char *p = spm_encoding_piece(spm, enc, i, &plen);
    if (!fn(ctx, p, plen)) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "tokenize: out of memory");
  }
  return TOLK_OK;
}

static tolk_status tokenize(const tolk_tokenizer *t, const char *text, size_t len, int flags,
                            token_fn fn, void *ctx, tolk_error *err) {
  const struct spm_model *spm = (flags & TOLK_TOKENIZE_TARGET) ? t->tgt : t->src;
  struct spm_encoding enc = {0};
  tolk_status st = TOLK_OK;
  size_t start = 0;
  for (size_t i = 0; i <= len && !st;) {
    size_t sp = i < len ? special_at(t, text + i, len - i) : 0;
    if (!sp && i < len) {
      i++;
      continue;
    }
    if (i > start) st = tokenize_chunk(spm, text + start, i - start, fn, ctx, &enc, err);
    if (!st && sp && !fn(ctx, text + i, sp))
      st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "tokenize: out of memory");
    if (!sp) break;
    i += sp;
    start = i;
  }
  spm_encoding_free(&enc);
  return st;
}

struct id_sink {
  const struct vocab *vocab;
  int32_t unk;
  int32_t *ids;
  size_t n, cap;
};

static bool push_id(struct id_sink *s, int32_t id) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    int32_t *p = realloc(s->ids, cap * sizeof *p);
    if (!p) return false;
    s->ids = p;
    s->cap = cap;
  }
  s->ids[s->n++] = id;
  return true;
}

static bool sink_token(void *ctx, const char *p, size_t len) {
  struct id_sink *s = ctx;
  int32_t id = vocab_find(s->vocab, p, len);
  return push_id(s, id >= 0 ? id : s->unk);
}

static tolk_status encode_one(const tolk_tokenizer *t, const char *text, size_t len, int flags,
                              tolk_ids *out, tolk_error *err) {
  bool separate = (flags & TOLK_TOKENIZE_TARGET) && t->tgt_vocab.n;
  struct id_sink s = {separate ? &t->tgt_vocab : &t->vocab, 0, NULL, 0, 0};
  s.unk = vocab_find(s.vocab, t->special[1], t->special_len[1]);
  if (s.unk < 0) s.unk = t->unk;
  tolk_status st = tokenize(t, text, len, flags, sink_token, &s, err);
  if (!st && !(flags & TOLK_TOKENIZE_NO_EOS) && !push_id(&s, t->eos))
    st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "tokenize: out of memory");
  if (st) {
    free(s.ids);
    return st;
  }
  out->dropped = 0;
  /* transformers truncates the text's ids so that they and </s> fit. */
  if (t->max_length > 0 && s.n > (size_t)t->max_length) {
    out->dropped = s.n - (size_t)t->max_length;
    if (!(flags & TOLK_TOKENIZE_NO_EOS)) s.ids[t->max_length - 1] = t->eos;
    s.n = (size_t)t->max_length;
  }
  out->ids = s.ids;
  out->n = s.n;
  return TOLK_OK;
}

tolk_status tolk_tokenizer_encode_batch(const tolk_tokenizer *tok, const char *const *texts,
                                        const size_t *lens, size_t n, int flags,
                                        tolk_ids *out, tolk_error *err) {
  if (!tok || (n && (!texts || !out)))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "tokenize: null argument");
  for (size_t i = 0; i < n; i++) {
    if (!texts[i]) {
      tolk_ids_free(out, i);
      return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "tokenize: text %zu is null", i);
    }
    size_t len = lens ? lens[i] : strlen(texts[i]);
    tolk_status st = encode_one(tok, texts[i], len, flags, &out[i], err);
    if (st) {
      tolk_error_prefix(err, "text %zu", i);
      tolk_ids_free(out, i);
      return st;
    }
  }
  return TOLK_OK;
}

void tolk_ids_free(tolk_ids *ids, size_t n) {
  if (!ids) return;
  for (size_t i = 0; i < n; i++) {
    free(ids[i].ids);
    ids[i].ids = NULL;
    ids[i].n = 0;
  }
}

/* The tokens of one text as strings (for `tolk tokenize --pieces`). */
struct str_sink {
  char **items;
  size_t n, cap;
};

static bool sink_string(void *ctx, const char *p, size_t len) {
  struct str_sink *s = ctx;
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    char **items = realloc(s->items, cap * sizeof *items);
    if (!items) return false;
    s->items = items;
    s->cap = cap;
  }
  char *copy = malloc(len + 1);
  if (!copy) return false;
  memcpy(copy, p, len);
  copy[len] = '\0';
  s->items[s->n++] = copy;
  return true;
}

tolk_status tolk_tokenizer_tokenize(const tolk_tokenizer *tok, const char *text, size_t len,
                                    int flags, tolk_tokens *out, tolk_error *err) {
  struct str_sink s = {0};
  tolk_status st = tokenize(tok, text, len, flags, sink_string, &s, err);
  *out = (tolk_tokens){s.items, s.n};
  if (st) tolk_tokens_free(out);
  return st;
}

void tolk_tokens_free(tolk_tokens *t) {
  if (!t) return;
  tolk_strings_free(t->tokens, t->n);
  free(t->tokens);
  t->tokens = NULL;
  t->n = 0;
}

void tolk_strings_free(char **strings, size_t n) {
  if (!strings) return;
  for (size_t i = 0; i < n; i++) {
    free(strings[i]);
    strings[i] = NULL;
  }
}

/* ------------------------------------------------------------------ decode */

/* Python's str.isspace() for one code point. */
static bool py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Decodes the UTF-8 character at s (valid: the decoder only produces valid
 * UTF-8 or copies input pieces, which came from valid JSON). */
static uint32_t utf8_at(const char *s, size_t len, size_t *n) {
  const uint8_t *b = (const uint8_t *)s;
  if (b[0] < 0x80 || len < 2) return *n = 1, b[0];
  if ((b[0] & 0xE0) == 0xC0) return *n = 2, (uint32_t)(b[0] & 0x1F) << 6 | (b[1] & 0x3F);
  if ((b[0] & 0xF0) == 0xE0 && len >= 3)
    return *n = 3, (uint32_t)(b[0] & 0x0F) << 12 | (uint32_t)(b[1] & 0x3F) << 6 | (b[2] & 0x3F);
  if ((b[0] & 0xF8) == 0xF0 && len >= 4)
    return *n = 4, (uint32_t)(b[0] & 0x07) << 18 | (uint32_t)(b[1] & 0x3F) << 12 |
                       (uint32_t)(b[2] & 0x3F) << 6 | (b[3] & 0x3F);
  return *n = 1, b[0];
}

/* str.strip(): whitespace off both ends, in place. */
static void py_strip(struct spm_buf *b) {
  size_t start = 0, end = b->len, n;
  while (start < end && py_space(utf8_at(b->data + start, end - start, &n))) start += n;
  while (end > start) {
    size_t back = end - 1;
    while (back > start && ((uint8_t)b->data[back] & 0xC0) == 0x80) back--;
    if (!py_space(utf8_at(b->data + back, end - back, &n))) break;
    end = back;
  }
  memmove(b->data, b->data + start, end - start);
  b->len = end - start;
  b->data[b->len] = '\0';
}

/* transformers' clean_up_tokenization, for configs that ask for it. */
static void clean_up_spaces(struct spm_buf *b) {
  static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
  static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};
  for (size_t r = 0; r < sizeof from / sizeof from[0]; r++) {
    size_t fl = strlen(from[r]), tl = strlen(to[r]), w = 0;
    for (size_t i = 0; i < b->len;) {
      if (b->len - i >= fl && memcmp(b->data + i, from[r], fl) == 0) {
        memmove(b->data + w, to[r], tl);
        w += tl;
        i += fl;
      } else {
        b->data[w++] = b->data[i++];
      }
    }
    b->len = w;
    b->data[w] = '\0';
  }
}

static bool is_special(const tolk_tokenizer *t, const char *p) {
  for (int i = 0; i < MAX_SPECIAL; i++)
    if (strcmp(p, t->special[i]) == 0) return true;
  return false;
}

/* Decodes the pending sentencepiece run and appends it. */
static tolk_status flush_run(const struct spm_model *spm, const char **run, size_t *lens,
                             size_t *n_run, struct spm_buf *out, tolk_error *err) {
  struct spm_buf text = {0};
  tolk_status st = spm_decode_pieces(spm, run, lens, *n_run, &text, err);
  if (!st && !spm_buf_append(out, text.data, text.len))
    st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "decode: out of memory");
  spm_buf_free(&text);
  *n_run = 0;
  return st;
}

static tolk_status decode_one(const tolk_tokenizer *t, const tolk_ids *in, int flags, char **out,
                              tolk_error *err) {
  const struct vocab *v = t->tgt_vocab.n && !(flags & TOLK_DECODE_SOURCE) ? &t->tgt_vocab : &t->vocab;
  const struct spm_model *spm = (flags & TOLK_DECODE_SOURCE) ? t->src : t->tgt;
  const char **run = malloc((in->n ? in->n : 1) * sizeof *run);
  size_t *lens = malloc((in->n ? in->n : 1) * sizeof *lens);
  struct spm_buf res = {0};
  tolk_status st = run && lens && spm_buf_append(&res, "", 0)
                       ? TOLK_OK
                       : tolk_fail(err, TOLK_ERR_NO_MEMORY, "decode: out of memory");
  size_t n_run = 0;
  for (size_t i = 0; i < in->n && !st; i++) {
    int32_t id = in->ids[i];
    const char *p = id >= 0 && (size_t)id < v->n && v->pieces[id] ? v->pieces[id] : t->special[1];
    bool special = is_special(t, p);
    if (special && (flags & TOLK_DECODE_SKIP_SPECIAL)) continue;
    if (!special) {
      run[n_run] = p;
      lens[n_run++] = strlen(p);
      continue;
    }
    st = flush_run(spm, run, lens, &n_run, &res, err);
    if (!st && (!spm_buf_append(&res, p, strlen(p)) || !spm_buf_append(&res, " ", 1)))
      st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "decode: out of memory");
  }
  if (!st) st = flush_run(spm, run, lens, &n_run, &res, err);
  free(run);
  free(lens);
  if (st) {
    spm_buf_free(&res);
    return st;
  }
  /* MarianTokenizer replaces any ▁ left (in special tokens) and strips. */
  for (char *q; (q = memmem(res.data, res.len, "\xe2\x96\x81", 3));) {
    *q = ' ';
    memmove(q + 1, q + 3, res.len - (size_t)(q + 3 - res.data) + 1);
    res.len -= 2;
  }
  py_strip(&res);
  if (t->clean_up_spaces) clean_up_spaces(&res);
  *out = res.data;
  return TOLK_OK;
}

tolk_status tolk_tokenizer_decode_batch(const tolk_tokenizer *tok, const tolk_ids *in, size_t n,
                                        int flags, char **out, tolk_error *err) {
  if (!tok || (n && (!in || !out)))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "decode: null argument");
  for (size_t i = 0; i < n; i++) {
    tolk_status st = decode_one(tok, &in[i], flags, &out[i], err);
    if (st) {
      tolk_error_prefix(err, "sequence %zu", i);
      tolk_strings_free(out, i);
      return st;
    }
  }
  return TOLK_OK;
}

/* ------------------------------------------------------------------ lookups */

size_t tolk_tokenizer_vocab_size(const tolk_tokenizer *tok) { return tok->vocab.n; }

const char *tolk_tokenizer_id_to_piece(const tolk_tokenizer *tok, int32_t id) {
  if (id < 0 || (size_t)id >= tok->vocab.n) return NULL;
  return tok->vocab.pieces[id];
}

int32_t tolk_tokenizer_piece_to_id(const tolk_tokenizer *tok, const char *piece) {
  return piece ? vocab_find(&tok->vocab, piece, strlen(piece)) : -1;
}

tolk_special_ids tolk_tokenizer_special_ids(const tolk_tokenizer *tok) {
  tolk_special_ids s = {tok->eos, tok->unk, tok->pad};
  return s;
}

const char *const *tolk_tokenizer_language_tags(const tolk_tokenizer *tok, size_t *n) {
  *n = tok->n_tags;
  return tok->tags;
}
