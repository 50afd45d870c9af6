/*
 * api_libre.c — the LibreTranslate API, so its clients work unchanged:
 * POST /translate, POST /detect, GET /languages, GET /frontend/settings,
 * with LibreTranslate's field names, status codes and error messages
 * (libretranslate/app.py), and the helpers the other translate APIs share
 * (language resolution, character limits, assembling a text's output).
 *
 * Differences, all deliberate: a text is detected on its own when source is
 * "auto" (LibreTranslate detects a batch once), `alternatives` are whole-
 * text alternatives built from each sentence's n-best, and HTML is
 * translated text node by text node (html.h), with a broken document a 400.
 */
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "service.h"

/* ------------------------------------------------------------------ shared */

bool api_check_chars(struct req *r, const char *const *texts, size_t n, enum req_next *next) {
  long limit = req_max_chars(r);
  for (size_t i = 0; i < n; i++) {
    size_t c = utf8_count(texts[i], strlen(texts[i]));
    if (limit > 0 && c > (size_t)limit) {
      *next = req_fail(r, 400, REJ_TEXT_LIMIT, "Invalid request: request (%zu) exceeds text limit (%ld)", c, limit);
      return false;
    }
    r->chars += c;
  }
  return true;
}

static bool listed(const char *list, const char *code) {
  size_t l = strlen(code);
  for (const char *p = list; (p = strstr(p, code)); p += l)
    if ((p == list || p[-1] == ' ') && (p[l] == ',' || !p[l])) return true;
  return false;
}

/* "a, b, c" of every engine's sources (targets == false) or targets. */
static void list_codes(const struct model_set *ms, bool targets, const char *source, char *out, size_t cap) {
  out[0] = '\0';
  for (size_t i = 0; i < ms->n; i++) {
    const struct engine *e = ms->e[i];
    if (source && strcmp(e->source, source)) continue;
    for (size_t k = 0; k < (targets ? e->n_targets : 1); k++) {
      const char *c = targets ? e->targets[k].code : e->source;
      if (listed(out, c)) continue;
      if (out[0]) strncat(out, ", ", cap - strlen(out) - 1);
      strncat(out, c, cap - strlen(out) - 1);
    }
  }
}

bool api_resolve(struct req *r, const char *source, const char *target, const char *text, size_t len,
                 struct task *t, const char **tag, enum req_next *next) {
  const struct model_set *ms = r->ms;
  char src[LANG_CODE_MAX], tgt[LANG_CODE_MAX], list[256];
  lang_normalize(source, src, sizeof src);
  lang_normalize(target, tgt, sizeof tgt);
  const struct lang_target *lt = NULL;
  const struct engine *e = NULL;
  int why = 1;
  if (!strcmp(src, "auto")) {
    const char *cand[METRICS_MAX_MODELS];
    size_t n = 0;
    for (size_t i = 0; i < ms->n; i++) {
      bool dup = false;
      for (size_t k = 0; k < n; k++) dup |= !strcmp(cand[k], ms->e[i]->source);
      if (!dup) cand[n++] = ms->e[i]->source;
    }
    struct detection det[METRICS_MAX_MODELS];
    lang_detect(text, len, cand, n, det);
    for (size_t k = 0; k < n && !e; k++)
      if ((e = models_find(ms, det[k].code, tgt, &lt, &why))) t->detected = det[k];
    why = 2;
  } else {
    e = models_find(ms, src, tgt, &lt, &why);
    snprintf(t->detected.code, sizeof t->detected.code, "%s", e ? e->source : src);
    t->detected.confidence = 100;
  }
  if (!e && why == 1) {
    list_codes(ms, false, NULL, list, sizeof list);
    *next = req_fail(r, 400, REJ_BAD_REQUEST, "%s is not supported (source languages: %s)", source, list);
    return false;
  }
  if (!e) {
    list_codes(ms, true, strcmp(src, "auto") ? src : NULL, list, sizeof list);
    *next = req_fail(r, 400, REJ_BAD_REQUEST, "%s is not supported as a target language from %s (targets: %s)", target,
                     source, list);
    return false;
  }
  t->e = e;
  *tag = lt->tag[0] ? lt->tag : NULL;
  return true;
}

