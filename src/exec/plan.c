/*
 * plan.c — where intermediate buffers come from (see exec.h for the scheme):
 * the recording allocator, the replaying allocator, the offset assignment
 * that turns a recorded trace into an arena layout, and the per-session
 * cache of plans keyed by input signature.
 *
 * A trace is a sequence of 64-bit events: node start (its uid), allocation
 * (its rounded size) and free (the allocation's number). Replay compares
 * each event with the recorded one — one load and compare — and serves
 * allocation number k from offsets[k] while they agree.
 */
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/* A kept buffer is poisoned while it waits on its list, so that under
 * AddressSanitizer a use after its exec_free is still reported. */
#if defined(__SANITIZE_ADDRESS__)
#define KEPT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KEPT_ASAN 1
#endif
#endif
#ifdef KEPT_ASAN
#include <sanitizer/asan_interface.h>
#define KEPT_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define KEPT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define KEPT_POISON(p, n) ((void)(p), (void)(n))
#define KEPT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define EV_NODE (UINT64_C(1) << 62)
#define EV_ALLOC (UINT64_C(2) << 62)
#define EV_FREE (UINT64_C(3) << 62)
#define EV_PAYLOAD (~(UINT64_C(3) << 62))

enum {
  ALIGN = 64,
  MAX_EVENTS = 1 << 21,  /* longer runs (long Loops) are not planned */
  MAX_PLANNED = 1 << 14  /* allocations: placement is quadratic in them */
};

static _Alignas(64) unsigned char zero_area[64];

_Static_assert(EXEC_SMALL_MAX % ALIGN == 0 &&
                   sizeof(((struct exec_run *)0)->small_free) == EXEC_SMALL_MAX / ALIGN * sizeof(void *),
               "a small-buffer list per granule count");

void *exec_zero_area(void) { return zero_area; }

/* Appends an event while recording; false when the trace is full, after
 * which the run continues from the heap without a plan. */
static bool record(struct exec_run *r, uint64_t ev) {
  if (r->tick == r->cap_events) {
    if (r->cap_events >= MAX_EVENTS) {
      r->rec_overflow = true;
      r->mode = RUN_HEAP;
      return false;
    }
    size_t nc = r->cap_events ? r->cap_events * 2 : 4096;
    uint64_t *ne = realloc(r->events, nc * sizeof *ne);
    if (!ne) {
      r->rec_overflow = true;
      r->mode = RUN_HEAP;
      return false;
    }
    r->events = ne;
    r->cap_events = nc;
  }
  r->events[r->tick++] = ev;
  return true;
}

/* Compares an event with the plan; on the first mismatch the run leaves
 * the plan for good. */
static bool replay(struct exec_run *r, uint64_t ev) {
  const struct plan *p = r->plan;
  if (r->tick < p->n_events && p->events[r->tick] == ev) {
    r->tick++;
    return true;
  }
  r->diverged = true;
  r->mode = RUN_HEAP;
  return false;
}

void exec_event_node(struct exec_run *r, uint32_t uid) {
  if (r->mode == RUN_RECORD)
    record(r, EV_NODE | uid);
  else if (r->mode == RUN_REPLAY)
    replay(r, EV_NODE | uid);
}

/* Pops a buffer of `rounded` bytes off the list at head, or NULL. */
static void *small_pop(struct exec_run *r, void **head, size_t rounded) {
  void *p = *head;
  if (p) {
    KEPT_UNPOISON(p, rounded);
    *head = *(void **)p;
    r->small_bytes -= rounded;
  }
  return p;
}

/* A freed small heap buffer of `rounded` bytes, or NULL. posix_memalign
 * and free of ~900 buffers, half of them one granule, took a twentieth of
 * a batch-1 int8 decoder step (perf, Zen 2). */
static void *small_take(struct exec_run *r, size_t rounded) {
  if (rounded > EXEC_SMALL_MAX) return NULL;
  size_t c = rounded / ALIGN - 1;
  void *p = small_pop(r, &r->small_free[c], rounded);
  return p ? p : small_pop(r, &r->small_prev[c], rounded);
}

