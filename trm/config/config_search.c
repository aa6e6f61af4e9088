/* config_search.c — finding configs by name: the search directories (--config-dir,
 * TRM_CONFIG_PATH) first, then the configs/ tree embedded in the binary; listing them all
 * (`trm config list`); config groups and their options. */

#include "config_internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* Names of configs and groups: relative, no "..", no leading '/', printable. */
int valid_name(const char *s) {
    if (!*s || *s == '/' || strstr(s, "..")) return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= ' ' || *p == 0x7f || *p == '\\') return 0;
    return 1;
}

int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Reads configs REL.yaml from the first search location that has it. */
char *find_config(const cfg_search *s, const char *rel, char **display, size_t *len) {
    char *file = xasprintf("%s.yaml", rel);
    char *text = NULL;
    for (int i = 0; i < s->ndirs && !text; i++) {
        char *path = trm_path_join(s->dirs[i], file);
        if (trm_file_exists(path) && !trm_is_dir(path)) {
            text = trm_read_file(path, len, NULL);
            if (text) *display = xstrdup(path);
        }
        free(path);
    }
    if (!text && s->use_embedded) {
        const char *emb = cfg_embedded_lookup(file, len);
        if (emb) {
            text = xstrndup(emb, *len);
            *display = xasprintf("configs/%s", file);
        }
    }
    free(file);
    return text;
}

typedef struct {
    cfg_entry *v;
    int n, cap;
} entry_list;

static void entries_add(entry_list *l, const char *name, const char *source) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].name, name)) return; /* first search location wins */
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = xrealloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    l->v[l->n].name = xstrdup(name);
    l->v[l->n++].source = xstrdup(source);
}

static void scan_dir(entry_list *l, const char *root, const char *rel, int depth) {
    char *dir = *rel ? trm_path_join(root, rel) : xstrdup(root);
    DIR *d = depth < 8 ? opendir(dir) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char *sub = *rel ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
        char *full = trm_path_join(root, sub);
        if (trm_is_dir(full)) {
            scan_dir(l, root, sub, depth + 1);
        } else if (ends_with(sub, ".yaml")) {
            sub[strlen(sub) - 5] = 0;
            entries_add(l, sub, root);
        }
        free(full);
        free(sub);
    }
    if (d) closedir(d);
    free(dir);
}

static int entry_cmp(const void *a, const void *b) {
    return strcmp(((const cfg_entry *)a)->name, ((const cfg_entry *)b)->name);
}

int cfg_list(const cfg_search *s, cfg_entry **out, int *n) {
    entry_list l = {0};
    for (int i = 0; i < s->ndirs; i++) scan_dir(&l, s->dirs[i], "", 0);
    for (size_t i = 0; s->use_embedded && cfg_embedded_name(i); i++) {
        char *name = xstrdup(cfg_embedded_name(i));
        if (ends_with(name, ".yaml")) {
            name[strlen(name) - 5] = 0;
            entries_add(&l, name, "embedded");
        }
        free(name);
    }
    if (l.n) qsort(l.v, (size_t)l.n, sizeof *l.v, entry_cmp);
    *out = l.v;
    *n = l.n;
    return 0;
}

void cfg_list_free(cfg_entry *l, int n) {
    for (int i = 0; i < n; i++) {
        free(l[i].name);
        free(l[i].source);
    }
    free(l);
}

/* The options of a group as "a, b, c" (NULL when the group has none). */
char *group_options(const cfg_search *s, const char *group) {
    cfg_entry *l;
    int n;
    cfg_list(s, &l, &n);
    trm_sbuf b = {0};
    size_t gl = strlen(group);
    for (int i = 0; i < n; i++) {
        const char *name = l[i].name;
        if (strncmp(name, group, gl) || name[gl] != '/' || strchr(name + gl + 1, '/')) continue;
        if (b.len) sb_puts(&b, ", ");
        sb_puts(&b, name + gl + 1);
    }
    cfg_list_free(l, n);
    return b.p;
}

int cfg_is_group(const cfg_search *s, const char *name) {
    if (!valid_name(name)) return 0;
    for (int i = 0; i < s->ndirs; i++) {
        char *p = trm_path_join(s->dirs[i], name);
        int d = trm_is_dir(p);
        free(p);
        if (d) return 1;
    }
    size_t nl = strlen(name);
    for (size_t i = 0; s->use_embedded && cfg_embedded_name(i); i++)
        if (!strncmp(cfg_embedded_name(i), name, nl) && cfg_embedded_name(i)[nl] == '/') return 1;
    return 0;
}
