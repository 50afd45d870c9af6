/*
 * shape.c — the shape operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_shape[] = {
    {0},
};
