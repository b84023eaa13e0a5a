/* optim.c — SGD and Adam/AdamW as lazy ops: each step records PyTorch's update rule for every
 * parameter that has a gradient and rebinds the parameter (and its state) with lj_assign.
 * Hyper-parameters, including Adam's bias corrections, are scalar parameters computed on the
 * host each step, so a learning-rate schedule never recompiles. The first step of SGD with
 * momentum and of Adam differs (state starts from the gradient / zeros), so training
 * compiles two step graphs and then none. */
#include "frontend/frontend.h"

#include <math.h>
#include <stdlib.h>

typedef enum optim_kind { SGD, ADAM } optim_kind;

struct lj_optim {
  optim_kind kind;
  lj_sgd_options sgd;
  lj_adam_options adam;
  int n;
  lj_tensor **params;
  lj_tensor **state1, **state2; /* SGD: momentum buffer; Adam: exp_avg, exp_avg_sq */
  int64_t *steps;               /* Adam: steps taken per parameter */
};

static lj_optim *optim_new(const char *name, optim_kind kind, int n, lj_tensor *const *params) {
  if (n < 1 || !params) {
    ljb_error(LJ_ERR_ARG, "%s: no parameters (n = %d)", name, n);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    if (!ljf_arg(name, "params[i]", params[i])) return NULL;
    if (!ljf_same_device(name, params[0], params[i])) return NULL;
    if (!ljg_dtype_is_float(params[i]->dtype)) {
      ljb_error(LJ_ERR_DTYPE, "%s: parameter %d is %s; parameters must be float tensors", name, i,
                lj_dtype_name(params[i]->dtype));
      return NULL;
    }
  }
  lj_optim *o = ljb_xcalloc(1, sizeof *o);
  o->kind = kind;
  o->n = n;
  o->params = ljb_xcalloc((size_t)n, sizeof *o->params);
  o->state1 = ljb_xcalloc((size_t)n, sizeof *o->state1);
  o->state2 = ljb_xcalloc((size_t)n, sizeof *o->state2);
  o->steps = ljb_xcalloc((size_t)n, sizeof *o->steps);
  for (int i = 0; i < n; i++) o->params[i] = lj_tensor_retain(params[i]);
  return o;
}

static bool check_nonneg(const char *name, const char *what, double v) {
  if (v >= 0 && isfinite(v)) return true;
  ljb_error(LJ_ERR_ARG, "%s: invalid %s %g (must be finite and >= 0)", name, what, v);
  return false;
}

lj_optim *lj_optim_sgd(int n, lj_tensor *const *params, lj_sgd_options o) {
  static const char *name = "lj_optim_sgd";
  if (!check_nonneg(name, "lr", o.lr) || !check_nonneg(name, "momentum", o.momentum) ||
      !check_nonneg(name, "weight_decay", o.weight_decay) || !check_nonneg(name, "dampening", o.dampening))
    return NULL;
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    ljb_error(LJ_ERR_ARG, "%s: nesterov needs momentum > 0 and dampening 0 (got %g, %g)", name, o.momentum, o.dampening);
    return NULL;
  }
  lj_optim *opt = optim_new(name, SGD, n, params);
  if (opt) opt->sgd = o;
  return opt;
}

lj_adam_options lj_adam_defaults(void) {
  return (lj_adam_options){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0};
}

lj_optim *lj_optim_adam(int n, lj_tensor *const *params, lj_adam_options o) {
  static const char *name = "lj_optim_adam";
  if (!check_nonneg(name, "lr", o.lr) || !check_nonneg(name, "eps", o.eps) ||
      !check_nonneg(name, "weight_decay", o.weight_decay))
    return NULL;
  if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1)) {
    ljb_error(LJ_ERR_ARG, "%s: betas must be in [0, 1) (got %g, %g)", name, o.beta1, o.beta2);
    return NULL;
  }
  lj_optim *opt = optim_new(name, ADAM, n, params);
  if (opt) opt->adam = o;
  return opt;
}

/* State tensors belong to the optimizer, never to a scope. */
static lj_tensor *unscoped(lj_tensor *t) { return ljf_tensor_unscoped(t->dev, ljf_node(t)); }

static lj_status set_state(lj_tensor **slot, lj_tensor *value) {
  if (*slot) return lj_assign(*slot, value);
  *slot = unscoped(value);
  return LJ_OK;
}

static lj_status sgd_update(lj_optim *o, int i) {
  const lj_sgd_options *s = &o->sgd;
  lj_tensor *p = o->params[i], *dp = p->grad;
  if (s->weight_decay != 0) dp = lj_add(dp, lj_mul_scalar(p, s->weight_decay));
  if (s->momentum != 0) {
    /* PyTorch: the buffer starts as the first gradient */
    lj_tensor *buf = o->state1[i]
                         ? lj_add(lj_mul_scalar(o->state1[i], s->momentum), lj_mul_scalar(dp, 1 - s->dampening))
                         : dp;
    lj_status st = set_state(&o->state1[i], buf);
    if (st != LJ_OK) return st;
    dp = s->nesterov ? lj_add(dp, lj_mul_scalar(o->state1[i], s->momentum)) : o->state1[i];
  }
  return lj_assign(p, lj_sub(p, lj_mul_scalar(dp, s->lr)));
}

