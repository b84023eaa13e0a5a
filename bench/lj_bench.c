#define _POSIX_C_SOURCE 200809L
/* lj_bench.c — lj-bench: times the named workloads of workloads.c through the public API.
 *
 * Each workload runs in a fresh runtime: one cold step (its compile time is the CompileTime
 * metric), untimed steps for WARMUP_S, then N timed steps. A step is recorded (trace µs),
 * synced (sync µs: collection, hashing, cache lookup, buffer binding, queuing the run, or the
 * run's hand-over when the sync makes it itself, its kernels not counted) and waited for; the
 * kernels' run time is the ExecuteTime metric, the step's wall time runs from the first op to
 * the end of the wait (it includes handing the run to the device's executor thread and back
 * where the sync queued it). Then the same workload runs again with LJ_SYNC_TENSORS_OPBYOP, every op
 * an executable of its own, for its wall time per step. These runs never use the persistent
 * cache: they measure compiles.
 *
 * For the training steps it also measures the time to the first step of a fresh process:
 * lj-bench starts itself (--first-step-child NAME), which starts lazyjit, sets the workload up,
 * runs one step and reports the moment it ended; the time counts from the spawn. Cold: the
 * process's persistent cache directory is empty (it compiles and writes the entries; the GEMM
 * routines come from the library when it was built on this machine); warm: the same directory
 * again (it loads them); cold, routines compiled: an empty directory and
 * LJ_PRECOMPILED_ROUTINES=0, as on a machine the library was not built for. Median of three
 * of each.
 *
 *   lj-bench [--filter SUBSTR] [--threads N] [--runs N] [--json FILE] [--no-opbyop]
 *            [--no-first-step] [--list]
 */
#include "workloads.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Seconds of untimed steps between a workload's cold step and its timed ones. */
#define WARMUP_S 0.2

typedef struct options {
  const char *filter, *json;
  const char *first_step_child; /* the workload a child started by first_step runs */
  int threads, runs;
  bool opbyop, first_step;
} options;

typedef struct result {
  double compile_ms;        /* the cold step's CompileTime */
  int kernels;              /* kernels the cold step compiled */
  double trace_us, sync_us; /* medians: recording a step; the lj_sync call (it queues the run) */
  double run_ms, run_min_ms;  /* the kernels' time: median and minimum */
  double step_ms;           /* wall time of a whole step (trace, sync, run), median */
  double rate;              /* GB/s or GFLOP/s at the minimum run time */
  const char *unit;
  double opbyop_ms;         /* wall time per step op by op, median (0: not run) */
  double first_cold_ms, first_warm_ms; /* time to the first step of a fresh process (0: not run) */
  double first_compile_ms;  /* the cold one's CompileTime: everything it compiled */
  double first_routines_ms; /* cold with its GEMM routines compiled (LJ_PRECOMPILED_ROUTINES=0) */
  double first_routines_compile_ms; /* that one's CompileTime, the routines' too */
} result;

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

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

/* Starts lazyjit; without the persistent cache unless `cached` (then as LJ_CACHE_DIR says). */
static bool start(const options *o, bool opbyop, bool cached) {
  lj_config cfg = lj_config_default();
  if (o->threads > 0) cfg.num_threads = o->threads;
  cfg.sync_tensors_opbyop = opbyop;
  if (!cached) cfg.cache_dir = "";
  return lj_init(&cfg) == LJ_OK;
}

/* Timings of one step. */
typedef struct sample {
  double trace, sync, exec, step, compile;
} sample;

static bool step(const workload *w, bench_state *s, sample *t) {
  for (int i = 0; i < s->nout; i++) lj_tensor_release(s->out[i]);
  s->nout = 0;
  memset(s->out, 0, sizeof s->out);
  lj_clear_error();
  double c0 = metric("CompileTime"), e0 = metric("ExecuteTime"), t0 = now();
  lj_scope_begin();
  w->step(w, s);
  lj_scope_end();
  double traced = now();
  /* a step the host waits for runs inside the sync (InlineRuns): its kernels are not the
   * sync's own cost */
  int64_t inl = lj_counter_value("InlineRuns");
  double e1 = metric("ExecuteTime"), t1 = now();
  if (lj_last_status() != LJ_OK || lj_sync(s->d) != LJ_OK) return false;
  double t2 = now();
  double in_sync = lj_counter_value("InlineRuns") > inl ? metric("ExecuteTime") - e1 : 0;
  double waits = now();
  if (lj_wait(s->d) != LJ_OK) return false; /* the sync may only have queued the run */
  double t3 = now();
  t->trace = traced - t0;
  t->sync = t2 - t1 - in_sync;
  t->exec = metric("ExecuteTime") - e0;
  t->step = t3 - t0 - (t1 - traced) - (waits - t2); /* not the bench's own reads of the counters */
  t->compile = metric("CompileTime") - c0;
  return true;
}

