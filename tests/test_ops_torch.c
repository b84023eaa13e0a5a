/* test_ops_torch.c — replays tests/data/torch_fixtures.txt (written by
 * gen_torch_fixtures.py from PyTorch's results): integer and floor division, remainder
 * signs, rounding half to even, NaN in max/min and arg-reductions, type promotion (the
 * result dtype must match too), casts of special values, integer pow and 16-bit float
 * rounding. Exact cases must match bit for bit (NaN matches NaN). */
#include "test_util.h"

#include "graph/graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct host_tensor {
  lj_dtype dt;
  int ndim;
  int64_t shape[LJ_MAX_DIMS];
  int64_t n;
  double *vals;    /* float dtypes */
  int64_t *ivals;  /* integer and bool dtypes, exactly */
} host_tensor;

typedef struct fixture {
  char name[96], op[32];
  double scalars[2];
  int nscalars;
  double tol, atol;
  host_tensor in[3];
  int nin;
  bool expect_error;
  host_tensor out;
} fixture;

/* Fixture loading runs before the suite, outside any test: a bad file ends the program. */
#define LOAD_CHECK(c)                                                                     \
  do {                                                                                    \
    if (!(c)) {                                                                           \
      fprintf(stderr, "torch_fixtures.txt: %s failed\n", #c);                             \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

static double parse_value(const char *s) {
  if (strcmp(s, "nan") == 0) return NAN;
  if (strcmp(s, "inf") == 0) return INFINITY;
  if (strcmp(s, "-inf") == 0) return -INFINITY;
  return strtod(s, NULL);
}

/* "<dtype> <ndim> <dims...> : <values...>" */
static void parse_tensor(char *line, host_tensor *t) {
  char *tok = strtok(line, " \n");
  LOAD_CHECK(ljg_dtype_by_name(tok) >= 0);
  t->dt = (lj_dtype)ljg_dtype_by_name(tok);
  t->ndim = atoi(strtok(NULL, " \n"));
  t->n = 1;
  for (int d = 0; d < t->ndim; d++) {
    t->shape[d] = atoll(strtok(NULL, " \n"));
    t->n *= t->shape[d];
  }
  LOAD_CHECK(strcmp(strtok(NULL, " \n"), ":") == 0);
  t->vals = calloc((size_t)t->n + 1, sizeof *t->vals);
  t->ivals = calloc((size_t)t->n + 1, sizeof *t->ivals);
  for (int64_t i = 0; i < t->n; i++) {
    const char *v = strtok(NULL, " \n");
    t->vals[i] = parse_value(v);
    t->ivals[i] = strtoll(v, NULL, 10);
  }
}

static fixture *load(int *count) {
  char path[512];
  snprintf(path, sizeof path, "%s/torch_fixtures.txt", LJ_TEST_DATA_DIR);
  FILE *f = fopen(path, "r");
  LOAD_CHECK(f != NULL);
  fixture *fx = calloc(400, sizeof *fx);
  int n = -1;
  static char line[1 << 16];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "case ", 5) == 0) {
      fixture *c = &fx[++n];
      LOAD_CHECK(n < 400);
      strtok(line, " \n");
      snprintf(c->name, sizeof c->name, "%s", strtok(NULL, " \n"));
      snprintf(c->op, sizeof c->op, "%s", strtok(NULL, " \n"));
      char *s;
      while ((s = strtok(NULL, " \n")) && c->nscalars < 2) c->scalars[c->nscalars++] = parse_value(s);
    } else if (strncmp(line, "tol ", 4) == 0) {
      fx[n].tol = strtod(line + 4, NULL);
    } else if (strncmp(line, "atol ", 5) == 0) {
      fx[n].atol = strtod(line + 5, NULL);
    } else if (strncmp(line, "in ", 3) == 0) {
      parse_tensor(line + 3, &fx[n].in[fx[n].nin++]);
    } else if (strncmp(line, "out error", 9) == 0) {
      fx[n].expect_error = true;
    } else if (strncmp(line, "out ", 4) == 0) {
      parse_tensor(line + 4, &fx[n].out);
    }
  }
  fclose(f);
  *count = n + 1;
  return fx;
}

