/*
 * auth.h — who may ask, and how often: API keys (--api-keys FILE), token
 * buckets for the per-key and per-client rate limits (--rate-limit), and
 * CIDR ranges for --trusted-proxy, with the client address taken from
 * X-Forwarded-For only when the peer is one of them. No sockets, no HTTP:
 * each piece is a plain function the tests and the fuzzers call.
 *
 * Keys are kept only as SHA-256 digests and a presented key is compared with
 * every one of them in full (no early exit), so neither the time taken nor
 * memory holds anything a timing or a core dump could give away.
 */
#ifndef TOLK_SERVE_AUTH_H
#define TOLK_SERVE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sockaddr;

#define AUTH_KEY_MIN 8
#define AUTH_KEY_MAX 256

struct api_key {
  uint8_t digest[32];
  double rate_per_min; /* 0: --rate-limit applies */
  long max_chars;      /* 0: --max-chars applies */
};

struct keyring {
  struct api_key *keys;
  size_t n;
};

/* A key file's text: one key a line, then optionally `rate=N/min` and
 * `chars=N` separated by spaces; '#' starts a comment; blank lines are
 * skipped. Keys are AUTH_KEY_MIN..AUTH_KEY_MAX printable ASCII bytes
 * without spaces; a duplicate is an error. 0 on success; -1 with msg naming
 * the line (never the key). */
int keyring_parse(const char *text, size_t n, struct keyring *out, char *msg, size_t msgsz);
int keyring_load(const char *path, struct keyring *out, char *msg, size_t msgsz);
void keyring_free(struct keyring *k);

/* The index of the key equal to key[0..len), or -1. Takes the same time
 * whichever key matches, or none. */
int keyring_find(const struct keyring *k, const char *key, size_t len);

/* Constant-time equality of n bytes. */
bool ct_equal(const void *a, const void *b, size_t n);

/* ------------------------------------------------------------------ token buckets
 * A fixed table of `capacity` buckets keyed by a string (a client address,
 * a key's index): it never grows; when full, the least recently used
 * bucket of a probe window is taken over (its owner starts again with a
 * full bucket: eviction can only ever be lenient). Thread-safe. */
struct buckets;

struct buckets *buckets_create(size_t capacity);
void buckets_free(struct buckets *b);

/* Takes one token from id's bucket, which holds up to `rate` tokens and
 * refills at `rate` per minute. Returns 0 when allowed, else the whole
 * seconds (>= 1) until a token is back (for Retry-After). */
int buckets_take(struct buckets *b, const char *id, double rate_per_min, int64_t now_ns);

/* ------------------------------------------------------------------ addresses
 * Addresses are 16 bytes, IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d), so one
 * comparison covers both families. */
struct cidr {
  uint8_t addr[16];
  int bits; /* prefix length over the 16 bytes (an IPv4 /24 is 120) */
};

/* "10.0.0.0/8", "192.168.1.7" (= /32), "fd00::/8", "::1". */
bool cidr_parse(const char *s, struct cidr *out);
bool cidr_contains(const struct cidr *c, const uint8_t addr[16]);

/* A textual address (also "[v6]:port" and "v4:port", as X-Forwarded-For
 * entries may have them). */
bool addr_parse(const char *s, size_t n, uint8_t out[16]);
bool addr_from_sockaddr(const struct sockaddr *sa, uint8_t out[16]);
/* IPv4-mapped addresses print as dotted quads. */
void addr_format(const uint8_t a[16], char *out, size_t cap);

/* The request's client: the peer itself, unless the peer is a trusted
 * proxy; then X-Forwarded-For is read from the right, each trusted hop
 * skipped, and the first address that is not a trusted proxy is the client
 * (entries further left were written by whoever the client is, and prove
 * nothing). An unparseable entry stops the walk at the hop that added it. */
void client_addr(const uint8_t peer[16], const char *xff, const struct cidr *trusted,
                 size_t n_trusted, uint8_t out[16]);

#endif /* TOLK_SERVE_AUTH_H */
