/* vk_device.c — the Vulkan plumbing of the mps backend (see vk.h): the loader found with dlopen
 * (so the binary runs, and says what is missing, where Vulkan is absent), the instance with
 * portability enumeration (MoltenVK) and optional validation layers, one device and queue,
 * memory, the in-order command stream, staging copies and the pipeline cache. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vk.h"

#if defined(__SANITIZE_ADDRESS__)
#define TRM_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TRM_UNDER_ASAN 1
#endif
#endif
#ifndef TRM_UNDER_ASAN
#define TRM_UNDER_ASAN 0
#endif

/* Commands recorded before a batch is handed to the queue: the device starts on the first
 * commands of a step while the host still records the rest. After the device went idle (a
 * read-back) the first batches are short, so it restarts sooner: 8, 16, ... then 192 (the
 * fastest of 4..1000 on an H100 for cfg=tiny; 48 was 3% slower, one batch per step 15%). */
#define FLUSH_OPS 192
#define FLUSH_FIRST 8
#define UPLOAD_BYTES ((size_t)32 << 20)
#define READBACK_BYTES ((size_t)32 << 20)
#define ZEROS_BYTES 256

static const char *result_name(VkResult r) {
    switch (r) {
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver found)";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    default: break;
    }
    static char buf[32]; /* only reached on the way to exit */
    snprintf(buf, sizeof buf, "VkResult %d", (int)r);
    return buf;
}

void vk_check(vk_ctx *c, VkResult r, const char *what) {
    if (r == VK_SUCCESS) return;
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) vk_oom_exit(c, 0);
    fprintf(stderr, "trm: mps: %s failed: %s\n", what, result_name(r));
    exit(1);
}

/* ---- loader ------------------------------------------------------------------------------ */

static const char *const loader_names[] = {
#ifdef __APPLE__
    "libvulkan.1.dylib", "/usr/local/lib/libvulkan.1.dylib", "/opt/homebrew/lib/libvulkan.1.dylib",
    "/opt/local/lib/libvulkan.1.dylib", "libMoltenVK.dylib", "/usr/local/lib/libMoltenVK.dylib",
    "/opt/homebrew/lib/libMoltenVK.dylib", "/opt/local/lib/libMoltenVK.dylib",
#else
    "libvulkan.so.1", "libvulkan.so",
#endif
};

/* The loader from $VULKAN_SDK (the LunarG SDK on macOS sets it), when it is there. */
static void *load_from_sdk(void) {
    const char *sdk = getenv("VULKAN_SDK");
    if (!sdk || !*sdk) return NULL;
    char path[4096];
#ifdef __APPLE__
    snprintf(path, sizeof path, "%s/lib/libvulkan.1.dylib", sdk);
#else
    snprintf(path, sizeof path, "%s/lib/libvulkan.so.1", sdk);
#endif
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

int vk_load(vk_fn *f, trm_err *e) {
    memset(f, 0, sizeof *f);
    /* MoltenVK compiles shaders with Metal's fast math unless told otherwise; the sums and
     * exp/log of the loss must keep IEEE semantics to match cpu and cuda. A user's own
     * setting wins. */
    setenv("MVK_CONFIG_FAST_MATH_ENABLED", "0", 0);
    const char *env = getenv("TRM_VULKAN_LOADER");
    if (env && *env) f->lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (!f->lib && !(env && *env)) f->lib = load_from_sdk();
    for (size_t i = 0; !f->lib && !(env && *env) && i < sizeof loader_names / sizeof *loader_names; i++)
        f->lib = dlopen(loader_names[i], RTLD_NOW | RTLD_LOCAL);
    if (!f->lib)
        return trm_errf(e, "no Vulkan loader found (%s); install one: Debian libvulkan1 and a driver "
                           "(mesa-vulkan-drivers, or the GPU vendor's), macOS the Vulkan SDK or "
                           "`brew install molten-vk vulkan-loader`",
                        env && *env ? env : loader_names[0]);
    void *sym = dlsym(f->lib, "vkGetInstanceProcAddr");
    memcpy(&f->vkGetInstanceProcAddr, &sym, sizeof sym);
    if (!f->vkGetInstanceProcAddr) {
        dlclose(f->lib);
        f->lib = NULL;
        return trm_errf(e, "the Vulkan loader has no vkGetInstanceProcAddr");
    }
#define X(fn) f->fn = (PFN_##fn)f->vkGetInstanceProcAddr(VK_NULL_HANDLE, #fn);
    VK_GLOBAL_FUNCS(X)
#undef X
    if (!f->vkCreateInstance || !f->vkEnumerateInstanceExtensionProperties) {
        vk_unload(f);
        return trm_errf(e, "the Vulkan loader is missing its global functions");
    }
    return 0;
}

void vk_unload(vk_fn *f) {
    if (f->lib) dlclose(f->lib);
    memset(f, 0, sizeof *f);
}

/* ---- instance ------------------------------------------------------------------------------ */

static int validation_wanted(void) {
    const char *v = getenv("TRM_VULKAN_VALIDATION");
    return v && *v && strcmp(v, "0") != 0;
}

/* With validation on, any warning or error of the validation layer is a failure of the run:
 * the tests run with it, and a message must not scroll by unseen. General messages (a loader
 * or driver talking about itself) are shown but are not the program's fault. */
static VKAPI_ATTR VkBool32 VKAPI_CALL debug_cb(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                               VkDebugUtilsMessageTypeFlagsEXT type,
                                               const VkDebugUtilsMessengerCallbackDataEXT *d, void *user) {
    (void)user;
    int fatal = (type & VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT) != 0;
    fprintf(stderr, "trm: mps: Vulkan %s %s: %s\n", fatal ? "validation" : "loader/driver",
            sev >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning",
            d && d->pMessage ? d->pMessage : "(no message)");
    fflush(stderr);
    if (fatal) _exit(70);
    return VK_FALSE;
}

static int has_ext(const VkExtensionProperties *p, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(p[i].extensionName, name)) return 1;
    return 0;
}

