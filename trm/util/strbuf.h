/* strbuf.h — a growable text buffer with printf-style appends and XML/HTML escaping, for the
 * documents trm writes as text (SVG plots, report.html, YAML) and under json.h's writer. */
#ifndef TRM_STRBUF_H
#define TRM_STRBUF_H
#include <stddef.h>

#include "base.h"

typedef struct {
    char *p; /* NUL-terminated once anything was appended; NULL before */
    size_t len, cap;
} trm_sbuf;

void sb_puts(trm_sbuf *b, const char *s);
void sb_putn(trm_sbuf *b, const char *s, size_t n);
void sb_putc(trm_sbuf *b, char c);
void sb_printf(trm_sbuf *b, const char *fmt, ...) TRM_PRINTF(2, 3);
/* Text with & < > " ' escaped, so it is safe in element content and in quoted attributes;
 * bytes that are not valid UTF-8 and control characters other than tab and newline become
 * U+FFFD, which XML and HTML parsers accept. */
void sb_escape(trm_sbuf *b, const char *s);
/* Hands the text to the caller ("" when empty; free() it) and leaves b empty. */
char *sb_take(trm_sbuf *b);
void sb_free(trm_sbuf *b);

#endif
