#version 460
// gemm_wide.comp — gemm.glsl with 128×128 tiles, 8×8 sums per invocation, 16 steps of K (20 KiB
// of shared memory): products at least 128 both ways where 36 KiB is not allowed.
#define GEMM_BM 128
#define GEMM_TM 8
#define GEMM_BK 16
#include "gemm.glsl"
