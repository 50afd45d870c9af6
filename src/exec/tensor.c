/*
 * tensor.c — the public tolk_tensor API.
 */
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/* Inline data starts after the header, 64-byte aligned. */
#define INLINE_HEADER ((sizeof(struct tolk_tensor) + 63) & ~(size_t)63)

/* Fills t's shape and byte count from the arguments, checking everything a
 * caller can get wrong. */
static tolk_status check_shape(struct tensor *t, tolk_dtype dtype, int rank,
                               const int64_t *dims, tolk_error *err) {
  if (dtype == TOLK_STRING)
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "string tensors are not supported");
  size_t es = op_dtype_size(dtype);
  if (!es && dtype > TOLK_BFLOAT16 && dtype <= 24) /* float8, int4, float4 */
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "tensors of ONNX dtype %d are not supported",
                     (int)dtype);
  if (!es) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "unknown dtype %d", (int)dtype);
  if (rank < 0 || rank > IR_MAX_RANK)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "rank %d outside [0, %d]", rank,
                     IR_MAX_RANK);
  if (rank > 0 && !dims)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "dims is NULL for rank %d", rank);
  memset(t, 0, sizeof *t);
  t->dtype = dtype;
  if (!tensor_set_shape(t, rank, dims))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                     "shape has a negative dim or its element count overflows");
  if ((uint64_t)t->numel > SIZE_MAX || !tolk_mul_size((size_t)t->numel, es, &t->nbytes))
    return tolk_fail(err, TOLK_ERR_LIMIT, "tensor size overflows");
  return TOLK_OK;
}

tolk_status tolk_tensor_create(tolk_dtype dtype, int rank, const int64_t *dims,
                               const void *data, size_t nbytes, tolk_tensor **out,
                               tolk_error *err) {
  if (!out) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  struct tensor t;
  tolk_status st = check_shape(&t, dtype, rank, dims, err);
  if (st) return st;
  if (data && nbytes != t.nbytes)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                     "%zu data bytes given for a %s tensor of %lld elements (%zu bytes)",
                     nbytes, tolk_dtype_name(dtype), (long long)t.numel, t.nbytes);
  struct tolk_tensor *x = exec_tensor_new(&t);
  if (!x) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "tensor of %zu bytes", t.nbytes);
  if (t.nbytes) {
    if (data)
      memcpy(x->t.data, data, t.nbytes);
    else
      memset(x->t.data, 0, t.nbytes);
  }
  *out = x;
  return TOLK_OK;
}

tolk_status tolk_tensor_wrap(tolk_dtype dtype, int rank, const int64_t *dims, void *data,
                             size_t nbytes, tolk_tensor **out, tolk_error *err) {
  if (!out) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  struct tensor t;
  tolk_status st = check_shape(&t, dtype, rank, dims, err);
  if (st) return st;
  if (nbytes != t.nbytes)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                     "%zu data bytes given for a %s tensor of %lld elements (%zu bytes)",
                     nbytes, tolk_dtype_name(dtype), (long long)t.numel, t.nbytes);
  if (t.nbytes && !data)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "data is NULL for %zu bytes", t.nbytes);
  size_t es = op_dtype_size(dtype);
  if (data && ((uintptr_t)data % es) != 0)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                     "data %p is not aligned for %s elements", data, tolk_dtype_name(dtype));
  struct tolk_tensor *x = calloc(1, sizeof *x);
  if (!x) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "tensor header");
  x->t = t;
  x->t.data = t.nbytes ? data : exec_zero_area();
  x->borrowed = 1;
  *out = x;
  return TOLK_OK;
}

struct tolk_tensor *exec_tensor_new(const struct tensor *shape) {
  size_t total;
  if (!tolk_add_size(INLINE_HEADER, shape->nbytes, &total)) return NULL;
  struct tolk_tensor *x = NULL;
  if (posix_memalign((void **)&x, 64, total)) return NULL;
  memset(x, 0, sizeof *x);
  x->t = *shape;
  x->t.data = (unsigned char *)x + INLINE_HEADER;
  return x;
}

void tolk_tensor_free(tolk_tensor *t) {
  if (!t) return;
  free(t->owned);
  free(t);
}

tolk_dtype tolk_tensor_dtype(const tolk_tensor *t) { return (tolk_dtype)t->t.dtype; }
int tolk_tensor_rank(const tolk_tensor *t) { return t->t.rank; }
const int64_t *tolk_tensor_dims(const tolk_tensor *t) { return t->t.dims; }
int64_t tolk_tensor_numel(const tolk_tensor *t) { return t->t.numel; }
size_t tolk_tensor_nbytes(const tolk_tensor *t) { return t->t.nbytes; }
void *tolk_tensor_data(const tolk_tensor *t) { return t->t.data; }
