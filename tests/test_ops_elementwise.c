/* test_ops_elementwise.c — every unary and binary op against the reference interpreter, for
 * every dtype, over shapes with size-0 and size-1 dims, 0-d tensors, broadcasting, and
 * transposed and sliced (non-contiguous) inputs; dtype rejections; special values. */
#include "test_util.h"

#include "graph/graph.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum rule { ANY, NOBOOL, FLOATS } rule;

typedef struct unary_case {
  const char *name;
  lj_tensor *(*fn)(lj_tensor *);
  tu_values kind;
  rule rule;
  double f32_rtol; /* tolerance for f32 results (transcendentals differ from libm by ulps) */
} unary_case;

static lj_tensor *gelu_exact(lj_tensor *t) { return lj_gelu(t, false); }
static lj_tensor *gelu_tanh(lj_tensor *t) { return lj_gelu(t, true); }

static const unary_case unaries[] = {
    {"neg", lj_neg, TU_ANY, NOBOOL, 0},
    {"abs", lj_abs, TU_ANY, NOBOOL, 0},
    {"exp", lj_exp, TU_ANY, ANY, 4e-7},
    {"log", lj_log, TU_POSITIVE, ANY, 4e-7},
    {"log1p", lj_log1p, TU_POSITIVE, ANY, 4e-7},
    {"expm1", lj_expm1, TU_ANY, ANY, 4e-7},
    {"sqrt", lj_sqrt, TU_POSITIVE, ANY, 0},
    {"rsqrt", lj_rsqrt, TU_POSITIVE, ANY, 2e-7},
    {"sin", lj_sin, TU_ANY, ANY, 2e-7},
    {"cos", lj_cos, TU_ANY, ANY, 2e-7},
    {"tanh", lj_tanh, TU_ANY, ANY, 4e-7},
    {"sigmoid", lj_sigmoid, TU_ANY, ANY, 4e-7},
    {"relu", lj_relu, TU_ANY, NOBOOL, 0},
    {"lj_gelu", gelu_exact, TU_ANY, FLOATS, 4e-7},
    {"lj_gelu", gelu_tanh, TU_ANY, FLOATS, 6e-7},
    {"silu", lj_silu, TU_ANY, FLOATS, 4e-7},
    {"erf", lj_erf, TU_ANY, ANY, 4e-7},
    {"floor", lj_floor, TU_ANY, NOBOOL, 0},
    {"ceil", lj_ceil, TU_ANY, NOBOOL, 0},
    {"round", lj_round, TU_ANY, NOBOOL, 0},
    {"sign", lj_sign, TU_ANY, ANY, 0},
    {"reciprocal", lj_reciprocal, TU_POSITIVE, ANY, 2e-7},
    {"logical_not", lj_logical_not, TU_ANY, ANY, 0},
    {"isnan", lj_isnan, TU_SPECIAL, ANY, 0},
};

static const int64_t shapes[][4] = {{0}, {1, 0}, {1, 1}, {1, 7}, {2, 3, 5}, {3, 2, 1, 4}, {3, 2, 0, 3}, {2, 33, 17}};

static bool accepts(rule r, lj_dtype dt) {
  if (r == FLOATS) return dt == LJ_F32 || dt == LJ_F64 || dt == LJ_BF16 || dt == LJ_F16;
  if (r == NOBOOL) return dt != LJ_BOOL;
  return true;
}

static double tol_for(double f32_rtol, lj_dtype out) {
  double base = tu_rtol(out);
  if (out == LJ_F32 && f32_rtol > base) return f32_rtol;
  if (out == LJ_F64 && f32_rtol > 0) return 4e-15;
  return base;
}

START_TEST(test_unary) {
  const unary_case *c = &unaries[_i];
  for (int di = 0; di < LJ_NUM_DTYPES; di++) {
    lj_dtype dt = tu_all_dtypes[di];
    lj_tensor *ts[16];
    int n = 0;
    if (!accepts(c->rule, dt)) {
      lj_tensor *x = tu_tensor(dt, LJ_SHAPE(3), c->kind, 1);
      ck_assert_msg(c->fn(x) == NULL, "%s accepted %s", c->name, lj_dtype_name(dt));
      tu_expect_error(LJ_ERR_DTYPE, c->name, lj_dtype_name(dt), NULL);
      lj_tensor_release(x);
      continue;
    }
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
      lj_tensor *x = tu_tensor(dt, (int)shapes[s][0], &shapes[s][1], c->kind, s + 7 * di);
      ts[n++] = c->fn(x);
      lj_tensor_release(x);
    }
    /* non-contiguous inputs: a transpose and a strided slice */
    lj_tensor *m = tu_tensor(dt, LJ_SHAPE(5, 6), c->kind, 99);
    lj_tensor *t = lj_transpose(m, 0, 1), *sl = lj_slice(m, 1, 1, 6, 2);
    ts[n++] = c->fn(t);
    ts[n++] = c->fn(sl);
    lj_tensor_release(t);
    lj_tensor_release(sl);
    lj_tensor_release(m);
    ck_assert_msg(ts[0] != NULL, "%s(%s): %s", c->name, lj_dtype_name(dt), lj_last_error());
    tu_check_interp(n, ts, tol_for(c->f32_rtol, lj_tensor_dtype(ts[0])));
    for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
  }
}
END_TEST

START_TEST(test_unary_special_values) {
  const unary_case *c = &unaries[_i];
  lj_dtype floats[] = {LJ_F32, LJ_F64, LJ_BF16, LJ_F16};
  for (int k = 0; k < 4; k++) {
    lj_tensor *x = tu_tensor(floats[k], LJ_SHAPE(257), TU_SPECIAL, 5 + k);
    tu_check1(c->fn(x), tol_for(c->f32_rtol, floats[k]));
    lj_tensor_release(x);
  }
}
END_TEST

/* Wide ranges exercise range reduction and overflow paths of the vector math; the last
 * points are exp's ends: the largest x with a finite result and the next (inf), the smallest
 * with a normal result and the next (0, where libm gives a subnormal within the tolerance),
 * both dtypes' in each. */
