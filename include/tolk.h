/*
 * tolk.h — the one public header of libtolk.
 *
 * libtolk loads ONNX models (memory-mapped, zero-copy), checks and inspects
 * them, runs them on the CPU, and translates text with Marian models built on
 * top of that engine. The ONNX engine (models, tensors, sessions, the
 * key/value cache) depends on nothing beyond libc, libm and pthreads; the
 * tokenizer and the translator also read their JSON files with cJSON.
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
 *  - Results are written into memory the caller provides (one struct, or
 *    out[0..n) for n of them); the library allocates only what they point to,
 *    and the matching tolk_X_free(out[, n]) frees that and resets the entries
 *    but never frees `out` itself; on failure nothing needs freeing.
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
  TOLK_BFLOAT16 = 16,
  /* Decoded and stored (initializers), not computed with: 8-bit floats, and
   * 4-bit types packed two per byte, low nibble first. */
  TOLK_FLOAT8E4M3FN = 17,
  TOLK_FLOAT8E4M3FNUZ = 18,
  TOLK_FLOAT8E5M2 = 19,
  TOLK_FLOAT8E5M2FNUZ = 20,
  TOLK_UINT4 = 21,
  TOLK_INT4 = 22,
  TOLK_FLOAT4E2M1 = 23,
  TOLK_FLOAT8E8M0 = 24
} tolk_dtype;

/* "float", "int64", …; "undefined" for unknown values. Static storage. */
const char *tolk_dtype_name(tolk_dtype dtype);

/* Bytes per element; 0 for STRING (stored as tolk_string), for the types
 * past BFLOAT16 (no tensors of them can be created) and unknown types. */
size_t tolk_dtype_size(tolk_dtype dtype);

/* ------------------------------------------------------------------ CPU
 * (src/kern/cpu.c) What the kernel dispatcher picked on this machine, for
 * tools that report it (`tolk doctor`): detected once, as the kernels do. */
typedef struct tolk_cpu_info {
  const char *model;     /* the CPU's brand string; "" when unknown */
  const char *features;  /* the features the dispatcher looks at that this CPU
                            has, space-separated ("avx2 fma f16c") */
  const char *float_isa; /* tier of the float GEMM and vector math:
                            "avx512", "avx2" or "scalar" */
  const char *int8_isa;  /* tier of the int8 GEMM: "avx2" or "scalar" */
  const char *best_isa;  /* the best float tier this CPU and build support */
  const char *forced;    /* $TOLK_ISA when set (it forces a tier), else NULL */
  int cores;             /* online processors: the default thread count */
} tolk_cpu_info;

/* Strings are static storage. */
tolk_cpu_info tolk_cpu_describe(void);

/* ------------------------------------------------------------------ models */

/* A loaded ONNX model: the file is memory-mapped and initializers point into
 * the mapping where alignment allows. Immutable once loaded; safe to share
 * between threads. */
typedef struct tolk_model tolk_model;

typedef struct tolk_model_params {
  /* Bound on subgraph nesting (If/Loop/Scan bodies); 0 means the default
   * (32). Deeper files fail with TOLK_ERR_LIMIT. */
  int max_graph_depth;
  /* Refuse files larger than this many bytes (0: no bound). */
  uint64_t max_file_bytes;
  /* Resolve external data. When 0, external tensors are recorded but not
   * opened (enough for inspect, not for running). */
  int load_external_data;
} tolk_model_params;

tolk_model_params tolk_model_default_params(void);

/* Loads the ONNX model at `path`. External data files are resolved relative
 * to the folder holding `path` and must stay inside it: absolute locations,
 * ".." components, symlinks resolving outside the folder and files with more
 * than one hard link are refused (TOLK_ERR_INVALID_MODEL).
 * On success *out receives a model the caller frees with tolk_model_free().
 * On failure *out is set to NULL; err names the file and, for content
 * errors, the graph / node / tensor and the byte offset involved:
 * TOLK_ERR_IO / TOLK_ERR_NOT_FOUND when a file cannot be read,
 * TOLK_ERR_MALFORMED for bytes that are not protobuf, TOLK_ERR_INVALID_MODEL
 * for broken ONNX (sizes not matching dims, bad external data),
 * TOLK_ERR_LIMIT for sizes or nesting past the bounds, TOLK_ERR_UNSUPPORTED
 * for valid features tolk lacks (tensor segments, rank > 16). */
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

/* ------------------------------------------------------------------ model introspection
 * (src/onnx/info.c) A read-only view of a loaded model, for tools that show
 * or walk one (`tolk inspect` is built on it): the model's header, its graphs
 * — the main graph, the subgraphs node attributes hold (If, Loop, Scan
 * bodies) and the bodies of local functions — their nodes and their values.
 *
 * Graphs, nodes and values are opaque handles borrowed from the model, as is
 * every string below; they live as long as the model. One value has one
 * handle wherever it is read, so handles compare by address: a node input
 * whose graph is not the node's graph is read from an enclosing scope. A
 * NULL handle or an index out of range gives NULL, or a description whose
 * pointers are NULL, whose counts are 0 and whose rank is -1: never a
 * crash. */
typedef struct tolk_graph tolk_graph;
typedef struct tolk_node tolk_node;
typedef struct tolk_value tolk_value;

typedef struct tolk_model_info {
  int64_t ir_version;
  const char *producer_name, *producer_version; /* "" when absent */
  const char *domain;                            /* "" when absent */
  int64_t model_version;
  uint64_t file_bytes;     /* size of the .onnx file, or of the buffer */
  const tolk_graph *graph; /* the main graph */
  int max_depth;           /* deepest subgraph nesting (0: no subgraphs) */
  size_t n_opsets;         /* entries of tolk_model_opset */
  size_t n_metadata;       /* entries of tolk_model_metadata */
  size_t n_functions;      /* entries of tolk_model_function */
} tolk_model_info;

tolk_model_info tolk_model_describe(const tolk_model *model);

/* Opset import i: returns its domain ("" for ai.onnx) and sets *version
 * (may be NULL). NULL when i is out of range (*version untouched). */
const char *tolk_model_opset(const tolk_model *model, size_t i, int64_t *version);

/* metadata_props entry i: returns its key and sets *value (may be NULL).
 * NULL when i is out of range (*value untouched). */
const char *tolk_model_metadata(const tolk_model *model, size_t i, const char **value);

/* A model-local function (FunctionProto); its body's inputs and outputs
 * carry no types. */
typedef struct tolk_function_info {
  const char *domain; /* "" for ai.onnx */
  const char *name;
  const tolk_graph *body;
} tolk_function_info;

tolk_function_info tolk_model_function(const tolk_model *model, size_t i);

typedef struct tolk_graph_info {
  const char *name;        /* "" when absent */
  int depth;               /* 0: the main graph or a function body; k: a subgraph k levels in */
  const tolk_node *owner;  /* a subgraph's node (the attribute holding it); else NULL */
  size_t n_inputs;         /* declared inputs, initializers listed as inputs included */
  size_t n_outputs;
  size_t n_initializers;
  size_t n_nodes;          /* in file order: a topological order when the model is valid */
  size_t n_values;         /* every value the graph defines */
  size_t n_outer_refs;     /* values of enclosing graphs read here or in graphs nested here */
} tolk_graph_info;

tolk_graph_info tolk_graph_describe(const tolk_graph *graph);

