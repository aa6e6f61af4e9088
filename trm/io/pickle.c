/* pickle.c — a state-dict pickle reader and writer (see pickle.h). The reader is a pickle
 * machine with a fixed vocabulary: it knows five callables (OrderedDict, torch's tensor and
 * parameter rebuilders, the typed storages) and builds plain descriptions instead of calling
 * anything. Every object lives in one arena freed at the end, so shared and cyclic references
 * through the memo cannot cause double frees. A hostile pickle costs time and memory linear in
 * its size and bounded besides: objects, nesting, MARKs, the memo, and the tensors and names
 * that shared dicts could multiply when the result is flattened all have limits, each refused
 * with a message that names it. */
#include "pickle.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define PK_MAX_NEST 64             /* nested dicts followed when naming tensors */
#define PK_MAX_DEPTH 128           /* containers inside containers */
#define PK_MAX_MARKS 128           /* MARKs open at once */
#define PK_MAX_STACK (1 << 17)     /* values on the stack (pickle batches SETITEMS by 1000) */
#define PK_MAX_OBJECTS (1 << 21)   /* ~25 per tensor in torch.save's pickles: 80,000 tensors */
#define PK_MAX_TENSORS (1 << 20)   /* names made when flattening (shared dicts multiply them) */
#define PK_MAX_NAME 4096           /* bytes of one flattened name */

typedef enum { O_NONE, O_BOOL, O_INT, O_FLOAT, O_STR, O_BYTES, O_TUPLE, O_LIST, O_DICT, O_GLOBAL, O_STORAGE, O_TENSOR } okind;

typedef enum { G_ORDERED_DICT, G_REBUILD_TENSOR, G_REBUILD_PARAM, G_REBUILD_PARAM_STATE, G_STORAGE } gkind;

typedef struct obj obj;
struct obj {
    okind k;
    int64_t i;          /* int, bool; global: its gkind */
    double f;
    char *s;            /* str, bytes; storage: key */
    size_t slen;
    obj **items;        /* tuple, list; dict: key, value, key, value, ... */
    int n, cap;
    int depth;          /* containers nested in this one, at most (PK_MAX_DEPTH) */
    st_dtype dt;        /* storage class / storage */
    int64_t numel;      /* storage */
    pk_tensor *view;    /* tensor (storage fields filled, name NULL) */
};

static const struct {
    const char *cls;
    st_dtype dt;
} storages[] = {
    {"FloatStorage", ST_F32}, {"DoubleStorage", ST_F64}, {"HalfStorage", ST_F16}, {"BFloat16Storage", ST_BF16},
    {"LongStorage", ST_I64},  {"IntStorage", ST_I32},    {"ShortStorage", ST_I16}, {"CharStorage", ST_I8},
    {"ByteStorage", ST_U8},   {"BoolStorage", ST_BOOL},
};
#define NSTORAGES (sizeof storages / sizeof storages[0])

const char *pk_storage_class(st_dtype dt) {
    for (size_t i = 0; i < NSTORAGES; i++)
        if (storages[i].dt == dt) return storages[i].cls;
    return NULL;
}

/* Names of every pickle opcode, so a refused one is named. */
static const char *opname(unsigned char op) {
    switch (op) {
    case '(': return "MARK"; case '.': return "STOP"; case '0': return "POP"; case '1': return "POP_MARK";
    case '2': return "DUP"; case 'F': return "FLOAT"; case 'I': return "INT"; case 'J': return "BININT";
    case 'K': return "BININT1"; case 'L': return "LONG"; case 'M': return "BININT2"; case 'N': return "NONE";
    case 'P': return "PERSID"; case 'Q': return "BINPERSID"; case 'R': return "REDUCE"; case 'S': return "STRING";
    case 'T': return "BINSTRING"; case 'U': return "SHORT_BINSTRING"; case 'V': return "UNICODE";
    case 'X': return "BINUNICODE"; case 'a': return "APPEND"; case 'b': return "BUILD"; case 'c': return "GLOBAL";
    case 'd': return "DICT"; case '}': return "EMPTY_DICT"; case 'e': return "APPENDS"; case 'g': return "GET";
    case 'h': return "BINGET"; case 'i': return "INST"; case 'j': return "LONG_BINGET"; case 'l': return "LIST";
    case ']': return "EMPTY_LIST"; case 'o': return "OBJ"; case 'p': return "PUT"; case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT"; case 's': return "SETITEM"; case 't': return "TUPLE"; case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS"; case 'G': return "BINFLOAT"; case 0x80: return "PROTO"; case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1"; case 0x83: return "EXT2"; case 0x84: return "EXT4"; case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2"; case 0x87: return "TUPLE3"; case 0x88: return "NEWTRUE"; case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1"; case 0x8b: return "LONG4"; case 'B': return "BINBYTES"; case 'C': return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE"; case 0x8d: return "BINUNICODE8"; case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET"; case 0x90: return "ADDITEMS"; case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX"; case 0x93: return "STACK_GLOBAL"; case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME"; case 0x96: return "BYTEARRAY8"; case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return NULL;
    }
}

