/*
 * op.h — the contract between the executor (src/exec/) and operator kernels
 * (src/ops/<family>.c).
 *
 * An operator is a struct op_def in its family's table. At session creation
 * the executor finds a def for every node (domain, op_type, opset version) —
 * a node without one is reported then, not mid-run — and calls its optional
 * prepare(), which validates attributes and may precompute state (packed
 * weights, parsed equations). At run time the executor calls run() with the
 * node's input tensors; run() computes output shapes, obtains each output
 * buffer from op_output() (the executor decides where it lives: the plan's
 * arena or the heap), and fills it. Shape logic and compute stay together in
 * one function, as input values (e.g. a Reshape's shape tensor) are known by
 * then.
 *
 * Kernels never print and never abort: errors go through op_fail(), naming
 * the input and the shapes involved. The executor prefixes node name, index
 * and op type.
 *
 * This header belongs to the operators' layer, and the executor sits above
 * it: src/exec/ includes it, and src/ops/ includes nothing of src/exec/.
 * The services only a run can provide (op_output, op_scratch,
 * op_parallel_for, op_run_subgraph, op_kv_*) are declared here and defined
 * in src/exec/ (run.c, kv.c); everything else here is defined in src/ops/
 * (op.c, registry.c, the family files). What the executor must know about
 * an operator beyond running it — whether it may be folded, which inputs may
 * stay misaligned, which it reads only as a packed copy — the operator
 * declares in its op_def; the executor never infers a kernel's properties
 * from its op_type or from which functions it has.
 */
#ifndef TOLK_OP_H
#define TOLK_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/core.h"
#include "../ir/ir.h"

/* A runtime tensor. Dense, row-major, native little-endian layout. */
struct tensor {
  int32_t dtype; /* tolk_dtype */
  int rank;
  int64_t dims[IR_MAX_RANK];
  int64_t numel;  /* product of dims; 1 for rank 0 */
  void *data;     /* numel * element size bytes; may be NULL when numel is 0 */
  size_t nbytes;
};

struct op_ctx;
struct exec_run; /* executor-private state of one run */
struct tolk_pool;

struct op_def {
  const char *domain;  /* "" for ai.onnx, "com.microsoft", … */
  const char *op_type;
  int since;           /* first opset version this def handles */
  int until;           /* last one (inclusive); 0 = open-ended */
  /* Optional. Called once at session creation. Validates attributes and
   * constant inputs (node->inputs[i]->init) and may store state in *state,
   * released by release(). `opset` is the node's resolved version. */
  tolk_status (*prepare)(const struct ir_node *node, int64_t opset, void **state,
                         tolk_error *err);
  tolk_status (*run)(struct op_ctx *ctx);
  void (*release)(void *state);

  /* What the executor must know about run() to bind and fold its inputs,
   * declared here by the operator rather than guessed by the executor. All
   * optional: a def that leaves them zero has its inputs bound aligned and
   * read as computed. */

  /* Outputs that differ from run to run for the same inputs (random
   * sampling: RandomNormal, Multinomial, Bernoulli …): constant folding
   * leaves such a node to run every time (src/exec/fold.c). */
  bool nondeterministic;

  /* Inputs run() reads only bytewise (memcpy), bit i for input i (i < 32):
   * the session may bind a constant the loader left misaligned there as it
   * is, where other inputs get an aligned copy (src/exec/align.c). Gather's
   * data, the embedding tables. */
  uint32_t unaligned_inputs;

  /* Whether run(), given the state its prepare() made, reads only its own
   * packed copy of input `input`, never the input's data, whenever the
   * input has the dtype and shape this writes to *shape (data NULL): a B
   * that MatMul/Gemm packed at prepare from an initializer, seen directly or
   * through a Transpose or Cast. Constant folding uses it to neither compute
   * nor keep a folded value only such readers take (src/exec/fold.c), and
   * the session binds a misaligned constant of that dtype and shape there
   * as it is (src/exec/align.c). */
  bool (*packed_input)(const void *state, size_t input, struct tensor *shape);