int vk_instance_create(vk_ctx *c, trm_err *e) {
    vk_fn *f = &c->f;
    uint32_t n = 0;
    f->vkEnumerateInstanceExtensionProperties(NULL, &n, NULL);
    VkExtensionProperties *ext = xcalloc(n ? n : 1, sizeof *ext);
    f->vkEnumerateInstanceExtensionProperties(NULL, &n, ext);
    const char *want[4];
    uint32_t nwant = 0;
    VkInstanceCreateFlags flags = 0;
    if (has_ext(ext, n, "VK_KHR_portability_enumeration")) {
        want[nwant++] = "VK_KHR_portability_enumeration";
        flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
    int validate = validation_wanted(), debug_utils = has_ext(ext, n, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    free(ext);
    const char *layer = "VK_LAYER_KHRONOS_validation";
    if (validate) {
        uint32_t nl = 0;
        f->vkEnumerateInstanceLayerProperties(&nl, NULL);
        VkLayerProperties *lp = xcalloc(nl ? nl : 1, sizeof *lp);
        f->vkEnumerateInstanceLayerProperties(&nl, lp);
        int found = 0;
        for (uint32_t i = 0; i < nl; i++) found |= !strcmp(lp[i].layerName, layer);
        free(lp);
        if (!found || !debug_utils)
            return trm_errf(e, "TRM_VULKAN_VALIDATION is set but %s is not installed (Debian: "
                               "vulkan-validationlayers)", found ? VK_EXT_DEBUG_UTILS_EXTENSION_NAME : layer);
        want[nwant++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    }
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "trm",
                             .pEngineName = "trm", .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .flags = flags,
                               .pApplicationInfo = &app, .enabledExtensionCount = nwant,
                               .ppEnabledExtensionNames = want, .enabledLayerCount = validate ? 1 : 0,
                               .ppEnabledLayerNames = &layer};
    VkResult r = f->vkCreateInstance(&ci, NULL, &c->inst);
    if (r != VK_SUCCESS) return trm_errf(e, "vkCreateInstance failed: %s", result_name(r));
#define X(fn) f->fn = (PFN_##fn)f->vkGetInstanceProcAddr(c->inst, #fn);
    VK_INSTANCE_FUNCS(X)
#undef X
    if (!f->vkEnumeratePhysicalDevices || !f->vkGetPhysicalDeviceFeatures2 || !f->vkCreateDevice)
        return trm_errf(e, "the Vulkan loader lacks Vulkan 1.1 instance functions");
    if (validate) {
        f->vkCreateDebugUtilsMessengerEXT =
            (PFN_vkCreateDebugUtilsMessengerEXT)f->vkGetInstanceProcAddr(c->inst, "vkCreateDebugUtilsMessengerEXT");
        f->vkDestroyDebugUtilsMessengerEXT =
            (PFN_vkDestroyDebugUtilsMessengerEXT)f->vkGetInstanceProcAddr(c->inst, "vkDestroyDebugUtilsMessengerEXT");
        VkDebugUtilsMessengerCreateInfoEXT mi = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT,
            .pfnUserCallback = debug_cb};
        if (f->vkCreateDebugUtilsMessengerEXT && f->vkCreateDebugUtilsMessengerEXT(c->inst, &mi, NULL, &c->messenger) != VK_SUCCESS)
            return trm_errf(e, "could not install the Vulkan validation messenger");
    }
    return 0;
}

/* ---- devices ------------------------------------------------------------------------------- */

static int compute_family(vk_ctx *c, VkPhysicalDevice p) {
    uint32_t n = 0;
    c->f.vkGetPhysicalDeviceQueueFamilyProperties(p, &n, NULL);
    VkQueueFamilyProperties *q = xcalloc(n ? n : 1, sizeof *q);
    c->f.vkGetPhysicalDeviceQueueFamilyProperties(p, &n, q);
    int best = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || q[i].queueCount == 0) continue;
        if (best < 0) best = (int)i; /* the first compute family: the universal queue on most GPUs */
    }
    free(q);
    return best;
}

static double device_local_gib(vk_ctx *c, VkPhysicalDevice p) {
    VkPhysicalDeviceMemoryProperties mp;
    c->f.vkGetPhysicalDeviceMemoryProperties(p, &mp);
    VkDeviceSize best = 0;
    for (uint32_t i = 0; i < mp.memoryHeapCount; i++)
        if ((mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && mp.memoryHeaps[i].size > best)
            best = mp.memoryHeaps[i].size;
    return (double)best / 1073741824.0;
}

static void device_check(vk_ctx *c, vk_device_info *d) {
    d->usable = 0;
    if (d->props.apiVersion < VK_API_VERSION_1_2) {
        snprintf(d->why, sizeof d->why, "supports only Vulkan %u.%u (trm needs 1.2)", VK_VERSION_MAJOR(d->props.apiVersion),
                 VK_VERSION_MINOR(d->props.apiVersion));
        return;
    }
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12};
    c->f.vkGetPhysicalDeviceFeatures2(d->phys, &f2);
    if (!f12.bufferDeviceAddress || !f12.storageBuffer8BitAccess) {
        snprintf(d->why, sizeof d->why, "lacks %s", !f12.bufferDeviceAddress ? "bufferDeviceAddress" : "storageBuffer8BitAccess");
        return;
    }
    const VkPhysicalDeviceLimits *l = &d->props.limits;
    if (l->maxComputeWorkGroupInvocations < 256 || l->maxComputeWorkGroupSize[0] < 256 ||
        l->maxComputeSharedMemorySize < 16384) { /* the kernels' work groups and tiles */
        snprintf(d->why, sizeof d->why, "allows only %u invocations and %u bytes of shared memory per work group (trm needs 256 and 16384)",
                 l->maxComputeWorkGroupInvocations, l->maxComputeSharedMemorySize);
        return;
    }
    if (compute_family(c, d->phys) < 0) {
        snprintf(d->why, sizeof d->why, "has no compute queue");
        return;
    }
    d->usable = 1;
}

