/*
 * matmul.c — the matmul operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_matmul[] = {
    {0},
};
