/*
 * onnx.h — internal interface of the ONNX reader (src/onnx/).
 *
 * load.c maps a .onnx file and decodes ModelProto into the IR (src/ir/ir.h);
 * tensor.c decodes TensorProto (every storage form and dtype); external.c
 * resolves external data inside the model's folder; check.c is the checker;
 * info.c and tensor_pb.c are the public read-only view of a model and the
 * public TensorProto reader (tolk.h). Other parts of tolk (executor, tests)
 * use the functions below; everything else here is shared between those
 * files only.
 */
#ifndef TOLK_ONNX_H
#define TOLK_ONNX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../core/core.h"
#include "../core/pb.h"
#include "../ir/ir.h"

/* ONNX data types past BFLOAT16, as tolk_dtype numbers them: decoded and
 * stored (4-bit types packed two per byte, low nibble first), but not
 * computed with. */
enum {
  ONNX_FLOAT8E4M3FN = TOLK_FLOAT8E4M3FN,
  ONNX_FLOAT8E4M3FNUZ = TOLK_FLOAT8E4M3FNUZ,
  ONNX_FLOAT8E5M2 = TOLK_FLOAT8E5M2,
  ONNX_FLOAT8E5M2FNUZ = TOLK_FLOAT8E5M2FNUZ,
  ONNX_UINT4 = TOLK_UINT4,
  ONNX_INT4 = TOLK_INT4,
  ONNX_FLOAT4E2M1 = TOLK_FLOAT4E2M1,
  ONNX_FLOAT8E8M0 = TOLK_FLOAT8E8M0,
  ONNX_DTYPE_MAX = TOLK_FLOAT8E8M0
};

/* Densifying a sparse tensor may not produce more than this many bytes: the
 * dense size is declared, not backed by bytes in the file. */
#define ONNX_SPARSE_DENSE_MAX ((size_t)256 << 20)

/* Nesting bound for TypeProto, SequenceProto and OptionalProto. */
#define ONNX_TYPE_DEPTH_MAX 32

/* The model handle behind tolk_model. */
struct tolk_model {
  struct ir_model ir;
  const uint8_t *map; /* the mapped (or borrowed) model bytes */
  size_t map_size;
  bool mapped;        /* map came from mmap and is ours to unmap */
  bool file_view;     /* map is another model's file mapping (onnx_model_load_again) */
  char *dir;          /* folder for external data (malloc'd), or NULL */
  char *path;         /* the model's path as given (malloc'd), or NULL */
  tolk_model_params params;
};

/* Loads src's bytes anew into a model of its own (same folder and params),
 * borrowing src's mapping, which must outlive it: a private IR to rewrite.
 * Its tensors know their pages are src's file's (ir_tensor.file_pages). */
tolk_status onnx_model_load_again(const tolk_model *src, tolk_model **out, tolk_error *err);

/* The IR of a loaded model; borrowed, lives as long as `m`. */
struct ir_model *tolk_model_ir(const tolk_model *m);

/* Writes m as a ModelProto into b (write.c): the stored bytes with the main
 * graph as its IR now stands, after passes edited it in place
 * (src/ir/rewrite.h). TOLK_ERR_NO_MEMORY / TOLK_ERR_LIMIT from the buffer. */
struct pbw;
tolk_status onnx_write_model(struct pbw *b, const tolk_model *m, tolk_error *err);

/* Decodes one serialized TensorProto (as stored in the backend test data's
 * test_data_set_N/input_0.pb) into *out. The tensor, its dims, name and data
 * are allocated in `arena` and copied out of `buf`, so the caller may free or
 * unmap `buf` afterwards; data is native and aligned for its dtype. External
 * data is refused. On failure *out is NULL and err says why. */
tolk_status onnx_tensor_decode(const uint8_t *buf, size_t len, struct tolk_arena *arena,
                               struct ir_tensor **out, tolk_error *err);

/* onnx_tensor_decode on the contents of the file at `path`. */
tolk_status onnx_tensor_load_file(const char *path, struct tolk_arena *arena,
                                  struct ir_tensor **out, tolk_error *err);

/* A decoded test-data value: a tensor, a sequence, a map or an optional
 * (SequenceProto / MapProto / OptionalProto in onnx-data.proto). */
enum onnx_value_kind {
  ONNX_VALUE_TENSOR = 1,
  ONNX_VALUE_SPARSE_TENSOR = 2, /* densified into `tensor` */
  ONNX_VALUE_SEQUENCE = 3,
  ONNX_VALUE_MAP = 4,
  ONNX_VALUE_OPTIONAL = 5
};