int vk_list_devices(vk_ctx *c, vk_device_info **out, trm_err *e) {
    uint32_t n = 0;
    VkResult r = c->f.vkEnumeratePhysicalDevices(c->inst, &n, NULL);
    if (r != VK_SUCCESS) return trm_errf(e, "vkEnumeratePhysicalDevices failed: %s", result_name(r));
    VkPhysicalDevice *ph = xcalloc(n ? n : 1, sizeof *ph);
    c->f.vkEnumeratePhysicalDevices(c->inst, &n, ph);
    vk_device_info *d = xcalloc(n ? n : 1, sizeof *d);
    for (uint32_t i = 0; i < n; i++) {
        d[i].phys = ph[i];
        c->f.vkGetPhysicalDeviceProperties(ph[i], &d[i].props);
        d[i].mem_gib = device_local_gib(c, ph[i]);
        device_check(c, &d[i]);
    }
    free(ph);
    *out = d;
    return (int)n;
}

/* Memory type for a kind of allocation among `bits`: required flags first, then preferred. */
static int pick_type(const vk_ctx *c, uint32_t bits, int kind) {
    VkMemoryPropertyFlags need, want = 0, avoid = 0;
    const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    if (kind == VK_MEM_DEVICE) {
        need = c->unified ? hv : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
        want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
        avoid = c->unified ? 0 : VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT; /* keep the small BAR heap free */
    } else {
        need = hv;
        want = kind == VK_MEM_READBACK ? VK_MEMORY_PROPERTY_HOST_CACHED_BIT : 0;
        avoid = c->unified ? 0 : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    }
    int best = -1, best_score = 0;
    VkDeviceSize best_heap = 0;
    for (uint32_t i = 0; i < c->memprops.memoryTypeCount; i++) {
        VkMemoryPropertyFlags fl = c->memprops.memoryTypes[i].propertyFlags;
        if (!(bits & (1u << i)) || (fl & need) != need) continue;
        int score = 4 * ((fl & want) == want) + 2 * !(fl & avoid);
        VkDeviceSize heap = c->memprops.memoryHeaps[c->memprops.memoryTypes[i].heapIndex].size;
        if (best < 0 || score > best_score || (score == best_score && heap > best_heap))
            best = (int)i, best_score = score, best_heap = heap;
    }
    return best;
}

/* A buffer of `bytes` with its own memory of `kind`; VK_SUCCESS or the allocation's error. */
static VkResult mem_create(vk_ctx *c, size_t bytes, int kind, vk_mem *m) {
    memset(m, 0, sizeof *m);
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = bytes,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = c->f.vkCreateBuffer(c->dev, &bi, NULL, &m->buf);
    if (r != VK_SUCCESS) return r;
    VkMemoryRequirements req;
    c->f.vkGetBufferMemoryRequirements(c->dev, m->buf, &req);
    int type = pick_type(c, req.memoryTypeBits, kind);
    if (type < 0) {
        c->f.vkDestroyBuffer(c->dev, m->buf, NULL);
        return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    }
    VkMemoryAllocateFlagsInfo fi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                    .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &fi,
                               .allocationSize = req.size, .memoryTypeIndex = (uint32_t)type};
    r = c->f.vkAllocateMemory(c->dev, &ai, NULL, &m->mem);
    if (r == VK_SUCCESS) r = c->f.vkBindBufferMemory(c->dev, m->buf, m->mem, 0);
    if (r == VK_SUCCESS && (c->memprops.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) {
        void *p = NULL;
        r = c->f.vkMapMemory(c->dev, m->mem, 0, VK_WHOLE_SIZE, 0, &p);
        m->map = p;
    }
    if (r != VK_SUCCESS) {
        c->f.vkDestroyBuffer(c->dev, m->buf, NULL);
        if (m->mem) c->f.vkFreeMemory(c->dev, m->mem, NULL);
        memset(m, 0, sizeof *m);
        return r;
    }
    VkBufferDeviceAddressInfo bai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = m->buf};
    m->addr = c->f.vkGetBufferDeviceAddress(c->dev, &bai);
    m->size = bytes;
    return VK_SUCCESS;
}

static void mem_destroy(vk_ctx *c, vk_mem *m) {
    if (m->buf) c->f.vkDestroyBuffer(c->dev, m->buf, NULL);
    if (m->mem) c->f.vkFreeMemory(c->dev, m->mem, NULL);
    memset(m, 0, sizeof *m);
}

static size_t max_allocation(vk_ctx *c) {
    VkPhysicalDeviceMaintenance4Properties m4 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
                                                 .pNext = c->props.apiVersion >= VK_API_VERSION_1_3 ? &m4 : NULL};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
    c->f.vkGetPhysicalDeviceProperties2(c->phys, &p2);
    VkDeviceSize lim = m3.maxMemoryAllocationSize;
    if (m3.pNext && m4.maxBufferSize && m4.maxBufferSize < lim) lim = m4.maxBufferSize;
    return lim > (VkDeviceSize)SIZE_MAX ? SIZE_MAX : (size_t)lim;
}

static int device_ext_list(vk_ctx *c, VkPhysicalDevice p, VkExtensionProperties **out) {
    uint32_t n = 0;
    c->f.vkEnumerateDeviceExtensionProperties(p, NULL, &n, NULL);
    *out = xcalloc(n ? n : 1, sizeof **out);
    c->f.vkEnumerateDeviceExtensionProperties(p, NULL, &n, *out);
    return (int)n;
}