static lj_status adam_update(lj_optim *o, int i) {
  const lj_adam_options *a = &o->adam;
  lj_tensor *p = o->params[i], *g = p->grad;
  int64_t step = ++o->steps[i];
  lj_status st = LJ_OK;
  if (a->weight_decay != 0) {
    if (a->decoupled_weight_decay)
      st = lj_assign(p, lj_mul_scalar(p, 1 - a->lr * a->weight_decay));
    else
      g = lj_add(g, lj_mul_scalar(p, a->weight_decay));
  }
  lj_tensor *m = o->state1[i] ? o->state1[i] : lj_zeros(g->dev, g->dtype, g->ndim, g->shape);
  lj_tensor *v = o->state2[i] ? o->state2[i] : lj_zeros(g->dev, g->dtype, g->ndim, g->shape);
  if (st == LJ_OK) st = set_state(&o->state1[i], lj_add(lj_mul_scalar(m, a->beta1), lj_mul_scalar(g, 1 - a->beta1)));
  if (st == LJ_OK)
    st = set_state(&o->state2[i], lj_add(lj_mul_scalar(v, a->beta2), lj_mul_scalar(lj_mul(g, g), 1 - a->beta2)));
  if (st != LJ_OK) return st;
  double bc1 = 1 - pow(a->beta1, (double)step), bc2 = 1 - pow(a->beta2, (double)step);
  lj_tensor *denom = lj_add_scalar(lj_div_scalar(lj_sqrt(o->state2[i]), sqrt(bc2)), a->eps);
  return lj_assign(p, lj_sub(p, lj_mul_scalar(lj_div(o->state1[i], denom), a->lr / bc1)));
}

lj_status lj_optim_step(lj_optim *o) {
  if (!o) return ljb_error(LJ_ERR_ARG, "lj_optim_step: argument o is NULL"), LJ_ERR_ARG;
  lj_status st = LJ_OK;
  lj_scope_begin();
  for (int i = 0; i < o->n && st == LJ_OK; i++) {
    if (!o->params[i]->grad) continue; /* no gradient: PyTorch skips the parameter */
    st = o->kind == SGD ? sgd_update(o, i) : adam_update(o, i);
  }
  lj_scope_end();
  return st;
}

lj_status lj_optimizer_step(lj_optim *o, bool barrier) {
  lj_status st = lj_optim_step(o);
  if (st != LJ_OK || !barrier) return st;
  return ljf_sync(o->params[0]->dev, LJR_CAUSE_OPTIMIZER);
}

void lj_optim_zero_grad(lj_optim *o) {
  if (!o) return;
  for (int i = 0; i < o->n; i++) lj_tensor_zero_grad(o->params[i]);
}

lj_status lj_optim_set_lr(lj_optim *o, double lr) {
  if (!o) return ljb_error(LJ_ERR_ARG, "lj_optim_set_lr: argument o is NULL"), LJ_ERR_ARG;
  if (!check_nonneg("lj_optim_set_lr", "lr", lr)) return LJ_ERR_ARG;
  if (o->kind == SGD)
    o->sgd.lr = lr;
  else
    o->adam.lr = lr;
  return LJ_OK;
}

void lj_optim_free(lj_optim *o) {
  if (!o) return;
  for (int i = 0; i < o->n; i++) {
    lj_tensor_release(o->params[i]);
    lj_tensor_release(o->state1[i]);
    lj_tensor_release(o->state2[i]);
  }
  free(o->params);
  free(o->state1);
  free(o->state2);
  free(o->steps);
  free(o);
}

lj_tensor *lj_clip_grad_norm(int n, lj_tensor *const *params, double max_norm) {
  static const char *name = "lj_clip_grad_norm";
  if (n < 1 || !params) {
    ljb_error(LJ_ERR_ARG, "%s: no parameters (n = %d)", name, n);
    return NULL;
  }
  if (!check_nonneg(name, "max_norm", max_norm)) return NULL;
  for (int i = 0; i < n; i++)
    if (!ljf_arg(name, "params[i]", params[i])) return NULL;
  lj_dtype acc = LJ_F32; /* f16/bf16 gradients accumulate in f32, f64 ones in f64 */
  for (int i = 0; i < n; i++)
    if (params[i]->grad && params[i]->grad->dtype == LJ_F64) acc = LJ_F64;
  lj_scope_begin();
  lj_tensor *total = NULL;
  for (int i = 0; i < n; i++) {
    lj_tensor *g = params[i]->grad;
    if (!g) continue;
    lj_tensor *g_acc = lj_cast(g, acc);
    lj_tensor *sq = lj_sum(lj_mul(g_acc, g_acc), 0, NULL, false);
    total = total ? lj_add(total, sq) : sq;
  }
  if (!total) total = lj_zeros(params[0]->dev, acc, LJ_SCALAR_SHAPE);
  total = lj_sqrt(total);
  /* coef = max_norm / (total + 1e-6), at most 1: no host read, as the seed documents advise */
  lj_tensor *coef = lj_clamp_max(lj_mul_scalar(lj_reciprocal(lj_add_scalar(total, 1e-6)), max_norm), 1);
  for (int i = 0; i < n; i++) {
    lj_tensor *g = params[i]->grad;
    if (g) lj_assign(g, lj_mul(g, lj_cast(coef, g->dtype)));
  }
  lj_keep(total);
  lj_scope_end();
  return total;
}
