/*
 * quant_matmul.c — the integer matrix products: MatMulInteger and
 * QLinearMatMul (ai.onnx), and ONNX Runtime's MatMulIntegerToFloat and
 * DynamicQuantizeMatMul (com.microsoft), which its graph optimizer writes
 * when it fuses the DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul
 * chains of dynamically quantized models.
 *
 * All four share one driver: numpy-matmul batch broadcasting, zero points per
 * tensor / per row of A / per column of B, and the int8 GEMM of
 * src/kern/igemm.h. A constant 2-D B (the weights) is packed once at session
 * creation; batched or computed B is packed per run. When B is one matrix,
 * A's batches are folded into its rows so that one GEMM covers them all.
 */
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "kern/igemm.h"
#include "matmul.h"
#include "quant_util.h"

/* ------------------------------------------------------------ geometry */

struct mm_geom {
  int64_t m, n, k;
  int out_rank;
  int64_t out_dims[IR_MAX_RANK];
  int64_t nbatch;   /* output matrices */
  int brank;        /* broadcast batch rank */
  int64_t bdims[IR_MAX_RANK];
  int64_t a_bs[IR_MAX_RANK], b_bs[IR_MAX_RANK]; /* matrix-index strides, 0 = broadcast */
  int64_t a_mats, b_mats;
};

static tolk_status mm_geom_init(struct op_ctx *c, const struct tensor *a,
                                const struct tensor *b, struct mm_geom *g) {
  char b1[128], b2[128];
  memset(g, 0, sizeof *g);
  if (a->rank < 1 || b->rank < 1)
    return op_fail(c, TOLK_ERR_SHAPE, "matmul inputs must have rank >= 1: %s x %s",
                   shape_str(a, b1, sizeof b1), shape_str(b, b2, sizeof b2));
  int ar = a->rank, br = b->rank;
  g->m = ar >= 2 ? a->dims[ar - 2] : 1;
  g->k = a->dims[ar - 1];
  int64_t bk = br >= 2 ? b->dims[br - 2] : b->dims[0];
  g->n = br >= 2 ? b->dims[br - 1] : 1;
  if (bk != g->k)
    return op_fail(c, TOLK_ERR_SHAPE, "matmul inner dimensions differ: %s x %s",
                   shape_str(a, b1, sizeof b1), shape_str(b, b2, sizeof b2));
  int abr = ar > 2 ? ar - 2 : 0, bbr = br > 2 ? br - 2 : 0;
  g->brank = abr > bbr ? abr : bbr;
  int64_t as = 1, bs = 1;
  g->a_mats = g->b_mats = g->nbatch = 1;
  for (int d = g->brank - 1; d >= 0; d--) {
    int ai = d - (g->brank - abr), bi = d - (g->brank - bbr);
    int64_t ad = ai >= 0 ? a->dims[ai] : 1, bd = bi >= 0 ? b->dims[bi] : 1;
    if (ad != bd && ad != 1 && bd != 1)
      return op_fail(c, TOLK_ERR_SHAPE, "matmul batch dimensions do not broadcast: %s x %s",
                     shape_str(a, b1, sizeof b1), shape_str(b, b2, sizeof b2));
    g->bdims[d] = ad > bd ? ad : bd;
    if (ad == 0 || bd == 0) g->bdims[d] = 0;
    g->a_bs[d] = ad == 1 ? 0 : as;
    g->b_bs[d] = bd == 1 ? 0 : bs;
    as *= ad, bs *= bd;
    g->nbatch *= g->bdims[d];
  }
  g->a_mats = as, g->b_mats = bs;
  for (int d = 0; d < g->brank; d++) g->out_dims[g->out_rank++] = g->bdims[d];
  if (ar >= 2) g->out_dims[g->out_rank++] = g->m;
  if (br >= 2) g->out_dims[g->out_rank++] = g->n;
  return TOLK_OK;
}

/* Matrix indices of A and B for output batch `bi`. */
static void mm_batch(const struct mm_geom *g, int64_t bi, int64_t *ai, int64_t *bj) {
  int64_t x = 0, y = 0;
  for (int d = g->brank - 1; d >= 0; d--) {
    int64_t idx = g->bdims[d] ? bi % g->bdims[d] : 0;
    bi = g->bdims[d] ? bi / g->bdims[d] : 0;
    x += idx * g->a_bs[d];
    y += idx * g->b_bs[d];
  }
  *ai = x, *bj = y;
}

/* ---------------------------------------------------------- zero points */

