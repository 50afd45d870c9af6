/*
 * parse.c — request bodies (JSON, urlencoded, multipart) to one cJSON object,
 * UTF-8 validation with byte offsets, and typed field readers. See parse.h.
 * cJSON parses the JSON; the two form formats are simple enough to read here
 * (they are body encodings, not HTTP: libmicrohttpd has parsed the request).
 */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void serve_say(char *msg, size_t msgsz, const char *fmt, ...) {
  if (!msg || !msgsz) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, msgsz, fmt, ap);
  va_end(ap);
}

/* ------------------------------------------------------------------ UTF-8 */

/* Length of the valid sequence at s[0..left), 0 when invalid. */
static size_t utf8_seq(const unsigned char *s, size_t left) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned min, cp;
  if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000, cp = c & 0x07;
  else return 0;
  if (left < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

size_t utf8_invalid_at(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    if (u[i] < 0x80) {
      i++;
      continue;
    }
    size_t l = utf8_seq(u + i, n - i);
    if (!l) return i;
    i += l;
  }
  return SIZE_MAX;
}

size_t utf8_count(const char *s, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
  return c;
}

/* ------------------------------------------------------------------ media types */

/* Whether the `key` parameter of a header value is `want` (or absent). */
static bool param_is(const char *ct, const char *key, const char *const *want) {
  const char *p = strchr(ct, ';');
  size_t kl = strlen(key);
  while (p) {
    p++;
    while (*p == ' ' || *p == '\t') p++;
    if (!strncasecmp(p, key, kl) && p[kl] == '=') {
      const char *v = p + kl + 1;
      if (*v == '"') v++;
      size_t vl = strcspn(v, "\";, \t");
      for (; *want; want++)
        if (strlen(*want) == vl && !strncasecmp(v, *want, vl)) return true;
      return false;
    }
    p = strchr(p, ';');
  }
  return true;
}

enum body_kind body_kind_of(const char *ct) {
  if (!ct) return BODY_NONE;
  while (*ct == ' ' || *ct == '\t') ct++;
  size_t l = strcspn(ct, "; \t");
  static const char *const utf8[] = {"utf-8", "utf8", NULL};
  if (!param_is(ct, "charset", utf8)) return BODY_OTHER;
  if (l == 16 && !strncasecmp(ct, "application/json", 16)) return BODY_JSON;
  if (l > 5 && !strncasecmp(ct + l - 5, "+json", 5) && memchr(ct, '/', l)) return BODY_JSON;
  if (l == 33 && !strncasecmp(ct, "application/x-www-form-urlencoded", 33)) return BODY_FORM;
  if (l == 19 && !strncasecmp(ct, "multipart/form-data", 19)) return BODY_MULTIPART;
  return BODY_OTHER;
}

/* ------------------------------------------------------------------ JSON */

static void line_col(const char *s, size_t at, size_t *line, size_t *col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < at; i++) {
    if (s[i] == '\n') ++*line, *col = 1;
    else if (((unsigned char)s[i] & 0xC0) != 0x80) ++*col;
  }
}

static void json_error(const char *body, size_t n, size_t at, const char *what, char *msg,
                       size_t msgsz) {
  size_t line, col;
  line_col(body, at, &line, &col);
  if (at >= n) {
    serve_say(msg, msgsz, "Invalid JSON at line %zu, column %zu (byte %zu): %s", line, col, at,
        what ? what : "unexpected end of the body");
    return;
  }
  unsigned char c = (unsigned char)body[at];
  char near[8];
  if (c >= 0x20 && c < 0x7f) snprintf(near, sizeof near, "'%c'", c);
  else snprintf(near, sizeof near, "0x%02x", c);
  serve_say(msg, msgsz, "Invalid JSON at line %zu, column %zu (byte %zu): %s %s", line, col, at,
      what ? what : "unexpected", near);
}

/* cJSON turns the escape \u0000 into a NUL that would silently cut the
 * string short: refuse it. Returns its offset or SIZE_MAX. */
static size_t json_nul_escape(const char *s, size_t n) {
  bool in_str = false;
  for (size_t i = 0; i < n; i++) {
    if (!in_str) {
      in_str = s[i] == '"';
      continue;
    }
    if (s[i] == '"') in_str = false;
    else if (s[i] == '\\' && i + 1 < n) {
      if (s[i + 1] == 'u' && i + 5 < n && !memcmp(s + i + 2, "0000", 4)) return i;
      i++;
    }
  }
  return SIZE_MAX;
}

