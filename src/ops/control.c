/*
 * control.c — the control operator family (placeholder: no operators yet).
 */
#include "op.h"

const struct op_def tolk_ops_control[] = {
    {0},
};
