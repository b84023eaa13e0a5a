/* test_util.c — shared test helpers (see test_util.h). The interpreter check reaches into the
 * library's internals: it collects the pending graph of the tensors exactly as a sync would,
 * runs it through the reference interpreter, then syncs and compares. */
#include "test_util.h"

#include "frontend/frontend.h"
#include "graph/graph.h"

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/wait.h>
#include <unistd.h>

const lj_dtype tu_all_dtypes[LJ_NUM_DTYPES] = {LJ_F32, LJ_F64, LJ_BF16, LJ_F16, LJ_I8,
                                               LJ_U8,  LJ_I32, LJ_I64,  LJ_BOOL, LJ_I16};

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static double uniform(uint64_t *s) { return (double)(next(s) >> 11) * 0x1p-53; }

static double float_value(tu_values kind, uint64_t *s) {
  switch (kind) {
  case TU_POSITIVE: return 0.05 + 4.95 * uniform(s);
  case TU_UNIT: return -0.99 + 1.98 * uniform(s);
  case TU_SPECIAL: {
    static const double special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-3};
    if (next(s) % 3 == 0) return special[next(s) % (sizeof special / sizeof *special)];
    return -8 + 16 * uniform(s);
  }
  default: return -4 + 8 * uniform(s);
  }
}

static int64_t int_value(lj_dtype dt, tu_values kind, uint64_t *s) {
  bool sgn = dt != LJ_U8;
  switch (kind) {
  case TU_POSITIVE: return 1 + (int64_t)(next(s) % 20);
  case TU_NONZERO: {
    int64_t v = 1 + (int64_t)(next(s) % 9);
    return sgn && next(s) % 2 ? -v : v;
  }
  default: return sgn ? (int64_t)(next(s) % 101) - 50 : (int64_t)(next(s) % 101);
  }
}

lj_tensor *tu_tensor(lj_dtype dt, int ndim, const int64_t *shape, tu_values kind, uint64_t seed) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  size_t sz = lj_dtype_size(dt);
  void *buf = calloc((size_t)n + 1, sz);
  uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 12345;
  for (int64_t i = 0; i < n; i++) {
    if (dt == LJ_BOOL)
      ljg_store_i64(dt, buf, i, (int64_t)(next(&s) % 2));
    else if (ljg_dtype_is_float(dt))
      ljg_store_f64(dt, buf, i, float_value(kind, &s));
    else
      ljg_store_i64(dt, buf, i, int_value(dt, kind, &s));
  }
  lj_tensor *t = lj_tensor_from_host(lj_default_device(), dt, ndim, shape, buf);
  free(buf);
  ck_assert_msg(t != NULL, "tu_tensor: %s", lj_last_error());
  return t;
}

double *tu_read(lj_tensor *t, int64_t *n) {
  *n = lj_tensor_numel(t);
  lj_dtype dt = lj_tensor_dtype(t);
  size_t bytes = (size_t)*n * lj_dtype_size(dt);
  void *raw = malloc(bytes + 8);
  ck_assert_msg(lj_tensor_to_host(t, raw, bytes) == LJ_OK, "tu_read: %s", lj_last_error());
  double *out = malloc(((size_t)*n + 1) * sizeof *out);
  for (int64_t i = 0; i < *n; i++) out[i] = ljg_load_f64(dt, raw, i);
  free(raw);
  return out;
}

double tu_rtol(lj_dtype dt) {
  switch (dt) {
  case LJ_F32: return 2e-6;
  case LJ_F64: return 1e-13;
  case LJ_BF16: return 1.6e-2;
  case LJ_F16: return 2e-3;
  default: return 0;
  }
}

static bool close_enough(lj_dtype dt, double a, double b, double rtol, double atol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  if (!ljg_dtype_is_float(dt)) return a == b;
  double scale = fmax(fabs(a), fabs(b));
  return fabs(a - b) <= rtol * scale + atol;
}

int64_t tu_pick(uint64_t *state, int64_t lo, int64_t hi) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return lo + (int64_t)((*state >> 33) % (uint64_t)(hi - lo + 1));
}

void tu_check_interp(int n, lj_tensor *const *ts, double rtol) { tu_check_interp_tol(n, ts, rtol, -1); }