/* Entry i of the graph's lists; NULL when i is out of range. */
const tolk_value *tolk_graph_input(const tolk_graph *graph, size_t i);
const tolk_value *tolk_graph_output(const tolk_graph *graph, size_t i);
const tolk_value *tolk_graph_initializer(const tolk_graph *graph, size_t i);
const tolk_value *tolk_graph_value(const tolk_graph *graph, size_t i);
const tolk_node *tolk_graph_node(const tolk_graph *graph, size_t i);

typedef struct tolk_node_info {
  const char *name;        /* "" when unnamed */
  const char *op_type;
  const char *domain;      /* "" for ai.onnx */
  const tolk_graph *graph; /* the graph holding the node */
  size_t index;            /* its position there: tolk_graph_node(graph, index) */
  size_t n_inputs, n_outputs;
  size_t n_subgraphs;      /* graphs its GRAPH and GRAPHS attributes hold */
} tolk_node_info;

tolk_node_info tolk_node_describe(const tolk_node *node);

/* Input or output i; NULL for an optional one left out (named "" in the
 * file) and when i is out of range. */
const tolk_value *tolk_node_input(const tolk_node *node, size_t i);
const tolk_value *tolk_node_output(const tolk_node *node, size_t i);

/* Subgraph i, in attribute order; *attr (may be NULL) receives the name of
 * the attribute holding it ("then_branch", "body"). NULL when i is out of
 * range (*attr untouched). */
const tolk_graph *tolk_node_subgraph(const tolk_node *node, size_t i, const char **attr);

/* The kind of a value's declared type. */
typedef enum tolk_type_kind {
  TOLK_TYPE_NONE = 0, /* none declared */
  TOLK_TYPE_TENSOR = 1,
  TOLK_TYPE_SPARSE_TENSOR = 2,
  TOLK_TYPE_SEQUENCE = 3,
  TOLK_TYPE_MAP = 4,
  TOLK_TYPE_OPTIONAL = 5
} tolk_type_kind;

enum {
  TOLK_VALUE_GRAPH_INPUT = 1 << 0,
  TOLK_VALUE_GRAPH_OUTPUT = 1 << 1,
  TOLK_VALUE_INITIALIZER = 1 << 2, /* constant data: tolk_value_initializer */
  TOLK_VALUE_UNDEFINED = 1 << 3    /* read, but defined nowhere in scope (invalid) */
};

/* A value of a graph as the model declares it. (tolk_value_info, above, is
 * what a session makes of a graph input or output.) */
typedef struct tolk_value_desc {
  const char *name;
  tolk_type_kind kind;
  /* Of the tensor; for a sequence or an optional, of the tensor inside it;
   * for a map, of its values. dtype TOLK_UNDEFINED: not declared; rank -1:
   * no shape declared, else tolk_value_dim gives the dims. */
  tolk_dtype dtype;
  int rank;
  unsigned flags;            /* TOLK_VALUE_* */
  const tolk_graph *graph;   /* the graph defining it */
  size_t index;              /* its position there: tolk_graph_value(graph, index) */
  const tolk_node *producer; /* the node computing it; NULL for inputs,
                                initializers and undefined values */
} tolk_value_desc;

tolk_value_desc tolk_value_describe(const tolk_value *value);

/* Dim i of the declared shape: its size, or -1 when it is symbolic or
 * unknown; *symbol (may be NULL) receives the dim_param name, or NULL when
 * there is none. -1 and NULL when i is out of range. */
int64_t tolk_value_dim(const tolk_value *value, int i, const char **symbol);

/* The constant data of an initializer, as loaded. */
typedef struct tolk_initializer_info {
  tolk_dtype dtype;
  int rank;
  const int64_t *dims; /* rank entries */
  int64_t numel;
  /* Bytes tolk keeps for the elements: 4-bit types packed, strings as one
   * pointer and length per element (the text is not counted). */
  uint64_t nbytes;
  /* The external data file, relative to the model's folder (also when
   * external data was not opened); NULL when the data is in the model. */
  const char *external_file;
} tolk_initializer_info;

/* For a value flagged TOLK_VALUE_INITIALIZER; for any other value (or NULL)
 * dtype TOLK_UNDEFINED, rank -1, NULL pointers and 0. */
tolk_initializer_info tolk_value_initializer(const tolk_value *value);

/* ------------------------------------------------------------------ quantization
 * (src/onnx/quantize.c) Dynamic int8 quantization in the form of ONNX
 * Runtime's quantize_dynamic (QInt8 weights, MatMulConstBOnly,
 * EnableSubgraph), node for node and weight for weight:
 *  - MatMul whose B is a float initializer of rank 2: B becomes B_quantized
 *    (int8, symmetric: zero point 0, scale max|B|/127, or max|B|/64 with
 *    reduce_range; one scale per tensor, or per column of B with
 *    per_channel) and the node DynamicQuantizeLinear(A) (one per activation
 *    and graph) → MatMulInteger → Cast → Mul by the product of the scales;
 *  - Gather whose data is a float initializer (embeddings): the data becomes
 *    uint8 with a scale and zero point from its range, and a
 *    DequantizeLinear follows the Gather;
 *  - Transpose of a weight quantized (per tensor) for another node: it moves
 *    the quantized tensor, a DequantizeLinear follows (a tied LM head).
 * Subgraphs (If, Loop, Scan bodies) are quantized too; a weight living in
 * an enclosing graph gets its quantized form there. Everything else in the
 * file is copied byte for byte (fields tolk does not know included); an
 * initializer no reader needs any more is dropped. */
/* How quantized nodes are written. DYNAMIC is the form above. QDQ is ONNX
 * Runtime's quantize_static in its QDQ format (QInt8 activations and
 * weights, MinMax calibration, op types MatMul): each MatMul's float
 * activation inputs and its output X pass through QuantizeLinear
 * X_QuantizeLinear → DequantizeLinear X_DequantizeLinear with the scale and
 * zero point of the range `calibration` observed (int8, asymmetric in
 * [-128, 127]), every reader of X then reading X_DequantizeLinear_Output;
 * a weight becomes W_quantized (int8, symmetric as above) read through
 * DequantizeLinear W_DequantizeLinear (axis 1 when per channel); a graph
 * output X keeps its name, written by its DequantizeLinear. QOPERATOR is
 * its QOperator format, from the same ranges: the MatMul becomes
 * QLinearMatMul NAME_quant (X_quantized, X_scale, X_zero_point for A and B
 * — W_quantized, W_scale, W_zero_point for a weight — and the output's
 * scale and zero point) → Y_quantized; QuantizeLinear X_QuantizeLinear
 * makes X_quantized of an activation no quantized MatMul produced, and
 * DequantizeLinear Y_DequantizeLinear gives Y back wherever something else
 * reads it. Subgraphs (If branches) are quantized too, each activation's
 * Q/DQ in the graph defining it, each weight once in the graph holding it.
 * A MatMul with a tensor the calibration did not observe (a branch no
 * sample ran) is skipped and reported. reduce_range applies to weights
 * only, as in ORT. */
typedef enum tolk_quantize_format {
  TOLK_QUANTIZE_DYNAMIC = 0,
  TOLK_QUANTIZE_QDQ = 1,
  TOLK_QUANTIZE_QOPERATOR = 2
} tolk_quantize_format;

/* Activation ranges observed by running a float model on calibration inputs
 * (src/exec/calibrate.c), for static quantization. */
typedef struct tolk_calibration tolk_calibration;

