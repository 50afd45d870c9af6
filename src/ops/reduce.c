/*
 * reduce.c — the reduce operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_reduce[] = {
    {0},
};
