/* metrics.c — counters and metrics, and the report in PyTorch/XLA's layout:
 *
 *   Metric: CompileTime
 *     TotalSamples: 3
 *     Accumulator: 021ms656.289us
 *     ValueRate: 002ms045.224us / second
 *     Rate: 0.28 / second
 *     Percentiles: 1%=005ms001.000us; 5%=...; 99%=...
 *   Counter: CachedCompile
 *     Value: 9
 *
 * Counters are atomics (cheap on hot paths). Metric samples keep a sum, a count, the times
 * of the first and last sample (for the rates), and the last 1024 values for percentiles.
 * Like PyTorch/XLA's, the metrics are process-wide and outlive lj_shutdown, so a program can
 * print the report after shutting the runtime down; they are the one piece of runtime state
 * outside the runtime object. */
#include "runtime/runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum unit { TIME, BYTES, COUNT } unit;

static const char *const counter_names[] = {
#define COUNTER(name) #name,
#define METRIC(name, unit)
#include "runtime/metrics.def"
#undef COUNTER
#undef METRIC
};
_Static_assert(LJ_COUNT_OF(counter_names) == LJR_NUM_COUNTERS, "counter table");

static const struct {
  const char *name;
  unit unit;
} metric_info[] = {
#define COUNTER(name)
#define METRIC(name, u) {#name, u},
#include "runtime/metrics.def"
#undef COUNTER
#undef METRIC
};
_Static_assert(LJ_COUNT_OF(metric_info) == LJR_NUM_METRICS, "metric table");

enum { WINDOW = 1024 };

typedef struct metric {
  int64_t samples;
  double sum;
  uint64_t first_ns, last_ns;
  double window[WINDOW];
} metric;

static _Atomic int64_t counters[LJR_NUM_COUNTERS];
static metric metrics[LJR_NUM_METRICS];
static pthread_mutex_t metrics_lock = PTHREAD_MUTEX_INITIALIZER;

void ljr_count(ljr_counter c, int64_t by) { atomic_fetch_add_explicit(&counters[c], by, memory_order_relaxed); }

void ljr_sample(ljr_metric m, double v) {
  uint64_t now = ljb_now_ns();
  pthread_mutex_lock(&metrics_lock);
  metric *s = &metrics[m];
  if (s->samples == 0) s->first_ns = now;
  s->last_ns = now;
  s->window[s->samples % WINDOW] = v;
  s->samples++;
  s->sum += v;
  pthread_mutex_unlock(&metrics_lock);
}

int64_t lj_counter_value(const char *name) {
  if (!name) return 0;
  for (int i = 0; i < LJR_NUM_COUNTERS; i++)
    if (strcmp(counter_names[i], name) == 0) return atomic_load(&counters[i]);
  return 0;
}

lj_status lj_metric_data(const char *name, int64_t *samples, double *accumulator) {
  if (!name) {
    ljb_null_arg("lj_metric_data", "name");
    return LJ_ERR_ARG;
  }
  for (int i = 0; i < LJR_NUM_METRICS; i++) {
    if (strcmp(metric_info[i].name, name) != 0) continue;
    pthread_mutex_lock(&metrics_lock);
    if (samples) *samples = metrics[i].samples;
    if (accumulator)
      *accumulator = metric_info[i].unit == TIME ? metrics[i].sum * 1e-9 : metrics[i].sum;
    pthread_mutex_unlock(&metrics_lock);
    return LJ_OK;
  }
  ljb_error(LJ_ERR_ARG, "lj_metric_data: unknown metric '%s'", name);
  return LJ_ERR_ARG;
}

void lj_metrics_clear(void) {
  for (int i = 0; i < LJR_NUM_COUNTERS; i++) atomic_store(&counters[i], 0);
  pthread_mutex_lock(&metrics_lock);
  memset(metrics, 0, sizeof metrics);
  pthread_mutex_unlock(&metrics_lock);
}

