/* vk.h — the Vulkan plumbing under the mps backend (vk_device.c): the loader opened at run time,
 * one device and queue, device memory addressed by buffer device address, an in-order command
 * stream with a full memory barrier before every command, uploads and readbacks through
 * staging memory, and compute pipelines built on first use from the embedded SPIR-V.
 *
 * Device pointers handed to the model are the buffers' device addresses: pointer arithmetic
 * on them is address arithmetic, a kernel takes them as they are (push constants), and the
 * copies find the buffer an address belongs to in a sorted table of allocations. */
#ifndef TRM_VK_H
#define TRM_VK_H
#define VK_NO_PROTOTYPES
#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "spirv_modules.h"
#include "util/util.h"

#define VK_GLOBAL_FUNCS(X) \
    X(vkCreateInstance) X(vkEnumerateInstanceExtensionProperties) X(vkEnumerateInstanceLayerProperties)

#define VK_INSTANCE_FUNCS(X)                                                                            \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                  \
    X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2) X(vkGetPhysicalDeviceMemoryProperties) \
    X(vkGetPhysicalDeviceMemoryProperties2) X(vkGetPhysicalDeviceQueueFamilyProperties)                  \
    X(vkEnumerateDeviceExtensionProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)

#define VK_DEVICE_FUNCS(X)                                                                              \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer)                          \
    X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory)           \
    X(vkMapMemory) X(vkGetBufferDeviceAddress) X(vkCreateCommandPool) X(vkDestroyCommandPool)            \
    X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkResetCommandBuffer)    \
    X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences) X(vkResetFences)              \
    X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreatePipelineLayout)                           \
    X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCmdBindPipeline)     \
    X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkCmdCopyBuffer) X(vkCmdFillBuffer) \
    X(vkDeviceWaitIdle)

typedef struct {
    uint64_t lo, hi; /* device addresses [lo, hi) */
} vk_range;
#define VK_PENDING 32
#define VK_USES 8

typedef struct {
    void *lib;
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
#define X(f) PFN_##f f;
    VK_GLOBAL_FUNCS(X) VK_INSTANCE_FUNCS(X) VK_DEVICE_FUNCS(X)
#undef X
    PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
    PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
} vk_fn;

/* One allocation: a buffer bound to its own memory. */
typedef struct {
    uint64_t addr; /* device address of byte 0 */
    size_t size;
    VkBuffer buf;
    VkDeviceMemory mem;
    char *map;     /* host mapping (unified memory and staging), or NULL */
} vk_mem;

enum { VK_MEM_DEVICE, VK_MEM_UPLOAD, VK_MEM_READBACK };

#define VK_BATCHES 8
#define VK_SPEC 11 /* specialization constants 0..10 (0: workgroup size, 1: mode, 2..: per kernel) */
typedef struct {
    VkCommandBuffer cmd;
    VkFence fence;
    int in_flight;
} vk_batch;

typedef struct {
    int kernel;
    uint32_t spec[VK_SPEC];
    VkPipeline pipe;
} vk_pipe;

/* What the command stream did since the context was made (the backend's stream_stats): every
 * vkCmdDispatch, vkCmdPipelineBarrier, vkQueueSubmit and fence wait, and the host seconds spent
 * recording commands (vk_dispatch, copies, fills: pipeline lookup, barrier decisions, the vkCmd*
 * calls and submits) apart from the seconds blocked in fence waits, which are counted alone. */
typedef struct {
    uint64_t dispatches, barriers, submits, waits;
    double record_s, wait_s;
    double t0;     /* start of the outermost recording call in progress */
    double wait0;  /* wait_s at that start */
    int depth;     /* recording calls in progress (a copy may flush, which may wait) */
} vk_stats;