  /* Whether the copy prepare() packed into `state` was made from all of the
   * initializer bytes at `data`, so packing read every page of them. If so,
   * also records that the session gives back their file pages (fold.c; a
   * read-only private file mapping, so refaulting is safe), and a later
   * comparison with another model's equal weight gives them back again after
   * reading them. */
  bool (*packed_src_dropped)(const void *state, const void *data);
};

struct op_ctx {
  const struct ir_node *node;
  int64_t opset;
  const struct tensor *const *in; /* n_in entries; NULL: omitted optional */
  size_t n_in;
  size_t n_out;                   /* node->n_outputs */
  void *state;                    /* from prepare(), or NULL */
  struct tolk_pool *pool;         /* for op_parallel_for */
  struct exec_run *run;
  tolk_error *err;
};

/* Input i, or NULL when absent or omitted. */
static inline const struct tensor *op_in(const struct op_ctx *c, size_t i) {
  return i < c->n_in ? c->in[i] : NULL;
}

/* Allocates output i with the given dtype and shape and returns it, its data
 * uninitialised. For an omitted output (node->outputs[i] == NULL) it still
 * returns a scratch tensor, so kernels need not special-case it. Returns NULL
 * with ctx->err set on overflow or when memory runs out. */
struct tensor *op_output(struct op_ctx *c, size_t i, int32_t dtype, int rank,
                         const int64_t *dims);

/* Scratch memory valid until run() returns; NULL (err set) on failure. */
void *op_scratch(struct op_ctx *c, size_t bytes);

/* Records an error on the context and returns `status`. The executor adds
 * the node's identity in front of the message. */
tolk_status op_fail(struct op_ctx *c, tolk_status status, const char *fmt, ...)
    TOLK_PRINTF(3, 4);

/* TOLK_OK when t is present and float32; otherwise fails naming `what`
 * (missing: invalid model; another dtype: unsupported). For the operators
 * that, like ORT's CPU kernels, exist in float only. */
tolk_status op_need_float(struct op_ctx *c, const struct tensor *t, const char *what);

/* Runs fn(arg, begin, end) over [0, n) split into chunks of at least `grain`
 * items on the session's thread pool; returns when all chunks are done.
 * Runs inline when n < 2 * grain or the pool has one thread. */
typedef void (*op_range_fn)(void *arg, int64_t begin, int64_t end);
void op_parallel_for(struct op_ctx *c, int64_t n, int64_t grain, op_range_fn fn,
                     void *arg);

/* Runs a subgraph (If/Loop bodies) with `inputs` bound to its declared inputs
 * in order; outer-scope values are visible. On success outputs[i] hold the
 * subgraph's outputs, allocated by the executor and valid until the calling
 * node's run() returns (copy what must outlive it into op_output buffers). */
tolk_status op_run_subgraph(struct op_ctx *c, const struct ir_graph *g,
                            const struct tensor *const *inputs, size_t n_inputs,
                            struct tensor **outputs, size_t n_outputs);

/* ---------------------------------------------------------- in-place cache */

/* State of the nodes src/exec/kv.c rewires (kernels in kv_cache.c). */
struct op_kv_node {
  uint32_t pair; /* index of the (past, present) pair in the session */
  float scale;   /* KvSharedScores: the keys' Mul constant, else 1 */
};

/* Makes the run's cache of `pair` hold `need` positions (its buffers may
 * move) and records `need` as the length the cache will have once the run
 * succeeds. *plain: the pair as written, [rows, heads, *cap, head_dim]
 * floats, or NULL when the cache keeps the keys only transposed
 * (op_kv_keys_t). Fails with the error set when the run has no cache or
 * memory runs out. */
tolk_status op_kv_write(struct op_ctx *c, uint32_t pair, int64_t need, float **plain, int64_t *cap);

/* The same buffer for reading `need` positions, written by this run's
 * KvAppend of the pair; with `keys_t`, its transposed, scaled keys. */
const float *op_kv_read(struct op_ctx *c, uint32_t pair, bool keys_t, int64_t need, int64_t *cap);

