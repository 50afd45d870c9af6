/*
 * quant.c — the quant operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_quant[] = {
    {0},
};
