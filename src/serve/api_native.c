/*
 * api_native.c — tolk's own API, POST /v1/translate: everything the engine
 * knows about a translation — its sentences with their byte ranges, n-best
 * hypotheses with scores, token ids, and where the time went (queue,
 * encode, decode) — and, with "stream": true, Server-Sent Events: one
 * `sentence` event as each sentence finishes (in completion order; each
 * says which text and which sentence it is), an `error` event for a text
 * that failed, and a final `done` event carrying the whole answer as the
 * non-streamed request would have.
 */
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "service.h"

int native_parse(const cJSON *fields, struct native_request *out, char *msg, size_t msgsz) {
  memset(out, 0, sizeof *out);
  bool array;
  switch (field_strings(fields, "texts", &out->texts, &out->n, &array, msg, msgsz)) {
  case FIELD_OK: break;
  case FIELD_MISSING: snprintf(msg, msgsz, "texts is required: an array of strings"); return -1;
  case FIELD_BAD: return -1;
  }
  const char *format = "text";
  static const struct {
    const char *name;
    long lo, hi;
    size_t off;
  } ints[] = {{"beam", 1, 16, offsetof(struct native_request, beam)},
              {"max_new_tokens", 1, 4096, offsetof(struct native_request, max_new_tokens)},
              {"min_new_tokens", 1, 4096, offsetof(struct native_request, min_new_tokens)},
              {"n_best", 1, 16, offsetof(struct native_request, n_best)}};
  static const struct {
    const char *name;
    size_t off;
  } flags[] = {{"return_scores", offsetof(struct native_request, scores)},
               {"return_ids", offsetof(struct native_request, ids)},
               {"stream", offsetof(struct native_request, stream)}};
  if (field_string(fields, "target", &out->target, msg, msgsz) == FIELD_BAD ||
      field_string(fields, "source", &out->source, msg, msgsz) == FIELD_BAD ||
      field_string(fields, "format", &format, msg, msgsz) == FIELD_BAD)
    goto bad;
  for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
    if (field_int(fields, ints[i].name, ints[i].lo, ints[i].hi, (long *)((char *)out + ints[i].off), msg, msgsz) == FIELD_BAD)
      goto bad;
  for (size_t i = 0; i < 3; i++)
    if (field_bool(fields, flags[i].name, (bool *)((char *)out + flags[i].off), msg, msgsz) == FIELD_BAD) goto bad;
  if (strcmp(format, "text") && strcmp(format, "html")) {
    snprintf(msg, msgsz, "format must be text or html");
    goto bad;
  }
  out->html = !strcmp(format, "html");
  if (out->min_new_tokens && out->max_new_tokens && out->min_new_tokens > out->max_new_tokens) {
    snprintf(msg, msgsz, "min_new_tokens (%ld) must not exceed max_new_tokens (%ld)", out->min_new_tokens,
             out->max_new_tokens);
    goto bad;
  }
  if (out->beam && out->n_best > out->beam) {
    snprintf(msg, msgsz, "n_best (%ld) must not exceed beam (%ld)", out->n_best, out->beam);
    goto bad;
  }
  if (out->target && !*out->target) out->target = NULL;
  if (out->source && !*out->source) out->source = NULL;
  return 0;
bad:
  free(out->texts);
  out->texts = NULL;
  return -1;
}

struct native {
  struct native_request rq;
  bool autodetect;
  char target[LANG_CODE_MAX];
  char **submitted; /* the text each task's offsets refer to */
};

static void native_free(void *p) {
  struct native *st = p;
  if (!st) return;
  for (size_t i = 0; st->submitted && i < st->rq.n; i++) free(st->submitted[i]);
  free(st->submitted);
  free(st);
}

static cJSON *ids_json(const int32_t *ids, size_t n) {
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
  return a;
}

