/*
 * exec.h — the execution engine's private structures, shared by its files:
 * session.c compiles a model's graphs into xgraphs (kernels resolved, inputs
 * resolved to value slots, value lifetimes computed); run.c executes them and
 * implements the kernel-facing half of src/ops/op.h; plan.c records the
 * allocations of a run and turns them into a cached arena layout; tensor.c is
 * the public tensor API.
 *
 * Memory plan, in short: every intermediate buffer of a run comes from
 * exec_alloc() and goes back through exec_free(). The first run for an input
 * signature (dtypes and shapes of the inputs) takes buffers from the heap and
 * records a trace — node starts, allocations with their sizes, frees. The
 * trace gives each buffer's lifetime, from which plan.c assigns offsets in
 * one arena. Later runs with that signature replay the trace: as long as the
 * run produces exactly the recorded events, each allocation is served from
 * its planned offset. At the first event that differs (a data-dependent
 * shape, another If branch), the run "diverges": buffers already placed stay
 * valid (they were placed for an identical prefix), and everything after
 * comes from the heap. A run without a plan (a batch of one makes a new
 * signature at nearly every decoder step) keeps the small buffers its nodes
 * free and hands them to its next allocations of the same size.
 */
#ifndef TOLK_EXEC_H
#define TOLK_EXEC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "../core/core.h"
#include "../ir/ir.h"
#include "../ops/op.h"
#include "../core/pool.h"

/* Where a value lives at run time: slot `slot` of the frame of graph
 * `frame` (frames are per graph, indexed by xgraph id). */
struct xref {
  int32_t frame; /* -1: omitted optional input */
  int32_t slot;
};

struct xgraph;

struct xnode {
  const struct ir_node *node;
  const struct op_def *def;
  void *state; /* from def->prepare */
  int64_t opset;
  uint32_t uid; /* unique across the session's graphs; names the node in traces */
  uint32_t n_in, n_out;
  struct xref *in;
  int32_t *out; /* slot in this graph's frame; -1 omitted */
  int32_t *release; /* own-frame slots whose last use is this node */
  uint32_t n_release;
  struct xgraph **subs; /* compiled subgraphs of this node's attributes */
  uint32_t n_subs;
  /* exec_fold_plan: folding will bind this node's outputs by shape and never
   * run it (only packers read them), so exec_align_bind copies nothing for
   * it. Cleared if folding keeps the node after all. */
  bool fold_skip;
};

struct xgraph {
  const struct ir_graph *g;
  uint32_t id;
  struct xgraph *parent;
  struct xnode *nodes; /* in execution (topological) order */
  uint32_t n_nodes;
  uint32_t n_slots; /* g->n_values */
  int32_t *in_slots; /* declared inputs */
  uint32_t n_in;
  struct xref *out_refs; /* declared outputs */
  uint32_t n_out;
  uint32_t max_in, max_out; /* largest node arity, for per-frame buffers */
  /* Values computed once at creation by constant folding (fold.c), bound
   * into every frame like initializers; is_const marks those slots and the
   * initializers a caller cannot override. */
  struct xconst {
    int32_t slot;
    struct tensor t; /* data NULL when unread */
    /* Not held: every remaining reader multiplies by its own packed copy
     * (op_def.packed_input), or none is left, so fold.c keeps only the shape. */
    bool unread;
  } *consts;
  uint32_t n_consts;
  uint8_t *is_const;
  /* Values of enclosing graphs read here or in nested subgraphs. */
  const struct ir_value **outer;
  uint32_t n_outer;
  /* NULL, or n_slots entries: an aligned copy (malloc'd, session-owned) of a
   * misaligned initializer bound in place of its data (align.c). */
  void **aligned;
};

enum { EXEC_SMALL_MAX = 4096, EXEC_SMALL_KEEP = 1 << 20 };