typedef struct tolk_quantize_params {
  tolk_quantize_format format; /* TOLK_QUANTIZE_DYNAMIC by default */
  /* QDQ, QOPERATOR: the ranges of the model's activations (borrowed; made
   * from the same model file). Required for those, ignored for DYNAMIC. */
  const tolk_calibration *calibration;
  int per_channel;  /* MatMul weights: a scale per column of B */
  int reduce_range; /* MatMul weights in [-64, 64] (7 bits), as ORT's reduce_range */
  /* Op types to quantize, of "MatMul", "Gather" and "Transpose"; NULL: all. */
  const char *const *op_types;
  size_t n_op_types;
  /* Names of nodes left as they are. */
  const char *const *exclude;
  size_t n_exclude;
  /* 1: leave the output projection float — a MatMul whose result, directly
   * or through an Add, is a graph output (a translation model's LM head,
   * whose logits pick every token). 0 (ORT's behaviour): quantize it too. */
  int float_lm_head;
} tolk_quantize_params;

tolk_quantize_params tolk_quantize_default_params(void);

typedef struct tolk_quantize_summary {
  size_t quantized;        /* nodes quantized */
  size_t skipped;          /* MatMuls, and Gathers of an initializer, left as they were
                              (each reported with why) */
  uint64_t bytes_before, bytes_after;
} tolk_quantize_summary;

/* Quantizes the model at `in_path` into `out_path` (which may not be the
 * same file). Each node of the op types is passed to `report` (may be NULL)
 * as one line: "quantized MatMul 'NAME' (B 'W' 64x128)" or "skipped MatMul
 * 'NAME': why". The output is written to a temporary file beside
 * `out_path`, synced and renamed, so it is complete or absent. Fails with
 * TOLK_ERR_NOT_FOUND when nothing could be quantized (no output written),
 * TOLK_ERR_UNSUPPORTED for models with external data or an ai.onnx opset
 * below 10, the loader's statuses for files that are not models, and
 * TOLK_ERR_IO when the output cannot be written. */
tolk_status tolk_model_quantize(const char *in_path, const char *out_path,
                                tolk_quantize_params params, tolk_report_fn report, void *user,
                                tolk_quantize_summary *out, tolk_error *err);

/* ------------------------------------------------------------------ graph optimization
 * (src/exec/optimize.c, src/ir/rewrite.c, src/ir/fuse*.c) The graph rewrites
 * of ONNX Runtime's offline optimizer (SessionOptions.optimized_model_filepath)
 * on the main graph, by level:
 *  - BASIC: constant folding with tolk's own kernels (a node fed only by
 *    constants becomes an initializer, except one whose outputs only a
 *    MatMul's packed weight reads, as a tied LM head's Transpose: folding
 *    it would store a second copy of the embedding), Shape of a fully
 *    static value replaced by its value, common-subexpression elimination
 *    (the duplicate Shape/Gather/Unsqueeze/Concat chains exporters leave),
 *    MatMul + Add → Gemm where A is 2-D (as ORT's basic level does) and
 *    dead-node removal;
 *  - EXTENDED: + fusions into com.microsoft ops: x·Sigmoid(αx) → QuickGelu,
 *    the Erf form of GELU → Gelu (BiasGelu with a bias Add before it), its
 *    tanh form → FastGelu (a bias Add before it as FastGelu's bias input),
 *    LayerNormalization written out op by op → LayerNormalization (opset 17+),
 *    MatMul with last-two-axes Transposes and scalar Mul/Div on its inputs
 *    or output → FusedMatMul;
 *  - ALL: + the Marian/BART self-attention spelled out op by op →
 *    com.microsoft MultiHeadAttention, the Q/K/V projection biases as its
 *    bias input.
 * Every graph is optimized: the main one and the If/Loop/Scan bodies (the
 * merged decoder's branches); a value a body reads keeps its name. */
typedef enum tolk_opt_level {
  TOLK_OPT_NONE = 0,    /* run the graph as written */
  TOLK_OPT_BASIC = 1,   /* + constant folding of nodes fed only by constants */
  TOLK_OPT_ALL = 2,     /* + every fusion (EXTENDED's and those past it) */
  TOLK_OPT_EXTENDED = 3 /* BASIC + ORT's extended-level fusions (between BASIC and ALL) */
} tolk_opt_level;

typedef struct tolk_optimize_summary {
  size_t nodes_before, nodes_after; /* nodes, those of subgraphs included */
  size_t rewrites;                  /* nodes folded, merged, removed or fused */
  uint64_t bytes_before, bytes_after;
} tolk_optimize_summary;

/* Optimizes the model at `in_path` at `level` (not NONE) into `out_path`
 * (which may not be the same file). Each pass is reported to `report` (may
 * be NULL) as one line: "PASS: N1 -> N2 nodes (K rewrites)". The output is
 * loaded back and checked, then written to a temporary file beside
 * `out_path`, synced and renamed, so it is complete or absent. Fails with
 * the loader's statuses for files that are not models, TOLK_ERR_UNSUPPORTED
 * for models with external data or nodes tolk cannot run (folding runs
 * tolk's kernels), TOLK_ERR_INVALID_ARGUMENT for level NONE or the same
 * path twice, and TOLK_ERR_IO when the output cannot be written. */
tolk_status tolk_model_optimize(const char *in_path, const char *out_path, tolk_opt_level level,
                                tolk_report_fn report, void *user, tolk_optimize_summary *out,
                                tolk_error *err);

/* How one pass of tolk_model_optimize_each ended. */
typedef struct tolk_optimize_pass {
  const char *name;                 /* "constant folding", "attention fusion", ... */
  const char *skipped;              /* why the pass did not run, or NULL */
  size_t nodes_before, nodes_after; /* live nodes of every graph */
  size_t rewrites;
  /* The model as the pass left it, for the call's length only: a session
   * may borrow it (tolk_session_create at opt level NONE or BASIC, which
   * do not rewrite it) and must be freed before the call returns. */
  const tolk_model *model;
} tolk_optimize_pass;

typedef void (*tolk_optimize_pass_fn)(void *user, const tolk_optimize_pass *pass);

/* tolk_model_optimize, with each pass given to `each` (may be NULL) as it
 * ends rather than as a line: `tolk optimize --report` times the graph
 * after every pass this way. */
tolk_status tolk_model_optimize_each(const char *in_path, const char *out_path, tolk_opt_level level,
                                     tolk_optimize_pass_fn each, void *user, tolk_optimize_summary *out,
                                     tolk_error *err);

/* ------------------------------------------------------------------ tensors and sessions
 * (src/exec/: owned by the execution engine) */

#define TOLK_MAX_RANK 16

/* A dense, row-major tensor in native (little-endian) layout. Either owns its
 * data or borrows the caller's. STRING tensors are not supported yet. */
typedef struct tolk_tensor tolk_tensor;

/* Creates a tensor of `dtype` with shape dims[0..rank) holding a copy of
 * `nbytes` bytes at `data`; nbytes must equal numel × tolk_dtype_size(dtype).
 * data NULL: zero-filled (nbytes is then ignored). rank 0 is a scalar; dims
 * may be NULL when rank is 0. On success *out receives a tensor the caller
 * frees with tolk_tensor_free(); on failure *out is NULL. */
tolk_status tolk_tensor_create(tolk_dtype dtype, int rank, const int64_t *dims,
                               const void *data, size_t nbytes, tolk_tensor **out,
                               tolk_error *err);

/* Like tolk_tensor_create, but borrows `data` (no copy): it must stay valid,
 * aligned for the element type, and, while a run reads it, unchanged, until
 * the tensor is freed. Used as a caller-provided output buffer (see
 * tolk_session_run) the library writes into it. */
