/* cli_config.c — `trm config show|list`: prints the composed, resolved config or the
 * configs and config groups that can be chosen. */
#include <stdlib.h>
#include <string.h>

#include "commands.h"

static const char config_usage[] =
    "usage: trm config show [cfg=NAME] [overrides ...]\n"
    "       trm config list\n"
    "  (see `trm help config` for the override forms)\n";

static int config_fail(const char *msg) {
    fprintf(stderr, "trm config: %s\n", msg);
    return 2;
}

static int config_show(int argc, char **argv, const trm_globals *g) {
    trm_err e = {{0}};
    const char *cfg_name = NULL;
    char **ovs = NULL;
    int nov = 0;
    if (trm_collect_overrides(argc, argv, &cfg_name, &ovs, &nov, &e)) {
        free(ovs);
        return config_fail(e.msg);
    }
    /* the overrides as pretrain takes them (run_name=, resume=, ... without their +) */
    char **norm = trm_normalise_overrides(ovs, nov);
    free(ovs);
    cfg_node *root = cfg_compose(&g->search, cfg_name, nov, norm, &e);
    if (root) trm_warn_unread_arch_keys(root, norm, nov, stderr);
    trm_free_strs(norm, nov);
    if (!root) return config_fail(e.msg);
    cfg_write_yaml(root, stdout);
    cfg_free(root);
    return 0;
}

/* Top-level configs first (cfg=NAME), then each group's options (GROUP=NAME). */
static int config_list(int argc, const trm_globals *g) {
    if (argc) return config_fail("`config list` takes no arguments");
    cfg_entry *l;
    int n;
    cfg_list(&g->search, &l, &n);
    printf("configs (cfg=NAME):\n");
    for (int i = 0; i < n; i++)
        if (!strchr(l[i].name, '/')) printf("  %-24s %s\n", l[i].name, l[i].source);
    printf("groups (GROUP=NAME):\n");
    for (int i = 0; i < n; i++) {
        const char *slash = strrchr(l[i].name, '/');
        if (!slash) continue;
        int glen = (int)(slash - l[i].name);
        int first = 1;
        for (int j = 0; j < i && first; j++) {
            const char *s2 = strrchr(l[j].name, '/');
            if (s2 && s2 - l[j].name == glen && !strncmp(l[j].name, l[i].name, (size_t)glen)) first = 0;
        }
        if (first) printf("  %.*s:\n", glen, l[i].name);
        printf("    %-22s %s\n", slash + 1, l[i].source);
    }
    cfg_list_free(l, n);
    return 0;
}

int cmd_config(int argc, char **argv, const trm_globals *g) {
    if (argc < 1) {
        fputs(config_usage, stderr);
        return 2;
    }
    if (!strcmp(argv[0], "show")) return config_show(argc - 1, argv + 1, g);
    if (!strcmp(argv[0], "list")) return config_list(argc - 1, g);
    fprintf(stderr, "trm config: unknown subcommand '%s'\n", argv[0]);
    fputs(config_usage, stderr);
    return 2;
}
