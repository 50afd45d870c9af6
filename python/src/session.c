/*
 * session.c — _Session: a tolk_session (an ONNX model prepared to run) for
 * tolk.InferenceSession. Runs release the GIL; a session may run from
 * several threads at once (tolk_session_run is thread-safe), and close()
 * waits for no one: it refuses while runs are in flight.
 */
#include "ext.h"

#include <stdlib.h>

typedef struct {
  tpy_handle h;
  PyObject *bytes; /* the model's bytes when created from a buffer: the session borrows them */
} session;

static void session_free(void *s) { tolk_session_free(s); }

/* _Session(model: str | bytes, threads: int) */
static int session_init(PyObject *self, PyObject *args, PyObject *kw) {
  session *s = (session *)self;
  static char *names[] = {"model", "threads", NULL};
  PyObject *model;
  int threads = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i", names, &model, &threads)) return -1;
  if (s->h.handle) {
    tpy_fail(TOLK_ERR_INVALID_ARGUMENT, "session already created");
    return -1;
  }
  tolk_session_params p = tolk_session_default_params();
  p.threads = threads;
  tolk_session *out = NULL;
  tolk_error err;
  tolk_status st;
  if (PyBytes_Check(model)) {
    char *data;
    Py_ssize_t size;
    if (PyBytes_AsStringAndSize(model, &data, &size) < 0) return -1;
    Py_BEGIN_ALLOW_THREADS
    st = tolk_session_create_from_buffer(data, (size_t)size, NULL, p, &out, &err);
    Py_END_ALLOW_THREADS
    if (!st) {
      Py_INCREF(model);
      s->bytes = model;
    }
  } else {
    PyObject *path = NULL;
    if (!PyUnicode_FSConverter(model, &path)) return -1;
    const char *cpath = PyBytes_AsString(path);
    Py_BEGIN_ALLOW_THREADS
    st = tolk_session_create_from_file(cpath, p, &out, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
  }
  if (st) {
    tpy_raise(&err);
    return -1;
  }
  s->h.handle = out;
  return 0;
}

static void session_dealloc(PyObject *self) {
  session *s = (session *)self;
  PyTypeObject *tp = Py_TYPE(self);
  tolk_session_free(s->h.handle);
  Py_XDECREF(s->bytes);
  ((freefunc)PyType_GetSlot(tp, Py_tp_free))(self);
  Py_DECREF(tp);
}

/* One declared input or output as (name, dtype name, shape): a dim is an
 * int, its symbol's name, or None when neither is known. */
static PyObject *value_tuple(const tolk_value_info *v) {
  PyObject *shape = PyList_New(v->rank > 0 ? v->rank : 0);
  if (!shape) return NULL;
  for (int i = 0; i < v->rank; i++) {
    PyObject *d = v->dims[i] >= 0    ? PyLong_FromLongLong(v->dims[i])
                  : v->dim_names[i] ? PyUnicode_FromString(v->dim_names[i])
                                    : (Py_INCREF(Py_None), Py_None);
    PyList_SetItem(shape, i, d);
  }
  return Py_BuildValue("(ssN)", v->name, tolk_dtype_name(v->dtype), shape);
}

static PyObject *values(PyObject *self, int outputs) {
  session *s = (session *)self;
  if (tpy_enter(&s->h, "the session") < 0) return NULL;
  size_t n = outputs ? tolk_session_output_count(s->h.handle) : tolk_session_input_count(s->h.handle);
  PyObject *list = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; list && i < n; i++) {
    const tolk_value_info *v = outputs ? tolk_session_output(s->h.handle, i) : tolk_session_input(s->h.handle, i);
    PyObject *t = value_tuple(v);
    if (!t) Py_CLEAR(list);
    else PyList_SetItem(list, (Py_ssize_t)i, t);
  }
  tpy_leave(&s->h);
  return list;
}

static PyObject *session_inputs(PyObject *self, PyObject *unused) { return values(self, 0); }
static PyObject *session_outputs(PyObject *self, PyObject *unused) { return values(self, 1); }

/* The arrays behind a run: names and tensors in, tensors out. */
struct run {
  size_t n_in, n_out;
  const char **in_names, **out_names;
  tolk_tensor **in, **out;
  Py_buffer *views;             /* views[i] is held while in[i] is set */
  PyObject *keep_in, *keep_out; /* the UTF-8 names */
};

static void run_free(struct run *r) {
  for (size_t i = 0; r->in && i < r->n_in; i++)
    if (r->in[i]) {
      tolk_tensor_free(r->in[i]);
      PyBuffer_Release(&r->views[i]);
    }
  for (size_t i = 0; r->out && i < r->n_out; i++) tolk_tensor_free(r->out[i]);
  free(r->in_names);
  free(r->out_names);
  free(r->in);
  free(r->out);
  free(r->views);
  Py_XDECREF(r->keep_in);
  Py_XDECREF(r->keep_out);
}

