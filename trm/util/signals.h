/* signals.h — SIGINT/SIGTERM become a "stop after this step" request. */
#ifndef TRM_SIGNALS_H
#define TRM_SIGNALS_H
void trm_signals_install(void);
/* SIGINT and SIGTERM both go to `handler` (SIG_DFL, SIG_IGN or a function); only
 * async-signal-safe calls, so a child may use it between fork and exec. */
void trm_signals_handle(void (*handler)(int));
/* 0 when no stop was requested, else the signal number. */
int trm_signals_pending(void);
#endif
