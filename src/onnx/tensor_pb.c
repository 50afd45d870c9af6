/*
 * tensor_pb.c — tolk_tensor_load_pb: a TensorProto file (the ONNX test
 * data's .pb inputs and outputs) as a public tensor. The decoder (tensor.c)
 * builds an IR tensor in a scratch arena, which the public tensor then copies,
 * so nothing of the file or the arena outlives the call.
 */
#include "onnx.h"

tolk_status tolk_tensor_load_pb(const char *path, tolk_tensor **out, tolk_error *err) {
  if (!out) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!path) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "path is NULL");
  struct tolk_arena arena;
  tolk_arena_init(&arena, 0);
  struct ir_tensor *t = NULL;
  tolk_status st = onnx_tensor_load_file(path, &arena, &t, err);
  if (!st) {
    if (t->dtype == TOLK_STRING)
      st = tolk_fail(err, TOLK_ERR_UNSUPPORTED, "string tensors are not supported");
    else
      st = tolk_tensor_create((tolk_dtype)t->dtype, t->rank, t->dims, t->data, t->nbytes, out, err);
    if (st) tolk_error_prefix(err, "%s", path);
  }
  tolk_arena_release(&arena);
  return st;
}
