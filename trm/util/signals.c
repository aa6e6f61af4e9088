/* signals.c — a signal handler can only communicate through static storage, so this file
 * holds the one flag that is not the backend registry; everything else reads it through
 * trm_signals_pending(). A second signal restores the default action (a hard stop). */
#define _POSIX_C_SOURCE 200809L
#include "signals.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t pending_signal;

static void on_signal(int sig) {
    pending_signal = sig;
    signal(sig, SIG_DFL);
}

void trm_signals_handle(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void trm_signals_install(void) { trm_signals_handle(on_signal); }

int trm_signals_pending(void) { return (int)pending_signal; }
