/* passes.c — the graph pass pipeline a compile runs before fusion, with the verifier between
 * passes: a pass that breaks the graph is an internal error caught where it happens. */
#include "graph/graph.h"

#include <stdio.h>

static void verified(ljg_graph *g, void (*pass)(ljg_graph *), const char *name) {
  pass(g);
  if (!ljg_graph_verify(g)) {
    fprintf(stderr, "lazyjit: internal error: the %s pass produced an invalid graph: %s\n", name, lj_last_error());
    LJ_UNREACHABLE("graph pass broke the graph");
  }
}

void ljg_optimize(ljg_graph *g) {
  verified(g, ljg_pass_simplify, "simplify");
  verified(g, ljg_pass_fold, "fold");
  verified(g, ljg_pass_dce, "dce"); /* the matmul pass counts uses: only live ones */
  verified(g, ljg_pass_matmul, "matmul");
  verified(g, ljg_pass_dce, "dce"); /* the reduce pass reads what uses a node: only live ones */
  verified(g, ljg_pass_reduce, "reduce"); /* after matmul: a batch sum there is a matmul_sum */
  verified(g, ljg_pass_simplify, "simplify");
  verified(g, ljg_pass_dce, "dce");
}