tolk_status tolk_tensor_wrap(tolk_dtype dtype, int rank, const int64_t *dims,
                             void *data, size_t nbytes, tolk_tensor **out,
                             tolk_error *err);

void tolk_tensor_free(tolk_tensor *t);

tolk_dtype tolk_tensor_dtype(const tolk_tensor *t);
int tolk_tensor_rank(const tolk_tensor *t);
/* rank entries, borrowed from the tensor. */
const int64_t *tolk_tensor_dims(const tolk_tensor *t);
/* Product of the dims (1 for a scalar, 0 for an empty tensor). */
int64_t tolk_tensor_numel(const tolk_tensor *t);
size_t tolk_tensor_nbytes(const tolk_tensor *t);
/* The element data (may be NULL when numel is 0), borrowed from the tensor. */
void *tolk_tensor_data(const tolk_tensor *t);

/* Reads the file at `path` holding one serialized ONNX TensorProto, as the
 * ONNX test data stores inputs and outputs (test_data_set_N/input_0.pb):
 * every storage form is decoded, external data is refused. On success *out
 * receives a tensor the caller frees with tolk_tensor_free(); on failure *out
 * is NULL and err names the file: TOLK_ERR_IO when it cannot be read,
 * TOLK_ERR_MALFORMED when it is not a TensorProto, TOLK_ERR_UNSUPPORTED for
 * string tensors and the types past BFLOAT16. */
tolk_status tolk_tensor_load_pb(const char *path, tolk_tensor **out, tolk_error *err);

/* A session: a model prepared to run. Creating one resolves a kernel for
 * every node (an unsupported operator, domain or opset version fails here,
 * naming the node) and prepares them.
 *
 * Thread safety: a session may be run from several threads at once. Each run
 * takes its own execution state (value table and memory arena) from a pool
 * kept by the session, so concurrent runs never share buffers; the plan
 * cache is guarded by a mutex held only at the start and end of a run. The
 * intra-op thread pool serves one run at a time: a concurrent run that finds
 * it busy runs its kernels on its own thread, so threads are never
 * oversubscribed. tolk_session_free must not race with runs. */
typedef struct tolk_session tolk_session;



/* tolk_session_params.bf16_weights. */
enum { TOLK_BF16_OFF = 0, TOLK_BF16_WEIGHTS = 1, TOLK_BF16_PRODUCTS = 2 };

typedef struct tolk_session_params {
  /* Intra-op threads, the caller's included; <= 0: the machine's cores. */
  int threads;
  tolk_opt_level opt_level;
  /* Bound on the intermediate memory one run may hold, in bytes (0: none);
   * exceeding it fails the run with TOLK_ERR_LIMIT. */
  uint64_t memory_limit;
  /* Execution plans kept, one per input-shape signature (0: default 64; a
   * decoder whose past grows by one token per step uses one per length). */
  int plan_cache_size;
  /* 1: keep a decoder's key/value cache in place (tolk_kv_cache below);
   * the session is then run with tolk_session_run_kv. 0 by default. */
  int kv_cache;
  /* 1: the DynamicQuantizeLinear nodes of a dynamically quantized graph
   * (ONNX Runtime's quantize_dynamic: DynamicQuantizeLinear → MatMulInteger
   * → Cast → Mul) quantize each row of their input (its last axis: a token)
   * with its own scale and zero point, as CTranslate2 does, instead of the
   * whole tensor with one. A row's result then does not depend on the other
   * rows of the batch — the translator sets it so that a sentence translates
   * the same in any batch — and rows keep their own range. Not ONNX's
   * semantics (results differ from ONNX Runtime for inputs of more than one
   * row); nodes whose outputs feed anything else stay per tensor. 0 by
   * default. */
  int quant_rows;
  /* 1: the output projection — a MatMul by a constant 2-D B whose result,
   * directly or through an Add, is a graph output: a translation model's LM
   * head — multiplies in int8: B is quantized once at creation with a scale
   * per output column (a vocabulary entry: one row of the tied embedding),
   * each row of A with its own scale and zero point at run time, and no fp32
   * copy of B is kept. Its logits differ from the fp32 product by at most
   * the quantization error (bounded in tests/test_ops_matmul_int8.c); a row's
   * logits do not depend on the other rows. 0 by default. */
  int int8_lm_head;
  /* 1: make a signature's plan at its second run, not its first (the run
   * before is served from the heap, as any run without a plan). Laying out a
   * plan costs a few percent of a small step, so a decoder whose shapes
   * rarely recur (a new source length or past length at each step; the
   * translator sets this) would otherwise pay for plans it never uses. The
   * last 256 signatures run without a plan are remembered. 0 by default. */
  int plan_on_repeat;
  /* TOLK_BF16_WEIGHTS (1): MatMul and Gemm by a constant float matrix hold
   * it as bfloat16 (rounded to nearest even) and widen it as the product
   * reads it: half the weight memory, and half the bytes a step that streams
   * its weights (a decoder at batch 1) reads. Activations, products and sums
   * stay fp32, so each result is bit for bit the fp32 product by the rounded
   * matrix, on every CPU; it differs from the fp32 model's by the weights'
   * rounding (relative 2^-9 each; README, "bfloat16 weights").
   * TOLK_BF16_PRODUCTS (2): the same weights, and the activations rounded
   * to bfloat16 as well, the products taken in pairs by AVX512-BF16's
   * VDPBF16PS (sums fp32): twice the multiply-adds an instruction, so about
   * twice the speed where a product is compute-bound (a batch, a beam); the
   * same bits on every CPU that has it, and session creation fails with
   * TOLK_ERR_UNSUPPORTED on one that has not. Int8 weights and the codes of
   * a DequantizeLinear'd matrix stay as they are. 0 by default. */
  int bf16_weights;
  /* 1: with kv_cache, a pair whose keys attention reads only transposed
   * (Transpose(0,1,3,2) [→ Mul by a constant] → MatMul, no MatMul reading
   * them as written) keeps them only that way, not also as written: a third
   * less cache memory, and less to copy when beams reorder their rows. The
   * products are the same. tolk_kv_cache_get then refuses such a pair
   * (TOLK_ERR_UNSUPPORTED: the transposed keys carry the graph's scale, so
   * they cannot give the keys back bit for bit); tolk_kv_cache_set still
   * takes it as written. The translator sets it. 0 by default. */
  int kv_keys_transposed_only;
} tolk_session_params;

tolk_session_params tolk_session_default_params(void);

/* Creates a session for `model`, which the session borrows: the model must
 * outlive it. On success *out receives a session the caller frees with
 * tolk_session_free(); on failure *out is NULL. */
tolk_status tolk_session_create(const tolk_model *model, tolk_session_params params,
                                tolk_session **out, tolk_error *err);

/* Loads the model at `path` (with external data) and creates a session that
 * owns it. */
tolk_status tolk_session_create_from_file(const char *path, tolk_session_params params,
                                          tolk_session **out, tolk_error *err);

/* Like tolk_session_create_from_file from `size` bytes at `data`, which must
 * outlive the session; `base_dir` as for tolk_model_load_buffer. */
tolk_status tolk_session_create_from_buffer(const void *data, size_t size,
                                            const char *base_dir,
                                            tolk_session_params params,
                                            tolk_session **out, tolk_error *err);

void tolk_session_free(tolk_session *session);

/* A declared graph input or output. All pointers are borrowed from the
 * session. */
typedef struct tolk_value_info {
  const char *name;
  tolk_dtype dtype;          /* TOLK_UNDEFINED when not declared */
  int rank;                  /* -1: rank not declared */
  const int64_t *dims;       /* rank entries; -1 for a symbolic or unknown dim */
  const char *const *dim_names; /* rank entries; the symbol, or NULL */
} tolk_value_info;

