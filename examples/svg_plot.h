/* svg_plot.h — line charts as a standalone SVG file: panels side by side, each one series
 * with axes, ticks and a title. Used by the examples to plot training curves. */
#ifndef LJ_EXAMPLES_SVG_PLOT_H
#define LJ_EXAMPLES_SVG_PLOT_H

#include <stdbool.h>

typedef struct svg_panel {
  const char *title, *xlabel, *ylabel;
  const double *x, *y;
  int n;
  const char *color; /* an SVG color, e.g. "#1f77b4" */
} svg_panel;

/* Writes the panels side by side to path under a common title; false (errno set) if the
 * file cannot be written. */
bool svg_plot_write(const char *path, const char *title, int npanels, const svg_panel *panels);

#endif
