/* onednn_sgemm.c — lj-peer-onednn: times oneDNN's dnnl_sgemm on one product, the reference
 * the SGEMM target is set against. torch_bench.py runs it for every lj-bench workload that is
 * a plain product (its JSON's "gemm": M, N, K and which operands are stored transposed), with
 * lj-bench's timing: one cold call, 0.2 s of untimed calls (at least two), then N timed ones.
 *
 *   lj-peer-onednn [--threads N] [--runs N] M N K TA TB
 *
 * prints "MEDIAN_MS MIN_MS". A is [M, K] row-major, or [K, M] when TA is 1; B is [K, N], or
 * [N, K] when TB is 1; C is [M, N]. oneDNN threads with OpenMP: --threads sets its count. */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_RUNS = 100000 };
static const double WARMUP_S = 0.2;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static float *rand_matrix(long n) {
  float *p = malloc((size_t)n * sizeof *p);
  for (long i = 0; p && i < n; i++) p[i] = (float)rand() / (float)RAND_MAX;
  return p;
}

static int usage(const char *argv0) {
  fprintf(stderr, "usage: %s [--threads N] [--runs N] M N K TA TB\n", argv0);
  return 2;
}

int main(int argc, char **argv) {
  int threads = 0, runs = 20, i = 1;
  for (; i + 1 < argc && !strncmp(argv[i], "--", 2); i += 2) {
    if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
    else return usage(argv[0]);
  }
  if (argc - i != 5 || runs < 1 || runs > MAX_RUNS) return usage(argv[0]);
  long m = atol(argv[i]), n = atol(argv[i + 1]), k = atol(argv[i + 2]);
  int ta = atoi(argv[i + 3]), tb = atoi(argv[i + 4]);
  if (m < 1 || n < 1 || k < 1) return usage(argv[0]);
  if (threads > 0) omp_set_num_threads(threads);

  float *a = rand_matrix(m * k), *b = rand_matrix(k * n), *c = calloc((size_t)(m * n), sizeof *c);
  double *t = malloc((size_t)runs * sizeof *t);
  if (!a || !b || !c || !t) {
    fprintf(stderr, "%s: out of memory\n", argv[0]);
    return 1;
  }
  char tra = ta ? 'T' : 'N', trb = tb ? 'T' : 'N';
  long lda = ta ? m : k, ldb = tb ? k : n;
  /* the cold call, then warm-up calls for WARMUP_S (at least two) */
  dnnl_status_t st = dnnl_sgemm(tra, trb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
  double warm = now_s();
  for (int w = 0; st == dnnl_success && (w < 2 || now_s() - warm < WARMUP_S); w++)
    st = dnnl_sgemm(tra, trb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
  for (int r = 0; st == dnnl_success && r < runs; r++) {
    double t0 = now_s();
    st = dnnl_sgemm(tra, trb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
    t[r] = now_s() - t0;
  }
  if (st != dnnl_success) {
    fprintf(stderr, "%s: dnnl_sgemm(%c, %c, %ld, %ld, %ld) failed with status %d\n", argv[0], tra, trb, m, n, k,
            (int)st);
    return 1;
  }
  qsort(t, (size_t)runs, sizeof *t, cmp_double);
  printf("%.4f %.4f\n", 1e3 * t[runs / 2], 1e3 * t[0]);
  free(a);
  free(b);
  free(c);
  free(t);
  return 0;
}
