#version 460
// gemm_wide_k32.comp — gemm.glsl with 128×128 tiles, 8×8 sums per invocation, 32 steps of K (36
// KiB of shared memory): products at least 128 both ways.
#define GEMM_BM 128
#define GEMM_TM 8
#define GEMM_BK 32
#include "gemm.glsl"
