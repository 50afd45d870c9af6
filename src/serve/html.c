/*
 * html.c — text nodes out of an HTML document and translations back in (see
 * html.h). A single forward scan with a stack of open elements: markup is
 * never rewritten, only the text between it, so rendering is copying the
 * gaps and substituting the texts.
 */
#include "html.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct open_el {
  char name[16]; /* lower case; longer names are cut (still matched consistently) */
  size_t at;     /* byte offset of its start tag */
  bool skip;     /* its content is not translated */
};

struct scan {
  const char *s;
  size_t n, i;
  struct open_el stack[HTML_MAX_DEPTH];
  size_t depth;
  struct html_doc *doc;
  char *msg;
  size_t msgsz;
};

static int fail(struct scan *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct scan *sc, const char *fmt, ...) {
  if (sc->msg && sc->msgsz) {
    va_list ap;
    va_start(ap, fmt);
    int k = snprintf(sc->msg, sc->msgsz, "Invalid HTML: ");
    vsnprintf(sc->msg + k, sc->msgsz - (size_t)k, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static bool in_list(const char *name, const char *const *list) {
  for (; *list; list++)
    if (!strcmp(name, *list)) return true;
  return false;
}

static const char *const void_elements[] = {"area", "base", "br", "col", "embed", "hr", "img", "input",
                                            "keygen", "link", "meta", "param", "source", "track", "wbr", NULL};
/* Elements whose end tag HTML lets the author leave out. */
static const char *const optional_end[] = {"p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th",
                                           "tbody", "thead", "tfoot", "colgroup", "caption", "rb", "rt",
                                           "rp", "rtc", "html", "head", "body", NULL};
static const char *const raw_text[] = {"script", "style", "textarea", "title", "xmp", NULL};
static const char *const no_translate[] = {"script", "style", "textarea", "pre", "code", "kbd", "samp",
                                           "var", "xmp", NULL};

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

/* ------------------------------------------------------------------ entities */

static size_t put_utf8(char *o, unsigned long cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xC0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

static const struct {
  const char *name;
  unsigned cp;
} named[] = {{"amp", '&'},       {"lt", '<'},        {"gt", '>'},        {"quot", '"'},
             {"apos", '\''},     {"nbsp", ' '},      {"copy", 0xA9},     {"reg", 0xAE},
             {"trade", 0x2122},  {"hellip", 0x2026}, {"mdash", 0x2014},  {"ndash", 0x2013},
             {"lsquo", 0x2018},  {"rsquo", 0x2019},  {"ldquo", 0x201C},  {"rdquo", 0x201D},
             {"laquo", 0xAB},    {"raquo", 0xBB},    {"euro", 0x20AC},   {"pound", 0xA3},
             {"yen", 0xA5},      {"cent", 0xA2},     {"sect", 0xA7},     {"deg", 0xB0},
             {"middot", 0xB7},   {"bull", 0x2022},   {"times", 0xD7},    {"divide", 0xF7}};

/* Decodes the entity at s[0..left) (s[0] == '&') into o; returns the bytes
 * consumed (0: not an entity, the '&' is literal). */
static size_t entity(const char *s, size_t left, char *o, size_t *w) {
  size_t e = 1;
  while (e < left && e < 12 && s[e] != ';' && (isalnum((unsigned char)s[e]) || s[e] == '#')) e++;
  if (e >= left || s[e] != ';' || e < 2) return 0;
  if (s[1] == '#') {
    bool hex = e > 2 && (s[2] == 'x' || s[2] == 'X');
    size_t d = hex ? 3 : 2;
    if (d >= e) return 0;
    unsigned long cp = 0;
    for (size_t k = d; k < e; k++) {
      int v = isdigit((unsigned char)s[k]) ? s[k] - '0'
              : hex && isxdigit((unsigned char)s[k]) ? (tolower((unsigned char)s[k]) - 'a' + 10) : -1;
      if (v < 0) return 0;
      cp = cp * (hex ? 16 : 10) + (unsigned long)v;
      if (cp > 0x10FFFF) cp = 0x110000;
    }
    *w += put_utf8(o + *w, cp);
    return e + 1;
  }
  for (size_t k = 0; k < sizeof named / sizeof named[0]; k++)
    if (strlen(named[k].name) == e - 1 && !memcmp(s + 1, named[k].name, e - 1)) {
      *w += put_utf8(o + *w, named[k].cp);
      return e + 1;
    }
  return 0;
}

/* Records s[b..e) as a text node when it has more than whitespace. */
static int add_text(struct scan *sc, size_t b, size_t e) {
  size_t lead = 0, trail = 0;
  while (b + lead < e && is_ws(sc->s[b + lead])) lead++;
  if (b + lead == e) return 0;
  while (is_ws(sc->s[e - 1 - trail])) trail++;
  /* Decoding never grows text: an entity is at least as long as its UTF-8. */
  char *t = malloc(e - b + 1);
  if (!t) return fail(sc, "out of memory");
  size_t w = 0;
  bool space = false;
  for (size_t i = b + lead; i < e - trail;) {
    if (is_ws(sc->s[i])) {
      space = true;
      i++;
      continue;
    }
    char ent[4];
    size_t el = 0, used = sc->s[i] == '&' ? entity(sc->s + i, e - trail - i, ent, &el) : 0;
    if (used && el == 1 && ent[0] == ' ') { /* &nbsp; is whitespace to translation */
      space = true;
      i += used;
      continue;
    }
    if (space && w) t[w++] = ' ';
    space = false;
    if (used) {
      memcpy(t + w, ent, el);
      w += el;
      i += used;
    } else {
      t[w++] = sc->s[i++];
    }
  }
  t[w] = '\0';
  struct html_doc *d = sc->doc;
  if (d->n == d->cap) {
    size_t cap = d->cap ? 2 * d->cap : 16;
    struct html_text *nt = realloc(d->texts, cap * sizeof *nt);
    if (!nt) {
      free(t);
      return fail(sc, "out of memory");
    }
    d->texts = nt;
    d->cap = cap;
  }
  d->texts[d->n++] = (struct html_text){b, e, lead, trail, t};
  return 0;
}

/* ------------------------------------------------------------------ tags */

/* Reads a tag name at s[i..) into name (lower case, cut at 15 bytes). */
static size_t tag_name(const struct scan *sc, size_t i, char name[16]) {
  size_t b = i, k = 0;
  while (i < sc->n && (isalnum((unsigned char)sc->s[i]) || sc->s[i] == '-' || sc->s[i] == ':' ||
                       sc->s[i] == '_' || sc->s[i] == '.')) {
    if (k < 15) name[k++] = (char)tolower((unsigned char)sc->s[i]);
    i++;
  }
  name[k] = '\0';
  return i - b;
}

/* Whether the attribute text a[0..n) marks its element as not translated. */
static bool marks_no_translate(const char *a, size_t n) {
  for (size_t i = 0; i + 9 <= n; i++) {
    if (strncasecmp(a + i, "translate", 9) || (i && !is_ws(a[i - 1]))) continue;
    size_t j = i + 9;
    while (j < n && is_ws(a[j])) j++;
    if (j >= n || a[j] != '=') continue;
    for (j++; j < n && (is_ws(a[j]) || a[j] == '"' || a[j] == '\''); j++) {}
    if (j + 2 <= n && !strncasecmp(a + j, "no", 2) && (j + 2 == n || !isalnum((unsigned char)a[j + 2])))
      return true;
  }
  for (size_t i = 0; i + 11 <= n; i++)
    if (!strncasecmp(a + i, "notranslate", 11)) return true;
  return false;
}

/* The end of a start tag beginning at `lt`: the index after its '>', with
 * quoted attribute values skipped. 0 when it never ends. */
static size_t tag_end(const struct scan *sc, size_t i, size_t lt) {
  (void)lt;
  while (i < sc->n) {
    char c = sc->s[i];
    if (c == '>') return i + 1;
    if (c == '"' || c == '\'') {
      const char *q = memchr(sc->s + i + 1, c, sc->n - i - 1);
      if (!q) return 0;
      i = (size_t)(q - sc->s) + 1;
      continue;
    }
    i++;
  }
  return 0;
}

/* A raw-text element's content runs to "</name" + (space, / or >). */
static int raw_content(struct scan *sc, const char *name, size_t open_at, bool translate) {
  size_t nl = strlen(name);
  for (size_t i = sc->i; i + 2 + nl <= sc->n; i++) {
    if (sc->s[i] != '<' || sc->s[i + 1] != '/' || strncasecmp(sc->s + i + 2, name, nl)) continue;
    size_t j = i + 2 + nl;
    if (j < sc->n && !is_ws(sc->s[j]) && sc->s[j] != '>' && sc->s[j] != '/') continue;
    if (translate && add_text(sc, sc->i, i)) return -1;
    const char *gt = memchr(sc->s + j, '>', sc->n - j);
    if (!gt) return fail(sc, "unterminated </%s> at byte %zu", name, i);
    sc->i = (size_t)(gt - sc->s) + 1;
    return 0;
  }
  return fail(sc, "<%s> opened at byte %zu is never closed", name, open_at);
}

static int start_tag(struct scan *sc) {
  size_t lt = sc->i;
  char name[16];
  size_t nl = tag_name(sc, lt + 1, name);
  size_t end = tag_end(sc, lt + 1 + nl, lt);
  if (!end) return fail(sc, "the <%s> tag at byte %zu is never closed (missing '>' or a quote)", name, lt);
  bool self_closing = end >= 2 && sc->s[end - 2] == '/';
  bool parent_skip = sc->depth && sc->stack[sc->depth - 1].skip;
  bool skip = parent_skip || in_list(name, no_translate) ||
              marks_no_translate(sc->s + lt + 1 + nl, end - lt - 1 - nl);
  sc->i = end;
  if (in_list(name, void_elements)) return 0;
  if (in_list(name, raw_text)) return raw_content(sc, name, lt, !skip && !strcmp(name, "title"));
  if (self_closing) return 0; /* <span/>: XHTML style, taken as closed */
  if (sc->depth == HTML_MAX_DEPTH)
    return fail(sc, "elements nested deeper than %d at byte %zu", HTML_MAX_DEPTH, lt);
  struct open_el *el = &sc->stack[sc->depth++];
  memcpy(el->name, name, sizeof el->name);
  el->at = lt;
  el->skip = skip;
  return 0;
}

static int end_tag(struct scan *sc) {
  size_t lt = sc->i;
  char name[16];
  size_t i = lt + 2 + tag_name(sc, lt + 2, name);
  while (i < sc->n && is_ws(sc->s[i])) i++;
  if (i >= sc->n || sc->s[i] != '>') return fail(sc, "malformed end tag </%s at byte %zu", name, lt);
  sc->i = i + 1;
  if (in_list(name, void_elements)) return fail(sc, "</%s> at byte %zu: <%s> has no end tag", name, lt, name);
  size_t k = sc->depth;
  while (k > 0 && strcmp(sc->stack[k - 1].name, name)) k--;
  if (k == 0) {
    if (in_list(name, optional_end)) return 0; /* e.g. </p> after an implied close */
    return fail(sc, "</%s> at byte %zu closes no open element", name, lt);
  }
  for (size_t j = k; j < sc->depth; j++)
    if (!in_list(sc->stack[j].name, optional_end))
      return fail(sc, "</%s> at byte %zu does not match <%s> opened at byte %zu", name, lt,
                  sc->stack[sc->depth - 1].name, sc->stack[sc->depth - 1].at);
  sc->depth = k - 1;
  return 0;
}

/* Comments, <!DOCTYPE>, <![CDATA[…]]> and <?…?>: markup to copy. */
static int declaration(struct scan *sc) {
  size_t lt = sc->i;
  const char *close = ">", *what = "declaration";
  size_t from = lt + 2;
  if (sc->n - lt >= 4 && !memcmp(sc->s + lt, "<!--", 4)) close = "-->", what = "comment";
  else if (sc->n - lt >= 9 && !memcmp(sc->s + lt, "<![CDATA[", 9)) close = "]]>", what = "CDATA section";
  const char *e = from <= sc->n ? memmem(sc->s + from, sc->n - from, close, strlen(close)) : NULL;
  if (!e) return fail(sc, "the %s opened at byte %zu is never closed", what, lt);
  sc->i = (size_t)(e - sc->s) + strlen(close);
  return 0;
}

int html_parse(const char *s, size_t n, struct html_doc *doc, char *msg, size_t msgsz) {
  memset(doc, 0, sizeof *doc);
  struct scan *sc = calloc(1, sizeof *sc);
  if (!sc) {
    if (msg && msgsz) snprintf(msg, msgsz, "out of memory");
    return -1;
  }
  *sc = (struct scan){.s = s, .n = n, .doc = doc, .msg = msg, .msgsz = msgsz};
  size_t text = 0;
  int rc = 0;
  while (!rc && sc->i < n) {
    size_t i = sc->i;
    char c1 = i + 1 < n ? s[i + 1] : 0;
    bool markup = s[i] == '<' && (isalpha((unsigned char)c1) || c1 == '!' || c1 == '?' ||
                                  (c1 == '/' && i + 2 < n && isalpha((unsigned char)s[i + 2])));
    if (!markup) {
      sc->i++;
      continue;
    }
    if (!(sc->depth && sc->stack[sc->depth - 1].skip)) rc = add_text(sc, text, i);
    if (!rc) rc = c1 == '/' ? end_tag(sc) : c1 == '!' || c1 == '?' ? declaration(sc) : start_tag(sc);
    text = sc->i;
  }
  if (!rc && !(sc->depth && sc->stack[sc->depth - 1].skip)) rc = add_text(sc, text, n);
  for (size_t k = sc->depth; !rc && k > 0; k--)
    if (!in_list(sc->stack[k - 1].name, optional_end))
      rc = fail(sc, "<%s> opened at byte %zu is never closed", sc->stack[k - 1].name, sc->stack[k - 1].at);
  free(sc);
  if (rc) html_doc_free(doc);
  return rc;
}

/* ------------------------------------------------------------------ render */

struct buf {
  char *p;
  size_t n, cap;
  bool oom;
};

static void put(struct buf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

static void put_escaped(struct buf *b, const char *s) {
  for (const char *p = s; *p; p++) {
    if (*p == '&') put(b, "&amp;", 5);
    else if (*p == '<') put(b, "&lt;", 4);
    else if (*p == '>') put(b, "&gt;", 4);
    else put(b, p, 1);
  }
}

char *html_render(const char *s, size_t n, const struct html_doc *doc,
                  const char *const *translations, size_t *out_len) {
  struct buf b = {0};
  size_t at = 0;
  for (size_t i = 0; i < doc->n; i++) {
    const struct html_text *t = &doc->texts[i];
    const char *tr = translations ? translations[i] : NULL;
    if (!tr) continue;
    put(&b, s + at, t->begin + t->lead - at);
    put_escaped(&b, tr);
    at = t->end - t->trail;
  }
  put(&b, s + at, n - at);
  if (!b.p && !b.oom) put(&b, "", 0);
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  if (out_len) *out_len = b.n;
  return b.p;
}

void html_doc_free(struct html_doc *doc) {
  for (size_t i = 0; i < doc->n; i++) free(doc->texts[i].text);
  free(doc->texts);
  memset(doc, 0, sizeof *doc);
}
