/* test_util.h — helpers shared by the test suites: deterministic inputs of every dtype,
 * reading tensors back, and the central check: compute tensors with compiled code and with
 * the reference interpreter and compare them element by element. */
#ifndef LJ_TEST_UTIL_H
#define LJ_TEST_UTIL_H

#include <check.h>
#include <lazyjit.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kinds of generated values. */
typedef enum tu_values {
  TU_ANY,      /* mixed signs, modest magnitudes */
  TU_POSITIVE, /* > 0 (log, sqrt, ...) */
  TU_UNIT,     /* in (-1, 1) */
  TU_NONZERO,  /* integers: never 0 (divisors) */
  TU_SPECIAL   /* floats: NaN, infinities, signed zeros mixed in */
} tu_values;

extern const lj_dtype tu_all_dtypes[LJ_NUM_DTYPES];

/* A tensor of deterministic values (seeded) on the default device. */
lj_tensor *tu_tensor(lj_dtype dt, int ndim, const int64_t *shape, tu_values kind, uint64_t seed);
/* Host copy of t as doubles (malloc'd; numel in *n). Fails the test on error. */
double *tu_read(lj_tensor *t, int64_t *n);

/* Computes ts[0..n) both ways and asserts they agree: integers and bool exactly, floats
 * within rtol/atol scaled for the dtype (NaN matches NaN, infinities must match). */
void tu_check_interp(int n, lj_tensor *const *ts, double rtol);
/* The same with an absolute tolerance too (for long accumulations that cancel). */
void tu_check_interp_tol(int n, lj_tensor *const *ts, double rtol, double atol);
/* Shorthand for one tensor, which it then releases. */
void tu_check1(lj_tensor *t, double rtol);
/* The default tolerance of a dtype for exact-ish ops (bf16/f16 round in between). */
double tu_rtol(lj_dtype dt);

/* The whole file (malloc'd, NUL-terminated; its size in *size if size is not NULL), or NULL
 * when it cannot be read. */
char *tu_read_file(const char *path, size_t *size);

/* Starts the runtime with cfg, saving every graph the default device runs as LJ_SAVE_TENSORS_FMT
 * fmt ("asm": its kernels' assembly, "llvm": their optimized IR) to a fresh file whose name
 * goes to path (cap bytes); and what was saved (malloc'd), the files then removed. */
void tu_init_saving(lj_config cfg, const char *fmt, char *path, size_t cap);
char *tu_take_saved(const char *path);

/* Starts the runtime with the default configuration but `threads` threads (a test's loop over
 * one and two). */
void tu_init_threads(int threads);

/* Whether directory dir holds a file whose name ends with suffix and, unless text is NULL,
 * that contains text (a dump's kernels.txt saying how a kernel was lowered). */
bool tu_dir_has(const char *dir, const char *suffix, const char *text);

/* Whether this host runs code compiled for cpu (NULL: the host; "haswell" needs AVX2 and FMA,
 * "znver4" a Zen 4's AVX-512 extensions, "x86-64" any x86-64): the tests that compile for
 * other targets too. */
bool tu_host_runs(const char *cpu);

/* Removes directory dir and everything in it; fails the test when it cannot. */
void tu_remove_dir(const char *dir);

/* Runs a shell command line; its exit status (-1 if it did not exit), and its standard output
 * (the command line redirects stderr there if wanted) in *out, malloc'd. */
int tu_command(const char *cmd, char **out);

/* Uniform in [lo, hi], from the 64-bit LCG at *state (advanced): the randomized tests'
 * generator, so a seed replays the same cases. */
int64_t tu_pick(uint64_t *state, int64_t lo, int64_t hi);

/* Asserts that the last call failed with status st and that the message contains every one
 * of the NULL-terminated substrings; then clears the error. */
void tu_expect_error(lj_status st, ...);

/* A test case with a generous timeout whose tests shut the runtime down afterwards. */
TCase *tu_tcase(const char *name);
/* Runs the suite (forking off for isolation), with the persistent cache off (LJ_CACHE_DIR="")
 * unless a test configures one, and returns the exit code for main. */
int tu_run(Suite *s);

#endif