typedef struct {
    const unsigned char *start, *p, *end;
    const char *what;
    trm_err *e;
    obj **stack;
    int sp, scap;
    int *marks;
    int nm, mcap;
    obj **memo;
    size_t memo_cap, memo_len;
    obj **all;
    size_t nall, acap;
} pk;

static int fail(pk *m, const char *fmt, const char *a, const char *b) {
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    return trm_errf(m->e, "%s: pickle at byte %td: %s", m->what, m->p - m->start, msg);
}

static obj *new_obj(pk *m, okind k) {
    if (m->nall == m->acap) {
        m->acap = m->acap ? 2 * m->acap : 256;
        m->all = xrealloc(m->all, m->acap * sizeof *m->all);
    }
    obj *o = xcalloc(1, sizeof *o);
    o->k = k;
    m->all[m->nall++] = o;
    return o;
}

/* Puts it into the container c; fails when that nests containers deeper than PK_MAX_DEPTH (a
 * list appended to itself counts one level more each time). */
static int obj_push_item(pk *m, obj *c, obj *it) {
    if (it->depth + 1 > c->depth) c->depth = it->depth + 1;
    if (c->depth > PK_MAX_DEPTH) {
        char lim[16];
        snprintf(lim, sizeof lim, "%d", PK_MAX_DEPTH);
        return fail(m, "containers nest deeper than %s levels (the limit)", lim, NULL);
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 4;
        c->items = xrealloc(c->items, (size_t)c->cap * sizeof *c->items);
    }
    c->items[c->n++] = it;
    return 0;
}

static void push(pk *m, obj *o) {
    if (m->sp == m->scap) {
        m->scap = m->scap ? 2 * m->scap : 64;
        m->stack = xrealloc(m->stack, (size_t)m->scap * sizeof *m->stack);
    }
    m->stack[m->sp++] = o;
}

static int base_sp(const pk *m) { return m->nm ? m->marks[m->nm - 1] : 0; }

static obj *pop(pk *m) {
    if (m->sp <= base_sp(m)) {
        fail(m, "stack underflow (damaged pickle)", NULL, NULL);
        return NULL;
    }
    return m->stack[--m->sp];
}

static obj *top(pk *m) {
    if (m->sp <= base_sp(m)) {
        fail(m, "stack underflow (damaged pickle)", NULL, NULL);
        return NULL;
    }
    return m->stack[m->sp - 1];
}

/* Pops to the last MARK: the items are m->stack[*from .. m->sp). */
static int pop_mark(pk *m, int *from) {
    if (!m->nm) return fail(m, "no MARK on the stack (damaged pickle)", NULL, NULL);
    *from = m->marks[--m->nm];
    return 0;
}

static int need(pk *m, size_t n) {
    if ((size_t)(m->end - m->p) < n) return fail(m, "the data ends inside an opcode's argument (truncated file?)", NULL, NULL);
    return 0;
}

static uint64_t rd_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int push_int(pk *m, int64_t v) {
    obj *o = new_obj(m, O_INT);
    o->i = v;
    push(m, o);
    return 0;
}

static int push_str(pk *m, okind k, size_t len) {
    if (need(m, len)) return -1;
    obj *o = new_obj(m, k);
    o->s = xstrndup((const char *)m->p, len);
    o->slen = len;
    m->p += len;
    push(m, o);
    return 0;
}

