/*
 * fuzz_serve_json.c — libFuzzer target: arbitrary bytes as a JSON request
 * body for `tolk serve` (src/serve/parse.c), then through each API's field
 * parser (api.h) and the field readers, as a request would go.
 */
#include <stdlib.h>
#include <string.h>

#include "serve/api.h"
#include "serve/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char msg[PARSE_MSG_MAX];
  cJSON *o = parse_json_body((const char *)data, size, msg, sizeof msg);
  if (!o) {
    if (!memchr(msg, '\0', sizeof msg)) abort(); /* the message is always a string */
    return 0;
  }
  struct libre_request l;
  struct deepl_request d;
  struct native_request n;
  if (!libre_parse(o, &l, msg, sizeof msg)) {
    for (size_t i = 0; i < l.n; i++) (void)utf8_count(l.q[i], strlen(l.q[i]));
    free(l.q);
  }
  if (!deepl_parse(o, &d, msg, sizeof msg)) free(d.texts);
  if (!native_parse(o, &n, msg, sizeof msg)) free(n.texts);
  long v;
  bool b;
  const char *s;
  (void)field_int(o, "alternatives", 0, 3, &v, msg, sizeof msg);
  (void)field_bool(o, "stream", &b, msg, sizeof msg);
  (void)field_string(o, "api_key", &s, msg, sizeof msg);
  cJSON_Delete(o);
  return 0;
}