/* A buffer obtained from exec_alloc. */
struct xbuf {
  void *data;
  size_t bytes;  /* rounded size, as counted */
  uint32_t idx;  /* allocation number in the trace */
  uint8_t heap;  /* 1: free() it; 0: arena or nothing */
  uint8_t traced;/* 1: its free is a trace event */
};

struct xslot {
  struct tensor t;
  struct xbuf buf;         /* owned buffer, if the value was produced here */
  struct tolk_tensor *res; /* main graph outputs: the tensor handed out */
  uint64_t epoch;          /* frame invocation that last wrote it */
};

struct xframe {
  struct xslot *slots;
  const struct tensor **inbuf; /* max_in entries */
  struct tensor *omitted;      /* max_out scratch tensors for omitted outputs */
  struct xbuf *omitted_buf;
  struct tensor *outs;         /* results of op_run_subgraph */
  struct xbuf *pend, *pend_new;/* subgraph output buffers kept alive */
  uint32_t n_pend;
  uint64_t epoch;
  bool bound;                  /* initializers written into slots */
};

/* A node being run: the kernel sees `c`; the executor finds the rest by
 * container_of. */
struct xctx {
  struct op_ctx c;
  struct xnode *xn;
  struct xgraph *xg;
  struct xframe *fr;
};

enum run_mode { RUN_RECORD, RUN_REPLAY, RUN_HEAP };

/* Sees every value a run computes, in any graph, as it is produced (a node's
 * outputs, a Loop or Scan body's inputs as bound): t is valid only during
 * the call. For the calibration (calibrate.c), which needs the values inside
 * If branches that no run hands out. */
typedef void (*exec_observe_fn)(void *user, const struct ir_value *v, const struct tensor *t);

/* An allocation of the recording run: lifetime in trace ticks. */
struct rec_alloc {
  uint64_t bytes;
  uint64_t born, died; /* died == UINT64_MAX while live */
};

struct plan {
  struct plan *next;
  uint64_t hash;
  int64_t *sig;
  size_t n_sig;
  uint64_t *events;
  size_t n_events;
  uint64_t *offsets; /* per allocation number */
  uint32_t n_allocs;
  uint64_t arena_bytes;
  uint64_t peak_bytes;
  int refs;          /* runs using it (under the session mutex) */
  bool evicted;      /* out of the cache; freed when refs drops to 0 */
  int divergences;   /* runs that left the trace */
  uint64_t last_used;
};

struct exec_run {
  struct tolk_session *s;
  struct exec_run *next_free;
  struct xframe *frames;
  tolk_error *err;
  /* memory */
  unsigned char *arena;
  size_t arena_cap;
  enum run_mode mode;
  struct plan *plan;
  size_t tick;       /* replay position / events recorded */
  uint32_t n_allocs; /* allocation numbers handed out */
  uint64_t *events;  /* recording */
  size_t cap_events;
  struct rec_alloc *recs;
  size_t cap_recs;
  bool rec_overflow; /* trace grew past its bound: no plan from this run */
  bool diverged;
  uint64_t live, peak, heap_bytes, output_bytes;
  uint32_t nodes_run;
  uint64_t epoch_clock;
  /* op_scratch buffers, a stack popped after each node */
  struct xbuf *scratch;
  size_t n_scratch, cap_scratch;
  /* signature of this run's inputs */
  int64_t *sig;
  size_t n_sig;
  /* caller-bound outputs: per main output slot, or NULL */
  struct tolk_tensor **bound;
  /* main-graph values requested as outputs: not released during the run */
  uint8_t *pinned;
  uint32_t n_pinned;
  /* symbolic dims bound while checking inputs */
  const char **sym_name;
  int64_t *sym_val;
  int *sym_from;
  /* tolk_session_run_kv: the cache bound to the pairs' past inputs */
  struct tolk_kv_cache *kv;
  /* head.c: the LM head restricted to a shortlist, or NULL */
  const struct op_head_subset *head;
  /* exec_run_observed: called for each value produced, or NULL */
  exec_observe_fn observe;
  void *observe_user;
  /* for stats, set by exec_plan_end */
  uint64_t planned_arena;
  int plan_reused;
  /* the largest arena the runs of the current window needed (plan.c) */
  uint64_t window_need;
  uint32_t window_runs;
  /* Heap-mode buffers of up to EXEC_SMALL_MAX bytes freed by nodes, kept
   * on lists by size (linked through their first bytes) for the next
   * allocation of that size (plan.c), at most EXEC_SMALL_KEEP bytes in all:
   * small_free holds what this run freed, small_prev what the run before
   * it left, freed when this run ends without having taken it. */
  void *small_free[EXEC_SMALL_MAX / 64];
  void *small_prev[EXEC_SMALL_MAX / 64];
  uint64_t small_bytes;
};