/* Binds the feeds: the tensors borrow the arrays' buffers until run_free. */
static int run_bind(struct run *r, tolk_session *ss, PyObject *out_names, PyObject *in_names, PyObject *arrays) {
  r->n_in = (size_t)PyList_Size(in_names);
  r->n_out = out_names == Py_None ? tolk_session_output_count(ss) : (size_t)PyList_Size(out_names);
  size_t ni = r->n_in ? r->n_in : 1, no = r->n_out ? r->n_out : 1;
  r->in_names = calloc(ni, sizeof *r->in_names);
  r->out_names = calloc(no, sizeof *r->out_names);
  r->in = calloc(ni, sizeof *r->in);
  r->out = calloc(no, sizeof *r->out);
  r->views = calloc(ni, sizeof *r->views);
  if (!r->in_names || !r->out_names || !r->in || !r->out || !r->views) {
    PyErr_NoMemory();
    return -1;
  }
  if (tpy_utf8_list(in_names, &r->keep_in, r->in_names) < 0) return -1;
  if (out_names != Py_None && tpy_utf8_list(out_names, &r->keep_out, r->out_names) < 0) return -1;
  for (size_t i = 0; i < r->n_in; i++)
    if (!(r->in[i] = tpy_tensor_borrow(PyList_GetItem(arrays, (Py_ssize_t)i), &r->views[i], r->in_names[i])))
      return -1;
  return 0;
}

/* run(output_names: list[str] | None, input_names: list[str], arrays: list) -> list[_Tensor] */
static PyObject *session_run(PyObject *self, PyObject *args) {
  session *s = (session *)self;
  PyObject *out_names, *in_names, *arrays;
  if (!PyArg_ParseTuple(args, "OO!O!", &out_names, &PyList_Type, &in_names, &PyList_Type, &arrays)) return NULL;
  if (out_names != Py_None && !PyList_Check(out_names))
    return PyErr_Format(PyExc_TypeError, "output_names must be a list or None");
  if (PyList_Size(in_names) != PyList_Size(arrays))
    return PyErr_Format(PyExc_ValueError, "%zd input names for %zd arrays", PyList_Size(in_names),
                        PyList_Size(arrays));
  if (tpy_enter(&s->h, "the session") < 0) return NULL;
  struct run r = {0};
  PyObject *result = NULL;
  if (run_bind(&r, s->h.handle, out_names, in_names, arrays) == 0) {
    tolk_error err;
    tolk_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tolk_session_run(s->h.handle, r.n_in, r.in_names, (const tolk_tensor *const *)r.in, r.n_out,
                          out_names == Py_None ? NULL : r.out_names, r.out, NULL, &err);
    Py_END_ALLOW_THREADS
    if (st) tpy_raise(&err);
    else result = PyList_New((Py_ssize_t)r.n_out);
    for (size_t i = 0; result && i < r.n_out; i++) {
      PyObject *t = tpy_tensor_new(r.out[i]);
      r.out[i] = NULL; /* the _Tensor owns it now, or freed it */
      if (!t) Py_CLEAR(result);
      else PyList_SetItem(result, (Py_ssize_t)i, t);
    }
  }
  run_free(&r);
  tpy_leave(&s->h);
  return result;
}

static PyObject *session_close(PyObject *self, PyObject *unused) {
  session *s = (session *)self;
  if (s->h.handle && tpy_close(&s->h, session_free, "the session") < 0) return NULL;
  Py_CLEAR(s->bytes);
  Py_RETURN_NONE;
}

static PyMethodDef session_methods[] = {
    {"inputs", session_inputs, METH_NOARGS, "[(name, dtype, shape)] of the inputs to feed."},
    {"outputs", session_outputs, METH_NOARGS, "[(name, dtype, shape)] of the outputs."},
    {"run", session_run, METH_VARARGS, "run(output_names, input_names, arrays) -> [_Tensor]"},
    {"close", session_close, METH_NOARGS, "Frees the session (refused while runs are in flight)."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot session_slots[] = {
    {Py_tp_new, PyType_GenericNew},  {Py_tp_init, session_init},
    {Py_tp_dealloc, session_dealloc}, {Py_tp_methods, session_methods},
    {Py_tp_doc, "_Session(model, threads=0): an ONNX model prepared to run."},
    {0, NULL}};

PyType_Spec tpy_session_spec = {"tolk._tolk._Session", sizeof(session), 0, Py_TPFLAGS_DEFAULT, session_slots};
