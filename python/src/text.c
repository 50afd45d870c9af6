/*
 * text.c — _Tokenizer (a Marian tokenizer) and _Translator (a Marian model
 * folder) for tolk.Tokenizer and tolk.Translator. Each call converts its
 * Python arguments, releases the GIL for the whole of tolk's work (encode,
 * generate, decode), and converts back; results follow tolk.h's freeing rule
 * (arrays here, what they point to freed with tolk_*_free).
 */
#include "ext.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  tpy_handle h;
} tokenizer;

typedef struct {
  tpy_handle h;
} translator;

static void tokenizer_free(void *t) { tolk_tokenizer_free(t); }
static void translator_free(void *t) { tolk_translator_free(t); }

static void handle_dealloc(PyObject *self, void (*free_fn)(void *)) {
  PyTypeObject *tp = Py_TYPE(self);
  free_fn(((tpy_handle *)self)->handle);
  ((freefunc)PyType_GetSlot(tp, Py_tp_free))(self);
  Py_DECREF(tp);
}

/* ------------------------------------------------------------------ conversions */

/* UTF-8 texts of a list of str, with their lengths (texts may hold NULs). */
struct texts {
  size_t n;
  const char **p;
  size_t *len;
  PyObject *keep;
};

static int texts_get(PyObject *list, struct texts *t) {
  if (!PyList_Check(list)) {
    PyErr_SetString(PyExc_TypeError, "expected a list of str");
    return -1;
  }
  t->n = (size_t)PyList_Size(list);
  t->p = calloc(t->n ? t->n : 1, sizeof *t->p);
  t->len = calloc(t->n ? t->n : 1, sizeof *t->len);
  if (!t->p || !t->len) {
    PyErr_NoMemory();
    return -1;
  }
  if (tpy_utf8_list(list, &t->keep, t->p) < 0) return -1;
  for (size_t i = 0; i < t->n; i++) t->len[i] = (size_t)PyBytes_Size(PyList_GetItem(t->keep, (Py_ssize_t)i));
  return 0;
}

static void texts_free(struct texts *t) {
  free(t->p);
  free(t->len);
  Py_XDECREF(t->keep);
}

static PyObject *ids_list(const int32_t *ids, size_t n) {
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) PyList_SetItem(l, (Py_ssize_t)i, PyLong_FromLong(ids[i]));
  return l;
}

static PyObject *strings_list(char *const *s, size_t n) {
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) {
    PyObject *u = PyUnicode_DecodeUTF8(s[i], (Py_ssize_t)strlen(s[i]), "replace");
    if (!u) Py_CLEAR(l);
    else PyList_SetItem(l, (Py_ssize_t)i, u);
  }
  return l;
}

/* seqs (a list of lists of ints) into in[0..n): the arrays are the caller's,
 * freed with tolk_ids_free(in, n) on success and failure alike. */
static int ids_get(PyObject *seqs, tolk_ids *in, size_t n) {
  for (size_t i = 0; i < n; i++) {
    PyObject *seq = PySequence_List(PyList_GetItem(seqs, (Py_ssize_t)i));
    if (!seq) return -1;
    size_t m = (size_t)PyList_Size(seq);
    in[i].ids = malloc((m ? m : 1) * sizeof *in[i].ids);
    in[i].n = m;
    for (size_t k = 0; in[i].ids && k < m; k++) {
      long v = PyLong_AsLong(PyList_GetItem(seq, (Py_ssize_t)k));
      if (v == -1 && PyErr_Occurred()) break;
      if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "id %ld does not fit in int32", v);
        break;
      }
      in[i].ids[k] = (int32_t)v;
    }
    Py_DECREF(seq);
    if (!in[i].ids) PyErr_NoMemory();
    if (PyErr_Occurred()) return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------ shared calls */