/* Keeps a heap buffer for small_take; false when it is not small or the
 * lists hold EXEC_SMALL_KEEP bytes already. */
static bool small_keep(struct exec_run *r, void *p, size_t rounded) {
  if (rounded > EXEC_SMALL_MAX || r->small_bytes + rounded > EXEC_SMALL_KEEP) return false;
  void **head = &r->small_free[rounded / ALIGN - 1];
  *(void **)p = *head;
  *head = p;
  r->small_bytes += rounded;
  KEPT_POISON(p, rounded);
  return true;
}

static void small_free_list(struct exec_run *r, void **head, size_t rounded) {
  while (*head) free(small_pop(r, head, rounded));
}

/* At the end of a run from the heap, what the heap run before left and
 * this one did not take is freed; what this run freed waits for the next.
 * A decoder's step allocates sizes that follow the sequence length, so
 * buffers of each length a step once had would otherwise stay kept up to
 * EXEC_SMALL_KEEP for every run context: a server's live heap crept up for
 * the length of a soak while the lists filled with sizes no later step
 * asked for. */
static void small_age(struct exec_run *r) {
  for (size_t c = 0; c < sizeof r->small_free / sizeof *r->small_free; c++) {
    small_free_list(r, &r->small_prev[c], (c + 1) * ALIGN);
    r->small_prev[c] = r->small_free[c];
    r->small_free[c] = NULL;
  }
}

void exec_small_release(struct exec_run *r) {
  for (size_t c = 0; c < sizeof r->small_free / sizeof *r->small_free; c++) {
    small_free_list(r, &r->small_free[c], (c + 1) * ALIGN);
    small_free_list(r, &r->small_prev[c], (c + 1) * ALIGN);
  }
}

bool exec_alloc(struct exec_run *r, size_t bytes, struct xbuf *b) {
  memset(b, 0, sizeof *b);
  if (bytes == 0) {
    b->data = zero_area;
    return true;
  }
  size_t rounded;
  if (!tolk_add_size(bytes, ALIGN - 1, &rounded) || rounded >= (SIZE_MAX >> 2)) {
    tolk_fail(r->err, TOLK_ERR_LIMIT, "buffer of %zu bytes is too large", bytes);
    return false;
  }
  rounded &= ~(size_t)(ALIGN - 1);
  uint64_t limit = r->s->params.memory_limit;
  if (limit && (rounded > limit || r->live > limit - rounded)) {
    tolk_fail(r->err, TOLK_ERR_LIMIT,
              "a buffer of %zu bytes would take intermediate memory past the limit of "
              "%llu bytes (%llu live)",
              bytes, (unsigned long long)limit, (unsigned long long)r->live);
    return false;
  }
  uint64_t ev = EV_ALLOC | (uint64_t)rounded;
  if (r->mode == RUN_REPLAY && replay(r, ev)) {
    b->idx = r->n_allocs++;
    b->data = r->arena + r->plan->offsets[b->idx];
    b->traced = 1;
  } else {
    if (r->mode == RUN_RECORD && r->n_allocs < MAX_PLANNED && record(r, ev)) {
      if (r->n_allocs == r->cap_recs) {
        size_t nc = r->cap_recs ? r->cap_recs * 2 : 1024;
        struct rec_alloc *nr = realloc(r->recs, nc * sizeof *nr);
        if (!nr) {
          r->rec_overflow = true;
          r->mode = RUN_HEAP;
          goto heap;
        }
        r->recs = nr;
        r->cap_recs = nc;
      }
      b->idx = r->n_allocs++;
      r->recs[b->idx].bytes = rounded;
      r->recs[b->idx].born = r->tick - 1;
      r->recs[b->idx].died = UINT64_MAX;
      b->traced = 1;
    } else if (r->mode == RUN_RECORD) {
      r->rec_overflow = true;
      r->mode = RUN_HEAP;
    }
  heap:
    if (!(b->data = small_take(r, rounded)) && posix_memalign(&b->data, ALIGN, rounded)) {
      b->data = NULL;
      b->traced = 0;
      tolk_fail(r->err, TOLK_ERR_NO_MEMORY, "out of memory for a buffer of %zu bytes", bytes);
      return false;
    }
    b->heap = 1;
    r->heap_bytes += rounded;
  }
  b->bytes = rounded;
  r->live += rounded;
  if (r->live > r->peak) r->peak = r->live;
  return true;
}