struct tolk_session {
  struct tolk_model *owned_model;
  void (*free_model)(struct tolk_model *); /* set by whoever gave it ownership */
  const struct ir_model *m;
  tolk_session_params params;
  struct xgraph **graphs; /* [0] is the main graph */
  uint32_t n_graphs, cap_graphs;
  uint32_t n_uids;
  struct tolk_pool *pool;
  pthread_mutex_t mu;
  struct exec_run *free_runs;
  struct plan *plans;
  int n_plans;
  /* plan_on_repeat: hashes of signatures run without a plan, a ring */
  uint64_t seen[256];
  uint32_t n_seen;
  uint64_t clock;
  /* public value info */
  tolk_value_info *inputs, *outputs;
  size_t n_inputs, n_outputs;
  int32_t *input_slot; /* main-graph slot of inputs[i] */
  /* main-graph slot -> first output position, or -1 */
  int32_t *out_pos;
  size_t max_sig;
  void **folded; /* buffers of folded constants, freed with the session */
  size_t n_folded, cap_folded;
  uint32_t n_nodes_folded;
  /* fold.c: bytes of folded values held, and of those not held (unread) */
  size_t folded_bytes, folded_unread_bytes;
  /* align.c: bytes of aligned copies held now, and ever allocated */
  size_t aligned_bytes, aligned_bytes_total;
  struct tolk_arena arena; /* everything compiled lives here */
  /* kv.c: the (past input, present output) pairs kept in place */
  struct exec_kv_pair *kv;
  uint32_t n_kv;
  /* kv.c: the position lookup was found too, so rows of different lengths
   * may share a cache (tolk_session_kv_ragged) */
  bool kv_ragged;
  /* kv.c: the main-graph inputs read once per source (tolk_kv_cache_share) */
  uint32_t *kv_shared;
  uint32_t n_kv_shared;
  /* fuse_mmi.c: the MatMulInteger chains run as one node, in every graph */
  uint32_t n_fused;
};

/* A Concat(past, new) → present the session rewired (kv.c). */
struct exec_kv_pair {
  uint32_t input;         /* index of the past input in the main graph's inputs */
  int32_t past_slot, present_slot;
  int64_t heads, head_dim;
  /* The keys reach a MatMul as Kᵀ (× `scale` when a Mul is in between, else
   * scale 1): the cache also keeps them that way, [head_dim, cap] per row and
   * head, so scores read the very operand the graph built each step. */
  bool keys_t;
  float scale;
  /* The cache keeps the pair as written, [head_dim] per position: always
   * for values; for keys unless they are kept transposed, nothing else reads
   * them and the session has kv_keys_transposed_only. */
  bool plain;
};

/* match.c: for the rewrites below. The readers of `slot` in xg, at most
 * max of them; -1 when a subgraph reads it or there are more. */
struct exec_reader {
  uint32_t node, input; /* index in xg->nodes, and which of its inputs */
};
int exec_readers(const struct xgraph *xg, int32_t slot, struct exec_reader *out, int max);
/* An ai.onnx node of that op type. */
bool exec_is_op(const struct xnode *xn, const char *op);
bool exec_is_graph_output(const struct ir_value *v);
/* The node of xg producing `slot`, or -1 (an input or initializer). */
int64_t exec_producer(const struct xgraph *xg, int32_t slot);
/* The rank of a constant value (initializer or Constant node), -1 if v is
 * not one. */
