/* config_types.c — what a value is: YAML's typing of plain scalars (OmegaConf's resolver), the
 * text of scalars (floats as Python's repr prints them), type names for messages, the typed
 * getters, and coercion: an override's value to the type of the value it replaces, ints to
 * floats at the schema's float keys. */

#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *cfg_type_name(cfg_type t) {
    switch (t) {
    case CFG_NULL: return "null";
    case CFG_BOOL: return "bool";
    case CFG_INT: return "int";
    case CFG_FLOAT: return "float";
    case CFG_STR: return "string";
    case CFG_LIST: return "list";
    case CFG_MAP: return "map";
    }
    return "?";
}

const char *type_with_article(cfg_type t) {
    switch (t) {
    case CFG_NULL: return "null";
    case CFG_BOOL: return "a bool";
    case CFG_INT: return "an int";
    case CFG_FLOAT: return "a float";
    case CFG_STR: return "a string";
    case CFG_LIST: return "a list";
    case CFG_MAP: return "a map";
    }
    return "?";
}

/* ---- scalar typing (OmegaConf's YAML resolver, minus timestamps and yes/no) -------------- */

int is_null_text(const char *s) {
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static int bool_text(const char *s) {
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) return 1;
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) return 0;
    return -1;
}

static int is_int_text(const char *s) {
    if (*s == '+' || *s == '-') s++;
    if (!isdigit((unsigned char)*s)) return 0;
    while (isdigit((unsigned char)*s)) s++;
    return *s == 0;
}

static int is_word3(const char *s, const char *lower, const char *title, const char *upper) {
    return !strcmp(s, lower) || !strcmp(s, title) || !strcmp(s, upper);
}

/* 0: not a float; 1: finite float text; 2: +inf; 3: -inf; 4: nan */
static int float_text_kind(const char *s) {
    const char *p = s;
    int neg = *p == '-';
    if (*p == '+' || *p == '-') p++;
    const char *q = *p == '.' ? p + 1 : p;
    if (is_word3(q, "inf", "Inf", "INF")) return neg ? 3 : 2;
    if (p == s && is_word3(q, "nan", "NaN", "NAN")) return 4;
    int digits = 0, dot = 0, exp = 0;
    while (isdigit((unsigned char)*p)) p++, digits++;
    if (*p == '.') {
        dot = 1;
        for (p++; isdigit((unsigned char)*p); p++) digits++;
    }
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!isdigit((unsigned char)*p)) return 0;
        while (isdigit((unsigned char)*p)) p++;
        exp = 1;
    }
    return *p == 0 && (dot || exp) ? 1 : 0;
}

cfg_type plain_type(const char *s) {
    if (is_null_text(s)) return CFG_NULL;
    if (bool_text(s) >= 0) return CFG_BOOL;
    if (is_int_text(s)) return CFG_INT;
    if (float_text_kind(s)) return CFG_FLOAT;
    return CFG_STR;
}

cfg_node *cfg_scalar(const char *text) {
    cfg_type t = plain_type(text);
    cfg_node *n = cfg_new(t);
    switch (t) {
    case CFG_BOOL: n->b = bool_text(text); break;
    case CFG_INT:
        errno = 0;
        n->i = strtoll(text, NULL, 10);
        if (errno == ERANGE) { /* beyond int64: keep the magnitude as a float */
            n->type = CFG_FLOAT;
            n->f = strtod(text, NULL);
        }
        break;
    case CFG_FLOAT: {
        int k = float_text_kind(text);
        n->f = k == 2 ? INFINITY : k == 3 ? -INFINITY : k == 4 ? NAN : strtod(text, NULL);
        break;
    }
    case CFG_STR: n->s = xstrdup(text); break;
    default: break;
    }
    return n;
}

cfg_node *new_str(const char *s) {
    cfg_node *n = cfg_new(CFG_STR);
    n->s = xstrdup(s);
    return n;
}

/* ---- text forms of scalars --------------------------------------------------------------- */

void cfg_format_float(double v, char *buf, size_t size) {
    if (isnan(v)) {
        snprintf(buf, size, ".nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v > 0 ? ".inf" : "-.inf");
        return;
    }
    /* Python's repr (what OmegaConf users see): the fewest digits that read back exactly,
     * positional for exponents -4..15, then YAML's float form: "1.0", "1.0e-30". */
    char sci[64], fix[64];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(sci, sizeof sci, "%.*e", p - 1, v);
        if (strtod(sci, NULL) == v) break;
    }
    snprintf(sci, sizeof sci, "%.*e", p - 1, v);
    char *e = strchr(sci, 'e');
    int exp = atoi(e + 1);
    if (exp >= -4 && exp < 16) {
        snprintf(fix, sizeof fix, "%.*f", p - 1 - exp > 0 ? p - 1 - exp : 0, v);
        if (strtod(fix, NULL) == v) {
            snprintf(buf, size, "%s%s", fix, strchr(fix, '.') ? "" : ".0");
            return;
        }
    }
    *e = 0;
    snprintf(buf, size, "%s%se%s", sci, strchr(sci, '.') ? "" : ".0", e + 1);
}