static int stream_setup(vk_ctx *c, trm_err *e) {
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = c->qfam};
    if (c->f.vkCreateCommandPool(c->dev, &pi, NULL, &c->pool) != VK_SUCCESS)
        return trm_errf(e, "could not create a Vulkan command pool");
    for (int i = 0; i < VK_BATCHES; i++) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = c->pool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        if (c->f.vkAllocateCommandBuffers(c->dev, &ai, &c->batch[i].cmd) != VK_SUCCESS ||
            c->f.vkCreateFence(c->dev, &fi, NULL, &c->batch[i].fence) != VK_SUCCESS)
            return trm_errf(e, "could not create Vulkan command buffers");
    }
    c->cur = -1;
    c->flush_at = FLUSH_FIRST;
    VkPushConstantRange range = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = 128};
    VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .pushConstantRangeCount = 1, .pPushConstantRanges = &range};
    if (c->f.vkCreatePipelineLayout(c->dev, &li, NULL, &c->layout) != VK_SUCCESS)
        return trm_errf(e, "could not create the Vulkan pipeline layout");
    if (mem_create(c, UPLOAD_BYTES, VK_MEM_UPLOAD, &c->up) != VK_SUCCESS ||
        mem_create(c, READBACK_BYTES, VK_MEM_READBACK, &c->down) != VK_SUCCESS ||
        mem_create(c, ZEROS_BYTES, VK_MEM_UPLOAD, &c->zeros) != VK_SUCCESS || !c->up.map || !c->down.map)
        return trm_errf(e, "could not allocate %zu MiB of Vulkan staging memory",
                        (UPLOAD_BYTES + READBACK_BYTES) >> 20);
    memset(c->zeros.map, 0, ZEROS_BYTES);
    return 0;
}

int vk_device_open(vk_ctx *c, int index, trm_err *e) {
    vk_device_info *d = NULL;
    int n = vk_list_devices(c, &d, e);
    if (n < 0) return -1;
    int pick = -1;
    if (index >= 0) {
        if (index >= n) {
            free(d);
            return trm_errf(e, "only %d Vulkan device%s here (mps:0..mps:%d)", n, n == 1 ? "" : "s", n - 1);
        }
        if (!d[index].usable) {
            trm_errf(e, "%s %s", d[index].props.deviceName, d[index].why);
            free(d);
            return -1;
        }
        pick = index;
    } else {
        for (int pass = 0; pass < 2 && pick < 0; pass++) /* a GPU first, a CPU device (lavapipe) last */
            for (int i = 0; i < n && pick < 0; i++)
                if (d[i].usable && (pass || d[i].props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU)) pick = i;
        if (pick < 0) {
            if (n == 0)
                trm_errf(e, "no Vulkan device found (is a Vulkan driver installed?)");
            else
                trm_errf(e, "no Vulkan device is usable (%s %s)", d[0].props.deviceName, d[0].why);
            free(d);
            return -1;
        }
    }
    c->phys = d[pick].phys;
    c->props = d[pick].props;
    free(d);
    snprintf(c->name, sizeof c->name, "%s", c->props.deviceName);
    c->qfam = (uint32_t)compute_family(c, c->phys);

    VkExtensionProperties *ext;
    int next = device_ext_list(c, c->phys, &ext);
    const char *want[2];
    uint32_t nwant = 0;
    if (has_ext(ext, (uint32_t)next, "VK_KHR_portability_subset")) want[nwant++] = "VK_KHR_portability_subset";
    if (has_ext(ext, (uint32_t)next, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME)) {
        want[nwant++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
        c->has_budget = 1;
    }
    free(ext);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = c->qfam,
                                  .queueCount = 1, .pQueuePriorities = &prio};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .bufferDeviceAddress = VK_TRUE, .storageBuffer8BitAccess = VK_TRUE};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12};
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f2, .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &qi, .enabledExtensionCount = nwant, .ppEnabledExtensionNames = want};
    VkResult r = c->f.vkCreateDevice(c->phys, &di, NULL, &c->dev);
    if (r != VK_SUCCESS) return trm_errf(e, "vkCreateDevice (%s) failed: %s", c->name, result_name(r));
#define X(fn) c->f.fn = (PFN_##fn)c->f.vkGetDeviceProcAddr(c->dev, #fn);
    VK_DEVICE_FUNCS(X)
#undef X
    const char *missing = NULL;
#define X(fn) if (!c->f.fn && !missing) missing = #fn;
    VK_DEVICE_FUNCS(X)
#undef X
    if (missing) { /* vk_ctx_destroy would call through the missing pointers */
        PFN_vkDestroyDevice destroy = (PFN_vkDestroyDevice)c->f.vkGetDeviceProcAddr(c->dev, "vkDestroyDevice");
        if (destroy) destroy(c->dev, NULL);
        c->dev = VK_NULL_HANDLE;
        return trm_errf(e, "the Vulkan driver of %s lacks %s", c->name, missing);
    }
    c->f.vkGetDeviceQueue(c->dev, c->qfam, 0, &c->queue);
    c->f.vkGetPhysicalDeviceMemoryProperties(c->phys, &c->memprops);
    c->unified = c->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
                 c->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    c->max_alloc = max_allocation(c);
    for (int k = 0; k < 3; k++) c->mem_type[k] = -1;
    const char *s = getenv("TRM_VULKAN_SYNC");
    c->sync_each = s && *s && strcmp(s, "0") != 0;
    return stream_setup(c, e);
}

