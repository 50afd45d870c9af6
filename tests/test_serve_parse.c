/*
 * test_serve_parse.c — the service's body parsers (src/serve/parse.c):
 * UTF-8 validation and its byte offsets, JSON with line/column/byte in the
 * message, urlencoded and multipart forms (repeated names become arrays,
 * malformed escapes and invalid UTF-8 named with their offsets), media-type
 * classification, and the typed field readers on both kinds of body.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/parse.h"
#include "testutil.h"

#define HAS(msg, s) CHECK_MSG(strstr((msg), (s)) != NULL, "'%s' lacks '%s'", (msg), (s))

static void utf8(void) {
  CHECK(utf8_invalid_at("", 0) == SIZE_MAX);
  CHECK(utf8_invalid_at("abc \xE4\xBD\xA0\xF0\x9F\x98\x80", 11) == SIZE_MAX);
  CHECK(utf8_invalid_at("ab\xC0\xAF", 4) == 2);          /* overlong '/' */
  CHECK(utf8_invalid_at("abc\xED\xA0\x80", 6) == 3);     /* a surrogate */
  CHECK(utf8_invalid_at("\xF4\x90\x80\x80", 4) == 0);    /* past U+10FFFF */
  CHECK(utf8_invalid_at("x\xE4\xBD", 3) == 1);           /* truncated */
  CHECK(utf8_invalid_at("xy\x80", 3) == 2);              /* a lone continuation */
  CHECK(utf8_count("h\xC3\xA9llo \xE4\xBD\xA0", 10) == 7);
}

static void kinds(void) {
  CHECK(body_kind_of(NULL) == BODY_NONE);
  CHECK(body_kind_of("application/json") == BODY_JSON);
  CHECK(body_kind_of("Application/JSON; charset=UTF-8") == BODY_JSON);
  CHECK(body_kind_of("application/vnd.api+json") == BODY_JSON);
  CHECK(body_kind_of("application/json; charset=latin1") == BODY_OTHER);
  CHECK(body_kind_of("application/x-www-form-urlencoded") == BODY_FORM);
  CHECK(body_kind_of("multipart/form-data; boundary=xyz") == BODY_MULTIPART);
  CHECK(body_kind_of("text/plain") == BODY_OTHER);
}

static cJSON *json(const char *s, char *msg) { return parse_json_body(s, strlen(s), msg, PARSE_MSG_MAX); }

static void json_bodies(void) {
  char msg[PARSE_MSG_MAX];
  cJSON *o = json("{\"q\": \"Hello\", \"source\": \"en\"}", msg);
  CHECK(o && cJSON_IsString(cJSON_GetObjectItem(o, "q")));
  cJSON_Delete(o);
  CHECK(!json("{\"q\": \"Hello\",\n  \"x\": }", msg));
  HAS(msg, "line 2, column 8 (byte 22)");
  HAS(msg, "'}'");
  CHECK(!json("{\"q\": \"abc", msg));
  HAS(msg, "Invalid JSON at line 1");
  CHECK(!json("", msg));
  HAS(msg, "empty");
  CHECK(!json("[1,2]", msg));
  HAS(msg, "must be a JSON object");
  CHECK(!json("{} {}", msg));
  HAS(msg, "byte 3");
  HAS(msg, "data after the JSON value");
  CHECK(!json("{\"q\": \"a\xFF\"}", msg));
  HAS(msg, "not valid UTF-8 at byte 8");
  CHECK(!json("{\"q\": \"a\\u0000b\"}", msg));
  HAS(msg, "\\u0000");
  o = json("{\"q\": \"\\u4f60\\ud83d\\ude00\"}", msg);
  CHECK(o && !strcmp(cJSON_GetObjectItem(o, "q")->valuestring, "\xE4\xBD\xA0\xF0\x9F\x98\x80"));
  cJSON_Delete(o);
  CHECK(!json("{\"q\": \"\\ud800\"}", msg)); /* a lone surrogate escape */
  /* Deep nesting is refused by cJSON's limit, not by the stack. */
  size_t deep = 5000;
  char *d = malloc(2 * deep + 8);
  strcpy(d, "{\"a\":");
  for (size_t i = 0; i < deep; i++) d[5 + i] = '[';
  d[5 + deep] = '\0';
  CHECK(!json(d, msg));
  free(d);
}