/* 1h02m03s004ms005.006us style, as PyTorch/XLA prints times. */
static void fmt_time(ljb_str *b, double ns) {
  double us = ns / 1e3;
  int64_t total_ms = (int64_t)(us / 1e3);
  double rem_us = us - (double)total_ms * 1e3;
  int64_t h = total_ms / 3600000, m = total_ms / 60000 % 60, s = total_ms / 1000 % 60;
  int64_t ms = total_ms % 1000;
  if (h) ljb_str_printf(b, "%02lldh", (long long)h);
  if (h || m) ljb_str_printf(b, "%02lldm", (long long)m);
  if (h || m || s) ljb_str_printf(b, "%02llds", (long long)s);
  ljb_str_printf(b, "%03lldms%07.3fus", (long long)ms, rem_us);
}

static void fmt_bytes(ljb_str *b, double v) {
  static const char *const units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    u++;
  }
  ljb_str_printf(b, "%.2f%s", v, units[u]);
}

static void fmt_value(ljb_str *b, unit u, double v) {
  if (u == TIME)
    fmt_time(b, v);
  else if (u == BYTES)
    fmt_bytes(b, v);
  else
    ljb_str_printf(b, "%.2f", v);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The short report's metrics and counters, as PyTorch/XLA's short_metrics_report. */
static const char *const short_metrics[] = {"CompileTime", "ExecuteTime", "TransferToDeviceTime",
                                            "TransferFromDeviceTime"};
static const char *const short_counters[] = {"CachedCompile", "UncachedCompile", "MarkStep"};

static bool listed(const char *name, const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0) return true;
  return false;
}

/* Every metric and nonzero counter, or only the short report's. */
static char *report(bool only_short) {
  static const int pct[] = {1, 5, 10, 20, 50, 80, 90, 95, 99};
  ljb_str b = {0};
  pthread_mutex_lock(&metrics_lock);
  for (int i = 0; i < LJR_NUM_METRICS; i++) {
    const metric *s = &metrics[i];
    if (!s->samples) continue;
    if (only_short && !listed(metric_info[i].name, short_metrics, LJ_COUNT_OF(short_metrics))) continue;
    unit u = metric_info[i].unit;
    double span = (double)(s->last_ns - s->first_ns) * 1e-9;
    ljb_str_printf(&b, "Metric: %s\n  TotalSamples: %lld\n  Accumulator: ", metric_info[i].name,
                   (long long)s->samples);
    fmt_value(&b, u, s->sum);
    ljb_str_puts(&b, "\n  ValueRate: ");
    fmt_value(&b, u, span > 0 ? s->sum / span : 0);
    ljb_str_printf(&b, " / second\n  Rate: %g / second\n  Percentiles: ",
                   span > 0 ? (double)s->samples / span : 0.0);
    int n = s->samples < WINDOW ? (int)s->samples : WINDOW;
    double sorted[WINDOW];
    memcpy(sorted, s->window, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    for (size_t k = 0; k < LJ_COUNT_OF(pct); k++) {
      int idx = (int)floor((double)pct[k] / 100.0 * (n - 1) + 0.5);
      ljb_str_printf(&b, "%s%d%%=", k ? "; " : "", pct[k]);
      fmt_value(&b, u, sorted[idx]);
    }
    ljb_str_puts(&b, "\n");
  }
  pthread_mutex_unlock(&metrics_lock);
  for (int i = 0; i < LJR_NUM_COUNTERS; i++) {
    int64_t v = atomic_load(&counters[i]);
    if (only_short && !listed(counter_names[i], short_counters, LJ_COUNT_OF(short_counters))) continue;
    if (v) ljb_str_printf(&b, "Counter: %s\n  Value: %lld\n", counter_names[i], (long long)v);
  }
  return ljb_str_take(&b);
}

char *lj_metrics_report(void) { return report(false); }

char *lj_metrics_short_report(void) { return report(true); }
