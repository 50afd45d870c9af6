/*
 * module.c — tolk._tolk: the exception classes (one per tolk_status), the
 * _Tensor type that hands a run's outputs to numpy without a copy, the
 * helpers the handle types share, and the module itself. The handle types
 * are in session.c (InferenceSession) and text.c (Tokenizer, Translator);
 * tolk/__init__.py builds the public API on them.
 */
#include "ext.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ errors */

static const struct {
  tolk_status status;
  const char *name, *doc;
} error_classes[] = {
    {TOLK_ERR_INVALID_ARGUMENT, "InvalidArgument", "A caller passed something unusable (closed handle, bad feed)."},
    {TOLK_ERR_IO, "IOFailure", "A file could not be opened, read or mapped."},
    {TOLK_ERR_MALFORMED, "Malformed", "The bytes are not a valid encoding (protobuf, JSON)."},
    {TOLK_ERR_INVALID_MODEL, "InvalidModel", "Well-formed, but the model violates ONNX's rules."},
    {TOLK_ERR_UNSUPPORTED, "Unsupported", "Valid, but tolk cannot do it (yet)."},
    {TOLK_ERR_NO_MEMORY, "OutOfMemory", "An allocation failed."},
    {TOLK_ERR_LIMIT, "LimitExceeded", "A size or depth bound was exceeded."},
    {TOLK_ERR_SHAPE, "ShapeMismatch", "An input's shape does not match the model's."},
    {TOLK_ERR_TYPE, "TypeMismatch", "An input's element type does not match the model's."},
    {TOLK_ERR_NOT_FOUND, "NotFound", "No such file, input, output or key."},
    {TOLK_ERR_INTERNAL, "InternalError", "A bug in tolk: please report it."},
    {TOLK_ERR_CANCELLED, "Cancelled", "The call was cancelled."},
};
#define N_ERRORS (sizeof error_classes / sizeof error_classes[0])

static PyObject *tolk_error_base;
static PyObject *error_objects[N_ERRORS];

static PyObject *error_class(tolk_status status) {
  for (size_t i = 0; i < N_ERRORS; i++)
    if (error_classes[i].status == status) return error_objects[i];
  return tolk_error_base;
}

PyObject *tpy_raise(const tolk_error *err) {
  PyErr_SetString(error_class(err->status), err->message);
  return NULL;
}