START_TEST(test_unary_wide_range) {
  static lj_tensor *(*fns[])(lj_tensor *) = {lj_exp, lj_expm1, lj_sin, lj_cos, lj_tanh, lj_erf, lj_sigmoid, lj_silu, gelu_tanh};
  static const double ends[] = {0x1.62e42ep+6, 0x1.62e430p+6, -0x1.5d589ep+6, -0x1.5d58a0p+6, 0x1.62e42fefa39efp+9,
                                0x1.62e42fefa39f0p+9, -0x1.6232bdd7abcd2p+9, -0x1.6232bdd7abcd3p+9, 745.2, -745.2};
  enum { NENDS = sizeof ends / sizeof *ends };
  lj_dtype floats[] = {LJ_F32, LJ_F64};
  for (int k = 0; k < 2; k++) {
    int n = 4001 + NENDS;
    double *v = malloc((size_t)n * sizeof *v);
    for (int i = 0; i < n - NENDS; i++) v[i] = -100 + 200.0 * i / (n - NENDS - 1);
    for (int i = 0; i < NENDS; i++) v[n - NENDS + i] = ends[i];
    float *vf = malloc((size_t)n * sizeof *vf);
    for (int i = 0; i < n; i++) vf[i] = (float)v[i];
    lj_tensor *x = lj_tensor_from_host(lj_default_device(), floats[k], LJ_SHAPE(n),
                                       floats[k] == LJ_F32 ? (void *)vf : (void *)v);
    for (size_t f = 0; f < sizeof fns / sizeof *fns; f++) tu_check1(fns[f](x), k == 0 ? 4e-7 : 4e-15);
    /* gelu's erfc over its tail pieces: f32 within 2e-6 (PyTorch's 1 + erf keeps no digit
     * of it below -5) */
    tu_check1(gelu_exact(x), k == 0 ? 2e-6 : 4e-15);
    lj_tensor *pos = lj_add_scalar(lj_abs(x), 1e-30);
    tu_check1(lj_log(pos), k == 0 ? 4e-7 : 4e-15);
    tu_check1(lj_log1p(pos), k == 0 ? 4e-7 : 4e-15);
    lj_tensor_release(pos);
    lj_tensor_release(x);
    free(v);
    free(vf);
  }
}
END_TEST

/* sin and cos over the whole range of each dtype, against libm: f64 within 2 ulp of sin(x),
 * f32 within 1 ulp of sin((double)x). Arguments ±2^e·(1 + j/7) for every exponent e of the
 * dtype (up to 2^20 reduced by the kernel's own code, beyond it by libm's), 4096 within
 * ±1003, and the special values: sin(±inf) and cos(±inf) are NaN, sin(-0) is -0. The
 * reduction's constants once summed to π/2 + 2e-21, which put sin(1e6) 21 ulp off, and beyond
 * ~2^50 its results left [-1, 1] (sin(1e18) was -3.5e22). A lane's result does not depend on
 * its vector's other lanes: every second of the arguments beside 1e30s gives the same bits. */
START_TEST(test_sin_cos_ulp) {
  for (int dbl = 0; dbl < 2; dbl++) {
    enum { NRANDOM = 4096 };
    int emin = dbl ? -1022 : -126, emax = dbl ? 1023 : 127, n = 0;
    double *v = malloc(((size_t)(emax - emin + 1) * 7 + NRANDOM + 5) * sizeof *v);
    for (int e = emin; e <= emax; e++)
      for (int j = 0; j < 7; j++) {
        double a = ldexp(1 + j / 7.0, e);
        if (!dbl && a > FLT_MAX) a = FLT_MAX;
        v[n++] = j % 2 ? a : -a;
      }
    uint64_t state = 11;
    for (int i = 0; i < NRANDOM; i++) v[n++] = (double)tu_pick(&state, -1000000, 1000000) / 997;
    static const double special[] = {INFINITY, -INFINITY, NAN, -0.0, 0.0};
    for (int i = 0; i < 5; i++) v[n++] = special[i];
    float *vf = malloc((size_t)n * sizeof *vf);
    for (int i = 0; i < n; i++) vf[i] = (float)v[i];
    if (!dbl)
      for (int i = 0; i < n; i++) v[i] = vf[i];
    lj_tensor *x =
        lj_tensor_from_host(lj_default_device(), dbl ? LJ_F64 : LJ_F32, LJ_SHAPE(n), dbl ? (void *)v : (void *)vf);
    for (int c = 0; c < 2; c++) {
      lj_tensor *y = c ? lj_cos(x) : lj_sin(x);
      double *yd = malloc((size_t)n * sizeof *yd);
      float *yf = malloc((size_t)n * sizeof *yf);
      ck_assert_int_eq(lj_tensor_to_host(y, dbl ? (void *)yd : (void *)yf, (size_t)n * (dbl ? 8 : 4)), LJ_OK);
      for (int i = 0; i < n; i++) {
        double got = dbl ? yd[i] : yf[i], want = c ? cos(v[i]) : sin(v[i]);
        if (!dbl) want = (float)want;
        if (isnan(want)) {
          ck_assert_msg(isnan(got), "%s(%a) = %a, not NaN", c ? "cos" : "sin", v[i], got);
          continue;
        }
        if (want == 0) {
          ck_assert_msg(got == 0 && signbit(got) == signbit(want), "%s(%a) = %a", c ? "cos" : "sin", v[i], got);
          continue;
        }
        double ulp = ldexp(1.0, ilogb(want) - (dbl ? 52 : 23)), err = fabs(got - want) / ulp;
        ck_assert_msg(err <= (dbl ? 2 : 1), "%s %s(%a) = %a: %.3g ulp from %a", dbl ? "f64" : "f32", c ? "cos" : "sin",
                      v[i], got, err, want);
      }
      /* every second argument beside 1e30s */
      void *mixed = malloc((size_t)n * 8), *ym = malloc((size_t)n * 8);
      for (int i = 0; i < n; i++)
        if (dbl)
          ((double *)mixed)[i] = i % 2 ? 1e30 : v[i];
        else
          ((float *)mixed)[i] = i % 2 ? 1e30f : vf[i];
      lj_tensor *xm = lj_tensor_from_host(lj_default_device(), dbl ? LJ_F64 : LJ_F32, LJ_SHAPE(n), mixed);
      lj_tensor *ymt = c ? lj_cos(xm) : lj_sin(xm);
      ck_assert_int_eq(lj_tensor_to_host(ymt, ym, (size_t)n * (dbl ? 8 : 4)), LJ_OK);
      for (int i = 0; i < n; i += 2)
        ck_assert_msg(dbl ? memcmp(&((double *)ym)[i], &yd[i], 8) == 0 : memcmp(&((float *)ym)[i], &yf[i], 4) == 0,
                      "%s(%a) beside 1e30 differs", c ? "cos" : "sin", v[i]);
      lj_tensor_release(ymt);
      lj_tensor_release(xm);
      free(mixed);
      free(ym);
      free(yd);
      free(yf);
      lj_tensor_release(y);
    }
    lj_tensor_release(x);
    free(v);
    free(vf);
  }
}
END_TEST