/* encode(texts, flags) -> list[list[int]] on `tok` */
static PyObject *encode(const tolk_tokenizer *tok, PyObject *list, int flags) {
  struct texts t = {0};
  PyObject *res = NULL;
  tolk_ids *ids = NULL;
  if (texts_get(list, &t) == 0 && (ids = calloc(t.n ? t.n : 1, sizeof *ids))) {
    tolk_error err;
    tolk_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tolk_tokenizer_encode_batch(tok, t.p, t.len, t.n, flags, ids, &err);
    Py_END_ALLOW_THREADS
    if (st) tpy_raise(&err);
    else res = PyList_New((Py_ssize_t)t.n);
    for (size_t i = 0; res && i < t.n; i++) {
      PyObject *l = ids_list(ids[i].ids, ids[i].n);
      if (!l) Py_CLEAR(res);
      else PyList_SetItem(res, (Py_ssize_t)i, l);
    }
    if (!st) tolk_ids_free(ids, t.n);
  } else if (!PyErr_Occurred()) {
    PyErr_NoMemory();
  }
  free(ids);
  texts_free(&t);
  return res;
}

/* decode(seqs, flags) -> list[str] on `tok` */
static PyObject *decode(const tolk_tokenizer *tok, PyObject *seqs, int flags) {
  if (!PyList_Check(seqs)) return PyErr_Format(PyExc_TypeError, "expected a list of id sequences");
  size_t n = (size_t)PyList_Size(seqs);
  tolk_ids *in = calloc(n ? n : 1, sizeof *in);
  char **out = calloc(n ? n : 1, sizeof *out);
  PyObject *res = NULL;
  if (!in || !out) PyErr_NoMemory();
  else if (ids_get(seqs, in, n) == 0) {
    tolk_error err;
    tolk_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tolk_tokenizer_decode_batch(tok, in, n, flags, out, &err);
    Py_END_ALLOW_THREADS
    if (st) tpy_raise(&err);
    else res = strings_list(out, n);
    if (!st) tolk_strings_free(out, n);
  }
  if (in) tolk_ids_free(in, n);
  free(in);
  free(out);
  return res;
}

static PyObject *language_tags(const tolk_tokenizer *tok) {
  size_t n;
  const char *const *tags = tolk_tokenizer_language_tags(tok, &n);
  return strings_list((char *const *)tags, n);
}

/* ------------------------------------------------------------------ _Tokenizer */

static int tokenizer_init(PyObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"model_dir", "max_length", NULL};
  PyObject *dir = NULL;
  tolk_tokenizer_params p = tolk_tokenizer_default_params();
  if (((tpy_handle *)self)->handle) {
    tpy_fail(TOLK_ERR_INVALID_ARGUMENT, "tokenizer already created");
    return -1;
  }
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|i", names, PyUnicode_FSConverter, &dir, &p.max_length)) return -1;
  tolk_tokenizer *tok = NULL;
  tolk_error err;
  tolk_status st;
  const char *path = PyBytes_AsString(dir);
  Py_BEGIN_ALLOW_THREADS
  st = tolk_tokenizer_create(path, p, &tok, &err);
  Py_END_ALLOW_THREADS
  Py_DECREF(dir);
  if (st) {
    tpy_raise(&err);
    return -1;
  }
  ((tpy_handle *)self)->handle = tok;
  return 0;
}

static void tokenizer_dealloc(PyObject *self) { handle_dealloc(self, tokenizer_free); }

/* Runs `fn` on the tokenizer with the handle counted as in use. */
#define WITH_TOKENIZER(self, expr)                                     \
  do {                                                                 \
    tpy_handle *h_ = (tpy_handle *)(self);                             \
    if (tpy_enter(h_, "the tokenizer") < 0) return NULL;               \
    const tolk_tokenizer *tok = h_->handle;                            \
    PyObject *r_ = (expr);                                             \
    tpy_leave(h_);                                                     \
    return r_;                                                         \
  } while (0)

static PyObject *tokenizer_encode(PyObject *self, PyObject *args) {
  PyObject *list;
  int flags = 0;
  if (!PyArg_ParseTuple(args, "O|i", &list, &flags)) return NULL;
  WITH_TOKENIZER(self, encode(tok, list, flags));
}

