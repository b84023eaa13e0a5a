/* pass_fold.c — constant folding.
 * Requires: a verified graph. Guarantees: an elementwise node whose operands are all
 * constants (seen through reshapes and expands) is replaced by one constant expanded to its
 * shape, with the value computed by the reference interpreter (so folding cannot change
 * semantics). Integer division by zero is left in place for the run to report. */
#include "graph/graph.h"

#include <math.h>

/* Evaluates op on 0-d constants with the interpreter; false if it fails. */
static bool evaluate(const ljg_graph *g, const ljg_gnode *n, const int32_t *in, const double *vals,
                     double *out) {
  ljg_graph t;
  ljg_graph_init(&t);
  int32_t tin[3];
  for (int k = 0; k < n->nin; k++) {
    ljg_gnode c = {0};
    c.op = LJG_OP_CONST;
    c.dtype = g->nodes[in[k]].dtype;
    c.attr.f = vals[k];
    tin[k] = ljg_graph_add(&t, &c, NULL);
  }
  ljg_gnode m = *n;
  m.ndim = 0;
  int root = ljg_graph_add(&t, &m, tin);
  ljg_graph_add_root(&t, root, -1);
  unsigned char buf[8] = {0};
  void *outs[1] = {buf};
  lj_status saved = lj_last_status();
  bool ok = ljg_interpret(&t, NULL, NULL, outs) == LJ_OK;
  if (!ok && saved == LJ_OK) lj_clear_error();
  if (ok) *out = ljg_load_f64(n->dtype, buf, 0);
  ljg_graph_free(&t);
  /* A constant node holds a double: integers beyond 2^53 are left unfolded. */
  return ok && (ljg_dtype_is_float(n->dtype) || fabs(*out) <= 0x1p53);
}

static int fold(ljg_rewriter *rw, const ljg_gnode *n, const int32_t *in) {
  const ljg_graph *g = &rw->out;
  double vals[3], v;
  if (ljg_ops[n->op].kind != LJG_ELEMWISE) return ljg_rw_add(rw, n, in);
  for (int k = 0; k < n->nin; k++)
    if (!ljg_uniform_const(g, in[k], &vals[k])) return ljg_rw_add(rw, n, in);
  if (!evaluate(g, n, in, vals, &v)) return ljg_rw_add(rw, n, in);
  return ljg_rw_const(rw, (lj_dtype)n->dtype, v, n->ndim, n->shape);
}

void ljg_pass_fold(ljg_graph *g) {
  ljg_rewriter rw;
  ljg_rw_init(&rw, g);
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    int32_t in[3];
    const int32_t *oin = ljg_in(g, n);
    if (ljg_ops[n->op].kind == LJG_ELEMWISE) {
      for (int k = 0; k < n->nin; k++) in[k] = rw.map[oin[k]];
      rw.map[i] = fold(&rw, n, in);
    } else {
      rw.map[i] = ljg_rw_copy(&rw, g, i);
    }
  }
  ljg_rw_finish(&rw, g);
}
