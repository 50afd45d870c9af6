/*
 * elementwise.c — the elementwise operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_elementwise[] = {
    {0},
};