static int memo_put(pk *m, size_t idx) {
    obj *o = top(m);
    if (!o) return -1;
    /* a real pickle numbers its memo from 0 upwards, one entry per object it keeps, so the
     * memo never needs more entries than objects were made (with room for torch's parameters,
     * which this reader makes no object of) */
    if (idx > 2 * m->nall + 64) {
        char b[32], lim[32];
        snprintf(b, sizeof b, "%zu", idx);
        snprintf(lim, sizeof lim, "%zu", 2 * m->nall + 64);
        return fail(m, "memo index %s is beyond the %s the objects made so far allow (damaged pickle)", b, lim);
    }
    if (idx >= m->memo_cap) {
        size_t cap = m->memo_cap ? m->memo_cap : 64;
        while (cap <= idx) cap *= 2;
        m->memo = xrealloc(m->memo, cap * sizeof *m->memo);
        memset(m->memo + m->memo_cap, 0, (cap - m->memo_cap) * sizeof *m->memo);
        m->memo_cap = cap;
    }
    if (!m->memo[idx]) m->memo_len++;
    m->memo[idx] = o;
    return 0;
}

static int memo_get(pk *m, size_t idx) {
    if (idx >= m->memo_cap || !m->memo[idx]) {
        char b[32];
        snprintf(b, sizeof b, "%zu", idx);
        return fail(m, "memo entry %s was never stored (damaged pickle)", b, NULL);
    }
    push(m, m->memo[idx]);
    return 0;
}

static int resolve_global(pk *m, const char *module, const char *name) {
    obj *g = new_obj(m, O_GLOBAL);
    if (!strcmp(module, "collections") && !strcmp(name, "OrderedDict")) g->i = G_ORDERED_DICT;
    else if (!strcmp(module, "torch._utils") && !strcmp(name, "_rebuild_tensor_v2")) g->i = G_REBUILD_TENSOR;
    else if (!strcmp(module, "torch._utils") && !strcmp(name, "_rebuild_parameter")) g->i = G_REBUILD_PARAM;
    else if (!strcmp(module, "torch._utils") && !strcmp(name, "_rebuild_parameter_with_state")) g->i = G_REBUILD_PARAM_STATE;
    else {
        size_t i = 0;
        if (!strcmp(module, "torch"))
            while (i < NSTORAGES && strcmp(name, storages[i].cls)) i++;
        if (strcmp(module, "torch") || i == NSTORAGES) {
            char full[300];
            snprintf(full, sizeof full, "%.140s.%.140s", module, name);
            return fail(m, "class %s is refused: a dict of tensors does not need it, and nothing in the file is executed "
                           "(only OrderedDict, torch._utils._rebuild_tensor_v2/_rebuild_parameter and float, bfloat16, "
                           "float16, integer and bool storages are read)", full, NULL);
        }
        g->i = G_STORAGE;
        g->dt = storages[i].dt;
    }
    push(m, g);
    return 0;
}

static int op_global(pk *m) {
    const unsigned char *nl1 = memchr(m->p, '\n', (size_t)(m->end - m->p));
    const unsigned char *nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)(m->end - nl1 - 1)) : NULL;
    if (!nl2) return fail(m, "GLOBAL without its two text lines (truncated file?)", NULL, NULL);
    char *mod = xstrndup((const char *)m->p, (size_t)(nl1 - m->p));
    char *name = xstrndup((const char *)nl1 + 1, (size_t)(nl2 - nl1 - 1));
    m->p = nl2 + 1;
    int rc = resolve_global(m, mod, name);
    free(mod);
    free(name);
    return rc;
}

static int op_stack_global(pk *m) {
    obj *name = pop(m), *mod = name ? pop(m) : NULL;
    if (!mod) return -1;
    if (mod->k != O_STR || name->k != O_STR) return fail(m, "STACK_GLOBAL needs two strings", NULL, NULL);
    return resolve_global(m, mod->s, name->s);
}

static int make_tuple(pk *m, int from) {
    obj *t = new_obj(m, O_TUPLE);
    for (int i = from; i < m->sp; i++)
        if (obj_push_item(m, t, m->stack[i])) return -1;
    m->sp = from;
    push(m, t);
    return 0;
}

static int op_tupleN(pk *m, int n) {
    if (m->sp - base_sp(m) < n) return fail(m, "stack underflow (damaged pickle)", NULL, NULL);
    return make_tuple(m, m->sp - n);
}

static int is_int(const obj *o) { return o && (o->k == O_INT || o->k == O_BOOL); }

static int storage_key_ok(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
    return 1;
}

