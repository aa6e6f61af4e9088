/* strbuf.c — the text buffer of strbuf.h. */
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(trm_sbuf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

void sb_putn(trm_sbuf *b, const char *s, size_t n) {
    reserve(b, n);
    if (n) memcpy(b->p + b->len, s, n); /* s may be NULL when n is 0 (an empty tensor's data) */
    b->len += n;
    b->p[b->len] = 0;
}

void sb_puts(trm_sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }
void sb_putc(trm_sbuf *b, char c) { sb_putn(b, &c, 1); }

void sb_printf(trm_sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        sb_putn(b, small, (size_t)n);
        return;
    }
    reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence at s (1..4), 0 when it is not one. */
static size_t utf8_len(const unsigned char *s) {
    if (s[0] < 0x80) return 1;
    size_t n = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))) return 0; /* overlong, surrogate */
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))) return 0;
    return n;
}

void sb_escape(trm_sbuf *b, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        switch (*p) {
        case '&': sb_puts(b, "&amp;"); p++; continue;
        case '<': sb_puts(b, "&lt;"); p++; continue;
        case '>': sb_puts(b, "&gt;"); p++; continue;
        case '"': sb_puts(b, "&quot;"); p++; continue;
        case '\'': sb_puts(b, "&#39;"); p++; continue;
        default: break;
        }
        if ((*p < 0x20 && *p != '\t' && *p != '\n') || *p == 0x7F) {
            sb_puts(b, "\xEF\xBF\xBD");
            p++;
            continue;
        }
        size_t n = utf8_len(p);
        if (n == 0) {
            sb_puts(b, "\xEF\xBF\xBD");
            p++;
        } else {
            sb_putn(b, (const char *)p, n);
            p += n;
        }
    }
}

char *sb_take(trm_sbuf *b) {
    char *s = b->p ? b->p : xstrdup("");
    memset(b, 0, sizeof *b);
    return s;
}

void sb_free(trm_sbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
