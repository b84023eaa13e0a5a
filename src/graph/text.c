/* text.c — the IR text format (docs/ir_format.md): printer and parser, kept together so
 * they round-trip (print → parse → print gives the same text). One node per line:
 *
 *   IR {
 *     %0 = f32[4,3] data(), param=0
 *     %1 = f32[] scalar(), param=1, value=0.5
 *     %2 = f32[4,3] expand(%1)
 *     %3 = f32[4,3] add(%0, %2), ROOT=0
 *   }
 *
 * Attributes follow the operands as name=value: perm=(1,0), dim=1, start=0, step=2,
 * dims=(0,2), bound=10[, for=op], window=(kh,kw,sh,sw,ph,pw,dh,dw), fill=<%.17g>, value=<%.17g>,
 * ROOT=<root index or (list)>, location=<to the end of line>. */
#include "graph/graph.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_ilist(ljb_str *b, const int64_t *v, int n) {
  ljb_str_puts(b, "(");
  for (int i = 0; i < n; i++) ljb_str_printf(b, "%s%" PRId64, i ? "," : "", v[i]);
  ljb_str_puts(b, ")");
}

static void print_attrs(ljb_str *b, const ljg_gnode *n, const ljg_binding *binds) {
  switch (ljg_ops[n->op].attrs) {
  case LJG_A_VALUE:
    if (n->op == LJG_OP_SCALAR && !ljg_dtype_is_float(n->dtype))
      ljb_str_printf(b, ", value=%" PRId64, binds ? binds[n->param].i : n->attr.a[1]);
    else
      ljb_str_printf(b, ", value=%.17g", n->op == LJG_OP_SCALAR && binds ? binds[n->param].f : n->attr.f);
    break;
  case LJG_A_PERM:
    ljb_str_puts(b, ", perm=");
    print_ilist(b, n->attr.a, n->ndim);
    break;
  case LJG_A_SLICE:
    ljb_str_printf(b, ", dim=%" PRId64 ", start=%" PRId64 ", step=%" PRId64, n->attr.a[0],
                   n->attr.a[1], n->attr.a[2]);
    break;
  case LJG_A_DIMS: {
    int64_t dims[LJ_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < n->ndim; d++)
      if ((uint64_t)n->attr.a[0] >> d & 1) dims[nd++] = d;
    ljb_str_puts(b, ", dims=");
    print_ilist(b, dims, nd);
    break;
  }
  case LJG_A_DIM: ljb_str_printf(b, ", dim=%" PRId64, n->attr.a[0]); break;
  case LJG_A_BOUND:
    ljb_str_printf(b, ", bound=%" PRId64, n->attr.a[0]);
    if (n->attr.a[1] > 0 && n->attr.a[1] < LJG_NUM_OPS) ljb_str_printf(b, ", for=%s", ljg_ops[n->attr.a[1]].name);
    break;
  case LJG_A_WINDOW:
    ljb_str_puts(b, ", window=");
    print_ilist(b, n->attr.a, 8);
    ljb_str_printf(b, ", fill=%.17g", n->attr.f);
    break;
  case LJG_A_NONE: break;
  }
}

/* ", key=r" or ", key=(r1,r2)" for the roots r whose entry in per_root is v; nothing if none. */
static void print_roots(ljb_str *b, const ljg_graph *g, const char *key, const int32_t *per_root, int32_t v) {
  int64_t roots[64];
  int nr = 0;
  for (int r = 0; r < g->nroots && nr < 64; r++)
    if (per_root[r] == v) roots[nr++] = r;
  if (nr == 1) ljb_str_printf(b, ", %s=%" PRId64, key, roots[0]);
  if (nr > 1) {
    ljb_str_printf(b, ", %s=", key);
    print_ilist(b, roots, nr);
  }
}

static void print_node(ljb_str *b, const ljg_graph *g, int i, const ljg_binding *binds) {
  const ljg_gnode *n = &g->nodes[i];
  char shape[LJB_SHAPE_STR_MAX];
  ljb_str_printf(b, "%%%d = %s%s %s(", i, lj_dtype_name(n->dtype), ljb_shape_str(shape, n->ndim, n->shape),
                 ljg_ops[n->op].name);
  const int32_t *in = ljg_in(g, n);
  for (int k = 0; k < n->nin; k++) ljb_str_printf(b, "%s%%%d", k ? ", " : "", in[k]);
  ljb_str_puts(b, ")");
  if (n->param >= 0) ljb_str_printf(b, ", param=%d", n->param);
  print_attrs(b, n, binds);
  print_roots(b, g, "ROOT", g->roots, i);
  if (n->op == LJG_OP_DATA) print_roots(b, g, "DONOR", g->donors, n->param);
  if (n->loc) ljb_str_printf(b, ", location=%s", n->loc);
}