static PyObject *tokenizer_decode(PyObject *self, PyObject *args) {
  PyObject *seqs;
  int flags = 0;
  if (!PyArg_ParseTuple(args, "O|i", &seqs, &flags)) return NULL;
  WITH_TOKENIZER(self, decode(tok, seqs, flags));
}

static PyObject *tokenize(const tolk_tokenizer *tok, PyObject *text, int flags) {
  PyObject *b = PyUnicode_AsUTF8String(text);
  if (!b) return NULL;
  const char *s = PyBytes_AsString(b);
  size_t len = (size_t)PyBytes_Size(b);
  tolk_tokens tokens;
  tolk_error err;
  tolk_status st;
  Py_BEGIN_ALLOW_THREADS
  st = tolk_tokenizer_tokenize(tok, s, len, flags, &tokens, &err);
  Py_END_ALLOW_THREADS
  Py_DECREF(b);
  if (st) return tpy_raise(&err);
  PyObject *res = strings_list(tokens.tokens, tokens.n);
  tolk_tokens_free(&tokens);
  return res;
}

static PyObject *tokenizer_tokenize(PyObject *self, PyObject *args) {
  PyObject *text;
  int flags = 0;
  if (!PyArg_ParseTuple(args, "U|i", &text, &flags)) return NULL;
  WITH_TOKENIZER(self, tokenize(tok, text, flags));
}

static PyObject *tokenizer_tags(PyObject *self, PyObject *unused) {
  WITH_TOKENIZER(self, language_tags(tok));
}

static PyObject *tokenizer_close(PyObject *self, PyObject *unused) {
  tpy_handle *h = (tpy_handle *)self;
  if (h->handle && tpy_close(h, tokenizer_free, "the tokenizer") < 0) return NULL;
  Py_RETURN_NONE;
}

static PyMethodDef tokenizer_methods[] = {
    {"encode", tokenizer_encode, METH_VARARGS, "encode(texts, flags=0) -> [[int]]"},
    {"decode", tokenizer_decode, METH_VARARGS, "decode(seqs, flags=0) -> [str]"},
    {"tokenize", tokenizer_tokenize, METH_VARARGS, "tokenize(text, flags=0) -> [str]"},
    {"language_tags", tokenizer_tags, METH_NOARGS, "The target-language tags, in id order."},
    {"close", tokenizer_close, METH_NOARGS, "Frees the tokenizer (refused while calls are in flight)."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot tokenizer_slots[] = {
    {Py_tp_new, PyType_GenericNew},    {Py_tp_init, tokenizer_init},
    {Py_tp_dealloc, tokenizer_dealloc}, {Py_tp_methods, tokenizer_methods},
    {Py_tp_doc, "_Tokenizer(model_dir, max_length=0): a Marian tokenizer."},
    {0, NULL}};

PyType_Spec tpy_tokenizer_spec = {"tolk._tolk._Tokenizer", sizeof(tokenizer), 0, Py_TPFLAGS_DEFAULT,
                                  tokenizer_slots};

/* ------------------------------------------------------------------ _Translator */

static int translator_init(PyObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"model_dir", "int8", "threads", "verify", "int8_lm_head", "bf16", NULL};
  PyObject *dir = NULL;
  tolk_translator_params p = tolk_translator_default_params();
  if (((tpy_handle *)self)->handle) {
    tpy_fail(TOLK_ERR_INVALID_ARGUMENT, "translator already created");
    return -1;
  }
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|pippi", names, PyUnicode_FSConverter, &dir, &p.int8, &p.threads,
                                   &p.verify, &p.int8_lm_head, &p.bf16))
    return -1;
  tolk_translator *tr = NULL;
  tolk_error err;
  tolk_status st;
  const char *path = PyBytes_AsString(dir);
  Py_BEGIN_ALLOW_THREADS
  st = tolk_translator_create(path, p, &tr, &err);
  Py_END_ALLOW_THREADS
  Py_DECREF(dir);
  if (st) {
    tpy_raise(&err);
    return -1;
  }
  ((tpy_handle *)self)->handle = tr;
  return 0;
}

