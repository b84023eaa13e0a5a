/* test_runtime_async.c — async execution: a sync returns with its run queued, the host traces
 * the next step on the queued run's output buffers meanwhile, and reads wait for the run. The
 * executor is held back (ljr_queue_pause) so what the host does before the run is seen through
 * the queue's numbers and the kernel counters, not through timing. And the kernels' thread
 * pool: every task of a job runs once, in ranges or chunks, in the floating-point mode the
 * device asks for (LJ_FLUSH_DENORMAL). And host threads training on devices of their own at
 * once. */
#include "test_util.h"

#include "runtime/runtime.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static int64_t kernels_run(void) { return lj_counter_value("ExecutedKernels"); }

START_TEST(test_trace_while_running) {
  lj_device *d = lj_default_device();
  float v[256];
  for (int i = 0; i < 256; i++) v[i] = (float)i / 64 - 2;
  lj_tensor *x = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(16, 16), v);
  lj_tensor *y = lj_mul_scalar(lj_tanh(x), 2.0);
  ck_assert_int_eq(lj_sync(d), LJ_OK); /* compiles the step and the cache holds it from now */
  ck_assert_int_eq(lj_wait(d), LJ_OK);
  lj_tensor_release(y);
  int64_t before = kernels_run();
  ljr_queue_pause(d, true);
  y = lj_mul_scalar(lj_tanh(x), 2.0); /* step 1 */
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  ck_assert(!lj_tensor_is_pending(y)); /* bound to the buffer the queued run will write */
  ck_assert_uint_eq(atomic_load(&d->queue.done) + 1, d->queue.submitted);
  /* step 2 is traced on step 1's output while step 1 has not run */
  lj_tensor *z = lj_sum(lj_add(y, x), 1, (int[]){1}, false);
  ck_assert(z && lj_tensor_is_pending(z));
  ck_assert_int_eq(kernels_run(), before);
  ck_assert_uint_eq(atomic_load(&d->queue.done) + 1, d->queue.submitted);
  ljr_queue_pause(d, false);
  float got[16];
  ck_assert_int_eq(lj_tensor_to_host(z, got, sizeof got), LJ_OK);
  ck_assert_int_gt(kernels_run(), before + 1);
  for (int r = 0; r < 16; r++) {
    double want = 0;
    for (int c = 0; c < 16; c++) want += 2 * tanh(v[r * 16 + c]) + v[r * 16 + c];
    ck_assert_double_eq_tol(got[r], want, 1e-4 * (1 + fabs(want)));
  }
  ck_assert_uint_eq(atomic_load(&d->queue.done), d->queue.submitted);
  lj_tensor_release(x);
  lj_tensor_release(y);
  lj_tensor_release(z);
}
END_TEST

/* A read waits for the queued run that writes what it reads, and lj_wait for the last run;
 * the values are those of a synchronous run. */
START_TEST(test_reads_wait) {
  lj_device *d = lj_default_device();
  lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(64, 64), TU_ANY, 3);
  lj_tensor *b = lj_matmul(a, a);
  ljr_queue_pause(d, true);
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  ck_assert_uint_lt(atomic_load(&d->queue.done), d->queue.submitted);
  ljr_queue_pause(d, false);
  ck_assert_int_eq(lj_wait(d), LJ_OK);
  ck_assert_uint_eq(atomic_load(&d->queue.done), d->queue.submitted);
  lj_tensor *c = lj_matmul(a, a);
  tu_check_interp_tol(1, &c, 1e-4, 1e-4);
  int64_t n;
  double *vb = tu_read(b, &n), *vc = tu_read(c, &n);
  ck_assert_mem_eq(vb, vc, (size_t)n * sizeof *vb);
  free(vb);
  free(vc);
  lj_tensor_release(a);
  lj_tensor_release(b);
  lj_tensor_release(c);
}
END_TEST

/* lj_shutdown waits for a queued run (even one held back) before freeing the device. */
START_TEST(test_shutdown_waits) {
  lj_device *d = lj_default_device();
  lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(128, 128), TU_ANY, 4);
  lj_tensor *b = lj_exp(a);
  ljr_queue_pause(d, true);
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  int64_t before = kernels_run();
  lj_tensor_release(a);
  lj_tensor_release(b);
  lj_shutdown();
  ck_assert_int_eq(kernels_run(), before + 1);
}
END_TEST

