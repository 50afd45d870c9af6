/*
 * models.c — loading, verifying, swapping and freeing the served models
 * (models.h).
 */
#include "models.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/core.h"
#include "core/sha256.h"

struct models {
  struct models_config c;
  struct metrics *root;
  pthread_mutex_t mu;
  struct model_set *live;
  struct model_set *retired; /* replaced, still held by requests */
  struct model_set *dead;    /* refs reached 0, waiting for models_collect */
};

/* ------------------------------------------------------------------ one folder */

/* The pair: tokenizer_config.json's source_lang/target_lang, else the last
 * two dash-separated words of the folder's name. */
static void folder_pair(const char *dir, const char *name, char *src, char *tgt, size_t cap) {
  char path[4200], *data = NULL;
  size_t len;
  src[0] = tgt[0] = '\0';
  snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
  if (tolk_read_file(path, 1 << 20, &data, &len, NULL) == TOLK_OK) {
    cJSON *j = cJSON_ParseWithLength(data, len);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "source_lang");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "target_lang");
    if (cJSON_IsString(s) && cJSON_IsString(t)) {
      snprintf(src, cap, "%s", s->valuestring);
      snprintf(tgt, cap, "%s", t->valuestring);
    }
    cJSON_Delete(j);
    free(data);
  }
  if (src[0]) return;
  const char *d2 = strrchr(name, '-');
  if (!d2 || d2 == name) return;
  const char *d1 = d2 - 1;
  while (d1 > name && *d1 != '-') d1--;
  if (*d1 != '-') return;
  snprintf(src, cap, "%.*s", (int)(d2 - d1 - 1), d1 + 1);
  snprintf(tgt, cap, "%s", d2 + 1);
}

static void folder_version(const char *dir, char out[16]) {
  char path[4200], hex[65];
  uint64_t size;
  snprintf(path, sizeof path, "%s/tolk-manifest.json", dir);
  if (sha256_file(path, hex, &size, NULL) != TOLK_OK) {
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (sha256_file(path, hex, &size, NULL) != TOLK_OK) snprintf(hex, sizeof hex, "unknown");
  }
  snprintf(out, 16, "%.12s", hex);
}

/* Translates one short sentence: a model that loads but cannot translate
 * must not go live. */
static int smoke(struct engine *e, char *msg, size_t msgsz) {
  tolk_generate_params gp = tolk_generate_default_params(e->tr);
  gp.num_beams = 1;
  gp.max_new_tokens = 8;
  tolk_text_translation t;
  tolk_error err;
  const char *tag = e->targets[0].tag[0] ? e->targets[0].tag : NULL;
  if (tolk_translator_translate_text(e->tr, "Hello.", 6, tag, &gp, &t, &err)) {
    snprintf(msg, msgsz, "%s: smoke translation failed: %s", e->dir, err.message);
    return -1;
  }
  bool empty = !t.text || !*t.text;
  tolk_text_translation_free(&t);
  if (empty) {
    snprintf(msg, msgsz, "%s: smoke translation of \"Hello.\" came back empty", e->dir);
    return -1;
  }
  return 0;
}

static int engine_languages(struct engine *e, char *msg, size_t msgsz) {
  char src[64], tgt[64];
  folder_pair(e->dir, e->name, src, tgt, sizeof src);
  char code[LANG_CODE_MAX];
  lang_normalize(src, code, sizeof code);
  if (!src[0] || !strcmp(code, lang_name(code))) {
    snprintf(msg, msgsz, "%s: unknown source language '%s' (from tokenizer_config.json's source_lang or the folder name)",
             e->dir, src);
    return -1;
  }
  snprintf(e->source, sizeof e->source, "%s", code);
  size_t n_tags;
  const char *const *tags = tolk_tokenizer_language_tags(tolk_translator_tokenizer(e->tr), &n_tags);
  e->n_targets = lang_targets(tgt, tags, n_tags, e->targets, LANG_MAX_TARGETS);
  if (!e->n_targets) {
    snprintf(msg, msgsz, "%s: no known target language (target_lang '%s', %zu tags)", e->dir, tgt, n_tags);
    return -1;
  }
  return 0;
}

