#version 460
// gemm.comp — gemm.glsl with 64×64 tiles, 4×4 sums per invocation, 16 steps of K (10 KiB of
// shared memory): the products narrower than 128 either way and the batched per-head ones.
#define GEMM_BM 64
#define GEMM_TM 4
#define GEMM_BK 16
#include "gemm.glsl"
