/*
 * html.h — format=html (LibreTranslate) and tag_handling=html (DeepL): the
 * text nodes of a document are found, decoded and translated; everything
 * else — tags, attributes, comments, entities outside text, scripts, styles
 * — is copied back byte for byte. No sockets, no model: html_parse gives the
 * texts, the caller translates them, html_render puts them back.
 *
 * Strict enough to refuse what cannot be put back faithfully: an unterminated
 * tag, comment or quoted attribute, an end tag that closes something other
 * than the element open (beyond the elements HTML lets end implicitly: p,
 * li, td, tr, option, …), an element left open at the end, nesting past
 * HTML_MAX_DEPTH. The message names the byte offsets involved.
 *
 * Not translated: whitespace-only text, <script>, <style>, <textarea>, <pre>,
 * <code>, <kbd>, <samp>, <var>, and any element (with its content) marked
 * translate="no" or class="notranslate", as browsers' page translators do.
 * Each text node is translated on its own, so "Hello <b>world</b>!" is three
 * texts: tags stay exactly where they were, at some cost in fluency.
 */
#ifndef TOLK_SERVE_HTML_H
#define TOLK_SERVE_HTML_H

#include <stddef.h>

#define HTML_MAX_DEPTH 512

struct html_text {
  size_t begin, end;   /* the text node's bytes in the source */
  size_t lead, trail;  /* leading / trailing whitespace bytes, kept as they are */
  char *text;          /* entities decoded, inner whitespace runs as one space */
};

struct html_doc {
  struct html_text *texts;
  size_t n, cap;
};

/* Finds the translatable text nodes of s[0..n). 0 on success; -1 with msg
 * set for a broken document (doc is then empty). */
int html_parse(const char *s, size_t n, struct html_doc *doc, char *msg, size_t msgsz);

/* The document with text i replaced by translations[i] (escaped: & < >),
 * its surrounding whitespace kept. translations NULL, or a NULL entry,
 * keeps the original bytes, so html_render(s, n, doc, NULL) == s. A new
 * NUL-terminated string (*out_len bytes) the caller frees; NULL when out of
 * memory. */
char *html_render(const char *s, size_t n, const struct html_doc *doc,
                  const char *const *translations, size_t *out_len);

void html_doc_free(struct html_doc *doc);

#endif /* TOLK_SERVE_HTML_H */
