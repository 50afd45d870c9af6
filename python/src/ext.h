/*
 * ext.h — what the files of the extension module tolk._tolk share.
 *
 * The module is written against CPython's limited API (Py_LIMITED_API
 * 0x030B0000: one abi3 wheel for CPython 3.11 and later; 3.11 is where the
 * buffer protocol joined the limited API). Arrays cross without copies
 * through it: an input's buffer is wrapped by a borrowed tolk_tensor for the
 * length of the run; an output is a _Tensor owning the tolk_tensor the run
 * made, exporting its memory, which numpy.asarray() views (the _Tensor lives
 * as long as the array).
 *
 * Every handle object counts the calls running on it (with the GIL held), so
 * close() can refuse to free a handle another thread is using; the calls
 * themselves run with the GIL released.
 */
#ifndef TOLK_PY_EXT_H
#define TOLK_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <tolk.h>

/* Raises the exception class of err->status with err's message; returns NULL. */
PyObject *tpy_raise(const tolk_error *err);
/* Raises tolk.InvalidArgument (or the class of `status`) with a message. */
PyObject *tpy_fail(tolk_status status, const char *fmt, ...);

/* A new _Tensor owning t (freed with it), or NULL with an exception set (t freed). */
PyObject *tpy_tensor_new(tolk_tensor *t);
/* Wraps `arr` (anything exporting a C-contiguous buffer of a type tolk
 * knows) without copying: the tensor borrows the memory of *view, which the
 * caller releases with PyBuffer_Release after freeing the tensor. NULL and an
 * exception on failure (*view is then released). */
tolk_tensor *tpy_tensor_borrow(PyObject *arr, Py_buffer *view, const char *name);

/* UTF-8 copies of the str items of `list`: *keep receives a list of bytes
 * objects that must stay alive while out[0..n) is used. -1 on error. */
int tpy_utf8_list(PyObject *list, PyObject **keep, const char **out);

/* Handles closed or in use: "calls" counts the calls now running. */
typedef struct {
  PyObject_HEAD
  void *handle;
  int calls;
} tpy_handle;

/* 0 when h is open (and counts one more call), -1 with an exception. */
int tpy_enter(tpy_handle *h, const char *what);
void tpy_leave(tpy_handle *h);
/* close(): frees the handle unless calls are running. */
int tpy_close(tpy_handle *h, void (*free_fn)(void *), const char *what);

extern PyType_Spec tpy_tensor_spec, tpy_session_spec, tpy_tokenizer_spec, tpy_translator_spec;
extern PyObject *tpy_tensor_type;

#endif
