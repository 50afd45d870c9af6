/*
 * The avxvnni tier of the int8 GEMM with its one AVX-VNNI instruction,
 * vpdpbusd, done in AVX2 (KERN_EMULATE_AVXVNNI, igemm_avxvnni.c): linked
 * with igemm.c built the same way into test_kern_igemm_avxvnni_emu, it runs
 * the tier's packing order, tile, few-rows kernel and last pass against the
 * scalar reference on any AVX2 CPU. The instruction itself runs only where
 * the CPU has it, in test_kern_igemm.
 */
#include "kern/igemm_avxvnni.c"
