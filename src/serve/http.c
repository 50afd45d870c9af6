/*
 * http.c — the service's libmicrohttpd glue: the daemon (one internal
 * polling thread, epoll, suspend/resume), routing, bounded bodies, the
 * per-request checks every API shares (key, rate limit, CORS, request id,
 * client address), the standard response headers, and the access log.
 * See service.h for a request's life. No HTTP is parsed here: MHD has done
 * it; bodies are parsed by parse.c.
 *
 * Why one polling thread: what runs on it per request is parsing and
 * formatting (microseconds); translation runs on the schedulers' threads,
 * and a request waiting for them is suspended, costing the poll loop
 * nothing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "parse.h"
#include "service.h"

const struct route serve_routes[] = {
    {"/translate", M_POST, EP_TRANSLATE, ERR_LIBRE, true, true, true, libre_translate, libre_translate_finish},
    {"/detect", M_POST, EP_DETECT, ERR_LIBRE, true, true, true, libre_detect, NULL},
    {"/languages", M_GET, EP_LANGUAGES, ERR_LIBRE, true, false, false, libre_languages, NULL},
    {"/frontend/settings", M_GET, EP_FRONTEND_SETTINGS, ERR_LIBRE, true, false, false, libre_settings, NULL},
    {"/v2/translate", M_POST, EP_DEEPL_TRANSLATE, ERR_DEEPL, true, true, true, deepl_translate, deepl_translate_finish},
    {"/v2/languages", M_GET | M_POST, EP_DEEPL_LANGUAGES, ERR_DEEPL, true, false, false, deepl_languages, NULL},
    {"/v2/usage", M_GET | M_POST, EP_DEEPL_USAGE, ERR_DEEPL, false, true, false, deepl_usage, NULL},
    {"/v1/translate", M_POST, EP_NATIVE_TRANSLATE, ERR_NATIVE, true, true, true, native_translate, native_translate_finish},
    {"/health", M_GET, EP_HEALTH, ERR_NATIVE, false, false, false, ops_health, NULL},
    {"/ready", M_GET, EP_READY, ERR_NATIVE, false, false, false, ops_ready, NULL},
    {"/metrics", M_GET, EP_METRICS, ERR_NATIVE, false, false, false, ops_metrics, NULL},
    {"/openapi.json", M_GET, EP_OPENAPI, ERR_NATIVE, false, false, false, ops_openapi, NULL},
    {NULL, 0, EP_OTHER, ERR_NATIVE, false, false, false, NULL, NULL},
};

/* The page's files (web/, embedded at build time). */
static const struct route web_route = {"/", M_GET, EP_WEB, ERR_NATIVE, false, false, false, ops_web, NULL};