/* A large elementwise nest that computes a vmath function (gelu) marks its loop to
 * interleave vectors, which the lowered IR of a dump shows; one of cheap ops (relu, times 2)
 * leaves it to the vectorizer. Values against the interpreter. */
START_TEST(test_vmath_interleaved) {
  for (int heavy = 0; heavy < 2; heavy++) {
    char dir[] = "/tmp/lj_test_interleave_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    lj_config cfg = lj_config_default();
    cfg.dump_dir = dir;
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(37, 1000), TU_ANY, 3);
    lj_scope_begin();
    lj_tensor *y = heavy ? lj_gelu(x, true) : lj_mul_scalar(lj_relu(x), 2);
    tu_check_interp(1, &y, 6e-7);
    lj_scope_end();
    ck_assert_int_eq(tu_dir_has(dir, ".ll", "llvm.loop.interleave.count"), heavy);
    lj_tensor_release(x);
    lj_shutdown();
    tu_remove_dir(dir);
  }
}
END_TEST

/* f32 exp within 0.75 ulp of libm's double exp (the error in units of the result's last
 * place) on every 2048th float of the range with normal results, tiny arguments included,
 * with AVX-512 (a table of sixteenths, looked up with vpermps); within 1.05 with the generic
 * code's polynomial (LJ_CPU=haswell), 1.25 on a target without fused multiply-add
 * (LJ_CPU=x86-64), where each step of the polynomial rounds twice. Which code the kernel has
 * is read from its assembly. */
START_TEST(test_exp_ulp) {
  enum { N = 1 << 21 };
  char path[64];
  tu_init_saving(lj_config_default(), "asm", path, sizeof path);
  float *v = malloc(N * sizeof *v), *y = malloc(N * sizeof *y);
  uint32_t lo, hi;
  float flo = -87.3f, fhi = 88.7f;
  memcpy(&lo, &flo, 4);
  memcpy(&hi, &fhi, 4);
  int n = 0;
  for (uint32_t b = lo; b > 0x80000000u && n < N; b -= 2048) memcpy(&v[n++], &b, 4); /* negative */
  for (uint32_t b = 0; b < hi && n < N; b += 2048) memcpy(&v[n++], &b, 4);
  lj_tensor *x = lj_tensor_from_host(lj_default_device(), LJ_F32, LJ_SHAPE(n), v);
  lj_tensor *e = lj_exp(x);
  ck_assert_int_eq(lj_tensor_to_host(e, y, (size_t)n * sizeof *y), LJ_OK);
  double worst = 0;
  int at = 0;
  for (int i = 0; i < n; i++) {
    double t = exp((double)v[i]), ulp = ldexp(1.0, ilogb(t) - 23), err = fabs(y[i] - t) / ulp;
    if (err > worst) worst = err, at = i;
  }
  char *text = tu_take_saved(path);
  double bound = strstr(text, "vpermps") ? 0.75 : strstr(text, "vfmadd") ? 1.05 : 1.25;
  free(text);
  ck_assert_msg(worst <= bound, "exp(%a) = %a: %.3f ulp from %a", v[at], y[at], worst, exp((double)v[at]));
  lj_tensor_release(e);
  lj_tensor_release(x);
  free(v);
  free(y);
}
END_TEST

/* Every kernel that computes exp keeps its vector loops when the compiler links kernels into
 * one module before optimizing them (a compile thread's groups of several kernels): with
 * AVX-512, exp's loops call a helper whose vector variant the loop vectorizer takes, and a
 * second module's copy of the helper must keep its name. A chain of softmaxes over the rows
 * and over the columns, one kernel each, enough of them for groups of several on every compile
 * thread; each kernel's optimized IR that has AVX-512's exp (vscalef) has vector loads (the
 * kernels of one body's code share it: several distinct bodies among them), and the counter
 * of loops the vectorizer left scalar stays 0. With the helper internal to each module, a body
 * of the second kernel of a group was a scalar loop. */
START_TEST(test_exp_kernels_linked_vectorize) {
  char path[64];
  lj_config cfg = lj_config_default();
  cfg.num_threads = 1;
  tu_init_saving(cfg, "llvm", path, sizeof path);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int steps = 16 * (int)(cpus > 1 ? cpus : 1) + 8; /* kernels: 8 groups a compile thread take 2 each */
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(96, 160), TU_ANY, 1);
  lj_scope_begin();
  lj_tensor *y = x;
  for (int t = 0; t < steps; t++) y = lj_softmax(lj_mul_scalar(y, 40.0), t % 2);
  tu_check_interp_tol(1, &y, 1e-4, 1e-6);
  lj_scope_end();
  lj_tensor_release(x);
  ck_assert_int_eq(lj_counter_value("UnvectorizedLoops"), 0); /* LLVM's own report of such loops */
  char *text = tu_take_saved(path);
  int checked = 0;
  for (char *fn = strstr(text, "\ndefine "); fn; fn = strstr(fn + 1, "\ndefine ")) {
    char *end = strstr(fn, "\n}\n");
    ck_assert_ptr_nonnull(end);
    *end = 0;
    if (strstr(fn, "scalef")) {
      char *name = strchr(fn, '@');
      ck_assert_msg(strstr(fn, "load <"), "%.60s: exp in scalar loops only", name);
      checked++;
    }
    *end = '\n';
  }
  free(text);
  ck_assert_msg(checked == 0 || checked >= 2, "%d kernels with exp", checked); /* twins share one body */
  lj_shutdown();
}
END_TEST

