#define _POSIX_C_SOURCE 200809L
/* lj_bench.c — lj-bench: named workloads timed through the public API. For each: the cold
 * compile time of its graph, the wall time of a cached sync, the kernels' run time (median
 * and minimum of the runs after warm-up, from the ExecuteTime metric) and the throughput.
 *
 *   lj-bench [--filter SUBSTR] [--threads N] [--runs N] [--json FILE] [--list]
 */
#include <lazyjit.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct workload workload;
/* Records the workload's graph on d from its inputs; returns the result (one tensor). */
typedef lj_tensor *(*build_fn)(const workload *w, lj_device *d, lj_tensor **in);

struct workload {
  const char *name;
  const char *what;
  int ninputs;
  int64_t shapes[3][3]; /* per input: ndim, sizes (up to 2) */
  build_fn build;
  double bytes;         /* bytes moved per run (0: use flops) */
  double flops;
};

static lj_tensor *relu_chain(const workload *w, lj_device *d, lj_tensor **in) {
  /* relu(x * w + b) * 0.5 */
  return lj_mul_scalar(lj_relu(lj_add(lj_mul(in[0], in[1]), in[2])), 0.5);
}

static lj_tensor *gelu_tanh(const workload *w, lj_device *d, lj_tensor **in) { return lj_gelu(in[0], true); }
static lj_tensor *sigmoid(const workload *w, lj_device *d, lj_tensor **in) { return lj_sigmoid(in[0]); }

static lj_tensor *softmax(const workload *w, lj_device *d, lj_tensor **in) {
  lj_tensor *x = in[0];
  lj_tensor *e = lj_exp(lj_sub(x, lj_amax(x, 1, (const int[]){1}, true)));
  return lj_div(e, lj_sum(e, 1, (const int[]){1}, true));
}

static lj_tensor *log_softmax(const workload *w, lj_device *d, lj_tensor **in) {
  lj_tensor *x = in[0];
  lj_tensor *s = lj_sub(x, lj_amax(x, 1, (const int[]){1}, true));
  return lj_sub(s, lj_log(lj_sum(lj_exp(s), 1, (const int[]){1}, true)));
}

static lj_tensor *row_sum(const workload *w, lj_device *d, lj_tensor **in) {
  return lj_sum(in[0], 1, (const int[]){1}, false);
}

static lj_tensor *matmul(const workload *w, lj_device *d, lj_tensor **in) { return lj_matmul(in[0], in[1]); }

static lj_tensor *linear_relu(const workload *w, lj_device *d, lj_tensor **in) {
  return lj_relu(lj_add(lj_matmul(in[0], lj_transpose(in[1], 0, 1)), in[2]));
}

/* A chain of 500 cheap elementwise ops on 16 elements: what a cached sync costs. */
static lj_tensor *graph500(const workload *w, lj_device *d, lj_tensor **in) {
  lj_tensor *x = in[0];
  for (int i = 0; i < 250; i++) x = lj_mul_scalar(lj_add_scalar(x, 0.5 + i), 0.999);
  return x;
}