/* ('storage', <storage class>, key, location, numel) */
static int op_binpersid(pk *m) {
    obj *pid = pop(m);
    if (!pid) return -1;
    if (pid->k != O_TUPLE || pid->n != 5 || pid->items[0]->k != O_STR || strcmp(pid->items[0]->s, "storage"))
        return fail(m, "a persistent id that is not torch's ('storage', type, key, location, numel)", NULL, NULL);
    obj *cls = pid->items[1], *key = pid->items[2], *loc = pid->items[3], *numel = pid->items[4];
    if (cls->k != O_GLOBAL || cls->i != G_STORAGE) return fail(m, "a storage whose type is not a storage class", NULL, NULL);
    if (key->k != O_STR || !storage_key_ok(key->s)) return fail(m, "a storage key that is not a plain name", NULL, NULL);
    if (loc->k != O_STR) return fail(m, "a storage location that is not a string", NULL, NULL);
    if (!is_int(numel) || numel->i < 0) return fail(m, "a storage size that is not a non-negative integer", NULL, NULL);
    obj *s = new_obj(m, O_STORAGE);
    s->dt = cls->dt;
    s->s = xstrdup(key->s);
    s->numel = numel->i;
    push(m, s);
    return 0;
}

static int int_tuple(const obj *t, int64_t *out, int *n) {
    if (!t || t->k != O_TUPLE || t->n > PK_MAX_DIMS) return -1;
    for (int i = 0; i < t->n; i++) {
        if (!is_int(t->items[i]) || t->items[i]->i < 0) return -1;
        out[i] = t->items[i]->i;
    }
    *n = t->n;
    return 0;
}

/* _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]) */
static int rebuild_tensor(pk *m, const obj *args) {
    if (args->n < 6 || args->n > 7 || args->items[0]->k != O_STORAGE || !is_int(args->items[1]) ||
        args->items[1]->i < 0)
        return fail(m, "_rebuild_tensor_v2 with arguments other than (storage, offset, size, stride, ...)", NULL, NULL);
    obj *st = args->items[0];
    obj *t = new_obj(m, O_TENSOR);
    pk_tensor *v = t->view = xcalloc(1, sizeof *t->view);
    int nd2 = -1;
    if (int_tuple(args->items[2], v->shape, &v->ndim) || int_tuple(args->items[3], v->stride, &nd2) || nd2 != v->ndim)
        return fail(m, "a tensor whose size or stride is not a tuple of at most 8 non-negative integers of one length",
                    NULL, NULL);
    v->dtype = st->dt;
    v->storage = st->s; /* owned by the storage object; copied when the result is built */
    v->storage_numel = st->numel;
    v->offset = args->items[1]->i;
    /* the last element the view reaches must lie in the storage */
    int64_t last = v->offset, numel = 1;
    for (int d = 0; d < v->ndim; d++) {
        if (v->shape[d] == 0) numel = 0;
        else if (numel && v->shape[d] > INT64_MAX / numel) return fail(m, "a tensor size overflows", NULL, NULL);
        else numel *= v->shape[d];
    }
    if (numel) {
        for (int d = 0; d < v->ndim; d++) {
            int64_t span = v->shape[d] - 1;
            if (span && v->stride[d] > (INT64_MAX - last) / span) return fail(m, "a tensor's strides overflow", NULL, NULL);
            last += span * v->stride[d];
        }
        if (last >= st->numel) {
            char b[96];
            snprintf(b, sizeof b, "%" PRId64 " of a storage of %" PRId64, last + 1, st->numel);
            return fail(m, "a tensor view reaches element %s (damaged file)", b, NULL);
        }
    }
    push(m, t);
    return 0;
}

static int op_reduce(pk *m) {
    obj *args = pop(m), *fn = args ? pop(m) : NULL;
    if (!fn) return -1;
    if (fn->k != O_GLOBAL || args->k != O_TUPLE) return fail(m, "REDUCE of something that is not a known class", NULL, NULL);
    switch ((gkind)fn->i) {
    case G_ORDERED_DICT:
        if (args->n) return fail(m, "OrderedDict built from arguments (only an empty one filled by SETITEMS is read)", NULL, NULL);
        push(m, new_obj(m, O_DICT));
        return 0;
    case G_REBUILD_TENSOR: return rebuild_tensor(m, args);
    case G_REBUILD_PARAM:
    case G_REBUILD_PARAM_STATE:
        if (args->n < 1 || args->items[0]->k != O_TENSOR) return fail(m, "_rebuild_parameter of something that is not a tensor", NULL, NULL);
        push(m, args->items[0]);
        return 0;
    case G_STORAGE: break;
    }
    return fail(m, "a storage class called directly (torch.save never does that)", NULL, NULL);
}