static void forms(void) {
  char msg[PARSE_MSG_MAX];
  const char *b = "q=Hello+world%21&source=en&target=zh&text=a&text=b&text=c&flag";
  cJSON *o = parse_form_body(b, strlen(b), msg, sizeof msg);
  CHECK(o);
  CHECK(o && !strcmp(cJSON_GetObjectItem(o, "q")->valuestring, "Hello world!"));
  const cJSON *t = o ? cJSON_GetObjectItem(o, "text") : NULL;
  CHECK(cJSON_IsArray(t) && cJSON_GetArraySize(t) == 3 && !strcmp(cJSON_GetArrayItem(t, 2)->valuestring, "c"));
  CHECK(o && !strcmp(cJSON_GetObjectItem(o, "flag")->valuestring, ""));
  cJSON_Delete(o);
  b = "q=%E4%BD%A0%E5%A5%BD";
  o = parse_form_body(b, strlen(b), msg, sizeof msg);
  CHECK(o && !strcmp(cJSON_GetObjectItem(o, "q")->valuestring, "\xE4\xBD\xA0\xE5\xA5\xBD"));
  cJSON_Delete(o);
  b = "source=en&q=ab%zz";
  CHECK(!parse_form_body(b, strlen(b), msg, sizeof msg));
  HAS(msg, "malformed percent escape in field 'q' at byte 14");
  b = "source=en&q=ab%4";
  CHECK(!parse_form_body(b, strlen(b), msg, sizeof msg));
  HAS(msg, "byte 14");
  b = "source=en&q=ab%FFcd";
  CHECK(!parse_form_body(b, strlen(b), msg, sizeof msg));
  HAS(msg, "field 'q' is not valid UTF-8 at byte 2 of its value (byte 14 of the body)");
  b = "q=a%00b";
  CHECK(!parse_form_body(b, strlen(b), msg, sizeof msg));
  HAS(msg, "NUL");
  o = parse_form_body("", 0, msg, sizeof msg);
  CHECK(o && cJSON_GetArraySize(o) == 0);
  cJSON_Delete(o);
  /* The field cap: one name many times is one field; many names are refused. */
  size_t n = 2000;
  char *many = malloc(n * 8 + 1);
  for (size_t i = 0; i < n; i++) memcpy(many + 4 * i, "a=1&", 4);
  many[4 * n] = '\0';
  o = parse_form_body(many, strlen(many), msg, sizeof msg);
  CHECK(o && cJSON_GetArraySize(cJSON_GetObjectItem(o, "a")) == (int)n);
  cJSON_Delete(o);
  size_t w = 0;
  for (size_t i = 0; i < n; i++) w += (size_t)snprintf(many + w, n * 8 + 1 - w, "f%zu=&", i);
  CHECK(!parse_form_body(many, w, msg, sizeof msg));
  HAS(msg, "more than 1024 form fields");
  free(many);
}

static void multipart(void) {
  char msg[PARSE_MSG_MAX];
  const char *ct = "multipart/form-data; boundary=----X1";
  const char *b = "------X1\r\nContent-Disposition: form-data; name=\"q\"\r\n\r\nHello\r\nworld\r\n"
                  "------X1\r\nContent-Disposition: form-data; name=\"source\"\r\n\r\nen\r\n"
                  "------X1--\r\n";
  cJSON *o = parse_multipart_body(b, strlen(b), ct, msg, sizeof msg);
  CHECK_MSG(o != NULL, "%s", msg);
  CHECK(o && !strcmp(cJSON_GetObjectItem(o, "q")->valuestring, "Hello\r\nworld"));
  CHECK(o && !strcmp(cJSON_GetObjectItem(o, "source")->valuestring, "en"));
  cJSON_Delete(o);
  const char *trunc = "------X1\r\nContent-Disposition: form-data; name=\"q\"\r\n\r\nHello";
  CHECK(!parse_multipart_body(trunc, strlen(trunc), ct, msg, sizeof msg));
  HAS(msg, "truncated");
  const char *file = "------X1\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.txt\"\r\n\r\nx\r\n------X1--";
  CHECK(!parse_multipart_body(file, strlen(file), ct, msg, sizeof msg));
  HAS(msg, "file uploads");
  CHECK(!parse_multipart_body(b, strlen(b), "multipart/form-data", msg, sizeof msg));
  HAS(msg, "boundary");
  const char *bad = "------X1\r\nContent-Disposition: form-data; name=\"q\"\r\n\r\nab\xFF\r\n------X1--";
  CHECK(!parse_multipart_body(bad, strlen(bad), ct, msg, sizeof msg));
  HAS(msg, "byte 2 of its value");
}

