/* ops.c — the op table built from ops.def, and lookup by printed name. */
#include "graph/graph.h"

#include <string.h>

const ljg_opinfo ljg_ops[LJG_NUM_OPS] = {
#define X(name, str, arity, kind, attrs, types) {str, arity, kind, attrs, types},
#include "graph/ops.def"
#undef X
};

int ljg_op_by_name(const char *name) {
  for (int i = 0; i < LJG_NUM_OPS; i++)
    if (strcmp(ljg_ops[i].name, name) == 0) return i;
  return -1;
}

bool ljg_op_blocks_grad(int op, lj_dtype dt) {
  ljg_kind k = ljg_ops[op].kind;
  return op == LJG_OP_STOP_GRADIENT || k == LJG_LEAF || k == LJG_INDEXED || !ljg_dtype_is_float(dt);
}

bool ljg_op_gives_bool(int op) {
  return op == LJG_OP_EQ || op == LJG_OP_NE || op == LJG_OP_LT || op == LJG_OP_LE || op == LJG_OP_GT ||
         op == LJG_OP_GE || op == LJG_OP_LOGICAL_AND || op == LJG_OP_LOGICAL_OR || op == LJG_OP_LOGICAL_NOT ||
         op == LJG_OP_ISNAN;
}
