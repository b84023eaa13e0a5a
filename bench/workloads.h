/* workloads.h — lj-bench's named workloads. A workload sets up its inputs (and parameters
 * and optimizer, for training steps) once, then records one run per step call; the driver
 * syncs and times it. bench/peers/torch_bench.py runs the same names in PyTorch. */
#ifndef LJ_BENCH_WORKLOADS_H
#define LJ_BENCH_WORKLOADS_H

#include <lazyjit.h>

enum { BENCH_MAX_TENSORS = 64 };

/* A matmul workload's n[3]: which operands are stored transposed. */
enum { GEMM_TA = 1, GEMM_TB = 2 };

typedef struct bench_state {
  lj_device *d;
  lj_tensor *in[BENCH_MAX_TENSORS]; /* inputs, computed at setup */
  lj_tensor *p[BENCH_MAX_TENSORS];  /* parameters requiring grad */
  int np;
  lj_optim *opt;
  lj_tensor *out[BENCH_MAX_TENSORS]; /* the last step's results, kept until the next one */
  int nout;
} bench_state;

typedef struct workload workload;
struct workload {
  const char *name;
  const char *what;
  int64_t n[4]; /* the workload's sizes, read by setup and step */
  /* Creates inputs and parameters on s->d; false with lazyjit's error set. */
  bool (*setup)(const workload *w, bench_state *s);
  /* Records one run; its results go to s->out (the driver syncs them). */
  void (*step)(const workload *w, bench_state *s);
  double bytes; /* moved per run, for GB/s (0: none) */
  double flops; /* per run, for GFLOP/s (0: none) */
};

extern const workload bench_workloads[];
extern const int bench_nworkloads;

/* Whether w is a plain f32 product, n = {M, N, K, GEMM_TA | GEMM_TB}: one a BLAS runs too. */
bool bench_is_gemm(const workload *w);

/* Releases everything setup and step made. */
void bench_state_clear(bench_state *s);

#endif