int exec_const_rank(const struct ir_value *v);
/* For a fusion: a zeroed flag per node of xg (session arena; NULL when
 * memory runs out), and xg without the nodes flagged, in order. */
bool *exec_node_marks(tolk_session *s, const struct xgraph *xg);
void exec_drop_nodes(struct xgraph *xg, const bool *drop);
/* The one reader of `slot` (value v) when it has exactly one and v is no
 * graph output: its node, with *input the input it reads; else -1. */
int64_t exec_sole_reader(const struct xgraph *xg, int32_t slot, const struct ir_value *v, uint32_t *input);
/* The constant tensor a value holds — an initializer a run cannot
 * override, or a Constant's value, through Identity nodes — or NULL. */
const struct ir_tensor *exec_const_tensor(const struct ir_value *v);

/* kv.c: with params.kv_cache, rewires the main graph's cache pattern (see
 * tolk.h) in xg before its value lifetimes are computed: fills s->kv, or
 * leaves it empty when the pattern is absent or not complete. Fails only
 * when memory runs out. */
tolk_status exec_kv_rewrite(tolk_session *s, struct xgraph *xg, tolk_error *err);

/* run.c: tolk_session_run with `observe` called on every value the run
 * produces (exec_observe_fn); output_names must not be NULL (n_outputs may
 * be 0). */
tolk_status exec_run_observed(tolk_session *s, size_t n_inputs, const char *const *input_names,
                              const tolk_tensor *const *inputs, size_t n_outputs, const char *const *output_names,
                              tolk_tensor **outputs, exec_observe_fn observe, void *user, tolk_error *err);

/* quant_rows.c: gives the DynamicQuantizeLinear nodes that feed only
 * MatMulInteger chains the per-row kernel (tolk_session_params.quant_rows). */
void exec_quant_rows_rewrite(struct xgraph *xg);
/* fuse_mmi.c: runs each MatMulInteger → Cast → Mul [→ Add] chain of
 * quantize_dynamic as one node (tolk_mmi_scaled_def), dropping the others;
 * the chains fused, or -1 when memory runs out. */
int exec_fuse_mmi(tolk_session *s, struct xgraph *xg);
/* fuse_bias.c: runs each MatMul by a constant B (float, bfloat16 or the
 * int8 head) whose one reader is the Add of a constant bias vector as one
 * node (tolk_matmul_bias_def and its kin); the pairs fused, or -1 when
 * memory runs out. */
int exec_fuse_bias(tolk_session *s, struct xgraph *xg);
/* fuse_kv_attention.c: runs each cached attention's scores, mask Add,
 * Softmax and context nodes as one (tolk_kv_attention_def or its shared
 * kin); the attentions fused, or -1 when memory runs out. */
int exec_fuse_kv_attention(tolk_session *s, struct xgraph *xg);
/* lm_head.c: gives the MatMul whose result is a graph output (directly or
 * through an Add: the LM head) the int8 kernel
 * (tolk_session_params.int8_lm_head). */
void exec_int8_head_rewrite(struct xgraph *xg);
/* bf16.c: MatMul and Gemm run tolk_matmul_bf16_def / tolk_gemm_bf16_def,
 * or with products their _bf16dot_ forms (tolk_session_params.bf16_weights). */
void exec_bf16_rewrite(struct xgraph *xg, bool products);
/* Whether `slot` (value v, a MatMul's result) is a graph output, or read
 * only by one Add whose result is; *add receives that Add, else NULL. */
bool exec_head_output(const struct xgraph *xg, int32_t slot, const struct ir_value *v,
                      const struct xnode **add);
/* run.c: tolk_session_run / tolk_session_run_kv (kv non-NULL) with the LM
 * head restricted to hs (NULL: not; head.c). */
