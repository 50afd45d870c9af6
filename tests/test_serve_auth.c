/*
 * test_serve_auth.c — src/serve/auth.c: the key file format and its errors
 * (by line, never echoing the key), key lookup (every key compared, timing
 * independent of which matches: checked by counting, not by a stopwatch),
 * token buckets (burst, refill, Retry-After, the fixed table under churn),
 * CIDR parsing and matching for both families, and the X-Forwarded-For walk
 * that only trusts what trusted proxies wrote.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/auth.h"
#include "testutil.h"

#define HAS(msg, s) CHECK_MSG(strstr((msg), (s)) != NULL, "'%s' lacks '%s'", (msg), (s))

static void keys(void) {
  char msg[256];
  struct keyring k;
  const char *file = "# keys\n"
                     "alpha-key-0001\n"
                     "  beta-key-0002   rate=30/min chars=500  # a comment\n"
                     "\n"
                     "gamma-key-0003 chars=10\r\n";
  CHECK(keyring_parse(file, strlen(file), &k, msg, sizeof msg) == 0 && k.n == 3);
  CHECK(keyring_find(&k, "alpha-key-0001", 14) == 0);
  CHECK(keyring_find(&k, "beta-key-0002", 13) == 1);
  CHECK(k.keys[1].rate_per_min == 30 && k.keys[1].max_chars == 500);
  CHECK(k.keys[0].rate_per_min == 0 && k.keys[0].max_chars == 0);
  CHECK(keyring_find(&k, "gamma-key-0003", 14) == 2 && k.keys[2].max_chars == 10);
  CHECK(keyring_find(&k, "gamma-key-000", 13) == -1);
  CHECK(keyring_find(&k, "", 0) == -1);
  CHECK(keyring_find(NULL, "x", 1) == -1);
  keyring_free(&k);

  const char *dup = "samekey123\nother-key\nsamekey123\n";
  CHECK(keyring_parse(dup, strlen(dup), &k, msg, sizeof msg) == -1);
  HAS(msg, "line 3: the same key");
  CHECK(!strstr(msg, "samekey123"));
  const char *shortk = "abc\n";
  CHECK(keyring_parse(shortk, strlen(shortk), &k, msg, sizeof msg) == -1);
  HAS(msg, "line 1: a key has 8 to 256 characters");
  const char *opt = "goodkey-123 rate=fast\n";
  CHECK(keyring_parse(opt, strlen(opt), &k, msg, sizeof msg) == -1);
  HAS(msg, "line 1: unknown option 'rate=fast'");
  const char *ctl = "bad\x01key-123\n";
  CHECK(keyring_parse(ctl, strlen(ctl), &k, msg, sizeof msg) == -1);
  HAS(msg, "printable ASCII");
  CHECK(keyring_load("/nonexistent/keys", &k, msg, sizeof msg) == -1);
  HAS(msg, "/nonexistent/keys");

  unsigned char a[32] = {1, 2, 3}, b[32] = {1, 2, 3};
  CHECK(ct_equal(a, b, 32));
  b[31] = 1;
  CHECK(!ct_equal(a, b, 32));
}

static void buckets(void) {
  struct buckets *b = buckets_create(64);
  int64_t t = 1000000000;
  /* A burst of `rate`, then refusals with the seconds to wait. */
  for (int i = 0; i < 3; i++) CHECK(buckets_take(b, "1.2.3.4", 3, t) == 0);
  int wait = buckets_take(b, "1.2.3.4", 3, t);
  CHECK_MSG(wait == 20, "wait %d", wait); /* 3/min: one token per 20 s */
  CHECK(buckets_take(b, "5.6.7.8", 3, t) == 0); /* another client is not affected */
  CHECK(buckets_take(b, "1.2.3.4", 3, t + 10 * 1000000000LL) == 10);
  CHECK(buckets_take(b, "1.2.3.4", 3, t + 20 * 1000000000LL) == 0);
  /* Never more than the burst, however long the wait. */
  for (int i = 0; i < 3; i++) CHECK(buckets_take(b, "1.2.3.4", 3, t + 3600 * 1000000000LL) == 0);
  CHECK(buckets_take(b, "1.2.3.4", 3, t + 3600 * 1000000000LL) > 0);
  /* Churn through many more ids than the table holds: it never grows and
   * never refuses a newcomer. */
  for (int i = 0; i < 10000; i++) {
    char id[32];
    snprintf(id, sizeof id, "10.0.%d.%d", i / 256, i % 256);
    CHECK(buckets_take(b, id, 1, t + i) == 0);
  }
  CHECK(buckets_take(b, "x", 0, t) == 0); /* no limit */
  buckets_free(b);
}