typedef struct vk_ctx {
    vk_fn f;
    VkInstance inst;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties memprops;
    VkDevice dev;
    VkQueue queue;
    uint32_t qfam;
    int unified;         /* device memory is host memory (integrated GPU, CPU device, Apple) */
    int has_budget;      /* VK_EXT_memory_budget */
    int mem_type[3];     /* per VK_MEM_* kind, -1 if none */
    size_t max_alloc;    /* largest single buffer */
    char name[256];
    /* allocations, sorted by address */
    vk_mem *allocs;
    int nallocs, cap_allocs;
    size_t allocated;    /* bytes of device memory held */
    /* the command stream */
    VkCommandPool pool;
    vk_batch batch[VK_BATCHES];
    int cur;             /* batch being recorded, -1 if none */
    int next;            /* next batch slot to record into */
    int ops;             /* commands recorded into the current batch */
    int flush_at;        /* ops at which the current batch is submitted */
    VkPipeline bound;
    VkPipelineStageFlags last_stage; /* of the commands since the last barrier in this batch */
    /* What the dispatches since the last barrier read and wrote (see vk_reads), and what the
     * next dispatch declared; a copy or fill declares nothing and gets a barrier. */
    vk_range pend_r[VK_PENDING], pend_w[VK_PENDING], use_r[VK_USES], use_w[VK_USES];
    int npr, npw, nur, nuw;
    int pend_unknown;    /* a command since the last barrier declared nothing */
    int use_overflow;
    int sync_each;       /* TRM_VULKAN_SYNC=1: wait after every command (debugging) */
    vk_stats stats;
    /* staging */
    vk_mem up, down, zeros;
    size_t up_used;
    /* pipelines */
    VkPipelineLayout layout;
    vk_pipe *pipes;
    int npipes, cap_pipes;
} vk_ctx;

/* ---- the embedded kernels ---- */
int vk_kernel_index(const char *name); /* index into trm_spirv_modules, -1 if not embedded */

/* ---- loader, devices ---- */
/* Opens the Vulkan loader (dlopen) and fills the global functions; an error says what to install. */
int vk_load(vk_fn *f, trm_err *e);
void vk_unload(vk_fn *f);
/* Creates ctx->inst (validation layers when TRM_VULKAN_VALIDATION=1). */
int vk_instance_create(vk_ctx *c, trm_err *e);
typedef struct {
    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    int usable;          /* Vulkan 1.2 with buffer device address and 8-bit storage, a compute queue */
    char why[160];       /* why not, if not usable */
    double mem_gib;      /* the device's memory (its largest device-local heap) */
} vk_device_info;
/* Every physical device of the instance (caller frees *out); returns the count or -1. */
int vk_list_devices(vk_ctx *c, vk_device_info **out, trm_err *e);
/* Opens physical device `index` (-1: the first usable GPU, else the first usable device). */
int vk_device_open(vk_ctx *c, int index, trm_err *e);
void vk_ctx_destroy(vk_ctx *c);

/* ---- memory ---- */
/* A new zero-filled device allocation (bytes > 0); NULL when the device has no memory for it. */
void *vk_alloc(vk_ctx *c, size_t bytes);
void vk_free(vk_ctx *c, void *p);
/* The allocation that holds [p, p + bytes), or exits with an internal error naming `what`. */
const vk_mem *vk_find(vk_ctx *c, const void *p, size_t bytes, const char *what);
void vk_upload(vk_ctx *c, void *dst, const void *src, size_t bytes);
void vk_download(vk_ctx *c, void *dst, const void *src, size_t bytes); /* waits */
void vk_download_many(vk_ctx *c, int n, void *const *dst, const void *const *src, const size_t *bytes);
void vk_copy(vk_ctx *c, void *dst, const void *src, size_t bytes);
void vk_fill_zero(vk_ctx *c, void *p, size_t bytes);
void vk_mem_info(vk_ctx *c, size_t *free_b, size_t *total_b);
/* Out of device memory in the middle of a step: what was asked, what is free, what to lower. */
void vk_oom_exit(vk_ctx *c, size_t requested);

/* ---- the command stream ---- */
/* Declares memory the next dispatch reads or writes, all of it: a dispatch that touches nothing
 * the dispatches since the last barrier wrote, and writes nothing they read, runs without a
 * barrier and may overlap them (a weight gradient beside the input gradient, the optimiser's
 * updates of different tensors). */
void vk_reads(vk_ctx *c, const void *p, size_t bytes);
void vk_writes(vk_ctx *c, const void *p, size_t bytes);
/* Records one dispatch of `kernel` specialised by spec[0..VK_SPEC-1]; one that runs must have
 * declared its accesses (an internal error otherwise). With no groups nothing runs and the
 * declarations are dropped. */
void vk_dispatch(vk_ctx *c, int kernel, const uint32_t spec[VK_SPEC], const void *pc, uint32_t pc_bytes,
                 uint32_t gx, uint32_t gy, uint32_t gz);
void vk_submit(vk_ctx *c);  /* hands the recorded commands to the queue */
void vk_finish(vk_ctx *c);  /* submits and waits until the device is idle */

/* An unexpected Vulkan failure inside a step cannot be returned through the void ops. */
void vk_check(vk_ctx *c, VkResult r, const char *what);

#endif
