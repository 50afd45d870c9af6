/*
 * test_serve_html.c — format=html (src/serve/html.c): which text nodes are
 * translated and how they are decoded, the round trip (no translations
 * gives back the document byte for byte; translations land exactly where
 * their text was, escaped, tags and attributes untouched), and the broken
 * documents that must be refused with the offsets in the message.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/html.h"
#include "testutil.h"

#define HAS(msg, s) CHECK_MSG(strstr((msg), (s)) != NULL, "'%s' lacks '%s'", (msg), (s))

/* Parses s and checks its texts are exactly want[0..n). */
static void texts(const char *s, const char *const *want, size_t n) {
  struct html_doc d;
  char msg[256] = "";
  int rc = html_parse(s, strlen(s), &d, msg, sizeof msg);
  CHECK_MSG(rc == 0, "%s: %s", s, msg);
  bool ok = !rc && d.n == n;
  for (size_t i = 0; ok && i < n; i++) ok = !strcmp(d.texts[i].text, want[i]);
  CHECK_MSG(ok, "texts of '%s' (%zu found)", s, d.n);
  if (!ok)
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, "    [%s]\n", d.texts[i].text);
  /* The identity round trip, whatever the document. */
  size_t len;
  char *back = html_render(s, strlen(s), &d, NULL, &len);
  CHECK(back && len == strlen(s) && !memcmp(back, s, len));
  free(back);
  html_doc_free(&d);
}

#define TEXTS(s, ...)                        \
  do {                                       \
    const char *const w[] = {__VA_ARGS__};   \
    texts(s, w, sizeof w / sizeof w[0]);     \
  } while (0)

static void broken(const char *s, const char *want) {
  struct html_doc d;
  char msg[256] = "";
  CHECK_MSG(html_parse(s, strlen(s), &d, msg, sizeof msg) == -1, "accepted '%s'", s);
  HAS(msg, want);
  CHECK(d.n == 0 && d.texts == NULL);
}

static void nodes(void) {
  TEXTS("<p>Hello <b>world</b>!</p>", "Hello", "world", "!");
  TEXTS("<!DOCTYPE html><html><head><title>A &amp; B</title><style>p{x:1}</style></head>"
        "<body><p>One.</p><script>if (a < b) {}</script></body></html>",
        "A & B", "One.");
  TEXTS("<div>  multi\n   line\ttext  </div>", "multi line text");
  TEXTS("<p>&lt;tag&gt; &quot;q&quot; &#65;&#x42; &nbsp;&copy; &bogus; &</p>", "<tag> \"q\" AB \xC2\xA9 &bogus; &");
  TEXTS("<p>keep <code>x = 1</code> <span translate=\"no\">Brand</span> <i class='a notranslate'>N</i> go</p>",
        "keep", "go");
  TEXTS("<ul><li>one<li>two</ul><p>para<p>next", "one", "two", "para", "next");
  TEXTS("<img src=\"a.png\" alt=\"x > y\"><br/>text<hr>", "text");
  TEXTS("<!-- a <b> comment --><p>x</p><![CDATA[ raw ]]>", "x");
  TEXTS("1 < 2 and 3 > 2", "1 < 2 and 3 > 2");
  TEXTS("plain text, no tags", "plain text, no tags");
  TEXTS("<span/>after", "after");
  TEXTS("<table><tr><td>a<td>b<tr><td>c</table>", "a", "b", "c");
  TEXTS("<pre>  code\n  block</pre><p>x</p>", "x");
  TEXTS("<div translate=\"no\"><p>skip <b>all</b></p></div><p>this</p>", "this");
  struct html_doc d;
  CHECK(html_parse("", 0, &d, NULL, 0) == 0 && d.n == 0);
  CHECK(html_parse("   \n ", 5, &d, NULL, 0) == 0 && d.n == 0);
}

static void render(void) {
  const char *s = "<p class=\"x\">  Hello <a href=\"/a?b=1&amp;c=2\">world</a>!\n</p>";
  struct html_doc d;
  CHECK(html_parse(s, strlen(s), &d, NULL, 0) == 0 && d.n == 3);
  const char *tr[] = {"你好 <&>", NULL, "！"};
  size_t len;
  char *out = html_render(s, strlen(s), &d, tr, &len);
  CHECK_MSG(out && !strcmp(out, "<p class=\"x\">  你好 &lt;&amp;&gt; <a href=\"/a?b=1&amp;c=2\">world</a>！\n</p>"),
            "%s", out ? out : "(null)");
  CHECK(out && len == strlen(out));
  free(out);
  html_doc_free(&d);
}

static void refused(void) {
  broken("<p>Hello <b>world</p>", "</p> at byte 17 does not match <b> opened at byte 9");
  broken("<div>never closed", "<div> opened at byte 0 is never closed");
  broken("<a href=\"x>text</a>", "the <a> tag at byte 0 is never closed");
  broken("<p>x</p><!-- open comment", "comment opened at byte 8 is never closed");
  broken("<b>x</b></i>", "</i> at byte 8 closes no open element");
  broken("<script>var a = 1;", "<script> opened at byte 0 is never closed");
  broken("<p>x</br></p>", "<br> has no end tag");
  broken("<p>x</p", "malformed end tag");
  char *deep = malloc(HTML_MAX_DEPTH * 5 + 16);
  size_t w = 0;
  for (int i = 0; i <= HTML_MAX_DEPTH; i++) memcpy(deep + w, "<div>", 5), w += 5;
  deep[w] = '\0';
  broken(deep, "nested deeper than 512");
  free(deep);
}

int main(void) {
  nodes();
  render();
  refused();
  return tu_finish("test_serve_html");
}
