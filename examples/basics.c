/* basics.c — lazyjit in one screen: a small training-like loop (w -= lr * tanh(w) * x) whose
 * ops are recorded, not run; the first lj_sync compiles the step, every later one runs it
 * from the cache, even though the learning rate changes (scalars are graph parameters).
 * Prints the IR of one step, what each step cost, and the metrics report. */
#include <lazyjit.h>
#include <stdio.h>
#include <stdlib.h>

static int64_t counter(const char *name) { return lj_counter_value(name); }

static double metric_seconds(const char *name) {
  double s = 0;
  lj_metric_data(name, NULL, &s);
  return s;
}

int main(void) {
  lj_device *dev = lj_default_device();
  if (!dev) {
    fprintf(stderr, "lazyjit: %s\n", lj_last_error());
    return 1;
  }
  printf("lazyjit on %s (%s)\n\n", lj_device_name(dev), lj_device_hw(dev));
  float w0[6] = {1, 2, 3, 4, 5, 6}, x0[3] = {0.5f, 1.0f, 2.0f};
  lj_tensor *w = lj_tensor_from_host(dev, LJ_F32, LJ_SHAPE(2, 3), w0);
  lj_tensor *x = lj_tensor_from_host(dev, LJ_F32, LJ_SHAPE(3), x0);
  for (int step = 0; step < 6; step++) {
    double lr = 0.5 / (step + 1);
    lj_scope_begin();
    lj_tensor *update = lj_mul_scalar(lj_mul(lj_tanh(w), x), lr); /* x broadcasts over rows */
    lj_assign(w, lj_sub(w, update));
    lj_scope_end();
    if (step == 0) {
      char *ir = lj_tensors_text(1, &w);
      printf("the pending graph of one step:\n%s\n", ir);
      free(ir);
    }
    int64_t compiles = counter("UncachedCompile");
    double compile_s = metric_seconds("CompileTime"), run_s = metric_seconds("ExecuteTime");
    if (lj_sync(dev) != LJ_OK || lj_wait(dev) != LJ_OK) { /* the sync queues the run; wait to time it */
      fprintf(stderr, "lazyjit: %s\n", lj_last_error());
      return 1;
    }
    if (counter("UncachedCompile") > compiles)
      printf("step %d (lr %.3f): compiled in %.2f ms\n", step, lr, (metric_seconds("CompileTime") - compile_s) * 1e3);
    else
      printf("step %d (lr %.3f): cache hit, ran in %.1f us\n", step, lr, (metric_seconds("ExecuteTime") - run_s) * 1e6);
  }
  float out[6];
  if (lj_tensor_to_host(w, out, sizeof out) != LJ_OK) {
    fprintf(stderr, "lazyjit: %s\n", lj_last_error());
    return 1;
  }
  printf("\nw =");
  for (int i = 0; i < 6; i++) printf(" %.5f", out[i]);
  printf("\ncompiles: %lld, cache hits: %lld\n\nmetrics report:\n", (long long)counter("UncachedCompile"),
         (long long)counter("CachedCompile"));
  char *report = lj_metrics_report();
  printf("%s", report);
  free(report);
  lj_tensor_release(x);
  lj_tensor_release(w);
  lj_shutdown();
  return 0;
}