static int op_setitems(pk *m, int from) {
    if ((m->sp - from) % 2) return fail(m, "SETITEMS with an odd number of items", NULL, NULL);
    obj *d = from > base_sp(m) ? m->stack[from - 1] : NULL;
    if (!d || d->k != O_DICT) return fail(m, "SETITEM(S) on something that is not a dict", NULL, NULL);
    for (int i = from; i < m->sp; i++)
        if (obj_push_item(m, d, m->stack[i])) return -1;
    m->sp = from;
    return 0;
}

static int op_appends(pk *m, int from) {
    obj *l = from > base_sp(m) ? m->stack[from - 1] : NULL;
    if (!l || l->k != O_LIST) return fail(m, "APPEND(S) on something that is not a list", NULL, NULL);
    for (int i = from; i < m->sp; i++)
        if (obj_push_item(m, l, m->stack[i])) return -1;
    m->sp = from;
    return 0;
}

static int op_build(pk *m) {
    obj *state = pop(m), *target = state ? top(m) : NULL;
    if (!target) return -1;
    /* the only BUILD in a state_dict: OrderedDict's _metadata attribute (module versions) */
    if (target->k != O_DICT) return fail(m, "BUILD (setting an object's state) on something that is not a dict", NULL, NULL);
    return 0;
}

static int op_long1(pk *m) {
    if (need(m, 1)) return -1;
    int n = m->p[0];
    m->p++;
    if (need(m, (size_t)n)) return -1;
    if (n > 8) return fail(m, "an integer wider than 64 bits", NULL, NULL);
    uint64_t v = n ? rd_le(m->p, n) : 0;
    if (n && n < 8 && (m->p[n - 1] & 0x80)) v |= ~(uint64_t)0 << (8 * n); /* sign-extend */
    m->p += n;
    int64_t s;
    memcpy(&s, &v, sizeof s);
    return push_int(m, s);
}

static int op_binfloat(pk *m) {
    if (need(m, 8)) return -1;
    uint64_t b = 0;
    for (int i = 0; i < 8; i++) b = b << 8 | m->p[i]; /* big-endian */
    m->p += 8;
    obj *o = new_obj(m, O_FLOAT);
    memcpy(&o->f, &b, sizeof o->f);
    push(m, o);
    return 0;
}

static int str_op(pk *m, okind k, int lenbytes) {
    if (need(m, (size_t)lenbytes)) return -1;
    uint64_t len = rd_le(m->p, lenbytes);
    m->p += lenbytes;
    if (len > (uint64_t)(m->end - m->p)) return fail(m, "a string longer than the rest of the data (truncated file?)", NULL, NULL);
    return push_str(m, k, (size_t)len);
}

