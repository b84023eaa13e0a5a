/* cache_target.c — the program test_runtime_persistent_cache runs as separate processes (its
 * cache directory comes from LJ_CACHE_DIR): three training steps of a small classifier with
 * Adam, its three hidden layers alike (their kernels twins: one calls the other's code), then a
 * read of the logits. Prints every value it computed as the hex of its bits, so
 * runs can be compared bit for bit, and the compile and persistent cache counters (the GEMM
 * routines its matmuls call come with the cache entries, and have entries of their own: a
 * second process compiles none), the twin kernels and the buffers its steps updated in
 * place. */
#include <lazyjit.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void print_bits(const char *what, lj_tensor *t) {
  float v[256];
  int64_t n = lj_tensor_numel(t);
  if (n > 256 || lj_tensor_to_host(t, v, (size_t)n * sizeof *v) != LJ_OK) {
    printf("%s: error %s\n", what, lj_last_error());
    return;
  }
  printf("%s:", what);
  for (int64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &v[i], sizeof u);
    printf(" %08x", u);
  }
  printf("\n");
}

int main(void) {
  lj_device *d = lj_default_device();
  if (!d) {
    printf("error: %s\n", lj_last_error());
    return 1;
  }
  lj_manual_seed(d, 7);
  lj_tensor *w1, *b1, *w3, *b3, *w4, *b4, *w2, *b2;
  lj_nn_linear_init(d, LJ_F32, 32, 32, true, &w1, &b1);
  lj_nn_linear_init(d, LJ_F32, 32, 32, true, &w3, &b3);
  lj_nn_linear_init(d, LJ_F32, 32, 32, true, &w4, &b4);
  lj_nn_linear_init(d, LJ_F32, 32, 4, true, &w2, &b2);
  lj_tensor *params[8] = {w1, b1, w3, b3, w4, b4, w2, b2};
  lj_optim *opt = lj_optim_adam(8, params, lj_adam_defaults());
  lj_tensor *x = lj_randn(d, LJ_F32, LJ_SHAPE(8, 32));
  int64_t labels[8] = {0, 1, 2, 3, 3, 2, 1, 0};
  lj_tensor *y = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(8), labels);
  for (int step = 0; step < 3; step++) {
    lj_scope_begin();
    lj_tensor *h = lj_relu(lj_linear(lj_relu(lj_linear(lj_relu(lj_linear(x, w1, b1)), w3, b3)), w4, b4));
    lj_tensor *loss = lj_cross_entropy(lj_linear(h, w2, b2), y, LJ_REDUCE_MEAN);
    lj_optim_zero_grad(opt);
    lj_backward(loss);
    lj_optimizer_step(opt, true);
    char what[32];
    snprintf(what, sizeof what, "loss %d", step);
    print_bits(what, loss);
    lj_scope_end();
  }
  lj_tensor *h = lj_relu(lj_linear(lj_relu(lj_linear(lj_relu(lj_linear(x, w1, b1)), w3, b3)), w4, b4));
  lj_tensor *logits = lj_linear(h, w2, b2);
  print_bits("logits", logits);
  print_bits("w2", w2);
  if (lj_last_status() != LJ_OK) printf("error: %s\n", lj_last_error());
  printf("UncachedCompile=%lld CompiledGemmRoutines=%lld PersistentCacheHit=%lld PersistentCacheMiss=%lld "
         "PersistentCacheDeserializeFailure=%lld TwinKernels=%lld DonatedBuffers=%lld\n",
         (long long)lj_counter_value("UncachedCompile"), (long long)lj_counter_value("CompiledGemmRoutines"),
         (long long)lj_counter_value("PersistentCacheHit"),
         (long long)lj_counter_value("PersistentCacheMiss"),
         (long long)lj_counter_value("PersistentCacheDeserializeFailure"), (long long)lj_counter_value("TwinKernels"),
         (long long)lj_counter_value("DonatedBuffers"));
  lj_tensor *all[] = {logits, h, x, y, w1, b1, w3, b3, w4, b4, w2, b2};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) lj_tensor_release(all[i]);
  lj_optim_free(opt);
  lj_shutdown();
  return 0;
}