char *ljg_graph_text(const ljg_graph *g, const ljg_binding *binds) {
  ljb_str b = {0};
  ljb_str_puts(&b, "IR {\n");
  for (int i = 0; i < g->n; i++) {
    ljb_str_puts(&b, "  ");
    print_node(&b, g, i, binds);
    ljb_str_puts(&b, "\n");
  }
  ljb_str_puts(&b, "}\n");
  return ljb_str_take(&b);
}

char *ljg_node_text(const ljg_graph *g, int i, const ljg_binding *binds) {
  ljb_str b = {0};
  print_node(&b, g, i, binds);
  return ljb_str_take(&b);
}

/* ---- parser -------------------------------------------------------------------------- */

typedef struct parser {
  const char *p;
  int line;
  bool failed;
} parser;

static bool perr(parser *ps, const char *what) {
  if (!ps->failed)
    ljb_error(LJ_ERR_ARG, "graph text: line %d: %s", ps->line, what);
  ps->failed = true;
  return false;
}

static void skip_spaces(parser *ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r') ps->p++;
}

static bool expect(parser *ps, const char *s) {
  skip_spaces(ps);
  size_t n = strlen(s);
  if (strncmp(ps->p, s, n) != 0) {
    char msg[64];
    snprintf(msg, sizeof msg, "expected '%s'", s);
    return perr(ps, msg);
  }
  ps->p += n;
  return true;
}

static bool accept(parser *ps, const char *s) {
  skip_spaces(ps);
  size_t n = strlen(s);
  if (strncmp(ps->p, s, n) != 0) return false;
  ps->p += n;
  return true;
}

static bool parse_int(parser *ps, int64_t *out) {
  skip_spaces(ps);
  char *end;
  errno = 0;
  long long v = strtoll(ps->p, &end, 10);
  if (end == ps->p || errno) return perr(ps, "expected an integer");
  ps->p = end;
  *out = v;
  return true;
}

static bool parse_double(parser *ps, double *out) {
  skip_spaces(ps);
  char *end;
  double v = strtod(ps->p, &end);
  if (end == ps->p) return perr(ps, "expected a number");
  ps->p = end;
  *out = v;
  return true;
}

static bool parse_word(parser *ps, char *buf, size_t cap) {
  skip_spaces(ps);
  size_t n = 0;
  while (isalnum((unsigned char)*ps->p) || *ps->p == '_') {
    if (n + 1 >= cap) return perr(ps, "name too long");
    buf[n++] = *ps->p++;
  }
  buf[n] = 0;
  return n > 0 ? true : perr(ps, "expected a name");
}

/* "(a,b,c)" into v; returns the count or -1. */
static int parse_ilist(parser *ps, int64_t *v, int cap) {
  if (!expect(ps, "(")) return -1;
  int n = 0;
  if (accept(ps, ")")) return 0;
  do {
    if (n == cap) return perr(ps, "list too long"), -1;
    if (!parse_int(ps, &v[n++])) return -1;
  } while (accept(ps, ","));
  return expect(ps, ")") ? n : -1;
}

static bool parse_type(parser *ps, ljg_gnode *n) {
  char name[16];
  if (!parse_word(ps, name, sizeof name)) return false;
  int dt = ljg_dtype_by_name(name);
  if (dt < 0) return perr(ps, "unknown dtype");
  n->dtype = (uint8_t)dt;
  if (!expect(ps, "[")) return false;
  int nd = 0;
  if (!accept(ps, "]")) {
    do {
      if (nd == LJ_MAX_DIMS) return perr(ps, "too many dims");
      if (!parse_int(ps, &n->shape[nd])) return false;
      if (n->shape[nd++] < 0) return perr(ps, "negative size");
    } while (accept(ps, ","));
    if (!expect(ps, "]")) return false;
  }
  n->ndim = (uint8_t)nd;
  return true;
}

typedef struct parsed_root {
  int64_t root;
  int32_t node;
  bool donor; /* DONOR=: node is the root's donor, not the root */
} parsed_root;
typedef LJB_VEC(parsed_root) root_vec;
typedef LJB_VEC(int64_t) i64_vec;

