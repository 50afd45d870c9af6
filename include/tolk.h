/*
 * tolk.h — the one public header of libtolk.
 *
 * libtolk loads ONNX models (memory-mapped, zero-copy), checks and inspects
 * them, runs them on the CPU, and translates text with Marian models built on
 * top of that engine. It depends on nothing beyond libc, libm and pthreads.
 *
 * Conventions, true of every function below unless its comment says otherwise:
 *  - Handles are opaque. Whoever creates a handle destroys it with the matching
 *    tolk_*_free(), and tolk_*_free(NULL) is a no-op.
 *  - Fallible calls return a tolk_status. TOLK_OK is 0; codes are append-only.
 *  - Fallible calls take a `tolk_error *err` last. It is caller-owned (usually on
 *    the stack) and may be NULL. On failure it receives the status and a message
 *    naming what failed and where (file, node, op, input, shape). On success it
 *    is left untouched. A per-call error rather than a per-handle message keeps
 *    concurrent calls on one handle (a server's sessions) free of races.
 *  - Pointers returned by the library are borrowed unless the comment says the
 *    caller owns them; a borrowed pointer lives as long as the handle it came
 *    from.
 *  - The library never prints, exits, aborts or longjmps on bad input.
 */
#ifndef TOLK_H
#define TOLK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TOLK_VERSION_MAJOR 0
#define TOLK_VERSION_MINOR 1
#define TOLK_VERSION_PATCH 0
#define TOLK_VERSION_NUMBER \
  (TOLK_VERSION_MAJOR * 10000 + TOLK_VERSION_MINOR * 100 + TOLK_VERSION_PATCH)

/* The library's version as "MAJOR.MINOR.PATCH"; static storage. */
const char *tolk_version(void);

/* ------------------------------------------------------------------ status */

/* Append-only: a retired code keeps its number. */
typedef enum tolk_status {
  TOLK_OK = 0,
  TOLK_ERR_INVALID_ARGUMENT = 1, /* a caller passed something unusable */
  TOLK_ERR_IO = 2,               /* open/read/mmap failed */
  TOLK_ERR_MALFORMED = 3,        /* the bytes are not a valid encoding */
  TOLK_ERR_INVALID_MODEL = 4,    /* well-formed, but violates ONNX rules */
  TOLK_ERR_UNSUPPORTED = 5,      /* valid, but tolk cannot do it (yet) */
  TOLK_ERR_NO_MEMORY = 6,
  TOLK_ERR_LIMIT = 7,            /* a size or depth bound was exceeded */
  TOLK_ERR_SHAPE = 8,            /* shape mismatch */
  TOLK_ERR_TYPE = 9,             /* dtype mismatch */
  TOLK_ERR_NOT_FOUND = 10,       /* no such name, file or key */
  TOLK_ERR_INTERNAL = 11,        /* a bug in tolk: please report */
  TOLK_ERR_CANCELLED = 12
} tolk_status;

#define TOLK_ERROR_MESSAGE_MAX 1024

typedef struct tolk_error {
  tolk_status status;
  char message[TOLK_ERROR_MESSAGE_MAX];
} tolk_error;

/* A short constant name for a status ("invalid model"); static storage. */
const char *tolk_status_str(tolk_status status);

/* ------------------------------------------------------------------ dtypes */

/* Numbered as ONNX's TensorProto.DataType. */
typedef enum tolk_dtype {
  TOLK_UNDEFINED = 0,
  TOLK_FLOAT = 1,
  TOLK_UINT8 = 2,
  TOLK_INT8 = 3,
  TOLK_UINT16 = 4,
  TOLK_INT16 = 5,
  TOLK_INT32 = 6,
  TOLK_INT64 = 7,
  TOLK_STRING = 8,
  TOLK_BOOL = 9,
  TOLK_FLOAT16 = 10,
  TOLK_DOUBLE = 11,
  TOLK_UINT32 = 12,
  TOLK_UINT64 = 13,
  TOLK_COMPLEX64 = 14,
  TOLK_COMPLEX128 = 15,
  TOLK_BFLOAT16 = 16
} tolk_dtype;

/* "float", "int64", …; "undefined" for unknown values. Static storage. */
const char *tolk_dtype_name(tolk_dtype dtype);

/* Bytes per element; 0 for STRING (stored as tolk_string) and unknown types. */
size_t tolk_dtype_size(tolk_dtype dtype);

/* ------------------------------------------------------------------ models */

/* A loaded ONNX model: the file is memory-mapped and initializers point into
 * the mapping where alignment allows. Immutable once loaded; safe to share
 * between threads. */
typedef struct tolk_model tolk_model;

typedef struct tolk_model_params {
  /* Bound on subgraph nesting (If/Loop/Scan bodies). */
  int max_graph_depth;
  /* Refuse files larger than this many bytes (0: no bound). */
  uint64_t max_file_bytes;
  /* Resolve external data. When 0, external tensors are recorded but not
   * opened (enough for inspect, not for running). */
  int load_external_data;
} tolk_model_params;

tolk_model_params tolk_model_default_params(void);

/* Loads the ONNX model at `path`. External data files are resolved relative
 * to the folder holding `path` and must stay inside it.
 * On success *out receives a model the caller frees with tolk_model_free().
 * On failure *out is set to NULL. */
tolk_status tolk_model_load(const char *path, tolk_model_params params,
                            tolk_model **out, tolk_error *err);

/* Like tolk_model_load, from `size` bytes at `data`, which the model borrows:
 * they must outlive it. `base_dir` (may be NULL: external data is refused)
 * is where external data files are looked up. */
tolk_status tolk_model_load_buffer(const void *data, size_t size,
                                   const char *base_dir,
                                   tolk_model_params params, tolk_model **out,
                                   tolk_error *err);

void tolk_model_free(tolk_model *model);

/* Validates the model as onnx.checker does. Every problem found is passed to
 * `report` (if non-NULL) as one line naming the node and what is wrong.
 * Returns TOLK_OK when the model is valid, TOLK_ERR_INVALID_MODEL otherwise;
 * err receives the first problem and the count. */
typedef void (*tolk_report_fn)(void *user, const char *line);
tolk_status tolk_model_check(const tolk_model *model, tolk_report_fn report,
                             void *user, tolk_error *err);

/* ------------------------------------------------------------------ tensors and sessions
 * (src/exec/: owned by the execution engine) */

/* ------------------------------------------------------------------ tokenizer
 * (src/text/: owned by the tokenizer) */

#ifdef __cplusplus
}
#endif

#endif /* TOLK_H */
