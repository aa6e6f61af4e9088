/* spirv_modules.h — the compute kernels of kernels/vulkan/<op>.comp as SPIR-V words, embedded in
 * the binary at build time (cmake/spirv_embed.c writes the table; no file is read at run time). */
#ifndef TRM_SPIRV_MODULES_H
#define TRM_SPIRV_MODULES_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name; /* the .comp file's name without extension */
    const uint32_t *words;
    size_t nwords;
} trm_spirv_module;

extern const trm_spirv_module trm_spirv_modules[];
extern const int trm_spirv_count;

#endif