/* A zero point as int32: one value (per == 0), per row of one matrix
 * (per == 1, m values, the same for every batch), or per row of every
 * matrix (per == 2, a_mats * m values). */
struct zpv {
  int32_t *v;
  int per;
};

/* An 8-bit tensor all of whose codes are 0. */
static bool all_zero(const struct tensor *t) {
  const uint8_t *p = t->data;
  uint8_t any = 0;
  for (int64_t i = 0; i < t->numel; i++) any |= p[i];
  return any == 0;
}

static tolk_status read_zp(struct op_ctx *c, const struct tensor *zp, const struct tensor *of,
                           bool rows, const struct mm_geom *g, const char *what,
                           struct zpv *out) {
  char b1[128], b2[128];
  out->v = NULL, out->per = 0;
  if (!zp) return TOLK_OK;
  if (zp->dtype != of->dtype)
    return op_fail(c, TOLK_ERR_TYPE, "%s dtype %s differs from its matrix's %s", what,
                   tolk_dtype_name((tolk_dtype)zp->dtype), tolk_dtype_name((tolk_dtype)of->dtype));
  int64_t line = rows ? g->m : g->n, mats = rows ? g->a_mats : g->b_mats;
  if (zp->numel == 1) {
    out->per = 0;
  } else if (zp->numel == line) {
    /* [line], or [.., line, 1] (rows) / [.., 1, line] (columns) with all
     * leading dims 1. */
    out->per = 1;
  } else if (zp->numel == line * mats && mats > 1) {
    out->per = 2;
  } else {
    return op_fail(c, TOLK_ERR_SHAPE, "%s %s is neither per tensor nor per %s of %s", what,
                   shape_str(zp, b1, sizeof b1), rows ? "row" : "column",
                   shape_str(of, b2, sizeof b2));
  }
  /* Zero points of zeros are none: the kernels then skip the correction
   * terms. ORT quantizes weights symmetrically, so B's are zeros, up to the
   * LM head's 65,001 of them every step. */
  if (!rows && all_zero(zp)) return TOLK_OK;
  size_t bytes = (size_t)zp->numel * sizeof(int32_t);
  out->v = op_scratch(c, bytes);
  if (!out->v) return quant_err(c);
  for (int64_t i = 0; i < zp->numel; i++) out->v[i] = quant_get(zp->dtype, zp->data, i);
  return TOLK_OK;
}

/* ------------------------------------------------------------- driver */

/* C (int32, output layout: nbatch × m × n dense) = (A - za)(B - zb); or,
 * with f32, C as float by that epilogue (kern_igemm_f32; its c, ldc are
 * set here, a per-row scale indexed by the row over all batches). */
static tolk_status qmm_compute(struct op_ctx *c, const struct tensor *a, const struct tensor *b,
                               const struct tensor *a_zp, const struct tensor *b_zp,
                               const struct mm_geom *g, void *cout,
                               const struct kern_igemm_f32 *f32) {
  tolk_status st;
  if ((st = quant_need_8bit(c, a, "input A")) || (st = quant_need_8bit(c, b, "input B")))
    return st;
  struct zpv za, zb;
  if ((st = read_zp(c, a_zp, a, true, g, "a_zero_point", &za)) ||
      (st = read_zp(c, b_zp, b, false, g, "b_zero_point", &zb)))
    return st;
  if (g->nbatch == 0 || g->m == 0 || g->n == 0) return TOLK_OK;
  /* A constant B was packed at session creation (mm_pack_b_codes), once
   * for every node and session holding the same bytes. */
  const struct kern_igemm_b *pre = mm_packed_codes(c->state, b);
  /* Fold A's batches into rows when B is one matrix and A's zero point does
   * not repeat per batch. */
  bool fold = g->b_mats == 1 && g->nbatch == g->a_mats && !(za.per == 1 && g->a_mats > 1);
  int64_t rows = fold ? g->m * g->nbatch : g->m;
  size_t work_bytes = kern_igemm_work_size(rows, g->k);
  if (!work_bytes) return op_fail(c, TOLK_ERR_LIMIT, "matmul too large");
  void *work = op_scratch(c, work_bytes);
  if (!work) return quant_err(c);
  struct kern_igemm_b pb = {0};
  if (!pre) {
    size_t pbytes = kern_igemm_pack_b_size(g->n, g->k);
    if (!pbytes) return op_fail(c, TOLK_ERR_LIMIT, "matmul too large");
    pb.data = op_scratch(c, pbytes);
    if (!pb.data) return quant_err(c);
  }
  size_t esz = 1;
  int64_t a_mat = g->m * g->k, b_mat = g->k * g->n;
  int64_t packed_for = -1;
  for (int64_t bi = 0; bi < (fold ? 1 : g->nbatch); bi++) {
    int64_t ai, bj;
    mm_batch(g, bi, &ai, &bj);
    struct kern_igemm p = {
        .m = rows, .n = g->n, .k = g->k,
        .a = (const uint8_t *)a->data + (size_t)(ai * a_mat) * esz, .lda = g->k,
        .a_signed = a->dtype == TOLK_INT8,
        .a_zp = za.v ? za.v + (za.per == 2 ? ai * g->m : 0) : NULL,
        .a_zp_stride = za.per ? 1 : 0,
        .b_zp = zb.v ? zb.v + (zb.per == 2 ? bj * g->n : 0) : NULL,
        .b_zp_stride = zb.per ? 1 : 0,
        .c = (int32_t *)cout + bi * g->m * g->n, .ldc = g->n};
    struct kern_igemm_f32 f;
    if (f32) {
      f = *f32;
      f.c = (float *)cout + bi * g->m * g->n;
      f.ldc = g->n;
      f.row_scale += bi * g->m * f.row_scale_stride;
      p.f32 = &f;
    }
    if (!pre && packed_for != bj) {
      /* A rank-1 B is a k×1 column: the same bytes as a 1-column matrix. */
      kern_igemm_pack_b(g->n, g->k, (const uint8_t *)b->data + (size_t)(bj * b_mat), g->n,
                        false, b->dtype == TOLK_INT8, &pb);
      packed_for = bj;
    }
    kern_igemm_packed(&p, pre ? pre : &pb, work, c->pool);
  }
  return TOLK_OK;
}