char *api_html_input(struct req *r, struct task *t, const char *text, size_t *len, enum req_next *next) {
  char msg[256];
  size_t n = strlen(text);
  if (html_parse(text, n, &t->html, msg, sizeof msg)) {
    *next = req_fail(r, 400, REJ_BAD_REQUEST, "%s", msg);
    return NULL;
  }
  size_t total = 1;
  for (size_t i = 0; i < t->html.n; i++) total += strlen(t->html.texts[i].text) + 1;
  char *joined = malloc(total);
  t->source = malloc(n + 1);
  if (!joined || !t->source) {
    free(joined);
    *next = req_fail(r, 500, -1, "out of memory");
    return NULL;
  }
  memcpy(t->source, text, n + 1);
  t->source_len = n;
  /* One text node a line: the splitter never joins across lines, and each
   * sentence's line says which node it belongs to. */
  size_t w = 0;
  for (size_t i = 0; i < t->html.n; i++) {
    size_t l = strlen(t->html.texts[i].text);
    memcpy(joined + w, t->html.texts[i].text, l);
    w += l;
    if (i + 1 < t->html.n) joined[w++] = '\n';
  }
  joined[w] = '\0';
  *len = w;
  return joined;
}

static bool needs_space(const char *prev, size_t pl, const char *next) {
  if (!pl || !*next) return false;
  unsigned char a = (unsigned char)prev[pl - 1], b = (unsigned char)*next;
  return a < 0x80 && b < 0x80 && a != ' ' && b != ' ';
}

/* Appends s to the growing string *dst (NULL-safe on failure). */
static bool append(char **dst, size_t *len, const char *s) {
  size_t l = strlen(s);
  char *p = realloc(*dst, *len + l + 2);
  if (!p) return false;
  memcpy(p + *len, s, l + 1);
  *dst = p;
  *len += l;
  return true;
}

static const char *hyp(const struct sched_sentence *s, size_t k) {
  return s->hyps[k < s->n_hyps ? k : 0].text;
}

char *api_output(const struct task *t, size_t k) {
  const struct sched_result *res = t->res;
  size_t n_lines = t->source ? t->html.n : (res->n_sentences ? res->sentences[res->n_sentences - 1].line + 1 : 1);
  char **lines = calloc(n_lines ? n_lines : 1, sizeof *lines);
  size_t *lens = calloc(n_lines ? n_lines : 1, sizeof *lens);
  bool ok = lines && lens;
  for (size_t i = 0; ok && i < res->n_sentences; i++) {
    const struct sched_sentence *s = &res->sentences[i];
    if (s->line >= n_lines) continue;
    const char *h = hyp(s, k);
    if (lines[s->line] && needs_space(lines[s->line], lens[s->line], h)) ok = append(&lines[s->line], &lens[s->line], " ");
    if (ok) ok = append(&lines[s->line], &lens[s->line], h);
  }
  char *out = NULL;
  if (ok && t->source) {
    out = html_render(t->source, t->source_len, &t->html, (const char *const *)lines, NULL);
  } else if (ok) {
    size_t len = 0;
    out = strdup("");
    for (size_t l = 0; out && l < n_lines; l++) {
      if ((l && !append(&out, &len, "\n")) || (lines[l] && !append(&out, &len, lines[l]))) {
        free(out);
        out = NULL;
      }
    }
  }
  for (size_t l = 0; lines && l < n_lines; l++) free(lines[l]);
  free(lines);
  free(lens);
  return out;
}

/* ------------------------------------------------------------------ POST /translate */

