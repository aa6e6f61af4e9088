/* hub.c — the Hub's dataset files in huggingface_hub's cache (see hub.h). The steps follow
 * hf_hub_download: a HEAD request on the resolve URL (relative redirects followed, an absolute
 * one is the CDN to download from) gives the commit (X-Repo-Commit), the blob's name
 * (X-Linked-Etag, else ETag) and size (X-Linked-Size, else Content-Length); a snapshot file
 * already there is used; else the blob is fetched and linked; connection errors fall back to
 * what the cache holds. curl runs as a child process with no shell; the token reaches it on
 * its stdin, never on its command line. */
#define _POSIX_C_SOURCE 200809L
#include "hub.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define HUB_ENDPOINT "https://huggingface.co"
#define HUB_ATTEMPTS 5 /* downloads resumed after a lost connection, while each one gets further */

typedef struct {
    const char *repo;
    char *endpoint, *cache, *storage; /* storage: cache/datasets--owner--name */
    const char *token;                /* HF_TOKEN, NULL when unset */
    char *curl;                       /* NULL when curl is not on PATH */
    int offline, progress;
} hub;

typedef struct {
    int status;
    char *commit, *etag, *location; /* location: an absolute redirect (a CDN), else NULL */
    int64_t size;                   /* -1 when the Hub does not say */
} head_info;

/* ---- environment, names and paths ----------------------------------------------------------- */

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* A leading ~ is the home directory, as Python's expanduser makes it. */
static char *expand_user(const char *p) {
    const char *home = env("HOME");
    if (p[0] == '~' && (p[1] == '/' || !p[1]) && home) return xasprintf("%s%s", home, p + 1);
    return xstrdup(p);
}

/* huggingface_hub's constants: HF_HUB_CACHE, else HF_HOME/hub, else
 * $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. */
static char *cache_dir(void) {
    const char *c = env("HF_HUB_CACHE") ? env("HF_HUB_CACHE") : env("HUGGINGFACE_HUB_CACHE");
    if (c) return expand_user(c);
    char *home;
    if (env("HF_HOME")) {
        home = expand_user(env("HF_HOME"));
    } else {
        char *xdg = expand_user(env("XDG_CACHE_HOME") ? env("XDG_CACHE_HOME") : "~/.cache");
        home = trm_path_join(xdg, "huggingface");
        free(xdg);
    }
    char *hubdir = trm_path_join(home, "hub");
    free(home);
    return hubdir;
}

static int env_true(const char *name) {
    const char *v = env(name);
    return v && (!strcasecmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcasecmp(v, "true"));
}

/* One part of a repo id as huggingface_hub accepts it: letters, digits, - _ . ; no -- or .. ;
 * not starting or ending with - or . (which also keeps it one directory name). */
static int valid_part(const char *s, size_t n) {
    if (n == 0 || n > 96 || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)s[i]) && !strchr("-_.", s[i])) return 0;
        if (i + 1 < n && (s[i] == '-' || s[i] == '.') && s[i + 1] == s[i]) return 0;
    }
    return 1;
}

static int valid_repo(const char *r) {
    const char *slash = strchr(r, '/');
    return slash && !strchr(slash + 1, '/') && valid_part(r, (size_t)(slash - r)) &&
           valid_part(slash + 1, strlen(slash + 1));
}

static int is_commit(const char *s) {
    size_t n = 0;
    while (s[n] && isxdigit((unsigned char)s[n]) && !isupper((unsigned char)s[n])) n++;
    return n == 40 && !s[n];
}

/* An etag becomes a file name in blobs/: only a plain name is accepted. */
static int valid_etag(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 128 || s[0] == '.') return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("-_.", s[i])) return 0;
    return 1;
}

/* {endpoint}/datasets/{repo}/resolve/{revision}/{file}, the revision quoted as a whole. */
static char *resolve_url(const hub *h, const char *revision, const char *file) {
    trm_sbuf b = {0};
    sb_printf(&b, "%s/datasets/%s/resolve/", h->endpoint, h->repo);
    for (const char *c = revision; *c; c++)
        if (isalnum((unsigned char)*c) || strchr("-_.~", *c)) sb_putc(&b, *c);
        else sb_printf(&b, "%%%02X", (unsigned char)*c);
    sb_printf(&b, "/%s", file);
    return sb_take(&b);
}