/* ------------------------------------------------------- MatMulInteger */

static tolk_status prepare_b1(const struct ir_node *node, int64_t opset, void **state,
                              tolk_error *err) {
  (void)opset;
  return mm_pack_b_codes(node, 1, state, err);
}

static tolk_status run_matmul_integer(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0), *b = op_in(c, 1);
  if (!a || !b) return op_fail(c, TOLK_ERR_INVALID_MODEL, "inputs A and B are required");
  struct mm_geom g;
  tolk_status st = mm_geom_init(c, a, b, &g);
  if (st) return st;
  struct tensor *y = op_output(c, 0, TOLK_INT32, g.out_rank, g.out_dims);
  if (!y) return quant_err(c);
  return qmm_compute(c, a, b, op_in(c, 2), op_in(c, 3), &g, y->data, NULL);
}

/* ------------------------------------------------------- QLinearMatMul */

static inline float f16_round(float v) { return tolk_f16_to_f32(tolk_f32_to_f16(v)); }

/* A scale as fp32 values: one, or `line` of them. */
static tolk_status read_scale(struct op_ctx *c, const struct tensor *t, int64_t line,
                              const char *what, const float **v, bool *per) {
  char b1[128];
  if (!t) return op_fail(c, TOLK_ERR_INVALID_MODEL, "%s is required", what);
  if (t->numel != 1 && t->numel != line)
    return op_fail(c, TOLK_ERR_SHAPE, "%s %s: expected 1 or %lld values", what,
                   shape_str(t, b1, sizeof b1), (long long)line);
  *per = t->numel != 1;
  *v = quant_f32(c, t, false, what);
  return *v ? TOLK_OK : quant_err(c);
}

static tolk_status prepare_b3(const struct ir_node *node, int64_t opset, void **state,
                              tolk_error *err) {
  (void)opset;
  return mm_pack_b_codes(node, 3, state, err);
}

