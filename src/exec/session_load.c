/*
 * session_load.c — the public ways to create a session: from a loaded model
 * (borrowed), or from a file or buffer (the session loads and owns the
 * model). Kept apart from session.c so the compiler of graphs depends only on
 * the IR, not on the loader. At opt level EXTENDED or ALL, and for a
 * key/value-cache session at BASIC, the graph is rewritten first
 * (optimize.c), on a model the session owns.
 */
#include "exec.h"
#include "onnx/onnx.h"

static void free_model(struct tolk_model *m) { tolk_model_free(m); }
static tolk_status adopt(tolk_model *m, tolk_session_params params, tolk_session **out,
                         tolk_error *err);

/* EXTENDED and ALL rewrite the graph first (the passes of tolk optimize but
 * folding, which the session does itself): the same fusions as a file
 * `tolk optimize` wrote. */
static bool rewrites_all(const tolk_session_params *p) {
  return p->opt_level == TOLK_OPT_EXTENDED || p->opt_level == TOLK_OPT_ALL;
}

/* A key/value-cache session at BASIC rewrites too, with the fusions that
 * keep the graph's numbers (exec_optimize_kv_ir): a decoder step at batch 1
 * is a few hundred small nodes, and a residual Add, a bias Add and a
 * LayerNorm that become one node are two dispatches fewer, 36 a step of a
 * six-layer Marian decoder. */
static bool rewrites_kv(const tolk_session_params *p) {
  return p->kv_cache && p->opt_level == TOLK_OPT_BASIC;
}

static bool rewrites(const tolk_session_params *p) { return rewrites_all(p) || rewrites_kv(p); }

tolk_status tolk_session_create(const tolk_model *model, tolk_session_params params,
                                tolk_session **out, tolk_error *err) {
  if (!out) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!model) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "model is NULL");
  if (!rewrites(&params)) return exec_session_create_ir(tolk_model_ir(model), &params, NULL, out, err);
  /* A private copy to rewrite, so the caller's model and its other
   * sessions stay as they are; it gives back packed weights' pages as the
   * model would. */
  tolk_model *copy = NULL;
  tolk_status st = onnx_model_load_again(model, &copy, err);
  if (st) return st;
  return adopt(copy, params, out, err);
}

static tolk_status adopt(tolk_model *m, tolk_session_params params, tolk_session **out,
                         tolk_error *err) {
  tolk_status st = TOLK_OK;
  if (rewrites_all(&params))
    st = exec_optimize_ir(tolk_model_ir(m), params.opt_level, false, params.kv_cache != 0, NULL, NULL, NULL, err);
  else if (rewrites_kv(&params))
    st = exec_optimize_kv_ir(tolk_model_ir(m), err);
  if (!st) st = exec_session_create_ir(tolk_model_ir(m), &params, NULL, out, err);
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