const struct route *route_find(const char *path) {
  for (const struct route *rt = serve_routes; rt->path; rt++)
    if (!strcmp(rt->path, path)) return rt;
  const struct asset *a = asset_find(path);
  return a && strcmp(a->path, "/openapi.json") ? &web_route : NULL;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ------------------------------------------------------------------ requests */

static uint64_t mix(uint64_t x) { /* splitmix64's finaliser */
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* X-Request-Id as given when it is a sane token, else a new one. */
static void request_id(struct req *r) {
  const char *given = req_header_in(r, "X-Request-Id");
  size_t n = given ? strlen(given) : 0;
  bool ok = n > 0 && n < 72;
  for (size_t i = 0; ok && i < n; i++)
    ok = (given[i] >= '0' && given[i] <= '9') || (given[i] >= 'a' && given[i] <= 'z') ||
         (given[i] >= 'A' && given[i] <= 'Z') || strchr("-_.:", given[i]);
  if (ok) snprintf(r->id, sizeof r->id, "%s", given);
  else
    snprintf(r->id, sizeof r->id, "%016llx",
             (unsigned long long)mix(r->svc->id_salt ^ atomic_fetch_add(&r->svc->next_id, 1)));
}

static void client_of(struct req *r) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  uint8_t peer[16] = {0}, who[16];
  if (!ci || !addr_from_sockaddr(ci->client_addr, peer)) {
    snprintf(r->client, sizeof r->client, "unknown");
    return;
  }
  client_addr(peer, req_header_in(r, "X-Forwarded-For"), r->svc->trusted, r->svc->n_trusted, who);
  addr_format(who, r->client, sizeof r->client);
}

static void cors_of(struct req *r) {
  const char *o = req_header_in(r, "Origin");
  if (!o) return;
  for (size_t i = 0; i < r->svc->cfg.n_cors; i++)
    if (!strcmp(r->svc->cfg.cors[i], "*") || !strcmp(r->svc->cfg.cors[i], o)) {
      r->cors = true;
      snprintf(r->origin, sizeof r->origin, "%s", !strcmp(r->svc->cfg.cors[i], "*") ? "*" : o);
      return;
    }
}

static struct req *req_new(struct service *svc, struct MHD_Connection *c) {
  struct req *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->svc = svc;
  r->conn = c;
  r->refs = 1;
  r->key = -1;
  r->t0 = now_ns();
  atomic_init(&r->gone, false);
  pthread_mutex_init(&r->mu, NULL);
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  r->slot = ci ? ci->socket_context : NULL;
  pthread_mutex_lock(&svc->live_mu);
  r->next = svc->live;
  if (svc->live) svc->live->prev = r;
  svc->live = r;
  pthread_mutex_unlock(&svc->live_mu);
  atomic_fetch_add(&svc->n_live, 1);
  metrics_inflight(svc->metrics, 1);
  return r;
}

static void req_free(struct req *r) {
  struct service *svc = r->svc;
  pthread_mutex_lock(&svc->live_mu);
  if (r->prev) r->prev->next = r->next;
  else svc->live = r->next;
  if (r->next) r->next->prev = r->prev;
  pthread_mutex_unlock(&svc->live_mu);
  for (size_t i = 0; i < r->n_tasks; i++) {
    struct task *t = &r->tasks[i];
    sched_job_release(t->job);
    sched_result_free(t->res);
    html_doc_free(&t->html);
    free(t->source);
  }
  free(r->tasks);
  if (r->api_free) r->api_free(r->api);
  cJSON_Delete(r->fields);
  free(r->body);
  free(r->sse);
  if (r->ms) models_release(svc->models, r->ms);
  pthread_mutex_destroy(&r->mu);
  free(r);
  metrics_inflight(svc->metrics, -1);
  atomic_fetch_sub(&svc->n_live, 1);
}

void req_unref(struct req *r) {
  pthread_mutex_lock(&r->mu);
  bool last = --r->refs == 0;
  pthread_mutex_unlock(&r->mu);
  if (last) req_free(r);
}

const char *req_header_in(struct req *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

long req_max_chars(const struct req *r) {
  if (r->key >= 0 && r->svc->keys.keys[r->key].max_chars) return r->svc->keys.keys[r->key].max_chars;
  return r->svc->cfg.max_chars;
}

/* ------------------------------------------------------------------ responses */

void req_add_header(struct req *r, const char *name, const char *fmt, ...) {
  if (r->n_headers == REQ_MAX_HEADERS) return;
  va_list ap;
  va_start(ap, fmt);
  r->headers[r->n_headers].name = name;
  vsnprintf(r->headers[r->n_headers].value, sizeof r->headers[0].value, fmt, ap);
  va_end(ap);
  r->n_headers++;
}

void req_decorate(struct req *r, struct MHD_Response *resp) {
  MHD_add_response_header(resp, "X-Request-Id", r->id);
  if (r->cors) {
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", r->origin);
    MHD_add_response_header(resp, "Vary", "Origin");
    MHD_add_response_header(resp, "Access-Control-Expose-Headers", "X-Request-Id, Retry-After");
  }
  if (r->retry_after > 0) {
    char v[16];
    snprintf(v, sizeof v, "%d", r->retry_after);
    MHD_add_response_header(resp, "Retry-After", v);
  }
  if (atomic_load(&r->svc->draining)) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  for (size_t i = 0; i < r->n_headers; i++) MHD_add_response_header(resp, r->headers[i].name, r->headers[i].value);
}

enum req_next req_reply(struct req *r, int status, const char *ctype, char *body, size_t len, bool take) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, take ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_MUST_COPY);
  if (!resp) {
    if (take) free(body);
    return NEXT_FAIL;
  }
  if (ctype) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  req_decorate(r, resp);
  enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  r->status = status;
  r->phase = PH_ANSWERED;
  return ok == MHD_YES ? NEXT_REPLIED : NEXT_FAIL;
}

enum req_next req_json(struct req *r, int status, cJSON *j) {
  char *s = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  if (!s) return req_reply(r, 500, "application/json", "{\"error\":\"out of memory\"}", 25, false);
  return req_reply(r, status, "application/json", s, strlen(s), true);
}