cJSON *parse_json_body(const char *body, size_t n, char *msg, size_t msgsz) {
  size_t bad = utf8_invalid_at(body, n);
  if (bad != SIZE_MAX) {
    serve_say(msg, msgsz, "Invalid request: the body is not valid UTF-8 at byte %zu", bad);
    return NULL;
  }
  size_t start = 0;
  while (start < n && strchr(" \t\r\n", body[start])) start++;
  if (start == n) {
    serve_say(msg, msgsz, "Invalid JSON: the body is empty");
    return NULL;
  }
  if ((bad = json_nul_escape(body, n)) != SIZE_MAX) {
    json_error(body, n, bad, "\\u0000 is not allowed in strings, found", msg, msgsz);
    return NULL;
  }
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(body, n, &end, 0);
  if (!root) {
    size_t at = end && end >= body && end <= body + n ? (size_t)(end - body) : 0;
    json_error(body, n, at, NULL, msg, msgsz);
    return NULL;
  }
  size_t at = (size_t)(end - body);
  while (at < n && strchr(" \t\r\n", body[at])) at++;
  if (at < n) {
    json_error(body, n, at, "data after the JSON value:", msg, msgsz);
    cJSON_Delete(root);
    return NULL;
  }
  if (!cJSON_IsObject(root)) {
    serve_say(msg, msgsz, "Invalid JSON format: the body must be a JSON object");
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

/* ------------------------------------------------------------------ fields shared */

/* Adds name=value to obj; a second value for a name turns it into an array. */
static bool add_field(cJSON *obj, const char *name, const char *value, char *msg, size_t msgsz) {
  if (cJSON_GetArraySize(obj) >= PARSE_MAX_FIELDS) {
    serve_say(msg, msgsz, "Invalid request: more than %d form fields", PARSE_MAX_FIELDS);
    return false;
  }
  cJSON *v = cJSON_CreateString(value);
  if (!v) goto oom;
  cJSON *old = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!old) {
    if (!cJSON_AddItemToObject(obj, name, v)) goto oom_v;
    return true;
  }
  if (!cJSON_IsArray(old)) {
    cJSON *arr = cJSON_CreateArray();
    if (!arr) goto oom_v;
    cJSON *first = cJSON_DetachItemViaPointer(obj, old);
    cJSON_AddItemToArray(arr, first);
    if (!cJSON_AddItemToObject(obj, name, arr)) {
      cJSON_Delete(arr);
      goto oom_v;
    }
    old = arr;
  }
  cJSON_AddItemToArray(old, v);
  return true;
oom_v:
  cJSON_Delete(v);
oom:
  serve_say(msg, msgsz, "out of memory");
  return false;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Percent-decodes s[0..n) (body offset `base`) into a new string. */
static char *url_decode(const char *s, size_t n, size_t base, const char *what, char *msg,
                        size_t msgsz) {
  char *out = malloc(n + 1);
  if (!out) {
    serve_say(msg, msgsz, "out of memory");
    return NULL;
  }
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '+') out[w++] = ' ';
    else if (s[i] != '%') out[w++] = s[i];
    else {
      int hi = i + 1 < n ? hexval(s[i + 1]) : -1, lo = i + 2 < n ? hexval(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        serve_say(msg, msgsz, "Invalid request: malformed percent escape in %s at byte %zu of the body",
            what, base + i);
        free(out);
        return NULL;
      }
      out[w++] = (char)(hi * 16 + lo);
      i += 2;
    }
  }
  out[w] = '\0';
  /* Where the decoded text goes wrong, in body bytes. */
  size_t bad = utf8_invalid_at(out, w), nul = memchr(out, 0, w) ? (size_t)((char *)memchr(out, 0, w) - out) : SIZE_MAX;
  if (bad != SIZE_MAX || nul != SIZE_MAX) {
    size_t at = bad < nul ? bad : nul, raw = 0;
    for (size_t d = 0; raw < n && d < at; d++) raw += s[raw] == '%' ? 3 : 1;
    serve_say(msg, msgsz, "Invalid request: %s %s at byte %zu of its value (byte %zu of the body)", what,
        at == nul ? "contains a NUL byte" : "is not valid UTF-8", at, base + raw);
    free(out);
    return NULL;
  }
  return out;
}

