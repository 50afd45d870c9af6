/*
 * contrib.c — the contrib operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_contrib[] = {
    {0},
};
