/*
 * session_load.c — the public ways to create a session: from a loaded model
 * (borrowed), or from a file or buffer (the session loads and owns the
 * model). Kept apart from session.c so the compiler of graphs depends only on
 * the IR, not on the loader.
 */
#include "exec.h"
#include "onnx/onnx.h"

static void free_model(struct tolk_model *m) { tolk_model_free(m); }

tolk_status tolk_session_create(const tolk_model *model, tolk_session_params params,
                                tolk_session **out, tolk_error *err) {
  if (!out) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!model) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "model is NULL");
  return exec_session_create_ir(tolk_model_ir(model), &params, NULL, out, err);
}

static tolk_status adopt(tolk_model *m, tolk_session_params params, tolk_session **out,
                         tolk_error *err) {
  tolk_status st = exec_session_create_ir(tolk_model_ir(m), &params, NULL, out, err);
  if (st) {
    tolk_model_free(m);
    return st;
  }
  (*out)->owned_model = m;
  (*out)->free_model = free_model;
  return TOLK_OK;
}

tolk_status tolk_session_create_from_file(const char *path, tolk_session_params params,
                                          tolk_session **out, tolk_error *err) {
  if (!out) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  tolk_model *m = NULL;
  tolk_status st = tolk_model_load(path, tolk_model_default_params(), &m, err);
  if (st) return st;
  return adopt(m, params, out, err);
}

tolk_status tolk_session_create_from_buffer(const void *data, size_t size, const char *base_dir,
                                            tolk_session_params params, tolk_session **out,
                                            tolk_error *err) {
  if (!out) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  tolk_model *m = NULL;
  tolk_status st = tolk_model_load_buffer(data, size, base_dir, tolk_model_default_params(), &m, err);
  if (st) return st;
  return adopt(m, params, out, err);
}