bool parse_form_into(cJSON *obj, const char *s, size_t n, char *msg, size_t msgsz) {
  for (size_t b = 0; b < n;) {
    const char *amp = memchr(s + b, '&', n - b);
    size_t e = amp ? (size_t)(amp - s) : n;
    if (e > b) {
      const char *eq = memchr(s + b, '=', e - b);
      size_t ne = eq ? (size_t)(eq - s) : e;
      char *name = url_decode(s + b, ne - b, b, "a field name", msg, msgsz);
      if (!name) return false;
      char what[80];
      snprintf(what, sizeof what, "field '%.40s'", name);
      char *value = eq ? url_decode(s + ne + 1, e - ne - 1, ne + 1, what, msg, msgsz) : strdup("");
      bool ok = value && add_field(obj, name, value, msg, msgsz);
      if (!value && !eq) serve_say(msg, msgsz, "out of memory");
      free(name);
      free(value);
      if (!ok) return false;
    }
    b = e + 1;
  }
  return true;
}

cJSON *parse_form_body(const char *body, size_t n, char *msg, size_t msgsz) {
  cJSON *obj = cJSON_CreateObject();
  if (!obj) {
    serve_say(msg, msgsz, "out of memory");
    return NULL;
  }
  if (!parse_form_into(obj, body, n, msg, msgsz)) {
    cJSON_Delete(obj);
    return NULL;
  }
  return obj;
}

/* ------------------------------------------------------------------ multipart */

/* The boundary parameter of a multipart Content-Type into out[cap]. */
static bool mp_boundary(const char *ct, char *out, size_t cap) {
  const char *p = ct;
  while ((p = strchr(p, ';'))) {
    p++;
    while (*p == ' ' || *p == '\t') p++;
    if (strncasecmp(p, "boundary=", 9)) continue;
    p += 9;
    size_t l = *p == '"' ? strcspn(++p, "\"") : strcspn(p, "; \t");
    if (l == 0 || l > 70 || l >= cap) return false; /* RFC 2046: 1 to 70 characters */
    memcpy(out, p, l);
    out[l] = '\0';
    return true;
  }
  return false;
}

/* The value of `key="…"` (or key=token) in a header line h[0..n). */
static bool mp_param(const char *h, size_t n, const char *key, char *out, size_t cap) {
  size_t kl = strlen(key);
  for (size_t i = 0; i + kl + 1 < n; i++) {
    if ((i && h[i - 1] != ';' && h[i - 1] != ' ' && h[i - 1] != '\t') || strncasecmp(h + i, key, kl) ||
        h[i + kl] != '=')
      continue;
    size_t v = i + kl + 1, e;
    if (v < n && h[v] == '"') {
      const char *q = memchr(h + v + 1, '"', n - v - 1);
      if (!q) return false;
      v++;
      e = (size_t)(q - h);
    } else {
      for (e = v; e < n && h[e] != ';' && h[e] != ' '; e++) {}
    }
    if (e - v >= cap) return false;
    memcpy(out, h + v, e - v);
    out[e - v] = '\0';
    return true;
  }
  return false;
}

/* One part's headers h[0..n): its field name; false for a file or no name. */
static bool mp_part_name(const char *h, size_t n, size_t base, char *name, size_t cap, char *msg,
                         size_t msgsz) {
  for (size_t b = 0; b < n;) {
    const char *nl = memmem(h + b, n - b, "\r\n", 2);
    size_t e = nl ? (size_t)(nl - h) : n;
    if (e - b > 20 && !strncasecmp(h + b, "content-disposition:", 20)) {
      if (memmem(h + b, e - b, "filename=", 9) || memmem(h + b, e - b, "filename*=", 10)) {
        serve_say(msg, msgsz, "Invalid request: file uploads are not accepted (part at byte %zu)", base);
        return false;
      }
      if (!mp_param(h + b, e - b, "name", name, cap) || utf8_invalid_at(name, strlen(name)) != SIZE_MAX)
        break;
      return true;
    }
    b = e + 2;
  }
  serve_say(msg, msgsz, "Invalid multipart body at byte %zu: a part without a form-data name", base);
  return false;
}

