#version 460
// gemm_wide_k32.comp — gemm_wide.glsl with 32 steps of K in one shared buffer (36 KiB).
#define GEMM_BK 32
#include "gemm_wide.glsl"