static void dispatch(void) {
  char msg[PARSE_MSG_MAX];
  int status;
  cJSON *o = parse_body("text/plain", "x", 1, &status, msg, sizeof msg);
  CHECK(!o && status == 415);
  HAS(msg, "Unsupported media type 'text/plain'");
  o = parse_body(NULL, "q=x", 3, &status, msg, sizeof msg);
  CHECK(!o && status == 415);
  o = parse_body(NULL, "", 0, &status, msg, sizeof msg);
  CHECK(o != NULL);
  cJSON_Delete(o);
  o = parse_body("application/json", "{", 1, &status, msg, sizeof msg);
  CHECK(!o && status == 400);
}

static void fields(void) {
  char msg[PARSE_MSG_MAX];
  cJSON *j = json("{\"s\":\"x\",\"n\":3,\"f\":2.5,\"b\":true,\"a\":[\"x\",\"y\"],\"bad\":[\"x\",1],\"z\":null,\"e\":[],\"one\":1}", msg);
  const char *form = "s=x&n=3&f=2.5&b=1&a=x&a=y&neg=-2&sp=+3";
  cJSON *f = parse_form_body(form, strlen(form), msg, sizeof msg);
  CHECK(j && f);
  const char *s;
  long n;
  bool b;
  CHECK(field_string(j, "s", &s, msg, sizeof msg) == FIELD_OK && !strcmp(s, "x"));
  CHECK(field_string(j, "missing", &s, msg, sizeof msg) == FIELD_MISSING);
  CHECK(field_string(j, "z", &s, msg, sizeof msg) == FIELD_MISSING);
  CHECK(field_string(j, "n", &s, msg, sizeof msg) == FIELD_BAD);
  HAS(msg, "n must be a string, not a number");
  CHECK(field_string(f, "a", &s, msg, sizeof msg) == FIELD_BAD);
  for (int k = 0; k < 2; k++) {
    cJSON *o = k ? f : j;
    CHECK(field_int(o, "n", 0, 10, &n, msg, sizeof msg) == FIELD_OK && n == 3);
    CHECK(field_int(o, "n", 0, 2, &n, msg, sizeof msg) == FIELD_BAD);
    HAS(msg, "between 0 and 2");
    CHECK(field_int(o, "f", 0, 10, &n, msg, sizeof msg) == FIELD_BAD);
    HAS(msg, "f parameter is not a number");
    CHECK(field_bool(o, "b", &b, msg, sizeof msg) == FIELD_OK && b);
    CHECK(field_bool(o, "s", &b, msg, sizeof msg) == FIELD_BAD);
    CHECK(k || field_bool(o, "one", &b, msg, sizeof msg) == FIELD_BAD); /* JSON 1 is no boolean */
    const char **v;
    size_t cnt;
    bool arr;
    CHECK(field_strings(o, "a", &v, &cnt, &arr, msg, sizeof msg) == FIELD_OK && cnt == 2 && arr && !strcmp(v[1], "y"));
    free(v);
    CHECK(field_strings(o, "s", &v, &cnt, &arr, msg, sizeof msg) == FIELD_OK && cnt == 1 && !arr);
    free(v);
  }
  CHECK(field_int(f, "sp", -5, 5, &n, msg, sizeof msg) == FIELD_BAD); /* " 3": no leading space */
  CHECK(field_int(f, "neg", -5, 5, &n, msg, sizeof msg) == FIELD_OK && n == -2);
  const char **v;
  size_t cnt;
  bool arr;
  CHECK(field_strings(j, "bad", &v, &cnt, &arr, msg, sizeof msg) == FIELD_BAD);
  HAS(msg, "bad[1] must be a string, not a number");
  CHECK(field_strings(j, "e", &v, &cnt, &arr, msg, sizeof msg) == FIELD_MISSING);
  CHECK(field_strings(j, "n", &v, &cnt, &arr, msg, sizeof msg) == FIELD_BAD);
  cJSON_Delete(j);
  cJSON_Delete(f);
}

int main(void) {
  utf8();
  kinds();
  json_bodies();
  forms();
  multipart();
  dispatch();
  fields();
  return tu_finish("test_serve_parse");
}