/* exp gives a value the same result wherever it lands: in a vectorized loop's lanes, in its
 * scalar remainder, in a kernel too small to vectorize (with AVX-512 the loops call a helper's
 * vector variant, and the scalar helper runs it on one lane). f32 and f64, over values with
 * subnormal results (which the scalar and vector code would round differently), the range's
 * ends, ±inf (0 and inf) and NaN. */
START_TEST(test_exp_lanes_agree) {
  static const double pattern[16] = {-95, -720, -0.5, 0, 1.5, 88.7, 89, 709, 710, -110,
                                     -1000, INFINITY, -INFINITY, NAN, 3.25, -87.5};
  for (int d = 0; d < 2; d++) {
    lj_dtype dt = d ? LJ_F64 : LJ_F32;
    size_t es = d ? 8 : 4;
    int64_t sizes[2] = {16 * 64 + 7, 7};
    unsigned char *out[2];
    for (int k = 0; k < 2; k++) {
      unsigned char *v = malloc((size_t)sizes[k] * es);
      out[k] = malloc((size_t)sizes[k] * es);
      for (int64_t i = 0; i < sizes[k]; i++) {
        double x = pattern[i % 16];
        float f = (float)x;
        memcpy(v + i * es, d ? (const void *)&x : (const void *)&f, es);
      }
      lj_tensor *x = lj_tensor_from_host(lj_default_device(), dt, LJ_SHAPE(sizes[k]), v);
      lj_tensor *e = lj_exp(x);
      ck_assert_int_eq(lj_tensor_to_host(e, out[k], (size_t)sizes[k] * es), LJ_OK);
      lj_tensor_release(e);
      lj_tensor_release(x);
      free(v);
    }
    for (int k = 0; k < 2; k++)
      for (int64_t i = 0; i < sizes[k]; i++) {
        int64_t j = i % 16;
        ck_assert_msg(memcmp(out[k] + i * es, out[0] + j * es, es) == 0, "%s exp(%g): element %lld of %lld differs",
                      lj_dtype_name(dt), pattern[j], (long long)i, (long long)sizes[k]);
      }
    double at[4];
    for (int j = 0; j < 4; j++) {
      int64_t i = (int64_t[]){11, 12, 13, 9}[j];
      float f;
      if (d) memcpy(&at[j], out[0] + i * es, 8);
      else memcpy(&f, out[0] + i * es, 4), at[j] = f;
    }
    ck_assert(isinf(at[0]) && at[0] > 0);
    ck_assert(at[1] == 0 && !signbit(at[1]));
    ck_assert(isnan(at[2]));
    ck_assert(d ? at[3] > 0 : at[3] == 0); /* exp(-110): 1.7e-48 in f64, 0 in f32 */
    free(out[0]);
    free(out[1]);
  }
}
END_TEST

/* exp(x - max(x)) along rows, the max in the same kernel, is the exp of a value at most 0 or
 * NaN: with AVX-512 its code does not clamp x above (no vminps in the kernel), nor that of
 * x/8 - max(x/8) (each nest computes x/8 itself), and exp(max - x) still does. Both bitwise equal to exp of the same differences made on the host, f32 and
 * f64, over rows with +inf, NaN, -inf, all -inf, and differences whose exps are subnormal or
 * 0. */
START_TEST(test_exp_below_max) {
  enum { R = 6, C = 37 };
  static const double spread[8] = {0, -50, -90, -103.5, -104, -745, -1000, -1e30};
  static const int dims[1] = {1};
  for (int d = 0; d < 2; d++)
    for (int form = 0; form < 3; form++) {
      bool rev = form == 1, scaled = form == 2; /* max - x; x/8 - max(x/8), attention's scores */
      lj_dtype dt = d ? LJ_F64 : LJ_F32;
      size_t es = d ? 8 : 4;
      double x[R][C], diff[R][C];
      for (int r = 0; r < R; r++) {
        double m = -INFINITY;
        bool nan = false;
        for (int c = 0; c < C; c++) {
          x[r][c] = r == 4 ? spread[c % 8] : r == 5 ? -INFINITY : c * 0.37 - 5;
          if (d == 0) x[r][c] = (float)x[r][c];
          nan |= isnan(x[r][c]);
        }
        x[1][3] = INFINITY, x[2][30] = NAN, x[3][0] = -INFINITY;
        double xv[C]; /* what the max is of: x, or x/8 (exact) */
        for (int c = 0; c < C; c++) {
          xv[c] = scaled ? x[r][c] * 0.125 : x[r][c];
          nan |= isnan(xv[c]), m = xv[c] > m ? xv[c] : m;
        }
        if (nan) m = NAN;
        for (int c = 0; c < C; c++) {
          diff[r][c] = rev ? m - xv[c] : xv[c] - m;
          if (d == 0) diff[r][c] = (float)((float)(rev ? m : xv[c]) - (float)(rev ? xv[c] : m));
        }
      }
      unsigned char xs[R * C * 8], ds[R * C * 8], y[R * C * 8], want[R * C * 8];
      for (int i = 0; i < R * C; i++) {
        float f = (float)x[i / C][i % C], g = (float)diff[i / C][i % C];
        memcpy(xs + i * es, d ? (const void *)&x[i / C][i % C] : (const void *)&f, es);
        memcpy(ds + i * es, d ? (const void *)&diff[i / C][i % C] : (const void *)&g, es);
      }
      char path[64];
      tu_init_saving(lj_config_default(), "asm", path, sizeof path);
      lj_tensor *t = lj_tensor_from_host(lj_default_device(), dt, LJ_SHAPE(R, C), xs);
      lj_tensor *v = scaled ? lj_mul_scalar(t, 0.125) : t;
      lj_tensor *m = lj_amax(v, 1, dims, true);
      lj_tensor *e = lj_exp(rev ? lj_sub(m, v) : lj_sub(v, m));
      ck_assert_int_eq(lj_tensor_to_host(e, y, R * C * es), LJ_OK);
      char *text = tu_take_saved(path);
      if (strstr(text, "vscalef")) /* AVX-512's exp */
        ck_assert_msg((strstr(text, "vminps") || strstr(text, "vminpd")) == rev, "%s form %d", lj_dtype_name(dt), form);
      free(text);
      if (scaled) lj_tensor_release(v);
      lj_tensor_release(e), lj_tensor_release(m), lj_tensor_release(t);
      lj_shutdown();
      tu_init_threads(1);
      lj_tensor *dt_ = lj_tensor_from_host(lj_default_device(), dt, LJ_SHAPE(R, C), ds);
      e = lj_exp(dt_);
      ck_assert_int_eq(lj_tensor_to_host(e, want, R * C * es), LJ_OK);
      for (int i = 0; i < R * C; i++)
        ck_assert_msg(memcmp(y + i * es, want + i * es, es) == 0, "%s form %d: exp of element %d's difference %g differs",
                      lj_dtype_name(dt), form, i, diff[i / C][i % C]);
      lj_tensor_release(e), lj_tensor_release(dt_);
      lj_shutdown();
    }
}
END_TEST

