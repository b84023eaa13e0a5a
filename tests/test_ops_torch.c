/* test_ops_torch.c — replays tests/data/torch_fixtures.txt (written by
 * gen_torch_fixtures.py from PyTorch's results): integer and floor division, remainder
 * signs, rounding half to even, NaN in max/min and arg-reductions, type promotion (the
 * result dtype must match too), casts of special values, integer pow and 16-bit float
 * rounding. Exact cases must match bit for bit (NaN matches NaN). */
#include "test_util.h"
#include "torch_fixture.h"

#include "graph/graph.h"

#include <string.h>

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

static lj_tensor *apply(const tf_case *c, lj_tensor **in) {
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

static tf_case *fixtures;
static int nfixtures;

START_TEST(test_fixture) {
  const tf_case *c = &fixtures[_i];
  lj_tensor *in[TF_MAX_IN];
  for (int k = 0; k < c->nin; k++) in[k] = tf_upload(&c->in[k]);
  lj_tensor *r = apply(c, in);
  if (c->expect_error) {
    ck_assert_msg(!r, "%s: PyTorch raises, lazyjit returned a result", c->name);
    ck_assert_int_ne(lj_last_status(), LJ_OK);
    return;
  }
  tf_check(c, 0, r);
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
  fixtures = tf_load("torch_fixtures.txt", &nfixtures);
  return tu_run(suite());
}
