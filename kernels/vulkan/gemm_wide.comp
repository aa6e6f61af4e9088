#version 460
// gemm_wide.comp — gemm_wide.glsl: 128×128 tiles, 16 steps of K (20 KiB of shared memory).
#define GEMM_BK 16
#include "gemm_wide.glsl"