/* Parses the parts after the first delimiter line. */
static bool mp_parts(cJSON *obj, const char *body, size_t n, size_t at, const char *delim,
                     char *msg, size_t msgsz) {
  size_t dl = strlen(delim);
  for (;;) {
    /* at: just after a delimiter; "--" ends the body, CRLF starts a part. */
    if (at + 2 <= n && !memcmp(body + at, "--", 2)) return true;
    if (at + 2 > n || memcmp(body + at, "\r\n", 2)) break;
    size_t part = at += 2;
    const char *hend = memmem(body + at, n - at, "\r\n\r\n", 4);
    if (!hend) break;
    size_t hl = (size_t)(hend - (body + at)), vb = (size_t)(hend - body) + 4;
    char name[256];
    if (!mp_part_name(body + at, hl, part, name, sizeof name, msg, msgsz)) return false;
    const char *next = vb <= n ? memmem(body + vb, n - vb, delim, dl) : NULL;
    if (!next) break;
    size_t ve = (size_t)(next - body);
    size_t bad = utf8_invalid_at(body + vb, ve - vb);
    if (bad == SIZE_MAX && memchr(body + vb, 0, ve - vb)) bad = (size_t)((const char *)memchr(body + vb, 0, ve - vb) - (body + vb));
    if (bad != SIZE_MAX) {
      serve_say(msg, msgsz, "Invalid request: field '%.40s' is not valid UTF-8 (or has a NUL) at byte %zu of its value (byte %zu of the body)",
          name, bad, vb + bad);
      return false;
    }
    char *value = strndup(body + vb, ve - vb);
    bool ok = value && add_field(obj, name, value, msg, msgsz);
    if (!value) serve_say(msg, msgsz, "out of memory");
    free(value);
    if (!ok) return false;
    at = ve + dl;
  }
  serve_say(msg, msgsz, "Invalid multipart body at byte %zu: truncated or malformed part", at);
  return false;
}

cJSON *parse_multipart_body(const char *body, size_t n, const char *ct, char *msg, size_t msgsz) {
  char boundary[80], delim[90];
  if (!ct || !mp_boundary(ct, boundary, sizeof boundary)) {
    serve_say(msg, msgsz, "Invalid request: multipart/form-data without a valid boundary parameter");
    return NULL;
  }
  /* The first delimiter may start the body (no preamble). */
  snprintf(delim, sizeof delim, "--%s", boundary);
  size_t dl = strlen(delim), at;
  if (n >= dl && !memcmp(body, delim, dl)) at = dl;
  else {
    snprintf(delim, sizeof delim, "\r\n--%s", boundary);
    const char *first = memmem(body, n, delim, strlen(delim));
    if (!first) {
      serve_say(msg, msgsz, "Invalid multipart body: no '--%s' delimiter", boundary);
      return NULL;
    }
    at = (size_t)(first - body) + strlen(delim);
  }
  snprintf(delim, sizeof delim, "\r\n--%s", boundary);
  cJSON *obj = cJSON_CreateObject();
  if (!obj) {
    serve_say(msg, msgsz, "out of memory");
    return NULL;
  }
  if (!mp_parts(obj, body, n, at, delim, msg, msgsz)) {
    cJSON_Delete(obj);
    return NULL;
  }
  return obj;
}

cJSON *parse_body(const char *ct, const char *body, size_t n, int *http_status, char *msg,
                  size_t msgsz) {
  *http_status = 400;
  switch (body_kind_of(ct)) {
  case BODY_JSON: return parse_json_body(body, n, msg, msgsz);
  case BODY_FORM: return parse_form_body(body, n, msg, msgsz);
  case BODY_MULTIPART: return parse_multipart_body(body, n, ct, msg, msgsz);
  case BODY_NONE:
    if (n == 0) return cJSON_CreateObject();
    *http_status = 415;
    serve_say(msg, msgsz, "Unsupported media type: a body needs a Content-Type (application/json, "
                    "application/x-www-form-urlencoded or multipart/form-data)");
    return NULL;
  case BODY_OTHER: break;
  }
  *http_status = 415;
  serve_say(msg, msgsz, "Unsupported media type '%.80s': use application/json, "
                  "application/x-www-form-urlencoded or multipart/form-data (UTF-8)", ct);
  return NULL;
}

/* ------------------------------------------------------------------ field readers */

