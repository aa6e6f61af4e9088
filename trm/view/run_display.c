/* run_display.c — the status lines of run_display.h. Formatting is kept apart from output so
 * that the fitting rules can be tested at any width. */
#include "run_display.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

void trm_format_duration(double s, char *out, size_t n) {
    if (!(s >= 0) || s > 1e9) {
        snprintf(out, n, "?");
        return;
    }
    long t = lround(s);
    if (t < 60) snprintf(out, n, "%lds", t);
    else if (t < 3600) snprintf(out, n, "%ldm%02lds", t / 60, t % 60);
    else if (t < 86400) snprintf(out, n, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
    else snprintf(out, n, "%ldd%02ldh", t / 86400, (t % 86400) / 3600);
}

static void format_rate(double r, const char *unit, char *out, size_t n) {
    if (r >= 1e5) snprintf(out, n, "%.0fk %s", r / 1e3, unit);
    else if (r >= 1e4) snprintf(out, n, "%.1fk %s", r / 1e3, unit);
    else if (r >= 100) snprintf(out, n, "%.0f %s", r, unit);
    else if (r >= 10) snprintf(out, n, "%.1f %s", r, unit);
    else snprintf(out, n, "%.2f %s", r, unit);
}

/* A line is a sequence of fields in display order; each has a priority (0 = kept longest)
 * and the bar is the one field whose width stretches. */
enum { MAX_FIELDS = 16, FIELD_LEN = 48, BAR_MIN = 10, BAR_MAX = 30 };

typedef struct {
    char text[FIELD_LEN];
    int prio, bar;
} field;

typedef struct {
    field f[MAX_FIELDS];
    int n;
    double fraction; /* of the bar that is filled */
} line_spec;

/* A field of the given priority (0 stays; higher numbers are dropped first), printf-style. */
static void TRM_PRINTF(3, 4) addf(line_spec *l, int prio, const char *fmt, ...) {
    if (l->n == MAX_FIELDS) return;
    field *f = &l->f[l->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->text, sizeof f->text, fmt, ap);
    va_end(ap);
    f->prio = prio, f->bar = 0;
}

static void add_bar(line_spec *l, int prio, double fraction) {
    addf(l, prio, "%s", "");
    l->f[l->n - 1].bar = 1;
    l->fraction = fraction < 0 ? 0 : fraction > 1 ? 1 : fraction;
}

static size_t width_of(const line_spec *l, const int *keep, int barw) {
    size_t w = 0;
    int k = 0;
    for (int i = 0; i < l->n; i++) {
        if (!keep[i]) continue;
        w += (k++ ? 1 : 0) + (l->f[i].bar ? (size_t)barw : strlen(l->f[i].text));
    }
    return w;
}

/* Drops the lowest-priority fields until the line fits width-1 columns. The bar's width
 * follows the terminal's alone, so that it stays put while fields come and go. */
static size_t render(const line_spec *l, int width, char *out, size_t n) {
    int keep[MAX_FIELDS];
    for (int i = 0; i < l->n; i++) keep[i] = 1;
    size_t room = width > 1 ? (size_t)width - 1 : 0;
    int barw = (width - 60) / 2;
    barw = barw < BAR_MIN ? BAR_MIN : barw > BAR_MAX ? BAR_MAX : barw;
    for (;;) {
        if (width_of(l, keep, barw) <= room) break;
        int worst = -1;
        for (int i = 0; i < l->n; i++)
            if (keep[i] && (worst < 0 || l->f[i].prio >= l->f[worst].prio)) worst = i;
        if (worst < 0 || l->f[worst].prio == 0) break; /* the first field always stays */
        keep[worst] = 0;
    }
    size_t o = 0;
    int k = 0;
    for (int i = 0; i < l->n && o + 1 < n; i++) {
        if (!keep[i]) continue;
        if (k++) out[o++] = ' ';
        if (l->f[i].bar) {
            int inner = barw - 2, filled = (int)floor(l->fraction * inner + 1e-9);
            for (int j = 0; j < barw && o + 1 < n; j++)
                out[o++] = j == 0 ? '[' : j == barw - 1 ? ']' : j - 1 < filled ? '#' : '.';
        } else {
            for (const char *c = l->f[i].text; *c && o + 1 < n; c++) out[o++] = *c;
        }
    }
    if (o > room) o = room; /* a first field longer than the terminal */
    out[o] = 0;
    return o;
}

size_t trm_train_status_format(const trm_train_status *s, int width, char *out, size_t n) {
    line_spec l = {.n = 0};
    char t[FIELD_LEN], d[32];
    double frac = s->total_steps > 0 ? (double)s->step / (double)s->total_steps : 0;
    addf(&l, 0, "step %lld/%lld", (long long)s->step, (long long)s->total_steps);
    add_bar(&l, 5, frac);
    addf(&l, 7, "%.0f%%", floor(100 * frac));
    if (s->steps_per_s > 0) {
        format_rate(s->steps_per_s, "it/s", t, sizeof t);
        addf(&l, 3, "%s", t);
    }
    if (s->examples_per_s > 0) {
        format_rate(s->examples_per_s, "ex/s", t, sizeof t);
        addf(&l, 4, "%s", t);
    }
    if (s->eta_s >= 0) {
        trm_format_duration(s->eta_s, d, sizeof d);
        addf(&l, 1, "ETA %s", d);
    }
    if (s->have_metrics) {
        addf(&l, 2, "loss %.4g", s->lm_loss);
        addf(&l, 6, "exact %.3f", s->exact_accuracy);
        addf(&l, 8, "q_halt_loss %.3g", s->q_halt_loss);
        addf(&l, 9, "acc %.3f", s->accuracy);
        addf(&l, 10, "ACT steps %.2f", s->act_steps);
        addf(&l, 11, "lr %.3g", s->lr);
    }
    return render(&l, width, out, n);
}

size_t trm_eval_status_format(int64_t step, const char *set, int64_t done, int64_t total, double eta_s, int width,
                              char *out, size_t n) {
    line_spec l = {.n = 0};
    char d[32];
    double frac = total > 0 ? (double)done / (double)total : 0;
    if (step >= 0) addf(&l, 0, "eval step %lld", (long long)step);
    else addf(&l, 0, "eval");
    if (set && *set) addf(&l, 4, "[%.32s]", set);
    addf(&l, 1, "%lld/%lld", (long long)done, (long long)total);
    add_bar(&l, 3, frac);
    addf(&l, 5, "%.0f%%", floor(100 * frac));
    if (eta_s >= 0) {
        trm_format_duration(eta_s, d, sizeof d);
        addf(&l, 2, "ETA %s", d);
    }
    return render(&l, width, out, n);
}

void trm_display_init(trm_display *d, FILE *out, int enabled, int tty) {
    *d = (trm_display){.out = out, .enabled = enabled, .tty = enabled && tty, .interval = 1.0,
                       .plain_interval = 30.0};
    /* TRM_PROGRESS_INTERVAL=S redraws every S seconds (a slow remote terminal wants fewer) */
    const char *env = getenv("TRM_PROGRESS_INTERVAL");
    double v = env ? strtod(env, NULL) : 0;
    if (v >= 0.05 && v <= 3600) d->interval = v;
    /* a terminal shows the status at once; a log's first progress line comes after a full
     * interval, so short phases add no lines */
    d->last = d->tty ? -1e300 : trm_now_seconds();
}

int trm_display_due(const trm_display *d) {
    return d->enabled && trm_now_seconds() - d->last >= (d->tty ? d->interval : d->plain_interval);
}

int trm_display_width(const trm_display *d) { return d->tty ? trm_term_columns(d->out) : 120; }

void trm_display_progress(trm_display *d, const char *line, int plain) {
    if (!d->enabled || (!d->tty && !plain)) return;
    d->last = trm_now_seconds();
    size_t len = strlen(line);
    if (!d->tty) {
        fprintf(d->out, "%s\n", line);
    } else {
        /* pad over the tail of a longer previous line */
        int pad = d->shown > len ? (int)(d->shown - len) : 0;
        fprintf(d->out, "\r%s%*s", line, pad, "");
        if (pad) fprintf(d->out, "\r%s", line);
        d->shown = len;
    }
    fflush(d->out);
}

void trm_display_clear(trm_display *d) {
    if (!d->enabled) return;
    if (d->tty && d->shown) {
        fprintf(d->out, "\r%*s\r", (int)d->shown, "");
        fflush(d->out);
    }
    d->shown = 0;
    /* a terminal shows the status again at once; a log gets its next progress line only after
     * a full interval without other output */
    d->last = d->tty ? -1e300 : trm_now_seconds();
}

void trm_print_fields(FILE *f, int width, const char *head, const char *const *fields, int n) {
    size_t col = strlen(head);
    fputs(head, f);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(fields[i]);
        if (col + 2 + len > (size_t)width && col > 2) {
            fputc('\n', f);
            col = 0;
        }
        fprintf(f, "  %s", fields[i]);
        col += 2 + len;
    }
    fputc('\n', f);
}

void trm_print_wrapped_indent(FILE *f, int width, int cont, const char *text) {
    size_t lead = strspn(text, " "), col = lead;
    fprintf(f, "%*s", (int)lead, "");
    const char *p = text + lead;
    size_t before = 0; /* the spaces between the last word and this one, kept within a line */
    while (*p) {
        size_t word = strcspn(p, " "), gap = 0;
        while (p[word + gap] == ' ') gap++;
        if (before && col + before + word > (size_t)width && col > (size_t)cont) {
            fprintf(f, "\n%*s", cont, "");
            col = (size_t)cont;
        } else if (before) {
            fprintf(f, "%*s", (int)before, "");
            col += before;
        }
        fwrite(p, 1, word, f);
        col += word;
        p += word + gap;
        before = gap;
    }
    fputc('\n', f);
}

void trm_print_wrapped(FILE *f, int width, const char *text) { trm_print_wrapped_indent(f, width, 2, text); }
