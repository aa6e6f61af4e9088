/* arch.h — the architectures trm builds, as the reference names them (`arch.name`, its
 * module@Class strings): their carry fields and reset buffers under the reference's names,
 * and the reading of each one's `arch.*` keys (required and defaulted as its pydantic config
 * class has them). Device-free; the recursions themselves live in model_trm.c and model_hrm.c. */
#ifndef TRM_ARCH_H
#define TRM_ARCH_H
#include "config/config.h"
#include "util/util.h"

typedef enum {
    TRM_ARCH_TRM = 0, /* the default: a config without arch.name builds TRM */
    TRM_ARCH_HRM,
    TRM_ARCH_TRM_SINGLEZ,
    TRM_ARCH_TRM_HIER6,
    TRM_ARCH_TRANSFORMERS_BASELINE,
    TRM_NARCH
} trm_arch_id;

/* the most carry states of any architecture (trm_hier6: z_H and six z_L) */
#define TRM_MAX_STATES 7

/* The two stacks of blocks an architecture may have, as the reference names its modules. */
enum { TRM_LEVEL_L = 0, TRM_LEVEL_H = 1, TRM_NLEVELS = 2 };

typedef struct {
    trm_arch_id id;
    const char *name;   /* the reference's module@Class */
    const char *preset; /* configs/arch/<preset>.yaml, and the short name in messages */
    int nstates;
    /* carry fields (InnerCarry) and the buffers that reset them; state 0 feeds the heads */
    const char *state[TRM_MAX_STATES];
    const char *init[TRM_MAX_STATES];
    int has_level[TRM_NLEVELS];
    int cfg_puzzle_emb_len; /* reads arch.puzzle_emb_len; else P = ceil(ndim / hidden) */
    int cfg_no_act_continue;/* reads arch.no_ACT_continue; else halting compares q_halt with q_continue */
    int cfg_mlp_t;          /* can mix tokens with an MLP instead of attention */
    int bootstraps_q;       /* q_continue learns from an extra inner step when halting uses it */
} trm_arch;

const trm_arch *trm_arch_get(trm_arch_id id);
/* By the reference's module@Class name; NULL when trm does not know it. */
const trm_arch *trm_arch_find(const char *name);
/* "a, b, c": every known name, for messages. */
const char *trm_arch_known_names(void);
/* Whether the architecture root's arch.name chooses reads `key` (dotted, under "arch."; keys
 * it checks but ignores count as read). *near: the read key closest to it, or NULL. */
int trm_arch_reads(const cfg_node *root, const char *key, const char **near, const char **preset);

struct trm_model_config;
/* The `arch.*` keys of a resolved config into the model config: arch.name picks the
 * architecture (absent: TRM); a key the architecture needs that is missing, an unknown name,
 * or a setting the architecture cannot have is one error naming the architecture. Dataset
 * sizes and the batch are left 0. *name gets arch.name (borrowed) or NULL. */
int trm_arch_read_config(const cfg_node *root, struct trm_model_config *a, const char **name, trm_err *e);
/* What the chosen architecture cannot have (layer counts, hier6's six z_L, attention-only or
 * positions-only settings): one error naming it. Part of trm_model_config_check too. */
int trm_arch_check(const struct trm_model_config *c, trm_err *e);

#endif
