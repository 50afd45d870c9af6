/*
 * pool.c — the pool operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_pool[] = {
    {0},
};