/* The pair's transposed keys × scale ([rows, heads, head_dim, cap]), written
 * by KvAppend beside the keys; NULL when the pair keeps none. */
float *op_kv_keys_t(struct op_ctx *c, uint32_t pair, float *scale);

/* Where KvSharedScores keeps the shared keys kv [sources, heads, len,
 * head_dim] transposed and scaled from one run to the next: the cache's,
 * while its rows read shared inputs, which then do not change until the
 * next tolk_kv_cache_share, _append or _set (tolk.h). *fill: whether they
 * must be written first. *t NULL (TOLK_OK): nothing kept, use scratch. */
tolk_status op_kv_shared_keys_t(struct op_ctx *c, const struct tensor *kv, float scale, float **t, bool *fill);

/* The cache's rows and length (its longest row) in this run, and in
 * *row_len each row's own length when they differ (rows entries), else
 * NULL: every row holds len. Fails when the run has no cache. */
tolk_status op_kv_rows(struct op_ctx *c, int64_t *rows, int64_t *len, const int64_t **row_len);

/* For the shared inputs (tolk_kv_cache_share): the cache's rows and, in
 * *source, the row of the shared inputs each one reads (rows entries), or
 * NULL: row r reads row r. Fails when the run has no cache. */
tolk_status op_kv_sources(struct op_ctx *c, int64_t *rows, const int32_t **source);

extern const struct op_def tolk_kv_append_def, tolk_kv_shape_def, tolk_kv_scores_def,
    tolk_kv_context_def, tolk_kv_positions_def, tolk_kv_shared_scores_def, tolk_kv_shared_context_def;

/* KvAttention / KvSharedAttention (kv_cache.c): the scores, mask, softmax
 * and context nodes of one attention as one; the keys' node state and the
 * values'. */
struct op_kv_attention {
  struct op_kv_node keys, values;
};
extern const struct op_def tolk_kv_attention_def, tolk_kv_shared_attention_def;

/* ---------------------------------------------------------- per-row quantization */

/* DynamicQuantizeLinear per row of x (src/ops/quant.c): what a session made
 * with quant_rows runs for the nodes src/exec/quant_rows.c picks. */
extern const struct op_def tolk_dql_rows_def;

/* MatMulInteger with its float conversion, scaling and bias in the GEMM's
 * epilogue (src/ops/quant_matmul.c): what a session runs for the chains
 * src/exec/fuse_mmi.c finds. */
extern const struct op_def tolk_mmi_scaled_def;

/* Gather on axis 0 of a float table that a MatMul or Gemm packed whole as
 * its transposed B — a translation model's tied embedding, packed as its LM
 * head (src/ops/index.c): rows come from the packed copy, the same floats,
 * so the table's own pages, given back after packing, are not read again
 * as new tokens come. What a session runs for such a Gather
 * (src/exec/session.c), with op_gather_packed_state's state: NULL when no
 * node packed the table so. */
extern const struct op_def tolk_gather_packed_def;
void *op_gather_packed_state(const struct ir_value *table);

/* MatMul by a constant B quantized to int8 at prepare, a scale per column
 * (src/ops/matmul.c): what a session made with int8_lm_head runs for the
 * node src/exec/lm_head.c picks. */
extern const struct op_def tolk_matmul_int8_def;

/* MatMul and Gemm by a constant float B held as bfloat16 (src/ops/matmul.c):
 * what a session made with bf16_weights runs for them (src/exec/bf16.c). */
extern const struct op_def tolk_matmul_bf16_def;
extern const struct op_def tolk_gemm_bf16_def;
/* The same holding B as bfloat16 pairs, A rounded too, the products
 * AVX512-BF16's (bf16_weights TOLK_BF16_PRODUCTS; kern_sgemm_pack_b_bf16dot). */
extern const struct op_def tolk_matmul_bf16dot_def;
extern const struct op_def tolk_gemm_bf16dot_def;

/* MatMul by a constant B (float, bfloat16 or the int8 head) with the Add of a
 * constant bias vector after it as one node, inputs (A, B, bias): what a
 * session runs for the pairs src/exec/fuse_bias.c finds. Bit for bit the two
 * nodes' result. */