void vk_ctx_destroy(vk_ctx *c) {
    if (c->dev) {
        c->f.vkDeviceWaitIdle(c->dev);
        for (int i = 0; i < c->npipes; i++) c->f.vkDestroyPipeline(c->dev, c->pipes[i].pipe, NULL);
        if (c->layout) c->f.vkDestroyPipelineLayout(c->dev, c->layout, NULL);
        for (int i = 0; i < c->nallocs; i++) mem_destroy(c, &c->allocs[i]);
        mem_destroy(c, &c->up);
        mem_destroy(c, &c->down);
        mem_destroy(c, &c->zeros);
        for (int i = 0; i < VK_BATCHES; i++)
            if (c->batch[i].fence) c->f.vkDestroyFence(c->dev, c->batch[i].fence, NULL);
        if (c->pool) c->f.vkDestroyCommandPool(c->dev, c->pool, NULL);
        c->f.vkDestroyDevice(c->dev, NULL);
    }
    if (c->messenger && c->f.vkDestroyDebugUtilsMessengerEXT)
        c->f.vkDestroyDebugUtilsMessengerEXT(c->inst, c->messenger, NULL);
#if TRM_UNDER_ASAN
    /* Mesa's lavapipe leaves an allocation behind when the loader unloads it at instance
     * destruction; LeakSanitizer then reports it from an unmapped ("unknown") module and fails
     * every sanitized test that probed Vulkan. Under the sanitizer the instance and the loader
     * stay until exit, so the driver's memory stays reachable. */
#else
    if (c->inst) c->f.vkDestroyInstance(c->inst, NULL);
    vk_unload(&c->f);
#endif
    free(c->allocs);
    free(c->pipes);
    memset(c, 0, sizeof *c);
}

/* ---- the command stream ---------------------------------------------------------------------- */

static int stream_idle(const vk_ctx *c) {
    if (c->cur >= 0) return 0;
    for (int i = 0; i < VK_BATCHES; i++)
        if (c->batch[i].in_flight) return 0;
    return 1;
}

/* Recording time (vk_stats): the outermost of nested recording calls measures, less the time
 * blocked in fence waits meanwhile (a flush may have to wait for a batch slot). */
static void rec_enter(vk_ctx *c) {
    if (c->stats.depth++ == 0) c->stats.t0 = trm_now_seconds(), c->stats.wait0 = c->stats.wait_s;
}
static void rec_leave(vk_ctx *c) {
    if (--c->stats.depth == 0)
        c->stats.record_s += trm_now_seconds() - c->stats.t0 - (c->stats.wait_s - c->stats.wait0);
}

static void batch_wait(vk_ctx *c, vk_batch *b) {
    if (!b->in_flight) return;
    double t0 = trm_now_seconds();
    vk_check(c, c->f.vkWaitForFences(c->dev, 1, &b->fence, VK_TRUE, UINT64_MAX), "waiting for the device");
    c->stats.wait_s += trm_now_seconds() - t0;
    c->stats.waits++;
    vk_check(c, c->f.vkResetFences(c->dev, 1, &b->fence), "vkResetFences");
    b->in_flight = 0;
}

/* The command buffer being recorded (one is begun if none is). */
static VkCommandBuffer rec(vk_ctx *c) {
    if (c->cur < 0) {
        int i = c->next;
        c->next = (i + 1) % VK_BATCHES;
        vk_batch *b = &c->batch[i];
        batch_wait(c, b);
        vk_check(c, c->f.vkResetCommandBuffer(b->cmd, 0), "vkResetCommandBuffer");
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        vk_check(c, c->f.vkBeginCommandBuffer(b->cmd, &bi), "vkBeginCommandBuffer");
        c->cur = i;
        c->ops = 0;
        c->bound = VK_NULL_HANDLE;
    }
    return c->batch[c->cur].cmd;
}

/* Every command waits for the writes of everything before it (the op-by-op semantics of the
 * backend table, as one CUDA stream): one global memory barrier, since kernels address memory
 * directly. Its scopes are only the stages of the commands since the previous barrier (a
 * dispatch after dispatches waits on compute alone): the commands before are ordered by the
 * barriers already recorded. The first command of a batch waits on both stages, for it
 * follows the previous batch's last command. A dispatch whose declared accesses (vk_reads,
 * vk_writes) do not conflict with those since the last barrier skips it. */
static void record_barrier(vk_ctx *c, VkCommandBuffer cb, VkPipelineStageFlags stage) {
    VkPipelineStageFlags src = c->ops ? c->last_stage : VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    VkAccessFlags wr = 0, rd = 0;
    if (src & VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT) wr |= VK_ACCESS_SHADER_WRITE_BIT;
    if (src & VK_PIPELINE_STAGE_TRANSFER_BIT) wr |= VK_ACCESS_TRANSFER_WRITE_BIT;
    if (stage & VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT) rd |= VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    if (stage & VK_PIPELINE_STAGE_TRANSFER_BIT) rd |= VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = wr, .dstAccessMask = rd};
    c->f.vkCmdPipelineBarrier(cb, src, stage, 0, 1, &mb, 0, NULL, 0, NULL);
    c->stats.barriers++;
    c->last_stage = 0;
    c->npr = c->npw = 0;
    c->pend_unknown = 0;
}

static int overlaps(const vk_range *a, int n, const vk_range *r) {
    for (int i = 0; i < n; i++)
        if (a[i].lo < r->hi && r->lo < a[i].hi) return 1;
    return 0;
}

/* Whether the declared accesses of the next dispatch may run beside those since the barrier. */
static int may_skip_barrier(const vk_ctx *c) {
    if (!c->ops || c->pend_unknown || c->use_overflow || (!c->nur && !c->nuw)) return 0;
    if (c->npr + c->nur > VK_PENDING || c->npw + c->nuw > VK_PENDING) return 0;
    for (int i = 0; i < c->nur; i++)
        if (overlaps(c->pend_w, c->npw, &c->use_r[i])) return 0; /* read after write */
    for (int i = 0; i < c->nuw; i++)
        if (overlaps(c->pend_w, c->npw, &c->use_w[i]) || overlaps(c->pend_r, c->npr, &c->use_w[i]))
            return 0; /* write after write or read */
    return 1;
}