static cJSON *sentence_json(const struct native *st, const struct task *t, const struct sched_sentence *s) {
  cJSON *o = cJSON_CreateObject();
  const char *src = st->submitted[t->index];
  cJSON_AddNumberToObject(o, "index", (double)s->index);
  cJSON_AddNumberToObject(o, "line", (double)s->line);
  cJSON_AddNumberToObject(o, "begin", (double)s->begin);
  cJSON_AddNumberToObject(o, "end", (double)s->end);
  char *piece = strndup(src + s->begin, s->end - s->begin);
  cJSON_AddStringToObject(o, "source", piece ? piece : "");
  free(piece);
  cJSON_AddStringToObject(o, "translation", s->hyps[0].text);
  if (st->rq.scores) cJSON_AddNumberToObject(o, "score", s->hyps[0].score);
  if (st->rq.ids) cJSON_AddItemToObject(o, "ids", ids_json(s->hyps[0].ids, s->hyps[0].n_ids));
  if (st->rq.n_best > 1) {
    cJSON *nb = cJSON_AddArrayToObject(o, "n_best");
    for (size_t h = 0; h < s->n_hyps; h++) {
      cJSON *x = cJSON_CreateObject();
      cJSON_AddStringToObject(x, "text", s->hyps[h].text);
      if (st->rq.scores) cJSON_AddNumberToObject(x, "score", s->hyps[h].score);
      if (st->rq.ids) cJSON_AddItemToObject(x, "ids", ids_json(s->hyps[h].ids, s->hyps[h].n_ids));
      cJSON_AddItemToArray(nb, x);
    }
  }
  cJSON *tm = cJSON_AddObjectToObject(o, "timings_ms");
  cJSON_AddNumberToObject(tm, "queue", s->queue_ms);
  cJSON_AddNumberToObject(tm, "encode", s->encode_ms);
  cJSON_AddNumberToObject(tm, "decode", s->decode_ms);
  return o;
}

static cJSON *text_json(const struct native *st, const struct task *t) {
  const struct sched_result *res = t->res;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model", t->e->name);
  cJSON_AddStringToObject(o, "source_language", t->e->source);
  if (st->autodetect) {
    cJSON *d = cJSON_AddObjectToObject(o, "detected");
    cJSON_AddStringToObject(d, "language", t->detected.code);
    cJSON_AddNumberToObject(d, "confidence", t->detected.confidence);
  }
  if (!res || res->status != TOLK_OK) {
    cJSON_AddStringToObject(o, "error", res ? res->message : "out of memory");
    return o;
  }
  char *text = api_output(t, 0);
  cJSON_AddStringToObject(o, "text", text ? text : "");
  free(text);
  cJSON *ss = cJSON_AddArrayToObject(o, "sentences");
  for (size_t i = 0; i < res->n_sentences; i++) cJSON_AddItemToArray(ss, sentence_json(st, t, &res->sentences[i]));
  cJSON *tm = cJSON_AddObjectToObject(o, "timings_ms");
  cJSON_AddNumberToObject(tm, "queue", res->queue_ms);
  cJSON_AddNumberToObject(tm, "encode", res->encode_ms);
  cJSON_AddNumberToObject(tm, "decode", res->decode_ms);
  cJSON_AddNumberToObject(tm, "total", res->total_ms);
  return o;
}

static cJSON *answer_json(const struct req *r) {
  const struct native *st = r->api;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "target", st->target);
  cJSON *a = cJSON_AddArrayToObject(o, "translations");
  for (size_t i = 0; i < r->n_tasks; i++) cJSON_AddItemToArray(a, text_json(st, &r->tasks[i]));
  return o;
}

/* ------------------------------------------------------------------ streaming hooks (under r->mu) */

static void event_json(struct req *r, const char *event, cJSON *o) {
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (s) req_sse_event(r, event, s);
  free(s);
}

static void on_sentence(struct req *r, struct task *t, const struct sched_sentence *s) {
  cJSON *o = sentence_json(r->api, t, s);
  cJSON_AddNumberToObject(o, "text", (double)t->index);
  event_json(r, "sentence", o);
}