static void publish(struct engine *e, struct metrics *root) {
  char info[1200], dir[600], name[300], targets[200] = "";
  for (size_t i = 0; i < e->n_targets; i++) {
    if (i) strncat(targets, " ", sizeof targets - strlen(targets) - 1);
    strncat(targets, e->targets[i].code, sizeof targets - strlen(targets) - 1);
  }
  metrics_label_escape(e->dir, dir, sizeof dir);
  metrics_label_escape(e->name, name, sizeof name);
  snprintf(info, sizeof info,
           "model=\"%s\",folder=\"%s\",source=\"%s\",targets=\"%s\",int8=\"%d\",verified=\"%d\",version=\"%s\"",
           name, dir, e->source, targets, e->int8, e->verified, e->version);
  metrics_set_model(root, e->slot, e->name, info);
}

int engine_open(const char *dir, size_t slot, const struct models_config *c, struct metrics *root,
                struct engine **out, char *msg, size_t msgsz) {
  *out = NULL;
  struct engine *e = calloc(1, sizeof *e);
  if (!e) {
    snprintf(msg, msgsz, "out of memory");
    return -1;
  }
  e->slot = slot;
  size_t l = strlen(dir);
  if (l >= sizeof e->dir) {
    snprintf(msg, msgsz, "model folder path of %zu bytes: at most %zu", l, sizeof e->dir - 1);
    free(e);
    return -1;
  }
  memcpy(e->dir, dir, l + 1);
  while (l > 1 && e->dir[l - 1] == '/') e->dir[--l] = '\0';
  const char *base = strrchr(e->dir, '/');
  base = base ? base + 1 : e->dir;
  /* The name is for display and the API's model list: a long one is cut. */
  size_t bl = strlen(base);
  if (bl >= sizeof e->name) bl = sizeof e->name - 1;
  memcpy(e->name, base, bl);
  e->name[bl] = '\0';
  tolk_translator_params tp = tolk_translator_default_params();
  tp.threads = c->threads;
  tp.int8 = c->int8;
  tp.int8_lm_head = c->int8_lm_head;
  tp.bf16 = c->bf16;
  tp.vmap = c->vmap;
  tp.verify = 1;
  tolk_error err;
  int rc = -1;
  if (tolk_translator_create(e->dir, tp, &e->tr, &err)) {
    snprintf(msg, msgsz, "%s: %s", e->dir, err.message);
    goto done;
  }
  tolk_translator_info info = tolk_translator_describe(e->tr);
  e->int8 = info.int8;
  e->verified = info.verified;
  e->default_beams = tolk_generate_default_params(e->tr).num_beams;
  folder_version(e->dir, e->version);
  if (engine_languages(e, msg, msgsz) || smoke(e, msg, msgsz)) goto done;
  if (sched_create(e->tr, &c->sched, metrics_model(root, slot), &e->sched, &err)) {
    snprintf(msg, msgsz, "%s: %s", e->dir, err.message);
    goto done;
  }
  rc = 0;
done:
  if (rc) engine_close(e);
  else *out = e;
  return rc;
}

void engine_close(struct engine *e) {
  if (!e) return;
  sched_free(e->sched); /* before the translator it runs on */
  tolk_translator_free(e->tr);
  free(e);
}

/* ------------------------------------------------------------------ sets */

static void set_free(struct model_set *s) {
  for (size_t i = 0; i < s->n; i++) engine_close(s->e[i]);
  free(s);
}

static struct model_set *set_open(struct models *m, char *msg, size_t msgsz) {
  struct model_set *s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(msg, msgsz, "out of memory");
    return NULL;
  }
  atomic_init(&s->refs, 1); /* the live pointer's reference */
  for (size_t i = 0; i < m->c.n_dirs && i < METRICS_MAX_MODELS; i++) {
    if (engine_open(m->c.dirs[i], i, &m->c, m->root, &s->e[i], msg, msgsz)) {
      set_free(s);
      return NULL;
    }
    s->n = i + 1;
  }
  return s;
}