/* The next dispatch's accesses join those since the barrier; undeclared ones poison the set. */
static void note_uses(vk_ctx *c) {
    if (c->use_overflow || (!c->nur && !c->nuw))
        c->pend_unknown = 1;
    else {
        memcpy(c->pend_r + c->npr, c->use_r, (size_t)c->nur * sizeof *c->use_r);
        memcpy(c->pend_w + c->npw, c->use_w, (size_t)c->nuw * sizeof *c->use_w);
        c->npr += c->nur, c->npw += c->nuw;
    }
    c->nur = c->nuw = c->use_overflow = 0;
}

static void declare(vk_ctx *c, vk_range *set, int *n, const void *p, size_t bytes) {
    if (!bytes) return;
    if (*n == VK_USES) {
        c->use_overflow = 1;
        return;
    }
    uint64_t a = (uint64_t)(uintptr_t)p;
    set[(*n)++] = (vk_range){a, a + bytes};
}
void vk_reads(vk_ctx *c, const void *p, size_t bytes) { declare(c, c->use_r, &c->nur, p, bytes); }
void vk_writes(vk_ctx *c, const void *p, size_t bytes) { declare(c, c->use_w, &c->nuw, p, bytes); }

/* Copies and fills declare nothing: a barrier before and after each. */
static VkCommandBuffer begin_command(vk_ctx *c, VkPipelineStageFlags stage) {
    rec_enter(c);
    VkCommandBuffer cb = rec(c);
    int dispatch = stage == VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    if (!dispatch) c->nur = c->nuw = c->use_overflow = 0;
    if (!dispatch || !may_skip_barrier(c)) record_barrier(c, cb, stage);
    note_uses(c);
    c->last_stage |= stage;
    return cb;
}

static void end_command(vk_ctx *c) {
    if (c->sync_each)
        vk_finish(c);
    else if (++c->ops >= c->flush_at) {
        vk_submit(c);
        c->flush_at = c->flush_at * 2 < FLUSH_OPS ? c->flush_at * 2 : FLUSH_OPS;
    }
    rec_leave(c);
}

void vk_submit(vk_ctx *c) {
    if (c->cur < 0) return;
    rec_enter(c);
    vk_batch *b = &c->batch[c->cur];
    /* the device's writes become visible to the host once the batch's fence is waited for */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    c->f.vkCmdPipelineBarrier(b->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                              VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    c->stats.barriers++;
    vk_check(c, c->f.vkEndCommandBuffer(b->cmd), "vkEndCommandBuffer");
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &b->cmd};
    vk_check(c, c->f.vkQueueSubmit(c->queue, 1, &si, b->fence), "vkQueueSubmit");
    c->stats.submits++;
    b->in_flight = 1;
    c->cur = -1;
    rec_leave(c);
}

void vk_finish(vk_ctx *c) {
    vk_submit(c);
    for (int k = 0; k < VK_BATCHES; k++) /* oldest first */
        batch_wait(c, &c->batch[(c->next + k) % VK_BATCHES]);
    c->up_used = 0;
    c->flush_at = FLUSH_FIRST;
}

/* ---- pipelines --------------------------------------------------------------------------------- */

int vk_kernel_index(const char *name) {
    for (int i = 0; i < trm_spirv_count; i++)
        if (!strcmp(trm_spirv_modules[i].name, name)) return i;
    return -1;
}

static VkPipeline pipeline(vk_ctx *c, int kernel, const uint32_t spec[VK_SPEC]) {
    for (int i = 0; i < c->npipes; i++)
        if (c->pipes[i].kernel == kernel && !memcmp(c->pipes[i].spec, spec, sizeof c->pipes[i].spec))
            return c->pipes[i].pipe;
    const trm_spirv_module *m = &trm_spirv_modules[kernel];
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = m->nwords * sizeof(uint32_t), .pCode = m->words};
    VkShaderModule mod;
    vk_check(c, c->f.vkCreateShaderModule(c->dev, &mi, NULL, &mod), "vkCreateShaderModule");
    VkSpecializationMapEntry ent[VK_SPEC];
    for (uint32_t i = 0; i < VK_SPEC; i++) ent[i] = (VkSpecializationMapEntry){i, i * 4, 4};
    VkSpecializationInfo si = {.mapEntryCount = VK_SPEC, .pMapEntries = ent, .dataSize = VK_SPEC * sizeof(uint32_t),
                               .pData = spec};
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = mod, .pName = "main", .pSpecializationInfo = &si},
        .layout = c->layout};
    VkPipeline p;
    VkResult r = c->f.vkCreateComputePipelines(c->dev, VK_NULL_HANDLE, 1, &ci, NULL, &p);
    c->f.vkDestroyShaderModule(c->dev, mod, NULL);
    if (r != VK_SUCCESS) {
        fprintf(stderr, "trm: mps: building kernel %s failed: %s\n", m->name, result_name(r));
        exit(1);
    }
    if (c->npipes == c->cap_pipes) {
        c->cap_pipes = c->cap_pipes ? 2 * c->cap_pipes : 32;
        c->pipes = xrealloc(c->pipes, (size_t)c->cap_pipes * sizeof *c->pipes);
    }
    vk_pipe *e = &c->pipes[c->npipes++];
    e->kernel = kernel;
    memcpy(e->spec, spec, sizeof e->spec);
    e->pipe = p;
    return p;
}