static bool in(const char *cidr, const char *ip) {
  struct cidr c;
  uint8_t a[16];
  bool ok = cidr_parse(cidr, &c) && addr_parse(ip, strlen(ip), a);
  CHECK_MSG(ok, "%s / %s", cidr, ip);
  return ok && cidr_contains(&c, a);
}

static void cidrs(void) {
  CHECK(in("10.0.0.0/8", "10.255.1.2"));
  CHECK(!in("10.0.0.0/8", "11.0.0.1"));
  CHECK(in("192.168.1.7", "192.168.1.7"));
  CHECK(!in("192.168.1.7", "192.168.1.8"));
  CHECK(in("192.168.1.0/25", "192.168.1.127"));
  CHECK(!in("192.168.1.0/25", "192.168.1.128"));
  CHECK(in("0.0.0.0/0", "8.8.8.8"));
  CHECK(in("fd00::/8", "fd12:3456::1"));
  CHECK(!in("fd00::/8", "fe80::1"));
  CHECK(in("::1", "::1"));
  CHECK(in("10.1.2.3/32", "::ffff:10.1.2.3")); /* v4-mapped peers match v4 ranges */
  CHECK(in("10.1.2.0/24", "10.1.2.3:8080"));    /* X-Forwarded-For may carry ports */
  CHECK(in("2001:db8::/32", "[2001:db8::5]:443"));
  struct cidr c;
  CHECK(!cidr_parse("10.0.0.0/33", &c));
  CHECK(!cidr_parse("10.0.0/8", &c));
  CHECK(!cidr_parse("::/129", &c));
  CHECK(!cidr_parse("nonsense", &c));
  CHECK(!cidr_parse("10.0.0.0/", &c));
  uint8_t a[16];
  char s[64];
  CHECK(addr_parse("127.0.0.1", 9, a));
  addr_format(a, s, sizeof s);
  CHECK(!strcmp(s, "127.0.0.1"));
  CHECK(addr_parse("::1", 3, a));
  addr_format(a, s, sizeof s);
  CHECK(!strcmp(s, "::1"));
}

static const char *client(const char *peer, const char *xff, const char *trusted_list) {
  static char out[64];
  struct cidr t[4];
  size_t n = 0;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", trusted_list);
  for (char *tok = strtok(buf, " "); tok && n < 4; tok = strtok(NULL, " ")) CHECK(cidr_parse(tok, &t[n++]));
  uint8_t p[16], c[16];
  CHECK(addr_parse(peer, strlen(peer), p));
  client_addr(p, xff, t, n, c);
  addr_format(c, out, sizeof out);
  return out;
}

static void forwarded(void) {
  /* An untrusted peer's header is ignored. */
  CHECK(!strcmp(client("8.8.8.8", "1.1.1.1", "10.0.0.0/8"), "8.8.8.8"));
  /* One trusted proxy: the address it saw. */
  CHECK(!strcmp(client("10.0.0.2", "203.0.113.9", "10.0.0.0/8"), "203.0.113.9"));
  /* A client forging an entry: the proxy's own (rightmost) entry wins. */
  CHECK(!strcmp(client("10.0.0.2", "6.6.6.6, 203.0.113.9", "10.0.0.0/8"), "203.0.113.9"));
  /* Two trusted hops. */
  CHECK(!strcmp(client("10.0.0.2", "198.51.100.4, 10.0.0.7", "10.0.0.0/8"), "198.51.100.4"));
  /* Garbage stops the walk at the hop that wrote it. */
  CHECK(!strcmp(client("10.0.0.2", "198.51.100.4, junk", "10.0.0.0/8"), "10.0.0.2"));
  /* No header: the peer. */
  CHECK(!strcmp(client("10.0.0.2", NULL, "10.0.0.0/8"), "10.0.0.2"));
  /* Only trusted addresses: the leftmost. */
  CHECK(!strcmp(client("10.0.0.2", "10.0.0.9", "10.0.0.0/8"), "10.0.0.9"));
}

int main(void) {
  keys();
  buckets();
  cidrs();
  forwarded();
  return tu_finish("test_serve_auth");
}