/* Inputs the caller supplies (initializers that are also declared inputs are
 * not listed, though a run may override them by name), and the outputs. */
size_t tolk_session_input_count(const tolk_session *session);
size_t tolk_session_output_count(const tolk_session *session);
/* NULL when i is out of range. */
const tolk_value_info *tolk_session_input(const tolk_session *session, size_t i);
const tolk_value_info *tolk_session_output(const tolk_session *session, size_t i);

/* Figures about one run. */
typedef struct tolk_run_stats {
  uint64_t peak_bytes;   /* most intermediate bytes live at once */
  uint64_t arena_bytes;  /* the planned arena serving this input signature */
  uint64_t heap_bytes;   /* intermediate bytes that came from the heap (the
                            first run of a signature, data-dependent shapes) */
  uint64_t output_bytes; /* bytes of the returned outputs */
  uint32_t nodes_run;    /* kernels executed, subgraph nodes included */
  int plan_reused;       /* 1 when a cached plan served the run */
  uint64_t arena_held;   /* arena bytes kept for the next run: the largest a
                            recent run needed, released once 256 runs in a
                            row have needed at most half of it */
} tolk_run_stats;

/* Runs the model. inputs[i] is bound to the graph input named
 * input_names[i]; every input without an initializer must be given, with the
 * declared dtype and a shape matching the declared one (symbolic dims take
 * one value per run across all inputs; an empty tensor binds none, as
 * exporters feed empty placeholders such as a first step's past_key_values).
 * output_names[0..n_outputs) selects outputs; output_names NULL means all,
 * in declared order (n_outputs must then equal tolk_session_output_count()).
 * A name may also be that of an
 * intermediate value of the main graph, which is then kept and returned
 * (for debugging and parity checks; such runs bypass the memory plan).
 *
 * outputs[i] NULL on entry: on success it receives a new tensor the caller
 * frees with tolk_tensor_free(). outputs[i] non-NULL on entry: a
 * caller-provided buffer (IO binding) of the output's exact dtype and shape,
 * which the run fills in place; a mismatch fails with TOLK_ERR_SHAPE or
 * TOLK_ERR_TYPE. On failure, outputs that were NULL on entry are NULL.
 *
 * stats (may be NULL) receives figures about the run. */
tolk_status tolk_session_run(tolk_session *session, size_t n_inputs,
                             const char *const *input_names,
                             const tolk_tensor *const *inputs, size_t n_outputs,
                             const char *const *output_names, tolk_tensor **outputs,
                             tolk_run_stats *stats, tolk_error *err);

/* ------------------------------------------------------------------ calibration
 * (src/exec/calibrate.c) for static quantization (tolk_quantize_params). */

/* How a tensor's range is chosen from what the samples made of it, as ONNX
 * Runtime's calibrators (calibrate.py) choose it:
 *  - MINMAX: the least and greatest value;
 *  - ENTROPY: one histogram of all values over [-t, t] (t the largest
 *    magnitude, num_bins bins), and of the windows centred on 0 from
 *    num_quantized_bins bins wide to the whole, the one whose quantization
 *    into num_quantized_bins levels loses least (KL divergence). With ORT's
 *    defaults (128 and 128) that is the whole histogram: MinMax's range;
 *  - PERCENTILE: one histogram of all absolute values (num_bins bins), and
 *    [-t, t] with t where `percentile` % of the values lie below.
 * Each range is then clipped to the least and greatest value seen. */
typedef enum tolk_calibrate_method {
  TOLK_CALIBRATE_MINMAX = 0,
  TOLK_CALIBRATE_ENTROPY = 1,
  TOLK_CALIBRATE_PERCENTILE = 2
} tolk_calibrate_method;

typedef struct tolk_calibration_params {
  tolk_calibrate_method method; /* MINMAX by default */
  int num_bins;           /* histogram bins; 0: ORT's default (Entropy 128, Percentile 2048) */
  int num_quantized_bins; /* Entropy; 0: 128 */
  double percentile;      /* Percentile, in (0, 100]; 0: 99.999 */
} tolk_calibration_params;

tolk_calibration_params tolk_calibration_default_params(void);

/* Creates a calibration for the model at `path`: it observes every float
 * input and output of a MatMul that is not an initializer (ONNX Runtime's
 * calibrator for op types MatMul), in the main graph and in subgraphs (If
 * branches, Loop and Scan bodies), which ORT's calibrator leaves out: each
 * branch of a merged decoder gets the ranges of the runs that took it. On success
 * *out receives a calibration the caller frees with tolk_calibration_free();
 * on failure *out is NULL: TOLK_ERR_INVALID_ARGUMENT for parameters out of
 * range, or the loader's or session's status. */
tolk_status tolk_calibration_create(const char *path, tolk_calibration_params params, tolk_calibration **out,
                                    tolk_error *err);

/* Runs the float model once on one calibration sample — inputs[i] bound to
 * the graph input names[i], every input the graph needs given, with its
 * declared dtype and a shape matching the declared one — and widens each
 * observed tensor's [min, max] by what it held. Fails with
 * TOLK_ERR_INVALID_ARGUMENT naming the input when a name is not an input of
 * the graph, is given twice or is missing, TOLK_ERR_TYPE or TOLK_ERR_SHAPE
 * naming it when its dtype or shape does not match the declaration, and
 * TOLK_ERR_INVALID_ARGUMENT when every tensor is empty (an empty sample
 * calibrates nothing; one empty input is a placeholder, as a first decoding
 * step's past), or when the calibration is finished. A failed sample leaves
 * the ranges as they were. The histogram methods keep a copy of each
 * sample's inputs until tolk_calibration_finish. */
tolk_status tolk_calibration_add(tolk_calibration *cal, size_t n_inputs, const char *const *names,
                                 const tolk_tensor *const *inputs, tolk_error *err);

/* tolk_calibration_add that also returns graph outputs of the run, as
 * tolk_session_run does (outputs[i] NULL on entry receives a new tensor the
 * caller frees; output_names NULL: all, in declared order, n_outputs then
 * tolk_calibration_output_count()) — for a caller feeding one graph's
 * outputs to the next, as translation does. */
tolk_status tolk_calibration_add_run(tolk_calibration *cal, size_t n_inputs, const char *const *names,
                                     const tolk_tensor *const *inputs, size_t n_outputs,
                                     const char *const *output_names, tolk_tensor **outputs, tolk_error *err);

/* Samples added so far. */
size_t tolk_calibration_samples(const tolk_calibration *cal);

/* The graph inputs a sample gives and the outputs it makes, as
 * tolk_session_input_count, tolk_session_input and their output twins
 * (borrowed from the calibration). */
size_t tolk_calibration_input_count(const tolk_calibration *cal);
const tolk_value_info *tolk_calibration_input(const tolk_calibration *cal, size_t i);
size_t tolk_calibration_output_count(const tolk_calibration *cal);
const tolk_value_info *tolk_calibration_output(const tolk_calibration *cal, size_t i);

/* Ends the sampling: refuses samples that cannot calibrate (below), then
 * computes the ranges — for the histogram methods by running every sample
 * again, now that the histograms' span is known. Fails with
 * TOLK_ERR_INVALID_ARGUMENT and why when there are no samples, or when they
 * look random — ranges from random data destroy quality. The rule, for
 * token ids and other integer inputs: an input that took at least 64 values
 * in all, 90 % or more of them distinct, is random-looking (text repeats its
 * tokens: end-of-sentence, punctuation, common words; ids drawn uniformly
 * from a vocabulary of thousands hardly ever repeat). Calling it again is a
 * no-op. */
