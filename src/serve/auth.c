/*
 * auth.c — API keys, token buckets and trusted-proxy addresses (auth.h).
 */
#include "auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "core/sha256.h"
#include "parse.h"

/* ------------------------------------------------------------------ keys */

bool ct_equal(const void *a, const void *b, size_t n) {
  const volatile uint8_t *x = a, *y = b;
  uint8_t d = 0;
  for (size_t i = 0; i < n; i++) d |= (uint8_t)(x[i] ^ y[i]);
  return d == 0;
}

static void digest(const char *key, size_t len, uint8_t out[32]) {
  struct sha256 s;
  sha256_init(&s);
  sha256_update(&s, key, len);
  sha256_final(&s, out);
}

/* One option after a key: rate=N/min or chars=N. */
static bool key_option(const char *o, size_t n, struct api_key *k) {
  char buf[64];
  if (n >= sizeof buf) return false;
  memcpy(buf, o, n);
  buf[n] = '\0';
  char *end;
  errno = 0;
  if (!strncmp(buf, "rate=", 5)) {
    double r = strtod(buf + 5, &end);
    if (errno || end == buf + 5 || strcmp(end, "/min") || !(r > 0) || r > 1e9) return false;
    k->rate_per_min = r;
    return true;
  }
  if (!strncmp(buf, "chars=", 6)) {
    long c = strtol(buf + 6, &end, 10);
    if (errno || end == buf + 6 || *end || c <= 0) return false;
    k->max_chars = c;
    return true;
  }
  return false;
}

static int parse_line(const char *l, size_t n, size_t line_no, struct api_key *k, char *msg,
                      size_t msgsz) {
  size_t i = 0, kb, ke;
  while (i < n && (l[i] == ' ' || l[i] == '\t')) i++;
  kb = i;
  while (i < n && l[i] != ' ' && l[i] != '\t') {
    if ((unsigned char)l[i] <= 0x20 || (unsigned char)l[i] >= 0x7f) {
      serve_say(msg, msgsz, "line %zu: a key is printable ASCII without spaces", line_no);
      return -1;
    }
    i++;
  }
  ke = i;
  if (ke - kb < AUTH_KEY_MIN || ke - kb > AUTH_KEY_MAX) {
    serve_say(msg, msgsz, "line %zu: a key has %d to %d characters (this one has %zu)", line_no,
        AUTH_KEY_MIN, AUTH_KEY_MAX, ke - kb);
    return -1;
  }
  memset(k, 0, sizeof *k);
  digest(l + kb, ke - kb, k->digest);
  while (i < n) {
    while (i < n && (l[i] == ' ' || l[i] == '\t')) i++;
    size_t ob = i;
    while (i < n && l[i] != ' ' && l[i] != '\t') i++;
    if (i > ob && !key_option(l + ob, i - ob, k)) {
      serve_say(msg, msgsz, "line %zu: unknown option '%.*s' (rate=N/min or chars=N)", line_no,
          (int)(i - ob > 40 ? 40 : i - ob), l + ob);
      return -1;
    }
  }
  return 0;
}

int keyring_parse(const char *text, size_t n, struct keyring *out, char *msg, size_t msgsz) {
  memset(out, 0, sizeof *out);
  size_t cap = 0, line_no = 0;
  for (size_t b = 0; b < n;) {
    const char *nl = memchr(text + b, '\n', n - b);
    size_t e = nl ? (size_t)(nl - text) : n, le = e;
    line_no++;
    const char *hash = memchr(text + b, '#', e - b);
    if (hash) le = (size_t)(hash - text);
    while (le > b && (text[le - 1] == ' ' || text[le - 1] == '\t' || text[le - 1] == '\r')) le--;
    size_t s = b;
    while (s < le && (text[s] == ' ' || text[s] == '\t')) s++;
    b = e + 1;
    if (s == le) continue;
    if (out->n == cap) {
      cap = cap ? 2 * cap : 8;
      struct api_key *k = realloc(out->keys, cap * sizeof *k);
      if (!k) {
        serve_say(msg, msgsz, "out of memory");
        goto fail;
      }
      out->keys = k;
    }
    struct api_key *k = &out->keys[out->n];
    if (parse_line(text + s, le - s, line_no, k, msg, msgsz)) goto fail;
    for (size_t j = 0; j < out->n; j++)
      if (ct_equal(out->keys[j].digest, k->digest, 32)) {
        serve_say(msg, msgsz, "line %zu: the same key is on an earlier line", line_no);
        goto fail;
      }
    out->n++;
  }
  return 0;
fail:
  keyring_free(out);
  return -1;
}

