/*
 * models.h — the models `tolk serve` runs: one engine (translator +
 * scheduler) per -m folder, grouped in a model set that requests hold a
 * reference to. SIGHUP builds a whole new set, verifies every folder
 * (manifest checksums, graphs compiled, a smoke translation) and swaps it in
 * at once; if any folder fails, nothing changes and the old set keeps
 * serving. A replaced set lives on while requests hold it, so work in
 * flight finishes on the version it started on, and is freed by
 * models_collect once the last one lets go (never from a scheduler
 * callback, which could otherwise join its own thread).
 *
 * A folder's language pair comes from its tokenizer_config.json
 * (source_lang / target_lang, as Marian exports write them), else from its
 * name (…-en-zh); its target codes from its vocabulary's language tags.
 */
#ifndef TOLK_SERVE_MODELS_H
#define TOLK_SERVE_MODELS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "lang.h"
#include "metrics.h"
#include "sched.h"
#include "tolk.h"

struct engine {
  size_t slot;                /* which -m it came from */
  char dir[4096], name[256];  /* folder and its base name */
  tolk_translator *tr;
  struct sched *sched;
  char source[LANG_CODE_MAX];
  struct lang_target targets[LANG_MAX_TARGETS];
  size_t n_targets;
  int default_beams;
  bool int8, verified;
  char version[16];           /* start of the manifest's (else config's) sha256 */
};

struct model_set {
  atomic_int refs;
  struct engine *e[METRICS_MAX_MODELS];
  size_t n;
  struct model_set *next_dead;
};

struct models_config {
  const char *const *dirs;
  size_t n_dirs;
  int threads;
  bool int8;
  struct sched_params sched;
  bool int8_lm_head;
  const char *vmap; /* tolk_translator_params.vmap, for every model */
  int bf16;         /* tolk_translator_params.bf16 */
};

struct models;

/* Nothing is loaded yet: models_acquire returns NULL until models_load. */
struct models *models_create(const struct models_config *c, struct metrics *root);
void models_free(struct models *m);

/* Loads and verifies every folder; on success the set goes live. 0 / -1
 * with msg naming the folder and what failed. */
int models_load(struct models *m, char *msg, size_t msgsz);
/* The same, replacing the live set only if every folder passes. */
int models_reload(struct models *m, char *msg, size_t msgsz);

/* A reference to the live set (NULL while none is loaded). */
struct model_set *models_acquire(struct models *m);
void models_release(struct models *m, struct model_set *s);
/* Frees replaced sets nobody holds any more. */
void models_collect(struct models *m);

/* The engine translating source → target (service codes; see lang.h),
 * and in *target that target's entry. NULL when none: *why is 1 for an
 * unknown source, 2 for a source without that target. A source of zh-Hant
 * falls back to a zh-Hans model and back, as LibreTranslate does. */
const struct engine *models_find(const struct model_set *s, const char *source, const char *target,
                                 const struct lang_target **tgt, int *why);

/* Opens and verifies one folder (what --check and reloads do). */
int engine_open(const char *dir, size_t slot, const struct models_config *c, struct metrics *root,
                struct engine **out, char *msg, size_t msgsz);
void engine_close(struct engine *e);

#endif /* TOLK_SERVE_MODELS_H */