tolk_status exec_run_with_head(tolk_session *s, struct tolk_kv_cache *kv, const struct op_head_subset *hs,
                               size_t n_inputs, const char *const *input_names,
                               const tolk_tensor *const *inputs, size_t n_outputs,
                               const char *const *output_names, tolk_tensor **outputs, tolk_error *err);
/* Whether main-graph input i is the past input of a pair (its pair, else -1). */
int exec_kv_pair_of_input(const tolk_session *s, size_t i);
/* Whether main-graph input i is shared (tolk_kv_cache_share): then the rows
 * it must have given the cache c, else -1. */
int64_t exec_kv_shared_rows(const tolk_session *s, const struct tolk_kv_cache *c, size_t i);
/* Binds the placeholder of pair p's past input: [rows, heads, len, head_dim]
 * over the cache buffer as it is at bind time. Only its shape is ever read
 * (the rewrite admits no other readers of a past input), which matters:
 * KvAppend may move the buffer during the run. */
void exec_kv_placeholder(const struct tolk_kv_cache *c, uint32_t p, struct tensor *t);
/* Checks that c belongs to s; on a successful run, commits the new length. */
tolk_status exec_kv_check(const tolk_session *s, const struct tolk_kv_cache *c, tolk_error *err);
void exec_kv_commit(struct tolk_kv_cache *c, bool ok);

struct tolk_tensor {
  struct tensor t;
  void *owned; /* separately allocated data, or NULL (borrowed or inline) */
  uint8_t borrowed;
};

/* session.c: compiles `m` into a session. `extra` (may be NULL): a table of
 * op defs searched before the registry — tests use it to run the executor
 * with kernels of their own. The model is borrowed. */
/* The graph rewrites of tolk_model_optimize (optimize.c) on m's main
 * graph, in place, at `level` (BASIC, EXTENDED or ALL); constant folding
 * through a session, and the fusions only a written model needs
 * (MatMulIntegerToFloat), only with `fold` (a session does both its own
 * way at creation).
 * With `keep_cache` (a session keeping its key/value cache in place) the
 * decoder's cache Concat(past, new) -> present and what reads it stay as
 * written, for src/exec/kv.c to rewire. Each pass is reported to `report`
 * (may be NULL); *rewrites (may be NULL) receives their total. */
tolk_status exec_optimize_ir(struct ir_model *m, tolk_opt_level level, bool fold, bool keep_cache,
                             tolk_report_fn report, void *user, size_t *rewrites, tolk_error *err);
/* The few of those passes a key/value-cache session runs at BASIC too
 * (optimize.c's kv mark: bit for bit the graph, and none of what kv.c
 * rewires): the residual Add + LayerNormalization into
 * SkipLayerNormalization and x * Sigmoid(x) into QuickGelu, after the
 * passes their matching needs (Constant nodes, Identity of constants,
 * static shapes, common subexpressions) and with dead nodes last. */
tolk_status exec_optimize_kv_ir(struct ir_model *m, tolk_error *err);

tolk_status exec_session_create_ir(const struct ir_model *m, const tolk_session_params *p,
                                   const struct op_def *extra, tolk_session **out,
                                   tolk_error *err);

/* Prepends "node 'name' (#index Op)" to the message in err. */
void exec_node_prefix(tolk_error *err, const struct ir_node *n);

/* run.c */
struct exec_run *exec_run_new(tolk_session *s);
/* Runs one node of xg in frame fr (no releases); errors carry its identity. */
tolk_status exec_node(struct exec_run *r, struct xgraph *xg, struct xframe *fr,
                      struct xnode *xn);
tolk_status exec_graph(struct exec_run *r, struct xgraph *xg, struct xframe *fr);

/* One node's run as exec_set_node_timer's function sees it: the kernel
 * (the def's op, a fused one's own), the node's name, its inputs, whether
 * the run was a key/value-cache step, and the nanoseconds run() took. */
