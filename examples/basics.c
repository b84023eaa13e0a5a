/* basics.c — a first lazyjit program: a loop that compiles once, then runs from the cache. */
#include <lazyjit.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  lj_device *dev = lj_default_device();
  if (!dev) {
    fprintf(stderr, "lazyjit: %s\n", lj_last_error());
    return 1;
  }
  float w0[6] = {1, 2, 3, 4, 5, 6};
  lj_tensor *w = lj_tensor_from_host(dev, LJ_F32, LJ_SHAPE(2, 3), w0);
  for (int step = 0; step < 5; step++) {
    lj_scope_begin();
    lj_tensor *g = lj_mul_scalar(lj_tanh(w), 0.5 / (step + 1));
    lj_assign(w, lj_sub(w, g));
    lj_scope_end();
    if (lj_sync(dev) != LJ_OK) {
      fprintf(stderr, "lazyjit: %s\n", lj_last_error());
      return 1;
    }
  }
  float out[6];
  lj_tensor_to_host(w, out, sizeof out);
  for (int i = 0; i < 6; i++) printf("%.5f ", out[i]);
  printf("\ncompiles: %lld, cache hits: %lld\n", (long long)lj_counter_value("UncachedCompile"),
         (long long)lj_counter_value("CachedCompile"));
  char *report = lj_metrics_report();
  printf("%s", report);
  free(report);
  lj_tensor_release(w);
  lj_shutdown();
  return 0;
}
