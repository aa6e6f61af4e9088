/* spirv_embed.c — a build tool: writes the SPIR-V modules glslc made from kernels/vulkan/<op>.comp
 * into one C file of word arrays (kernels/vulkan/spirv_modules.h), after checking each module's
 * declared capabilities. A module that declares Float64 (MoltenVK has no fp64), a float atomic
 * (the sums must be deterministic) or subgroup operations (results would depend on the
 * subgroup size: 8 on lavapipe, 32 on Apple GPUs) fails the build with its name, and so does
 * any capability not on the short list of those checked to exist everywhere.
 *
 * usage: spirv_embed OUT.c NAME=FILE.spv...   (OUT.c "-" checks only) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    uint32_t cap;
    const char *name, *why;
} forbidden[] = {
    {10, "Float64", "fp64 does not exist on MoltenVK"},
    {5612, "AtomicFloat32MinMaxEXT", "float atomics make sums nondeterministic"},
    {5613, "AtomicFloat64MinMaxEXT", "float atomics make sums nondeterministic"},
    {5616, "AtomicFloat16MinMaxEXT", "float atomics make sums nondeterministic"},
    {6033, "AtomicFloat32AddEXT", "float atomics make sums nondeterministic"},
    {6034, "AtomicFloat64AddEXT", "float atomics make sums nondeterministic"},
    {6095, "AtomicFloat16AddEXT", "float atomics make sums nondeterministic"},
    {61, "GroupNonUniform", "results would depend on the device's subgroup size"},
};

/* Everything else is refused too: a capability enters this list only once it is known to exist
 * on MoltenVK, lavapipe and the desktop drivers (Vulkan 1.2 with bufferDeviceAddress and
 * storageBuffer8BitAccess, which vk_device.c requires). */
static const uint32_t allowed[] = {
    1,    /* Shader */
    4448, /* StorageBuffer8BitAccess (token ids and masks as bytes) */
    5347, /* PhysicalStorageBufferAddresses (buffer references) */
};

static uint32_t *read_words(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    uint32_t *w = malloc(cap * 4);
    size_t got;
    while (w && (got = fread(w + len, 4, cap - len, f)) > 0) {
        len += got;
        if (len == cap) w = realloc(w, (cap *= 2) * 4);
    }
    int bad = ferror(f);
    if (!bad) /* fread drops a trailing partial word silently: a truncated module */
        bad = fseek(f, 0, SEEK_END) != 0 || ftell(f) != (long)(len * 4);
    fclose(f);
    if (!w || bad) {
        free(w);
        return NULL;
    }
    *n = len;
    return w;
}

/* 0 when the module is acceptable; otherwise prints why. */
static int check(const char *name, const uint32_t *w, size_t n) {
    if (n < 5 || w[0] != 0x07230203u) {
        fprintf(stderr, "spirv_embed: %s: not a SPIR-V module\n", name);
        return 1;
    }
    int bad = 0;
    for (size_t i = 5; i < n;) {
        uint32_t count = w[i] >> 16, op = w[i] & 0xffffu;
        if (count == 0 || i + count > n) {
            fprintf(stderr, "spirv_embed: %s: malformed instruction at word %zu\n", name, i);
            return 1;
        }
        if (op == 17 && count == 2) { /* OpCapability */
            int known = 0, named = 0;
            for (size_t k = 0; k < sizeof allowed / sizeof *allowed; k++) known |= w[i + 1] == allowed[k];
            for (size_t k = 0; k < sizeof forbidden / sizeof *forbidden; k++)
                if (w[i + 1] == forbidden[k].cap) {
                    fprintf(stderr, "spirv_embed: kernels/vulkan/%s.comp declares the %s capability: %s\n", name,
                            forbidden[k].name, forbidden[k].why);
                    named = 1;
                }
            if (!known && !named)
                fprintf(stderr, "spirv_embed: kernels/vulkan/%s.comp declares capability %u, which is not among "
                                "those known to exist on every mps target (cmake/spirv_embed.c)\n",
                        name, w[i + 1]);
            bad |= !known;
        }
        i += count;
    }
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: spirv_embed OUT.c NAME=FILE.spv...\n");
        return 2;
    }
    int nmod = argc - 2, bad = 0;
    uint32_t **words = calloc((size_t)nmod, sizeof *words);
    size_t *nwords = calloc((size_t)nmod, sizeof *nwords);
    char **names = calloc((size_t)nmod, sizeof *names);
    for (int m = 0; m < nmod; m++) {
        char *arg = argv[m + 2], *eq = strchr(arg, '=');
        if (!eq) {
            fprintf(stderr, "spirv_embed: %s: expected NAME=FILE.spv\n", arg);
            return 2;
        }
        *eq = 0;
        names[m] = arg;
        words[m] = read_words(eq + 1, &nwords[m]);
        if (!words[m]) {
            fprintf(stderr, "spirv_embed: cannot read %s\n", eq + 1);
            return 1;
        }
        bad |= check(names[m], words[m], nwords[m]);
    }
    if (bad) return 1;
    if (!strcmp(argv[1], "-")) return 0;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *o = fopen(tmp, "w");
    if (!o) {
        fprintf(stderr, "spirv_embed: cannot write %s\n", tmp);
        return 1;
    }
    fprintf(o, "/* generated by cmake/spirv_embed.c from kernels/vulkan/<op>.comp — do not edit */\n"
               "#include \"spirv_modules.h\"\n");
    for (int m = 0; m < nmod; m++) {
        fprintf(o, "static const uint32_t spv_%d[%zu] = {", m, nwords[m]);
        for (size_t i = 0; i < nwords[m]; i++) fprintf(o, "%s0x%08x", i % 8 ? "," : (i ? ",\n  " : "\n  "), words[m][i]);
        fprintf(o, "};\n");
    }
    fprintf(o, "const trm_spirv_module trm_spirv_modules[] = {\n");
    for (int m = 0; m < nmod; m++) fprintf(o, "  {\"%s\", spv_%d, %zu},\n", names[m], m, nwords[m]);
    fprintf(o, "};\nconst int trm_spirv_count = %d;\n", nmod);
    int err = ferror(o);
    if (fclose(o) || err || rename(tmp, argv[1])) {
        fprintf(stderr, "spirv_embed: writing %s failed\n", argv[1]);
        return 1;
    }
    for (int m = 0; m < nmod; m++) free(words[m]);
    free(words), free(nwords), free(names);
    return 0;
}
