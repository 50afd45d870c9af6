/*
 * api.h — each API's request fields, read from the parsed body (parse.h)
 * into a plain struct by a plain function: no sockets, no models, so the
 * tests and the libFuzzer targets (fuzz/fuzz_serve_*.c) call them directly.
 * The handlers in api_*.c then resolve languages and submit the texts.
 *
 * Strings and arrays point into the cJSON object they were read from; the
 * `texts` arrays are malloc'ed: free them with free(). On failure the
 * parsers return -1 with the client's error message in msg (the API's own
 * wording: LibreTranslate's "Invalid request: missing q parameter",
 * DeepL's "Parameter 'text' not specified.") and own nothing.
 */
#ifndef TOLK_SERVE_API_H
#define TOLK_SERVE_API_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

/* POST /translate: q (string or array), source ("auto" too), target,
 * format text|html, alternatives 0..3. */
struct libre_request {
  const char **q;
  size_t n;
  bool array, html;
  const char *source, *target;
  long alternatives;
};
int libre_parse(const cJSON *fields, struct libre_request *out, char *msg, size_t msgsz);

/* POST /v2/translate: text (repeated or array), target_lang, source_lang,
 * split_sentences 0|1|nonewlines, tag_handling html. */
struct deepl_request {
  const char **texts;
  size_t n;
  const char *target, *source; /* source NULL: detect */
  bool join_lines, html;
};
int deepl_parse(const cJSON *fields, struct deepl_request *out, char *msg, size_t msgsz);

/* POST /v1/translate: texts, target, source, beam, max_new_tokens,
 * min_new_tokens, n_best, return_scores, return_ids, stream, format. Zero
 * beam / max_new_tokens / min_new_tokens: the model's. */
struct native_request {
  const char **texts;
  size_t n;
  const char *target, *source; /* NULL: the first model's first target / "auto" */
  long beam, max_new_tokens, min_new_tokens, n_best;
  bool scores, ids, stream, html;
};
int native_parse(const cJSON *fields, struct native_request *out, char *msg, size_t msgsz);

#endif /* TOLK_SERVE_API_H */