void exec_free(struct exec_run *r, struct xbuf *b) {
  if (!b->data || !b->bytes) {
    memset(b, 0, sizeof *b);
    return;
  }
  if (b->traced) {
    uint64_t ev = EV_FREE | b->idx;
    if (r->mode == RUN_RECORD) {
      if (record(r, ev)) r->recs[b->idx].died = r->tick - 1;
    } else if (r->mode == RUN_REPLAY) {
      replay(r, ev);
    }
  }
  if (b->heap && !small_keep(r, b->data, b->bytes)) free(b->data);
  r->live -= b->bytes;
  memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------ placement */

static const struct rec_alloc *sort_recs;

static int by_size_desc(const void *a, const void *b) {
  const struct rec_alloc *x = &sort_recs[*(const uint32_t *)a];
  const struct rec_alloc *y = &sort_recs[*(const uint32_t *)b];
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  if (x->born != y->born) return x->born < y->born ? -1 : 1;
  return 0;
}

static pthread_mutex_t sort_mu = PTHREAD_MUTEX_INITIALIZER;

/* Where a buffer must not go: a placed buffer live at the same time. */
struct span {
  uint64_t off, end;
};

/* The placed buffers whose lives touch a stretch of PLACE_TICKS trace ticks. */
enum { PLACE_TICKS = 64 };
struct bucket {
  uint32_t *ids;
  uint32_t n, cap;
};

/* The buckets [*first, *last] a life spans. A life of no ticks stands at its
 * birth: the overlap test below counts it live there. */
static void life_buckets(const struct rec_alloc *b, size_t *first, size_t *last) {
  *first = b->born / PLACE_TICKS;
  *last = (b->died > b->born ? b->died - 1 : b->born) / PLACE_TICKS;
}

static bool bucket_add(struct bucket *bk, uint32_t id) {
  if (bk->n == bk->cap) {
    uint32_t nc = bk->cap ? 2 * bk->cap : 8;
    uint32_t *ni = realloc(bk->ids, nc * sizeof *ni);
    if (!ni) return false;
    bk->ids = ni;
    bk->cap = nc;
  }
  bk->ids[bk->n++] = id;
  return true;
}

/* Lowest offset for b clear of the placed buffers live with it: those come
 * from the buckets b spans (once each, by stamp), kept in offset order by
 * insertion (they are few). */
static uint64_t lowest_fit(const struct rec_alloc *recs, const uint64_t *off, const struct bucket *buckets,
                           uint32_t *stamp, uint32_t i, const struct rec_alloc *b, struct span *live) {
  size_t first, last, k = 0;
  life_buckets(b, &first, &last);
  for (size_t q = first; q <= last; q++)
    for (uint32_t e = 0; e < buckets[q].n; e++) {
      uint32_t id = buckets[q].ids[e];
      const struct rec_alloc *p = &recs[id];
      if (stamp[id] == i) continue;
      stamp[id] = i;
      if (!(p->born < b->died && b->born < p->died)) continue;
      size_t at = k++;
      for (; at > 0 && live[at - 1].off > off[id]; at--) live[at] = live[at - 1];
      live[at] = (struct span){off[id], off[id] + p->bytes};
    }
  uint64_t cand = 0;
  for (size_t j = 0; j < k && cand + b->bytes > live[j].off; j++)
    if (live[j].end > cand) cand = live[j].end;
  return cand;
}

/* Greedy by size for the buffers in ord[0..n): biggest first, each at the
 * lowest offset where it overlaps no already-placed buffer live at the same
 * time. Close to optimal on inference graphs and simple to trust. Finding
 * the buffers live alongside through buckets of trace time keeps a long
 * trace from costing n² comparisons. Returns the top, or UINT64_MAX when
 * out of memory. */
static uint64_t place_by_size(const struct rec_alloc *recs, uint32_t *ord, uint32_t n, uint64_t end,
                              uint64_t *off, uint32_t *stamp) {
  size_t n_buckets = (size_t)(end / PLACE_TICKS) + 1;
  struct span *live = malloc((n ? n : 1) * sizeof *live);
  struct bucket *buckets = calloc(n_buckets, sizeof *buckets);
  bool ok = live && buckets;
  pthread_mutex_lock(&sort_mu); /* qsort has no context argument in C11 */
  sort_recs = recs;
  qsort(ord, n, sizeof *ord, by_size_desc);
  pthread_mutex_unlock(&sort_mu);
  uint64_t top = 0;
  for (uint32_t i = 0; ok && i < n; i++) {
    const struct rec_alloc *b = &recs[ord[i]];
    uint64_t at = lowest_fit(recs, off, buckets, stamp, i, b, live);
    off[ord[i]] = at;
    if (at + b->bytes > top) top = at + b->bytes;
    size_t first, last;
    life_buckets(b, &first, &last);
    for (size_t q = first; ok && q <= last; q++) ok = bucket_add(&buckets[q], ord[i]);
  }
  for (size_t q = 0; buckets && q < n_buckets; q++) free(buckets[q].ids);
  free(buckets);
  free(live);
  return ok ? top : UINT64_MAX;
}

/* The smallest buffers (one granule: shapes, scalars, half of a decoder
 * step's ~900) get slots of their own above the rest, in order of birth,
 * each the first slot free by then: as few slots as ever live at once, for
 * none of the greedy's search (650 µs a plan on the benchmark model before,
 * where a batch of one builds a plan about every fourth step). */
static uint64_t place_granules(const struct rec_alloc *recs, const uint32_t *ids, uint32_t n, uint64_t base,
                               uint64_t *off) {
  uint64_t *slot_free = malloc((n ? n : 1) * sizeof *slot_free); /* the tick each slot frees */
  if (!slot_free) return UINT64_MAX;
  uint32_t slots = 0;
  for (uint32_t i = 0; i < n; i++) {
    const struct rec_alloc *b = &recs[ids[i]];
    uint32_t s = 0;
    while (s < slots && slot_free[s] > b->born) s++;
    if (s == slots) slots++;
    slot_free[s] = b->died > b->born ? b->died : b->born;
    off[ids[i]] = base + (uint64_t)s * ALIGN;
  }
  free(slot_free);
  return base + (uint64_t)slots * ALIGN;
}

static int by_birth(const void *a, const void *b) {
  const struct rec_alloc *x = &sort_recs[*(const uint32_t *)a];
  const struct rec_alloc *y = &sort_recs[*(const uint32_t *)b];
  if (x->born != y->born) return x->born < y->born ? -1 : 1;
  return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

bool exec_plan_place(const struct rec_alloc *recs, uint32_t n, uint64_t *off, uint64_t *total) {
  uint32_t *ord = malloc((n ? n : 1) * sizeof *ord), *stamp = malloc((n ? n : 1) * sizeof *stamp);
  if (!ord || !stamp) {
    free(ord);
    free(stamp);
    return false;
  }
  /* The big buffers, then the granules, each in recording order. */
  uint32_t n_big = 0, n_small = 0;
  uint64_t end = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t t = recs[i].died > recs[i].born ? recs[i].died : recs[i].born + 1;
    if (t > end) end = t;
    stamp[i] = UINT32_MAX;
    if (recs[i].bytes > ALIGN) ord[n_big++] = i;
  }
  uint32_t *small = ord + n_big;
  bool born_order = true;
  for (uint32_t i = 0; i < n; i++)
    if (recs[i].bytes <= ALIGN) {
      born_order &= n_small == 0 || recs[small[n_small - 1]].born <= recs[i].born;
      small[n_small++] = i;
    }
  /* Recorded traces list granules by birth already. */
  if (!born_order) {
    pthread_mutex_lock(&sort_mu);
    sort_recs = recs;
    qsort(small, n_small, sizeof *small, by_birth);
    pthread_mutex_unlock(&sort_mu);
  }
  uint64_t top = place_by_size(recs, ord, n_big, end, off, stamp);
  if (top != UINT64_MAX) top = place_granules(recs, small, n_small, top, off);
  free(ord);
  free(stamp);
  *total = top;
  return top != UINT64_MAX;
}

/* ------------------------------------------------------------ the cache */

static uint64_t sig_hash(const int64_t *sig, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= (uint64_t)sig[i];
    h *= 1099511628211ull;
  }
  return h;
}

