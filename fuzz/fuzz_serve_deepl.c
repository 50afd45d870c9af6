/*
 * fuzz_serve_deepl.c — libFuzzer target: arbitrary bytes as a DeepL
 * /v2/translate body (first byte: urlencoded or JSON), through DeepL's field
 * parser and the language-code mapping its languages go through.
 */
#include <stdlib.h>
#include <string.h>

#include "serve/api.h"
#include "serve/lang.h"
#include "serve/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  char msg[PARSE_MSG_MAX];
  const char *body = (const char *)data + 1;
  cJSON *o = data[0] & 1 ? parse_json_body(body, size - 1, msg, sizeof msg) : parse_form_body(body, size - 1, msg, sizeof msg);
  if (!o) return 0;
  struct deepl_request d;
  if (!deepl_parse(o, &d, msg, sizeof msg)) {
    if (!d.n || !d.target) abort();
    char code[LANG_CODE_MAX], deepl[LANG_CODE_MAX];
    lang_normalize(d.target, code, sizeof code);
    lang_deepl(code, true, deepl, sizeof deepl);
    if (d.source) lang_normalize(d.source, code, sizeof code);
    const char *cand[] = {"en", "zh-Hans"};
    struct detection det[2];
    for (size_t i = 0; i < d.n; i++) lang_detect(d.texts[i], strlen(d.texts[i]), cand, 2, det);
    free(d.texts);
  }
  cJSON_Delete(o);
  return 0;
}
