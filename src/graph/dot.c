/* dot.c — a canonical graph in Graphviz dot: parameters as boxes, roots doubly outlined,
 * edges from operand to user. */
#include "graph/graph.h"

char *ljg_graph_dot(const ljg_graph *g) {
  ljb_str b = {0};
  ljb_str_puts(&b, "digraph G {\n  node [fontname=\"monospace\"];\n");
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    char shape[LJB_SHAPE_STR_MAX];
    bool root = false;
    for (int r = 0; r < g->nroots; r++) root |= g->roots[r] == i;
    ljb_str_printf(&b, "  n%d [label=\"%%%d %s\\n%s%s", i, i, ljg_ops[n->op].name,
                   lj_dtype_name(n->dtype), ljb_shape_str(shape, n->ndim, n->shape));
    if (n->param >= 0) ljb_str_printf(&b, "\\nparam=%d", n->param);
    ljb_str_printf(&b, "\"%s%s];\n", n->param >= 0 ? ", shape=box" : "",
                   root ? ", peripheries=2" : "");
    const int32_t *in = ljg_in(g, n);
    for (int k = 0; k < n->nin; k++) ljb_str_printf(&b, "  n%d -> n%d;\n", in[k], i);
  }
  ljb_str_puts(&b, "}\n");
  return ljb_str_take(&b);
}