static const char *type_name(const cJSON *v) {
  if (cJSON_IsString(v)) return "a string";
  if (cJSON_IsNumber(v)) return "a number";
  if (cJSON_IsBool(v)) return "a boolean";
  if (cJSON_IsArray(v)) return "an array";
  if (cJSON_IsObject(v)) return "an object";
  return "something else";
}

static const cJSON *get(const cJSON *obj, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
  return v && !cJSON_IsNull(v) ? v : NULL;
}

enum field_result field_string(const cJSON *obj, const char *name, const char **out, char *msg,
                               size_t msgsz) {
  const cJSON *v = get(obj, name);
  if (!v) return FIELD_MISSING;
  if (!cJSON_IsString(v)) {
    serve_say(msg, msgsz, "Invalid request: %s must be a string, not %s", name, type_name(v));
    return FIELD_BAD;
  }
  *out = v->valuestring;
  return FIELD_OK;
}

enum field_result field_int(const cJSON *obj, const char *name, long lo, long hi, long *out,
                            char *msg, size_t msgsz) {
  const cJSON *v = get(obj, name);
  if (!v) return FIELD_MISSING;
  double d;
  if (cJSON_IsNumber(v)) {
    d = v->valuedouble;
    if (d != floor(d)) goto bad;
  } else if (cJSON_IsString(v)) {
    const char *s = v->valuestring;
    char *end;
    errno = 0;
    long l = strtol(s, &end, 10);
    if (errno || end == s || *end || isspace((unsigned char)*s)) goto bad;
    d = (double)l;
  } else {
    goto bad;
  }
  if (d < (double)lo || d > (double)hi) {
    serve_say(msg, msgsz, "Invalid request: %s must be between %ld and %ld", name, lo, hi);
    return FIELD_BAD;
  }
  *out = (long)d;
  return FIELD_OK;
bad:
  serve_say(msg, msgsz, "Invalid request: %s parameter is not a number (an integer, not %s)", name,
      cJSON_IsString(v) ? "this string" : type_name(v));
  return FIELD_BAD;
}

enum field_result field_bool(const cJSON *obj, const char *name, bool *out, char *msg,
                             size_t msgsz) {
  const cJSON *v = get(obj, name);
  if (!v) return FIELD_MISSING;
  if (cJSON_IsBool(v)) {
    *out = cJSON_IsTrue(v);
    return FIELD_OK;
  }
  if (cJSON_IsString(v)) {
    static const char *const yes[] = {"true", "1", "yes", "on"}, *const no[] = {"false", "0", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
      if (!strcasecmp(v->valuestring, yes[i])) return *out = true, FIELD_OK;
      if (!strcasecmp(v->valuestring, no[i])) return *out = false, FIELD_OK;
    }
  }
  serve_say(msg, msgsz, "Invalid request: %s must be true or false, not %s", name,
      cJSON_IsString(v) ? "this string" : type_name(v));
  return FIELD_BAD;
}

enum field_result field_strings(const cJSON *obj, const char *name, const char ***out,
                                size_t *n, bool *is_array, char *msg, size_t msgsz) {
  const cJSON *v = get(obj, name);
  *out = NULL;
  *n = 0;
  if (!v) return FIELD_MISSING;
  *is_array = cJSON_IsArray(v);
  if (cJSON_IsString(v)) {
    if (!(*out = malloc(sizeof **out))) goto oom;
    (*out)[0] = v->valuestring;
    *n = 1;
    return FIELD_OK;
  }
  if (!*is_array) {
    serve_say(msg, msgsz, "Invalid request: %s must be a string or an array of strings, not %s", name,
        type_name(v));
    return FIELD_BAD;
  }
  size_t cnt = (size_t)cJSON_GetArraySize(v), i = 0;
  if (cnt == 0) return FIELD_MISSING;
  if (!(*out = malloc(cnt * sizeof **out))) goto oom;
  for (const cJSON *e = v->child; e; e = e->next, i++) {
    if (!cJSON_IsString(e)) {
      serve_say(msg, msgsz, "Invalid request: %s[%zu] must be a string, not %s", name, i, type_name(e));
      free(*out);
      *out = NULL;
      return FIELD_BAD;
    }
    (*out)[i] = e->valuestring;
  }
  *n = cnt;
  return FIELD_OK;
oom:
  serve_say(msg, msgsz, "out of memory");
  return FIELD_BAD;
}
