/*
 * rewrite.h — editing a model's main graph in place: the ground the
 * optimisation passes (rewrite.c, fuse.c, fuse_attention.c; constant
 * folding in src/exec/optimize.c, which needs the kernels) stand on, and
 * what the writer (src/onnx/write.c) reads back.
 *
 * A pass kills nodes and places new ones where a killed node stood, then
 * ir_rw_commit() compacts the node list (renumbering node->index; a node a
 * pass made has src_index -1). Values keep their identity: a fused node
 * writes the very ir_value the pattern's last node wrote, so readers, graph
 * outputs and names stay as they were. A value whose producer was killed and
 * not replaced has producer NULL and is gone from the graph.
 *
 * Each graph — the main one, and each If/Loop/Scan body — is edited on its
 * own (one ir_rw each). A value a nested graph reads, like a graph output,
 * is pinned: its name must stay, so a pass may fold its producer into an
 * initializer of that name but never rename it or fuse it away.
 * The edits allocate in the model's arena; the side tables are malloc'd and
 * freed by ir_rw_end.
 */
#ifndef TOLK_IR_REWRITE_H
#define TOLK_IR_REWRITE_H

#include "ir.h"

struct ir_rw {
  struct ir_model *m;
  struct ir_graph *g;    /* the graph edited in place (m's main graph or a body in it) */
  uint32_t *uses;        /* per value index: live node inputs reading it */
  uint8_t *pinned;       /* per value index: a graph output or read by a subgraph */
  bool *dead;            /* per node position: killed, dropped by ir_rw_commit */
  struct ir_node **placed; /* per node position: a new node put in its place, or NULL */
  size_t cap_values;     /* capacity of g->values (and of uses, pinned) */
  size_t cap_nodes;      /* capacity of dead, placed */
  size_t cap_inits;      /* capacity of g->initializers */
  int serial;            /* makes the names of new values unique */
  bool oom;              /* an allocation failed: the graph is unchanged since */
  /* Set by the caller after ir_rw_begin: a session keeping its key/value
   * cache in place (src/exec/kv.c) finds the cache Concat and its readers
   * as exported, so the fusions leave them (ir_rw_is_cache). */
  bool keep_cache;
};

/* Prepares to edit graph g of model m; false when out of memory (call
 * ir_rw_end all the same). */
bool ir_rw_begin(struct ir_rw *rw, struct ir_model *m, struct ir_graph *g);
void ir_rw_end(struct ir_rw *rw);

/* Recounts uses and pins (after edits; commit does it too). */
bool ir_rw_count(struct ir_rw *rw);

/* Live nodes in the graph. */
size_t ir_rw_live_nodes(const struct ir_rw *rw);

/* The single live node reading v, or NULL when v has not exactly one
 * reader or is pinned. */
struct ir_node *ir_rw_sole_reader(const struct ir_rw *rw, const struct ir_value *v);

/* Kills node n: its outputs lose their producer. */
void ir_rw_kill(struct ir_rw *rw, struct ir_node *n);

/* A new value named after `base` + `suffix` (made unique in the graph), or
 * NULL when out of memory. */
struct ir_value *ir_rw_value(struct ir_rw *rw, const char *base, const char *suffix);

/* A new node of op_type/domain named name, reading in[0..n_in) (NULL
 * entries: omitted inputs) and writing out[0..n_out), with n_attrs zeroed
 * attributes for the caller to fill (ir_rw_attr_*), placed where the killed
 * node `where` stood. Its outputs' producer becomes it. NULL when out of
 * memory. */
struct ir_node *ir_rw_node(struct ir_rw *rw, struct ir_node *where, const char *op_type,
                           const char *domain, const char *name, struct ir_value *const *in,
                           size_t n_in, struct ir_value *const *out, size_t n_out, size_t n_attrs);
/* A name for a node a fusion makes, unique in the graph: ORT's
 * "ANCHOR/FUSION/" after the node it replaces, numbered when that is taken
 * or the anchor has no name. Written into buf (n bytes), returned. */
const char *ir_rw_node_name(struct ir_rw *rw, const char *anchor, const char *fusion, char *buf, size_t n);
void ir_rw_attr_int(struct ir_node *n, size_t k, const char *name, int64_t v);
void ir_rw_attr_float(struct ir_node *n, size_t k, const char *name, float v);
/* An INTS attribute: a copy of v[0..len) in the model's arena; false when
 * out of memory. */