enum req_next req_fail(struct req *r, int status, int reject, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->error, sizeof r->error, fmt, ap);
  va_end(ap);
  char msg[1024];
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (reject >= 0) metrics_reject(r->svc->metrics, (enum metric_reject)reject);
  cJSON *j = cJSON_CreateObject();
  const enum err_style style = r->route ? r->route->style : ERR_NATIVE;
  cJSON_AddStringToObject(j, style == ERR_DEEPL ? "message" : "error", msg);
  return req_json(r, status, j);
}

/* ------------------------------------------------------------------ checks */

/* The key the client sent: api_key (LibreTranslate), auth_key (DeepL's old
 * form field), Authorization: Bearer … or DeepL-Auth-Key …. */
static const char *presented_key(struct req *r, size_t *len) {
  const char *k = NULL;
  if (r->fields && (field_string(r->fields, "api_key", &k, NULL, 0) == FIELD_OK ||
                    field_string(r->fields, "auth_key", &k, NULL, 0) == FIELD_OK) && *k) {
    *len = strlen(k);
    return k;
  }
  const char *a = req_header_in(r, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!a) return NULL;
  static const char *const schemes[] = {"Bearer ", "DeepL-Auth-Key "};
  for (size_t i = 0; i < 2; i++) {
    size_t l = strlen(schemes[i]);
    if (!strncasecmp(a, schemes[i], l)) {
      a += l;
      while (*a == ' ') a++;
      *len = strlen(a);
      while (*len && a[*len - 1] == ' ') --*len;
      return *len ? a : NULL;
    }
  }
  return NULL;
}

static bool check_key(struct req *r, enum req_next *next) {
  struct service *svc = r->svc;
  /* A key of the wrong type is a malformed request, keys or not. */
  char msg[PARSE_MSG_MAX];
  const char *k0;
  if (r->fields && (field_string(r->fields, "api_key", &k0, msg, sizeof msg) == FIELD_BAD ||
                    field_string(r->fields, "auth_key", &k0, msg, sizeof msg) == FIELD_BAD)) {
    *next = req_fail(r, 400, REJ_BAD_REQUEST, "%s", msg);
    return false;
  }
  if (!svc->keys.n || !r->route->auth) return true;
  size_t len = 0;
  const char *k = presented_key(r, &len);
  if (k) {
    r->key = keyring_find(&svc->keys, k, len);
    if (r->key >= 0) return true;
    *next = req_fail(r, 403, REJ_AUTH, r->route->style == ERR_DEEPL ? "Authorization failed: unknown authentication key" : "Invalid API key");
    return false;
  }
  switch (r->route->style) {
  case ERR_LIBRE:
    *next = req_fail(r, 400, REJ_AUTH, "Please contact the server operator to get an API key (send it as api_key, or Authorization: Bearer KEY)");
    break;
  case ERR_DEEPL:
    *next = req_fail(r, 403, REJ_AUTH, "Authorization failed: send Authorization: DeepL-Auth-Key KEY");
    break;
  case ERR_NATIVE:
    req_add_header(r, "WWW-Authenticate", "Bearer realm=\"tolk\"");
    *next = req_fail(r, 401, REJ_AUTH, "an API key is required: Authorization: Bearer KEY");
    break;
  }
  return false;
}

static bool check_rate(struct req *r, enum req_next *next) {
  struct service *svc = r->svc;
  if (!r->route->limited) return true;
  double rate = r->key >= 0 && svc->keys.keys[r->key].rate_per_min > 0 ? svc->keys.keys[r->key].rate_per_min : svc->cfg.rate_per_min;
  if (!(rate > 0)) return true;
  char id[96];
  if (r->key >= 0) snprintf(id, sizeof id, "k:%d", r->key);
  else snprintf(id, sizeof id, "ip:%s", r->client);
  int wait = buckets_take(svc->buckets, id, rate, now_ns());
  if (!wait) return true;
  r->retry_after = wait;
  *next = req_fail(r, 429, REJ_RATE_LIMIT,
                   r->route->style == ERR_LIBRE ? "Slowdown: too many requests (%g per minute); retry in %d s"
                                                : "Too many requests (%g per minute); retry in %d s",
                   rate, wait);
  return false;
}

/* ------------------------------------------------------------------ fields */

