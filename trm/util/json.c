/* json.c — the JSON writer behind json.h: buffer growth, automatic commas, string
 * escaping with UTF-8 validation, and number formatting. */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

void json_buf_init(json_buf *b) {
    *b = (json_buf){0};
    sb_putn(b, "", 0); /* the empty text, NUL-terminated */
}

void json_buf_free(json_buf *b) { sb_free(b); }

char *json_buf_take(json_buf *b) {
    char *s = sb_take(b);
    json_buf_init(b);
    return s;
}

void json_buf_clear(json_buf *b) {
    b->len = 0;
    if (b->p) b->p[0] = 0;
}

void json_rawn(json_buf *b, const char *s, size_t n) { sb_putn(b, s, n); }

void json_raw(json_buf *b, const char *s) { json_rawn(b, s, strlen(s)); }

static void put(json_buf *b, char c) { json_rawn(b, &c, 1); }

/* A value directly after another value (in an object, array or record) needs a comma. */
static void sep(json_buf *b) {
    if (!b->p || b->len == 0) return;
    char last = b->p[b->len - 1];
    if (last != '{' && last != '[' && last != ':' && last != ',' && last != '\n') put(b, ',');
}

void json_obj_begin(json_buf *b) {
    sep(b);
    put(b, '{');
}

void json_obj_end(json_buf *b) { put(b, '}'); }

void json_arr_begin(json_buf *b) {
    sep(b);
    put(b, '[');
}

void json_arr_end(json_buf *b) { put(b, ']'); }

/* Length of the valid UTF-8 sequence at s (n bytes left) and its code point; 0 if invalid. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char c = s[0];
    size_t len;
    uint32_t v, lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        len = 2, v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        unsigned char t = s[i];
        if (t < (i == 1 ? lo : 0x80) || t > (i == 1 ? hi : 0xBF)) return 0;
        v = (v << 6) | (t & 0x3F);
    }
    *cp = v;
    return len;
}

static int needs_u_escape(uint32_t cp) {
    return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || cp == 0xFFFE ||
           cp == 0xFFFF;
}

static void escape_cp(json_buf *b, uint32_t cp) {
    switch (cp) {
    case '"': json_raw(b, "\\\""); return;
    case '\\': json_raw(b, "\\\\"); return;
    case '\n': json_raw(b, "\\n"); return;
    case '\r': json_raw(b, "\\r"); return;
    case '\t': json_raw(b, "\\t"); return;
    case '\b': json_raw(b, "\\b"); return;
    case '\f': json_raw(b, "\\f"); return;
    default: break;
    }
    char tmp[16];
    snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)cp);
    json_raw(b, tmp);
}

void json_escape_into(json_buf *b, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len = utf8_decode(p + i, n - i, &cp);
        if (len == 0) {
            json_raw(b, "\xEF\xBF\xBD"); /* U+FFFD: JSON text must be valid UTF-8 */
            i++;
        } else if (cp == '"' || cp == '\\' || needs_u_escape(cp)) {
            escape_cp(b, cp);
            i += len;
        } else {
            size_t j = i + len; /* copy the run of plain characters at once */
            while (j < n && p[j] >= 0x20 && p[j] < 0x7F && p[j] != '"' && p[j] != '\\')
                j++;
            json_rawn(b, s + i, j - i);
            i = j;
        }
    }
}

void json_strn(json_buf *b, const char *s, size_t n) {
    sep(b);
    if (!s) {
        json_raw(b, "null");
        return;
    }
    put(b, '"');
    json_escape_into(b, s, n);
    put(b, '"');
}

void json_str(json_buf *b, const char *s) { json_strn(b, s, s ? strlen(s) : 0); }

void json_key(json_buf *b, const char *key) {
    json_str(b, key);
    put(b, ':');
}

void json_int(json_buf *b, int64_t v) {
    char tmp[32];
    sep(b);
    snprintf(tmp, sizeof tmp, "%" PRId64, v);
    json_raw(b, tmp);
}

void json_uint(json_buf *b, uint64_t v) {
    char tmp[32];
    sep(b);
    snprintf(tmp, sizeof tmp, "%" PRIu64, v);
    json_raw(b, tmp);
}

void json_double(json_buf *b, double v) {
    char tmp[40];
    sep(b);
    if (!isfinite(v)) {
        json_raw(b, "null");
        return;
    }
    snprintf(tmp, sizeof tmp, "%.17g", v);
    json_raw(b, tmp);
}

void json_bool(json_buf *b, int v) {
    sep(b);
    json_raw(b, v ? "true" : "false");
}

void json_null(json_buf *b) {
    sep(b);
    json_raw(b, "null");
}

void json_kv_str(json_buf *b, const char *key, const char *v) {
    json_key(b, key);
    json_str(b, v);
}

void json_kv_int(json_buf *b, const char *key, int64_t v) {
    json_key(b, key);
    json_int(b, v);
}

void json_kv_double(json_buf *b, const char *key, double v) {
    json_key(b, key);
    json_double(b, v);
}

void json_kv_bool(json_buf *b, const char *key, int v) {
    json_key(b, key);
    json_bool(b, v);
}

char *json_quote(const char *s) {
    json_buf b;
    json_buf_init(&b);
    json_str(&b, s);
    return b.p;
}
