/*
 * activation.c — the activation operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_activation[] = {
    {0},
};
