#version 460
// gemm_wide.comp — gemm_wide.glsl with 16 steps of K in one shared buffer.
#include "gemm_wide.glsl"
