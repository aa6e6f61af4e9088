/* config.h — hydra-like configuration tree on libyaml: load, compose `defaults:`, apply
 * command-line overrides, resolve ${…} interpolation, typed lookups and YAML output. */
#ifndef TRM_CONFIG_H
#define TRM_CONFIG_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/util.h"

typedef enum { CFG_NULL, CFG_BOOL, CFG_INT, CFG_FLOAT, CFG_STR, CFG_LIST, CFG_MAP } cfg_type;

typedef struct cfg_node cfg_node;
struct cfg_node {
    cfg_type type;
    char *key; /* key inside the parent map; NULL for list items and the root */
    int b;
    int64_t i;
    double f;
    char *s;           /* CFG_STR (may hold unresolved "${…}" until cfg_resolve) */
    cfg_node **items;  /* CFG_LIST / CFG_MAP children, in file order */
    int n, cap;
    char *file;        /* where the value came from: file path or "<command line>" */
    int line, col;     /* 1-based; 0 when synthesised */
};

/* Where configs are looked up: user dirs first (--config-dir, TRM_CONFIG_PATH), then the
 * tree embedded in the binary at build time. */
typedef struct {
    const char **dirs;
    int ndirs;
    int use_embedded;
    /* keys the schema declares float (NULL-terminated, or NULL): an int there becomes a float
     * once the configs are composed, as pydantic coerces it, so `expansion: 4` takes 2.5 */
    const char *const *float_keys;
} cfg_search;

/* What one text may make, so that a hostile file costs bounded time and memory: nesting of
 * maps and lists (JSON and YAML alike), the bytes one value made by aliases or interpolation
 * may hold, and those of all such values of one config. */
#define CFG_MAX_NEST 128
#define CFG_MAX_VALUE_BYTES ((size_t)1 << 20)
#define CFG_MAX_EXPANDED_BYTES ((size_t)64 << 20)
#define CFG_MAX_FILE_BYTES ((size_t)64 << 20) /* a config file read from disk */

/* Parses YAML text (also JSON) into a tree; `name` is used in error messages (file:line:col).
 * Nesting deeper than CFG_MAX_NEST and aliases that copy more than the limits above are
 * errors that name the limit. */
cfg_node *cfg_parse(const char *text, size_t len, const char *name, trm_err *e);
/* Walks the YAML/JSON events of text without building anything, in time linear in len, and
 * fails (naming `name`, the limit and where it was passed) when maps and lists nest deeper
 * than max_depth or the text holds more than max_values values: for readers that then build
 * the whole document at once (libyaml's loader has no limits of its own). Text that is not
 * valid YAML passes: the parser that follows stops at the same place and says why. */
int cfg_check_limits(const char *text, size_t len, const char *name, int max_depth, size_t max_values, trm_err *e);
/* Loads NAME (cfg name like "cfg_pretrain", "arch/trm", or a path to a .yaml file),
 * composes its `defaults:` list and applies overrides ("a.b=v", "+k=v", "++k=v", "~k",
 * "arch=NAME", "cfg=NAME" is handled by the caller), then resolves interpolations. */
cfg_node *cfg_compose(const cfg_search *search, const char *cfg_name, int noverrides,
                      char *const *overrides, trm_err *e);
/* cfg_compose with `overlay` (consumed; may be NULL) merged over the composed configs before
 * the overrides: a run's saved config (the reference's all_config.yaml) on trm's defaults. */
cfg_node *cfg_compose_over(const cfg_search *search, const char *cfg_name, cfg_node *overlay, int noverrides,
                           char *const *overrides, trm_err *e);
/* The config a file stores as YAML text (a checkpoint's, a weights file's), named
 * "OWNER (stored config)" in messages: parsed, the schema's float keys coerced, the overrides
 * applied, interpolations resolved. No composition: the stored config is already complete. */
cfg_node *cfg_from_stored(const char *owner, const char *text, const cfg_search *search, int noverrides,
                          char *const *overrides, trm_err *e);
/* Int values at these dotted keys (NULL-terminated list) become floats. */
void cfg_coerce_floats(cfg_node *root, const char *const *keys);
/* Applies one override string to an already-composed tree (used by cfg_compose and tests). */
int cfg_apply_override(cfg_node *root, const cfg_search *search, const char *ov, trm_err *e);
int cfg_resolve(cfg_node *root, trm_err *e);

cfg_node *cfg_get(const cfg_node *root, const char *dotted);
/* Typed getters: 0 on success; error (key + expected type + actual) when missing or wrong. */
int cfg_get_int(const cfg_node *root, const char *key, int64_t *out, trm_err *e);
int cfg_get_float(const cfg_node *root, const char *key, double *out, trm_err *e);
int cfg_get_bool(const cfg_node *root, const char *key, int *out, trm_err *e);
/* Returns a borrowed string; NULL value (null) allowed when allow_null is set. */
int cfg_get_str(const cfg_node *root, const char *key, const char **out, int allow_null,
                trm_err *e);
const char *cfg_type_name(cfg_type t);

cfg_node *cfg_new(cfg_type t);
cfg_node *cfg_clone(const cfg_node *n);
void cfg_free(cfg_node *n);
/* Sets (creating maps on the way) root[dotted] = value, taking ownership of value. */
void cfg_set(cfg_node *root, const char *dotted, cfg_node *value);

/* Block-style YAML, nested maps, stable key order; strings quoted when needed. */
void cfg_write_yaml(const cfg_node *n, FILE *f);
char *cfg_to_yaml(const cfg_node *n);

/* Equal trees: same types, values, keys and order (nan equals nan). */
int cfg_equal(const cfg_node *a, const cfg_node *b);
/* A node typed from plain (unquoted) YAML text: null, bool, int, float, else string. */
cfg_node *cfg_scalar(const char *text);
/* Shortest text that reads back as the same float and as a float (1.0, 1.0e-30, .inf). */
void cfg_format_float(double v, char *buf, size_t size);

/* Every config reachable through a search ("cfg_pretrain", "arch/trm", ...), sorted by
 * name, each once: source is the directory it comes from (the first wins) or "embedded". */
typedef struct {
    char *name;
    char *source;
} cfg_entry;
int cfg_list(const cfg_search *s, cfg_entry **out, int *n);
void cfg_list_free(cfg_entry *l, int n);
/* Whether NAME is a config group (a directory NAME/ in a search location). */
int cfg_is_group(const cfg_search *s, const char *name);

/* The embedded configs/ tree (generated at build time). Returns NULL if absent. */
const char *cfg_embedded_lookup(const char *relpath, size_t *len);
const char *cfg_embedded_name(size_t i); /* i-th embedded path, NULL past the end */

#endif
