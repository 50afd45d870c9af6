/*
 * onnx_pbw.h — a tiny protobuf writer for the ONNX tests: builds ModelProto /
 * GraphProto / NodeProto / TensorProto bytes in memory so that each test
 * states exactly the (valid or hostile) message it feeds the loader, without
 * binary fixtures. Header-only; every function aborts the test on
 * out-of-memory, which is fine in a test.
 */
#ifndef TOLK_ONNX_PBW_H
#define TOLK_ONNX_PBW_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pbw {
  uint8_t *p;
  size_t n, cap;
};

static inline void pbw_raw(struct pbw *b, const void *data, size_t len) {
  if (b->n + len > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + len) cap *= 2;
    uint8_t *q = realloc(b->p, cap);
    if (!q) {
      fprintf(stderr, "pbw: out of memory\n");
      exit(2);
    }
    b->p = q;
    b->cap = cap;
  }
  if (len) memcpy(b->p + b->n, data, len);
  b->n += len;
}

static inline void pbw_free(struct pbw *b) {
  free(b->p);
  b->p = NULL;
  b->n = b->cap = 0;
}

static inline void pbw_varint(struct pbw *b, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  do {
    tmp[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) tmp[n] |= 0x80;
    n++;
  } while (v);
  pbw_raw(b, tmp, n);
}

static inline void pbw_key(struct pbw *b, uint32_t field, int wire) {
  pbw_varint(b, ((uint64_t)field << 3) | (uint64_t)wire);
}

/* field = varint (int64 values are written as their two's complement). */
static inline void pbw_int(struct pbw *b, uint32_t field, int64_t v) {
  pbw_key(b, field, 0);
  pbw_varint(b, (uint64_t)v);
}

