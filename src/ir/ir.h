/*
 * ir.h — tolk's in-memory form of an ONNX model.
 *
 * The loader (src/onnx/) decodes ModelProto into these structs; the checker,
 * `inspect`, optimisation passes, the executor and a future writer all work on
 * them. Everything hangs off one struct tolk_arena owned by the model, so a
 * model frees in one go. Strings are NUL-terminated copies in the arena (names
 * are short); tensor payloads point into the memory-mapped file when their
 * layout allows (zero-copy) and are converted into the arena otherwise.
 *
 * Values are linked by pointer: a node's inputs are the ir_value structs that
 * produced them, resolved by name in lexical scope (a subgraph sees the values
 * of the graphs enclosing it). A name that resolves to nothing yields a value
 * with IR_VALUE_UNDEFINED set, so the loader never fails on a dangling name
 * and the checker reports it.
 */
#ifndef TOLK_IR_H
#define TOLK_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/core.h"

#define IR_MAX_RANK 16

/* A byte string that is not NUL-terminated (ONNX strings may hold any bytes). */
struct ir_bytes {
  const uint8_t *data;
  size_t len;
};

/* One dimension of a declared shape: a number, a symbol (dim_param), or
 * neither (unknown). */
struct ir_dim {
  int64_t value;     /* >= 0 when known; -1 otherwise */
  const char *param; /* symbolic name, or NULL */
};

enum ir_type_kind {
  IR_TYPE_NONE = 0, /* no type recorded */
  IR_TYPE_TENSOR,
  IR_TYPE_SPARSE_TENSOR,
  IR_TYPE_SEQUENCE,
  IR_TYPE_MAP,
  IR_TYPE_OPTIONAL
};

/* A declared type: for tensors (and sequences/optionals of tensors, where
 * `elem_*` describe the element), dtype plus an optional shape. */
struct ir_type {
  enum ir_type_kind kind;
  enum ir_type_kind elem_kind; /* for SEQUENCE/OPTIONAL: the element's kind */
  int32_t dtype;               /* tolk_dtype; TOLK_UNDEFINED if absent */
  int rank;                    /* -1: shape absent (any rank) */
  struct ir_dim *dims;         /* rank entries */
};

enum ir_data_location {
  IR_DATA_INLINE = 0, /* in the model bytes */
  IR_DATA_EXTERNAL    /* in a file beside the model */
};

/* Constant tensor data: an initializer, a Constant's value, a TENSOR
 * attribute. */
struct ir_tensor {
  const char *name;
  int32_t dtype; /* tolk_dtype */
  int rank;
  int64_t *dims;  /* rank entries, each >= 0 */
  int64_t numel;  /* product of dims (1 for rank 0) */
  /* Element data in native layout (little-endian, dense, row-major), aligned
   * for its dtype unless `misaligned` is set. For TOLK_STRING: an array of
   * numel struct ir_bytes. NULL when numel is 0, and for external data not
   * (yet) loaded. */
  const void *data;
  size_t nbytes;     /* numel * element size (strings: numel * sizeof ir_bytes) */
  bool zero_copy;    /* data points into a mapped file */
  /* data lies in one of the model's read-only private file mappings: its
   * pages may be given back (tolk_drop_mapped_pages) and fault back in. */
  bool file_pages;
  /* Graph initializers only: data is raw_data left in place at an address
   * not aligned for the dtype (exporters pack raw_data with no padding), so
   * loading copies nothing. Read it bytewise (memcpy); the executor binds an
   * aligned copy (src/exec/align.c) for kernels that need typed access. */
  bool misaligned;
  enum ir_data_location location;
  /* External data, as declared (location relative to the model's folder). */
  const char *ext_location;
  int64_t ext_offset; /* -1 if not given */
  int64_t ext_length; /* -1 if not given */
  const char *doc;
};

enum ir_value_flags {
  IR_VALUE_GRAPH_INPUT = 1u << 0,
  IR_VALUE_GRAPH_OUTPUT = 1u << 1,
  IR_VALUE_INITIALIZER = 1u << 2, /* `init` holds its data */
  IR_VALUE_UNDEFINED = 1u << 3,   /* referenced, never defined in scope */
  IR_VALUE_OUTER = 1u << 4        /* defined in an enclosing graph */
};