void vk_dispatch(vk_ctx *c, int kernel, const uint32_t spec[VK_SPEC], const void *pc, uint32_t pc_bytes, uint32_t gx,
                 uint32_t gy, uint32_t gz) {
    if (!gx || !gy || !gz) { /* nothing runs: its declarations must not go to the next one */
        c->nur = c->nuw = c->use_overflow = 0;
        return;
    }
    if (!c->nur && !c->nuw) { /* every op declares its accesses: the barriers are elided from them alone */
        fprintf(stderr, "trm: mps: kernel %s was dispatched without declaring what it reads and writes "
                        "(internal error)\n", trm_spirv_modules[kernel].name);
        exit(1);
    }
    rec_enter(c); /* the pipeline lookup counts too (building one, on first use, as well) */
    VkPipeline p = pipeline(c, kernel, spec);
    VkCommandBuffer cb = begin_command(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
    if (c->bound != p) {
        c->f.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
        c->bound = p;
    }
    c->f.vkCmdPushConstants(cb, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, pc_bytes, pc);
    c->f.vkCmdDispatch(cb, gx, gy, gz);
    c->stats.dispatches++;
    end_command(c);
    rec_leave(c);
}

/* ---- memory -------------------------------------------------------------------------------------- */

static int find_index(const vk_ctx *c, uint64_t a) { /* last allocation with addr <= a, or -1 */
    int lo = 0, hi = c->nallocs - 1, ans = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (c->allocs[mid].addr <= a)
            ans = mid, lo = mid + 1;
        else
            hi = mid - 1;
    }
    return ans;
}

const vk_mem *vk_find(vk_ctx *c, const void *p, size_t bytes, const char *what) {
    uint64_t a = (uint64_t)(uintptr_t)p;
    int i = find_index(c, a);
    if (i >= 0 && a + bytes <= c->allocs[i].addr + c->allocs[i].size) return &c->allocs[i];
    fprintf(stderr, "trm: mps: %s: %p (+%zu bytes) is not device memory of this backend (internal error)\n",
            what, p, bytes);
    exit(1);
}

void *vk_alloc(vk_ctx *c, size_t bytes) {
    size_t n = bytes ? (bytes + 255) / 256 * 256 : 256;
    if (n < bytes || n > c->max_alloc) return NULL;
    vk_mem m;
    VkResult r = mem_create(c, n, VK_MEM_DEVICE, &m);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) return NULL;
    vk_check(c, r, "allocating device memory");
    if (c->nallocs == c->cap_allocs) {
        c->cap_allocs = c->cap_allocs ? 2 * c->cap_allocs : 64;
        c->allocs = xrealloc(c->allocs, (size_t)c->cap_allocs * sizeof *c->allocs);
    }
    int at = find_index(c, m.addr) + 1;
    memmove(c->allocs + at + 1, c->allocs + at, (size_t)(c->nallocs - at) * sizeof *c->allocs);
    c->allocs[at] = m;
    c->nallocs++;
    c->allocated += n;
    if (m.map && stream_idle(c))
        memset(m.map, 0, n);
    else {
        VkCommandBuffer cb = begin_command(c, VK_PIPELINE_STAGE_TRANSFER_BIT);
        c->f.vkCmdFillBuffer(cb, m.buf, 0, VK_WHOLE_SIZE, 0);
        end_command(c);
    }
    return (void *)(uintptr_t)m.addr;
}

void vk_free(vk_ctx *c, void *p) {
    if (!p) return;
    uint64_t a = (uint64_t)(uintptr_t)p;
    int i = find_index(c, a);
    if (i < 0 || c->allocs[i].addr != a) {
        fprintf(stderr, "trm: mps: free of %p, which no allocation starts at (internal error)\n", p);
        exit(1);
    }
    vk_finish(c); /* commands still queued may use it */
    c->allocated -= c->allocs[i].size;
    mem_destroy(c, &c->allocs[i]);
    memmove(c->allocs + i, c->allocs + i + 1, (size_t)(c->nallocs - i - 1) * sizeof *c->allocs);
    c->nallocs--;
}

static size_t offset_in(const vk_mem *m, const void *p) { return (size_t)((uint64_t)(uintptr_t)p - m->addr); }

static void record_copy(vk_ctx *c, VkBuffer src, size_t so, VkBuffer dst, size_t dof, size_t n) {
    VkCommandBuffer cb = begin_command(c, VK_PIPELINE_STAGE_TRANSFER_BIT);
    VkBufferCopy r = {.srcOffset = so, .dstOffset = dof, .size = n};
    c->f.vkCmdCopyBuffer(cb, src, dst, 1, &r);
    end_command(c);
}

void vk_upload(vk_ctx *c, void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    const vk_mem *m = vk_find(c, dst, bytes, "to_device");
    size_t off = offset_in(m, dst);
    if (m->map && stream_idle(c)) { /* unified memory, nothing queued: write it in place */
        memcpy(m->map + off, src, bytes);
        return;
    }
    /* through the staging buffer, in stream order: the host copy may be reused at once */
    const char *s = src;
    while (bytes) {
        size_t room = c->up.size - c->up_used;
        if (room < 4096 && room < bytes) {
            vk_finish(c);
            room = c->up.size;
        }
        size_t k = bytes < room ? bytes : room;
        memcpy(c->up.map + c->up_used, s, k);
        record_copy(c, c->up.buf, c->up_used, m->buf, off, k);
        c->up_used += (k + 15) / 16 * 16;
        if (c->up_used > c->up.size) c->up_used = c->up.size;
        s += k, off += k, bytes -= k;
    }
}

/* One range through the readback buffer, in pieces as large as it. */
static void download_staged(vk_ctx *c, char *d, const vk_mem *m, size_t off, size_t bytes) {
    while (bytes) {
        size_t k = bytes < c->down.size ? bytes : c->down.size;
        record_copy(c, m->buf, off, c->down.buf, 0, k);
        vk_finish(c);
        memcpy(d, c->down.map, k);
        d += k, off += k, bytes -= k;
    }
}