/* Runs w once cold and `runs` times timed in a fresh runtime; fills r (or just
 * r->opbyop_ms in op-by-op mode). */
static bool measure(const options *o, const workload *w, bool opbyop, int runs, result *r) {
  if (!start(o, opbyop, false)) return false;
  bench_state s = {.d = lj_default_device()};
  sample t;
  bool ok = w->setup(w, &s);
  double k0 = (double)lj_counter_value("CompiledKernels");
  ok = ok && step(w, &s, &t);
  if (ok && !opbyop) {
    r->compile_ms = t.compile * 1e3;
    r->kernels = (int)((double)lj_counter_value("CompiledKernels") - k0);
  }
  /* untimed steps for WARMUP_S after the cold one: a fresh runtime's threads start on the
   * CPU of the thread that made them, and the kernel spreads them over the CPUs only after
   * a few milliseconds, in which a short step can run at about its one-thread time */
  for (double t0 = now(); ok && now() - t0 < WARMUP_S;) ok = step(w, &s, &t);
  double *v[4];
  for (int k = 0; k < 4; k++) v[k] = calloc((size_t)runs, sizeof(double));
  for (int i = 0; ok && i < runs; i++) {
    ok = step(w, &s, &t);
    v[0][i] = t.trace;
    v[1][i] = t.sync;
    v[2][i] = t.exec;
    v[3][i] = t.step;
  }
  if (ok && opbyop) {
    r->opbyop_ms = median(v[3], runs) * 1e3;
  } else if (ok) {
    r->trace_us = median(v[0], runs) * 1e6;
    r->sync_us = median(v[1], runs) * 1e6;
    r->run_ms = median(v[2], runs) * 1e3;
    r->run_min_ms = v[2][0] * 1e3;
    r->step_ms = median(v[3], runs) * 1e3;
    double best = v[2][0] > 0 ? v[2][0] : 1e-9;
    r->unit = w->bytes > 0 ? "GB/s" : w->flops > 0 ? "GFLOP/s" : "";
    r->rate = (w->bytes > 0 ? w->bytes : w->flops) / best * 1e-9;
  }
  if (!ok) fprintf(stderr, "lj-bench: %s%s: %s\n", w->name, opbyop ? " (op by op)" : "", lj_last_error());
  for (int k = 0; k < 4; k++) free(v[k]);
  bench_state_clear(&s);
  lj_shutdown();
  return ok;
}

/* The child's side of first_step: start, set up, one step; prints when it ended (seconds of
 * CLOCK_MONOTONIC), what it compiled and loaded, and its CompileTime in ms, and exits at once. */
static int first_step_child(const options *o) {
  const workload *w = NULL;
  for (int k = 0; k < bench_nworkloads; k++)
    if (!strcmp(bench_workloads[k].name, o->first_step_child)) w = &bench_workloads[k];
  bench_state s = {0};
  sample t;
  if (!w || !start(o, false, true) || !(s.d = lj_default_device()) || !w->setup(w, &s) || !step(w, &s, &t)) {
    fprintf(stderr, "lj-bench: first step of %s: %s\n", o->first_step_child, w ? lj_last_error() : "no such workload");
    return 1;
  }
  int64_t samples = 0;
  double compile_s = 0;
  lj_metric_data("CompileTime", &samples, &compile_s);
  printf("%.9f %lld %lld %.3f\n", now(), (long long)lj_counter_value("UncachedCompile"),
         (long long)lj_counter_value("PersistentCacheHit"), compile_s * 1e3);
  fflush(stdout);
  _exit(0);
}

/* Spawns a child that runs w's first step with its persistent cache in dir, with `more` in
 * its environment when not NULL; the milliseconds from the spawn to the end of that step, or
 * -1. *compiles and *hits: the child's counters; *compile_ms: its CompileTime. */
