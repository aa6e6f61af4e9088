/* config_internal.h — what the stages of config/ share among themselves; only the files of
 * trm/config/ include it (other folders use config/config.h). Grouped by the file that
 * defines each function. */
#ifndef TRM_CONFIG_INTERNAL_H
#define TRM_CONFIG_INTERNAL_H
#include "config.h"

#define CFG_MAX_DEPTH 200         /* interpolation chains and override values: the stack's limit */
#define CFG_MAX_DEFAULTS_LOADS 1000 /* config files one composition loads: defaults lists that
                                     * name the same files again fan out exponentially */
#define CFG_MAX_DEFAULTS_DEPTH 32 /* defaults chains deeper than this are surely cycles */
#define CMDLINE "<command line>"

/* config_node.c: the tree and dotted paths */
/* Bytes a node and its subtree hold (nodes, keys, strings): what a copy of it costs. */
size_t node_bytes(const cfg_node *n);
void node_clear(cfg_node *n);
void node_push(cfg_node *parent, cfg_node *child);
void node_set_pos(cfg_node *n, const char *file, int line, int col);
void node_set_pos_tree(cfg_node *n, const char *file);
/* Moves src's value (and position) into dst, keeping dst's key; frees src. */
void node_take(cfg_node *dst, cfg_node *src);
int map_index(const cfg_node *m, const char *key);
void node_remove(cfg_node *parent, int idx);
size_t node_count(const cfg_node *n);
int is_scalar(const cfg_node *n);
/* Splits "a.b.c" into components; returns NULL (and *n = 0) on an empty component. */
char **split_dotted(const char *dotted, int *n);
void free_strv(char **v, int n);
char *join_dotted(char *const *v, int n);
/* A list index component: decimal digits only, within range. */
int list_index(const cfg_node *list, const char *comp);
cfg_node *child_of(const cfg_node *n, const char *comp);
/* Places value at m[key], replacing an existing entry in its position. */
void map_put(cfg_node *m, const char *key, cfg_node *value);

/* config_types.c: typing, text of scalars, type errors, coercion */
const char *type_with_article(cfg_type t);
int is_null_text(const char *s);
cfg_type plain_type(const char *s);
cfg_node *new_str(const char *s);
/* Text of a scalar as substituted into a longer string by interpolation. */
void scalar_text(trm_sbuf *b, const cfg_node *n);
/* "string 'abc'", "float 2.5", "a list", ... for error messages. */
void describe(trm_sbuf *b, const cfg_node *n);
int wrong_type(trm_err *e, const char *key, cfg_type want, const cfg_node *got);
/* Converts v to the type of the existing value (OmegaConf's node validation);
 * text is the command-line text of a bare scalar, used when the target is a string. */
int check_type(const char *key, const cfg_node *old, cfg_node *v, const char *text, trm_err *e);

/* config_search.c: finding configs */
/* Names of configs and groups: relative, no "..", no leading '/', printable. */
int valid_name(const char *s);
int ends_with(const char *s, const char *suffix);
/* Reads configs REL.yaml from the first search location that has it. */
char *find_config(const cfg_search *s, const char *rel, char **display, size_t *len);
/* The options of a group as "a, b, c" (NULL when the group has none). */
char *group_options(const cfg_search *s, const char *group);

/* config_defaults.c: composing `defaults:` */
typedef struct {
    char *group; /* "arch" */
    char *name;  /* "foo" */
    const char *override; /* the command-line word, for messages */
    int used;
} group_choice;

typedef struct {
    cfg_search search;
    group_choice *choices;
    int nchoices;
    char *stack[CFG_MAX_DEFAULTS_DEPTH];
    int depth;
    int nloads; /* files loaded so far (CFG_MAX_DEFAULTS_LOADS) */
    trm_err *e;
} compose_ctx;

/* Merges src's keys into the map dst (recursively for map-onto-map); consumes src. */
void merge_into(cfg_node *dst, cfg_node *src);
char *dir_of(const char *rel);
int group_missing(compose_ctx *c, const char *group, const char *name, const char *where);
/* Parses and composes one config file; gdir is its group directory ("" at the top). */
cfg_node *load_text(compose_ctx *c, const char *text, size_t len, const char *disp, const char *gdir);

/* config_value.c: an override's value */
/* Parses an override's value; *bare says it was an unquoted scalar (its text is kept
 * verbatim when the target key holds a string). */
cfg_node *parse_value(const char *text, int *bare, trm_err *e);

/* config_override.c: command-line overrides */
typedef enum { OV_SET, OV_ADD, OV_FORCE, OV_DEL } ov_kind;

typedef struct {
    ov_kind kind;
    char *key;
    const char *value; /* into the override string; NULL for a bare ~key */
} ov_parsed;

int ov_split(const char *ov, ov_parsed *o, trm_err *e);
/* Trimmed text of a bare value, for string targets: `name=1e-4` stays "1e-4". */
char *bare_text(const char *value);
/* A plain `GROUP=NAME` override choosing a config group option. */
int is_group_choice(const cfg_search *s, const ov_parsed *o);

#endif