static tolk_status run_qlinear_matmul(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0), *b = op_in(c, 3), *yzp = op_in(c, 7);
  if (!a || !b) return op_fail(c, TOLK_ERR_INVALID_MODEL, "inputs a and b are required");
  struct mm_geom g;
  tolk_status st = mm_geom_init(c, a, b, &g);
  if (st) return st;
  const float *as, *bs, *ys;
  bool a_per, b_per, y_per;
  if ((st = read_scale(c, op_in(c, 1), g.m, "a_scale", &as, &a_per)) ||
      (st = read_scale(c, op_in(c, 4), g.n, "b_scale", &bs, &b_per)) ||
      (st = read_scale(c, op_in(c, 6), g.m, "y_scale", &ys, &y_per)))
    return st;
  int32_t y_dtype = yzp ? yzp->dtype : a->dtype, lo, hi;
  if (!quant_is_8bit(y_dtype) || !quant_range(y_dtype, &lo, &hi))
    return op_fail(c, TOLK_ERR_TYPE, "y_zero_point dtype %s, expected uint8 or int8",
                   tolk_dtype_name((tolk_dtype)y_dtype));
  if (yzp && yzp->numel != 1 && yzp->numel != g.m)
    return op_fail(c, TOLK_ERR_SHAPE, "y_zero_point: expected 1 or %lld values",
                   (long long)g.m);
  struct tensor *y = op_output(c, 0, y_dtype, g.out_rank, g.out_dims);
  if (!y) return quant_err(c);
  size_t cbytes;
  if (!tolk_mul_size((size_t)y->numel, sizeof(int32_t), &cbytes))
    return op_fail(c, TOLK_ERR_LIMIT, "output too large");
  int32_t *acc = op_scratch(c, cbytes ? cbytes : 4);
  if (!acc) return quant_err(c);
  if ((st = qmm_compute(c, a, b, op_in(c, 2), op_in(c, 5), &g, acc, NULL))) return st;
  /* MLAS's requantization: float(acc) * (a_scale * b_scale / y_scale),
   * clamped, rounded half to even, plus the output zero point. The
   * multiplier is computed in fp32 in that order, as ORT does. */
  bool half = op_in(c, 1)->dtype == TOLK_FLOAT16;
  for (int64_t bi = 0; bi < g.nbatch; bi++) {
    for (int64_t i = 0; i < g.m; i++) {
      float sa = as[a_per ? i : 0], sy = ys[y_per ? i : 0];
      int32_t zp = yzp ? quant_get(yzp->dtype, yzp->data, yzp->numel == 1 ? 0 : i) : 0;
      float flo = (float)(lo - zp), fhi = (float)(hi - zp);
      int64_t row = (bi * g.m + i) * g.n;
      for (int64_t j = 0; j < g.n; j++) {
        float mul = sa * bs[b_per ? j : 0] / sy;
        if (half) {
          /* float16 scales: the ONNX reference multiplies them in float16,
           * rounding after each operation. */
          mul = f16_round(f16_round(sa * bs[b_per ? j : 0]) / sy);
        }
        int32_t v = quant_round_clamp((float)acc[row + j] * mul, flo, fhi) + zp;
        quant_set(y_dtype, y->data, row + j, v);
      }
    }
  }
  return TOLK_OK;
}

/* ---------------------------------------- com.microsoft integer -> float */

/* y = float(acc) * (a_scale * b_scale[j]) + bias[j], as MLAS's scale-bias
 * output processor: the epilogue in *f, for a_scale (one value or one per
 * row of all batches: rows of them) and the b_scale and bias inputs. */
static tolk_status float_epilogue(struct op_ctx *c, const struct mm_geom *g, const float *a_scale,
                                  bool a_per_row, const struct tensor *b_scale,
                                  const struct tensor *bias, struct kern_igemm_f32 *f) {
  char b1[128];
  const float *bs = NULL, *bv = NULL;
  bool b_per = false;
  tolk_status st = read_scale(c, b_scale, g->n, "b_scale", &bs, &b_per);
  if (st) return st;
  if (bias) {
    if (bias->numel != g->n)
      return op_fail(c, TOLK_ERR_SHAPE, "bias %s: expected %lld values",
                     shape_str(bias, b1, sizeof b1), (long long)g->n);
    if (!(bv = quant_f32(c, bias, false, "bias"))) return quant_err(c);
  }
  *f = (struct kern_igemm_f32){.row_scale = a_scale, .row_scale_stride = a_per_row,
                               .col_scale = bs, .col_scale_stride = b_per, .bias = bv};
  return TOLK_OK;
}

static tolk_status run_matmul_integer_to_float(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0), *b = op_in(c, 1), *a_scale = op_in(c, 2);
  if (!a || !b || !a_scale || !op_in(c, 3))
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "A, B, a_scale and b_scale are required");
  struct mm_geom g;
  tolk_status st = mm_geom_init(c, a, b, &g);
  if (st) return st;
  if (a_scale->numel != 1)
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "a_scale with %lld values: only a per-tensor "
                   "scale is supported for A", (long long)a_scale->numel);
  const float *as = quant_f32(c, a_scale, false, "a_scale");
  if (!as) return quant_err(c);
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, g.out_rank, g.out_dims);
  if (!y) return quant_err(c);
  struct kern_igemm_f32 f;
  if ((st = float_epilogue(c, &g, as, false, op_in(c, 3), op_in(c, 6), &f))) return st;
  return qmm_compute(c, a, b, op_in(c, 4), op_in(c, 5), &g, y->data, &f);
}

