/* commands.h — the command-line layer: one function per `trm <command>`, sharing the
 * global options parsed in main.c. Commands print errors and return the exit status. */
#ifndef TRM_COMMANDS_H
#define TRM_COMMANDS_H
#include "config/config.h"

typedef struct {
    cfg_search search;   /* --config-dir / TRM_CONFIG_PATH, then the embedded tree */
    const char *argv0;
} trm_globals;

typedef int (*trm_command_fn)(int argc, char **argv, const trm_globals *g);

int cmd_config(int argc, char **argv, const trm_globals *g);
int cmd_inspect(int argc, char **argv, const trm_globals *g);
int cmd_pretrain(int argc, char **argv, const trm_globals *g);
int cmd_generate(int argc, char **argv, const trm_globals *g);
int cmd_data(int argc, char **argv, const trm_globals *g);
int cmd_devices(int argc, char **argv, const trm_globals *g);
int cmd_bench(int argc, char **argv, const trm_globals *g);
int cmd_convert(int argc, char **argv, const trm_globals *g);
int cmd_plot(int argc, char **argv, const trm_globals *g);

/* Whether argv holds --help or -h (before a "--"): every command then prints its help. */
int trm_wants_help(int argc, char **argv);
/* `trm data <builder> --help` and `trm help data <builder>`: that builder's usage; returns 0,
 * or 2 with a message naming the builders when there is no such builder. */
int trm_data_help(const char *builder, FILE *out);

/* Splits key=value arguments from a command's argv: `cfg=NAME` is returned in *cfg_name,
 * other key=value / +k=v / ~k words are collected in order. Returns -1 on a stray word. */
int trm_collect_overrides(int argc, char **argv, const char **cfg_name, char ***overrides,
                          int *noverrides, trm_err *e);
/* Copies of the overrides with the reference's optional keys (run_name=, load_checkpoint=, ...)
 * made add-or-set (`++key=`), so they work with or without `+`. Free with trm_free_strs. */
char **trm_normalise_overrides(char **ov, int n);
/* One warning on f for each key an override adds under arch. (+arch.KEY=...) that the
 * composed config's architecture does not read: it would change nothing. */
void trm_warn_unread_arch_keys(const cfg_node *cfg, char *const *ov, int n, FILE *f);
void trm_free_strs(char **s, int n);

#endif