/* How messages name a file: "sudoku-extreme/train.csv". */
static char *label_of(const hub *h, const char *file) { return xasprintf("%s/%s", strchr(h->repo, '/') + 1, file); }

static char *snapshot_path(const hub *h, const char *commit, const char *file) {
    return xasprintf("%s/snapshots/%s/%s", h->storage, commit, file);
}

static int is_file(const char *path) { /* following a snapshot's symlink */
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int64_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

static int hub_init(hub *h, const char *repo, int progress, trm_err *e) {
    memset(h, 0, sizeof *h);
    if (!valid_repo(repo))
        return trm_errf(e, "--repo %s: expected a dataset id OWNER/NAME (letters, digits, - _ .)", repo);
    h->repo = repo;
    h->progress = progress;
    h->endpoint = xstrdup(env("HF_ENDPOINT") ? env("HF_ENDPOINT") : HUB_ENDPOINT);
    for (size_t n = strlen(h->endpoint); n > 0 && h->endpoint[n - 1] == '/'; n--) h->endpoint[n - 1] = 0;
    h->cache = cache_dir();
    const char *slash = strchr(repo, '/');
    h->storage = xasprintf("%s/datasets--%.*s--%s", h->cache, (int)(slash - repo), repo, slash + 1);
    h->token = env("HF_TOKEN");
    for (const char *c = h->token; c && *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) return trm_errf(e, "HF_TOKEN holds a control character");
    h->offline = env_true("HF_HUB_OFFLINE");
    h->curl = trm_which("curl");
    return 0;
}

static void hub_free(hub *h) {
    free(h->endpoint);
    free(h->cache);
    free(h->storage);
    free(h->curl);
}

static void head_free(head_info *hi) {
    free(hi->commit);
    free(hi->etag);
    free(hi->location);
    memset(hi, 0, sizeof *hi);
}

/* ---- curl ----------------------------------------------------------------------------------- */

/* Runs curl with the options every request takes, then args (NULL-terminated). With auth the
 * token goes in as a config line on stdin (-K -), so no process list shows it. Returns curl's
 * exit status, or -1 with e set. */
static int run_curl(const hub *h, const char *const *args, int auth, trm_sbuf *out, trm_sbuf *err,
                    void (*tick)(void *), void *ctx, trm_err *e) {
    const char *argv[40];
    int n = 0;
    const char *common[] = {h->curl, "--silent", "--show-error", "--user-agent", "trm/" TRM_VERSION,
                            "--connect-timeout", "10"};
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++) argv[n++] = common[i];
    trm_sbuf input = {0};
    if (auth && h->token) {
        argv[n++] = "--config", argv[n++] = "-";
        sb_puts(&input, "header = \"Authorization: Bearer ");
        for (const char *c = h->token; *c; c++) {
            if (*c == '"' || *c == '\\') sb_putc(&input, '\\');
            sb_putc(&input, *c);
        }
        sb_puts(&input, "\"\n");
    }
    while (*args && n < 39) argv[n++] = *args++;
    argv[n] = NULL;
    trm_run_opts o = {.input = input.p, .out = out, .err = err, .tick = tick, .ctx = ctx, .tick_s = 0.25};
    int rc = trm_run_program((char *const *)argv, &o, e);
    sb_free(&input);
    return rc;
}

/* curl's own message ("curl: (7) Failed to connect ..."), its first line. */
static const char *curl_says(trm_sbuf *err) {
    if (!err->p) return "no message";
    char *nl = strchr(err->p, '\n');
    if (nl) *nl = 0;
    return err->p;
}

/* Exit statuses that mean the Hub could not be reached: then the cache is used, as
 * huggingface_hub does on a ConnectionError or Timeout. */
static int unreachable(int rc) { return rc == 5 || rc == 6 || rc == 7 || rc == 28 || rc == 52 || rc == 56; }

/* Exit statuses after which a download is worth resuming at once. */
static int interrupted(int rc) {
    return rc == 18 || rc == 28 || rc == 52 || rc == 55 || rc == 56 || rc == 16 || rc == 92;
}

/* ---- HEAD: what the Hub says about a file ------------------------------------------------ */