#define M1 (1 << 20)
#define M16 (1 << 24)
static const workload workloads[] = {
    {"relu_chain_1M", "relu(x*w+b)*0.5, f32", 3, {{1, M1}, {1, M1}, {1, M1}}, relu_chain, 4.0 * M1 * 4, 0},
    {"relu_chain_16M", "relu(x*w+b)*0.5, f32", 3, {{1, M16}, {1, M16}, {1, M16}}, relu_chain, 4.0 * M16 * 4, 0},
    {"gelu_tanh_1M", "gelu (tanh form), f32", 1, {{1, M1}}, gelu_tanh, 2.0 * M1 * 4, 0},
    {"sigmoid_1M", "sigmoid, f32", 1, {{1, M1}}, sigmoid, 2.0 * M1 * 4, 0},
    {"softmax_4096x1024", "softmax over rows", 1, {{2, 4096, 1024}}, softmax, 2.0 * 4096 * 1024 * 4, 0},
    {"log_softmax_4096x1024", "log_softmax over rows", 1, {{2, 4096, 1024}}, log_softmax, 2.0 * 4096 * 1024 * 4, 0},
    {"row_sum_4096x1024", "sum over rows", 1, {{2, 4096, 1024}}, row_sum, 4096.0 * 1024 * 4, 0},
    {"sgemm_64", "64^3 matmul", 2, {{2, 64, 64}, {2, 64, 64}}, matmul, 0, 2.0 * 64 * 64 * 64},
    {"sgemm_256", "256^3 matmul", 2, {{2, 256, 256}, {2, 256, 256}}, matmul, 0, 2.0 * 256 * 256 * 256},
    {"sgemm_512", "512^3 matmul", 2, {{2, 512, 512}, {2, 512, 512}}, matmul, 0, 2.0 * 512 * 512 * 512},
    {"sgemm_1024", "1024^3 matmul", 2, {{2, 1024, 1024}, {2, 1024, 1024}}, matmul, 0, 2.0 * 1024 * 1024 * 1024},
    {"mlp_layer_128x784x512", "relu(x W^T + b), MLP first layer", 3, {{2, 128, 784}, {2, 512, 784}, {1, 512}},
     linear_relu, 0, 2.0 * 128 * 784 * 512},
    {"graph500_cached_sync", "500-node graph, cached sync overhead", 1, {{1, 16}}, graph500, 0, 0},
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double metric(const char *name) {
  double v = 0;
  lj_metric_data(name, NULL, &v);
  return v;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct result {
  double compile_ms, sync_us, run_ms, run_min_ms, rate;
  const char *unit;
} result;

static lj_tensor *random_input(lj_device *d, const int64_t *spec) {
  lj_tensor *r = lj_rand(d, LJ_F32, (int)spec[0], spec + 1);
  lj_sync_tensors(1, &r);
  return r;
}

static int run_one(const workload *w, lj_device *d, int runs, result *res) {
  lj_tensor *in[3];
  for (int i = 0; i < w->ninputs; i++) in[i] = random_input(d, w->shapes[i]);
  double *sync_t = calloc((size_t)runs, sizeof *sync_t), *exec_t = calloc((size_t)runs, sizeof *exec_t);
  for (int r = -1; r < runs; r++) {
    lj_scope_begin();
    lj_tensor *out = lj_keep(w->build(w, d, in));
    lj_scope_end();
    if (!out) {
      fprintf(stderr, "%s: %s\n", w->name, lj_last_error());
      return 1;
    }
    double c0 = metric("CompileTime"), e0 = metric("ExecuteTime"), t0 = now();
    if (lj_sync(d) != LJ_OK) {
      fprintf(stderr, "%s: %s\n", w->name, lj_last_error());
      return 1;
    }
    double t = now() - t0, e = metric("ExecuteTime") - e0;
    if (r < 0) {
      res->compile_ms = (metric("CompileTime") - c0) * 1e3;
    } else {
      sync_t[r] = t - e;
      exec_t[r] = e;
    }
    lj_tensor_release(out);
  }
  qsort(sync_t, (size_t)runs, sizeof *sync_t, cmp);
  qsort(exec_t, (size_t)runs, sizeof *exec_t, cmp);
  res->sync_us = sync_t[runs / 2] * 1e6;
  res->run_ms = exec_t[runs / 2] * 1e3;
  res->run_min_ms = exec_t[0] * 1e3;
  res->rate = 0;
  res->unit = "";
  if (w->bytes > 0) {
    res->rate = w->bytes / exec_t[0] * 1e-9;
    res->unit = "GB/s";
  } else if (w->flops > 0) {
    res->rate = w->flops / exec_t[0] * 1e-9;
    res->unit = "GFLOP/s";
  }
  free(sync_t);
  free(exec_t);
  for (int i = 0; i < w->ninputs; i++) lj_tensor_release(in[i]);
  return 0;
}

int main(int argc, char **argv) {
  const char *filter = NULL, *json = NULL;
  int threads = 0, runs = 20;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!strcmp(argv[i], "--list")) {
      for (size_t k = 0; k < sizeof workloads / sizeof *workloads; k++)
        printf("%-24s %s\n", workloads[k].name, workloads[k].what);
      return 0;
    } else {
      fprintf(stderr, "usage: %s [--filter SUBSTR] [--threads N] [--runs N] [--json FILE] [--list]\n", argv[0]);
      return 2;
    }
  }
  if (runs < 1) runs = 1;
  lj_config cfg = lj_config_default();
  if (threads > 0) cfg.num_threads = threads;
  if (lj_init(&cfg) != LJ_OK) {
    fprintf(stderr, "lj-bench: %s\n", lj_last_error());
    return 1;
  }
  lj_device *d = lj_default_device();
  FILE *jf = json ? fopen(json, "w") : NULL;
  if (json && !jf) {
    perror(json);
    return 1;
  }
  printf("lj-bench: %d thread(s), %d runs after warm-up\n", cfg.num_threads, runs);
  printf("%-24s %11s %10s %10s %10s %12s\n", "workload", "compile ms", "sync us", "run ms", "min ms", "rate");
  if (jf) fprintf(jf, "{\"threads\": %d, \"runs\": %d, \"results\": [", cfg.num_threads, runs);
  int first = 1, status = 0;
  for (size_t k = 0; k < sizeof workloads / sizeof *workloads; k++) {
    const workload *w = &workloads[k];
    if (filter && !strstr(w->name, filter)) continue;
    result r = {0};
    if (run_one(w, d, runs, &r)) {
      status = 1;
      continue;
    }
    printf("%-24s %11.2f %10.1f %10.3f %10.3f %7.1f %s\n", w->name, r.compile_ms, r.sync_us, r.run_ms,
           r.run_min_ms, r.rate, r.unit);
    if (jf)
      fprintf(jf, "%s\n  {\"name\": \"%s\", \"compile_ms\": %.3f, \"sync_us\": %.2f, \"run_ms\": %.4f, "
                  "\"run_min_ms\": %.4f, \"rate\": %.3f, \"unit\": \"%s\"}",
              first ? "" : ",", w->name, r.compile_ms, r.sync_us, r.run_ms, r.run_min_ms, r.rate, r.unit);
    first = 0;
  }
  if (jf) {
    fprintf(jf, "\n]}\n");
    fclose(jf);
  }
  lj_shutdown();
  return status;
}