typedef struct pool_job {
  atomic_int *runs;  /* per task */
  atomic_int calls, bad_ranges;
  int64_t n, grain; /* grain 0: any range */
} pool_job;

static void count_tasks(void *ctx, int64_t begin, int64_t end) {
  pool_job *j = ctx;
  atomic_fetch_add(&j->calls, 1);
  bool chunk = j->grain == 0 || (begin % j->grain == 0 && end == (begin + j->grain < j->n ? begin + j->grain : j->n));
  if (begin < 0 || end > j->n || begin >= end || !chunk) atomic_fetch_add(&j->bad_ranges, 1);
  for (int64_t t = begin; t < end && t < j->n; t++) atomic_fetch_add(&j->runs[t], 1);
}

/* The ranges a job of n tasks is split into: one per part, at most one per thread and task. */
static int64_t ranges(int64_t n, int parts, int threads) {
  int64_t r = parts < threads ? parts : threads;
  return r < n ? r : n;
}

/* Jobs of 1 to 1000 tasks on pools of 1 to 3 threads, split into ranges (grain 0) or handed
 * out in chunks of 1 to more than all tasks: every task runs exactly once; a job on one
 * thread is one call, a split one one call per range, a chunked one one call per whole chunk
 * (the last cut at n). */
START_TEST(test_pool_chunks) {
  static const int64_t ns[] = {1, 7, 100, 1000}, grains[] = {0, 1, 3, 64, 2000};
  for (int threads = 1; threads <= 3; threads++) {
    ljr_threadpool *pool = ljr_threadpool_new(threads);
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
      for (size_t b = 0; b < sizeof grains / sizeof *grains; b++)
        for (int parts = 1; parts <= 3; parts++)
          for (int rep = 0; rep < 20; rep++) {
            bool alone = threads == 1 || parts == 1; /* one call over everything */
            pool_job j = {.runs = calloc((size_t)ns[a], sizeof(atomic_int)), .n = ns[a], .grain = alone ? 0 : grains[b]};
            ljr_threadpool_run(pool, count_tasks, &j, j.n, parts, grains[b]);
            for (int64_t t = 0; t < j.n; t++) ck_assert_int_eq(atomic_load(&j.runs[t]), 1);
            ck_assert_int_eq(atomic_load(&j.bad_ranges), 0);
            ck_assert_int_eq(atomic_load(&j.calls), alone                ? 1
                                                    : j.grain > 0 ? (j.n + j.grain - 1) / j.grain
                                                                  : ranges(j.n, parts, threads));
            free(j.runs);
          }
    ljr_threadpool_free(pool);
  }
}
END_TEST

/* A chunked job's tasks by thread: each thread's first task, and the threads that have begun
 * one. A thread's first task waits until both have begun, so that neither can run out of its
 * own chunks (and take the other's) before the other has taken its first. */
typedef struct home_job {
  int rep;
  pthread_t caller;
  _Atomic int64_t first[2]; /* the caller's first task, the worker's; -1 until run */
  atomic_int begun;
} home_job;

static _Thread_local int began = -1; /* the job (rep) this thread last began */

static void note_first(void *ctx, int64_t begin, int64_t end) {
  home_job *j = ctx;
  (void)end;
  if (began == j->rep) return;
  began = j->rep;
  int64_t none = -1;
  atomic_compare_exchange_strong(&j->first[pthread_equal(pthread_self(), j->caller) ? 0 : 1], &none, begin);
  atomic_fetch_add(&j->begun, 1);
  while (atomic_load(&j->begun) < 2) ljr_spin_step(0);
}

/* Two threads, 8 chunks of one task: each thread starts on its own half of them (the caller
 * on chunk 0, the worker on chunk 4), so that a balanced job runs the same tasks on the same
 * thread kernel after kernel; an unbalanced one still runs every task (test_pool_chunks). */
START_TEST(test_pool_home_ranges) {
  ljr_threadpool *pool = ljr_threadpool_new(2);
  for (int rep = 0; rep < 20; rep++) {
    home_job j = {.rep = rep, .caller = pthread_self(), .first = {-1, -1}};
    ljr_threadpool_run(pool, note_first, &j, 8, 2, 1);
    ck_assert_int_eq(atomic_load(&j.first[0]), 0);
    ck_assert_int_eq(atomic_load(&j.first[1]), 4);
  }
  ljr_threadpool_free(pool);
}
END_TEST