bool ir_rw_attr_ints(struct ir_rw *rw, struct ir_node *n, size_t k, const char *name, const int64_t *v, size_t len);

/* Replaces every live reading of `from` by `to` (not for pinned values). */
void ir_rw_replace_uses(struct ir_rw *rw, struct ir_value *from, struct ir_value *to);

/* Makes v a constant of the graph holding t (killing nothing: the caller
 * kills v's producer). False when out of memory. */
bool ir_rw_make_initializer(struct ir_rw *rw, struct ir_value *v, struct ir_tensor *t);

/* A new tensor in the model's arena: dtype, dims, a copy of nbytes bytes. */
struct ir_tensor *ir_rw_tensor(struct ir_rw *rw, int32_t dtype, const int64_t *dims, int rank,
                               const void *data, size_t nbytes);

/* Drops the killed nodes, puts the placed ones in their slots, renumbers,
 * drops initializers nothing reads any more (unless graph inputs) and
 * recounts. False when out of memory. */
bool ir_rw_commit(struct ir_rw *rw);

/* A float constant's single value: v is an initializer of one element
 * (any rank) of dtype float. */
bool ir_rw_scalar(const struct ir_value *v, float *out);

/* ------------------------------------------------------------ matchers
 * What the fusions (fuse.c, fuse_attention.c, fuse_skip.c) test patterns
 * with. */

/* v's live producer when it is an ai.onnx `op`, else NULL. */
struct ir_node *ir_made_by(const struct ir_value *v, const char *op);
/* Whether n is the ai.onnx `op`. */
bool ir_is_op(const struct ir_node *n, const char *op);
/* A float initializer of one element as input i of n (ir_rw_scalar). */
bool ir_scalar_in(const struct ir_node *n, size_t i, float *out);
/* A 1-D float constant of more than one element: it broadcasts along the
 * last axis, so its length is that axis' (a bias, LayerNormalization's
 * scale). */
bool ir_vector_const(const struct ir_value *v);
/* The one int64 a constant of one element holds. */
bool ir_int_const(const struct ir_value *v, int64_t *out);
/* Whether v is dimension `axis` of t as a 1-D tensor, as exporters spell
 * it: Unsqueeze(Gather(Shape(t), axis), [0]). */
bool ir_dim_of(const struct ir_value *v, const struct ir_value *t, int64_t axis);
/* With rw->keep_cache, whether v is a decoder's self-attention cache:
 * Concat(past graph input, new) written to a graph output. */
bool ir_rw_is_cache(const struct ir_rw *rw, const struct ir_value *v);
/* Whether n has one output and it feeds only `into` (ir_rw_sole_reader). */
bool ir_rw_only_into(const struct ir_rw *rw, const struct ir_node *n, const struct ir_node *into);

/* The common loop of the fusions: at(rw, node) for every live node in
 * order (it kills what it matched and places the fused node), then
 * commits. The number of rewrites, or -1 when out of memory. */
int ir_rw_each(struct ir_rw *rw, bool (*at)(struct ir_rw *rw, struct ir_node *n));

/* What the fusions know of a value's shape without shape inference
 * (fuse_shape.c): `root` is a value whose dims all but the last are v's
 * (v itself when nothing better is known), `width` v's last dim and
 * `rank` its rank (-1: unknown). Computed for every value of the graph in
 * one walk over its nodes; valid until the graph changes. */
struct ir_rows {
  int32_t root;  /* value index in the graph */
  int32_t rank;
  int64_t width;
};

/* rows[i] for each value i of rw's graph (malloc'd, the caller frees),
 * or NULL when out of memory (rw->oom set). */
struct ir_rows *ir_rows_of(struct ir_rw *rw);
/* ir_rw_each for a pass that reads the rows of the graph as it stood
 * before the pass (ir_rows_of): the number of rewrites, or -1 when out of
 * memory. */
int ir_rw_each_rows(struct ir_rw *rw, bool (*at)(struct ir_rw *rw, const struct ir_rows *rows, struct ir_node *n));
/* Whether a and b, values of rw's graph, provably have the same shape. */
bool ir_rows_same(const struct ir_rw *rw, const struct ir_rows *rows, const struct ir_value *a,
                  const struct ir_value *b);

/* ------------------------------------------------------------ passes
 * Each returns the number of rewrites it made, or -1 when out of memory
 * (the graph is then valid but partly rewritten). */

/* Constant nodes (value, value_float(s), value_int(s)) become
 * initializers: what the fusions match needs no kernel to be seen. */