struct models *models_create(const struct models_config *c, struct metrics *root) {
  struct models *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->c = *c;
  m->root = root;
  pthread_mutex_init(&m->mu, NULL);
  return m;
}

static int swap_in(struct models *m, bool reload, char *msg, size_t msgsz) {
  if (m->c.n_dirs > METRICS_MAX_MODELS) {
    snprintf(msg, msgsz, "at most %d model folders", METRICS_MAX_MODELS);
    return -1;
  }
  struct model_set *s = set_open(m, msg, msgsz);
  if (reload) metrics_reload(m->root, s != NULL, s ? NULL : msg);
  if (!s) return -1;
  for (size_t i = 0; i < s->n; i++) publish(s->e[i], m->root);
  pthread_mutex_lock(&m->mu);
  struct model_set *old = m->live;
  m->live = s;
  if (old) {
    old->next_dead = m->retired;
    m->retired = old;
  }
  pthread_mutex_unlock(&m->mu);
  if (old) models_release(m, old);
  return 0;
}

int models_load(struct models *m, char *msg, size_t msgsz) { return swap_in(m, false, msg, msgsz); }

int models_reload(struct models *m, char *msg, size_t msgsz) { return swap_in(m, true, msg, msgsz); }

struct model_set *models_acquire(struct models *m) {
  pthread_mutex_lock(&m->mu);
  struct model_set *s = m->live;
  if (s) atomic_fetch_add(&s->refs, 1);
  pthread_mutex_unlock(&m->mu);
  return s;
}

void models_release(struct models *m, struct model_set *s) {
  if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
  pthread_mutex_lock(&m->mu);
  for (struct model_set **pp = &m->retired; *pp; pp = &(*pp)->next_dead)
    if (*pp == s) {
      *pp = s->next_dead;
      break;
    }
  s->next_dead = m->dead;
  m->dead = s;
  pthread_mutex_unlock(&m->mu);
}

void models_collect(struct models *m) {
  pthread_mutex_lock(&m->mu);
  struct model_set *d = m->dead;
  m->dead = NULL;
  pthread_mutex_unlock(&m->mu);
  while (d) {
    struct model_set *next = d->next_dead;
    set_free(d);
    d = next;
  }
}

void models_free(struct models *m) {
  if (!m) return;
  /* Stop every scheduler first: their remaining jobs end (done() is
   * called), the requests holding a set let go, and the sets can be freed. */
  struct sched *scheds[8 * METRICS_MAX_MODELS];
  size_t n = 0;
  pthread_mutex_lock(&m->mu);
  struct model_set *live = m->live;
  m->live = NULL;
  for (struct model_set *s = live ? live : m->retired; s; s = s == live ? m->retired : s->next_dead)
    for (size_t i = 0; i < s->n && n < sizeof scheds / sizeof *scheds; i++) {
      scheds[n++] = s->e[i]->sched;
      s->e[i]->sched = NULL;
    }
  pthread_mutex_unlock(&m->mu);
  for (size_t i = 0; i < n; i++) sched_free(scheds[i]);
  if (live) models_release(m, live);
  models_collect(m);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static const struct engine *find(const struct model_set *s, const char *source, const char *target,
                                 const struct lang_target **tgt, bool *have_source) {
  for (size_t i = 0; i < s->n; i++) {
    const struct engine *e = s->e[i];
    if (strcmp(e->source, source)) continue;
    *have_source = true;
    for (size_t k = 0; k < e->n_targets; k++)
      if (!strcmp(e->targets[k].code, target)) {
        *tgt = &e->targets[k];
        return e;
      }
  }
  return NULL;
}

const struct engine *models_find(const struct model_set *s, const char *source, const char *target,
                                 const struct lang_target **tgt, int *why) {
  bool have = false;
  const struct engine *e = find(s, source, target, tgt, &have);
  if (!e && (!strcmp(source, "zh-Hant") || !strcmp(source, "zh-Hans")))
    e = find(s, !strcmp(source, "zh-Hant") ? "zh-Hans" : "zh-Hant", target, tgt, &have);
  if (!e) *why = have ? 2 : 1;
  return e;
}