/* One opcode; 1 when STOP was read. */
static int step(pk *m) {
    if (need(m, 1)) return fail(m, "the pickle ends without STOP (truncated file?)", NULL, NULL);
    if (m->nall >= PK_MAX_OBJECTS || m->sp >= PK_MAX_STACK) { /* an opcode adds at most one of each */
        char lim[16];
        int objs = m->nall >= PK_MAX_OBJECTS;
        snprintf(lim, sizeof lim, "%d", objs ? PK_MAX_OBJECTS : PK_MAX_STACK);
        return fail(m, objs ? "more than %s objects (the limit)" : "more than %s values on the stack (the limit)", lim,
                    NULL);
    }
    unsigned char op = *m->p++;
    int from = 0;
    obj *a;
    switch (op) {
    case 0x80: /* PROTO */
        if (need(m, 1)) return -1;
        if (*m->p > 5) {
            char v[8];
            snprintf(v, sizeof v, "%u", (unsigned)*m->p);
            return fail(m, "pickle protocol %s is newer than 5, the newest this reader knows", v, NULL);
        }
        m->p++;
        return 0;
    case 0x95: /* FRAME: a length prefix only */
        if (need(m, 8)) return -1;
        m->p += 8;
        return 0;
    case '.': return 1;
    case '(':
        if (m->nm == PK_MAX_MARKS) {
            char lim[16];
            snprintf(lim, sizeof lim, "%d", PK_MAX_MARKS);
            return fail(m, "more than %s MARKs open at once (the limit)", lim, NULL);
        }
        if (m->nm == m->mcap) {
            m->mcap = m->mcap ? 2 * m->mcap : 16;
            m->marks = xrealloc(m->marks, (size_t)m->mcap * sizeof *m->marks);
        }
        m->marks[m->nm++] = m->sp;
        return 0;
    case '0': return pop(m) ? 0 : -1;
    case '1': return pop_mark(m, &from) ? -1 : (m->sp = from, 0);
    case '2': return (a = top(m)) ? (push(m, a), 0) : -1;
    case 'N': push(m, new_obj(m, O_NONE)); return 0;
    case 0x88:
    case 0x89:
        a = new_obj(m, O_BOOL);
        a->i = op == 0x88;
        push(m, a);
        return 0;
    case 'J':
        if (need(m, 4)) return -1;
        {
            uint32_t u = (uint32_t)rd_le(m->p, 4);
            int32_t s;
            memcpy(&s, &u, sizeof s);
            m->p += 4;
            return push_int(m, s);
        }
    case 'K':
        if (need(m, 1)) return -1;
        m->p++;
        return push_int(m, m->p[-1]);
    case 'M':
        if (need(m, 2)) return -1;
        m->p += 2;
        return push_int(m, (int64_t)rd_le(m->p - 2, 2));
    case 0x8a: return op_long1(m);
    case 'G': return op_binfloat(m);
    case 'X': return str_op(m, O_STR, 4);
    case 0x8c: return str_op(m, O_STR, 1);
    case 0x8d: return str_op(m, O_STR, 8);
    case 'T': return str_op(m, O_STR, 4);
    case 'U': return str_op(m, O_STR, 1);
    case 'B': return str_op(m, O_BYTES, 4);
    case 'C': return str_op(m, O_BYTES, 1);
    case 0x8e: return str_op(m, O_BYTES, 8);
    case ')': push(m, new_obj(m, O_TUPLE)); return 0;
    case 't': return pop_mark(m, &from) ? -1 : make_tuple(m, from);
    case 0x85: return op_tupleN(m, 1);
    case 0x86: return op_tupleN(m, 2);
    case 0x87: return op_tupleN(m, 3);
    case ']': push(m, new_obj(m, O_LIST)); return 0;
    case '}': push(m, new_obj(m, O_DICT)); return 0;
    case 'l':
    case 'd':
        if (pop_mark(m, &from)) return -1;
        if (op == 'd' && (m->sp - from) % 2) return fail(m, "DICT with an odd number of items", NULL, NULL);
        a = new_obj(m, op == 'l' ? O_LIST : O_DICT);
        for (int i = from; i < m->sp; i++)
            if (obj_push_item(m, a, m->stack[i])) return -1;
        m->sp = from;
        push(m, a);
        return 0;
    case 'a': return m->sp - base_sp(m) < 2 ? fail(m, "stack underflow (damaged pickle)", NULL, NULL) : op_appends(m, m->sp - 1);
    case 'e': return pop_mark(m, &from) ? -1 : op_appends(m, from);
    case 's': return m->sp - base_sp(m) < 3 ? fail(m, "stack underflow (damaged pickle)", NULL, NULL) : op_setitems(m, m->sp - 2);
    case 'u': return pop_mark(m, &from) ? -1 : op_setitems(m, from);
    case 'q':
        if (need(m, 1)) return -1;
        m->p++;
        return memo_put(m, m->p[-1]);
    case 'r':
        if (need(m, 4)) return -1;
        m->p += 4;
        return memo_put(m, (size_t)rd_le(m->p - 4, 4));
    case 0x94: return memo_put(m, m->memo_len);
    case 'h':
        if (need(m, 1)) return -1;
        m->p++;
        return memo_get(m, m->p[-1]);
    case 'j':
        if (need(m, 4)) return -1;
        m->p += 4;
        return memo_get(m, (size_t)rd_le(m->p - 4, 4));
    case 'c': return op_global(m);
    case 0x93: return op_stack_global(m);
    case 'Q': return op_binpersid(m);
    case 'R': return op_reduce(m);
    case 'b': return op_build(m);
    default: break;
    }
    const char *nm = opname(op);
    char hex[8];
    snprintf(hex, sizeof hex, "0x%02x", op);
    m->p--;
    if (nm) return fail(m, "opcode %s (%s) is not in the subset torch.save writes for tensors; refused", nm, hex);
    return fail(m, "unknown opcode %s%s (not a pickle, or a damaged one)", hex, NULL);
}