/* A named value flowing through a graph. */
struct ir_value {
  const char *name;
  struct ir_type type;        /* declared or inferred; kind NONE if unknown */
  struct ir_tensor *init;     /* constant data for initializers, else NULL */
  struct ir_node *producer;   /* node that outputs it, NULL for inputs/inits */
  int producer_output;        /* index into producer->outputs */
  struct ir_graph *graph;     /* the graph that defines it */
  uint32_t flags;             /* enum ir_value_flags */
  int index;                  /* position in graph->values, for side tables */
  const char *doc;
};

/* ONNX AttributeProto.AttributeType numbering. */
enum ir_attr_type {
  IR_ATTR_UNDEFINED = 0,
  IR_ATTR_FLOAT = 1,
  IR_ATTR_INT = 2,
  IR_ATTR_STRING = 3,
  IR_ATTR_TENSOR = 4,
  IR_ATTR_GRAPH = 5,
  IR_ATTR_FLOATS = 6,
  IR_ATTR_INTS = 7,
  IR_ATTR_STRINGS = 8,
  IR_ATTR_TENSORS = 9,
  IR_ATTR_GRAPHS = 10,
  IR_ATTR_SPARSE_TENSOR = 11,
  IR_ATTR_SPARSE_TENSORS = 12,
  IR_ATTR_TYPE_PROTO = 13,
  IR_ATTR_TYPE_PROTOS = 14
};

struct ir_attr {
  const char *name;
  enum ir_attr_type type;
  const char *ref_attr_name; /* inside functions: refers to a caller attr */
  float f;
  int64_t i;
  struct ir_bytes s;
  struct ir_tensor *t;       /* TENSOR (SPARSE_TENSOR: densified values) */
  struct ir_graph *g;
  struct ir_type *tp;        /* TYPE_PROTO */
  size_t n;                  /* element count of the list kinds below */
  float *floats;
  int64_t *ints;
  struct ir_bytes *strings;
  struct ir_tensor **tensors;
  struct ir_graph **graphs;
  struct ir_type *tps;
  const char *doc;
};

struct ir_node {
  const char *name;    /* "" when unnamed */
  const char *op_type;
  const char *domain;  /* "" for ai.onnx ("ai.onnx" is normalised to "") */
  int opset;           /* version of `domain` imported by the model; 0 if none */
  struct ir_value **inputs; /* NULL entries: omitted optional inputs ("") */
  size_t n_inputs;
  struct ir_value **outputs; /* NULL entries: omitted optional outputs */
  size_t n_outputs;
  struct ir_attr *attrs;
  size_t n_attrs;
  struct ir_graph *graph; /* the graph containing this node */
  int index;              /* position in graph->nodes */
  /* Position of its NodeProto in the file's graph as loaded; -1 for a node
   * an optimisation pass made (src/ir/rewrite.h), which the writer then
   * encodes from these fields instead of copying the stored bytes. */
  int src_index;
  const char *doc;
};

struct ir_graph {
  const char *name;
  const char *doc;
  struct ir_graph *parent;  /* enclosing graph for subgraphs, else NULL */
  struct ir_node *owner;    /* node whose attribute holds this subgraph */
  int depth;                /* 0 for the main graph */
  struct ir_node **nodes;   /* in file order (a topological order if valid) */
  size_t n_nodes;
  struct ir_value **inputs;  /* declared graph inputs (may name initializers) */
  size_t n_inputs;
  struct ir_value **outputs;
  size_t n_outputs;
  struct ir_value **initializers;
  size_t n_initializers;
  struct ir_value **values;  /* every value defined in this graph */
  size_t n_values;
  struct ir_value **value_info; /* values with a ValueInfoProto annotation */
  size_t n_value_info;
  /* Values of enclosing graphs this one (or a graph nested in it) reads.
   * Node inputs point straight at those values, so a reference is outer
   * exactly when input->graph != node->graph; IR_VALUE_OUTER is not set on
   * them (they belong to their own graph). */
  struct ir_value **outer_refs;
  size_t n_outer_refs;
  struct ir_name_map *names;    /* name -> value lookup for this scope */
};

struct ir_opset {
  const char *domain; /* "" for ai.onnx */
  int64_t version;
};