/* exp(x - max(x)) along rows of 8, 16 and 32, f32 and f64: the loop vectorizer takes such a
 * row 8 lanes at a time, and with AVX-512 the kernel's vector loop computes one exp for those
 * lanes (a variant of the helper over half a vector, quarter...), not one for each (8 exps of
 * 16 lanes in the loop: softmax over rows of 16 took 37-41 ms for 1M rows, 13.5 with it): at
 * most as many exps in the kernel as vectors in a row, and two more. Bitwise equal to exp of
 * the same differences made on the host, computed over a flat tensor whole vectors at a time. */
START_TEST(test_exp_short_rows) {
  enum { R = 2048, CMAX = 32 };
  static const int dims[1] = {1};
  for (int d = 0; d < 2; d++)
    for (int w = 0; w < 3; w++) {
      lj_dtype dt = d ? LJ_F64 : LJ_F32;
      size_t es = d ? 8 : 4;
      int C = 8 << w;
      static unsigned char xs[R * CMAX * 8], ds[R * CMAX * 8], y[R * CMAX * 8], want[R * CMAX * 8];
      for (int r = 0; r < R; r++) {
        double x[CMAX], m = -INFINITY;
        for (int c = 0; c < C; c++) {
          x[c] = ((r * 7 + c * 13) % 29) * 0.61 - 9;
          if (d == 0) x[c] = (float)x[c];
          m = x[c] > m ? x[c] : m;
        }
        for (int c = 0; c < C; c++) {
          float f = (float)x[c], g = (float)x[c] - (float)m;
          double gd = x[c] - m;
          memcpy(xs + (r * C + c) * es, d ? (const void *)&x[c] : (const void *)&f, es);
          memcpy(ds + (r * C + c) * es, d ? (const void *)&gd : (const void *)&g, es);
        }
      }
      char path[64];
      tu_init_saving(lj_config_default(), "asm", path, sizeof path);
      lj_tensor *t = lj_tensor_from_host(lj_default_device(), dt, LJ_SHAPE(R, C), xs);
      lj_tensor *m = lj_amax(t, 1, dims, true);
      lj_tensor *e = lj_exp(lj_sub(t, m));
      ck_assert_int_eq(lj_tensor_to_host(e, y, (size_t)R * C * es), LJ_OK);
      char *text = tu_take_saved(path);
      int exps = 0;
      for (const char *at = strstr(text, "vscalef"); at; at = strstr(at + 1, "vscalef")) exps++;
      int vectors = C * (int)es / 64; /* a row's; 0 exps without AVX-512 */
      ck_assert_msg(exps <= 2 + vectors, "%s rows of %d: %d exps in the kernel", lj_dtype_name(dt), C, exps);
      free(text);
      lj_tensor_release(e), lj_tensor_release(m), lj_tensor_release(t);
      lj_shutdown();
      tu_init_threads(1);
      lj_tensor *flat = lj_tensor_from_host(lj_default_device(), dt, LJ_SHAPE(R * C), ds);
      e = lj_exp(flat);
      ck_assert_int_eq(lj_tensor_to_host(e, want, (size_t)R * C * es), LJ_OK);
      for (int i = 0; i < R * C; i++)
        ck_assert_msg(memcmp(y + i * es, want + i * es, es) == 0, "%s rows of %d: element %d differs",
                      lj_dtype_name(dt), C, i);
      lj_tensor_release(e), lj_tensor_release(flat);
      lj_shutdown();
    }
}
END_TEST

typedef struct binary_case {
  const char *name;
  lj_tensor *(*fn)(lj_tensor *, lj_tensor *);
  tu_values a_kind, b_kind;
  bool no_bool;    /* two bool operands are an error */
  double f32_rtol;
  double f64_rtol; /* pow's f64 error grows with |y ln x| */
} binary_case;

static lj_tensor *div_trunc(lj_tensor *a, lj_tensor *b) { return lj_div_rounding(a, b, LJ_ROUND_TRUNC); }
static lj_tensor *div_floor(lj_tensor *a, lj_tensor *b) { return lj_div_rounding(a, b, LJ_ROUND_FLOOR); }
static lj_tensor *div_none(lj_tensor *a, lj_tensor *b) { return lj_div_rounding(a, b, LJ_ROUND_NONE); }

