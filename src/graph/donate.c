/* donate.c — in-place outputs (buffer donation).
 *
 * A graph root may carry a donor: a DATA parameter whose buffer the caller lets the run
 * overwrite, the value the root replaces (lj_assign; an optimizer's parameters and state).
 * Its output slot is then planned to live in that buffer when the program allows it: the one
 * loop nest that writes the slot reads the parameter only at the element it writes, no nest
 * of that kernel reads it after that nest, and no later kernel reads it at all; earlier
 * kernels may read it freely. The nest's (and earlier nests') loads of the parameter are
 * redirected to the output slot, which holds the parameter's value until the nest overwrites
 * it element by element, so the kernel stays correct whether the runtime hands it the donated
 * buffer or a fresh one filled with a copy (the buffer was still in use elsewhere). The slot
 * records the parameter in its param field. */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

/* The kernel whose nest *w alone writes slot out (no matmul, window or trailing product writes
 * it), or -1. */
static int writer(const ljg_program *p, int32_t out, int *w) {
  int found = -1;
  for (int ki = 0; ki < p->nkernels; ki++) {
    const ljg_kernel *k = &p->kernels[ki];
    int32_t own[3];
    for (int i = 0, n = ljg_kernel_own_outputs(k, own); i < n; i++)
      if (own[i] == out) return -1;
    for (int s = 0; s < k->nnests; s++)
      if (k->nests[s].out_slot == out) {
        if (found >= 0) return -1;
        found = ki;
        *w = s;
      }
  }
  return found;
}

/* Whether kernel ki's nest w can write slot out in place of slot param (see the top). */
static bool in_place(const ljg_program *p, int ki, int w, int32_t param, bool *used) {
  for (int kj = ki + 1; kj < p->nkernels; kj++)
    for (int e = 0; e < p->kernels[kj].nexprs; e++)
      if (ljg_expr_reads(&p->kernels[kj].exprs[e], param)) return false;
  const ljg_kernel *k = &p->kernels[ki];
  const ljg_nest *wn = &k->nests[w];
  if (wn->rop >= 0 || wn->scatter_index >= 0) return false;
  if (k->kind == LJG_K_MATMUL &&
      (ljg_expr_reads(&k->exprs[k->mm_a], param) || ljg_expr_reads(&k->exprs[k->mm_bm], param)))
    return false;
  if (ljg_kernel_has_window(k) && ljg_expr_reads(&k->exprs[k->win_src], param)) return false;
  for (int s = 0; s < k->nnests; s++) {
    const ljg_nest *nest = &k->nests[s];
    ljg_nest_exprs(k, nest, used);
    for (int e = 0; e < k->nexprs; e++) {
      if (!used[e] || !ljg_expr_reads(&k->exprs[e], param)) continue;
      /* read before the element is written: by w itself or a nest before it over the same
       * rows, at the element w writes */
      if (s > w || k->exprs[e].kind != LJG_X_LOAD || nest->ndim != wn->ndim || nest->row_dims != wn->row_dims ||
          memcmp(nest->shape, wn->shape, (size_t)nest->ndim * sizeof *nest->shape) != 0 ||
          !ljg_view_equal(&k->views[k->exprs[e].view], &k->views[wn->out_view]))
        return false;
    }
  }
  return true;
}

void ljg_donate(ljg_program *p, const ljg_graph *g) {
  int maxexprs = 1;
  for (int ki = 0; ki < p->nkernels; ki++)
    if (p->kernels[ki].nexprs > maxexprs) maxexprs = p->kernels[ki].nexprs;
  bool *used = ljb_xalloc((size_t)maxexprs * sizeof *used);
  bool *claimed = ljb_xcalloc((size_t)g->nparams + 1, sizeof *claimed);
  for (int r = 0; r < g->nroots; r++) {
    int32_t d = g->donors[r], out = p->root_slot[r], param = -1;
    if (d < 0 || claimed[d] || p->slots[out].kind != LJG_SLOT_OUTPUT || p->slots[out].param >= 0) continue;
    for (int s = 0; s < p->nslots; s++)
      if (p->slots[s].kind == LJG_SLOT_PARAM && p->slots[s].param == d) param = s;
    for (int q = 0; q < p->nroots; q++) /* a root that is the parameter itself keeps its value */
      if (p->root_slot[q] == param) param = -1;
    int w = -1, ki = writer(p, out, &w);
    if (param < 0 || ki < 0 || p->slots[param].nbytes != p->slots[out].nbytes || !in_place(p, ki, w, param, used))
      continue;
    ljg_kernel *k = &p->kernels[ki];
    for (int e = 0; e < k->nexprs; e++)
      if (ljg_expr_reads(&k->exprs[e], param)) k->exprs[e].slot = out;
    p->slots[out].param = d;
    claimed[d] = true;
  }
  free(used);
  free(claimed);
}