/* y = x·2^-10 over 2^20 floats on two threads: x's subnormals (2^-130) and the results below
 * the smallest normal number (2^-120·2^-10) are zero where the device flushes subnormals, in
 * both threads' halves, and kept where it does not; the host thread's own mode is untouched. */
START_TEST(test_flush_denormal) {
  enum { N = 1 << 20 };
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  for (int i = 0; i < N; i++) x[i] = i % 3 == 0 ? ldexpf(1, -130) : i % 3 == 1 ? ldexpf(1, -120) : 1.5f;
  for (int flush = 0; flush < 2; flush++) {
    lj_config cfg = lj_config_default();
    cfg.num_threads = 2;
    cfg.flush_denormal = flush;
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    lj_device *d = lj_default_device();
    lj_tensor *t = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(N), x);
    lj_tensor *r = lj_mul_scalar(t, ldexp(1, -10));
    ck_assert_int_eq(lj_tensor_to_host(r, y, N * sizeof *y), LJ_OK);
    ck_assert(!ljb_flushes_subnormals());
    int wrong = 0;
    for (int i = 0; i < N; i++) {
      float want = i % 3 == 2 ? ldexpf(1.5f, -10) : flush ? 0.0f : ldexpf(x[i], -10);
      wrong += y[i] != want;
    }
    ck_assert_int_eq(wrong, 0);
    ck_assert(flush || (y[0] > 0 && y[1] > 0));
    lj_tensor_release(t);
    lj_tensor_release(r);
    lj_shutdown();
  }
  free(x);
  free(y);
}
END_TEST

/* ---- runs on the syncing thread ---------------------------------------------------------- */

static int64_t inline_runs(void) { return lj_counter_value("InlineRuns"); }

/* q = x // y (floor division) on four int32s, synced; whether the sync ran it itself. */
static lj_tensor *divide(lj_device *d, lj_tensor *x, lj_tensor *y, bool want_inline) {
  int64_t before = inline_runs();
  lj_tensor *q = lj_floor_divide(x, y);
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  ck_assert_int_eq(inline_runs(), before + want_inline);
  if (want_inline) ck_assert_uint_eq(atomic_load(&d->queue.done), d->queue.submitted);
  return q;
}

static void check_quotients(lj_tensor *q) {
  int32_t got[4];
  ck_assert_int_eq(lj_tensor_to_host(q, got, sizeof got), LJ_OK);
  ck_assert_int_eq(got[0], 3);
  ck_assert_int_eq(got[1], -3);
  ck_assert_int_eq(got[2], 2);
  ck_assert_int_eq(got[3], 2);
  lj_tensor_release(q);
}

/* A host that waits for every step runs each step itself: a sync made after the host waited
 * for the last job (lj_wait, a read of its outputs) runs its job before it returns, with the
 * values a queued run gives, in the device's floating-point mode and with the host thread's
 * left as it was. A sync after a sync, or after a read of an older job's output, queues its
 * job; so does one while the queue is held back, and any on a process of several devices. A
 * run made at the sync leaves its error for the next barrier, as a queued one does. */