struct args_ctx {
  cJSON *obj;
  bool bad;
  char *msg;
};

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  struct args_ctx *a = cls;
  if (!value) value = "";
  if (utf8_invalid_at(key, strlen(key)) != SIZE_MAX || utf8_invalid_at(value, strlen(value)) != SIZE_MAX) {
    snprintf(a->msg, PARSE_MSG_MAX, "Invalid request: query parameter '%.40s' is not valid UTF-8", key);
    a->bad = true;
    return MHD_NO;
  }
  /* The body's fields win over the query string's. */
  if (!cJSON_GetObjectItemCaseSensitive(a->obj, key)) cJSON_AddStringToObject(a->obj, key, value);
  return MHD_YES;
}

static bool read_fields(struct req *r, enum req_next *next) {
  char msg[PARSE_MSG_MAX];
  int status = 400;
  if (r->too_big) {
    *next = req_fail(r, 413, REJ_BODY_SIZE, "Request body of %zu bytes is over the limit of %zu bytes (--max-body)",
                     r->received, r->svc->cfg.max_body);
    return false;
  }
  /* A GET's fields are its query string, and its body when it has one:
   * DeepL's own client sends GET /v2/languages with type=target as a form
   * body. An empty GET body is no body, whatever its Content-Type says. */
  bool body = r->post ? r->len || r->content_type[0] : r->len > 0;
  r->fields = body ? parse_body(r->content_type[0] ? r->content_type : NULL, r->body ? r->body : "", r->len, &status, msg, sizeof msg)
                   : cJSON_CreateObject();
  if (!r->fields) {
    *next = req_fail(r, status, REJ_BAD_REQUEST, "%s", msg);
    return false;
  }
  struct args_ctx a = {r->fields, false, msg};
  MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_arg, &a);
  if (a.bad) {
    *next = req_fail(r, 400, REJ_BAD_REQUEST, "%s", msg);
    return false;
  }
  return true;
}

/* ------------------------------------------------------------------ the access handler */

static enum req_next options(struct req *r) {
  char allow[64];
  snprintf(allow, sizeof allow, "%s%sOPTIONS", r->route->methods & M_GET ? "GET, HEAD, " : "",
           r->route->methods & M_POST ? "POST, " : "");
  req_add_header(r, "Allow", "%s", allow);
  if (r->cors) {
    req_add_header(r, "Access-Control-Allow-Methods", "%s", allow);
    req_add_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type, X-Request-Id");
    req_add_header(r, "Access-Control-Max-Age", "600");
  }
  return req_reply(r, 204, NULL, "", 0, false);
}

