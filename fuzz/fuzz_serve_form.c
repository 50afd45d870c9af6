/*
 * fuzz_serve_form.c — libFuzzer target: arbitrary bytes as a form body for
 * `tolk serve`: the first byte picks urlencoded or multipart/form-data (with
 * a fixed boundary, or — odd first byte — a Content-Type read from the
 * input's first line), then LibreTranslate's field parser reads the fields.
 */
#include <stdlib.h>
#include <string.h>

#include "serve/api.h"
#include "serve/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  char msg[PARSE_MSG_MAX], ct[256] = "multipart/form-data; boundary=XyZ";
  const char *body = (const char *)data + 1;
  size_t n = size - 1;
  cJSON *o;
  if (data[0] % 3 == 0) {
    o = parse_form_body(body, n, msg, sizeof msg);
  } else {
    if (data[0] % 3 == 2) {
      const char *nl = memchr(body, '\n', n);
      size_t l = nl ? (size_t)(nl - body) : n;
      if (l >= sizeof ct) l = sizeof ct - 1;
      memcpy(ct, body, l);
      ct[l] = '\0';
      if (strlen(ct) != l) return 0; /* a header value has no NUL */
      body += nl ? l + 1 : l;
      n -= nl ? l + 1 : l;
    }
    int status;
    o = parse_body(ct, body, n, &status, msg, sizeof msg);
    if (!o && status != 400 && status != 415) abort();
  }
  if (!o) return 0;
  struct libre_request l;
  if (!libre_parse(o, &l, msg, sizeof msg)) {
    for (size_t i = 0; i < l.n; i++)
      if (utf8_invalid_at(l.q[i], strlen(l.q[i])) != SIZE_MAX) abort(); /* fields are valid UTF-8 */
    free(l.q);
  }
  cJSON_Delete(o);
  return 0;
}