static char *header_value(const char *line, const char *name) {
    size_t n = strlen(name);
    if (strncasecmp(line, name, n) || line[n] != ':') return NULL;
    const char *v = line + n + 1, *end = v + strlen(v);
    while (*v == ' ' || *v == '\t') v++;
    while (end > v && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t')) end--;
    return xstrndup(v, (size_t)(end - v));
}

static void set_str(char **dst, char *v) {
    if (!v) return;
    free(*dst);
    *dst = v;
}

/* The headers of the last response in curl --head's output (a proxy's CONNECT answer or an
 * interim 1xx comes before it). */
static void parse_head(char *text, head_info *hi) {
    char *linked_etag = NULL, *etag = NULL, *linked_size = NULL, *length = NULL;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "HTTP/", 5)) {
            head_free(hi);
            free(linked_etag), free(etag), free(linked_size), free(length);
            linked_etag = etag = linked_size = length = NULL;
            const char *sp = strchr(line, ' ');
            hi->status = sp ? atoi(sp + 1) : 0;
            continue;
        }
        set_str(&hi->commit, header_value(line, "X-Repo-Commit"));
        set_str(&linked_etag, header_value(line, "X-Linked-Etag"));
        set_str(&etag, header_value(line, "ETag"));
        set_str(&linked_size, header_value(line, "X-Linked-Size"));
        set_str(&length, header_value(line, "Content-Length"));
        set_str(&hi->location, header_value(line, "Location"));
    }
    char *et = linked_etag ? linked_etag : etag;
    if (et) { /* huggingface_hub's _normalize_etag: no weak prefix, no quotes */
        const char *s = !strncmp(et, "W/", 2) ? et + 2 : et;
        size_t n = strlen(s);
        if (n >= 2 && s[0] == '"' && s[n - 1] == '"') s++, n -= 2;
        hi->etag = xstrndup(s, n);
    }
    const char *sz = linked_size ? linked_size : length;
    char *end;
    hi->size = sz ? strtoll(sz, &end, 10) : -1;
    if (sz && (*end || hi->size < 0)) hi->size = -1;
    free(linked_etag), free(etag), free(linked_size), free(length);
}

/* The scheme and host of a URL: "http://h:p" of "http://h:p/a/b". */
static char *origin(const char *url) {
    const char *s = strstr(url, "://");
    const char *slash = s ? strchr(s + 3, '/') : NULL;
    return slash ? xstrndup(url, (size_t)(slash - url)) : xstrdup(url);
}

/* HEAD on *url, following relative redirects (a renamed repo) as huggingface_hub does; *url
 * becomes the last one asked. Returns curl's status (hi filled when 0), or -1 with e set. */
static int head(const hub *h, char **url, head_info *hi, trm_sbuf *err, trm_err *e) {
    for (int hop = 0; hop < 5; hop++) {
        trm_sbuf out = {0};
        const char *args[] = {"--head", "--header", "Accept-Encoding: identity", "--max-time", "30", "--url", *url,
                              NULL};
        err->len = 0;
        int rc = run_curl(h, args, 1, &out, err, NULL, NULL, e);
        memset(hi, 0, sizeof *hi);
        if (rc == 0 && out.p) parse_head(out.p, hi);
        sb_free(&out);
        if (rc != 0) return rc;
        if (hi->status < 300 || hi->status > 399 || !hi->location || hi->location[0] != '/') return 0;
        char *o = origin(*url), *next = xasprintf("%s%s", o, hi->location);
        free(o), free(*url);
        *url = next;
        head_free(hi);
    }
    return trm_errf(e, "%s: too many redirects", *url);
}

/* ---- the download ---------------------------------------------------------------------------- */

typedef struct {
    const char *label, *path;
    int64_t total;
    double t0, last;
    int tty, enabled;
    size_t width;
} dl_line;

static void fmt_bytes(char *b, size_t n, int64_t v) {
    if (v >= 1000000) snprintf(b, n, "%.1f MB", (double)v / 1e6);
    else if (v >= 1000) snprintf(b, n, "%.1f kB", (double)v / 1e3);
    else snprintf(b, n, "%" PRId64 " B", v);
}

/* "train.csv: 12.3 MB of 45.6 MB (27%), 3.1 MB/s" on one line, rewritten in place on a
 * terminal, every 5 s otherwise. */