/* Headers are in: route, and answer what needs no body. */
static enum req_next first(struct req *r, const char *url, const char *method) {
  struct service *svc = r->svc;
  request_id(r);
  client_of(r);
  cors_of(r);
  snprintf(r->path, sizeof r->path, "%s", url);
  r->route = route_find(url);
  if (!r->route) {
    static const struct route none = {NULL, 0, EP_OTHER, ERR_LIBRE, false, false, false, NULL, NULL};
    r->route = &none;
    return req_fail(r, 404, -1, "Not Found: %.200s", url);
  }
  unsigned m = !strcmp(method, "GET") || !strcmp(method, "HEAD") ? M_GET : !strcmp(method, "POST") ? M_POST : 0;
  r->head = !strcmp(method, "HEAD");
  r->post = m == M_POST;
  if (!strcmp(method, "OPTIONS")) return options(r);
  if (!(r->route->methods & m)) {
    req_add_header(r, "Allow", "%s%s", r->route->methods & M_GET ? "GET, HEAD" : "",
                   r->route->methods & M_POST ? (r->route->methods & M_GET ? ", POST" : "POST") : "");
    return req_fail(r, 405, -1, "Method Not Allowed: %s %s accepts %s", method, url,
                    r->route->methods & M_POST ? "POST" : "GET");
  }
  const char *ct = req_header_in(r, MHD_HTTP_HEADER_CONTENT_TYPE);
  if (ct) snprintf(r->content_type, sizeof r->content_type, "%s", ct);
  if (m == M_POST) {
    const char *cl = req_header_in(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long n = cl ? strtoull(cl, NULL, 10) : 0;
    if (n > svc->cfg.max_body) {
      r->received = (size_t)n;
      r->too_big = true;
      return req_fail(r, 413, REJ_BODY_SIZE, "Request body of %llu bytes is over the limit of %zu bytes (--max-body)", n,
                      svc->cfg.max_body);
    }
    if (ct && body_kind_of(ct) == BODY_OTHER)
      return req_fail(r, 415, REJ_BAD_REQUEST, "Unsupported media type '%.80s': use application/json, "
                      "application/x-www-form-urlencoded or multipart/form-data (UTF-8)", ct);
  }
  return NEXT_WAIT; /* read the body (GET: none) */
}

static bool body_append(struct req *r, const char *data, size_t n) {
  size_t max = r->svc->cfg.max_body;
  r->received += n;
  if (r->too_big || r->len + n > max) {
    r->too_big = true;
    /* Chunked uploads far past the limit are not worth reading to the end. */
    return r->received <= 2 * max + 65536;
  }
  if (r->len + n + 1 > r->cap) {
    size_t cap = r->cap ? r->cap : 4096;
    while (cap < r->len + n + 1) cap *= 2;
    char *b = realloc(r->body, cap);
    if (!b) return false;
    r->body = b;
    r->cap = cap;
  }
  memcpy(r->body + r->len, data, n);
  r->len += n;
  r->body[r->len] = '\0';
  return true;
}

/* The body is in: fields, checks, then the route's handler. */
static enum req_next dispatch(struct req *r) {
  struct service *svc = r->svc;
  enum req_next next;
  if (r->route->models && atomic_load(&svc->draining) && r->route->limited) {
    r->retry_after = 1;
    return req_fail(r, 503, REJ_UNAVAILABLE, "shutting down");
  }
  if (r->route->models && !atomic_load(&svc->loaded)) {
    r->retry_after = 1;
    return req_fail(r, 503, REJ_UNAVAILABLE, "loading the models; retry shortly");
  }
  if (!read_fields(r, &next) || !check_key(r, &next) || !check_rate(r, &next)) return next;
  if (r->route->models && !(r->ms = models_acquire(svc->models))) {
    r->retry_after = 1;
    return req_fail(r, 503, REJ_UNAVAILABLE, "no models loaded");
  }
  return r->route->start(r);
}

static enum MHD_Result result(enum req_next n) { return n == NEXT_FAIL ? MHD_NO : MHD_YES; }

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **ctx) {
  (void)version;
  struct req *r = *ctx;
  if (!r) {
    if (!(r = req_new(cls, c))) return MHD_NO;
    *ctx = r;
    return result(first(r, url, method));
  }
  if (*upload_size) {
    size_t n = *upload_size;
    *upload_size = 0;
    return r->phase != PH_BODY || body_append(r, upload, n) ? MHD_YES : MHD_NO;
  }
  if (r->phase == PH_BODY) {
    r->phase = PH_WORK;
    watch_request_read(r->svc->watch, r->slot);
    return result(dispatch(r));
  }
  if (r->phase == PH_WORK && !r->stream) return result(r->route->finish(r));
  return MHD_YES;
}

/* ------------------------------------------------------------------ completion and the log */

static void access_log(struct req *r, int status, double total_ms) {
  struct service *svc = r->svc;
  if (!svc->alog) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char when[96];
  snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "time", when);
  cJSON_AddStringToObject(j, "id", r->id);
  cJSON_AddStringToObject(j, "client", r->client);
  cJSON_AddStringToObject(j, "endpoint", metrics_endpoint_name(r->route ? r->route->ep : EP_OTHER));
  cJSON_AddNumberToObject(j, "status", status);
  cJSON_AddNumberToObject(j, "bytes_in", (double)r->received);
  cJSON_AddNumberToObject(j, "texts", (double)r->n_tasks);
  cJSON_AddNumberToObject(j, "chars", (double)r->chars);
  cJSON_AddNumberToObject(j, "sentences", (double)r->sentences);
  cJSON_AddNumberToObject(j, "queue_ms", (double)(int64_t)(r->queue_ms * 1000) / 1000);
  cJSON_AddNumberToObject(j, "compute_ms", (double)(int64_t)(r->compute_ms * 1000) / 1000);
  cJSON_AddNumberToObject(j, "total_ms", (double)(int64_t)(total_ms * 1000) / 1000);
  if (r->key >= 0) cJSON_AddNumberToObject(j, "key", r->key); /* its line's rank, never the key */
  if (r->error[0]) cJSON_AddStringToObject(j, "error", r->error);
  if (atomic_load(&r->gone)) cJSON_AddBoolToObject(j, "client_gone", 1);
  char *line = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  if (!line) return;
  pthread_mutex_lock(&svc->alog_mu);
  fputs(line, svc->alog);
  fputc('\n', svc->alog);
  fflush(svc->alog);
  pthread_mutex_unlock(&svc->alog_mu);
  free(line);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_RequestTerminationCode toe) {
  (void)c;
  struct service *svc = cls;
  struct req *r = *ctx;
  if (!r) return;
  *ctx = NULL;
  watch_request_done(svc->watch, r->slot);
  pthread_mutex_lock(&r->mu);
  r->closed = true;
  bool pending = r->pending > 0;
  pthread_mutex_unlock(&r->mu);
  if (pending || toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
    if (pending) atomic_store(&r->gone, true);
    req_cancel(r);
  }
  /* 499, as nginx logs it: the client left before its answer. */
  int status = r->status && !atomic_load(&r->gone) ? r->status : 499;
  double total = (double)(now_ns() - r->t0) * 1e-6;
  if (status == 200) {
    atomic_fetch_add(&svc->chars_total, r->chars);
    if (r->key >= 0) atomic_fetch_add(&svc->key_chars[r->key], r->chars);
  }
  metrics_request(svc->metrics, r->route ? r->route->ep : EP_OTHER, status, total);
  access_log(r, status, total);
  req_unref(r);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  struct service *svc = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_context = ci ? watch_open(svc->watch, ci->connect_fd) : NULL;
  } else {
    watch_close(svc->watch, *socket_context);
    *socket_context = NULL;
  }
}