static lj_tensor *upload(const host_tensor *t) {
  void *buf = calloc((size_t)t->n + 1, 8);
  for (int64_t i = 0; i < t->n; i++) {
    if (ljg_dtype_is_float(t->dt))
      ljg_store_f64(t->dt, buf, i, t->vals[i]);
    else
      ljg_store_i64(t->dt, buf, i, t->ivals[i]);
  }
  lj_tensor *r = lj_tensor_from_host(lj_default_device(), t->dt, t->ndim, t->shape, buf);
  free(buf);
  return r;
}

typedef lj_tensor *(*unary_fn)(lj_tensor *);
typedef lj_tensor *(*binary_fn)(lj_tensor *, lj_tensor *);

static lj_tensor *gelu_exact(lj_tensor *t) { return lj_gelu(t, false); }
static lj_tensor *gelu_tanh(lj_tensor *t) { return lj_gelu(t, true); }
static lj_tensor *div_trunc(lj_tensor *a, lj_tensor *b) { return lj_div_rounding(a, b, LJ_ROUND_TRUNC); }

static const struct {
  const char *name;
  unary_fn fn;
} unaries[] = {
    {"neg", lj_neg},       {"abs", lj_abs},         {"exp", lj_exp},         {"log", lj_log},
    {"log1p", lj_log1p},   {"expm1", lj_expm1},     {"sqrt", lj_sqrt},       {"rsqrt", lj_rsqrt},
    {"sin", lj_sin},       {"cos", lj_cos},         {"tanh", lj_tanh},       {"sigmoid", lj_sigmoid},
    {"relu", lj_relu},     {"gelu", gelu_exact},    {"gelu_tanh", gelu_tanh}, {"silu", lj_silu},
    {"erf", lj_erf},       {"floor", lj_floor},     {"ceil", lj_ceil},       {"round", lj_round},
    {"sign", lj_sign},     {"reciprocal", lj_reciprocal}, {"logical_not", lj_logical_not},
    {"isnan", lj_isnan},
};

static const struct {
  const char *name;
  binary_fn fn;
} binaries[] = {
    {"add", lj_add},           {"sub", lj_sub},         {"mul", lj_mul},
    {"div", lj_div},           {"div_trunc", div_trunc}, {"div_floor", lj_floor_divide},
    {"remainder", lj_remainder}, {"pow", lj_pow},        {"maximum", lj_maximum},
    {"minimum", lj_minimum},   {"eq", lj_eq},           {"ne", lj_ne},
    {"lt", lj_lt},             {"le", lj_le},           {"gt", lj_gt},
    {"ge", lj_ge},             {"logical_and", lj_logical_and}, {"logical_or", lj_logical_or},
    {"matmul", lj_matmul},
};