/* Several device ranges to host memory behind one wait: the leading ones that fit the readback
 * buffer together (and any in mapped memory) share it; the rest are read one by one. */
void vk_download_many(vk_ctx *c, int n, void *const *dst, const void *const *src, const size_t *bytes) {
    size_t at[8], used = 0;
    int staged = 0;
    for (; staged < n && staged < 8; staged++) {
        at[staged] = 0;
        if (!bytes[staged]) continue; /* a zero-length read may name any pointer, even NULL */
        const vk_mem *m = vk_find(c, src[staged], bytes[staged], "to_host");
        if (m->map) continue;
        if (bytes[staged] > c->down.size - used) break;
        record_copy(c, m->buf, offset_in(m, src[staged]), c->down.buf, used, bytes[staged]);
        at[staged] = used;
        used += (bytes[staged] + 15) / 16 * 16;
        if (used > c->down.size) used = c->down.size;
    }
    vk_finish(c);
    for (int i = 0; i < n; i++) {
        if (!bytes[i]) continue;
        const vk_mem *m = vk_find(c, src[i], bytes[i], "to_host");
        if (m->map)
            memcpy(dst[i], m->map + offset_in(m, src[i]), bytes[i]);
        else if (i < staged)
            memcpy(dst[i], c->down.map + at[i], bytes[i]);
        else
            download_staged(c, dst[i], m, offset_in(m, src[i]), bytes[i]);
    }
}

void vk_download(vk_ctx *c, void *dst, const void *src, size_t bytes) {
    vk_download_many(c, 1, &dst, &src, &bytes);
}

void vk_copy(vk_ctx *c, void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return;
    const vk_mem *md = vk_find(c, dst, bytes, "copy"), *ms = vk_find(c, src, bytes, "copy");
    size_t od = offset_in(md, dst), os = offset_in(ms, src);
    if (md != ms || od + bytes <= os || os + bytes <= od) {
        record_copy(c, ms->buf, os, md->buf, od, bytes);
        return;
    }
    /* overlapping ranges of one buffer (memmove semantics): through a temporary buffer */
    vk_mem t;
    VkResult r = mem_create(c, bytes, VK_MEM_DEVICE, &t);
    if (r != VK_SUCCESS) vk_oom_exit(c, bytes);
    record_copy(c, ms->buf, os, t.buf, 0, bytes);
    record_copy(c, t.buf, 0, md->buf, od, bytes);
    vk_finish(c);
    mem_destroy(c, &t);
}

void vk_fill_zero(vk_ctx *c, void *p, size_t bytes) {
    if (!bytes) return;
    const vk_mem *m = vk_find(c, p, bytes, "zero");
    size_t off = offset_in(m, p), end = off + bytes;
    /* vkCmdFillBuffer needs 4-byte offsets and sizes: the odd bytes at either end are copied
     * from a buffer of zeros */
    size_t a0 = (off + 3) / 4 * 4, a1 = end / 4 * 4;
    if (a0 >= a1) {
        record_copy(c, c->zeros.buf, 0, m->buf, off, bytes);
        return;
    }
    if (a0 > off) record_copy(c, c->zeros.buf, 0, m->buf, off, a0 - off);
    VkCommandBuffer cb = begin_command(c, VK_PIPELINE_STAGE_TRANSFER_BIT);
    c->f.vkCmdFillBuffer(cb, m->buf, a0, a1 - a0, 0);
    end_command(c);
    if (end > a1) record_copy(c, c->zeros.buf, 0, m->buf, a1, end - a1);
}

void vk_mem_info(vk_ctx *c, size_t *free_b, size_t *total_b) {
    int type = c->mem_type[VK_MEM_DEVICE];
    if (type < 0) {
        VkMemoryRequirements req;
        vk_mem probe;
        if (mem_create(c, 256, VK_MEM_DEVICE, &probe) == VK_SUCCESS) {
            c->f.vkGetBufferMemoryRequirements(c->dev, probe.buf, &req);
            type = c->mem_type[VK_MEM_DEVICE] = pick_type(c, req.memoryTypeBits, VK_MEM_DEVICE);
            mem_destroy(c, &probe);
        }
    }
    uint32_t heap = type >= 0 ? c->memprops.memoryTypes[type].heapIndex : 0;
    VkDeviceSize total = c->memprops.memoryHeaps[heap].size, avail = total > c->allocated ? total - c->allocated : 0;
    if (c->has_budget) {
        VkPhysicalDeviceMemoryBudgetPropertiesEXT bp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
        VkPhysicalDeviceMemoryProperties2 mp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, .pNext = &bp};
        c->f.vkGetPhysicalDeviceMemoryProperties2(c->phys, &mp);
        avail = bp.heapBudget[heap] > bp.heapUsage[heap] ? bp.heapBudget[heap] - bp.heapUsage[heap] : 0;
    }
    if (free_b) *free_b = (size_t)avail;
    if (total_b) *total_b = (size_t)total;
}

void vk_oom_exit(vk_ctx *c, size_t requested) {
    size_t fr = 0, tot = 0;
    if (c->dev) vk_mem_info(c, &fr, &tot);
    fprintf(stderr, "trm: the mps device (%s) is out of memory", c->name);
    if (requested) fprintf(stderr, ": a work buffer of %.2f GiB was requested", requested / 1073741824.0);
    fprintf(stderr, "; %.2f GiB of %.2f GiB are free. Lower global_batch_size or arch.H_cycles/arch.L_cycles "
                    "(the last checkpoint written is kept)\n",
            fr / 1073741824.0, tot / 1073741824.0);
    exit(1);
}
