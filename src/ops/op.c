/*
 * op.c — the parts of op.h that need no executor: the error and dtype checks
 * kernels report through, and the shape helpers. They are defined here, in
 * the operators' layer, so that kernels call into src/exec/ only for what
 * the executor alone can do (op_output, op_scratch, op_parallel_for,
 * op_run_subgraph, op_kv_*), and the executor uses these as any caller
 * below it would.
 */
#include <stdarg.h>
#include <stdio.h>

#include "op.h"

tolk_status op_fail(struct op_ctx *c, tolk_status status, const char *fmt, ...) {
  if (c->err) {
    va_list ap;
    va_start(ap, fmt);
    c->err->status = status;
    vsnprintf(c->err->message, sizeof c->err->message, fmt, ap);
    va_end(ap);
  }
  return status;
}

tolk_status op_need_float(struct op_ctx *c, const struct tensor *t, const char *what) {
  if (!t) return op_fail(c, TOLK_ERR_INVALID_MODEL, "%s is required", what);
  if (t->dtype != TOLK_FLOAT)
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "%s: dtype %s (only float is supported)", what,
                   tolk_dtype_name((tolk_dtype)t->dtype));
  return TOLK_OK;
}

bool tensor_set_shape(struct tensor *t, int rank, const int64_t *dims) {
  if (rank < 0 || rank > IR_MAX_RANK) return false;
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0 || !tolk_mul_i64(n, dims[i], &n)) return false;
    t->dims[i] = dims[i];
  }
  t->rank = rank;
  t->numel = n;
  return true;
}

size_t op_dtype_size(int32_t dtype) {
  if (dtype == TOLK_STRING) return 0;
  return tolk_dtype_size((tolk_dtype)dtype);
}

const char *shape_str(const struct tensor *t, char *buf, size_t size) {
  if (!size) return buf;
  size_t n = 0;
  buf[0] = '\0';
  int w = snprintf(buf, size, "[");
  if (w > 0) n = (size_t)w;
  for (int i = 0; i < t->rank && n < size; i++) {
    w = snprintf(buf + n, size - n, i ? ", %lld" : "%lld", (long long)t->dims[i]);
    if (w < 0) break;
    n += (size_t)w;
  }
  if (n < size) snprintf(buf + n, size - n, "]");
  return buf;
}
