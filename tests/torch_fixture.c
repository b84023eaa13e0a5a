/* torch_fixture.c — reading PyTorch fixture files and comparing results with them. */
#include "torch_fixture.h"

#include "test_util.h"

#include "graph/graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *loading; /* the file being loaded, for LOAD_CHECK */

#define LOAD_CHECK(c)                                                                     \
  do {                                                                                    \
    if (!(c)) {                                                                           \
      fprintf(stderr, "%s: %s failed\n", loading, #c);                                    \
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
static void parse_tensor(char *line, tf_tensor *t) {
  char *tok = strtok(line, " \n");
  LOAD_CHECK(tok && ljg_dtype_by_name(tok) >= 0);
  t->dt = (lj_dtype)ljg_dtype_by_name(tok);
  t->ndim = atoi(strtok(NULL, " \n"));
  LOAD_CHECK(t->ndim >= 0 && t->ndim <= LJ_MAX_DIMS);
  t->n = 1;
  for (int d = 0; d < t->ndim; d++) {
    t->shape[d] = atoll(strtok(NULL, " \n"));
    t->n *= t->shape[d];
  }
  tok = strtok(NULL, " \n");
  LOAD_CHECK(tok && strcmp(tok, ":") == 0);
  t->vals = calloc((size_t)t->n + 1, sizeof *t->vals);
  t->ivals = calloc((size_t)t->n + 1, sizeof *t->ivals);
  for (int64_t i = 0; i < t->n; i++) {
    const char *v = strtok(NULL, " \n");
    LOAD_CHECK(v != NULL);
    t->vals[i] = parse_value(v);
    t->ivals[i] = strtoll(v, NULL, 10);
  }
}

tf_case *tf_load(const char *file, int *count) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", LJ_TEST_DATA_DIR, file);
  loading = file;
  FILE *f = fopen(path, "r");
  LOAD_CHECK(f != NULL);
  int cap = 64, n = -1;
  tf_case *fx = calloc((size_t)cap, sizeof *fx);
  static char line[1 << 18];
  while (fgets(line, sizeof line, f)) {
    LOAD_CHECK(strlen(line) < sizeof line - 1);
    if (strncmp(line, "case ", 5) == 0) {
      if (++n == cap) {
        fx = realloc(fx, (size_t)(cap *= 2) * sizeof *fx);
        LOAD_CHECK(fx != NULL);
      }
      tf_case *c = &fx[n];
      memset(c, 0, sizeof *c);
      strtok(line, " \n");
      snprintf(c->name, sizeof c->name, "%s", strtok(NULL, " \n"));
      snprintf(c->op, sizeof c->op, "%s", strtok(NULL, " \n"));
      for (char *s; (s = strtok(NULL, " \n"));) {
        LOAD_CHECK(c->nscalars < TF_MAX_SCALARS);
        c->scalars[c->nscalars++] = parse_value(s);
      }
      continue;
    }
    if (line[0] == '#' || line[0] == '\n') continue;
    LOAD_CHECK(n >= 0);
    tf_case *c = &fx[n];
    if (strncmp(line, "tol ", 4) == 0) {
      c->tol = strtod(line + 4, NULL);
    } else if (strncmp(line, "atol ", 5) == 0) {
      c->atol = strtod(line + 5, NULL);
    } else if (strncmp(line, "in ", 3) == 0) {
      LOAD_CHECK(c->nin < TF_MAX_IN);
      parse_tensor(line + 3, &c->in[c->nin++]);
    } else if (strncmp(line, "out error", 9) == 0) {
      c->expect_error = true;
    } else if (strncmp(line, "out ", 4) == 0) {
      LOAD_CHECK(c->nout < TF_MAX_OUT);
      parse_tensor(line + 4, &c->out[c->nout++]);
    } else {
      LOAD_CHECK(!"a known line kind");
    }
  }
  fclose(f);
  *count = n + 1;
  return fx;
}

lj_tensor *tf_upload(const tf_tensor *t) {
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

static bool same(double got, double want, double tol, double atol) {
  if (isnan(got) || isnan(want)) return isnan(got) && isnan(want);
  if (tol == 0 && atol == 0) return got == want && signbit(got) == signbit(want);
  if (isinf(got) || isinf(want)) return got == want;
  return fabs(got - want) <= tol * fmax(fabs(got), fabs(want)) + atol + 1e-37;
}

void tf_check(const tf_case *c, int k, lj_tensor *r) {
  const tf_tensor *want = &c->out[k];
  ck_assert_msg(r, "%s: %s", c->name, lj_last_error());
  ck_assert_msg(lj_tensor_dtype(r) == want->dt, "%s: output %d is %s, PyTorch gives %s", c->name, k,
                lj_dtype_name(lj_tensor_dtype(r)), lj_dtype_name(want->dt));
  ck_assert_msg(lj_tensor_ndim(r) == want->ndim, "%s: output %d has rank %d, PyTorch %d", c->name, k,
                lj_tensor_ndim(r), want->ndim);
  for (int d = 0; d < want->ndim; d++)
    ck_assert_msg(lj_tensor_shape(r)[d] == want->shape[d], "%s: output %d dim %d is %lld, PyTorch %lld", c->name, k,
                  d, (long long)lj_tensor_shape(r)[d], (long long)want->shape[d]);
  int64_t n = lj_tensor_numel(r);
  if (!ljg_dtype_is_float(want->dt)) {
    void *raw = calloc((size_t)n + 1, 8);
    ck_assert_int_eq(lj_tensor_to_host(r, raw, (size_t)n * lj_dtype_size(want->dt)), LJ_OK);
    for (int64_t i = 0; i < n; i++) {
      int64_t got = ljg_load_i64(want->dt, raw, i);
      ck_assert_msg(got == want->ivals[i], "%s: output %d element %lld is %lld, PyTorch gives %lld", c->name, k,
                    (long long)i, (long long)got, (long long)want->ivals[i]);
    }
    free(raw);
    return;
  }
  double *got = tu_read(r, &n);
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(same(got[i], want->vals[i], c->tol, c->atol), "%s: output %d element %lld is %.17g, PyTorch gives %.17g",
                  c->name, k, (long long)i, got[i], want->vals[i]);
  free(got);
}
