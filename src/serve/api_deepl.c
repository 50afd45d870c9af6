/*
 * api_deepl.c — the DeepL API v2 subset translation tools speak:
 * POST /v2/translate (form with `text` repeated, or JSON with a `text`
 * array), GET|POST /v2/languages and /v2/usage, errors as DeepL writes them
 * ({"message": …}, 403 for a bad key, 429 with Retry-After). The key comes
 * in `Authorization: DeepL-Auth-Key …` (or the old auth_key field).
 *
 * split_sentences "1" (DeepL's default) keeps line breaks; "nonewlines"
 * and "0" join the lines first — "0" cannot mean "no splitting at all"
 * here, since the engine always translates sentence by sentence.
 * tag_handling=html is format=html (html.h); "xml" is refused.
 * Formality, glossaries, context and model_type are accepted and ignored.
 */
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "service.h"

int deepl_parse(const cJSON *fields, struct deepl_request *out, char *msg, size_t msgsz) {
  memset(out, 0, sizeof *out);
  bool array;
  switch (field_strings(fields, "text", &out->texts, &out->n, &array, msg, msgsz)) {
  case FIELD_OK: break;
  case FIELD_MISSING: snprintf(msg, msgsz, "Parameter 'text' not specified."); return -1;
  case FIELD_BAD: return -1;
  }
  enum field_result fr = field_string(fields, "target_lang", &out->target, msg, msgsz);
  if (fr != FIELD_OK || !*out->target) {
    if (fr != FIELD_BAD) snprintf(msg, msgsz, "Parameter 'target_lang' not specified.");
    goto bad;
  }
  if (field_string(fields, "source_lang", &out->source, msg, msgsz) == FIELD_BAD) goto bad;
  if (out->source && !*out->source) out->source = NULL;
  const char *split = "1", *tags = NULL;
  if (field_string(fields, "split_sentences", &split, msg, msgsz) == FIELD_BAD) goto bad;
  if (strcmp(split, "0") && strcmp(split, "1") && strcmp(split, "nonewlines")) {
    snprintf(msg, msgsz, "Value for 'split_sentences' not supported: use 0, 1 or nonewlines.");
    goto bad;
  }
  out->join_lines = strcmp(split, "1") != 0;
  if (field_string(fields, "tag_handling", &tags, msg, msgsz) == FIELD_BAD) goto bad;
  if (tags && strcmp(tags, "html")) {
    snprintf(msg, msgsz, "Value for 'tag_handling' not supported: only html.");
    goto bad;
  }
  out->html = tags != NULL;
  /* Ignored, but a client that sends them wrong hears of it. */
  bool keep;
  const char *formality;
  if (field_bool(fields, "preserve_formatting", &keep, msg, msgsz) == FIELD_BAD ||
      field_string(fields, "formality", &formality, msg, msgsz) == FIELD_BAD)
    goto bad;
  return 0;
bad:
  free(out->texts);
  out->texts = NULL;
  return -1;
}

static char *joined_lines(const char *s, size_t *len) {
  size_t n = strlen(s);
  char *o = malloc(n + 1);
  if (!o) return NULL;
  for (size_t i = 0; i <= n; i++) o[i] = s[i] == '\n' || s[i] == '\r' ? ' ' : s[i];
  *len = n;
  return o;
}