static const binary_case binaries[] = {
    {"add", lj_add, TU_ANY, TU_ANY, false, 0},
    {"sub", lj_sub, TU_ANY, TU_ANY, true, 0},
    {"mul", lj_mul, TU_ANY, TU_ANY, false, 0},
    {"div", lj_div, TU_ANY, TU_NONZERO, false, 0},
    {"pow", lj_pow, TU_POSITIVE, TU_UNIT, true, 4e-7, 2e-14},
    {"maximum", lj_maximum, TU_ANY, TU_ANY, false, 0},
    {"minimum", lj_minimum, TU_ANY, TU_ANY, false, 0},
    {"remainder", lj_remainder, TU_ANY, TU_NONZERO, true, 0},
    {"floor_divide", lj_floor_divide, TU_ANY, TU_NONZERO, true, 0},
    {"div_rounding", div_trunc, TU_ANY, TU_NONZERO, true, 0},
    {"div_rounding", div_floor, TU_ANY, TU_NONZERO, true, 0},
    {"div_rounding", div_none, TU_ANY, TU_NONZERO, false, 0},
    {"eq", lj_eq, TU_ANY, TU_ANY, false, 0},
    {"ne", lj_ne, TU_ANY, TU_ANY, false, 0},
    {"lt", lj_lt, TU_ANY, TU_ANY, false, 0},
    {"le", lj_le, TU_ANY, TU_ANY, false, 0},
    {"gt", lj_gt, TU_ANY, TU_ANY, false, 0},
    {"ge", lj_ge, TU_ANY, TU_ANY, false, 0},
    {"logical_and", lj_logical_and, TU_ANY, TU_ANY, false, 0},
    {"logical_or", lj_logical_or, TU_ANY, TU_ANY, false, 0},
};

/* dtype pairs: same dtype for each, plus promotions */
static const lj_dtype pairs[][2] = {
    {LJ_F32, LJ_F32}, {LJ_F64, LJ_F64},  {LJ_BF16, LJ_BF16}, {LJ_F16, LJ_F16}, {LJ_I8, LJ_I8},
    {LJ_U8, LJ_U8},   {LJ_I32, LJ_I32},  {LJ_I64, LJ_I64},   {LJ_BOOL, LJ_BOOL}, {LJ_I16, LJ_I16},
    {LJ_F32, LJ_I64}, {LJ_U8, LJ_I8},    {LJ_BF16, LJ_F16},  {LJ_F64, LJ_I32}, {LJ_BOOL, LJ_I32},
    {LJ_I16, LJ_U8},  {LJ_BF16, LJ_F32}, {LJ_I64, LJ_F16},
};

/* (a shape, b shape) with broadcasting, empty and 0-d operands */
static const int64_t bshapes[][2][4] = {
    {{2, 3, 4}, {1, 4}},       {{3, 2, 1, 4}, {2, 3, 1}}, {{0}, {1, 5}},
    {{2, 0, 3}, {2, 1, 3}},    {{1, 6}, {1, 6}},          {{2, 1, 1}, {1, 1}},
    {{2, 37, 19}, {2, 37, 1}},
};

START_TEST(test_binary) {
  const binary_case *c = &binaries[_i];
  for (size_t pi = 0; pi < sizeof pairs / sizeof *pairs; pi++) {
    lj_dtype da = pairs[pi][0], db = pairs[pi][1];
    if (c->no_bool && da == LJ_BOOL && db == LJ_BOOL) {
      lj_tensor *x = tu_tensor(da, LJ_SHAPE(3), TU_ANY, 1);
      ck_assert_msg(c->fn(x, x) == NULL, "%s accepted two bools", c->name);
      tu_expect_error(LJ_ERR_DTYPE, c->name, NULL);
      lj_tensor_release(x);
      continue;
    }
    lj_tensor *ts[16];
    int n = 0;
    for (size_t s = 0; s < sizeof bshapes / sizeof *bshapes; s++) {
      lj_tensor *a = tu_tensor(da, (int)bshapes[s][0][0], &bshapes[s][0][1], c->a_kind, s);
      lj_tensor *b = tu_tensor(db, (int)bshapes[s][1][0], &bshapes[s][1][1], c->b_kind, s + 50);
      ts[n++] = c->fn(a, b);
      ck_assert_msg(ts[n - 1] != NULL, "%s(%s,%s): %s", c->name, lj_dtype_name(da), lj_dtype_name(db),
                    lj_last_error());
      lj_tensor_release(a);
      lj_tensor_release(b);
    }
    /* transposed left operand against a contiguous right one, and a sliced one */
    lj_tensor *m = tu_tensor(da, LJ_SHAPE(6, 5), c->a_kind, 77);
    lj_tensor *b = tu_tensor(db, LJ_SHAPE(5, 6), c->b_kind, 78);
    lj_tensor *mt = lj_transpose(m, 0, 1), *bs = lj_slice(b, 0, 1, 5, 3);
    ts[n++] = c->fn(mt, b);
    ts[n++] = c->fn(bs, bs);
    lj_tensor_release(mt);
    lj_tensor_release(bs);
    lj_tensor_release(m);
    lj_tensor_release(b);
    lj_dtype out = lj_tensor_dtype(ts[0]);
    tu_check_interp(n, ts, out == LJ_F64 && c->f64_rtol > 0 ? c->f64_rtol : tol_for(c->f32_rtol, out));
    for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
  }
}
END_TEST

START_TEST(test_binary_special_values) {
  const binary_case *c = &binaries[_i];
  lj_dtype floats[] = {LJ_F32, LJ_F64, LJ_BF16};
  for (int k = 0; k < 3; k++) {
    lj_tensor *a = tu_tensor(floats[k], LJ_SHAPE(31, 31), TU_SPECIAL, 3);
    lj_tensor *b = tu_tensor(floats[k], LJ_SHAPE(31, 31), TU_SPECIAL, 4);
    lj_tensor *bt = lj_transpose(b, 0, 1);
    tu_check1(c->fn(a, bt), floats[k] == LJ_F64 && c->f64_rtol > 0 ? c->f64_rtol : tol_for(c->f32_rtol, floats[k]));
    lj_tensor_release(bt);
    lj_tensor_release(a);
    lj_tensor_release(b);
  }
}
END_TEST

typedef struct scalar_case {
  const char *name;
  lj_tensor *(*fn)(lj_tensor *, double);
} scalar_case;

static lj_tensor *rpow(lj_tensor *a, double s) { return lj_rpow_scalar(s, a); }
static lj_tensor *clamp2(lj_tensor *a, double s) { return lj_clamp(a, -s, s); }

static const scalar_case scalars[] = {
    {"add_scalar", lj_add_scalar},       {"sub_scalar", lj_sub_scalar},
    {"rsub_scalar", lj_rsub_scalar},     {"mul_scalar", lj_mul_scalar},
    {"div_scalar", lj_div_scalar},       {"pow_scalar", lj_pow_scalar},
    {"rpow_scalar", rpow},               {"remainder_scalar", lj_remainder_scalar},
    {"eq_scalar", lj_eq_scalar},         {"ne_scalar", lj_ne_scalar},
    {"lt_scalar", lj_lt_scalar},         {"le_scalar", lj_le_scalar},
    {"gt_scalar", lj_gt_scalar},         {"ge_scalar", lj_ge_scalar},
    {"clamp", clamp2},                   {"clamp_min", lj_clamp_min},
    {"clamp_max", lj_clamp_max},
};