static inline void pbw_fixed32(struct pbw *b, uint32_t field, uint32_t v) {
  uint8_t t[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  pbw_key(b, field, 5);
  pbw_raw(b, t, 4);
}

static inline void pbw_float(struct pbw *b, uint32_t field, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  pbw_fixed32(b, field, u);
}

static inline void pbw_fixed64(struct pbw *b, uint32_t field, uint64_t v) {
  uint8_t t[8];
  for (int i = 0; i < 8; i++) t[i] = (uint8_t)(v >> (8 * i));
  pbw_key(b, field, 1);
  pbw_raw(b, t, 8);
}

static inline void pbw_bytes(struct pbw *b, uint32_t field, const void *data, size_t len) {
  pbw_key(b, field, 2);
  pbw_varint(b, len);
  pbw_raw(b, data, len);
}

static inline void pbw_str(struct pbw *b, uint32_t field, const char *s) {
  pbw_bytes(b, field, s, strlen(s));
}

/* Appends `sub` as a length-delimited field and frees it. */
static inline void pbw_msg(struct pbw *b, uint32_t field, struct pbw *sub) {
  pbw_bytes(b, field, sub->p, sub->n);
  pbw_free(sub);
}

/* ---------------------------------------------------------------- ONNX helpers */

/* A TensorShapeProto-bearing TypeProto for a tensor of `dtype` with dims;
 * a dim of -1 is written as dim_param `sym`. */
static inline void pbw_tensor_type(struct pbw *b, uint32_t field, int dtype, int rank,
                                   const int64_t *dims, const char *sym) {
  struct pbw shape = {0}, tt = {0}, tp = {0};
  for (int i = 0; i < rank; i++) {
    struct pbw d = {0};
    if (dims[i] < 0) pbw_str(&d, 2, sym);
    else pbw_int(&d, 1, dims[i]);
    pbw_msg(&shape, 1, &d);
  }
  pbw_int(&tt, 1, dtype);
  if (rank >= 0) pbw_msg(&tt, 2, &shape);
  else pbw_free(&shape);
  pbw_msg(&tp, 1, &tt);
  pbw_msg(b, field, &tp);
}

/* ValueInfoProto {name, tensor type}. */
static inline void pbw_value_info(struct pbw *b, uint32_t field, const char *name, int dtype, int rank,
                                  const int64_t *dims) {
  struct pbw vi = {0};
  pbw_str(&vi, 1, name);
  pbw_tensor_type(&vi, 2, dtype, rank, dims, "N");
  pbw_msg(b, field, &vi);
}

/* NodeProto as field `field` of g (1 in GraphProto, 7 in FunctionProto);
 * inputs and outputs are NULL-terminated lists ("" = omitted); attrs (may be
 * NULL) holds already-encoded attribute fields and is freed. */
static inline void pbw_node_f(struct pbw *g, uint32_t field, const char *op, const char *name,
                              const char *const *in, const char *const *out, struct pbw *attrs) {
  struct pbw n = {0};
  for (; in && *in; in++) pbw_str(&n, 1, *in);
  for (; out && *out; out++) pbw_str(&n, 2, *out);
  if (name) pbw_str(&n, 3, name);
  pbw_str(&n, 4, op);
  if (attrs) pbw_raw(&n, attrs->p, attrs->n), pbw_free(attrs);
  pbw_msg(g, field, &n);
}

static inline void pbw_node(struct pbw *g, const char *op, const char *name, const char *const *in,
                            const char *const *out, struct pbw *attrs) {
  pbw_node_f(g, 1, op, name, in, out, attrs);
}

/* A TensorProto with raw_data.  A non-NULL doc goes into doc_string (field 12),
 * written before the payload: tests use it to shift where the payload lands. */
static inline void pbw_tensor(struct pbw *b, uint32_t field, const char *name, int dtype, int rank,
                              const int64_t *dims, const char *doc, const void *data,
                              size_t nbytes) {
  struct pbw t = {0};
  for (int i = 0; i < rank; i++) pbw_int(&t, 1, dims[i]);
  pbw_int(&t, 2, dtype);
  pbw_str(&t, 8, name);
  if (doc) pbw_str(&t, 12, doc);
  pbw_bytes(&t, 9, data, nbytes);
  pbw_msg(b, field, &t);
}

/* A float TensorProto with raw_data. */
static inline void pbw_float_tensor(struct pbw *b, uint32_t field, const char *name, int rank,
                                    const int64_t *dims, const float *data, size_t n) {
  pbw_tensor(b, field, name, 1, rank, dims, NULL, data, n * sizeof *data);
}

/* An INT AttributeProto appended to attrs (the node's field-5 list). */
static inline void pbw_attr_int(struct pbw *attrs, const char *name, int64_t v) {
  struct pbw a = {0};
  pbw_str(&a, 1, name);
  pbw_int(&a, 3, v);
  pbw_int(&a, 20, 2); /* AttributeProto.INT */
  pbw_msg(attrs, 5, &a);
}

/* ModelProto{ir_version, opset_import{"" : opset}, producer, graph}. */
static inline void pbw_model(struct pbw *m, int64_t ir, int64_t opset, struct pbw *graph) {
  struct pbw o = {0};
  pbw_int(m, 1, ir);
  pbw_str(m, 2, "tolk-test");
  pbw_int(&o, 2, opset);
  pbw_msg(m, 8, &o);
  pbw_msg(m, 7, graph);
}

/* The small valid model used across tests:
 *   y = Relu(Add(x, w)), x: float [N, 3] (N symbolic), w: float [3]. */
static inline void pbw_small_model(struct pbw *m) {
  struct pbw g = {0};
  static const float w[3] = {1.0f, -2.0f, 0.5f};
  int64_t wd[1] = {3}, xd[2] = {-1, 3};
  pbw_node(&g, "Add", "add0", (const char *const[]){"x", "w", NULL}, (const char *const[]){"s", NULL}, NULL);
  pbw_node(&g, "Relu", "relu0", (const char *const[]){"s", NULL}, (const char *const[]){"y", NULL}, NULL);
  pbw_str(&g, 2, "small");
  pbw_float_tensor(&g, 5, "w", 1, wd, w, 3);
  pbw_value_info(&g, 11, "x", 1, 2, xd);
  pbw_value_info(&g, 12, "y", 1, 2, xd);
  pbw_model(m, 8, 13, &g);
}

#endif /* TOLK_ONNX_PBW_H */