struct libre {
  bool array, autodetect;
  long alternatives;
};

int libre_parse(const cJSON *fields, struct libre_request *out, char *msg, size_t msgsz) {
  memset(out, 0, sizeof *out);
  switch (field_strings(fields, "q", &out->q, &out->n, &out->array, msg, msgsz)) {
  case FIELD_OK: break;
  case FIELD_MISSING: snprintf(msg, msgsz, "Invalid request: missing q parameter"); return -1;
  case FIELD_BAD: return -1;
  }
  if (!out->array && !out->q[0][0]) {
    snprintf(msg, msgsz, "Invalid request: missing q parameter");
    goto bad;
  }
  static const char *const names[] = {"source", "target"};
  const char **dst[] = {&out->source, &out->target};
  for (int i = 0; i < 2; i++) {
    enum field_result fr = field_string(fields, names[i], dst[i], msg, msgsz);
    if (fr == FIELD_OK && **dst[i]) continue;
    if (fr != FIELD_BAD) snprintf(msg, msgsz, "Invalid request: missing %s parameter", names[i]);
    goto bad;
  }
  const char *format = "text";
  if (field_string(fields, "format", &format, msg, msgsz) == FIELD_BAD ||
      (strcmp(format, "text") && strcmp(format, "html"))) {
    snprintf(msg, msgsz, "%.40s format is not supported", format);
    goto bad;
  }
  out->html = !strcmp(format, "html");
  if (field_int(fields, "alternatives", 0, 1000000, &out->alternatives, msg, msgsz) == FIELD_BAD) {
    snprintf(msg, msgsz, "Invalid request: alternatives parameter is not a number");
    goto bad;
  }
  if (out->alternatives > 3) {
    snprintf(msg, msgsz, "Invalid request: alternatives parameter must be <= 3");
    goto bad;
  }
  return 0;
bad:
  free(out->q);
  out->q = NULL;
  return -1;
}

enum req_next libre_translate(struct req *r) {
  char msg[PARSE_MSG_MAX];
  struct libre_request lq;
  enum req_next next;
  if (libre_parse(r->fields, &lq, msg, sizeof msg)) return req_fail(r, 400, REJ_BAD_REQUEST, "%s", msg);
  const char **q = lq.q;
  size_t n = lq.n;
  long alt = lq.alternatives;
  if (lq.array && r->svc->cfg.max_texts > 0 && n > (size_t)r->svc->cfg.max_texts) {
    next = req_fail(r, 400, REJ_TEXT_LIMIT, "Invalid request: request (%zu) exceeds text limit (%ld)", n, r->svc->cfg.max_texts);
    goto out;
  }
  if (!api_check_chars(r, q, n, &next)) goto out;
  struct libre *st = calloc(1, sizeof *st);
  if (!st || !req_tasks(r, n)) {
    free(st);
    next = req_fail(r, 500, -1, "out of memory");
    goto out;
  }
  *st = (struct libre){lq.array, !strcmp(lq.source, "auto"), alt};
  r->api = st;
  r->api_free = free;
  for (size_t i = 0; i < n; i++) {
    struct task *t = &r->tasks[i];
    const char *tag;
    size_t len = strlen(q[i]);
    if (!api_resolve(r, lq.source, lq.target, q[i], len, t, &tag, &next)) goto out;
    char *joined = lq.html ? api_html_input(r, t, q[i], &len, &next) : NULL;
    if (lq.html && !joined) goto out;
    struct sched_text_params p = req_text_params(r);
    p.tag = tag;
    if (alt) {
      p.n_best = (int)alt + 1;
      p.num_beams = t->e->default_beams > alt + 1 ? t->e->default_beams : (int)alt + 1;
    }
    tolk_error err;
    tolk_status s = req_submit(r, i, t->e, joined ? joined : q[i], len, &p, &err);
    free(joined);
    if (s) {
      next = req_submit_failed(r, &err);
      goto out;
    }
  }
  next = req_wait(r);
  free(q);
  return next;
out:
  req_cancel(r); /* texts already submitted before the one that failed */
  free(q);
  return next;
}