static void add_tensor(pk_tensors *out, const char *name, const pk_tensor *v) {
    if ((out->n & (out->n - 1)) == 0) /* capacity: the next power of two */
        out->t = xrealloc(out->t, (size_t)(out->n ? 2 * out->n : 1) * sizeof *out->t);
    pk_tensor *t = &out->t[out->n++];
    *t = *v;
    t->name = xstrdup(name);
    t->storage = xstrdup(v->storage);
}

/* Names every tensor of d, nested dicts joined with '.'. A dict reached twice through the memo
 * is named twice, so the names made are counted: shared dicts could multiply them beyond any
 * file size. */
static int flatten(pk *m, const obj *d, const char *prefix, int depth, size_t *made, pk_tensors *out) {
    if (depth > PK_MAX_NEST) return trm_errf(m->e, "%s: dicts nested more than %d deep", m->what, PK_MAX_NEST);
    for (int i = 0; i + 1 < d->n; i += 2) {
        const obj *k = d->items[i], *v = d->items[i + 1];
        if (v->k != O_TENSOR && v->k != O_DICT) continue; /* an epoch count, a string: not weights */
        if (k->k != O_STR || strlen(k->s) != k->slen)
            return trm_errf(m->e, "%s: a dict key that is not a string (entry %d)", m->what, i / 2);
        if (++*made > PK_MAX_TENSORS)
            return trm_errf(m->e, "%s: the dicts name more than %d tensors and dicts (the limit; dicts shared through "
                                  "the memo?)", m->what, PK_MAX_TENSORS);
        if (strlen(prefix) + 1 + k->slen > PK_MAX_NAME)
            return trm_errf(m->e, "%s: a tensor name longer than %d bytes (the limit)", m->what, PK_MAX_NAME);
        char *name = *prefix ? xasprintf("%s.%s", prefix, k->s) : xstrdup(k->s);
        int rc = 0;
        if (v->k == O_DICT) rc = flatten(m, v, name, depth + 1, made, out);
        else add_tensor(out, name, v->view);
        free(name);
        if (rc) return -1;
    }
    return 0;
}

static int cmp_tensor_names(const void *a, const void *b) {
    return strcmp((*(const pk_tensor *const *)a)->name, (*(const pk_tensor *const *)b)->name);
}

static int check_unique(pk *m, const pk_tensors *out) {
    const pk_tensor **s = xmalloc(((size_t)out->n + 1) * sizeof *s);
    for (int i = 0; i < out->n; i++) s[i] = &out->t[i];
    qsort(s, (size_t)out->n, sizeof *s, cmp_tensor_names);
    int rc = 0;
    for (int i = 1; i < out->n && !rc; i++)
        if (!strcmp(s[i - 1]->name, s[i]->name)) rc = trm_errf(m->e, "%s: tensor '%s' appears twice", m->what, s[i]->name);
    free(s);
    return rc;
}

int pk_read_tensors(const unsigned char *data, size_t n, const char *what, pk_tensors *out, trm_err *e) {
    memset(out, 0, sizeof *out);
    pk m = {.start = data, .p = data, .end = data + n, .what = what, .e = e};
    int rc;
    while ((rc = step(&m)) == 0) {
    }
    obj *result = NULL;
    if (rc == 1) {
        result = m.sp > 0 ? m.stack[m.sp - 1] : NULL;
        if (!result) rc = fail(&m, "STOP with nothing on the stack", NULL, NULL);
        else if (result->k != O_DICT)
            rc = trm_errf(e, "%s: the pickle holds a %s, not a dict of tensors (a state_dict)", what,
                          result->k == O_TENSOR ? "single tensor" : result->k == O_LIST ? "list" : "value of another kind");
        else {
            size_t made = 0;
            rc = flatten(&m, result, "", 0, &made, out);
        }
        if (!rc && out->n == 0) rc = trm_errf(e, "%s: the dict holds no tensors", what);
        if (!rc) rc = check_unique(&m, out);
    }
    for (size_t i = 0; i < m.nall; i++) {
        free(m.all[i]->s);
        free(m.all[i]->items);
        free(m.all[i]->view);
        free(m.all[i]);
    }
    free(m.all);
    free(m.stack);
    free(m.marks);
    free(m.memo);
    if (rc) pk_tensors_free(out), trm_err_oneline(e); /* messages quote the pickle's strings */
    return rc ? -1 : 0;
}