struct onnx_value {
  enum onnx_value_kind kind;
  const char *name;
  struct ir_tensor *tensor;  /* TENSOR / SPARSE_TENSOR */
  struct onnx_value **items; /* SEQUENCE elements; OPTIONAL: 0 or 1 item */
  size_t n_items;
  struct ir_tensor *keys;    /* MAP: keys as a 1-D tensor (int64 or string) */
  struct onnx_value *values; /* MAP: a SEQUENCE of the values */
};

/* Decodes one serialized value of `kind` (how the model declares the input
 * or output: a TensorProto for tensors, else the onnx-data.proto message),
 * copying everything into `arena`. */
tolk_status onnx_value_decode(const uint8_t *buf, size_t len, enum onnx_value_kind kind,
                              struct tolk_arena *arena, struct onnx_value **out,
                              tolk_error *err);

/* Bits per element of an ONNX dtype (4 for the packed 4-bit types, 64 for
 * complex64, 128 for complex128, 8 * sizeof(struct ir_bytes) for strings);
 * 0 for UNDEFINED and unknown values. */
size_t onnx_dtype_bits(int32_t dtype);

/* Bytes needed for `numel` elements of `dtype` (4-bit types rounded up);
 * false when it overflows or the dtype is unknown. */
bool onnx_dtype_nbytes(int32_t dtype, int64_t numel, size_t *out);

/* ------------------------------------------------------------ loader internals */

/* State of one model decode, shared by load.c, tensor.c and external.c. */
struct onnx_loader {
  struct ir_model *m;
  struct tolk_arena *arena;
  const uint8_t *base; /* the whole model buffer */
  size_t size;
  const char *dir;     /* folder for external data, or NULL */
  tolk_model_params params;
  bool copy;           /* never point into `base` (buffer not kept) */
  bool file_mapped;    /* `base` is a read-only private file mapping (ours, or
                          borrowed: onnx_model_load_again): pages whose
                          bytes were copied out may be dropped from RSS */
  bool borrow_misaligned; /* set while decoding graph initializers: raw_data
                             not aligned for its dtype stays in place too
                             (ir_tensor.misaligned) */
  tolk_error *err;
};

/* Decodes the TensorProto in [p, p+len) into a new arena tensor. With
 * l->copy false, raw data that is suitably aligned stays in place. External
 * data is recorded and, when l->params.load_external_data is set and l->dir
 * is known, resolved through onnx_external_resolve(). */
tolk_status onnx_tensor_proto(struct onnx_loader *l, const uint8_t *p, size_t len,
                              struct ir_tensor **out);

/* Decodes a SparseTensorProto and densifies it into *out (bounded by
 * ONNX_SPARSE_DENSE_MAX). */
tolk_status onnx_sparse_tensor_proto(struct onnx_loader *l, const uint8_t *p, size_t len,
                                     struct ir_tensor **out);

/* Decodes a TypeProto into *t (arena-allocated dims). Nested sequence /
 * optional / map types are walked iteratively, bounded by
 * ONNX_TYPE_DEPTH_MAX. */
tolk_status onnx_type_proto(struct onnx_loader *l, const uint8_t *p, size_t len,
                            struct ir_type *t);

/* Checks a declared external location, maps its file (once per model) and
 * points t->data at the tensor's bytes. The location must be relative, must
 * not contain "..", and must resolve (following symlinks) to a regular file
 * inside l->dir that has a single hard link. */
tolk_status onnx_external_resolve(struct onnx_loader *l, struct ir_tensor *t);

/* Checks t's external reference without the loader (for the checker on a
 * model loaded with load_external_data = 0): same rules, stat only. */
tolk_status onnx_external_verify(const char *dir, const struct ir_tensor *t,
                                 tolk_error *err);

/* Unmaps every external file of the model. */
void onnx_external_release(struct ir_model *m);

/* A readable description of a field-level decoding failure. */
tolk_status onnx_malformed(struct onnx_loader *l, const char *what, size_t offset,
                           const char *why);

/* An arena copy of a protobuf string, NUL-terminated; sets a "contains a NUL
 * byte" error for names (where `strict`), since C strings cannot hold it. */
const char *onnx_str(struct onnx_loader *l, const struct pb_field *f);

#endif /* TOLK_ONNX_H */