tolk_status tolk_calibration_finish(tolk_calibration *cal, tolk_error *err);

/* TOLK_OK when `cal` is finished and its samples pass the rules above, else
 * the error finish gives (or says it was not called); tolk_model_quantize
 * checks its calibration with it. */
tolk_status tolk_calibration_check(const tolk_calibration *cal, tolk_error *err);

/* The range of the main graph's tensor named `name` into *lo and *hi; 0 when
 * there is none (not a tensor the calibration watches, not float, never
 * computed by any sample, or the calibration is not finished). */
int tolk_calibration_range(const tolk_calibration *cal, const char *name, float *lo, float *hi);

/* tolk_calibration_range for a tensor of the subgraph `graph`, named by the
 * nodes and attributes leading to it: "NODE/ATTR" ("optimum::if/then_branch"
 * for the cache branch of Optimum's merged decoder), nested ones joined by
 * '/' ("If_0/else_branch/Loop_2/body"), a GRAPHS attribute's j-th graph
 * "NODE/ATTR[j]"; NULL or "" is the main graph. Two branches may hold
 * tensors of one name, each with its own range. */
int tolk_calibration_range_in(const tolk_calibration *cal, const char *graph, const char *name, float *lo,
                              float *hi);

void tolk_calibration_free(tolk_calibration *cal);

/* ------------------------------------------------------------------ key/value cache
 * Decoders exported with a cache (Optimum's decoder_with_past_model.onnx)
 * take past_key_values.* inputs and return present.* = Concat(past, new)
 * along the sequence axis, which the attention then reads; run step by step
 * as written, every step copies the whole cache (Concat, then the Transpose
 * and Mul in front of the keys' MatMul) and hands it back as a new output.
 *
 * A session created with params.kv_cache = 1 recognises that pattern — for
 * each Concat joining a past input to a present output whose other readers
 * are only Shape, Transpose(0,1,3,2) [→ Mul by a constant] → MatMul and
 * MatMul — and rewires it to one buffer per pair that grows at its end:
 * a step writes its new keys/values after the ones held and attention reads
 * them in place. The pattern is recognised rather than declared because it
 * is how every exporter writes cached attention, so existing models need no
 * change; tolk_session_kv_count says whether it was found (0: the session
 * runs as written, with tolk_session_run).
 *
 * A tolk_kv_cache holds one batch's cache for such a session; the caller
 * owns it, and one run at a time may use it. In tolk_session_run_kv the
 * past inputs of the pairs are not given (the cache stands for them) and
 * their present outputs cannot be requested (read them with
 * tolk_kv_cache_get). */
typedef struct tolk_kv_cache tolk_kv_cache;

/* (past input, present output) pairs the session keeps in place. */
size_t tolk_session_kv_count(const tolk_session *session);
/* Name of the past input of pair i (borrowed from the session). */
const char *tolk_session_kv_input(const tolk_session *session, size_t i);

/* An empty cache (length 0) of `rows` sequences for `session`, which it
 * borrows. Free with tolk_kv_cache_free. */
tolk_status tolk_kv_cache_create(const tolk_session *session, int64_t rows, tolk_kv_cache **out,
                                 tolk_error *err);
void tolk_kv_cache_free(tolk_kv_cache *cache);
/* Positions held (the past length of the next run; with rows of
 * different lengths, the longest) and rows. */
int64_t tolk_kv_cache_length(const tolk_kv_cache *cache);
int64_t tolk_kv_cache_rows(const tolk_kv_cache *cache);

/* Sets the cache from n tensors named by their past inputs (e.g. the
 * present outputs of a first, cache-less decoder run): every pair must be
 * given, all [rows, heads, len, head_dim] with one len. */
tolk_status tolk_kv_cache_set(tolk_kv_cache *cache, size_t n, const char *const *past_names,
                              const tolk_tensor *const *values, tolk_error *err);

/* Keeps rows keep[0..n) in that order (repeats allowed): beams following
 * their parents, finished rows leaving. Rows that stay where they are are
 * not copied. */
tolk_status tolk_kv_cache_select(tolk_kv_cache *cache, const int32_t *keep, size_t n,
                                 tolk_error *err);

/* Rows of different lengths in one cache — sequences that started at
 * different steps sharing a batch (continuous batching) — need each row's
 * position embedding looked up from its own length. A session finds that
 * lookup too (the exporters' Gather(table, Range(past_len, …)) with past_len
 * read from a past input's shape) and then says 1 here: such a cache is run
 * one new position per step, each row attends to its own positions only,
 * and every row's outputs are bit for bit those it would have alone. The
 * causal mask the graph builds from the common length masks nothing for one
 * new position. 0: rows must keep one length. */
int tolk_session_kv_ragged(const tolk_session *session);

/* Moves the rows of `src` to the end of `dst` (both for one session; src is
 * left with 0 rows). Their lengths may differ when the session is ragged;
 * otherwise that fails with TOLK_ERR_UNSUPPORTED. On failure both are
 * unchanged. */
tolk_status tolk_kv_cache_append(tolk_kv_cache *dst, tolk_kv_cache *src, tolk_error *err);

/* Positions held by row `row` (≤ tolk_kv_cache_length, which is the
 * longest row's); -1 for a row out of range. */
int64_t tolk_kv_cache_row_length(const tolk_kv_cache *cache, int64_t row);

/* A new tensor [rows, heads, len, head_dim] with the content of the pair
 * whose past input is `past_name` (caller frees). */
tolk_status tolk_kv_cache_get(const tolk_kv_cache *cache, const char *past_name,
                              tolk_tensor **out, tolk_error *err);

/* Inputs every row of one source reads alike need not be given per row: a
 * decoder's cross-attention keys and values are the same for all beams of a
 * sentence, and given per row a beam search holds (and the graph transposes)
 * them beam-width times. A session that keeps a cache also finds the float
 * inputs [rows, heads, len, head_dim] that only attention reads — keys
 * through Transpose(0,1,3,2) [→ Mul by a constant] → MatMul, values as a
 * MatMul's second operand, their Shape for the other dims — and lists them
 * here. tolk_session_run_kv takes each of them with the rows that
 * tolk_kv_cache_share states, row r of the cache reading row source[r]; the
 * results are bit for bit those of the rows given in full. */
size_t tolk_session_kv_shared_count(const tolk_session *session);
/* Name of shared input i (borrowed from the session). */
const char *tolk_session_kv_shared_input(const tolk_session *session, size_t i);

/* Row r of the cache reads row source[r] (0 ≤ source[r] < n_sources) of the
 * shared inputs, which then have n_sources rows; source has one entry per
 * row (copied); tolk_kv_cache_select carries each row's source along, and
 * tolk_kv_cache_append puts src's after dst's (the joined batch's shared
 * inputs being dst's rows, then src's). NULL, the default: not shared, they
 * are given per row as declared (and selecting rows keeps it so).
 * While shared, the cache keeps what it derives from them (the keys
 * transposed) from run to run: their values may change only together with
 * a call of tolk_kv_cache_share, _append or _set, which drop it. */
tolk_status tolk_kv_cache_share(tolk_kv_cache *cache, const int32_t *source, int64_t n_sources,
                                tolk_error *err);

/* tolk_session_run with the past inputs bound to `cache`; on success the
 * cache holds the new positions too. On failure it is unchanged. */