extern const struct op_def tolk_matmul_bias_def;
extern const struct op_def tolk_matmul_bf16_bias_def;
extern const struct op_def tolk_matmul_bf16dot_bias_def;
extern const struct op_def tolk_matmul_int8_bias_def;

/* ---------------------------------------------------------- LM head column subset */

/* A vocabulary shortlist's columns of an LM head (a MatMul by a constant B,
 * fp32 or int8_lm_head's int8 copy): gathered once from the node's own
 * state and packed, so that a run multiplies by those columns only
 * (src/ops/matmul_subset.c builds it; the translator, through
 * src/exec/head.c, makes one per batch). */
struct op_head_cols;

/* Gathers columns cols[0..n) (each < the head's width, any order) of the B
 * that `state` — a MatMul or MatMulInt8 node's prepare state — packed, from
 * the initializer it was packed from, and packs them as that node would:
 * column j of the result is column cols[j] of B, bit for bit in every
 * product. TOLK_ERR_UNSUPPORTED when the node packed no constant B. */
tolk_status op_head_cols_new(const void *state, const int32_t *cols, size_t n,
                             struct op_head_cols **out, tolk_error *err);
void op_head_cols_free(struct op_head_cols *hc);
/* B's rows (the hidden size) and full width, or false when `state` packed
 * no constant B. */
bool op_head_cols_dims(const void *state, int64_t *k, int64_t *n);

/* What a run restricted to a shortlist carries: the head node multiplies
 * by `cols` only (output width n) and the Add of its bias, node `add`,
 * adds bias[0..n) — or the head node adds it itself when the Add is fused
 * into it (add NULL, bias set). Set per run by the executor
 * (src/exec/head.c). */
struct op_head_subset {
  const struct op_head_cols *cols;
  const void *head_state; /* the head node's prepare state */
  const struct ir_node *add; /* NULL: the head has no bias */
  int x_input;               /* which input of `add` the head's output is */
  const float *bias;
  int64_t n;
};

/* The run's subset, or NULL for a run of the whole vocabulary. */
const struct op_head_subset *op_head_subset(const struct op_ctx *c);

/* ---------------------------------------------------------- shape helpers */

/* Fills rank/dims/numel; false on a negative dim or numel overflow. */
bool tensor_set_shape(struct tensor *t, int rank, const int64_t *dims);

/* Bytes of one element of `dtype` (0 for strings and unknown types). */
size_t op_dtype_size(int32_t dtype);

/* Writes "[2, 3, 4]" into buf (always NUL-terminated) and returns buf. */
const char *shape_str(const struct tensor *t, char *buf, size_t size);

/* ---------------------------------------------------------- registry */

/* The def handling (domain, op_type) at `opset`, or NULL. */
const struct op_def *op_find(const char *domain, const char *op_type, int64_t opset);

/* Each family file exports a table terminated by an entry with op_type NULL. */
extern const struct op_def tolk_ops_elementwise[];
extern const struct op_def tolk_ops_activation[];
extern const struct op_def tolk_ops_cast[];
extern const struct op_def tolk_ops_reduce[];
extern const struct op_def tolk_ops_softmax[];
extern const struct op_def tolk_ops_norm[];
extern const struct op_def tolk_ops_matmul[];
extern const struct op_def tolk_ops_conv[];
extern const struct op_def tolk_ops_pool[];
extern const struct op_def tolk_ops_shape[];
extern const struct op_def tolk_ops_index[];
extern const struct op_def tolk_ops_copy[];
extern const struct op_def tolk_ops_sort[];
extern const struct op_def tolk_ops_resize[];
extern const struct op_def tolk_ops_control[];
extern const struct op_def tolk_ops_quant[];
extern const struct op_def tolk_ops_contrib[];
extern const struct op_def tolk_ops_quant_matmul[];
extern const struct op_def tolk_ops_quant_conv[];
extern const struct op_def tolk_ops_contrib_norm[];
extern const struct op_def tolk_ops_attention[];

#endif /* TOLK_OP_H */
