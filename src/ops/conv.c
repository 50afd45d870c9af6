/*
 * conv.c — the conv operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_conv[] = {
    {0},
};