void exec_plan_free(struct plan *p) {
  if (!p) return;
  free(p->sig);
  free(p->events);
  free(p->offsets);
  free(p);
}

/* Takes p out of the cache list (under the mutex). */
static void unlink_plan(tolk_session *s, struct plan *p) {
  for (struct plan **pp = &s->plans; *pp; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      s->n_plans--;
      break;
    }
  p->next = NULL;
  p->evicted = true;
}

tolk_status exec_plan_begin(struct exec_run *r) {
  tolk_session *s = r->s;
  uint64_t h = sig_hash(r->sig, r->n_sig);
  struct plan *found = NULL;
  pthread_mutex_lock(&s->mu);
  for (struct plan *p = s->plans; p; p = p->next)
    if (p->hash == h && p->n_sig == r->n_sig && !memcmp(p->sig, r->sig, r->n_sig * sizeof *r->sig)) {
      found = p;
      break;
    }
  if (found) {
    found->refs++;
    found->last_used = ++s->clock;
  }
  pthread_mutex_unlock(&s->mu);
  r->plan = found;
  r->tick = 0;
  r->n_allocs = 0;
  r->live = r->peak = r->heap_bytes = r->output_bytes = 0;
  r->nodes_run = 0;
  r->rec_overflow = false;
  r->diverged = false;
  r->mode = found ? RUN_REPLAY : RUN_RECORD;
  if (found && found->arena_bytes > r->arena_cap) {
    free(r->arena);
    r->arena = NULL;
    r->arena_cap = 0;
    void *a = NULL;
    if (posix_memalign(&a, ALIGN, (size_t)found->arena_bytes)) {
      /* Run from the heap instead; correctness does not need the arena. */
      r->mode = RUN_HEAP;
    } else {
      r->arena = a;
      r->arena_cap = (size_t)found->arena_bytes;
    }
  }
  return TOLK_OK;
}

