/* view.h — the face of view/: what a person looks at. metrics.jsonl read back as series,
 * plots (SVG and PNG, drawn on canvas.h with font.h), report.html, TensorBoard event files
 * and the live status lines of a run. view/ uses util/ and config/ only. */
#ifndef TRM_VIEW_H
#define TRM_VIEW_H

#include "metrics_log.h"
#include "canvas.h"
#include "font.h"
#include "png.h"
#include "plot.h"
#include "report.h"
#include "run_display.h"
#include "tfevents.h"

#endif