static cJSON *detected_json(const struct detection *d) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "confidence", d->confidence);
  cJSON_AddStringToObject(o, "language", d->code);
  return o;
}

/* The alternatives of one text: distinct, and not the translation itself. */
static cJSON *alternatives_json(const struct task *t, long alt, const char *best) {
  cJSON *a = cJSON_CreateArray();
  for (long k = 1; k <= alt; k++) {
    char *s = api_output(t, (size_t)k);
    bool dup = !s || !strcmp(s, best);
    for (const cJSON *e = a->child; e && !dup; e = e->next) dup = !strcmp(e->valuestring, s);
    if (!dup) cJSON_AddItemToArray(a, cJSON_CreateString(s));
    free(s);
  }
  return a;
}

enum req_next libre_translate_finish(struct req *r) {
  enum req_next next;
  if (req_tasks_failed(r, &next)) return next;
  const struct libre *st = r->api;
  cJSON *texts = cJSON_CreateArray(), *det = cJSON_CreateArray(), *alts = cJSON_CreateArray();
  for (size_t i = 0; i < r->n_tasks; i++) {
    char *s = api_output(&r->tasks[i], 0);
    if (!s) {
      cJSON_Delete(texts);
      cJSON_Delete(det);
      cJSON_Delete(alts);
      return req_fail(r, 500, -1, "out of memory");
    }
    cJSON_AddItemToArray(texts, cJSON_CreateString(s));
    cJSON_AddItemToArray(det, detected_json(&r->tasks[i].detected));
    cJSON_AddItemToArray(alts, alternatives_json(&r->tasks[i], r->tasks[i].source ? 0 : st->alternatives, s));
    free(s);
  }
  cJSON *o = cJSON_CreateObject();
  if (st->array) {
    cJSON_AddItemToObject(o, "translatedText", texts);
    if (st->autodetect) cJSON_AddItemToObject(o, "detectedLanguage", det);
    else cJSON_Delete(det);
    if (st->alternatives) cJSON_AddItemToObject(o, "alternatives", alts);
    else cJSON_Delete(alts);
  } else {
    cJSON_AddItemToObject(o, "translatedText", cJSON_DetachItemFromArray(texts, 0));
    if (st->autodetect) cJSON_AddItemToObject(o, "detectedLanguage", cJSON_DetachItemFromArray(det, 0));
    if (st->alternatives) cJSON_AddItemToObject(o, "alternatives", cJSON_DetachItemFromArray(alts, 0));
    cJSON_Delete(texts);
    cJSON_Delete(det);
    cJSON_Delete(alts);
  }
  return req_json(r, 200, o);
}

/* ------------------------------------------------------------------ POST /detect */