static double spawn_first_step(const options *o, const workload *w, const char *dir, char *more,
                               long long *compiles, long long *hits, double *compile_ms) {
  char self[4096], threads[16], env[4200];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return -1;
  self[n] = 0;
  snprintf(threads, sizeof threads, "%d", o->threads);
  char *argv[] = {self, "--first-step-child", (char *)w->name, "--threads", threads, NULL};
  int nenv = 0;
  while (environ[nenv]) nenv++;
  char **envp = calloc((size_t)nenv + 3, sizeof *envp);
  int k = 0;
  for (int i = 0; i < nenv; i++)
    if (strncmp(environ[i], "LJ_CACHE_DIR=", 13) != 0) envp[k++] = environ[i];
  snprintf(env, sizeof env, "LJ_CACHE_DIR=%s", dir);
  envp[k++] = env;
  if (more) envp[k++] = more;
  int fds[2];
  if (pipe(fds) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  double t0 = now();
  int err = posix_spawn(&pid, self, &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  free(envp);
  close(fds[1]);
  double end = -1;
  FILE *f = fdopen(fds[0], "r");
  if (!err && (!f || fscanf(f, "%lf %lld %lld %lf", &end, compiles, hits, compile_ms) != 4)) end = -1;
  if (f) fclose(f);
  int st = 0;
  if (!err) waitpid(pid, &st, 0);
  return !err && end > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? (end - t0) * 1e3 : -1;
}

static void remove_dir(const char *dir) {
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "lj-bench: cannot remove %s\n", dir);
}

/* Time to the first step of w in fresh processes, cold, warm and cold with the routines
 * compiled, and the cold ones' compile times (median of three each). */
static bool first_step(const options *o, const workload *w, result *r) {
  static char compile_routines[] = "LJ_PRECOMPILED_ROUTINES=0";
  double cold[3], warm[3], compile[3], routines[3], routines_compile[3], unused;
  for (int i = 0; i < 3; i++) {
    char dir[] = "/tmp/lj-bench-cache-XXXXXX", dir2[] = "/tmp/lj-bench-cache-XXXXXX";
    if (!mkdtemp(dir)) return false;
    if (!mkdtemp(dir2)) {
      remove_dir(dir);
      return false;
    }
    long long cc = -1, ch = -1, wc = -1, wh = -1, rc = -1, rh = -1;
    cold[i] = spawn_first_step(o, w, dir, NULL, &cc, &ch, &compile[i]);
    warm[i] = spawn_first_step(o, w, dir, NULL, &wc, &wh, &unused);
    routines[i] = spawn_first_step(o, w, dir2, compile_routines, &rc, &rh, &routines_compile[i]);
    remove_dir(dir);
    remove_dir(dir2);
    if (cold[i] < 0 || warm[i] < 0 || routines[i] < 0 || cc <= 0 || wc != 0 || wh != cc || rc != cc) {
      fprintf(stderr,
              "lj-bench: first step of %s: cold run compiled %lld, warm run compiled %lld and loaded %lld, "
              "cold run compiling its routines compiled %lld\n",
              w->name, cc, wc, wh, rc);
      return false;
    }
  }
  r->first_cold_ms = median(cold, 3);
  r->first_warm_ms = median(warm, 3);
  r->first_compile_ms = median(compile, 3);
  r->first_routines_ms = median(routines, 3);
  r->first_routines_compile_ms = median(routines_compile, 3);
  return true;
}

static void usage(FILE *f, const char *argv0) {
  fprintf(f,
          "usage: %s [--filter SUBSTR] [--threads N] [--runs N] [--json FILE] [--no-opbyop]\n"
          "          [--no-first-step] [--list]\n"
          "  --filter SUBSTR  only the workloads whose name contains SUBSTR\n"
          "  --threads N      threads per device (default: LJ_NUM_THREADS or the online CPUs)\n"
          "  --runs N         timed steps after the cold one and the warm-up (default 20; op by op a\n"
          "                   quarter)\n"
          "  --json FILE      also write the results as JSON\n"
          "  --no-opbyop      skip the op-by-op runs\n"
          "  --no-first-step  skip the time to the first training step of fresh processes\n"
          "  --list           list the workloads\n",
          argv0);
}

static bool parse(int argc, char **argv, options *o) {
  *o = (options){.runs = 20, .opbyop = true, .first_step = true};
  for (int i = 1; i < argc; i++) {
    bool more = i + 1 < argc;
    if (!strcmp(argv[i], "--filter") && more) o->filter = argv[++i];
    else if (!strcmp(argv[i], "--threads") && more) o->threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--runs") && more) o->runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json") && more) o->json = argv[++i];
    else if (!strcmp(argv[i], "--no-opbyop")) o->opbyop = false;
    else if (!strcmp(argv[i], "--no-first-step")) o->first_step = false;
    else if (!strcmp(argv[i], "--first-step-child") && more) o->first_step_child = argv[++i];
    else if (!strcmp(argv[i], "--list")) {
      for (int k = 0; k < bench_nworkloads; k++) printf("%-24s %s\n", bench_workloads[k].name, bench_workloads[k].what);
      exit(0);
    } else if (!strcmp(argv[i], "--help")) {
      usage(stdout, argv[0]);
      exit(0);
    } else {
      usage(stderr, argv[0]);
      return false;
    }
  }
  if (o->runs < 1) o->runs = 1;
  return true;
}