PyObject *tpy_fail(tolk_status status, const char *fmt, ...) {
  char msg[TOLK_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  PyErr_SetString(error_class(status), msg);
  return NULL;
}

static int add_errors(PyObject *m) {
  tolk_error_base = PyErr_NewExceptionWithDoc(
      "tolk.TolkError",
      "Base of the errors tolk raises; `status` is the tolk_status code, the message tolk's own.", NULL,
      NULL);
  if (!tolk_error_base || PyModule_AddObject(m, "TolkError", tolk_error_base) < 0) return -1;
  Py_INCREF(tolk_error_base);
  for (size_t i = 0; i < N_ERRORS; i++) {
    char qual[64];
    snprintf(qual, sizeof qual, "tolk.%s", error_classes[i].name);
    PyObject *cls = PyErr_NewExceptionWithDoc(qual, error_classes[i].doc, tolk_error_base, NULL);
    PyObject *code = PyLong_FromLong(error_classes[i].status);
    int bad = !cls || !code || PyObject_SetAttrString(cls, "status", code) < 0;
    Py_XDECREF(code);
    if (bad || PyModule_AddObject(m, error_classes[i].name, cls) < 0) return -1;
    Py_INCREF(cls);
    error_objects[i] = cls;
  }
  return 0;
}

/* ------------------------------------------------------------------ dtypes */

/* The buffer protocol's format of each dtype tolk computes with (struct
 * module codes, native little-endian sizes). Reading, 'q'/'l' and 'Q'/'L'
 * are told apart by item size: numpy writes 'l' for int64 on Linux. */
static const struct {
  tolk_dtype dtype;
  char code;
  Py_ssize_t size;
} formats[] = {
    {TOLK_FLOAT, 'f', 4}, {TOLK_DOUBLE, 'd', 8}, {TOLK_FLOAT16, 'e', 2}, {TOLK_INT8, 'b', 1},
    {TOLK_UINT8, 'B', 1}, {TOLK_INT16, 'h', 2},  {TOLK_UINT16, 'H', 2},  {TOLK_INT32, 'i', 4},
    {TOLK_UINT32, 'I', 4}, {TOLK_INT64, 'q', 8}, {TOLK_UINT64, 'Q', 8},  {TOLK_BOOL, '?', 1},
    {TOLK_INT64, 'l', 8}, {TOLK_UINT64, 'L', 8}, {TOLK_INT32, 'l', 4},   {TOLK_UINT32, 'L', 4},
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

static const char *dtype_format(tolk_dtype d) {
  static char codes[N_FORMATS][2];
  for (size_t i = 0; i < N_FORMATS; i++)
    if (formats[i].dtype == d) {
      codes[i][0] = formats[i].code;
      return codes[i];
    }
  return NULL;
}

static tolk_dtype format_dtype(const char *f, Py_ssize_t itemsize) {
  if (!f) return TOLK_UINT8; /* no format: unsigned bytes */
  if (*f == '@' || *f == '=' || *f == '<') f++;
  for (size_t i = 0; f[0] && !f[1] && i < N_FORMATS; i++)
    if (formats[i].code == f[0] && formats[i].size == itemsize) return formats[i].dtype;
  return TOLK_UNDEFINED;
}

/* ------------------------------------------------------------------ _Tensor */

struct tensor {
  PyObject_HEAD
  tolk_tensor *t;
  Py_ssize_t shape[TOLK_MAX_RANK], strides[TOLK_MAX_RANK];
};

PyObject *tpy_tensor_type;

PyObject *tpy_tensor_new(tolk_tensor *t) {
  if (!dtype_format(tolk_tensor_dtype(t))) {
    tolk_dtype d = tolk_tensor_dtype(t);
    tolk_tensor_free(t);
    return tpy_fail(TOLK_ERR_UNSUPPORTED, "an output of type %s has no buffer format", tolk_dtype_name(d));
  }
  struct tensor *o = (struct tensor *)PyType_GenericAlloc((PyTypeObject *)tpy_tensor_type, 0);
  if (!o) {
    tolk_tensor_free(t);
    return NULL;
  }
  o->t = t;
  int rank = tolk_tensor_rank(t);
  const int64_t *dims = tolk_tensor_dims(t);
  Py_ssize_t step = (Py_ssize_t)tolk_dtype_size(tolk_tensor_dtype(t));
  for (int i = rank - 1; i >= 0; i--) {
    o->shape[i] = (Py_ssize_t)dims[i];
    o->strides[i] = step;
    step *= o->shape[i];
  }
  return (PyObject *)o;
}

static void tensor_dealloc(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  tolk_tensor_free(((struct tensor *)self)->t);
  ((freefunc)PyType_GetSlot(tp, Py_tp_free))(self);
  Py_DECREF(tp);
}

/* The buffer protocol: the tensor's memory, writable, C order. An empty
 * tensor may have no data; a consumer wants a pointer all the same. */
static int tensor_getbuffer(PyObject *self, Py_buffer *view, int flags) {
  struct tensor *o = (struct tensor *)self;
  static char empty;
  tolk_dtype d = tolk_tensor_dtype(o->t);
  view->buf = tolk_tensor_data(o->t) ? tolk_tensor_data(o->t) : &empty;
  view->obj = Py_NewRef(self);
  view->len = (Py_ssize_t)tolk_tensor_nbytes(o->t);
  view->readonly = 0;
  view->itemsize = (Py_ssize_t)tolk_dtype_size(d);
  view->format = (flags & PyBUF_FORMAT) ? (char *)dtype_format(d) : NULL;
  view->ndim = tolk_tensor_rank(o->t);
  view->shape = (flags & PyBUF_ND) ? o->shape : NULL;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? o->strides : NULL;
  view->suboffsets = NULL;
  view->internal = NULL;
  return 0;
}

static PyType_Slot tensor_slots[] = {
    {Py_tp_dealloc, tensor_dealloc},
    {Py_bf_getbuffer, tensor_getbuffer},
    {Py_tp_doc, "A tensor a run returned; numpy.asarray() views it without a copy."},
    {0, NULL}};

PyType_Spec tpy_tensor_spec = {"tolk._tolk._Tensor", sizeof(struct tensor), 0, Py_TPFLAGS_DEFAULT,
                               tensor_slots};

tolk_tensor *tpy_tensor_borrow(PyObject *arr, Py_buffer *view, const char *name) {
  if (PyObject_GetBuffer(arr, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
  tolk_tensor *t = NULL;
  tolk_dtype dt = format_dtype(view->format, view->itemsize);
  int64_t dims[TOLK_MAX_RANK];
  tolk_error err;
  if (dt == TOLK_UNDEFINED) {
    tpy_fail(TOLK_ERR_TYPE, "input '%s': buffer format '%s' has no tolk type", name, view->format);
  } else if (view->ndim > TOLK_MAX_RANK) {
    tpy_fail(TOLK_ERR_UNSUPPORTED, "input '%s': rank %d is past tolk's %d", name, view->ndim, TOLK_MAX_RANK);
  } else {
    for (int i = 0; i < view->ndim; i++) dims[i] = view->shape[i];
    if (tolk_tensor_wrap(dt, view->ndim, dims, view->buf, (size_t)view->len, &t, &err)) tpy_raise(&err);
  }
  if (!t) PyBuffer_Release(view);
  return t;
}

/* ------------------------------------------------------------------ helpers */

int tpy_utf8_list(PyObject *list, PyObject **keep, const char **out) {
  Py_ssize_t n = PyList_Size(list);
  *keep = PyList_New(n);
  if (!*keep) return -1;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *b = PyUnicode_AsUTF8String(PyList_GetItem(list, i));
    if (!b) return -1;
    PyList_SetItem(*keep, i, b);
    out[i] = PyBytes_AsString(b);
  }
  return 0;
}

int tpy_enter(tpy_handle *h, const char *what) {
  if (!h->handle) {
    tpy_fail(TOLK_ERR_INVALID_ARGUMENT, "%s is closed", what);
    return -1;
  }
  h->calls++;
  return 0;
}

void tpy_leave(tpy_handle *h) { h->calls--; }

int tpy_close(tpy_handle *h, void (*free_fn)(void *), const char *what) {
  if (h->calls) {
    tpy_fail(TOLK_ERR_INVALID_ARGUMENT, "%s is in use by %d running calls; close it after them", what,
             h->calls);
    return -1;
  }
  free_fn(h->handle);
  h->handle = NULL;
  return 0;
}

/* ------------------------------------------------------------------ module */

static PyObject *version(PyObject *self, PyObject *unused) { return PyUnicode_FromString(tolk_version()); }

static PyMethodDef module_methods[] = {
    {"version", version, METH_NOARGS, "libtolk's version, \"MAJOR.MINOR.PATCH\"."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "tolk._tolk",
                                        "The C core of the tolk package (see tolk/__init__.py).", -1,
                                        module_methods, NULL, NULL, NULL, NULL};

static int add_type(PyObject *m, PyType_Spec *spec, const char *name, PyObject **out) {
  PyObject *type = PyType_FromSpec(spec);
  if (!type) return -1;
  if (out) *out = type;
  Py_INCREF(type);
  return PyModule_AddObject(m, name, type);
}

PyMODINIT_FUNC PyInit__tolk(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  if (add_errors(m) < 0 || add_type(m, &tpy_tensor_spec, "_Tensor", &tpy_tensor_type) < 0 ||
      add_type(m, &tpy_session_spec, "_Session", NULL) < 0 ||
      add_type(m, &tpy_tokenizer_spec, "_Tokenizer", NULL) < 0 ||
      add_type(m, &tpy_translator_spec, "_Translator", NULL) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
