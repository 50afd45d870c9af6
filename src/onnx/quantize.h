/*
 * quantize.h — what the two halves of tolk_model_quantize share:
 * quantize.c decides on the IR which nodes and weights change and computes
 * the int8 weights; quantize_write.c rewrites the ModelProto bytes
 * accordingly, copying everything else as it was read.
 */
#ifndef TOLK_ONNX_QUANTIZE_H
#define TOLK_ONNX_QUANTIZE_H

#include "../core/pbw.h"
#include "onnx.h"

/* Q_TRANSPOSE: a Transpose of a weight another node's quantization already
 * made int8 or uint8 (ORT's Direct8BitOp) moves the quantized tensor and
 * dequantizes after, so the float weight can go. */
/* Q_QDQ: a MatMul of a statically quantized graph (TOLK_QUANTIZE_QDQ): the
 * node stays, reading its activations and weight through DequantizeLinear.
 * Q_QOP: one becoming QLinearMatMul (TOLK_QUANTIZE_QOPERATOR). */
enum q_kind { Q_NONE = 0, Q_MATMUL, Q_GATHER, Q_TRANSPOSE, Q_QDQ, Q_QOP };

/* An activation of a statically quantized graph. QDQ: QuantizeLinear and
 * DequantizeLinear follow its producer, every reader reads the latter.
 * QOperator: a QuantizeLinear follows its producer unless that is a
 * QLinearMatMul (need_q), and a DequantizeLinear back to it when a
 * QLinearMatMul produced it and something else reads it (need_dq). */
struct qact {
  const struct ir_value *v;
  float scale;
  int8_t zp;
  bool need_q, need_dq;
};

/* A quantized initializer: W_quantized, W_scale, W_zero_point. */
struct qweight {
  const struct ir_value *w; /* the float initializer it replaces */
  enum q_kind kind;         /* MatMul, QDQ: int8 symmetric; Gather: uint8 from the range */
  void *q;                  /* numel bytes, w's dims */
  float *scale;             /* n_scale entries */
  uint8_t *zp;              /* n_scale entries (int8 or uint8 bits) */
  size_t n_scale;
  bool per_column;          /* n_scale is B's column count (a 1-D scale) */
};

/* What happens to one graph of the model. */
struct qgraph {
  const struct ir_graph *g;
  enum q_kind *action;          /* per node index: Q_NONE copies it */
  struct qweight **weight;      /* per node index: its weight when quantized */
  bool *drop;                   /* per value index: an initializer no reader needs */
  struct qweight **home;        /* weights whose initializers go into this graph */
  size_t n_home;
  /* Activations of this graph quantized by a DynamicQuantizeLinear, one
   * each, written right after the node producing them (first when they are
   * graph inputs) wherever their MatMuls are, as ORT places them. */
  const struct ir_value **dql;
  size_t n_dql;
  /* Static: per value index, its Q/DQ pair when quantized; the pairs in the
   * order they were planned. */
  struct qact **act;
  struct qact **acts;
  size_t n_acts;
};

struct qplan {
  bool qoperator; /* static activations in QOperator form (else QDQ) */
  struct qgraph *graphs;
  size_t n_graphs;
  struct tolk_arena *arena;
};

/* The plan's entry for g (every graph of the model has one). */
struct qgraph *qplan_graph(const struct qplan *p, const struct ir_graph *g);

/* Writes the model `m` (its bytes m->map) with the plan applied into b. */
void quantize_write(struct pbw *b, const tolk_model *m, const struct qplan *p);

#endif /* TOLK_ONNX_QUANTIZE_H */
