/*
 * parse.h — request bodies to fields, with no sockets: the service's three
 * body formats (JSON, application/x-www-form-urlencoded, multipart/form-data)
 * all become one cJSON object whose values are strings (form fields), or
 * whatever JSON held, so that the API handlers read one shape. A name given
 * more than once in a form becomes an array of its values, as DeepL's
 * repeated `text=` needs.
 *
 * Every failure fills `msg` with a sentence a client can act on, naming the
 * byte offset (and for JSON the line and column) where the body went wrong.
 * Bytes are untrusted: sizes are bounded by the caller (--max-body) and by
 * the field caps below; nothing here recurses on input except cJSON, whose
 * nesting is capped at CJSON_NESTING_LIMIT.
 *
 * The field readers (field_*) give a client the same clear error whatever
 * the body format was: a number may come as a JSON number or as a form
 * string, a flag as true/false or "true"/"1"/"0".
 */
#ifndef TOLK_SERVE_PARSE_H
#define TOLK_SERVE_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define PARSE_MSG_MAX 256
/* Fields a form body may have; more is a 400 (a bound on the work per body). */
#define PARSE_MAX_FIELDS 1024

/* The offset of the first byte that does not begin a valid UTF-8 sequence
 * (overlong forms, surrogates and code points past U+10FFFF are invalid),
 * or SIZE_MAX when all n bytes are valid. */
size_t utf8_invalid_at(const char *s, size_t n);

/* Code points in n bytes of valid UTF-8 (what LibreTranslate's limits count). */
size_t utf8_count(const char *s, size_t n);

enum body_kind {
  BODY_NONE,      /* no Content-Type */
  BODY_JSON,      /* application/json, or any type/subtype+json */
  BODY_FORM,      /* application/x-www-form-urlencoded */
  BODY_MULTIPART, /* multipart/form-data */
  BODY_OTHER
};

/* Classifies a Content-Type header value (NULL: BODY_NONE). Parameters
 * (charset) are allowed; a charset other than UTF-8 is BODY_OTHER. */
enum body_kind body_kind_of(const char *content_type);

/* A JSON body that must be an object. NULL on failure, msg e.g.
 * "Invalid JSON at line 2, column 7 (byte 15): expected a value". */
cJSON *parse_json_body(const char *body, size_t n, char *msg, size_t msgsz);

/* A urlencoded body (or query string): '+' is a space, %XX a byte; a
 * malformed escape or a value that is not UTF-8 once decoded is an error
 * naming the field and the body offset. An empty body is an empty object. */
cJSON *parse_form_body(const char *body, size_t n, char *msg, size_t msgsz);

/* Adds the fields of a urlencoded string to `obj` (as parse_form_body). */
bool parse_form_into(cJSON *obj, const char *s, size_t n, char *msg, size_t msgsz);

/* A multipart/form-data body; the boundary comes from `content_type`. Parts
 * that carry a filename (file uploads) are refused. */
cJSON *parse_multipart_body(const char *body, size_t n, const char *content_type, char *msg,
                            size_t msgsz);

/* Whichever of the above `content_type` asks for. *http_status receives 400
 * for a malformed body, 415 for a media type none of them reads. A missing
 * Content-Type with an empty body is an empty object; with a body, 415. */
cJSON *parse_body(const char *content_type, const char *body, size_t n, int *http_status,
                  char *msg, size_t msgsz);

/* vsnprintf into msg (msgsz bytes) when msg is not NULL: the one way the
 * service's parsers and checks write their messages. */
void serve_say(char *msg, size_t msgsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* -------------------------------------------------------------- fields
 * Each returns FIELD_OK with the value, FIELD_MISSING when the field is
 * absent (or JSON null), FIELD_BAD with msg naming the field and what it
 * should be. */
enum field_result { FIELD_OK = 0, FIELD_MISSING = 1, FIELD_BAD = 2 };

enum field_result field_string(const cJSON *obj, const char *name, const char **out, char *msg,
                               size_t msgsz);
/* An integer in [lo, hi]: a JSON number without a fraction, or a decimal
 * string. */
enum field_result field_int(const cJSON *obj, const char *name, long lo, long hi, long *out,
                            char *msg, size_t msgsz);
/* A JSON true or false, or (as form fields arrive) the strings true/false,
 * 1/0, yes/no, on/off. A JSON number is refused: the schema says boolean. */
enum field_result field_bool(const cJSON *obj, const char *name, bool *out, char *msg,
                             size_t msgsz);

/* A string or an array of strings: *out (n entries, borrowed from obj) is
 * malloc'ed, freed by the caller with free(); *is_array says which it was.
 * An empty array is FIELD_MISSING (as LibreTranslate's `if not q`). */
enum field_result field_strings(const cJSON *obj, const char *name, const char ***out,
                                size_t *n, bool *is_array, char *msg, size_t msgsz);

#endif /* TOLK_SERVE_PARSE_H */
