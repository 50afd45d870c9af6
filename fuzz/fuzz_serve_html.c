/*
 * fuzz_serve_html.c — libFuzzer target: arbitrary bytes as a format=html
 * document (src/serve/html.c). What a well-formed document must satisfy:
 * rendered with no translations it is the input byte for byte; rendered
 * with each text translated to itself it is still well-formed and yields
 * the same texts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/html.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *s = (const char *)data;
  struct html_doc d;
  char msg[256];
  if (html_parse(s, size, &d, msg, sizeof msg)) return 0;
  size_t len;
  char *same = html_render(s, size, &d, NULL, &len);
  if (!same || len != size || memcmp(same, s, size)) abort();
  free(same);
  const char **texts = malloc((d.n ? d.n : 1) * sizeof *texts);
  for (size_t i = 0; i < d.n; i++) texts[i] = d.texts[i].text;
  char *again = html_render(s, size, &d, texts, &len);
  struct html_doc d2;
  if (!again || html_parse(again, len, &d2, msg, sizeof msg)) abort();
  if (d2.n != d.n) abort();
  for (size_t i = 0; i < d.n; i++)
    if (strcmp(d.texts[i].text, d2.texts[i].text)) abort();
  html_doc_free(&d2);
  free(again);
  free(texts);
  html_doc_free(&d);
  return 0;
}