/* Integer division over each type's whole range, the extremes among random values, every
 * divisor but 0 (-1, the type's least, its greatest): the kernels divide integers of up to 32
 * bits in floating point, vector by vector (lower_expr.c's trunc_division), which the
 * interpreter does not. Remainder, floor and truncating division, and the remainder by a
 * scalar, against the interpreter. */
START_TEST(test_int_division_full_range) {
  static const lj_dtype dts[] = {LJ_I8, LJ_U8, LJ_I16, LJ_I32, LJ_I64};
  enum { N = 4096 };
  for (size_t di = 0; di < sizeof dts / sizeof *dts; di++) {
    lj_dtype dt = dts[di];
    int bits = 8 * (int)lj_dtype_size(dt);
    bool sgn = dt != LJ_U8;
    int64_t lo = bits == 64 ? INT64_MIN : sgn ? -((int64_t)1 << (bits - 1)) : 0;
    int64_t hi = bits == 64 ? INT64_MAX : sgn ? ((int64_t)1 << (bits - 1)) - 1 : ((int64_t)1 << bits) - 1;
    int64_t *va = malloc(N * sizeof *va), *vb = malloc(N * sizeof *vb);
    const int64_t edges[] = {lo, hi, lo + 1, hi - 1, 0, 1, -1, 2, -2, 3, 7, -7};
    uint64_t st = 88172645463325252ULL + di;
    for (int i = 0; i < N; i++) {
      for (int k = 0; k < 2; k++) {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        int64_t v = (int64_t)st;
        if (bits < 64) v = sgn ? (int64_t)(st % (uint64_t)(hi - lo + 1)) + lo : (int64_t)(st % (uint64_t)(hi + 1));
        if (st % 4 == 0) v = edges[(st >> 8) % (sizeof edges / sizeof *edges)];
        (k ? vb : va)[i] = v;
      }
      if (vb[i] == 0) vb[i] = i % 2 && sgn ? lo : hi;
    }
    void *ha = calloc(N, 8), *hb = calloc(N, 8);
    for (int i = 0; i < N; i++) ljg_store_i64(dt, ha, i, va[i]), ljg_store_i64(dt, hb, i, vb[i]);
    lj_tensor *a = lj_tensor_from_host(lj_default_device(), dt, LJ_SHAPE(N), ha);
    lj_tensor *b = lj_tensor_from_host(lj_default_device(), dt, LJ_SHAPE(N), hb);
    lj_tensor *ts[4] = {lj_remainder(a, b), lj_floor_divide(a, b), lj_div_rounding(a, b, LJ_ROUND_TRUNC),
                        lj_remainder_scalar(a, sgn ? -7 : 7)};
    tu_check_interp(4, ts, 0);
    for (int i = 0; i < 4; i++) lj_tensor_release(ts[i]);
    lj_tensor_release(a), lj_tensor_release(b);
    free(ha), free(hb), free(va), free(vb);
  }
}
END_TEST

START_TEST(test_scalar_forms) {
  const scalar_case *c = &scalars[_i];
  static const double values[] = {2.0, 2.5, 1.0, 0.0, -1.0, -3.0};
  for (int di = 0; di < LJ_NUM_DTYPES; di++) {
    lj_dtype dt = tu_all_dtypes[di];
    if (dt == LJ_BOOL) continue;
    lj_tensor *x = tu_tensor(dt, LJ_SHAPE(3, 9), TU_POSITIVE, di);
    lj_tensor *ts[8];
    int n = 0;
    for (int v = 0; v < 6; v++) {
      bool int_tensor = !(dt == LJ_F32 || dt == LJ_F64 || dt == LJ_BF16 || dt == LJ_F16);
      lj_tensor *r = c->fn(x, values[v]);
      if (!r && c->fn == lj_pow_scalar && int_tensor && values[v] < 0) {
        tu_expect_error(LJ_ERR_ARG, "negative", NULL);
        continue;
      }
      if (!r && c->fn == lj_remainder_scalar && values[v] == 0) continue;
      ck_assert_msg(r != NULL, "%s(%s, %g): %s", c->name, lj_dtype_name(dt), values[v], lj_last_error());
      if (c->fn == lj_remainder_scalar && values[v] == 0 && int_tensor) {
        lj_tensor_release(r); /* integer remainder by zero: tested in the runtime-error suite */
        continue;
      }
      ts[n++] = r;
    }
    tu_check_interp(n, ts, tol_for(4e-7, lj_tensor_dtype(ts[0])));
    for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
    lj_tensor_release(x);
  }
}
END_TEST

/* pow_scalar's exponents 2, 3, 0.5, -0.5, -1 and -2 of f32 and f64 are the ops PyTorch
 * computes them as (x·x, x·x·x, sqrt, rsqrt, 1/x, 1/(x·x)): the same values, bit for bit,
 * special cases included (sqrt(-0) = -0, rsqrt(-0) = -inf, sqrt(-inf) = NaN, as PyTorch 1.13
 * gives them), and no pow in the graph; 2.5, or any exponent with special scalars off, is a
 * pow. */
static double pow_as_ops(lj_dtype dt, double x, double e) {
  if (dt == LJ_F32) {
    float f = (float)x;
    if (e == 2) return f * f;
    if (e == 3) return f * f * f;
    if (e == 0.5) return sqrtf(f);
    if (e == -0.5) return 1 / sqrtf(f);
    return e == -1 ? 1 / f : 1 / (f * f);
  }
  if (e == 2) return x * x;
  if (e == 3) return x * x * x;
  if (e == 0.5) return sqrt(x);
  if (e == -0.5) return 1 / sqrt(x);
  return e == -1 ? 1 / x : 1 / (x * x);
}

