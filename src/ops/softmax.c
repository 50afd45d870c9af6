/*
 * softmax.c — the softmax operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_softmax[] = {
    {0},
};
