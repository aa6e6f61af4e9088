/* cli_common.c — helpers shared by the commands: splitting key=value overrides, spotting a
 * request for help. */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "model/model.h"

static int is_override_word(const char *w) {
    if (w[0] == '~') return w[1] != 0;
    return strchr(w, '=') != NULL && w[0] != '=' && w[0] != '-';
}

int trm_collect_overrides(int argc, char **argv, const char **cfg_name, char ***overrides,
                          int *noverrides, trm_err *e) {
    *cfg_name = NULL;
    *overrides = xcalloc((size_t)argc + 1, sizeof **overrides);
    *noverrides = 0;
    for (int i = 0; i < argc; i++) {
        const char *w = argv[i];
        if (!is_override_word(w))
            return trm_errf(e, "unexpected argument '%s' (expected key=value, +key=value, "
                               "++key=value, ~key or cfg=NAME)", w);
        if (strncmp(w, "cfg=", 4) == 0 || strncmp(w, "--config-name=", 14) == 0) {
            *cfg_name = strchr(w, '=') + 1;
            continue;
        }
        (*overrides)[(*noverrides)++] = argv[i];
    }
    return 0;
}

/* Keys the reference's users add with `+key=v`; trm also accepts them without the `+`. */
static int is_optional_key(const char *ov) {
    static const char *const keys[] = {"project_name=", "run_name=", "load_checkpoint=", "checkpoint_path=",
                                       "resume=", "eval_save_outputs=", "stop_after_steps=", "overwrite="};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strncmp(ov, keys[i], strlen(keys[i]))) return 1;
    return 0;
}

char **trm_normalise_overrides(char **ov, int n) {
    char **out = xcalloc((size_t)n + 1, sizeof *out);
    for (int i = 0; i < n; i++) {
        const char *w = ov[i];
        while (*w == '+') w++;
        out[i] = is_optional_key(w) ? xasprintf("++%s", w) : xstrdup(ov[i]);
    }
    return out;
}

void trm_warn_unread_arch_keys(const cfg_node *cfg, char *const *ov, int n, FILE *f) {
    for (int i = 0; i < n; i++) {
        const char *w = ov[i];
        if (*w != '+') continue;
        while (*w == '+') w++;
        size_t klen = strcspn(w, "=");
        if (strncmp(w, "arch.", 5) || !w[klen]) continue;
        int seen = 0; /* once per key */
        for (int j = 0; j < i && !seen; j++) {
            const char *v = ov[j] + strspn(ov[j], "+");
            seen = *ov[j] == '+' && !strncmp(v, w, klen) && v[klen] == '=';
        }
        char *key = xstrndup(w, klen);
        const char *near, *preset;
        if (!seen && !trm_arch_reads(cfg, key, &near, &preset)) {
            fprintf(f, "trm: warning: +%s changes nothing:\n  architecture %s does not read it\n", key, preset);
            if (near) fprintf(f, "  did you mean %s?\n", near);
        }
        free(key);
    }
}

void trm_free_strs(char **s, int n) {
    for (int i = 0; i < n; i++) free(s[i]);
    free(s);
}

int trm_wants_help(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--")) return 0;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    }
    return 0;
}