static bool parse_attr(parser *ps, ljg_gnode *n, root_vec *roots,
                       int idx, ljb_str *locs, i64_vec *loc_offsets) {
  char key[32];
  if (!parse_word(ps, key, sizeof key) || !expect(ps, "=")) return false;
  int64_t v;
  if (strcmp(key, "param") == 0) {
    if (!parse_int(ps, &v)) return false;
    n->param = (int32_t)v;
  } else if (strcmp(key, "value") == 0) {
    if (n->op == LJG_OP_SCALAR && !ljg_dtype_is_float(n->dtype)) {
      if (!parse_int(ps, &n->attr.a[1])) return false;
    } else if (!parse_double(ps, &n->attr.f)) {
      return false;
    }
  } else if (strcmp(key, "perm") == 0) {
    if (parse_ilist(ps, n->attr.a, LJ_MAX_DIMS) != n->ndim) return perr(ps, "bad perm");
  } else if (strcmp(key, "dim") == 0) {
    if (!parse_int(ps, &n->attr.a[0])) return false;
  } else if (strcmp(key, "bound") == 0) {
    if (!parse_int(ps, &n->attr.a[0])) return false;
  } else if (strcmp(key, "for") == 0) {
    char name[32];
    if (!parse_word(ps, name, sizeof name)) return false;
    int op = ljg_op_by_name(name);
    if (op <= 0) return perr(ps, "unknown op after for=");
    n->attr.a[1] = op;
  } else if (strcmp(key, "window") == 0) {
    if (parse_ilist(ps, n->attr.a, 8) != 8) return perr(ps, "window needs 8 values");
  } else if (strcmp(key, "fill") == 0) {
    if (!parse_double(ps, &n->attr.f)) return false;
  } else if (strcmp(key, "start") == 0) {
    if (!parse_int(ps, &n->attr.a[1])) return false;
  } else if (strcmp(key, "step") == 0) {
    if (!parse_int(ps, &n->attr.a[2])) return false;
  } else if (strcmp(key, "dims") == 0) {
    int64_t dims[LJ_MAX_DIMS];
    int nd = parse_ilist(ps, dims, LJ_MAX_DIMS);
    if (nd < 0) return false;
    n->attr.a[0] = 0;
    for (int k = 0; k < nd; k++) {
      if (dims[k] < 0 || dims[k] >= LJ_MAX_DIMS) return perr(ps, "bad dims");
      n->attr.a[0] |= (int64_t)1 << dims[k];
    }
  } else if (strcmp(key, "ROOT") == 0 || strcmp(key, "DONOR") == 0) {
    int64_t list[64];
    int nr = 1;
    skip_spaces(ps);
    if (*ps->p == '(') {
      nr = parse_ilist(ps, list, 64);
      if (nr < 0) return false;
    } else if (!parse_int(ps, &list[0])) {
      return false;
    }
    bool donor = key[0] == 'D';
    for (int k = 0; k < nr; k++) ljb_vec_push(roots, ((parsed_root){list[k], idx, donor}));
  } else if (strcmp(key, "location") == 0) {
    skip_spaces(ps);
    const char *end = strchr(ps->p, '\n');
    size_t len = end ? (size_t)(end - ps->p) : strlen(ps->p);
    ljb_vec_push(loc_offsets, (int64_t)locs->n);
    ljb_vec_push(loc_offsets, (int64_t)idx);
    char tmp[512];
    if (len >= sizeof tmp) len = sizeof tmp - 1;
    memcpy(tmp, ps->p, len);
    tmp[len] = 0;
    ljb_str_puts(locs, tmp);
    ljb_str_puts(locs, "\n");
    ps->p += len;
  } else {
    return perr(ps, "unknown attribute");
  }
  return true;
}

