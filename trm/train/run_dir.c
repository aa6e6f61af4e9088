/* run_dir.c — see run_dir.h. The lock is a flock on DIR/.lock holding the pid, so the kernel
 * releases it when the run ends in any way, kill -9 included; the file itself stays (removing
 * it would let two processes lock two different files under one name). */
#include "run_dir.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view/view.h"

#define LOCK_NAME ".lock"

/* The files that show a run lives here: its config, its metrics, its checkpoints. The first
 * few are named in *what (free it), for the message. */
static int holds_run(const char *dir, char **what) {
    int n;
    char **names = trm_list_dir(dir, &n);
    trm_sbuf b = {0};
    int found = 0;
    for (int i = 0; i < n; i++) {
        const char *f = names[i];
        size_t len = strlen(f);
        int ckpt = !strncmp(f, "step_", 5) && len > 17 && !strcmp(f + len - 12, ".safetensors");
        if (!ckpt && strcmp(f, "config.yaml") && strcmp(f, "metrics.jsonl")) continue;
        char *path = trm_path_join(dir, f);
        int is_dir = trm_is_dir(path); /* a directory in a checkpoint's way is not a run */
        free(path);
        if (is_dir) continue;
        if (found < 3) sb_printf(&b, "%s%s", found ? ", " : "", f);
        found++;
    }
    if (found > 3) sb_printf(&b, ", ...");
    trm_free_names(names, n);
    *what = sb_take(&b);
    return found > 0;
}

static int lock_dir(const char *dir, int *fd, trm_err *e) {
    char *path = trm_path_join(dir, LOCK_NAME);
    long holder;
    int rc = trm_lock_file(path, fd, &holder, e);
    free(path);
    if (rc == 1) {
        if (holder > 0)
            return trm_errf(e, "%s is in use by another trm pretrain (pid %ld); wait for it to end, or give this "
                               "run another +run_name or checkpoint_path", dir, holder);
        return trm_errf(e, "%s is in use by another trm pretrain; wait for it to end, or give this run another "
                           "+run_name or checkpoint_path", dir);
    }
    return rc;
}

/* DIR.prev-N for the first N that is free. */
static char *aside_name(const char *dir) {
    for (int i = 1;; i++) {
        char *p = xasprintf("%s.prev-%d", dir, i);
        if (!trm_file_exists(p) && !trm_is_dir(p)) return p;
        free(p);
    }
}

/* Moves the run dir holds to DIR.prev-N, under its own lock so that a run still writing
 * there is not moved from under it. */
static int move_aside(const char *dir, trm_err *e) {
    int fd;
    if (lock_dir(dir, &fd, e)) return -1;
    char *to = aside_name(dir);
    int rc = trm_rename(dir, to, e);
    trm_unlock_file(fd);
    if (rc == 0) printf("overwrite=true: moved the earlier run in %s to %s\n", dir, to);
    free(to);
    return rc;
}

int trm_run_dir_claim(trm_run_dir *rd, const char *dir, int resuming, int overwrite, trm_err *e) {
    rd->dir = xstrdup(dir);
    rd->lock_fd = -1;
    char *what = NULL;
    if (overwrite && resuming)
        return trm_errf(e, "overwrite=true starts a new run and resume continues one: give one of them");
    if (overwrite && trm_is_dir(dir) && holds_run(dir, &what) && move_aside(dir, e)) {
        free(what);
        return -1;
    }
    free(what);
    what = NULL;
    if (trm_mkdirs(dir, e) || lock_dir(dir, &rd->lock_fd, e)) return -1;
    if (!resuming && holds_run(dir, &what)) {
        char *aside = aside_name(dir);
        trm_errf(e, "%s already holds a run (%s)\n"
                    "  continue it:        resume=auto\n"
                    "  start this one elsewhere: +run_name=NAME or checkpoint_path=DIR\n"
                    "  move the old one to %s: overwrite=true",
                 dir, what, aside);
        free(aside);
        free(what);
        return -1;
    }
    free(what);
    return 0;
}

/* The step of a metrics.jsonl record ({"step":N,...}); -1 when the line is not one. */
static int64_t record_step(const char *line) {
    const char *s = strstr(line, "\"step\":");
    if (!s) return -1;
    char *end;
    long long v = strtoll(s + 7, &end, 10);
    return end == s + 7 ? -1 : (int64_t)v;
}

/* Keeps the complete records up to `step`; a last line cut short by a kill is dropped. */
static int cut_metrics(const char *dir, int64_t step, trm_err *e) {
    char *path = trm_path_join(dir, "metrics.jsonl");
    int rc = 0;
    if (trm_file_exists(path)) {
        size_t len;
        char *text = trm_read_file(path, &len, e);
        if (!text) rc = -1;
        trm_sbuf kept = {0};
        size_t dropped = 0;
        for (char *line = text, *nl; rc == 0 && line < text + len; line = nl + 1) {
            nl = memchr(line, '\n', (size_t)(text + len - line));
            if (!nl) { /* unfinished */
                dropped++;
                break;
            }
            *nl = 0;
            int64_t s = record_step(line);
            if (s >= 0 && s <= step) {
                sb_puts(&kept, line);
                sb_putc(&kept, '\n');
            } else {
                dropped++;
            }
        }
        if (rc == 0 && dropped) rc = trm_write_file_atomic(path, kept.p ? kept.p : "", kept.len, e);
        sb_free(&kept);
        free(text);
    }
    free(path);
    return rc;
}

/* What trm_write_file_atomic leaves when killed between writing and renaming: NAME.tmp.PID. */
static int remove_temp_files(const char *dir, trm_err *e) {
    int n, rc = 0;
    char **names = trm_list_dir(dir, &n);
    for (int i = 0; i < n && rc == 0; i++) {
        if (!strstr(names[i], ".tmp.")) continue;
        char *p = trm_path_join(dir, names[i]);
        rc = trm_remove_tree(p, e);
        free(p);
    }
    trm_free_names(names, n);
    return rc;
}

int trm_run_dir_tidy(const trm_run_dir *rd, int64_t step, trm_err *e) {
    if (cut_metrics(rd->dir, step, e) || trm_tfevents_cut(rd->dir, step, e) || remove_temp_files(rd->dir, e))
        return -1;
    return 0;
}

int trm_run_dir_logged(const trm_run_dir *rd, int64_t step, const char *kind) {
    char *path = trm_path_join(rd->dir, "metrics.jsonl");
    size_t len;
    trm_err ignore;
    char *text = trm_read_file(path, &len, &ignore);
    free(path);
    if (!text) return 0;
    char *want = xasprintf("\"kind\":\"%s\"", kind);
    int found = 0;
    for (char *line = strtok(text, "\n"); line && !found; line = strtok(NULL, "\n"))
        found = record_step(line) == step && strstr(line, want) != NULL;
    free(want);
    free(text);
    return found;
}

void trm_run_dir_release(trm_run_dir *rd) {
    trm_unlock_file(rd->lock_fd);
    rd->lock_fd = -1;
    free(rd->dir);
    rd->dir = NULL;
}
