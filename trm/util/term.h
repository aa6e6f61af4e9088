/* term.h — what trm needs to know about the terminal: whether a stream is one and how wide
 * it is (the live progress lines are cut to fit, so they never wrap). */
#ifndef TRM_TERM_H
#define TRM_TERM_H
#include <stdio.h>

int trm_term_is_tty(FILE *f);
/* Columns of the terminal behind f; else $COLUMNS; else 80. */
int trm_term_columns(FILE *f);

#endif
