/* passes.c — the graph pass pipeline a compile runs before fusion, with the verifier between
 * passes: a pass that breaks the graph is an internal error caught where it happens. */
#include "graph/graph.h"

static void verified(ljg_graph *g, void (*pass)(ljg_graph *)) {
  pass(g);
  LJ_ASSERT(ljg_graph_verify(g));
}

void ljg_optimize(ljg_graph *g) {
  verified(g, ljg_pass_simplify);
  verified(g, ljg_pass_fold);
  verified(g, ljg_pass_simplify);
  verified(g, ljg_pass_dce);
}