static void dl_show(dl_line *d, int final) {
    if (!d->enabled) return;
    double now = trm_now_seconds();
    if (!final && now - d->last < (d->tty ? 0.25 : 5.0)) return;
    int64_t have = file_size(d->path);
    char a[32], t[32], r[32], line[256];
    fmt_bytes(a, sizeof a, have < 0 ? 0 : have);
    fmt_bytes(t, sizeof t, d->total);
    fmt_bytes(r, sizeof r, (int64_t)((double)(have < 0 ? 0 : have) / (now - d->t0 + 1e-9)));
    int n = d->total > 0 ? snprintf(line, sizeof line, "%s: %s of %s (%d%%), %s/s", d->label, a, t,
                                    (int)(100.0 * (double)have / (double)d->total), r)
                         : snprintf(line, sizeof line, "%s: %s, %s/s", d->label, a, r);
    size_t len = n < 0 ? 0 : (size_t)n;
    if (d->tty) {
        fprintf(stderr, "\r%s%*s%s", line, d->width > len ? (int)(d->width - len) : 0, "", final ? "\n" : "");
        d->width = len;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
    d->last = now;
}

static void dl_tick(void *ctx) { dl_show(ctx, 0); }

/* Fetches url into part (resuming what is there) until it has size bytes, retrying while
 * each attempt gets further. */
static int fetch_part(const hub *h, const char *url, int auth, const char *part, int64_t size, const char *label,
                      trm_err *e) {
    dl_line d = {.label = label, .path = part, .total = size, .t0 = trm_now_seconds(), .tty = isatty(2),
                 .enabled = h->progress};
    trm_sbuf err = {0};
    int rc = 0, restarted = 0;
    for (int attempt = 1;; attempt++) {
        int64_t had = file_size(part);
        if (size >= 0 && had > size) unlink(part), had = -1; /* not this blob: start over */
        if (size >= 0 && had == size) break;
        /* --no-buffer: the file holds what arrived (the progress line, and a kill loses
         * nothing a resume would have to fetch again) */
        const char *args[] = {"--fail", "--location", "--continue-at", "-", "--no-buffer", "--speed-limit", "1",
                              "--speed-time", "60", "--output", part, "--url", url, NULL};
        err.len = 0;
        rc = run_curl(h, args, auth, NULL, &err, dl_tick, &d, e);
        if (rc < 0) break;
        int64_t got = file_size(part);
        if (rc == 0 && (size < 0 || got == size)) break;
        if ((rc == 33 || rc == 22) && had > 0 && !restarted) { /* the server cannot resume: from 0 */
            unlink(part);
            restarted = 1;
            continue;
        }
        if ((interrupted(rc) || rc == 0) && got > had && got < size && attempt < HUB_ATTEMPTS) {
            if (d.tty && d.enabled) fputc('\n', stderr), d.width = 0;
            fprintf(stderr, "%s: the connection ended at %" PRId64 " of %" PRId64 " bytes; resuming\n", label, got,
                    size);
            continue;
        }
        if (rc == 0 && got > size) { /* not the file the Hub described */
            unlink(part);
            rc = trm_errf(e, "%s: got %" PRId64 " bytes where the Hub said %" PRId64 "; removed it, run again", url,
                          got, size);
        } else {
            rc = trm_errf(e, "%s: %s; %" PRId64 " of %" PRId64 " bytes are kept in %s: run the command again to "
                             "resume", url, rc ? curl_says(&err) : "the connection ended early", got < 0 ? 0 : got,
                          size, part);
        }
        break;
    }
    dl_show(&d, 1);
    sb_free(&err);
    return rc < 0 ? -1 : 0;
}

/* The lock huggingface_hub takes on the same blob (filelock uses flock too), waited for. */
static int lock_blob(const hub *h, const char *etag, int *fd, trm_err *e) {
    char *dir = xasprintf("%s/.locks/%s", h->cache, strrchr(h->storage, '/') + 1);
    char *path = xasprintf("%s/%s.lock", dir, etag);
    int rc = trm_mkdirs(dir, e);
    for (int waited = 0; rc == 0; waited++) {
        long holder;
        rc = trm_lock_file(path, fd, &holder, e);
        if (rc != 1) break;
        if (!waited) fprintf(stderr, "waiting for another download of the same file (lock %s)\n", path);
        rc = 0;
        sleep(1);
    }
    free(dir), free(path);
    return rc;
}

/* snapshots/{commit}/{file} -> ../../blobs/{etag}, made anew (huggingface_hub's
 * _create_symlink); where no symlink can be made a new blob is moved there instead. */
static int link_snapshot(const char *pointer, const char *blob, const char *etag, int new_blob, trm_err *e) {
    if (trm_mkdirs_for(pointer, e)) return -1;
    unlink(pointer);
    char *target = xasprintf("../../blobs/%s", etag);
    int rc = symlink(target, pointer);
    free(target);
    if (rc == 0) return 0;
    if (new_blob) return trm_rename(blob, pointer, e);
    return trm_errf(e, "%s: cannot link to %s: %s", pointer, blob, strerror(errno));
}

/* The blob downloaded (under the lock, into .incomplete, size checked) and linked. */
static int download(const hub *h, const head_info *hi, const char *url, const char *pointer, const char *file,
                    trm_err *e) {
    char *blob = xasprintf("%s/blobs/%s", h->storage, hi->etag), *part = xasprintf("%s.incomplete", blob);
    char *label = label_of(h, file);
    int fd = -1, new_blob = 0, rc = trm_mkdirs_for(blob, e) || lock_blob(h, hi->etag, &fd, e) ? -1 : 0;
    if (rc == 0 && !is_file(pointer) && !is_file(blob)) {
        /* a CDN gets no token, as huggingface_hub drops it there */
        rc = fetch_part(h, hi->location ? hi->location : url, hi->location == NULL, part, hi->size, label, e);
        if (rc == 0) rc = trm_rename(part, blob, e);
        new_blob = rc == 0;
    }
    if (rc == 0 && !is_file(pointer)) rc = link_snapshot(pointer, blob, hi->etag, new_blob, e);
    if (rc == 0 && new_blob) fprintf(stderr, "%s: downloaded to %s\n", label, pointer);
    trm_unlock_file(fd);
    free(blob), free(part), free(label);
    return rc;
}

/* ---- one file -------------------------------------------------------------------------------- */

static int write_ref(const hub *h, const char *revision, const char *commit, trm_err *e) {
    char *ref = xasprintf("%s/refs/%s", h->storage, revision);
    size_t len;
    trm_err ignore;
    char *old = trm_read_file(ref, &len, &ignore);
    int rc = 0;
    if (!old || strcmp(old, commit)) rc = trm_mkdirs_for(ref, e) || trm_write_file_atomic(ref, commit, 40, e) ? -1 : 0;
    free(old), free(ref);
    return rc;
}

/* The online path: 0 with *commit set, -1 with e set, 1 when the Hub cannot be reached
 * (*why says how; the cache is then used). */
static int fetch_online(const hub *h, const char *revision, const char *file, char **commit, char **why, trm_err *e) {
    char *url = resolve_url(h, revision, file);
    head_info hi;
    trm_sbuf err = {0};
    int rc = head(h, &url, &hi, &err, e);
    if (rc > 0 && unreachable(rc)) {
        *why = xasprintf("%s cannot be reached (%s)", h->endpoint, curl_says(&err));
        rc = 1;
    } else if (rc == 0 && hi.status >= 500) {
        *why = xasprintf("%s answers HTTP %d", h->endpoint, hi.status);
        rc = 1;
    } else if (rc > 0) {
        rc = trm_errf(e, "%s: %s", url, curl_says(&err));
    } else if (rc == 0 && (hi.status == 401 || hi.status == 403 || hi.status == 404)) {
        rc = trm_errf(e, "%s: HTTP %d: dataset %s has no %s at %s, or it is private or gated%s", url, hi.status,
                      h->repo, file, revision, h->token ? "" : " (then set HF_TOKEN)");
    } else if (rc == 0 && hi.status != 200 && !(hi.status >= 300 && hi.status <= 399 && hi.location)) {
        rc = trm_errf(e, "%s: HTTP %d", url, hi.status);
    } else if (rc == 0 && (!hi.commit || !is_commit(hi.commit) || !hi.etag || !valid_etag(hi.etag))) {
        rc = trm_errf(e, "%s does not answer as the Hub does: no X-Repo-Commit or ETag header, or not one the "
                         "cache can use", h->endpoint);
    }
    if (rc == 0) {
        char *pointer = snapshot_path(h, hi.commit, file);
        rc = write_ref(h, revision, hi.commit, e);
        char *label = label_of(h, file);
        if (rc == 0 && is_file(pointer)) fprintf(stderr, "%s: in the Hugging Face cache, %s\n", label, pointer);
        else if (rc == 0) rc = download(h, &hi, url, pointer, file, e);
        if (rc == 0) *commit = xstrdup(hi.commit);
        free(pointer), free(label);
    }
    head_free(&hi);
    sb_free(&err);
    free(url);
    return rc;
}

/* The cache's answer without a network: snapshots/{commit}/{file}, the commit being the
 * revision itself or what refs/{revision} holds. */
static char *cached_commit(const hub *h, const char *revision) {
    if (is_commit(revision)) return xstrdup(revision);
    char *ref = xasprintf("%s/refs/%s", h->storage, revision);
    size_t len;
    trm_err ignore;
    char *c = trm_read_file(ref, &len, &ignore);
    free(ref);
    while (c && len > 0 && isspace((unsigned char)c[len - 1])) c[--len] = 0;
    if (c && !is_commit(c)) free(c), c = NULL;
    return c;
}

static int fetch_file(const hub *h, const char *revision, const char *file, char **commit, trm_err *e) {
    char *why = NULL;
    if (is_commit(revision)) { /* pinned: a snapshot file is final */
        char *p = snapshot_path(h, revision, file);
        int there = is_file(p);
        char *label = label_of(h, file);
        if (there) fprintf(stderr, "%s: in the Hugging Face cache, %s\n", label, p);
        free(p), free(label);
        if (there) return *commit = xstrdup(revision), 0;
    }
    if (h->offline) {
        why = xstrdup("HF_HUB_OFFLINE is set");
    } else if (!h->curl) {
        why = xstrdup("trm downloads with the system's curl, which is not installed (Debian/Ubuntu: apt-get "
                      "install curl); or download train.csv and test.csv yourself and give --csv-dir");
    } else {
        int rc = fetch_online(h, revision, file, commit, &why, e);
        if (rc <= 0) return rc;
    }
    char *c = cached_commit(h, revision), *p = c ? snapshot_path(h, c, file) : NULL;
    char *label = label_of(h, file);
    int rc = 0;
    if (p && is_file(p)) {
        fprintf(stderr, "%s: from the Hugging Face cache, %s; %s\n", label, p, why);
        *commit = c, c = NULL;
    } else if (p) {
        rc = trm_errf(e, "%s of dataset %s is not in the Hugging Face cache (no %s) and cannot be downloaded: %s",
                      file, h->repo, p, why);
    } else {
        rc = trm_errf(e, "%s of dataset %s is not in the Hugging Face cache (no %s/refs/%s naming a snapshot) and "
                         "cannot be downloaded: %s", file, h->repo, h->storage, revision, why);
    }
    free(c), free(p), free(why), free(label);
    return rc;
}

char *trm_hub_dataset_dir(const char *repo, const char *const *files, int nfiles, int progress, trm_err *e) {
    hub h;
    if (hub_init(&h, repo, progress, e)) {
        hub_free(&h);
        return NULL;
    }
    char *commit = NULL, *dir = NULL;
    int rc = 0;
    /* the first file fixes the commit, so that all of them come from one snapshot */
    for (int i = 0; i < nfiles && rc == 0; i++) {
        char *c = NULL;
        rc = fetch_file(&h, commit ? commit : "main", files[i], &c, e);
        if (!commit) commit = c;
        else free(c);
    }
    if (rc == 0) dir = xasprintf("%s/snapshots/%s", h.storage, commit);
    free(commit);
    hub_free(&h);
    return dir;
}

int trm_hub_csv_dir(const char **csv_dir, int download, const char *repo, const char *default_repo, int progress,
                    char **owned, trm_err *e) {
    static const char *const files[2] = {"train.csv", "test.csv"};
    *owned = NULL;
    if (repo && !download) return trm_errf(e, "--repo names the dataset that --download fetches: add --download");
    if (download && *csv_dir) return trm_errf(e, "give --csv-dir DIR or --download, not both");
    if (!download) return 0;
    *owned = trm_hub_dataset_dir(repo ? repo : default_repo, files, 2, progress, e);
    if (!*owned) return -1;
    *csv_dir = *owned;
    return 0;
}