tolk_status tolk_session_run_kv(tolk_session *session, tolk_kv_cache *cache, size_t n_inputs,
                                const char *const *input_names,
                                const tolk_tensor *const *inputs, size_t n_outputs,
                                const char *const *output_names, tolk_tensor **outputs,
                                tolk_run_stats *stats, tolk_error *err);

/* ------------------------------------------------------------------ tokenizer
 * (src/tokenizer/: owned by the tokenizer) */

/* A Marian tokenizer as HuggingFace's MarianTokenizer (transformers 4.57):
 * source.spm encodes, target.spm decodes, vocab.json maps pieces to ids.
 * Immutable once created; safe to use from many threads at once. */
typedef struct tolk_tokenizer tolk_tokenizer;

typedef struct tolk_tokenizer_params {
  /* Truncate encodings to this many ids including </s>. 0 (the default, as
   * MarianTokenizer's __call__): never; -1: the model's model_max_length
   * from tokenizer_config.json (512 if absent). */
  int max_length;
} tolk_tokenizer_params;

tolk_tokenizer_params tolk_tokenizer_default_params(void);

/* Loads source.spm, target.spm, vocab.json (or target_vocab.json as well when
 * tokenizer_config.json says separate_vocabs) and tokenizer_config.json from
 * the folder `model_dir`. *out is freed with tolk_tokenizer_free(). */
tolk_status tolk_tokenizer_create(const char *model_dir, tolk_tokenizer_params params,
                                  tolk_tokenizer **out, tolk_error *err);
void tolk_tokenizer_free(tolk_tokenizer *tok);

/* Ids of one encoded text; tolk_ids_free(ids, n) frees the `ids` of n of
 * them. */
typedef struct tolk_ids {
  int32_t *ids;
  size_t n;
  size_t dropped; /* ids cut off by truncation (0 when none) */
} tolk_ids;

void tolk_ids_free(tolk_ids *ids, size_t n);

enum {
  TOLK_TOKENIZE_TARGET = 1 << 0, /* encode with the target side (labels) */
  TOLK_TOKENIZE_NO_EOS = 1 << 1  /* do not append </s> */
};

/* Encodes n texts (texts[i] has lens[i] bytes; lens may be NULL for
 * NUL-terminated texts) into out[0..n), freed with tolk_ids_free(out, n).
 * Any bytes are accepted: invalid UTF-8 is replaced per byte by U+FFFD, as
 * sentencepiece does. A leading language tag (">>cmn_Hans<<") is mapped
 * straight to its id. */
tolk_status tolk_tokenizer_encode_batch(const tolk_tokenizer *tok, const char *const *texts,
                                        const size_t *lens, size_t n, int flags,
                                        tolk_ids *out, tolk_error *err);

enum {
  TOLK_DECODE_SKIP_SPECIAL = 1 << 0, /* drop </s>, <unk>, <pad> */
  TOLK_DECODE_SOURCE = 1 << 1        /* decode with source.spm */
};

/* Decodes n id sequences into out[0..n): NUL-terminated strings, freed with
 * tolk_strings_free(out, n). Ids outside the vocabulary decode as <unk>, as
 * MarianTokenizer does. */
tolk_status tolk_tokenizer_decode_batch(const tolk_tokenizer *tok, const tolk_ids *in, size_t n,
                                        int flags, char **out, tolk_error *err);

/* Frees strings[0..n) and sets them to NULL; the array stays the caller's. */
void tolk_strings_free(char **strings, size_t n);

/* The tokens of one text before they become ids — language tag, special
 * tokens and sentencepiece pieces, as MarianTokenizer.tokenize() gives them:
 * tokens[0..n), freed with tolk_tokens_free(). */
typedef struct tolk_tokens {
  char **tokens;
  size_t n;
} tolk_tokens;

tolk_status tolk_tokenizer_tokenize(const tolk_tokenizer *tok, const char *text, size_t len,
                                    int flags, tolk_tokens *out, tolk_error *err);
void tolk_tokens_free(tolk_tokens *t);

/* Vocabulary size, and the piece for `id` (borrowed, NUL-terminated; NULL if
 * out of range). */
size_t tolk_tokenizer_vocab_size(const tolk_tokenizer *tok);
const char *tolk_tokenizer_id_to_piece(const tolk_tokenizer *tok, int32_t id);
/* The id of `piece`, or -1 when it is not in the vocabulary. */
int32_t tolk_tokenizer_piece_to_id(const tolk_tokenizer *tok, const char *piece);

typedef struct tolk_special_ids {
  int32_t eos, unk, pad;
} tolk_special_ids;
tolk_special_ids tolk_tokenizer_special_ids(const tolk_tokenizer *tok);

/* The target-language tags of the vocabulary (">>cmn_Hans<<", …) in id
 * order: *n receives the count; the array and strings are borrowed. */
const char *const *tolk_tokenizer_language_tags(const tolk_tokenizer *tok, size_t *n);

/* ------------------------------------------------------------------ translator
 * (src/mt/: Marian models exported by HuggingFace Optimum) */

/* A translation model: a folder in Optimum's export layout — encoder_model.onnx
 * with decoder_model.onnx + decoder_with_past_model.onnx, or
 * decoder_model_merged.onnx — at its top level or under onnx/, with
 * config.json, generation_config.json and the tokenizer files. Immutable once
 * created; translations may run from several threads at once. */
typedef struct tolk_translator tolk_translator;

typedef struct tolk_translator_params {
  int threads;           /* intra-op threads per run; <= 0: the machine's cores */
  int int8;              /* use the *_quantized.onnx graphs */
  int verify;            /* check tolk-manifest.json checksums when present */
  /* 1: the decoder's LM head (65,001 × d_model for the OPUS models, most of
   * a step's arithmetic) multiplies in int8 with a scale per vocabulary row
   * (tolk_session_params.int8_lm_head), as CTranslate2 does; ORT's int8
   * graphs keep it fp32. Faster and 4× smaller, at a small cost in
   * accuracy (README). 0 by default. */
  int int8_lm_head;
  /* The graphs' opt level (tolk_session_params.opt_level); 0 (NONE) keeps
   * the sessions' default, BASIC. EXTENDED and ALL apply the fusions of
   * `tolk optimize` as the sessions are created. */
  int opt_level;
  /* TOLK_BF16_WEIGHTS: the graphs' float weight matrices held as bfloat16
   * (tolk_session_params.bf16_weights): for fp32 models, half the weight
   * memory and about twice the speed where a step streams its weights (one
   * sentence at a time), at the accuracy the README measures.
   * TOLK_BF16_PRODUCTS: the activations rounded too and the products
   * AVX512-BF16's, faster again for batches and beams (CPUs with
   * AVX512-BF16 only). 0 by default. */
  int bf16;
  /* A vocabulary shortlist (NULL: none, the default), read at creation: the
   * path of a file in CTranslate2's vocabulary map format (README,
   * "Vocabulary shortlist"; `tolk vmap build` makes one from parallel
   * text). Each batch's LM head then computes only the batch's candidates —
   * the targets its sources' n-grams map to, the ids the file always
   * includes, </s>, <unk> and <pad> — as CTranslate2's use_vmap does; other
   * tokens are never generated. A sentence's output then depends on the
   * other sentences of its batch, whose candidates it shares. A malformed
   * file fails creation with TOLK_ERR_MALFORMED naming the line. */
  const char *vmap;
} tolk_translator_params;

tolk_translator_params tolk_translator_default_params(void);

/* Loads the model folder. Every missing or inconsistent file is one clear
 * error naming the file. Nothing is fetched from the network. *out is freed
 * with tolk_translator_free(). */
