/*
 * api_ops.c — what operators and browsers ask for: GET /health (alive:
 * 200, 503 while the models load), GET /ready (503 while loading, draining
 * or with a full queue: take this instance out of rotation), GET /metrics
 * (Prometheus text), GET /openapi.json, and the web page's embedded files
 * (ETag and Cache-Control: no-cache, so a browser revalidates and gets 304).
 */
#include <string.h>

#include "service.h"

static enum req_next status_json(struct req *r, int code, const char *status) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "status", status);
  if (code == 503) r->retry_after = 1;
  return req_json(r, code, o);
}

enum req_next ops_health(struct req *r) {
  return atomic_load(&r->svc->loaded) ? status_json(r, 200, "ok") : status_json(r, 503, "loading");
}

enum req_next ops_ready(struct req *r) {
  struct service *svc = r->svc;
  if (!atomic_load(&svc->loaded)) return status_json(r, 503, "loading");
  if (atomic_load(&svc->draining)) return status_json(r, 503, "draining");
  struct model_set *ms = models_acquire(svc->models);
  bool full = !ms;
  for (size_t i = 0; ms && i < ms->n && !full; i++) full = sched_full(ms->e[i]->sched);
  models_release(svc->models, ms);
  return full ? status_json(r, 503, "queue full") : status_json(r, 200, "ready");
}

enum req_next ops_metrics(struct req *r) {
  size_t len;
  char *text = metrics_render(r->svc->metrics, &len);
  if (!text) return req_fail(r, 500, -1, "out of memory");
  return req_reply(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, true);
}

static enum req_next asset(struct req *r, const struct asset *a) {
  if (!a) return req_fail(r, 404, -1, "Not Found");
  req_add_header(r, "ETag", "%s", a->etag);
  req_add_header(r, "Cache-Control", "no-cache");
  const char *inm = req_header_in(r, "If-None-Match");
  if (inm && (strstr(inm, a->etag) || !strcmp(inm, "*"))) return req_reply(r, 304, NULL, "", 0, false);
  /* Embedded bytes live as long as the program: no copy. */
  struct MHD_Response *resp = MHD_create_response_from_buffer(a->size, (void *)a->data, MHD_RESPMEM_PERSISTENT);
  if (!resp) return NEXT_FAIL;
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->content_type);
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  req_decorate(r, resp);
  enum MHD_Result ok = MHD_queue_response(r->conn, 200, resp);
  MHD_destroy_response(resp);
  r->status = 200;
  r->phase = PH_ANSWERED;
  return ok == MHD_YES ? NEXT_REPLIED : NEXT_FAIL;
}

enum req_next ops_openapi(struct req *r) { return asset(r, asset_find("/openapi.json")); }

enum req_next ops_web(struct req *r) { return asset(r, asset_find(r->path)); }

const struct asset *asset_find(const char *path) {
  for (const struct asset *a = serve_assets; a->path; a++)
    if (!strcmp(a->path, path)) return a;
  return NULL;
}