static void json_result(FILE *f, const workload *w, const result *r, bool first) {
  fprintf(f,
          "%s\n  {\"name\": \"%s\", \"compile_ms\": %.3f, \"kernels\": %d, \"trace_us\": %.2f, "
          "\"sync_us\": %.2f, \"run_ms\": %.4f, \"run_min_ms\": %.4f, \"step_ms\": %.4f, \"rate\": %.3f, "
          "\"unit\": \"%s\", \"opbyop_ms\": %.4f, \"first_step_cold_ms\": %.2f, \"first_step_warm_ms\": %.2f, "
          "\"first_step_compile_ms\": %.2f, \"first_step_routines_ms\": %.2f, \"first_step_routines_compile_ms\": %.2f",
          first ? "" : ",", w->name, r->compile_ms, r->kernels, r->trace_us, r->sync_us, r->run_ms, r->run_min_ms,
          r->step_ms, r->rate, r->unit, r->opbyop_ms, r->first_cold_ms, r->first_warm_ms, r->first_compile_ms,
          r->first_routines_ms, r->first_routines_compile_ms);
  /* the product's shape, for a BLAS peer (bench/peers) to time the same one */
  if (bench_is_gemm(w))
    fprintf(f, ", \"gemm\": {\"m\": %lld, \"n\": %lld, \"k\": %lld, \"ta\": %d, \"tb\": %d}}",
            (long long)w->n[0], (long long)w->n[1], (long long)w->n[2], !!(w->n[3] & GEMM_TA),
            !!(w->n[3] & GEMM_TB));
  else
    fputc('}', f);
}

int main(int argc, char **argv) {
  options o;
  if (!parse(argc, argv, &o)) return 2;
  if (o.first_step_child) return first_step_child(&o);
  if (!start(&o, false, false)) {
    fprintf(stderr, "lj-bench: %s\n", lj_last_error());
    return 1;
  }
  int threads = lj_config_default().num_threads;
  if (o.threads > 0) threads = o.threads;
  lj_shutdown();
  FILE *jf = o.json ? fopen(o.json, "w") : NULL;
  if (o.json && !jf) {
    perror(o.json);
    return 1;
  }
  printf("lj-bench: %d thread(s), %d timed steps after a cold one and %.1f s of warm-up (op by op: %d)\n", threads,
         o.runs, WARMUP_S, o.opbyop ? (o.runs + 3) / 4 : 0);
  printf("%-24s %9s %4s %9s %8s %9s %9s %9s %14s %10s\n", "workload", "compile", "krn", "trace", "sync",
         "run", "min", "step", "rate", "op-by-op");
  printf("%-24s %9s %4s %9s %8s %9s %9s %9s %14s %10s\n", "", "ms", "", "us", "us", "ms", "ms", "ms", "", "ms");
  if (jf) fprintf(jf, "{\"threads\": %d, \"runs\": %d, \"results\": [", threads, o.runs);
  int status = 0;
  bool first = true;
  result *results = calloc((size_t)bench_nworkloads, sizeof *results);
  for (int k = 0; k < bench_nworkloads; k++) {
    const workload *w = &bench_workloads[k];
    if (o.filter && !strstr(w->name, o.filter)) continue;
    result r = {0};
    if (!measure(&o, w, false, o.runs, &r) || (o.opbyop && !measure(&o, w, true, (o.runs + 3) / 4, &r)) ||
        (o.first_step && strstr(w->name, "_step_") && !first_step(&o, w, &r))) {
      status = 1;
      continue;
    }
    results[k] = r;
    char rate[32] = "";
    if (*r.unit) snprintf(rate, sizeof rate, "%.1f %s", r.rate, r.unit);
    printf("%-24s %9.1f %4d %9.1f %8.1f %9.3f %9.3f %9.3f %14s %10.3f\n", w->name, r.compile_ms, r.kernels,
           r.trace_us, r.sync_us, r.run_ms, r.run_min_ms, r.step_ms, rate, r.opbyop_ms);
    fflush(stdout);
    if (jf) json_result(jf, w, &r, first);
    first = false;
  }
  if (jf) {
    fprintf(jf, "\n]}\n");
    fclose(jf);
  }
  bool header = false;
  for (int k = 0; k < bench_nworkloads; k++) {
    if (results[k].first_cold_ms <= 0) continue;
    if (!header)
      printf("\ntime to the first step of a fresh process (spawn, lj_init, setup, compile or load, run): cold\n"
             "(empty persistent cache), warm (the cache it left), cold compiling its GEMM routines\n"
             "(LJ_PRECOMPILED_ROUTINES=0); and the cold ones' compile times\n%-24s %9s %9s %9s %11s %11s\n",
             "workload", "cold ms", "warm ms", "rtn ms", "compile ms", "rtn cmp ms");
    header = true;
    printf("%-24s %9.1f %9.1f %9.1f %11.1f %11.1f\n", bench_workloads[k].name, results[k].first_cold_ms,
           results[k].first_warm_ms, results[k].first_routines_ms, results[k].first_compile_ms,
           results[k].first_routines_compile_ms);
  }
  free(results);
  return status;
}