static tolk_status run_dynamic_quantize_matmul(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0), *b = op_in(c, 1);
  if (!a || !b || !op_in(c, 2))
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "A, B and b_scale are required");
  if (a->dtype != TOLK_FLOAT)
    return op_fail(c, TOLK_ERR_TYPE, "input A: dtype %s, expected float",
                   tolk_dtype_name((tolk_dtype)a->dtype));
  struct mm_geom g;
  tolk_status st = mm_geom_init(c, a, b, &g);
  if (st) return st;
  /* A is quantized as a whole to uint8 with ORT's dynamic parameters. */
  float a_scale;
  int32_t zp;
  quant_dynamic_params_u8(a->data, a->numel, &a_scale, &zp);
  uint8_t *qa = op_scratch(c, (size_t)(a->numel > 0 ? a->numel : 1));
  if (!qa) return quant_err(c);
  quant_linear_u8(a->data, qa, a->numel, a_scale, zp);
  struct tensor ta = *a;
  ta.dtype = TOLK_UINT8;
  ta.data = qa;
  ta.nbytes = (size_t)a->numel;
  uint8_t zp8 = (uint8_t)zp;
  struct tensor tz = {.dtype = TOLK_UINT8, .rank = 0, .numel = 1, .data = &zp8, .nbytes = 1};
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, g.out_rank, g.out_dims);
  if (!y) return quant_err(c);
  struct kern_igemm_f32 f;
  if ((st = float_epilogue(c, &g, &a_scale, false, op_in(c, 2), op_in(c, 4), &f))) return st;
  return qmm_compute(c, &ta, b, &tz, op_in(c, 3), &g, y->data, &f);
}

/* tolk_mmi_scaled_def: src/exec/fuse_mmi.c's MatMulInteger → Cast → Mul
 * [→ Add] in one node. Inputs A, B, a_zero_point, b_zero_point (as
 * MatMulInteger's), a_scale (one value, or one per row of A: the [..., 1]
 * scale of a per-row DynamicQuantizeLinear), b_scale (one value or one per
 * column; absent: 1), bias (n values, or absent). */
static tolk_status run_mmi_scaled(struct op_ctx *c) {
  char b1[128];
  const struct tensor *a = op_in(c, 0), *b = op_in(c, 1), *as = op_in(c, 4);
  if (!a || !b || !as) return op_fail(c, TOLK_ERR_INVALID_MODEL, "A, B and a_scale are required");
  struct mm_geom g;
  tolk_status st = mm_geom_init(c, a, b, &g);
  if (st) return st;
  int64_t rows = g.nbatch * g.m;
  bool per_row = as->numel != 1;
  if (per_row && (as->numel != rows || as->rank < 1 || as->dims[as->rank - 1] != 1))
    return op_fail(c, TOLK_ERR_SHAPE, "a_scale %s: expected one value or one per row of A (%lld)",
                   shape_str(as, b1, sizeof b1), (long long)rows);
  const float *asv = quant_f32(c, as, false, "a_scale");
  if (!asv) return quant_err(c);
  static const float one = 1.0f;
  const struct tensor unit = {.dtype = TOLK_FLOAT, .numel = 1, .data = (void *)&one, .nbytes = 4};
  const struct tensor *bs = op_in(c, 5) ? op_in(c, 5) : &unit;
  struct kern_igemm_f32 f;
  if ((st = float_epilogue(c, &g, asv, per_row, bs, op_in(c, 6), &f))) return st;
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, g.out_rank, g.out_dims);
  if (!y) return quant_err(c);
  return qmm_compute(c, a, b, op_in(c, 2), op_in(c, 3), &g, y->data, &f);
}

#define PACKED .packed_input = mm_packed_input, .packed_src_dropped = mm_packed_src_dropped
const struct op_def tolk_ops_quant_matmul[] = {
    {"", "MatMulInteger", 10, 0, prepare_b1, run_matmul_integer, mm_release, PACKED},
    {"", "QLinearMatMul", 10, 0, prepare_b3, run_qlinear_matmul, mm_release, PACKED},
    {"com.microsoft", "MatMulIntegerToFloat", 1, 0, prepare_b1, run_matmul_integer_to_float, mm_release,
     PACKED},
    {"com.microsoft", "DynamicQuantizeMatMul", 1, 0, prepare_b1, run_dynamic_quantize_matmul, mm_release,
     PACKED},
    {0},
};

const struct op_def tolk_mmi_scaled_def = {"tolk.internal", "MatMulIntegerScaled", 1, 0, prepare_b1,
                                           run_mmi_scaled, mm_release, PACKED};
#undef PACKED
