/* pass_dce.c — dead code elimination.
 * Requires: a graph. Guarantees: only nodes some root uses remain, plus every parameter
 * (the binding interface of the graph never changes), in the same relative order. */
#include "graph/graph.h"

#include <stdlib.h>

void ljg_pass_dce(ljg_graph *g) {
  bool *live = ljb_xcalloc((size_t)g->n + 1, sizeof *live);
  for (int r = 0; r < g->nroots; r++) live[g->roots[r]] = true;
  for (int i = g->n - 1; i >= 0; i--) {
    const ljg_gnode *n = &g->nodes[i];
    if (n->param >= 0) live[i] = true;
    if (!live[i]) continue;
    const int32_t *in = ljg_in(g, n);
    for (int k = 0; k < n->nin; k++) live[in[k]] = true;
  }
  ljg_rewriter rw;
  ljg_rw_init(&rw, g);
  for (int i = 0; i < g->n; i++) rw.map[i] = live[i] ? ljg_rw_copy(&rw, g, i) : -1;
  ljg_rw_finish(&rw, g);
  free(live);
}
