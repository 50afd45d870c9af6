/*
 * cast.c — the cast operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_cast[] = {
    {0},
};
