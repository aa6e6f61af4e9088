/* config_emit.c — YAML output: block style for maps and for lists that hold maps, flow style
 * for lists of scalars, keys in their order, and strings quoted or escaped wherever the plain
 * text would read back as something else. */

#include "config_internal.h"

#include <stdlib.h>
#include <string.h>

static void sb_indent(trm_sbuf *b, int n) {
    for (int i = 0; i < n; i++) sb_putc(b, ' ');
}

/* Quoting is needed when the plain text would re-parse as another type (also for other
 * YAML 1.1 readers: yes/no/on/off), would be YAML syntax, or holds control characters. */
/* Characters that libyaml reads as line breaks (NEL, LS, PS) or drops (BOM) even inside
 * quotes: they get escapes. Returns the byte length of such a sequence at p, else 0. */
static int special_seq(const unsigned char *p, const char **esc) {
    if (p[0] == 0xc2 && p[1] == 0x85) return *esc = "\\N", 2;
    if (p[0] == 0xe2 && p[1] == 0x80 && p[2] == 0xa8) return *esc = "\\L", 3;
    if (p[0] == 0xe2 && p[1] == 0x80 && p[2] == 0xa9) return *esc = "\\P", 3;
    if (p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf) return *esc = "\\uFEFF", 3;
    return 0;
}

static int needs_escapes(const char *s) {
    const char *esc;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || special_seq(p, &esc)) return 1;
    return 0;
}

static int needs_quote(const char *s, int flow) {
    if (!*s || plain_type(s) != CFG_STR) return 1;
    static const char *yaml11_bools[] = {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
                                         "on", "On", "ON", "off", "Off", "OFF"};
    for (size_t i = 0; i < sizeof yaml11_bools / sizeof *yaml11_bools; i++)
        if (!strcmp(s, yaml11_bools[i])) return 1;
    if (strchr("-?:,[]{}#&*!|>'\"%@` \t", s[0])) return 1;
    size_t len = strlen(s);
    if (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == ':') return 1;
    if (strstr(s, ": ") || strstr(s, " #")) return 1;
    for (const unsigned char *p = (const unsigned char *)s; flow && *p; p++)
        if (strchr(",[]{}:#", *p)) return 1;
    return needs_escapes(s);
}

static void write_quoted(trm_sbuf *b, const char *s) {
    if (!needs_escapes(s)) {
        sb_putc(b, '\'');
        for (const char *p = s; *p; p++) {
            if (*p == '\'') sb_putc(b, '\'');
            sb_putc(b, *p);
        }
        sb_putc(b, '\'');
        return;
    }
    sb_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char tmp[8];
        const char *esc;
        int n = special_seq(p, &esc);
        if (n) {
            sb_puts(b, esc);
            p += n - 1;
        } else if (*p == '"' || *p == '\\') {
            sb_putc(b, '\\');
            sb_putc(b, (char)*p);
        } else if (*p == '\n') {
            sb_puts(b, "\\n");
        } else if (*p == '\t') {
            sb_puts(b, "\\t");
        } else if (*p < 0x20 || *p == 0x7f) {
            snprintf(tmp, sizeof tmp, "\\x%02x", *p);
            sb_puts(b, tmp);
        } else {
            sb_putc(b, (char)*p);
        }
    }
    sb_putc(b, '"');
}

static void write_str(trm_sbuf *b, const char *s, int flow) {
    if (needs_quote(s, flow))
        write_quoted(b, s);
    else
        sb_puts(b, s);
}

static void write_scalar(trm_sbuf *b, const cfg_node *n, int flow) {
    if (n->type == CFG_STR)
        write_str(b, n->s, flow);
    else
        scalar_text(b, n);
}

/* Lists print in flow style when they hold only scalars, empty maps and such lists. */
static int flowable(const cfg_node *n) {
    if (n->type == CFG_MAP) return n->n == 0;
    if (n->type != CFG_LIST) return 1;
    for (int i = 0; i < n->n; i++)
        if (!flowable(n->items[i])) return 0;
    return 1;
}

static void write_flow(trm_sbuf *b, const cfg_node *n) {
    if (n->type == CFG_MAP) {
        sb_puts(b, "{}");
    } else if (n->type == CFG_LIST) {
        sb_putc(b, '[');
        for (int i = 0; i < n->n; i++) {
            if (i) sb_puts(b, ", ");
            write_flow(b, n->items[i]);
        }
        sb_putc(b, ']');
    } else {
        write_scalar(b, n, 1);
    }
}

static void write_map_block(trm_sbuf *b, const cfg_node *n, int indent, int inline_first);
static void write_list_block(trm_sbuf *b, const cfg_node *n, int indent);

/* A value in block output, after "key:" (lead ':'), after "-" (lead '-') or alone (lead 0).
 * A non-empty map or a list that cannot flow takes the lines below, at `indent` (a map after
 * "-" starts on the dash's line); anything else is written in flow style on this line. */
static void write_block_value(trm_sbuf *b, const cfg_node *c, int indent, char lead) {
    if (c->type == CFG_MAP && c->n) {
        if (lead) sb_putc(b, lead == '-' ? ' ' : '\n');
        write_map_block(b, c, indent, lead == '-');
    } else if (c->type == CFG_LIST && !flowable(c)) {
        if (lead) sb_putc(b, '\n');
        write_list_block(b, c, indent);
    } else {
        if (lead) sb_putc(b, ' ');
        write_flow(b, c);
        sb_putc(b, '\n');
    }
}

/* `inline_first`: the first key continues a "- " already written. */
static void write_map_block(trm_sbuf *b, const cfg_node *n, int indent, int inline_first) {
    for (int i = 0; i < n->n; i++) {
        const cfg_node *c = n->items[i];
        if (i || !inline_first) sb_indent(b, indent);
        write_str(b, c->key ? c->key : "", 0);
        sb_putc(b, ':');
        write_block_value(b, c, indent + 2, ':');
    }
}

static void write_list_block(trm_sbuf *b, const cfg_node *n, int indent) {
    for (int i = 0; i < n->n; i++) {
        sb_indent(b, indent);
        sb_putc(b, '-');
        write_block_value(b, n->items[i], indent + 2, '-');
    }
}

char *cfg_to_yaml(const cfg_node *n) {
    trm_sbuf b = {0};
    write_block_value(&b, n, 0, 0);
    return sb_take(&b);
}

void cfg_write_yaml(const cfg_node *n, FILE *f) {
    char *s = cfg_to_yaml(n);
    fputs(s, f);
    free(s);
}
