/* svg_plot.c — line charts as SVG (svg_plot.h): each panel gets "nice" axis ticks (1, 2 or
 * 5 times a power of ten), a polyline of its series and markers when it has few points. */
#include "svg_plot.h"

#include <math.h>
#include <stdio.h>

enum { PANEL_W = 420, PANEL_H = 300, MARGIN_L = 60, MARGIN_R = 20, MARGIN_T = 40, MARGIN_B = 45, HEADER = 30 };

/* A tick step that splits span into about `want` intervals. */
static double nice_step(double span, int want) {
  double raw = span / want, mag = pow(10, floor(log10(raw)));
  double f = raw / mag;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

static void range_of(const double *v, int n, double *lo, double *hi) {
  *lo = INFINITY;
  *hi = -INFINITY;
  for (int i = 0; i < n; i++)
    if (isfinite(v[i])) {
      *lo = fmin(*lo, v[i]);
      *hi = fmax(*hi, v[i]);
    }
  if (!(*lo <= *hi)) *lo = 0, *hi = 1;
  if (*hi - *lo < 1e-12) {
    double pad = fabs(*hi) > 0 ? fabs(*hi) * 0.05 : 0.5;
    *lo -= pad;
    *hi += pad;
  }
}

static void panel(FILE *f, double ox, double oy, const svg_panel *p) {
  double x0 = ox + MARGIN_L, x1 = ox + PANEL_W - MARGIN_R, y0 = oy + PANEL_H - MARGIN_B, y1 = oy + MARGIN_T;
  double xlo, xhi, ylo, yhi;
  range_of(p->x, p->n, &xlo, &xhi);
  range_of(p->y, p->n, &ylo, &yhi);
  double xs = nice_step(xhi - xlo, 5), ys = nice_step(yhi - ylo, 5);
  xlo = floor(xlo / xs) * xs, xhi = ceil(xhi / xs) * xs;
  ylo = floor(ylo / ys) * ys, yhi = ceil(yhi / ys) * ys;
#define PX(v) (x0 + ((v) - xlo) / (xhi - xlo) * (x1 - x0))
#define PY(v) (y0 - ((v) - ylo) / (yhi - ylo) * (y0 - y1))
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"14\">%s</text>\n", (x0 + x1) / 2,
          oy + 24, p->title);
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444\"/>\n", x0, y1,
          x1 - x0, y0 - y1);
  for (double v = xlo; v <= xhi + xs * 1e-6; v += xs) {
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", PX(v), y0, PX(v), y1);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\">%g</text>\n", PX(v), y0 + 15,
            fabs(v) < xs * 1e-6 ? 0.0 : v);
  }
  for (double v = ylo; v <= yhi + ys * 1e-6; v += ys) {
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0, PY(v), x1, PY(v));
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\">%g</text>\n", x0 - 5, PY(v) + 4,
            fabs(v) < ys * 1e-6 ? 0.0 : v);
  }
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\">%s</text>\n", (x0 + x1) / 2,
          y0 + 35, p->xlabel);
  fprintf(f,
          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\" "
          "transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
          ox + 15, (y0 + y1) / 2, ox + 15, (y0 + y1) / 2, p->ylabel);
  fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", p->color);
  for (int i = 0; i < p->n; i++)
    if (isfinite(p->x[i]) && isfinite(p->y[i])) fprintf(f, "%.1f,%.1f ", PX(p->x[i]), PY(p->y[i]));
  fprintf(f, "\"/>\n");
  if (p->n <= 30)
    for (int i = 0; i < p->n; i++)
      if (isfinite(p->x[i]) && isfinite(p->y[i]))
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", PX(p->x[i]), PY(p->y[i]), p->color);
#undef PX
#undef PY
}

bool svg_plot_write(const char *path, const char *title, int npanels, const svg_panel *panels) {
  FILE *f = fopen(path, "w");
  if (!f) return false;
  int w = PANEL_W * npanels, h = PANEL_H + HEADER;
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
          "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
          w, h, w, h);
  fprintf(f, "<text x=\"%d\" y=\"20\" text-anchor=\"middle\" font-size=\"16\">%s</text>\n", w / 2, title);
  for (int i = 0; i < npanels; i++) panel(f, (double)(i * PANEL_W), HEADER, &panels[i]);
  fprintf(f, "</svg>\n");
  return fclose(f) == 0;
}
