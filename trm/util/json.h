/* json.h — a small JSON writer: appenders on a strbuf.h text buffer that insert the
 * separating commas themselves, so callers emit objects, arrays and JSON-lines records
 * without tracking state. Strings are escaped so that both strict JSON parsers and
 * libyaml (which reads our safetensors headers) get the exact original text back. */
#ifndef TRM_JSON_H
#define TRM_JSON_H
#include <stddef.h>
#include <stdint.h>

#include "strbuf.h"

/* The text is b.p, NUL-terminated once initialised; b.len bytes. */
typedef trm_sbuf json_buf;

void json_buf_init(json_buf *b);
void json_buf_free(json_buf *b);
/* Hands the text to the caller (free() it) and leaves b empty and reusable. */
char *json_buf_take(json_buf *b);
void json_buf_clear(json_buf *b);

/* Verbatim text, no separator: newlines between JSON-lines records, pre-built JSON. */
void json_raw(json_buf *b, const char *s);
void json_rawn(json_buf *b, const char *s, size_t n);

/* Values. A comma is inserted automatically when the buffer does not end in '{', '[',
 * ':', ',' or a newline (or is empty). */
void json_obj_begin(json_buf *b);
void json_obj_end(json_buf *b);
void json_arr_begin(json_buf *b);
void json_arr_end(json_buf *b);
void json_key(json_buf *b, const char *key); /* "key": */
void json_str(json_buf *b, const char *s);   /* NULL writes null */
void json_strn(json_buf *b, const char *s, size_t n);
void json_int(json_buf *b, int64_t v);
void json_uint(json_buf *b, uint64_t v);
void json_double(json_buf *b, double v); /* %.17g; NaN and ±inf become null */
void json_bool(json_buf *b, int v);
void json_null(json_buf *b);

/* key + value in one call, for flat records such as metrics. */
void json_kv_str(json_buf *b, const char *key, const char *v);
void json_kv_int(json_buf *b, const char *key, int64_t v);
void json_kv_double(json_buf *b, const char *key, double v);
void json_kv_bool(json_buf *b, const char *key, int v);

/* Appends the escaped body of s (no quotes, no separator). Valid UTF-8 passes through;
 * each byte of an invalid sequence becomes U+FFFD. Control characters, DEL, C1
 * controls, U+2028/U+2029 and U+FFFE/U+FFFF are written as \u escapes (YAML parsers
 * refuse or fold them when raw). */
void json_escape_into(json_buf *b, const char *s, size_t n);
/* The quoted, escaped form of s as a new string (free() it). */
char *json_quote(const char *s);

#endif