int ir_pass_constants(struct ir_rw *rw);
/* An Identity of a constant (exporters write one where two parameters hold
 * the same values: a fresh model's LayerNorm weights) is bypassed, its
 * readers reading the constant, unless its output is pinned: ORT's
 * EliminateIdentity, which the fusions' constant checks need. */
int ir_pass_identity(struct ir_rw *rw);
/* Removes nodes no graph output depends on (ORT's dead-node removal):
 * a node is kept if an output is pinned or read by a kept node. */
int ir_pass_dce(struct ir_rw *rw);
/* Merges nodes of the same op, domain, attributes and inputs (ORT's
 * common-subexpression elimination): duplicate Shape/Gather/Unsqueeze/
 * Concat chains of one tensor collapse into one. */
int ir_pass_cse(struct ir_rw *rw);
/* Replaces a Shape of a value whose declared shape is fully static by an
 * int64 initializer, so constant folding takes the chain behind it. */
int ir_pass_static_shape(struct ir_rw *rw);

/* Fusions (fuse.c): ONNX Runtime's extended level, ir_pass_gemm its basic. */
/* x * Sigmoid(x) (SiLU) and x * Sigmoid(alpha * x) -> com.microsoft
 * QuickGelu(x, alpha). */
int ir_pass_quick_gelu(struct ir_rw *rw);
/* x * 0.5 * (1 + Erf(x / sqrt 2)) -> com.microsoft Gelu, or BiasGelu when
 * x = Add(y, bias) with a 1-D constant bias. */
int ir_pass_gelu(struct ir_rw *rw);
/* x * 0.5 * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), x^3 as Pow(x, 3)
 * or x*x*x, or the argument as (sqrt(2/pi) * x) * (1 + 0.044715 * x * x)
 * -> com.microsoft FastGelu, with the bias input when x = Add(y, bias)
 * with a 1-D constant bias. */
int ir_pass_fast_gelu(struct ir_rw *rw);
/* MatMul(Transpose(a, perm swapping the last two axes), b) and
 * MatMul(a, Transpose(b)) -> com.microsoft FusedMatMul(transA/transB), and
 * a scalar Mul or Div by a constant before or after a MatMul folded into
 * FusedMatMul's alpha (ORT's MatMulTransposeFusion, MatMulScaleFusion). */
int ir_pass_fused_matmul(struct ir_rw *rw);
/* The decomposed LayerNormalization exporters write for opsets before 17
 * (ReduceMean, Sub, Pow, ReduceMean, Add eps, Sqrt, Div, Mul gamma, Add
 * beta) -> LayerNormalization on the last axis; only in models importing
 * ai.onnx 17 or later, where that op exists. */
int ir_pass_layernorm(struct ir_rw *rw);

/* Add(MatMul(a, b), c) -> Gemm(a, b, c) (ORT's basic level) for a of rank
 * 2, b of rank 2 with n columns known, c of shape [n], [1, n], [m, 1] or
 * [m, n] and a float type. */
int ir_pass_gemm(struct ir_rw *rw);

/* LayerNormalization(Add(x, skip [+ bias])) -> com.microsoft
 * SkipLayerNormalization (fuse_skip.c), when x and skip provably have the
 * same 3-D shape; the bias is a 1-D constant Add before the residual one. */
int ir_pass_skip_layernorm(struct ir_rw *rw);

/* Cast(MatMulInteger(y, W, ...), float) · Mul(y_scale, W_scale) [+ bias],
 * quantize_dynamic's chain, -> com.microsoft MatMulIntegerToFloat
 * (fuse_quant.c), with W, W_scale and the bias constants and y_scale a
 * DynamicQuantizeLinear's. */
int ir_pass_matmul_integer_to_float(struct ir_rw *rw);

/* Layout ops that cancel (fuse_layout.c), at the basic level: Transpose of
 * a Transpose -> one Transpose of the composed perm, or none when it is
 * the identity; Reshape of a Reshape -> one Reshape (when the outer shape
 * has no 0, which would copy a dim of the inner result); a Reshape of a
 * value declared with a static shape to that same shape -> removed. */
int ir_pass_transpose(struct ir_rw *rw);
int ir_pass_reshape(struct ir_rw *rw);

/* The all level (fuse_attention.c): Marian/BART multi-head attention
 * spelled out op by op -> com.microsoft MultiHeadAttention, the Q/K/V
 * projection biases as its bias input. */
int ir_pass_attention(struct ir_rw *rw);

#endif /* TOLK_IR_REWRITE_H */