START_TEST(test_runs_on_the_syncing_thread) {
  lj_config cfg = lj_config_default();
  cfg.flush_denormal = true;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
  lj_device *d = lj_default_device();
  lj_tensor *x = lj_tensor_from_host(d, LJ_I32, LJ_SHAPE(4), (int32_t[]){7, -7, 8, 9});
  lj_tensor *y = lj_tensor_from_host(d, LJ_I32, LJ_SHAPE(4), (int32_t[]){2, 3, 3, 4});
  check_quotients(divide(d, x, y, false)); /* no wait before the first */
  for (int step = 0; step < 3; step++) check_quotients(divide(d, x, y, true));

  lj_tensor *q1 = divide(d, x, y, true), *q2 = divide(d, x, y, false); /* no wait between */
  check_quotients(q2);
  lj_tensor *q3 = divide(d, x, y, true), *q4 = divide(d, x, y, false);
  check_quotients(q3); /* an older job's output */
  lj_tensor *q5 = divide(d, x, y, false);
  check_quotients(q1);
  check_quotients(q4);
  check_quotients(q5);
  lj_tensor *q6 = divide(d, x, y, true), *q7 = divide(d, x, y, false);
  ck_assert_int_eq(lj_wait(d), LJ_OK); /* a wait without a read */

  lj_tensor *zero = lj_tensor_from_host(d, LJ_I32, LJ_SHAPE(4), (int32_t[]){2, 0, 3, 4});
  lj_tensor *bad = divide(d, x, zero, true);
  ck_assert_int_eq(lj_wait(d), LJ_ERR_RUNTIME);
  tu_expect_error(LJ_ERR_RUNTIME, "div_floor", "integer division by zero", NULL);
  int32_t got[4];
  ck_assert_int_eq(lj_tensor_to_host(bad, got, sizeof got), LJ_ERR_RUNTIME);
  tu_expect_error(LJ_ERR_RUNTIME, "not computed", NULL);
  lj_tensor_release(bad);
  lj_tensor_release(zero);
  check_quotients(q6);
  check_quotients(q7);

  ck_assert_int_eq(lj_wait(d), LJ_OK);
  ljr_queue_pause(d, true);
  lj_tensor *held = divide(d, x, y, false);
  ck_assert_uint_lt(atomic_load(&d->queue.done), d->queue.submitted);
  ljr_queue_pause(d, false);
  check_quotients(held);

  /* 2^-120 * 2^-10 is subnormal: flushed to zero */
  lj_tensor *small = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(2), (float[]){ldexpf(1, -120), 1.5f});
  for (int step = 0; step < 2; step++) {
    int64_t before = inline_runs();
    lj_tensor *r = lj_mul_scalar(small, ldexp(1, -10));
    float v[2];
    ck_assert_int_eq(lj_tensor_to_host(r, v, sizeof v), LJ_OK);
    ck_assert_int_eq(inline_runs(), before + 1);
    ck_assert(v[0] == 0.0f && v[1] == ldexpf(1.5f, -10));
    ck_assert(!ljb_flushes_subnormals());
    lj_tensor_release(r);
  }
  lj_tensor_release(small);
  lj_tensor_release(x);
  lj_tensor_release(y);

  lj_shutdown();
  cfg.num_devices = 2;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
  d = lj_default_device();
  x = lj_tensor_from_host(d, LJ_I32, LJ_SHAPE(4), (int32_t[]){7, -7, 8, 9});
  y = lj_tensor_from_host(d, LJ_I32, LJ_SHAPE(4), (int32_t[]){2, 3, 3, 4});
  for (int step = 0; step < 3; step++) check_quotients(divide(d, x, y, false));
  lj_tensor_release(x);
  lj_tensor_release(y);
}
END_TEST

/* Two steps of a·a (512 × 512, whose GEMM routine packs over a MiB of panels on its stack),
 * each read back, on the calling thread; how many ran there (InlineRuns) and the last's C. */
typedef struct squares {
  lj_tensor *a;
  float *c;
  int64_t ran_here;
} squares;

static void *square_twice(void *arg) {
  squares *s = arg;
  int64_t before = inline_runs();
  for (int step = 0; step < 2; step++) {
    lj_tensor *c = lj_matmul(s->a, s->a);
    ck_assert_int_eq(lj_tensor_to_host(c, s->c, 512 * 512 * sizeof *s->c), LJ_OK);
    lj_tensor_release(c);
  }
  s->ran_here = inline_runs() - before;
  return NULL;
}

/* A host thread with a small stack (512 KiB, where a kernel may take a few MiB: its LOCAL
 * slots, a GEMM routine's packed panels) that waits for every step hands its steps to the
 * executor all the same, and gets the values a thread of the usual stack computes itself. */