static lj_tensor *apply(const fixture *c, lj_tensor **in) {
  for (size_t i = 0; i < sizeof unaries / sizeof *unaries; i++)
    if (strcmp(c->op, unaries[i].name) == 0) return unaries[i].fn(in[0]);
  for (size_t i = 0; i < sizeof binaries / sizeof *binaries; i++)
    if (strcmp(c->op, binaries[i].name) == 0) return binaries[i].fn(in[0], in[1]);
  if (strncmp(c->op, "cast_", 5) == 0) return lj_cast(in[0], (lj_dtype)ljg_dtype_by_name(c->op + 5));
  double s = c->scalars[0];
  if (strcmp(c->op, "add_scalar") == 0) return lj_add_scalar(in[0], s);
  if (strcmp(c->op, "mul_scalar") == 0) return lj_mul_scalar(in[0], s);
  if (strcmp(c->op, "gt_scalar") == 0) return lj_gt_scalar(in[0], s);
  if (strcmp(c->op, "rsub_scalar") == 0) return lj_rsub_scalar(in[0], s);
  if (strcmp(c->op, "pow_scalar") == 0) return lj_pow_scalar(in[0], s);
  if (strcmp(c->op, "rpow_scalar") == 0) return lj_rpow_scalar(s, in[0]);
  if (strcmp(c->op, "clamp") == 0) return lj_clamp(in[0], s, c->scalars[1]);
  if (strcmp(c->op, "where") == 0) return lj_where(in[0], in[1], in[2]);
  if (strcmp(c->op, "chain") == 0)
    return lj_sub(lj_div(lj_add(lj_mul(in[0], in[1]), in[0]), in[1]), in[1]);
  if (strcmp(c->op, "sum") == 0) return lj_sum(in[0], 0, NULL, false);
  if (strcmp(c->op, "mean") == 0) return lj_mean(in[0], 0, NULL, false);
  if (strcmp(c->op, "prod") == 0) return lj_prod(in[0], 0, NULL, false);
  if (strcmp(c->op, "amax1") == 0) return lj_amax(in[0], 1, (const int[]){1}, false);
  if (strcmp(c->op, "amin1") == 0) return lj_amin(in[0], 1, (const int[]){1}, false);
  if (strcmp(c->op, "argmax1") == 0) return lj_argmax(in[0], 1, false);
  if (strcmp(c->op, "argmin1") == 0) return lj_argmin(in[0], 1, false);
  if (strcmp(c->op, "argmax0") == 0) return lj_argmax(in[0], 0, false);
  ck_abort_msg("fixture %s: unknown op %s", c->name, c->op);
  return NULL;
}

static bool same(double got, double want, double tol, double atol) {
  if (isnan(got) || isnan(want)) return isnan(got) && isnan(want);
  if (tol == 0 && atol == 0) return got == want && signbit(got) == signbit(want);
  if (isinf(got) || isinf(want)) return got == want;
  return fabs(got - want) <= tol * fmax(fabs(got), fabs(want)) + atol + 1e-37;
}

static fixture *fixtures;
static int nfixtures;

START_TEST(test_fixture) {
  const fixture *c = &fixtures[_i];
  lj_tensor *in[3];
  for (int k = 0; k < c->nin; k++) in[k] = upload(&c->in[k]);
  lj_tensor *r = apply(c, in);
  if (c->expect_error) {
    ck_assert_msg(!r, "%s: PyTorch raises, lazyjit returned a result", c->name);
    ck_assert_int_ne(lj_last_status(), LJ_OK);
    return;
  }
  ck_assert_msg(r, "%s: %s", c->name, lj_last_error());
  ck_assert_msg(lj_tensor_dtype(r) == c->out.dt, "%s: dtype %s, PyTorch gives %s", c->name,
                lj_dtype_name(lj_tensor_dtype(r)), lj_dtype_name(c->out.dt));
  ck_assert_int_eq(lj_tensor_ndim(r), c->out.ndim);
  for (int d = 0; d < c->out.ndim; d++) ck_assert_int_eq(lj_tensor_shape(r)[d], c->out.shape[d]);
  int64_t n = lj_tensor_numel(r);
  if (!ljg_dtype_is_float(c->out.dt)) {
    int64_t *got = calloc((size_t)n + 1, sizeof *got);
    void *raw = calloc((size_t)n + 1, 8);
    ck_assert_int_eq(lj_tensor_to_host(r, raw, (size_t)n * lj_dtype_size(c->out.dt)), LJ_OK);
    for (int64_t i = 0; i < n; i++) got[i] = ljg_load_i64(c->out.dt, raw, i);
    for (int64_t i = 0; i < n; i++)
      ck_assert_msg(got[i] == c->out.ivals[i], "%s: element %lld is %lld, PyTorch gives %lld", c->name,
                    (long long)i, (long long)got[i], (long long)c->out.ivals[i]);
    free(got);
    free(raw);
    return;
  }
  double *got = tu_read(r, &n);
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(same(got[i], c->out.vals[i], c->tol, c->atol), "%s: element %lld is %.17g, PyTorch gives %.17g",
                  c->name, (long long)i, got[i], c->out.vals[i]);
  free(got);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ops_torch");
  TCase *tc = tu_tcase("torch");
  tcase_add_loop_test(tc, test_fixture, 0, nfixtures);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  fixtures = load(&nfixtures);
  return tu_run(suite());
}