static void translator_dealloc(PyObject *self) { handle_dealloc(self, translator_free); }

/* What one generate() call holds; freed per tolk.h's rule. */
struct gen {
  struct texts t;
  size_t R;
  tolk_ids *src, *best;
  tolk_generation *g;
  char **text;
  int encoded, generated, decoded;
};

static void gen_free(struct gen *x) {
  if (x->decoded) tolk_strings_free(x->text, x->t.n * x->R);
  if (x->generated) tolk_generation_free(x->g, x->t.n * x->R);
  if (x->encoded) tolk_ids_free(x->src, x->t.n);
  free(x->src);
  free(x->best);
  free(x->g);
  free(x->text);
  texts_free(&x->t);
}

/* Tokenizes, generates and decodes every hypothesis, all without the GIL. */
static tolk_status gen_run(const tolk_translator *tr, const tolk_generate_params *gp, struct gen *x,
                           tolk_error *err) {
  const tolk_tokenizer *tok = tolk_translator_tokenizer(tr);
  size_t n = x->t.n, m = n * x->R;
  tolk_status st = tolk_tokenizer_encode_batch(tok, x->t.p, x->t.len, n, 0, x->src, err);
  x->encoded = !st;
  if (!st) st = tolk_translator_generate(tr, x->src, n, gp, x->g, err);
  x->generated = !st;
  for (size_t i = 0; i < m && !st; i++) x->best[i] = (tolk_ids){x->g[i].ids, x->g[i].n, 0};
  if (!st) st = tolk_tokenizer_decode_batch(tok, x->best, m, TOLK_DECODE_SKIP_SPECIAL, x->text, err);
  x->decoded = !st;
  return st;
}

/* [[(text, score, ids)] * num_hypotheses] per source text */
static PyObject *gen_result(const struct gen *x) {
  PyObject *res = PyList_New((Py_ssize_t)x->t.n);
  for (size_t i = 0; res && i < x->t.n; i++) {
    PyObject *hyps = PyList_New((Py_ssize_t)x->R);
    for (size_t r = 0; hyps && r < x->R; r++) {
      const tolk_generation *g = &x->g[i * x->R + r];
      PyObject *text = PyUnicode_DecodeUTF8(x->text[i * x->R + r], (Py_ssize_t)strlen(x->text[i * x->R + r]),
                                            "replace");
      PyObject *h = text ? Py_BuildValue("(NdN)", text, (double)g->score, ids_list(g->ids, g->n)) : NULL;
      if (!h) Py_CLEAR(hyps);
      else PyList_SetItem(hyps, (Py_ssize_t)r, h);
    }
    if (!hyps) Py_CLEAR(res);
    else PyList_SetItem(res, (Py_ssize_t)i, hyps);
  }
  return res;
}

/* generate(texts, beam_size=0, max_new_tokens=0, num_hypotheses=1, scores=True):
 * scores=False lets a greedy search skip what only the scores need. */