struct ir_kv {
  const char *key, *value;
};

/* A model-local function (FunctionProto). Its body is a graph whose inputs and
 * outputs carry no types; attribute parameters are listed by name. */
struct ir_function {
  const char *name, *domain, *overload;
  struct ir_graph *body;
  const char **attr_names;
  size_t n_attr_names;
  struct ir_attr *attr_defaults; /* attribute_proto: defaults */
  size_t n_attr_defaults;
  struct ir_opset *opsets;
  size_t n_opsets;
  const char *doc;
};

/* An external data file, mapped once however many tensors live in it. */
struct ir_external_file {
  const char *location;  /* as declared, relative to the model folder */
  const uint8_t *map;    /* NULL until mapped */
  size_t size;
  const char *path;      /* resolved real path (NULL until resolved) */
  int64_t n_tensors;     /* tensors stored in it */
  int64_t bytes_used;    /* sum of their byte lengths */
};

struct ir_model {
  int64_t ir_version;
  const char *producer_name, *producer_version, *domain, *doc;
  int64_t model_version;
  struct ir_opset *opsets;
  size_t n_opsets;
  struct ir_kv *metadata;
  size_t n_metadata;
  struct ir_graph *graph;
  struct ir_function *functions;
  size_t n_functions;
  struct ir_external_file *ext_files;
  size_t n_ext_files;
  size_t n_ext_files_cap;
  size_t file_size;         /* bytes of the .onnx file */
  int max_depth_seen;       /* deepest subgraph nesting */
  struct tolk_arena arena;  /* owns every struct above */
};

/* ---------------------------------------------------------------- helpers */

/* Looks a value up by name in `g` and then its enclosing graphs. NULL if not
 * found. */
struct ir_value *ir_lookup(const struct ir_graph *g, const char *name);

/* The attribute named `name`, or NULL. */
const struct ir_attr *ir_node_attr(const struct ir_node *n, const char *name);

/* The subgraphs an attribute holds: a GRAPH attribute one, a GRAPHS
 * attribute n, any other none. ir_attr_graph(a, j) for j below that count
 * may be NULL (a GRAPH attribute with no graph). */
size_t ir_attr_n_graphs(const struct ir_attr *a);
const struct ir_graph *ir_attr_graph(const struct ir_attr *a, size_t j);

/* Writes the path of subgraph g into buf (size bytes, NUL-terminated, cut
 * if too long): the names of the node holding it and of that node's
 * attribute, "NODE/ATTR", after its enclosing subgraph's path and a '/'
 * ("If_0/then_branch/Loop_3/body"); "" for the main graph. It names a graph
 * across two loads of one model, where the graphs' addresses differ. A
 * GRAPHS attribute's j-th graph is "NODE/ATTR[j]". */
void ir_graph_path(const struct ir_graph *g, char *buf, size_t size);

/* Typed attribute readers: return `dflt` when the attribute is absent. They
 * do not check the attribute's type; the checker and op preparation do. */
int64_t ir_attr_int(const struct ir_node *n, const char *name, int64_t dflt);
float ir_attr_float(const struct ir_node *n, const char *name, float dflt);
/* NUL-terminated copy lives in the model arena; `dflt` when absent. */
const char *ir_attr_string(const struct ir_node *n, const char *name, const char *dflt);

/* The opset version the model imports for `domain` ("" = ai.onnx), 0 if
 * none. */
int64_t ir_model_opset(const struct ir_model *m, const char *domain);

/* A name -> value hash map living in an arena (one per graph scope). */
struct ir_name_map *ir_name_map_new(struct tolk_arena *a, size_t expected);
/* The value named `name` in this map only (not enclosing scopes), or NULL. */
struct ir_value *ir_name_map_get(const struct ir_name_map *m, const char *name);
/* Adds name -> v unless the name is present; then *existing (if non-NULL)
 * receives the value already there and nothing changes. Returns false when
 * out of memory. `name` must outlive the map (arena string). */
bool ir_name_map_put(struct ir_name_map *m, const char *name, struct ir_value *v,
                     struct ir_value **existing);

/* Element count of a tensor type's declared shape, or -1 when a dim is
 * unknown or the product overflows. */
int64_t ir_type_numel(const struct ir_type *t);

#endif /* TOLK_IR_H */
