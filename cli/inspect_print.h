/*
 * inspect_print.h — what `tolk inspect` prints, built on tolk.h's model
 * introspection API: the report (text or JSON) and the Graphviz graph.
 */
#ifndef TOLK_CLI_INSPECT_PRINT_H
#define TOLK_CLI_INSPECT_PRINT_H

#include <stdbool.h>
#include <stdio.h>

#include "tolk.h"

enum inspect_format { INSPECT_TEXT, INSPECT_JSON };

/* Writes the report for `m`, loaded from `path`, to `out`. external_opened
 * says whether the model was loaded with its external data (the report
 * marks external files "not opened" otherwise). */
void inspect_print(const tolk_model *m, const char *path, bool external_opened,
                   enum inspect_format fmt, FILE *out);

/* Writes the main graph (subgraphs as clusters) as Graphviz dot. */
void inspect_print_dot(const tolk_model *m, FILE *out);

#endif /* TOLK_CLI_INSPECT_PRINT_H */