/* Builds a plan from the finished recording; NULL when it cannot. */
static struct plan *build_plan(struct exec_run *r, uint64_t hash) {
  for (uint32_t i = 0; i < r->n_allocs; i++)
    if (r->recs[i].died == UINT64_MAX) return NULL; /* a buffer outlived the run */
  struct plan *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->hash = hash;
  p->n_sig = r->n_sig;
  p->n_events = r->tick;
  p->n_allocs = r->n_allocs;
  p->sig = malloc((r->n_sig ? r->n_sig : 1) * sizeof *p->sig);
  p->events = malloc((r->tick ? r->tick : 1) * sizeof *p->events);
  p->offsets = malloc((r->n_allocs ? r->n_allocs : 1) * sizeof *p->offsets);
  if (!p->sig || !p->events || !p->offsets ||
      !exec_plan_place(r->recs, r->n_allocs, p->offsets, &p->arena_bytes)) {
    exec_plan_free(p);
    return NULL;
  }
  if (r->n_sig) memcpy(p->sig, r->sig, r->n_sig * sizeof *p->sig);
  if (r->tick) memcpy(p->events, r->events, r->tick * sizeof *p->events);
  p->peak_bytes = r->peak;
  return p;
}

/* The arena follows the runs' needs down as well as up. A burst of wide
 * batches grows it; once a whole window of runs has needed at most half of
 * it, it is freed and the next run allocates only what its plan needs.
 * Without this a long-running server would hold the widest batch it ever saw
 * for good, and its memory would ratchet up with every rarer burst (ONNX
 * Runtime's arena shrinkage run option, made automatic). The window keeps a
 * decoder whose batch narrows and widens from step to step from reallocating
 * at every step. */
