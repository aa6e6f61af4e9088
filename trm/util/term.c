/* term.c — terminal queries behind term.h (TIOCGWINSZ exists on Linux and macOS alike). */
#if defined(__APPLE__)
#define _DARWIN_C_SOURCE
#endif
#include "term.h"

#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

int trm_term_is_tty(FILE *f) { return isatty(fileno(f)); }

int trm_term_columns(FILE *f) {
    struct winsize ws;
    if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *c = getenv("COLUMNS");
    long n = c ? strtol(c, NULL, 10) : 0;
    return n > 0 && n < 10000 ? (int)n : 80;
}
