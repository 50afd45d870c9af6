/*
 * norm.c — the norm operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_norm[] = {
    {0},
};