/* Text of a scalar as substituted into a longer string by interpolation. */
void scalar_text(trm_sbuf *b, const cfg_node *n) {
    char tmp[80];
    switch (n->type) {
    case CFG_NULL: sb_puts(b, "null"); break;
    case CFG_BOOL: sb_puts(b, n->b ? "true" : "false"); break;
    case CFG_INT:
        snprintf(tmp, sizeof tmp, "%" PRId64, n->i);
        sb_puts(b, tmp);
        break;
    case CFG_FLOAT:
        cfg_format_float(n->f, tmp, sizeof tmp);
        sb_puts(b, tmp);
        break;
    case CFG_STR: sb_puts(b, n->s); break;
    default: break;
    }
}

/* ---- typed getters ---------------------------------------------------------------------------- */

/* "string 'abc'", "float 2.5", "a list", ... for error messages. */
void describe(trm_sbuf *b, const cfg_node *n) {
    if (n->type == CFG_LIST || n->type == CFG_MAP) {
        sb_puts(b, type_with_article(n->type));
        return;
    }
    sb_puts(b, cfg_type_name(n->type));
    if (n->type == CFG_NULL) return;
    sb_putc(b, ' ');
    if (n->type == CFG_STR) sb_putc(b, '\'');
    scalar_text(b, n);
    if (n->type == CFG_STR) sb_putc(b, '\'');
}

int wrong_type(trm_err *e, const char *key, cfg_type want, const cfg_node *got) {
    trm_sbuf b = {0};
    describe(&b, got);
    trm_errf(e, "%s: expected %s, got %s", key, type_with_article(want), b.p);
    free(b.p);
    return -1;
}

static const cfg_node *get_or_err(const cfg_node *root, const char *key, trm_err *e) {
    const cfg_node *n = cfg_get(root, key);
    if (!n) trm_errf(e, "%s: missing config key", key);
    return n;
}

int cfg_get_int(const cfg_node *root, const char *key, int64_t *out, trm_err *e) {
    const cfg_node *n = get_or_err(root, key, e);
    if (!n) return -1;
    if (n->type != CFG_INT) return wrong_type(e, key, CFG_INT, n);
    *out = n->i;
    return 0;
}

int cfg_get_float(const cfg_node *root, const char *key, double *out, trm_err *e) {
    const cfg_node *n = get_or_err(root, key, e);
    if (!n) return -1;
    if (n->type == CFG_INT) {
        *out = (double)n->i;
        return 0;
    }
    if (n->type != CFG_FLOAT) return wrong_type(e, key, CFG_FLOAT, n);
    *out = n->f;
    return 0;
}

int cfg_get_bool(const cfg_node *root, const char *key, int *out, trm_err *e) {
    const cfg_node *n = get_or_err(root, key, e);
    if (!n) return -1;
    if (n->type != CFG_BOOL) return wrong_type(e, key, CFG_BOOL, n);
    *out = n->b;
    return 0;
}

int cfg_get_str(const cfg_node *root, const char *key, const char **out, int allow_null,
                trm_err *e) {
    const cfg_node *n = get_or_err(root, key, e);
    if (!n) return -1;
    if (n->type == CFG_NULL && allow_null) {
        *out = NULL;
        return 0;
    }
    if (n->type != CFG_STR) return wrong_type(e, key, CFG_STR, n);
    *out = n->s;
    return 0;
}

/* ---- coercion ---------------------------------------------------------------------------------- */

static int has_interp(const char *s) {
    for (const char *p = strstr(s, "${"); p; p = strstr(p + 1, "${"))
        if (p == s || p[-1] != '\\') return 1;
    return 0;
}

/* Converts v to the type of the existing value (OmegaConf's node validation);
 * text is the command-line text of a bare scalar, used when the target is a string. */
int check_type(const char *key, const cfg_node *old, cfg_node *v, const char *text, trm_err *e) {
    if (v->type == CFG_NULL || old->type == CFG_NULL) return 0;
    if (v->type == CFG_STR && has_interp(v->s)) return 0; /* checked once resolved */
    switch (old->type) {
    case CFG_INT:
        if (v->type == CFG_INT) return 0;
        if (v->type == CFG_FLOAT && v->f == floor(v->f) && fabs(v->f) < 9.2e18) {
            v->type = CFG_INT;
            v->i = (int64_t)v->f;
            return 0;
        }
        break;
    case CFG_FLOAT:
        if (v->type == CFG_FLOAT) return 0;
        if (v->type == CFG_INT) {
            v->type = CFG_FLOAT;
            v->f = (double)v->i;
            return 0;
        }
        break;
    case CFG_BOOL:
        if (v->type == CFG_BOOL) return 0;
        break;
    case CFG_STR:
        if (v->type == CFG_STR) return 0;
        /* `puzzle_emb_ndim: ${.hidden_size}` holds a number once resolved: a plain value
         * replacing an interpolation keeps its own type, as in OmegaConf */
        if (has_interp(old->s)) return 0;
        if (is_scalar(v)) {
            trm_sbuf b = {0};
            if (text) sb_puts(&b, text);
            else scalar_text(&b, v);
            v->type = CFG_STR;
            v->s = sb_take(&b);
            return 0;
        }
        break;
    case CFG_LIST:
    case CFG_MAP:
        if (v->type == old->type) return 0;
        break;
    default: return 0;
    }
    return wrong_type(e, key, old->type, v);
}

void cfg_coerce_floats(cfg_node *root, const char *const *keys) {
    for (int i = 0; keys && keys[i]; i++) {
        cfg_node *n = cfg_get(root, keys[i]);
        if (n && n->type == CFG_INT) {
            n->type = CFG_FLOAT;
            n->f = (double)n->i;
        }
    }
}
