/*
 * The amx tier of the int8 GEMM with its tile instructions done in C
 * (KERN_EMULATE_AMX, igemm_amx.c, after the Intel SDM's pseudo-code):
 * linked with igemm.c built the same way into test_kern_igemm_amx_emu, it
 * runs the tier's B re-layout, its staging of ragged tiles, the driver's
 * choice between tiles and row blocks, and the last pass against the
 * scalar reference on any CPU with AVX-512 VNNI (the rest of the tier).
 * The instructions themselves run only where the CPU has them, in
 * test_kern_igemm.
 */
#include "kern/igemm_amx.c"