enum req_next deepl_translate(struct req *r) {
  char msg[PARSE_MSG_MAX];
  struct deepl_request d;
  enum req_next next;
  if (deepl_parse(r->fields, &d, msg, sizeof msg)) return req_fail(r, 400, REJ_BAD_REQUEST, "%s", msg);
  if (r->svc->cfg.max_texts > 0 && d.n > (size_t)r->svc->cfg.max_texts) {
    next = req_fail(r, 413, REJ_TEXT_LIMIT, "Too many texts (%zu); at most %ld a request", d.n, r->svc->cfg.max_texts);
    goto fail;
  }
  if (!api_check_chars(r, d.texts, d.n, &next)) goto fail;
  if (!req_tasks(r, d.n)) {
    next = req_fail(r, 500, -1, "out of memory");
    goto fail;
  }
  for (size_t i = 0; i < d.n; i++) {
    struct task *t = &r->tasks[i];
    const char *tag;
    size_t len = strlen(d.texts[i]);
    t->chars = utf8_count(d.texts[i], len);
    if (!api_resolve(r, d.source ? d.source : "auto", d.target, d.texts[i], len, t, &tag, &next)) goto fail;
    char *text = d.html ? api_html_input(r, t, d.texts[i], &len, &next)
                 : d.join_lines ? joined_lines(d.texts[i], &len) : NULL;
    if (d.html && !text) goto fail;
    struct sched_text_params p = req_text_params(r);
    p.tag = tag;
    tolk_error err;
    tolk_status st = req_submit(r, i, t->e, text ? text : d.texts[i], len, &p, &err);
    free(text);
    if (st) {
      next = req_submit_failed(r, &err);
      goto fail;
    }
  }
  free(d.texts);
  return req_wait(r);
fail:
  req_cancel(r);
  free(d.texts);
  return next;
}

enum req_next deepl_translate_finish(struct req *r) {
  enum req_next next;
  if (req_tasks_failed(r, &next)) return next;
  cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "translations");
  for (size_t i = 0; i < r->n_tasks; i++) {
    char *s = api_output(&r->tasks[i], 0), code[LANG_CODE_MAX];
    if (!s) {
      cJSON_Delete(o);
      return req_fail(r, 500, -1, "out of memory");
    }
    lang_deepl(r->tasks[i].e->source, true, code, sizeof code);
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "detected_source_language", code);
    cJSON_AddStringToObject(t, "text", s);
    /* DeepL bills the source text's characters; its client reads this. */
    cJSON_AddNumberToObject(t, "billed_characters", (double)r->tasks[i].chars);
    cJSON_AddItemToArray(a, t);
    free(s);
  }
  return req_json(r, 200, o);
}

static void add_language(cJSON *a, const char *code, const char *name, bool target) {
  for (const cJSON *x = a->child; x; x = x->next)
    if (!strcmp(cJSON_GetObjectItem(x, "language")->valuestring, code)) return;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "language", code);
  cJSON_AddStringToObject(o, "name", name);
  if (target) cJSON_AddBoolToObject(o, "supports_formality", 0);
  cJSON_AddItemToArray(a, o);
}

enum req_next deepl_languages(struct req *r) {
  const char *type = "source";
  char msg[PARSE_MSG_MAX];
  if (field_string(r->fields, "type", &type, msg, sizeof msg) == FIELD_BAD ||
      (strcmp(type, "source") && strcmp(type, "target")))
    return req_fail(r, 400, REJ_BAD_REQUEST, "Value for 'type' not supported: source or target.");
  bool target = !strcmp(type, "target");
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; i < r->ms->n; i++) {
    const struct engine *e = r->ms->e[i];
    char code[LANG_CODE_MAX];
    if (!target) {
      lang_deepl(e->source, true, code, sizeof code);
      add_language(a, code, lang_name(e->source), false);
      continue;
    }
    for (size_t k = 0; k < e->n_targets; k++) {
      const char *c = e->targets[k].code;
      /* DeepL lists plain ZH for simplified Chinese as well as ZH-HANS. */
      if (!strcmp(c, "zh-Hans")) add_language(a, "ZH", "Chinese (simplified)", true);
      lang_deepl(c, false, code, sizeof code);
      add_language(a, code, !strcmp(c, "zh-Hans") ? "Chinese (simplified)" : lang_name(c), true);
    }
  }
  return req_json(r, 200, a);
}

enum req_next deepl_usage(struct req *r) {
  const struct service *svc = r->svc;
  uint64_t used = r->key >= 0 ? atomic_load(&svc->key_chars[r->key]) : atomic_load(&((struct service *)svc)->chars_total);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "character_count", (double)used);
  cJSON_AddNumberToObject(o, "character_limit", 1e12);
  return req_json(r, 200, o);
}
