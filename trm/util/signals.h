/* signals.h — SIGINT/SIGTERM become a "stop after this step" request. */
#ifndef TRM_SIGNALS_H
#define TRM_SIGNALS_H
void trm_signals_install(void);
/* 0 when no stop was requested, else the signal number. */
int trm_signals_pending(void);
#endif