enum req_next libre_detect(struct req *r) {
  const char **q;
  size_t n;
  bool array;
  enum req_next next;
  char msg[PARSE_MSG_MAX];
  switch (field_strings(r->fields, "q", &q, &n, &array, msg, sizeof msg)) {
  case FIELD_OK: break;
  case FIELD_MISSING: return req_fail(r, 400, REJ_BAD_REQUEST, "Invalid request: missing q parameter");
  case FIELD_BAD: return req_fail(r, 400, REJ_BAD_REQUEST, "%s", msg);
  }
  if (!api_check_chars(r, q, n, &next)) {
    free(q);
    return next;
  }
  const struct model_set *ms = r->ms;
  const char *cand[METRICS_MAX_MODELS];
  size_t nc = 0;
  for (size_t i = 0; i < ms->n; i++) {
    bool dup = false;
    for (size_t k = 0; k < nc; k++) dup |= !strcmp(cand[k], ms->e[i]->source);
    if (!dup) cand[nc++] = ms->e[i]->source;
  }
  /* A batch is judged as one text, as LibreTranslate averages it. */
  double sum[METRICS_MAX_MODELS] = {0};
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(q[i]);
    struct detection d[METRICS_MAX_MODELS];
    lang_detect(q[i], len, cand, nc, d);
    for (size_t k = 0; k < nc; k++)
      for (size_t c = 0; c < nc; c++)
        if (!strcmp(d[k].code, cand[c])) sum[c] += d[k].confidence * (double)len;
    total += len;
  }
  free(q);
  struct detection d[METRICS_MAX_MODELS];
  for (size_t c = 0; c < nc; c++) {
    snprintf(d[c].code, sizeof d[c].code, "%s", cand[c]);
    d[c].confidence = total ? (double)(int)(10.0 * sum[c] / (double)total) / 10.0 : 0;
  }
  for (size_t i = 1; i < nc; i++)
    for (size_t j = i; j > 0 && d[j].confidence > d[j - 1].confidence; j--) {
      struct detection t = d[j];
      d[j] = d[j - 1];
      d[j - 1] = t;
    }
  cJSON *a = cJSON_CreateArray();
  for (size_t c = 0; c < nc; c++)
    if (d[c].confidence > 0 || c == 0) cJSON_AddItemToArray(a, detected_json(&d[c]));
  return req_json(r, 200, a);
}

/* ------------------------------------------------------------------ GET /languages, /frontend/settings */

enum req_next libre_languages(struct req *r) {
  const struct model_set *ms = r->ms;
  cJSON *a = cJSON_CreateArray();
  /* Sources with all their targets, then the languages that are only targets. */
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < ms->n; i++)
      for (size_t k = 0; k < (pass ? ms->e[i]->n_targets : 1); k++) {
        const char *code = pass ? ms->e[i]->targets[k].code : ms->e[i]->source;
        bool seen = false;
        for (const cJSON *x = a->child; x && !seen; x = x->next)
          seen = !strcmp(cJSON_GetObjectItem(x, "code")->valuestring, code);
        if (seen) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "code", code);
        cJSON_AddStringToObject(o, "name", lang_name(code));
        cJSON *targets = cJSON_AddArrayToObject(o, "targets");
        for (size_t j = 0; j < ms->n; j++) {
          if (strcmp(ms->e[j]->source, code)) continue;
          for (size_t t = 0; t < ms->e[j]->n_targets; t++)
            cJSON_AddItemToArray(targets, cJSON_CreateString(ms->e[j]->targets[t].code));
        }
        cJSON_AddItemToArray(a, o);
      }
  return req_json(r, 200, a);
}

enum req_next libre_settings(struct req *r) {
  const struct service *svc = r->svc;
  const struct engine *e = r->ms->e[0];
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "charLimit", svc->cfg.max_chars > 0 ? (double)svc->cfg.max_chars : -1);
  cJSON_AddNumberToObject(o, "frontendTimeout", 500);
  cJSON_AddBoolToObject(o, "apiKeys", svc->keys.n > 0);
  cJSON_AddBoolToObject(o, "keyRequired", svc->keys.n > 0);
  cJSON_AddBoolToObject(o, "suggestions", 0);
  cJSON_AddBoolToObject(o, "filesTranslation", 0);
  cJSON_AddArrayToObject(o, "supportedFilesFormat");
  cJSON *lang = cJSON_AddObjectToObject(o, "language");
  cJSON *src = cJSON_AddObjectToObject(lang, "source");
  cJSON_AddStringToObject(src, "code", "auto");
  cJSON_AddStringToObject(src, "name", "Auto Detect");
  cJSON *tgt = cJSON_AddObjectToObject(lang, "target");
  cJSON_AddStringToObject(tgt, "code", e->targets[0].code);
  cJSON_AddStringToObject(tgt, "name", lang_name(e->targets[0].code));
  return req_json(r, 200, o);
}
