/* config_value.c — the value of a command-line override, read as hydra reads it (the part trm
 * needs): bare scalars typed as in YAML, quoted strings, [lists] and {maps}, nested. */

#include "config_internal.h"

#include <stdlib.h>
#include <string.h>

/* Hydra's value grammar (the part we need): scalars typed like YAML, 'quoted' and
 * "quoted" strings, [lists], {maps}, nested. */
typedef struct {
    const char *s;
    size_t pos;
    int depth;
    trm_err *e;
} vparse;

static void vp_ws(vparse *v) {
    while (v->s[v->pos] == ' ' || v->s[v->pos] == '\t') v->pos++;
}

static cfg_node *vp_value(vparse *v, int in_container);

static cfg_node *vp_quoted(vparse *v) {
    char q = v->s[v->pos++];
    trm_sbuf b = {0};
    for (;;) {
        char ch = v->s[v->pos];
        if (!ch) {
            free(b.p);
            trm_errf(v->e, "unterminated %c-quoted string", q);
            return NULL;
        }
        v->pos++;
        if (ch == q) break;
        if (ch == '\\' && (v->s[v->pos] == q || v->s[v->pos] == '\\')) ch = v->s[v->pos++];
        sb_putc(&b, ch);
    }
    char *text = sb_take(&b);
    cfg_node *n = new_str(text);
    free(text);
    return n;
}

static cfg_node *vp_bare(vparse *v, int in_container, const char *stops) {
    size_t start = v->pos;
    int braces = 0;
    for (;;) {
        char ch = v->s[v->pos];
        if (!ch) break;
        if (ch == '$' && v->s[v->pos + 1] == '{') {
            braces++;
            v->pos += 2;
            continue;
        }
        if (braces && ch == '}') braces--;
        else if (!braces && in_container && strchr(stops, ch)) break;
        v->pos++;
    }
    size_t end = v->pos;
    while (end > start && (v->s[end - 1] == ' ' || v->s[end - 1] == '\t')) end--;
    char *text = xstrndup(v->s + start, end - start);
    cfg_node *n = cfg_scalar(text);
    free(text);
    return n;
}

static int vp_expect_sep(vparse *v, char close) {
    vp_ws(v);
    char ch = v->s[v->pos];
    if (ch == ',') {
        v->pos++;
        return 0;
    }
    if (ch == close) return 1;
    return ch ? trm_errf(v->e, "unexpected '%c' at offset %zu", ch, v->pos)
              : trm_errf(v->e, "missing '%c'", close);
}

static cfg_node *vp_list(vparse *v) {
    cfg_node *l = cfg_new(CFG_LIST);
    v->pos++;
    for (vp_ws(v); v->s[v->pos] != ']';) {
        cfg_node *item = vp_value(v, 1);
        if (!item) goto fail;
        node_push(l, item);
        int r = vp_expect_sep(v, ']');
        if (r < 0) goto fail;
        if (r == 1) break;
        vp_ws(v);
    }
    v->pos++;
    return l;
fail:
    cfg_free(l);
    return NULL;
}

static cfg_node *vp_map(vparse *v) {
    cfg_node *m = cfg_new(CFG_MAP);
    v->pos++;
    for (vp_ws(v); v->s[v->pos] != '}';) {
        cfg_node *k = v->s[v->pos] == '\'' || v->s[v->pos] == '"' ? vp_quoted(v) : vp_bare(v, 1, ":,]}");
        if (!k) goto fail;
        vp_ws(v);
        if (v->s[v->pos] != ':') {
            cfg_free(k);
            trm_errf(v->e, "expected ':' after a map key at offset %zu", v->pos);
            goto fail;
        }
        v->pos++;
        trm_sbuf kb = {0};
        scalar_text(&kb, k);
        cfg_free(k);
        char *key = sb_take(&kb);
        cfg_node *val = vp_value(v, 1);
        if (val && map_index(m, key) >= 0) {
            trm_errf(v->e, "duplicate key '%s'", key);
            cfg_free(val);
            val = NULL;
        }
        if (!val) {
            free(key);
            goto fail;
        }
        val->key = key;
        node_push(m, val);
        int r = vp_expect_sep(v, '}');
        if (r < 0) goto fail;
        if (r == 1) break;
        vp_ws(v);
    }
    v->pos++;
    return m;
fail:
    cfg_free(m);
    return NULL;
}

static cfg_node *vp_value(vparse *v, int in_container) {
    if (++v->depth > CFG_MAX_DEPTH) {
        trm_errf(v->e, "value nested too deeply");
        return NULL;
    }
    vp_ws(v);
    char ch = v->s[v->pos];
    cfg_node *n;
    if (ch == '[') n = vp_list(v);
    else if (ch == '{') n = vp_map(v);
    else if (ch == '\'' || ch == '"') n = vp_quoted(v);
    else n = vp_bare(v, in_container, ",]}");
    v->depth--;
    return n;
}

/* Parses an override's value; *bare says it was an unquoted scalar (its text is kept
 * verbatim when the target key holds a string). */
cfg_node *parse_value(const char *text, int *bare, trm_err *e) {
    vparse v = {text, 0, 0, e};
    vp_ws(&v);
    char ch = text[v.pos];
    *bare = ch != '[' && ch != '{' && ch != '\'' && ch != '"';
    cfg_node *n = vp_value(&v, 0);
    if (!n) return NULL;
    if (*bare && n->type == CFG_NULL && !text[strspn(text, " \t")]) { /* `key=`: '' as in hydra */
        cfg_free(n);
        n = new_str("");
    }
    vp_ws(&v);
    if (text[v.pos]) {
        trm_errf(e, "unexpected text after the value at offset %zu: '%s'", v.pos, text + v.pos);
        cfg_free(n);
        return NULL;
    }
    node_set_pos_tree(n, CMDLINE);
    return n;
}