static void on_stream_end(struct req *r) {
  for (size_t i = 0; i < r->n_tasks; i++) {
    const struct sched_result *res = r->tasks[i].res;
    if (res && res->status == TOLK_OK) continue;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "text", (double)i);
    cJSON_AddNumberToObject(o, "status", !res ? 500 : res->status != TOLK_ERR_CANCELLED ? 500 : res->deadline ? 504 : 503);
    cJSON_AddStringToObject(o, "error", res ? res->message : "out of memory");
    event_json(r, "error", o);
  }
  event_json(r, "done", answer_json(r));
}

/* ------------------------------------------------------------------ the handler */

enum req_next native_translate(struct req *r) {
  char msg[PARSE_MSG_MAX];
  struct native *st = calloc(1, sizeof *st);
  if (!st) return req_fail(r, 500, -1, "out of memory");
  r->api = st;
  r->api_free = native_free;
  if (native_parse(r->fields, &st->rq, msg, sizeof msg)) return req_fail(r, 400, REJ_BAD_REQUEST, "%s", msg);
  struct native_request *q = &st->rq;
  const char **texts = q->texts;
  q->texts = NULL; /* borrowed below, freed here */
  enum req_next next;
  const char *target = q->target ? q->target : r->ms->e[0]->targets[0].code;
  lang_normalize(target, st->target, sizeof st->target);
  st->autodetect = !q->source || !strcmp(q->source, "auto");
  if (r->svc->cfg.max_texts > 0 && q->n > (size_t)r->svc->cfg.max_texts) {
    next = req_fail(r, 400, REJ_TEXT_LIMIT, "%zu texts exceed the limit of %ld a request", q->n, r->svc->cfg.max_texts);
    goto fail;
  }
  if (!api_check_chars(r, texts, q->n, &next)) goto fail;
  if (!req_tasks(r, q->n) || !(st->submitted = calloc(q->n, sizeof *st->submitted))) {
    next = req_fail(r, 500, -1, "out of memory");
    goto fail;
  }
  if (q->stream) {
    /* Before the first submission: a sentence may finish before req_stream. */
    pthread_mutex_lock(&r->mu);
    r->stream = true;
    r->on_sentence = on_sentence;
    r->on_stream_end = on_stream_end;
    pthread_mutex_unlock(&r->mu);
  }
  for (size_t i = 0; i < q->n; i++) {
    struct task *t = &r->tasks[i];
    const char *tag;
    size_t len = strlen(texts[i]);
    if (!api_resolve(r, st->autodetect ? "auto" : q->source, target, texts[i], len, t, &tag, &next)) goto fail;
    int beams = q->beam ? (int)q->beam : t->e->default_beams;
    if (q->n_best > beams) {
      next = req_fail(r, 400, REJ_BAD_REQUEST, "n_best (%ld) must not exceed beam (%d, the model's default)", q->n_best, beams);
      goto fail;
    }
    char *joined = q->html ? api_html_input(r, t, texts[i], &len, &next) : strdup(texts[i]);
    if (!joined) goto fail;
    st->submitted[i] = joined;
    struct sched_text_params p = req_text_params(r);
    p.tag = tag;
    p.num_beams = (int)q->beam;
    p.max_new_tokens = (int)q->max_new_tokens;
    p.min_new_tokens = (int)q->min_new_tokens;
    p.n_best = (int)q->n_best;
    p.scores = q->scores;
    tolk_error err;
    if (req_submit(r, i, t->e, joined, len, &p, &err)) {
      next = req_submit_failed(r, &err);
      goto fail;
    }
  }
  free(texts);
  return q->stream ? req_stream(r) : req_wait(r);
fail:
  req_cancel(r);
  free(texts);
  return next;
}

enum req_next native_translate_finish(struct req *r) {
  enum req_next next;
  if (req_tasks_failed(r, &next)) return next;
  return req_json(r, 200, answer_json(r));
}
