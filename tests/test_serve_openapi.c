/*
 * test_serve_openapi.c — keeps GET /openapi.json true: the description the
 * binary embeds names exactly the routes the server has, with their
 * methods; every field each API's parser reads is in its request schema;
 * a body made of the schema's examples is accepted by the parser, and
 * without any one of its required fields refused; the enums the schema
 * lists are accepted and a value outside them refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/api.h"
#include "serve/service.h"
#include "testutil.h"

static cJSON *doc;

static const cJSON *schema(const char *name) {
  return cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "components"), "schemas"), name);
}

static void routes(void) {
  const cJSON *paths = cJSON_GetObjectItem(doc, "paths");
  CHECK(cJSON_IsObject(paths));
  for (const cJSON *p = paths ? paths->child : NULL; p; p = p->next) {
    const struct route *rt = route_find(p->string);
    CHECK_MSG(rt != NULL, "documented %s is not routed", p->string);
    for (const cJSON *m = p->child; rt && m; m = m->next) {
      unsigned want = !strcmp(m->string, "get") ? M_GET : !strcmp(m->string, "post") ? M_POST : 0;
      CHECK_MSG(want && (rt->methods & want), "documented %s %s is not served", m->string, p->string);
      CHECK_MSG(cJSON_GetObjectItem(m, "responses") != NULL, "%s %s: no responses", m->string, p->string);
    }
  }
  for (const struct route *rt = serve_routes; rt->path; rt++) {
    const cJSON *p = cJSON_GetObjectItem(paths, rt->path);
    CHECK_MSG(p != NULL, "route %s is not documented", rt->path);
    CHECK_MSG(!(rt->methods & M_GET) || cJSON_GetObjectItem(p, "get"), "GET %s undocumented", rt->path);
    CHECK_MSG(!(rt->methods & M_POST) || cJSON_GetObjectItem(p, "post"), "POST %s undocumented", rt->path);
  }
  CHECK(cJSON_GetObjectItem(paths, "/") && route_find("/"));
}

typedef int (*parse_fn)(const cJSON *fields, void *out, char *msg, size_t msgsz);

static int parse_libre(const cJSON *f, void *o, char *m, size_t n) {
  int rc = libre_parse(f, o, m, n);
  if (!rc) free(((struct libre_request *)o)->q);
  return rc;
}
static int parse_deepl(const cJSON *f, void *o, char *m, size_t n) {
  int rc = deepl_parse(f, o, m, n);
  if (!rc) free(((struct deepl_request *)o)->texts);
  return rc;
}
static int parse_native(const cJSON *f, void *o, char *m, size_t n) {
  int rc = native_parse(f, o, m, n);
  if (!rc) free(((struct native_request *)o)->texts);
  return rc;
}

/* A body of the schema's examples for its required fields (and `all`: for
 * every property that has one). */
static cJSON *example(const cJSON *s, bool all) {
  cJSON *o = cJSON_CreateObject();
  const cJSON *props = cJSON_GetObjectItem(s, "properties"), *req = cJSON_GetObjectItem(s, "required");
  for (const cJSON *p = props ? props->child : NULL; p; p = p->next) {
    bool required = false;
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) required |= !strcmp(r->valuestring, p->string);
    const cJSON *ex = cJSON_GetObjectItem(p, "example");
    if ((required || all) && ex && strcmp(p->string, "api_key")) cJSON_AddItemToObject(o, p->string, cJSON_Duplicate(ex, 1));
    CHECK_MSG(!required || ex, "required %s has no example", p->string);
  }
  return o;
}

static void api(const char *name, parse_fn parse, const char *const *fields, const char *enum_field) {
  const cJSON *s = schema(name);
  CHECK_MSG(s != NULL, "no schema %s", name);
  if (!s) return;
  const cJSON *props = cJSON_GetObjectItem(s, "properties");
  for (; *fields; fields++) CHECK_MSG(cJSON_GetObjectItem(props, *fields), "%s lacks %s, which the parser reads", name, *fields);
  char msg[256];
  union {
    struct libre_request l;
    struct deepl_request d;
    struct native_request n;
  } out;
  for (int all = 0; all < 2; all++) {
    cJSON *body = example(s, all);
    CHECK_MSG(parse(body, &out, msg, sizeof msg) == 0, "%s example refused: %s", name, msg);
    cJSON_Delete(body);
  }
  const cJSON *req = cJSON_GetObjectItem(s, "required");
  for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
    cJSON *body = example(s, false);
    cJSON_DeleteItemFromObject(body, r->valuestring);
    CHECK_MSG(parse(body, &out, msg, sizeof msg) != 0, "%s without %s accepted", name, r->valuestring);
    cJSON_Delete(body);
  }
  const cJSON *en = cJSON_GetObjectItem(cJSON_GetObjectItem(props, enum_field), "enum");
  CHECK_MSG(cJSON_IsArray(en), "%s.%s has no enum", name, enum_field);
  for (const cJSON *v = en ? en->child : NULL; v; v = v->next) {
    cJSON *body = example(s, false);
    cJSON_AddItemToObject(body, enum_field, cJSON_Duplicate(v, 1));
    CHECK_MSG(parse(body, &out, msg, sizeof msg) == 0, "%s.%s=%s refused: %s", name, enum_field, v->valuestring, msg);
    cJSON_Delete(body);
  }
  cJSON *body = example(s, false);
  cJSON_AddStringToObject(body, enum_field, "not-in-the-enum");
  CHECK_MSG(parse(body, &out, msg, sizeof msg) != 0, "%s.%s outside its enum accepted", name, enum_field);
  cJSON_Delete(body);
}

int main(void) {
  const struct asset *a = asset_find("/openapi.json");
  CHECK(a != NULL);
  if (!a) return tu_finish("test_serve_openapi");
  doc = cJSON_ParseWithLength((const char *)a->data, a->size);
  CHECK(doc && !strncmp(cJSON_GetObjectItem(doc, "openapi")->valuestring, "3.", 2));
  CHECK(a->etag && a->etag[0] == '"');
  routes();
  static const char *const libre[] = {"q", "source", "target", "format", "alternatives", "api_key", NULL};
  static const char *const deepl[] = {"text", "target_lang", "source_lang", "split_sentences", "tag_handling", "auth_key", NULL};
  static const char *const native[] = {"texts", "target", "source", "beam", "max_new_tokens", "min_new_tokens", "n_best",
                                       "return_scores", "return_ids", "stream", "format", NULL};
  api("TranslateRequest", parse_libre, libre, "format");
  api("TranslateRequestForm", parse_libre, libre, "format");
  api("DeepLTranslateRequest", parse_deepl, deepl, "split_sentences");
  api("DeepLTranslateRequestForm", parse_deepl, deepl, "tag_handling");
  api("NativeRequest", parse_native, native, "format");
  /* The page is served at / and as index.html. */
  CHECK(asset_find("/") && asset_find("/index.html") && !strncmp(asset_find("/")->content_type, "text/html", 9));
  cJSON_Delete(doc);
  return tu_finish("test_serve_openapi");
}
