/* util.h — the face of util/: what every other folder may use from it. Errors and
 * allocation (base.h), text buffers (strbuf.h, json.h), option tables (opts.h), counter-based
 * random numbers (rng.h, philox.h), the terminal (term.h, progress.h), stop signals and child
 * processes (proc.h). util/ depends on nothing else of trm. */
#ifndef TRM_UTIL_H
#define TRM_UTIL_H

#include "base.h"
#include "strbuf.h"
#include "json.h"
#include "opts.h"
#include "rng.h"
#include "philox.h"
#include "term.h"
#include "progress.h"
#include "signals.h"
#include "proc.h"

#endif
