/* test_runtime_metrics.c — the metrics report: parsed back, every counter's Value and every
 * metric's TotalSamples match lj_counter_value / lj_metric_data; times are printed in
 * PyTorch/XLA's 000ms000.000us form; transfer metrics count the bytes moved; clearing works;
 * the short report keeps only its metrics and counters. */
#include "test_util.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void run_some_steps(void) {
  lj_device *d = lj_default_device();
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(16, 16), TU_ANY, 1); /* 1024 bytes in */
  for (int i = 0; i < 5; i++) {
    lj_scope_begin();
    lj_assign(w, lj_tanh(lj_mul_scalar(w, 1.0 + i)));
    lj_scope_end();
    ck_assert_int_eq(lj_sync(d), LJ_OK);
  }
  float out[256];
  ck_assert_int_eq(lj_tensor_to_host(w, out, sizeof out), LJ_OK); /* 1024 bytes out */
  lj_tensor_release(w);
}

START_TEST(test_report_matches_counters) {
  lj_metrics_clear();
  run_some_steps();
  char *report = lj_metrics_report();
  ck_assert(report);
  int counters = 0, metrics = 0;
  for (char *line = strtok(report, "\n"); line; line = strtok(NULL, "\n")) {
    char name[64];
    long long v;
    if (sscanf(line, "Counter: %63s", name) == 1) {
      char *next = strtok(NULL, "\n");
      ck_assert_msg(next && sscanf(next, "  Value: %lld", &v) == 1, "no Value after %s", name);
      ck_assert_int_eq(v, lj_counter_value(name));
      counters++;
    } else if (sscanf(line, "Metric: %63s", name) == 1) {
      char *next = strtok(NULL, "\n");
      int64_t samples;
      ck_assert_int_eq(lj_metric_data(name, &samples, NULL), LJ_OK);
      ck_assert_msg(next && sscanf(next, "  TotalSamples: %lld", &v) == 1, "no TotalSamples after %s", name);
      ck_assert_int_eq(v, samples);
      metrics++;
    }
  }
  ck_assert_int_ge(counters, 5);
  ck_assert_int_ge(metrics, 5);
  free(report);
  ck_assert_int_eq(lj_counter_value("MarkStep"), 5);
  ck_assert_int_eq(lj_counter_value("UncachedCompile") + lj_counter_value("CachedCompile"), 5);
  int64_t n;
  double bytes;
  ck_assert_int_eq(lj_metric_data("InboundData", &n, &bytes), LJ_OK);
  ck_assert(n == 1 && bytes == 1024);
  ck_assert_int_eq(lj_metric_data("OutboundData", &n, &bytes), LJ_OK);
  ck_assert(n == 1 && bytes == 1024);
  double secs;
  ck_assert_int_eq(lj_metric_data("ExecuteTime", &n, &secs), LJ_OK);
  ck_assert(n == 5 && secs > 0 && secs < 10);
}
END_TEST

START_TEST(test_report_layout) {
  lj_metrics_clear();
  run_some_steps();
  char *report = lj_metrics_report();
  regex_t re;
  ck_assert_int_eq(regcomp(&re,
                           "Metric: CompileTime\n"
                           "  TotalSamples: [0-9]+\n"
                           "  Accumulator: ([0-9]+[hms])*[0-9]{3}ms[0-9]{3}\\.[0-9]{3}us\n"
                           "  ValueRate: [^\n]+ / second\n"
                           "  Rate: [^\n]+ / second\n"
                           "  Percentiles: 1%=[^;]+; 5%=[^;]+; 10%=[^;]+; 20%=[^;]+; 50%=[^;]+; 80%=[^;]+; "
                           "90%=[^;]+; 95%=[^;]+; 99%=[^\n]+\n",
                           REG_EXTENDED),
                   0);
  ck_assert_msg(regexec(&re, report, 0, NULL, 0) == 0, "report:\n%s", report);
  regfree(&re);
  ck_assert(strstr(report, "Counter: CachedCompile\n  Value: "));
  ck_assert(strstr(report, "Metric: InboundData\n  TotalSamples: 1\n  Accumulator: 1.00KB\n"));
  free(report);
  lj_metrics_clear();
  report = lj_metrics_report();
  ck_assert_str_eq(report, "");
  free(report);
  ck_assert_int_eq(lj_counter_value("MarkStep"), 0);
  ck_assert_int_eq(lj_counter_value("NoSuchCounter"), 0);
  ck_assert_int_eq(lj_metric_data("NoSuchMetric", NULL, NULL), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "NoSuchMetric", NULL);
}
END_TEST

/* The short report is the full one restricted to its metrics and counters, line for line. */
START_TEST(test_short_report) {
  lj_metrics_clear();
  run_some_steps();
  char *full = lj_metrics_report(), *brief = lj_metrics_short_report();
  ck_assert(strstr(brief, "Metric: CompileTime\n"));
  ck_assert(strstr(brief, "Metric: ExecuteTime\n"));
  ck_assert(strstr(brief, "Metric: TransferFromDeviceTime\n"));
  ck_assert(strstr(brief, "Counter: MarkStep\n  Value: 5\n"));
  ck_assert(!strstr(brief, "InboundData") && !strstr(brief, "SyncTensors"));
  ck_assert(strstr(full, "InboundData") && strstr(full, "SyncTensors"));
  /* each block of the short report appears in the full one */
  for (char *at = brief; (at = strstr(at, "Counter: ")); at++) {
    char block[128];
    ck_assert(sscanf(at, "%127[^\n]", block) == 1);
    ck_assert_msg(strstr(full, block), "%s not in the full report", block);
  }
  free(full);
  free(brief);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_metrics");
  TCase *tc = tu_tcase("metrics");
  tcase_add_test(tc, test_report_matches_counters);
  tcase_add_test(tc, test_report_layout);
  tcase_add_test(tc, test_short_report);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