void http_gone(void *req) {
  struct req *r = req;
  atomic_store(&r->gone, true);
  req_cancel_unlocked(r);
}

static void on_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void on_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char line[512];
  vsnprintf(line, sizeof line, fmt, ap);
  size_t n = strlen(line);
  while (n && line[n - 1] == '\n') line[--n] = '\0';
  fprintf(stderr, "tolk serve: http: %s\n", line);
}

/* ------------------------------------------------------------------ the daemon */

static int resolve(const char *host, unsigned port, struct sockaddr_storage *ss, char *msg, size_t msgsz) {
  struct addrinfo hints = {0}, *ai = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  char p[16];
  snprintf(p, sizeof p, "%u", port);
  int rc = getaddrinfo(host, p, &hints, &ai);
  if (rc || !ai) {
    snprintf(msg, msgsz, "cannot resolve --host %s: %s", host, gai_strerror(rc));
    return -1;
  }
  memcpy(ss, ai->ai_addr, ai->ai_addrlen);
  freeaddrinfo(ai);
  return 0;
}

int http_start(struct service *svc, char *msg, size_t msgsz) {
  struct sockaddr_storage ss = {0};
  if (resolve(svc->cfg.host, (unsigned)svc->cfg.port, &ss, msg, msgsz)) return -1;
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  unsigned timeout = (unsigned)(svc->cfg.conn_timeout_s + 0.999);
  svc->daemon = MHD_start_daemon(flags, (uint16_t)svc->cfg.port, NULL, NULL, on_request, svc,
                                 MHD_OPTION_EXTERNAL_LOGGER, on_log, svc, /* first, or MHD warns */
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                 MHD_OPTION_CONNECTION_TIMEOUT, timeout,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)svc->cfg.max_connections,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, svc,
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, svc,
                                 MHD_OPTION_END);
  if (!svc->daemon) {
    snprintf(msg, msgsz, "cannot listen on %s:%d: %s", svc->cfg.host, svc->cfg.port,
             errno ? strerror(errno) : "libmicrohttpd refused to start");
    return -1;
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(svc->daemon, MHD_DAEMON_INFO_BIND_PORT);
  svc->port = di ? di->port : (unsigned)svc->cfg.port;
  return 0;
}

/* The listening socket stops listening at once (a new client is refused,
 * not left in the backlog), but is closed only after MHD's thread is gone:
 * that thread may still be taking it out of its epoll set, and a closed
 * descriptor number can be reused under it. */
void http_quiesce(struct service *svc) {
  if (!svc->daemon || svc->quiesced_fd >= 0) return;
  MHD_socket fd = MHD_quiesce_daemon(svc->daemon);
  if (fd == MHD_INVALID_SOCKET) return;
  shutdown(fd, SHUT_RDWR);
  svc->quiesced_fd = fd;
}

void http_cancel_all(struct service *svc) {
  pthread_mutex_lock(&svc->live_mu);
  for (struct req *r = svc->live; r; r = r->next) req_cancel(r);
  pthread_mutex_unlock(&svc->live_mu);
}

void http_stop(struct service *svc) {
  if (svc->daemon) MHD_stop_daemon(svc->daemon);
  svc->daemon = NULL;
  if (svc->quiesced_fd >= 0) close(svc->quiesced_fd);
  svc->quiesced_fd = -1;
}