int keyring_load(const char *path, struct keyring *out, char *msg, size_t msgsz) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    serve_say(msg, msgsz, "%s: %s", path, strerror(errno));
    return -1;
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      if (cap >= (64u << 20)) {
        fclose(f);
        free(buf);
        serve_say(msg, msgsz, "%s: larger than 64 MiB", path);
        return -1;
      }
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (!buf) {
    serve_say(msg, msgsz, "out of memory");
    return -1;
  }
  char inner[200];
  int rc = keyring_parse(buf, n, out, inner, sizeof inner);
  if (rc) serve_say(msg, msgsz, "%s: %s", path, inner);
  else if (out->n == 0) {
    serve_say(msg, msgsz, "%s: no keys", path);
    rc = -1;
  }
  /* The file held the keys in clear: do not leave them in freed memory. */
  explicit_bzero(buf, n);
  free(buf);
  return rc;
}

void keyring_free(struct keyring *k) {
  free(k->keys);
  memset(k, 0, sizeof *k);
}

int keyring_find(const struct keyring *k, const char *key, size_t len) {
  if (!k || !k->n || !key) return -1;
  uint8_t d[32];
  digest(key, len, d);
  int found = -1;
  for (size_t i = 0; i < k->n; i++) {
    /* Branch-free select: the loop runs over every key whatever matches. */
    int eq = ct_equal(k->keys[i].digest, d, 32);
    int mask = -eq;
    found = (found & ~mask) | ((int)i & mask);
  }
  return found;
}

/* ------------------------------------------------------------------ token buckets */

struct bucket {
  uint64_t hash;
  char id[64];
  double tokens;
  int64_t last_ns;
  bool used;
};

struct buckets {
  pthread_mutex_t mu;
  struct bucket *b;
  size_t mask;
  uint64_t seed;
};

#define PROBE 8

struct buckets *buckets_create(size_t capacity) {
  struct buckets *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  size_t size = 16;
  while (size < capacity) size *= 2;
  t->b = calloc(size, sizeof *t->b);
  if (!t->b) {
    free(t);
    return NULL;
  }
  t->mask = size - 1;
  /* A per-process seed: nobody can aim ids at one probe window. */
  if (getrandom(&t->seed, sizeof t->seed, 0) != (ssize_t)sizeof t->seed) t->seed = (uint64_t)(uintptr_t)t;
  pthread_mutex_init(&t->mu, NULL);
  return t;
}

void buckets_free(struct buckets *t) {
  if (!t) return;
  pthread_mutex_destroy(&t->mu);
  free(t->b);
  free(t);
}

static uint64_t fnv1a(uint64_t seed, const char *s) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
  return h;
}

int buckets_take(struct buckets *t, const char *id, double rate, int64_t now_ns) {
  if (!t || !(rate > 0)) return 0;
  uint64_t h = fnv1a(t->seed, id);
  pthread_mutex_lock(&t->mu);
  struct bucket *hit = NULL, *victim = NULL;
  for (size_t k = 0; k < PROBE && !hit; k++) {
    struct bucket *b = &t->b[(h + k) & t->mask];
    if (b->used && b->hash == h && !strncmp(b->id, id, sizeof b->id - 1)) hit = b;
    else if (!b->used) {
      if (!victim || victim->used) victim = b;
    } else if (!victim || (victim->used && b->last_ns < victim->last_ns)) {
      victim = b;
    }
  }
  if (!hit) {
    hit = victim;
    hit->used = true;
    hit->hash = h;
    snprintf(hit->id, sizeof hit->id, "%s", id);
    hit->tokens = rate;
    hit->last_ns = now_ns;
  }
  double elapsed = now_ns > hit->last_ns ? (double)(now_ns - hit->last_ns) * 1e-9 : 0;
  hit->tokens = fmin(rate, hit->tokens + elapsed * rate / 60.0);
  hit->last_ns = now_ns;
  int wait = 0;
  if (hit->tokens >= 1) hit->tokens -= 1;
  else wait = (int)ceil((1 - hit->tokens) * 60.0 / rate);
  pthread_mutex_unlock(&t->mu);
  return wait > 0 ? wait : 0;
}