static PyObject *translator_generate(PyObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"texts", "beam_size", "max_new_tokens", "num_hypotheses", "scores", NULL};
  tpy_handle *h = (tpy_handle *)self;
  PyObject *list;
  int beam = 0, max_new = 0, hyps = 1, scores = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iiip", names, &list, &beam, &max_new, &hyps, &scores)) return NULL;
  if (hyps < 1) return tpy_fail(TOLK_ERR_INVALID_ARGUMENT, "num_hypotheses must be at least 1, not %d", hyps);
  if (tpy_enter(h, "the translator") < 0) return NULL;
  const tolk_translator *tr = h->handle;
  tolk_generate_params gp = tolk_generate_default_params(tr);
  if (beam > 0) gp.num_beams = beam;
  if (max_new > 0) gp.max_new_tokens = max_new;
  gp.num_return_sequences = hyps;
  gp.output_scores = scores;
  struct gen x = {.R = (size_t)hyps};
  PyObject *res = NULL;
  if (texts_get(list, &x.t) == 0) {
    size_t n = x.t.n ? x.t.n : 1, m = n * x.R;
    x.src = calloc(n, sizeof *x.src);
    x.best = calloc(m, sizeof *x.best);
    x.g = calloc(m, sizeof *x.g);
    x.text = calloc(m, sizeof *x.text);
    if (!x.src || !x.best || !x.g || !x.text) {
      PyErr_NoMemory();
    } else {
      tolk_error err;
      tolk_status st;
      Py_BEGIN_ALLOW_THREADS
      st = gen_run(tr, &gp, &x, &err);
      Py_END_ALLOW_THREADS
      res = st ? tpy_raise(&err) : gen_result(&x);
    }
  }
  gen_free(&x);
  tpy_leave(h);
  return res;
}

/* translate_text(text, tag=None) -> str: a text of any length, sentence by sentence */
static PyObject *translator_translate_text(PyObject *self, PyObject *args) {
  tpy_handle *h = (tpy_handle *)self;
  PyObject *text;
  const char *tag = NULL;
  if (!PyArg_ParseTuple(args, "U|z", &text, &tag)) return NULL;
  PyObject *b = PyUnicode_AsUTF8String(text);
  if (!b) return NULL;
  if (tpy_enter(h, "the translator") < 0) {
    Py_DECREF(b);
    return NULL;
  }
  const char *s = PyBytes_AsString(b);
  size_t len = (size_t)PyBytes_Size(b);
  tolk_text_translation t;
  tolk_error err;
  tolk_status st;
  Py_BEGIN_ALLOW_THREADS
  st = tolk_translator_translate_text(h->handle, s, len, tag, NULL, &t, &err);
  Py_END_ALLOW_THREADS
  PyObject *res = st ? tpy_raise(&err) : PyUnicode_DecodeUTF8(t.text, (Py_ssize_t)strlen(t.text), "replace");
  if (!st) tolk_text_translation_free(&t);
  Py_DECREF(b);
  tpy_leave(h);
  return res;
}

static PyObject *translator_tags(PyObject *self, PyObject *unused) {
  tpy_handle *h = (tpy_handle *)self;
  if (tpy_enter(h, "the translator") < 0) return NULL;
  PyObject *r = language_tags(tolk_translator_tokenizer(h->handle));
  tpy_leave(h);
  return r;
}

static PyObject *translator_close(PyObject *self, PyObject *unused) {
  tpy_handle *h = (tpy_handle *)self;
  if (h->handle && tpy_close(h, translator_free, "the translator") < 0) return NULL;
  Py_RETURN_NONE;
}

static PyMethodDef translator_methods[] = {
    {"generate", (PyCFunction)(void (*)(void))translator_generate, METH_VARARGS | METH_KEYWORDS,
     "generate(texts, beam_size=0, max_new_tokens=0, num_hypotheses=1) -> [[(text, score, ids)]]"},
    {"translate_text", translator_translate_text, METH_VARARGS, "translate_text(text, tag=None) -> str"},
    {"language_tags", translator_tags, METH_NOARGS, "The target-language tags, in id order."},
    {"close", translator_close, METH_NOARGS, "Frees the translator (refused while calls are in flight)."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot translator_slots[] = {
    {Py_tp_new, PyType_GenericNew},     {Py_tp_init, translator_init},
    {Py_tp_dealloc, translator_dealloc}, {Py_tp_methods, translator_methods},
    {Py_tp_doc, "_Translator(model_dir, int8=False, threads=0, verify=True, int8_lm_head=False, bf16=0): a Marian model folder (bf16: TOLK_BF16_*)."},
    {0, NULL}};

PyType_Spec tpy_translator_spec = {"tolk._tolk._Translator", sizeof(translator), 0, Py_TPFLAGS_DEFAULT,
                                   translator_slots};
