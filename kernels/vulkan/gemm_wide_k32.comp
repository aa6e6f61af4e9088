#version 460
// gemm_wide_k32.comp — gemm_wide.glsl: 128×128 tiles, 32 steps of K (36 KiB of shared memory).
#define GEMM_BK 32
#include "gemm_wide.glsl"