/* ------------------------------------------------------------------ addresses */

static void map_v4(const void *v4, uint8_t out[16]) {
  memset(out, 0, 10);
  out[10] = out[11] = 0xff;
  memcpy(out + 12, v4, 4);
}

bool addr_parse(const char *s, size_t n, uint8_t out[16]) {
  char buf[64];
  while (n && (*s == ' ' || *s == '\t')) s++, n--;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  if (n == 0 || n >= sizeof buf) return false;
  if (s[0] == '[') { /* [v6] or [v6]:port */
    const char *close = memchr(s, ']', n);
    if (!close) return false;
    n = (size_t)(close - s) - 1;
    s++;
  }
  memcpy(buf, s, n);
  buf[n] = '\0';
  uint8_t v4[4];
  if (inet_pton(AF_INET6, buf, out) == 1) return true;
  char *colon = strchr(buf, ':');
  if (colon && !strchr(colon + 1, ':')) *colon = '\0'; /* v4:port */
  if (inet_pton(AF_INET, buf, v4) != 1) return false;
  map_v4(v4, out);
  return true;
}

bool addr_from_sockaddr(const struct sockaddr *sa, uint8_t out[16]) {
  if (!sa) return false;
  if (sa->sa_family == AF_INET) {
    map_v4(&((const struct sockaddr_in *)(const void *)sa)->sin_addr, out);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    memcpy(out, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    return true;
  }
  return false;
}

static bool is_mapped(const uint8_t a[16]) {
  static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return !memcmp(a, pre, 12);
}

void addr_format(const uint8_t a[16], char *out, size_t cap) {
  if (!inet_ntop(is_mapped(a) ? AF_INET : AF_INET6, is_mapped(a) ? a + 12 : a, out, (socklen_t)cap))
    snprintf(out, cap, "?");
}

bool cidr_parse(const char *s, struct cidr *out) {
  const char *slash = strchr(s, '/');
  size_t n = slash ? (size_t)(slash - s) : strlen(s);
  if (!addr_parse(s, n, out->addr)) return false;
  int max = is_mapped(out->addr) && !memchr(s, ':', n) ? 32 : 128;
  long bits = max;
  if (slash) {
    char *end;
    errno = 0;
    bits = strtol(slash + 1, &end, 10);
    if (errno || end == slash + 1 || *end || bits < 0 || bits > max) return false;
  }
  out->bits = (int)bits + (max == 32 ? 96 : 0);
  /* Clear the host bits so that containment is a masked compare. */
  for (int i = 0; i < 16; i++) {
    int keep = out->bits - 8 * i;
    if (keep <= 0) out->addr[i] = 0;
    else if (keep < 8) out->addr[i] &= (uint8_t)(0xff << (8 - keep));
  }
  return true;
}

bool cidr_contains(const struct cidr *c, const uint8_t a[16]) {
  for (int i = 0; i < 16; i++) {
    int keep = c->bits - 8 * i;
    if (keep <= 0) return true;
    uint8_t m = keep >= 8 ? 0xff : (uint8_t)(0xff << (8 - keep));
    if ((a[i] & m) != c->addr[i]) return false;
  }
  return true;
}

static bool trusted_addr(const uint8_t a[16], const struct cidr *t, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (cidr_contains(&t[i], a)) return true;
  return false;
}

void client_addr(const uint8_t peer[16], const char *xff, const struct cidr *trusted,
                 size_t n_trusted, uint8_t out[16]) {
  memcpy(out, peer, 16);
  if (!xff || !trusted_addr(peer, trusted, n_trusted)) return;
  size_t e = strlen(xff);
  while (e > 0) {
    size_t b = e;
    while (b > 0 && xff[b - 1] != ',') b--;
    uint8_t hop[16];
    if (!addr_parse(xff + b, e - b, hop)) return;
    memcpy(out, hop, 16);
    if (!trusted_addr(hop, trusted, n_trusted)) return;
    e = b ? b - 1 : 0;
  }
}