tolk_status tolk_translator_create(const char *model_dir, tolk_translator_params params,
                                   tolk_translator **out, tolk_error *err);
void tolk_translator_free(tolk_translator *tr);

/* Generation settings, as transformers' generate() names them. Defaults come
 * from the model's generation_config.json (then config.json). */
typedef struct tolk_generate_params {
  int num_beams;            /* 1: greedy (or sampling) */
  float length_penalty;
  int early_stopping;       /* 0 false, 1 true, 2 "never" */
  int max_new_tokens;       /* > 0: overrides max_length */
  int max_length;           /* decoder start token included */
  int min_length;
  int min_new_tokens;
  float repetition_penalty;
  int no_repeat_ngram_size;
  int num_return_sequences;
  int renormalize_logits;
  int do_sample;
  float temperature;
  int top_k;
  float top_p;
  uint64_t seed;
  /* Sentences per encoder/decoder run are bounded by this many source
   * tokens (padding included); 0: one batch. */
  int batch_tokens;
  /* 1 (the default): every tolk_generation carries its score and
   * token_scores. 0: a greedy search (not sampling) may leave them 0: with
   * renormalize_logits it then takes each token without the log-softmax over
   * the vocabulary that only the scores need (the same token: README,
   * "Translating"), as CTranslate2 does without return_scores. Beam search
   * always scores. */
  int output_scores;
} tolk_generate_params;

/* The model's defaults: generation_config.json, then config.json, then
 * transformers' own defaults. */
tolk_generate_params tolk_generate_default_params(const tolk_translator *tr);

/* One generated sequence. `ids` starts with the decoder start token, as
 * transformers returns it. `score` is the beam's sequence score (length
 * penalty applied), or the sum of token log-probabilities for greedy and
 * sampling. `token_scores` (n - 1 entries) are the processed log-probability
 * of each generated token. tolk_generation_free(g, n) frees the `ids` and
 * `token_scores` of n of them. */
typedef struct tolk_generation {
  int32_t *ids;
  size_t n;
  float score;
  float *token_scores;
} tolk_generation;

void tolk_generation_free(tolk_generation *g, size_t n);

/* Generates for n source id sequences (each ending in </s>, as the tokenizer
 * makes them). out must hold n × num_return_sequences entries, filled in
 * source order and freed with tolk_generation_free(out, n × num_return_sequences). */
tolk_status tolk_translator_generate(const tolk_translator *tr, const tolk_ids *sources,
                                     size_t n, const tolk_generate_params *params,
                                     tolk_generation *out, tolk_error *err);

/* What a translator was loaded from. Strings are borrowed from it; a graph
 * path is "" when that form is not used. */
typedef struct tolk_translator_info {
  const char *folder, *encoder, *decoder, *decoder_with_past, *decoder_merged;
  int vocab_size, d_model, decoder_layers, decoder_heads, max_positions;
  int32_t decoder_start, eos, pad;
  int verified; /* 1: files matched tolk-manifest.json; 0: none or skipped */
  int int8;     /* 1: the *_quantized graphs run (asked for, or the only ones there) */
} tolk_translator_info;

tolk_translator_info tolk_translator_describe(const tolk_translator *tr);

/* The tokenizer of the model (borrowed). */
const tolk_tokenizer *tolk_translator_tokenizer(const tolk_translator *tr);

/* What the vocabulary shortlist (tolk_translator_params.vmap) held. */
typedef struct tolk_vmap_info {
  size_t lines;           /* lines read */
  size_t rules;           /* source n-grams kept */
  size_t always;          /* ids candidates of every batch, the special ones included */
  size_t unknown_sources; /* lines dropped: a source piece not in the vocabulary */
  size_t unknown_targets; /* target pieces not in the vocabulary, left out */
  size_t duplicate_keys;  /* lines replaced by a later one of the same n-gram */
} tolk_vmap_info;

/* 1 with *out filled when the translator has a shortlist, else 0. */
int tolk_translator_vmap_info(const tolk_translator *tr, tolk_vmap_info *out);

/* Translates n texts: each is tokenized, generated and decoded; out[i] is the
 * translation of texts[i] (the best sequence); free them with
 * tolk_strings_free(out, n). A text that does not start with a language tag gets `tag`
 * (e.g. ">>cmn_Hans<<") in front when `tag` is not NULL. */
tolk_status tolk_translator_translate(const tolk_translator *tr, const char *const *texts,
                                      size_t n, const char *tag,
                                      const tolk_generate_params *params, char **out,
                                      tolk_error *err);

/* One sentence of a translated text. */
typedef struct tolk_sentence {
  size_t begin, end;   /* byte range of the source sentence in the text */
  size_t line;         /* 0-based line of the text it is on */
  char *translation;
  int32_t *ids;        /* generated ids, decoder start first */
  size_t n_ids;
  float score;
} tolk_sentence;

typedef struct tolk_text_translation {
  char *text;          /* the whole translation, line breaks as in the source */
  tolk_sentence *sentences;
  size_t n_sentences;
  double tokenize_ms, generate_ms, decode_ms;
} tolk_text_translation;

/* Translates a text of any length: it is split into lines and sentences
 * (abbreviations, decimals, URLs, quotes and ellipses handled), a sentence
 * longer than the model's positions is split again at word boundaries, never
 * truncated, all sentences are translated in length-sorted batches, and the
 * results are joined in order with the source's line breaks. A tag at the
 * start of the text (">>yue_Hans<<") applies to all its sentences; otherwise
 * `tag` (may be NULL) does. What *out points to is freed with
 * tolk_text_translation_free(out). */
tolk_status tolk_translator_translate_text(const tolk_translator *tr, const char *text, size_t len,
                                           const char *tag, const tolk_generate_params *params,
                                           tolk_text_translation *out, tolk_error *err);
void tolk_text_translation_free(tolk_text_translation *t);

/* ------------------------------------------------------------------ checksums
 * (src/mt/verify.c) Files against recorded checksums, every file listed —
 * not only those a translator reads — as a release check (`tolk doctor`)
 * wants. Each file that fails is passed to `report` (may be NULL) as one
 * line starting with its path: "PATH: missing", "PATH: 1234 bytes, the list
 * says 1235", "PATH: sha256 X, the list says Y". */
typedef struct tolk_verify_summary {
  size_t files;  /* files listed */
  size_t failed; /* of them: missing, unreadable, of another size or sha256 */
  int found;     /* 0: tolk_manifest_check found no tolk-manifest.json */
} tolk_verify_summary;

/* Checks the files model_dir/tolk-manifest.json lists. A folder without a
 * manifest is not an error: *out says found = 0. Returns TOLK_OK when the
 * list could be read, whatever the files' verdict (see *out);
 * TOLK_ERR_MALFORMED for a manifest that is not one (an entry without path
 * or sha256, a path leaving the folder), TOLK_ERR_NOT_FOUND for a missing
 * folder. */
tolk_status tolk_manifest_check(const char *model_dir, tolk_report_fn report, void *user,
                                tolk_verify_summary *out, tolk_error *err);

/* Checks the files a list in `sha256sum` format names ("HEX  NAME" or
 * "HEX *NAME" a line; relative names are looked up in the list's folder).
 * As tolk_manifest_check otherwise; a line of another form is
 * TOLK_ERR_MALFORMED naming its line number. */
tolk_status tolk_checksums_check(const char *sums_path, tolk_report_fn report, void *user,
                                 tolk_verify_summary *out, tolk_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TOLK_H */
