/*
 * index.c — the index operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_index[] = {
    {0},
};