START_TEST(test_pow_scalar_exponents) {
  static const double xs[8] = {-0.0, -INFINITY, 2, -3, 0.1, 1e-30, 7.5, NAN}, es[6] = {2, 3, 0.5, -0.5, -1, -2};
  for (int special = 1; special >= 0; special--) {
    lj_config cfg = lj_config_default();
    cfg.no_special_scalars = !special;
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    for (int di = 0; di < 2; di++) {
      lj_dtype dt = di ? LJ_F64 : LJ_F32;
      float xf[8];
      for (int i = 0; i < 8; i++) xf[i] = (float)xs[i];
      lj_tensor *x = lj_tensor_from_host(lj_default_device(), dt, LJ_SHAPE(8), di ? (const void *)xs : xf);
      for (int k = 0; k < 7; k++) {
        double e = k < 6 ? es[k] : 2.5;
        lj_tensor *y = lj_pow_scalar(x, e);
        char *text = lj_tensors_text(1, &y);
        ck_assert_msg((strstr(text, " pow(") != NULL) == (k == 6 || !special), "%g:\n%s", e, text);
        free(text);
        double got[8];
        float gotf[8];
        ck_assert_int_eq(lj_tensor_to_host(y, di ? (void *)got : gotf, di ? sizeof got : sizeof gotf), LJ_OK);
        for (int i = 0; i < 8 && special && k < 6; i++) {
          double want = pow_as_ops(dt, xs[i], e), g = di ? got[i] : gotf[i];
          ck_assert_msg(isnan(want) ? isnan(g) : g == want && signbit(g) == signbit(want), "%s %g ** %g = %g, want %g",
                        lj_dtype_name(dt), xs[i], e, g, want);
        }
        lj_tensor_release(y);
      }
      lj_tensor_release(x);
    }
    lj_shutdown();
  }
}
END_TEST

START_TEST(test_where_and_cast) {
  lj_tensor *c = tu_tensor(LJ_BOOL, LJ_SHAPE(4, 1), TU_ANY, 1);
  for (int di = 0; di < LJ_NUM_DTYPES; di++) {
    lj_dtype dt = tu_all_dtypes[di];
    lj_tensor *a = tu_tensor(dt, LJ_SHAPE(5), TU_ANY, 2);
    lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(4, 5), TU_ANY, 3);
    lj_tensor *ts[LJ_NUM_DTYPES + 1];
    int n = 0;
    ts[n++] = lj_where(c, a, b);
    for (int k = 0; k < LJ_NUM_DTYPES; k++) ts[n++] = lj_cast(a, tu_all_dtypes[k]);
    tu_check_interp(n, ts, 0);
    for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
    lj_tensor_release(a);
    lj_tensor_release(b);
  }
  lj_tensor_release(c);
}
END_TEST

/* Casting special floats to integers: NaN, infinities and out-of-range values. */
START_TEST(test_cast_special) {
  double v[] = {NAN, INFINITY, -INFINITY, 3e9, -3e9, 1e19, -1e19, 300.7, -300.7, 255.9, -0.5, 0.5, 65504, 70000};
  int n = (int)(sizeof v / sizeof *v);
  lj_tensor *x = lj_tensor_from_host(lj_default_device(), LJ_F64, LJ_SHAPE(n), v);
  lj_tensor *xf = lj_cast(x, LJ_F32);
  lj_tensor *ts[2 * LJ_NUM_DTYPES];
  int k = 0;
  for (int i = 0; i < LJ_NUM_DTYPES; i++) {
    ts[k++] = lj_cast(x, tu_all_dtypes[i]);
    ts[k++] = lj_cast(xf, tu_all_dtypes[i]);
  }
  tu_check_interp(k, ts, 0);
  for (int i = 0; i < k; i++) lj_tensor_release(ts[i]);
  lj_tensor_release(xf);
  lj_tensor_release(x);
}
END_TEST

/* Long fused chains of many ops mixing dtypes, views and scalars. */
START_TEST(test_fused_chain) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(16, 24), TU_UNIT, 1);
  lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(24), TU_ANY, 2);
  lj_tensor *i = tu_tensor(LJ_I32, LJ_SHAPE(24, 16), TU_ANY, 3);
  lj_scope_begin();
  lj_tensor *y = lj_add(x, b);
  y = lj_mul(lj_tanh(y), lj_sigmoid(lj_transpose(lj_cast(i, LJ_F32), 0, 1)));
  y = lj_where(lj_gt_scalar(y, 0.1), lj_exp(y), lj_sub_scalar(y, 2.5));
  y = lj_div_scalar(lj_add(y, lj_cast(lj_gt_scalar(b, 0), LJ_F32)), 3.0);
  y = lj_keep(lj_cast(y, LJ_BF16));
  lj_scope_end();
  tu_check1(y, 0);
  lj_tensor_release(x);
  lj_tensor_release(b);
  lj_tensor_release(i);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ops_elementwise");
  TCase *tc = tu_tcase("ops");
  int nu = (int)(sizeof unaries / sizeof *unaries), nb = (int)(sizeof binaries / sizeof *binaries);
  tcase_add_loop_test(tc, test_unary, 0, nu);
  tcase_add_loop_test(tc, test_unary_special_values, 0, nu);
  tcase_add_test(tc, test_unary_wide_range);
  tcase_add_test(tc, test_exp_ulp);
  tcase_add_test(tc, test_sin_cos_ulp);
  tcase_add_test(tc, test_exp_lanes_agree);
  tcase_add_test(tc, test_exp_kernels_linked_vectorize);
  tcase_add_test(tc, test_exp_below_max);
  tcase_add_test(tc, test_exp_short_rows);
  tcase_add_test(tc, test_int_division_full_range);
  tcase_add_test(tc, test_vmath_interleaved);
  tcase_add_loop_test(tc, test_binary, 0, nb);
  tcase_add_loop_test(tc, test_binary_special_values, 0, nb);
  tcase_add_loop_test(tc, test_scalar_forms, 0, (int)(sizeof scalars / sizeof *scalars));
  tcase_add_test(tc, test_pow_scalar_exponents);
  tcase_add_test(tc, test_where_and_cast);
  tcase_add_test(tc, test_cast_special);
  tcase_add_test(tc, test_fused_chain);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