struct exec_node_time {
  const char *domain, *op_type, *name;
  const struct tensor *const *in;
  size_t n_in;
  bool kv;
  uint64_t ns;
};
typedef void (*exec_node_timer_fn)(const struct exec_node_time *t);
/* Times every node of every run of the process with fn from now on (NULL:
 * stops; the default, which costs a branch a node). For profiles
 * (bench_bandwidth --profile): set it while no session runs. */
void exec_set_node_timer(exec_node_timer_fn fn);
void exec_frame_bind_constants(struct exec_run *r, struct xgraph *xg, struct xframe *fr);
void exec_frame_sweep(struct exec_run *r, struct xgraph *xg, struct xframe *fr);

/* fold.c: evaluates, at creation, the nodes fed only by constants and
 * drops them from the graphs (opt level basic and up). Never fails the
 * session: a node that cannot be folded is simply run at run time. */
tolk_status exec_fold(tolk_session *s, tolk_error *err);
/* Run before exec_align_bind: marks the nodes exec_fold will not run
 * (xnode.fold_skip), so no aligned copy is made for them alone. Only an
 * optimisation: it never fails the session. */
void exec_fold_plan(tolk_session *s);
/* Fails, naming the value, when main-graph value `index`, requested as an
 * output by name, is a folded value the session does not hold (unread). */
tolk_status exec_fold_check_value(const tolk_session *s, int32_t index, tolk_error *err);
/* Gives back the file pages of node xn's initializers that its prepare
 * packed whole into a copy of its own (op_def.packed_src_dropped), at once:
 * release_packed_pages would wait for the whole session, by which time
 * every weight was resident twice (file pages and packed copy). */
void exec_release_packed_now(const tolk_session *s, const struct xnode *xn);

/* align.c: initializers left misaligned by the loader (ir_tensor.misaligned).
 * exec_align_bind, after prepare and before folding, gives an aligned copy
 * to each one some reader needs typed (its op_def does not declare the
 * input unaligned_inputs or packed_input, or a graph output; readers folding
 * skips, xnode.fold_skip, do not count);
 * exec_align_trim, after folding, frees the copies only folded nodes needed
 * and makes any a node folding kept after all needs (fails only when out of
 * memory); exec_align_free frees the rest with the session. */
tolk_status exec_align_bind(tolk_session *s, tolk_error *err);
tolk_status exec_align_trim(tolk_session *s, tolk_error *err);
void exec_align_free(tolk_session *s);
/* The data to bind for initializer v of xg: its aligned copy if it has one,
 * else v->init->data. */
const void *exec_init_data(const struct xgraph *xg, const struct ir_value *v);

/* plan.c: the allocator and the plan cache. */
bool exec_alloc(struct exec_run *r, size_t bytes, struct xbuf *b);
void exec_free(struct exec_run *r, struct xbuf *b);
/* Frees the small heap buffers r keeps for reuse (exec_run_free). */
void exec_small_release(struct exec_run *r);
void exec_event_node(struct exec_run *r, uint32_t uid);
/* Called at the start of a run: picks the plan for r->sig or starts a
 * recording; makes sure the arena is large enough. */
tolk_status exec_plan_begin(struct exec_run *r);
/* Called at the end: publishes a recorded plan when the run succeeded. */
void exec_plan_end(struct exec_run *r, bool ok);
void exec_plan_free(struct plan *p);
/* The arena layout of n recorded buffers: off[i] for each, *total the
 * arena's size; no two buffers live at the same tick share a byte. False
 * when out of memory. */
bool exec_plan_place(const struct rec_alloc *recs, uint32_t n, uint64_t *off, uint64_t *total);
/* run.c */
void exec_run_free(struct exec_run *r);
/* A non-NULL, 64-byte aligned address for zero-byte buffers. */
void *exec_zero_area(void);

/* tensor.c: a tolk_tensor with inline data for `t`'s shape; NULL when out of
 * memory. */
struct tolk_tensor *exec_tensor_new(const struct tensor *shape);

#endif /* TOLK_EXEC_H */
