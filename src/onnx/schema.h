/*
 * schema.h — operator schemas as data (generated into schema_table.c by
 * gen_schema.py from the onnx package), for the checker.
 */
#ifndef TOLK_ONNX_SCHEMA_H
#define TOLK_ONNX_SCHEMA_H

#include <stddef.h>

struct onnx_schema {
  const char *domain; /* "" for ai.onnx */
  const char *op_type;
  int since;          /* the opset version this schema starts at */
  int min_inputs, max_inputs, min_outputs, max_outputs;
  int deprecated;
  /* "name=TYPE name=TYPE! …": AttributeProto type numbers, '!' = required;
   * sorted by name. */
  const char *attrs;
};

/* Sorted by (domain, op_type, since). */
extern const struct onnx_schema onnx_schemas[];
extern const size_t onnx_n_schemas;
extern const int onnx_max_opset;      /* newest ai.onnx opset the table knows */
extern const int onnx_max_ir_version; /* newest IR version the table knows */

#endif /* TOLK_ONNX_SCHEMA_H */