START_TEST(test_small_stack_hands_jobs_over) {
  lj_device *d = lj_default_device();
  lj_manual_seed(d, 3);
  squares big = {lj_randn(d, LJ_F32, LJ_SHAPE(512, 512)), malloc(512 * 512 * sizeof(float)), 0};
  squares small = {big.a, malloc(512 * 512 * sizeof(float)), 0};
  square_twice(&big);
  ck_assert_int_eq(big.ran_here, 1); /* the second, the host having waited for the first */
  pthread_attr_t attr;
  pthread_t th;
  ck_assert_int_eq(pthread_attr_init(&attr), 0);
  ck_assert_int_eq(pthread_attr_setstacksize(&attr, 512 << 10), 0);
  ck_assert_int_eq(pthread_create(&th, &attr, square_twice, &small), 0);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  pthread_attr_destroy(&attr);
  ck_assert_int_eq(small.ran_here, 0);
  ck_assert_mem_eq(small.c, big.c, 512 * 512 * sizeof(float));
  lj_tensor_release(big.a);
  free(big.c);
  free(small.c);
}
END_TEST

/* ---- host threads ------------------------------------------------------------------------ */

typedef struct trainer {
  int device;
  float bits[17 * 20 + 17 + 3 * 17 + 3]; /* w1, b1, w2, b2 after training */
} trainer;

/* Six SGD steps of a small classifier on its device, with a read each step (its own scopes,
 * errors and compiles on this thread). */
static void *train_on(void *arg) {
  trainer *t = arg;
  lj_device *d = lj_device_get(t->device);
  lj_manual_seed(d, 11);
  lj_tensor *w1, *b1, *w2, *b2;
  ck_assert_int_eq(lj_nn_linear_init(d, LJ_F32, 20, 17, true, &w1, &b1), LJ_OK);
  ck_assert_int_eq(lj_nn_linear_init(d, LJ_F32, 17, 3, true, &w2, &b2), LJ_OK);
  lj_tensor *params[4] = {w1, b1, w2, b2};
  float xs[8 * 20];
  int64_t ys[8];
  for (int i = 0; i < 8 * 20; i++) xs[i] = (float)((i * 37) % 19) / 9 - 1;
  for (int i = 0; i < 8; i++) ys[i] = i % 3;
  lj_tensor *x = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(8, 20), xs), *y = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(8), ys);
  lj_optim *opt = lj_optim_sgd(4, params, (lj_sgd_options){.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 6; step++) {
    lj_scope_begin();
    lj_optim_zero_grad(opt);
    lj_tensor *loss = lj_cross_entropy(lj_linear(lj_relu(lj_linear(x, w1, b1)), w2, b2), y, LJ_REDUCE_MEAN);
    ck_assert_int_eq(lj_backward(loss), LJ_OK);
    ck_assert(isfinite(lj_item(loss)));
    ck_assert_int_eq(lj_optimizer_step(opt, true), LJ_OK);
    lj_scope_end();
  }
  float *at = t->bits;
  for (int i = 0; i < 4; i++) {
    int64_t n = lj_tensor_numel(params[i]);
    ck_assert_int_le(at + n - t->bits, (long)(sizeof t->bits / sizeof *t->bits));
    ck_assert_int_eq(lj_tensor_to_host(params[i], at, (size_t)n * sizeof *at), LJ_OK);
    at += n;
    lj_tensor_release(params[i]);
  }
  lj_optim_free(opt);
  lj_tensor_release(x);
  lj_tensor_release(y);
  return NULL;
}

/* Two host threads, each training on a device of its own at the same time (compiling,
 * syncing and reading concurrently): each ends with the bits one thread alone gets. */
START_TEST(test_threads_on_separate_devices) {
  lj_config cfg = lj_config_default();
  cfg.num_devices = 2;
  cfg.num_threads = 1;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
  trainer alone = {.device = 0};
  train_on(&alone);
  lj_shutdown();
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
  trainer both[2] = {{.device = 0}, {.device = 1}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, train_on, &both[i]), 0);
  for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < 2; i++) ck_assert_mem_eq(both[i].bits, alone.bits, sizeof alone.bits);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_async");
  TCase *tc = tu_tcase("async");
  tcase_add_test(tc, test_trace_while_running);
  tcase_add_test(tc, test_reads_wait);
  tcase_add_test(tc, test_shutdown_waits);
  tcase_add_test(tc, test_pool_chunks);
  tcase_add_test(tc, test_pool_home_ranges);
  tcase_add_test(tc, test_flush_denormal);
  tcase_add_test(tc, test_runs_on_the_syncing_thread);
  tcase_add_test(tc, test_small_stack_hands_jobs_over);
  tcase_add_test(tc, test_threads_on_separate_devices);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