enum { ARENA_WINDOW = 256 };

static void arena_follow_need(struct exec_run *r) {
  if (r->planned_arena > r->window_need) r->window_need = r->planned_arena;
  if (++r->window_runs < ARENA_WINDOW) return;
  if (r->arena_cap > 2 * r->window_need) {
    free(r->arena);
    r->arena = NULL;
    r->arena_cap = 0;
  }
  r->window_need = 0;
  r->window_runs = 0;
}

/* plan_on_repeat: whether signature hash h ran before without a plan;
 * remembers it if not. (Two signatures of one hash only get a plan early.) */
static bool seen_before(tolk_session *s, uint64_t h) {
  enum { N = sizeof s->seen / sizeof s->seen[0] };
  pthread_mutex_lock(&s->mu);
  uint32_t n = s->n_seen < N ? s->n_seen : N;
  bool seen = false;
  for (uint32_t i = 0; i < n && !seen; i++) seen = s->seen[i] == h;
  if (!seen) s->seen[s->n_seen++ % N] = h;
  pthread_mutex_unlock(&s->mu);
  return seen;
}

void exec_plan_end(struct exec_run *r, bool ok) {
  tolk_session *s = r->s;
  struct plan *fresh = NULL;
  uint64_t h = 0;
  if (ok && r->mode == RUN_RECORD && !r->rec_overflow) {
    h = sig_hash(r->sig, r->n_sig);
    if (!s->params.plan_on_repeat || seen_before(s, h))
      fresh = build_plan(r, h); /* outside the lock: placement takes a while */
  }
  if (r->mode != RUN_REPLAY) small_age(r); /* a replay takes nothing from the lists */
  r->plan_reused = r->plan != NULL;
  r->planned_arena = r->plan ? r->plan->arena_bytes : fresh ? fresh->arena_bytes : 0;
  arena_follow_need(r);
  pthread_mutex_lock(&s->mu);
  struct plan *p = r->plan;
  if (p) {
    p->refs--;
    /* A run that left the plan keeps it: the plan still serves the common
     * prefix, and re-recording could thrash between alternating paths. */
    if (r->diverged) p->divergences++;
    if (p->evicted && p->refs == 0) exec_plan_free(p);
  }
  if (fresh) {
    bool dup = false;
    for (struct plan *q = s->plans; q; q = q->next)
      if (q->hash == h && q->n_sig == fresh->n_sig &&
          !memcmp(q->sig, fresh->sig, fresh->n_sig * sizeof *fresh->sig))
        dup = true;
    if (dup) {
      exec_plan_free(fresh);
    } else {
      while (s->n_plans >= s->params.plan_cache_size && s->plans) {
        struct plan *lru = s->plans;
        for (struct plan *q = s->plans; q; q = q->next)
          if (q->last_used < lru->last_used) lru = q;
        unlink_plan(s, lru);
        if (lru->refs == 0) exec_plan_free(lru);
      }
      fresh->last_used = ++s->clock;
      fresh->next = s->plans;
      s->plans = fresh;
      s->n_plans++;
    }
  }
  pthread_mutex_unlock(&s->mu);
  r->plan = NULL;
}