void tu_check_interp_tol(int n, lj_tensor *const *ts, double rtol, double atol) {
  ck_assert_msg(n > 0 && ts[0], "tu_check_interp: no tensors (%s)", lj_last_error());
  struct lj_device *d = ts[0]->dev;
  ljg_node **nodes = calloc((size_t)n, sizeof *nodes);
  for (int i = 0; i < n; i++) {
    ck_assert_msg(ts[i] != NULL, "tensor %d is NULL: %s", i, lj_last_error());
    nodes[i] = ljf_node(ts[i]);
  }
  ljg_graph g;
  ljg_graph_init(&g);
  ljg_binding_vec binds = {0};
  ljg_collect(&d->trace, n, nodes, &g, &binds);
  const void **inputs = calloc((size_t)g.nparams + 1, sizeof *inputs);
  for (int p = 0; p < g.nparams; p++) {
    if (binds.a[p].buf) ck_assert_int_eq(ljr_buffer_wait(binds.a[p].buf, "tu_check_interp"), LJ_OK);
    inputs[p] = binds.a[p].buf ? binds.a[p].buf->data : NULL;
  }
  void **outs = calloc((size_t)n, sizeof *outs);
  for (int i = 0; i < n; i++)
    outs[i] = calloc((size_t)lj_tensor_numel(ts[i]) + 1, lj_dtype_size(lj_tensor_dtype(ts[i])));
  lj_status ist = ljg_interpret(&g, (const void *const *)inputs, binds.a, outs);
  char *text = ljg_graph_text(&g, binds.a);
  ck_assert_msg(ist == LJ_OK, "interpreter: %s\n%s", lj_last_error(), text);
  lj_status st = lj_sync_tensors(n, ts);
  ck_assert_msg(st == LJ_OK, "sync: %s\n%s", lj_last_error(), text);
  for (int i = 0; i < n; i++) {
    lj_dtype dt = lj_tensor_dtype(ts[i]);
    int64_t cnt;
    double *got = tu_read(ts[i], &cnt);
    double tol = rtol > 0 ? rtol : tu_rtol(dt);
    double abs_tol = atol >= 0 ? atol : tol * 1e-2;
    for (int64_t k = 0; k < cnt; k++) {
      double want = ljg_load_f64(dt, outs[i], k);
      if (!close_enough(dt, got[k], want, tol, abs_tol)) {
        fprintf(stderr, "%s", text); /* the graph: too long for a check message */
        ck_abort_msg("tensor %d (%s), element %lld: compiled %.17g, interpreter %.17g (rtol %g); the graph "
                     "is on stderr", i, lj_dtype_name(dt), (long long)k, got[k], want, tol);
      }
    }
    free(got);
  }
  free(text);
  for (int i = 0; i < n; i++) free(outs[i]);
  free(outs);
  free(inputs);
  free(nodes);
  free(binds.a);
  ljg_graph_free(&g);
}

void tu_check1(lj_tensor *t, double rtol) {
  tu_check_interp(1, &t, rtol);
  lj_tensor_release(t);
}

void tu_expect_error(lj_status st, ...) {
  ck_assert_msg(lj_last_status() == st, "expected %s, got %s (%s)", lj_status_str(st),
                lj_status_str(lj_last_status()), lj_last_error());
  va_list ap;
  va_start(ap, st);
  const char *s;
  while ((s = va_arg(ap, const char *)))
    ck_assert_msg(strstr(lj_last_error(), s), "message '%s' lacks '%s'", lj_last_error(), s);
  va_end(ap);
  lj_clear_error();
}

static void teardown(void) { lj_shutdown(); }

char *tu_read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)(n > 0 ? n : 0) + 1);
  size_t got = fread(s, 1, (size_t)(n > 0 ? n : 0), f);
  s[got] = 0;
  fclose(f);
  if (size) *size = got;
  return s;
}

void tu_init_saving(lj_config cfg, const char *fmt, char *path, size_t cap) {
  snprintf(path, cap, "/tmp/lj_test_asm_%d_XXXXXX", (int)getpid());
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  cfg.save_tensors_file = path;
  cfg.save_tensors_fmt = fmt;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
}

char *tu_take_saved(const char *path) {
  char file[300];
  snprintf(file, sizeof file, "%s.0", path);
  char *text = tu_read_file(file, NULL);
  ck_assert_msg(text != NULL, "nothing saved at %s", file);
  remove(file);
  remove(path);
  return text;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

bool tu_dir_has(const char *dir, const char *suffix, const char *text) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  bool found = false;
  for (struct dirent *e; !found && (e = readdir(d));) {
    size_t n = strlen(e->d_name), m = strlen(suffix);
    found = n >= m && strcmp(e->d_name + n - m, suffix) == 0;
    if (found && text) {
      char path[512];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      char *contents = tu_read_file(path, NULL);
      found = contents && strstr(contents, text);
      free(contents);
    }
  }
  closedir(d);
  return found;
}

void tu_init_threads(int threads) {
  lj_config cfg = lj_config_default();
  cfg.num_threads = threads;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
}

bool tu_host_runs(const char *cpu) {
  if (!cpu) return true;
#if defined(__x86_64__)
  if (strcmp(cpu, "znver4") == 0) /* the AVX-512 of a Zen 4 (its other extensions stay unused) */
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512ifma") &&
           __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bitalg") &&
           __builtin_cpu_supports("avx512vpopcntdq") && __builtin_cpu_supports("avx512bf16") &&
           __builtin_cpu_supports("gfni") && __builtin_cpu_supports("vaes") && __builtin_cpu_supports("vpclmulqdq");
  return strcmp(cpu, "haswell") != 0 || (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
#else
  return false;
#endif
}

void tu_remove_dir(const char *dir) { ck_assert_int_eq(nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0); }

int tu_command(const char *cmd, char **out) {
  FILE *p = popen(cmd, "r");
  ck_assert_msg(p, "cannot run %s", cmd);
  ljb_str b = {0};
  char line[1024];
  while (fgets(line, sizeof line, p)) ljb_str_puts(&b, line);
  int st = pclose(p);
  *out = ljb_str_take(&b);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TCase *tu_tcase(const char *name) {
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, 600);
  tcase_add_checked_fixture(tc, NULL, teardown);
  return tc;
}

int tu_run(Suite *s) {
  /* no persistent cache unless a test makes one: a warm cache turns counted compiles into loads */
  setenv("LJ_CACHE_DIR", "", 1);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