static bool parse_node(parser *ps, ljg_graph *g, ljg_binding_vec *vals,
                       root_vec *roots, ljb_str *locs, i64_vec *loc_offsets) {
  int64_t idx;
  if (!expect(ps, "%") || !parse_int(ps, &idx)) return false;
  if (idx != g->n) return perr(ps, "nodes must be numbered 0, 1, 2, ... in order");
  ljg_gnode n = {0};
  n.param = -1;
  if (!expect(ps, "=") || !parse_type(ps, &n)) return false;
  char opname[32];
  if (!parse_word(ps, opname, sizeof opname)) return false;
  int op = ljg_op_by_name(opname);
  if (op < 0) return perr(ps, "unknown op");
  n.op = (uint16_t)op;
  int32_t in[256];
  if (!expect(ps, "(")) return false;
  if (!accept(ps, ")")) {
    do {
      int64_t k;
      if (n.nin == (int)LJ_COUNT_OF(in)) return perr(ps, "too many operands");
      if (!expect(ps, "%") || !parse_int(ps, &k)) return false;
      if (k < 0 || k >= idx) return perr(ps, "operand is not an earlier node");
      in[n.nin++] = (int32_t)k;
    } while (accept(ps, ","));
    if (!expect(ps, ")")) return false;
  }
  while (accept(ps, ","))
    if (!parse_attr(ps, &n, roots, (int)idx, locs, loc_offsets)) return false;
  bool is_param = op == LJG_OP_DATA || op == LJG_OP_SCALAR;
  if (is_param != (n.param >= 0)) return perr(ps, "param= goes with data and scalar only");
  if (is_param && n.param != g->nparams) return perr(ps, "parameters must be numbered in order");
  const ljg_opinfo *info = &ljg_ops[op];
  if (info->arity >= 0 ? n.nin != info->arity : n.nin < 1) return perr(ps, "wrong operand count");
  ljg_graph_add(g, &n, in);
  if (is_param) ljb_vec_push(vals, ((ljg_binding){NULL, n.attr.f, n.attr.a[1]}));
  return true;
}

bool ljg_graph_parse(const char *text, ljg_graph *g, ljg_binding **binds) {
  parser ps = {text, 1, false};
  ljg_graph_clear(g);
  ljg_binding_vec vals = {0};
  root_vec roots = {0};
  i64_vec loc_offsets = {0};
  ljb_str locs = {0};
  bool ok = false;
  /* Skip anything (comments, other text) before the first "IR {". */
  const char *start = strstr(text, "IR {");
  if (!start) {
    perr(&ps, "no 'IR {' found");
    goto done;
  }
  for (const char *q = text; q < start; q++) ps.line += *q == '\n';
  ps.p = start + 4;
  for (;;) {
    skip_spaces(&ps);
    if (*ps.p == '\n') {
      ps.p++;
      ps.line++;
      continue;
    }
    if (*ps.p == '}') break;
    if (*ps.p == 0) {
      perr(&ps, "missing '}'");
      goto done;
    }
    if (!parse_node(&ps, g, &vals, &roots, &locs, &loc_offsets)) goto done;
    skip_spaces(&ps);
    if (*ps.p != '\n' && *ps.p != 0) {
      perr(&ps, "unexpected text after the node");
      goto done;
    }
  }
  /* Roots by index: each index 0..nroots-1 exactly once, and at most one donor each. */
  int nroots = 0;
  for (int r = 0; r < roots.n; r++) nroots += !roots.a[r].donor;
  for (int r = 0; r < nroots; r++) ljg_graph_add_root(g, -1, -1);
  for (int r = 0; r < roots.n; r++) {
    const parsed_root *pr = &roots.a[r];
    int32_t *at = pr->donor ? &g->donors[pr->root] : &g->roots[pr->root];
    if (pr->donor && g->nodes[pr->node].op != LJG_OP_DATA) {
      perr(&ps, "DONOR goes with data only");
      goto done;
    }
    if (pr->root < 0 || pr->root >= nroots || *at >= 0) {
      perr(&ps, pr->donor ? "DONOR names a root that does not exist or has a donor already"
                          : "ROOT indices must be 0..n-1, each once");
      goto done;
    }
    *at = pr->donor ? g->nodes[pr->node].param : pr->node;
  }
  if (locs.n) {
    g->strings = ljb_str_take(&locs);
    for (int k = 0; k < loc_offsets.n; k += 2) {
      char *s = g->strings + loc_offsets.a[k];
      *strchr(s, '\n') = 0;
      g->nodes[loc_offsets.a[k + 1]].loc = s;
    }
  }
  if (!ljg_graph_verify(g)) goto done;
  ok = true;
  if (binds) {
    *binds = vals.a ? vals.a : ljb_xcalloc(1, sizeof **binds);
    vals.a = NULL;
  }
done:
  ljb_vec_free(&vals);
  ljb_vec_free(&roots);
  ljb_vec_free(&loc_offsets);
  free(locs.s);
  return ok;
}