void pk_tensors_free(pk_tensors *t) {
    for (int i = 0; i < t->n; i++) {
        free(t->t[i].name);
        free(t->t[i].storage);
    }
    free(t->t);
    memset(t, 0, sizeof *t);
}

/* ---- writer ----------------------------------------------------------------------------- */

typedef trm_sbuf wbuf; /* bytes, in util's growable buffer */

static void w_put(wbuf *b, const void *s, size_t n) { sb_putn(b, s, n); }

static void w_op(wbuf *b, unsigned char op) { w_put(b, &op, 1); }

static void w_str(wbuf *b, const char *s) {
    size_t n = strlen(s);
    unsigned char h[5] = {'X', (unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16), (unsigned char)(n >> 24)};
    w_put(b, h, 5);
    w_put(b, s, n);
}

static void w_int(wbuf *b, int64_t v) {
    if (v >= 0 && v < 256) {
        unsigned char h[2] = {'K', (unsigned char)v};
        w_put(b, h, 2);
    } else if (v >= 0 && v < 65536) {
        unsigned char h[3] = {'M', (unsigned char)v, (unsigned char)(v >> 8)};
        w_put(b, h, 3);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        uint32_t u = (uint32_t)(int32_t)v;
        unsigned char h[5] = {'J', (unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16), (unsigned char)(u >> 24)};
        w_put(b, h, 5);
    } else { /* LONG1: minimal little-endian two's complement, as pickle writes it */
        uint64_t u;
        memcpy(&u, &v, sizeof u);
        unsigned char h[10] = {0x8a, 8};
        for (int i = 0; i < 8; i++) h[2 + i] = (unsigned char)(u >> (8 * i));
        int nb = 8;
        while (nb > 1 && ((h[1 + nb] == 0 && !(h[nb] & 0x80)) || (h[1 + nb] == 0xff && (h[nb] & 0x80)))) nb--;
        h[1] = (unsigned char)nb;
        w_put(b, h, 2 + (size_t)nb);
    }
}

static void w_global(wbuf *b, const char *module, const char *name) {
    w_op(b, 'c');
    w_put(b, module, strlen(module));
    w_op(b, '\n');
    w_put(b, name, strlen(name));
    w_op(b, '\n');
}

static void w_int_tuple(wbuf *b, const int64_t *v, int n) {
    if (n == 0) {
        w_op(b, ')');
        return;
    }
    if (n > 3) w_op(b, '(');
    for (int i = 0; i < n; i++) w_int(b, v[i]);
    w_op(b, n == 1 ? 0x85 : n == 2 ? 0x86 : n == 3 ? 0x87 : 't');
}

static void w_tensor(wbuf *b, const pk_wtensor *t) {
    int64_t stride[PK_MAX_DIMS], numel = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        stride[d] = numel;
        numel *= t->shape[d];
    }
    w_global(b, "torch._utils", "_rebuild_tensor_v2");
    w_op(b, '(');
    w_op(b, '(');
    w_str(b, "storage");
    w_global(b, "torch", pk_storage_class(t->dtype));
    w_str(b, t->storage);
    w_str(b, "cpu");
    w_int(b, numel);
    w_op(b, 't');
    w_op(b, 'Q');
    w_int(b, 0);
    w_int_tuple(b, t->shape, t->ndim);
    w_int_tuple(b, stride, t->ndim);
    w_op(b, 0x89); /* requires_grad False */
    w_global(b, "collections", "OrderedDict"); /* backward hooks: an empty OrderedDict */
    w_op(b, ')');
    w_op(b, 'R');
    w_op(b, 't');
    w_op(b, 'R');
}

unsigned char *pk_write_tensors(const pk_wtensor *t, int n, int ordered, size_t *len) {
    wbuf b = {0};
    unsigned char proto[2] = {0x80, 2};
    w_put(&b, proto, 2);
    if (ordered) {
        w_global(&b, "collections", "OrderedDict");
        w_op(&b, ')');
        w_op(&b, 'R');
    } else {
        w_op(&b, '}');
    }
    for (int i = 0; i < n; i++) {
        if (i % 1000 == 0) w_op(&b, '('); /* pickle's own batching of SETITEMS */
        w_str(&b, t[i].name);
        w_tensor(&b, &t[i]);
        if (i % 1000 == 999 || i == n - 1) w_op(&b, 'u');
    }
    w_op(&b, '.');
    *len = b.len;
    return (unsigned char *)b.p;
}
