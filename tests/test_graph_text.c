/* test_graph_text.c — the IR text format: print → parse → print is the identity, a parsed
 * graph compiles and runs to bit-identical values, malformed or inconsistent text is rejected
 * with the line, randomly edited graphs are refused or else compile and agree with the
 * interpreter, the dot printer covers every node, and graph hashes depend on structure
 * only (not on data or scalar values). The binary records of the persistent cache read back
 * to equal graphs and programs, and a record cut short anywhere is refused. */
#include "test_util.h"

#include "frontend/frontend.h"
#include "graph/graph.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A handful of pending tensors that use every kind of node. */
static int build(lj_tensor **ts, double scale) {
  lj_device *d = lj_default_device();
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(4, 6), TU_ANY, 1);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(6, 3), TU_ANY, 2);
  lj_tensor *i = tu_tensor(LJ_I32, LJ_SHAPE(4, 1), TU_NONZERO, 3);
  int n = 0;
  ts[n++] = lj_mul_scalar(lj_add(lj_matmul(x, w), lj_rand(d, LJ_F32, LJ_SHAPE(3))), scale);
  ts[n++] = lj_sum(lj_exp(lj_transpose(x, 0, 1)), 1, (const int[]){1}, true);
  ts[n++] = lj_cat(2, (lj_tensor *const[]){lj_slice(x, 1, 1, 6, 2), lj_cast(i, LJ_F32)}, 1);
  ts[n++] = lj_argmax(lj_reshape(x, LJ_SHAPE(2, 12)), -1, false);
  ts[n++] = lj_where(lj_gt_scalar(x, 0.25), x, lj_full(d, LJ_F32, LJ_SHAPE(1), -1));
  ts[n++] = lj_remainder_scalar(i, 3);
  ts[n++] = lj_reshape(x, LJ_SHAPE(24)); /* a view of a parameter: its buffer is the root's */
  ts[n++] = ts[0]; /* the same node twice among the roots */
  lj_tensor_retain(ts[0]);
  lj_tensor_release(x);
  lj_tensor_release(w);
  lj_tensor_release(i);
  return n;
}

START_TEST(test_round_trip) {
  lj_tensor *ts[8];
  int n = build(ts, 1.5);
  char *text = lj_tensors_text(n, ts);
  ck_assert(text);
  ljg_graph g;
  ljg_graph_init(&g);
  ljg_binding *vals = NULL;
  ck_assert_msg(ljg_graph_parse(text, &g, &vals), "%s\n%s", lj_last_error(), text);
  char *text2 = ljg_graph_text(&g, vals);
  ck_assert_str_eq(text, text2);
  ck_assert_int_eq(g.nroots, n);
  /* values: bind the parsed graph to the original buffers and run it */
  lj_device *d = lj_default_device();
  ljg_node *nodes[8];
  for (int i = 0; i < n; i++) nodes[i] = ljf_node(ts[i]);
  ljg_graph orig;
  ljg_graph_init(&orig);
  ljg_binding_vec binds = {0};
  ljg_collect(&d->trace, n, nodes, &orig, &binds);
  ck_assert(ljg_graph_equal(&orig, &g));
  ljr_buffer *out[8] = {0};
  ck_assert_int_eq(ljr_run_graph(d, &g, binds.a, false, out, LJR_CAUSE_REPLAY), LJ_OK);
  ck_assert_int_eq(lj_sync_tensors(n, ts), LJ_OK);
  for (int i = 0; i < n; i++) {
    size_t bytes = (size_t)lj_tensor_numel(ts[i]) * lj_dtype_size(lj_tensor_dtype(ts[i]));
    void *host = malloc(bytes + 1);
    ck_assert_int_eq(lj_tensor_to_host(ts[i], host, bytes), LJ_OK);
    ck_assert_msg(memcmp(host, out[i]->data, bytes) == 0, "root %d differs", i);
    free(host);
    ljr_buffer_release(out[i]);
  }
  free(text);
  free(text2);
  free(vals);
  free(binds.a);
  ljg_graph_free(&g);
  ljg_graph_free(&orig);
}
END_TEST

/* Writes the graph of ts and its fused program, reads them back: the same graph, the same
 * program text, and every cut of the record refused. */
static void binary_round_trip(int n, lj_tensor *const *ts) {
  ljg_node *nodes[8];
  for (int i = 0; i < n; i++) nodes[i] = ljf_node(ts[i]);
  ljg_graph g;
  ljg_graph_init(&g);
  ljg_collect(&lj_default_device()->trace, n, nodes, &g, NULL);
  ljg_graph *opt = ljg_graph_clone(&g);
  ljg_optimize(opt);
  ljg_program *p = ljg_fuse(opt, &(ljg_fuse_options){0});
  ljb_str rec = {0};
  ljg_graph_write(&rec, &g);
  size_t graph_end = rec.n;
  ljg_program_write(&rec, p);
  const unsigned char *bytes = (const unsigned char *)rec.s;
  ljb_reader r = {bytes, bytes + rec.n, false};
  ljg_graph back;
  ck_assert(ljg_graph_read(&r, &back));
  ck_assert(ljg_graph_equal(&back, &g));
  /* the program is read against the graph it computes, which keeps g's parameters */
  ljg_program *pback = ljg_program_read(&r, &back);
  ck_assert_ptr_nonnull(pback);
  ck_assert(r.p == r.end && !r.bad);
  char *want = ljg_program_text(p, opt), *got = ljg_program_text(pback, opt);
  ck_assert_str_eq(got, want);
  ck_assert_int_eq(pback->scratch_bytes, p->scratch_bytes);
  free(want);
  free(got);
  ljg_program_free(pback);
  for (size_t len = 0; len < rec.n; len++) {
    ljb_reader cut = {bytes, bytes + len, false};
    ljg_graph h;
    bool graph_ok = ljg_graph_read(&cut, &h);
    ck_assert_msg(graph_ok == (len >= graph_end), "graph record cut at %zu of %zu", len, graph_end);
    if (!graph_ok) continue;
    ljg_program *q = ljg_program_read(&cut, &h);
    ck_assert_msg(!q, "program record cut at %zu", len - graph_end);
    ljg_graph_free(&h);
  }
  ljg_graph_free(&back);
  free(ljb_str_take(&rec));
  ljg_program_free(p);
  ljg_graph_free(opt);
  free(opt);
  ljg_graph_free(&g);
}

START_TEST(test_binary_round_trip) {
  lj_tensor *ts[8];
  int n = build(ts, 1.5);
  binary_round_trip(n, ts);
  for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
  /* attention: a kernel with a trailing product (softmax(Q·Kᵀ)·V) */
  lj_tensor *q = tu_tensor(LJ_F32, LJ_SHAPE(3, 9, 20), TU_ANY, 7), *k = tu_tensor(LJ_F32, LJ_SHAPE(3, 11, 20), TU_ANY, 8);
  lj_tensor *v = tu_tensor(LJ_F32, LJ_SHAPE(3, 11, 5), TU_ANY, 9);
  lj_tensor *y = lj_matmul(lj_softmax(lj_matmul(q, lj_transpose(k, 1, 2)), 2), v);
  binary_round_trip(1, &y);
  lj_tensor_release(q), lj_tensor_release(k), lj_tensor_release(v), lj_tensor_release(y);
}
END_TEST

/* Donors (buffer donation) print on their parameter, parse back, are part of the graph key
 * and survive the binary records; the fused program writes the donated root in place. */
START_TEST(test_donors) {
  static const char text[] = "IR {\n"
                             "  %0 = f32[2,3] data(), param=0, DONOR=1\n"
                             "  %1 = f32[2,3] exp(%0), ROOT=0\n"
                             "  %2 = f32[2,3] neg(%0), ROOT=1\n"
                             "}\n";
  ljg_graph g, plain;
  ljg_graph_init(&g);
  ljg_graph_init(&plain);
  ck_assert_msg(ljg_graph_parse(text, &g, NULL), "%s", lj_last_error());
  ck_assert_int_eq(g.donors[0], -1);
  ck_assert_int_eq(g.donors[1], 0);
  char *back = ljg_graph_text(&g, NULL);
  ck_assert_str_eq(back, text);
  free(back);
  char *no_donor = strdup(text);
  memcpy(strstr(no_donor, ", DONOR=1"), "         ", 9);
  ck_assert(ljg_graph_parse(no_donor, &plain, NULL));
  ck_assert(!ljg_graph_equal(&g, &plain));
  ljb_hash a = ljg_graph_key(&g, (ljb_hash){0}), b = ljg_graph_key(&plain, (ljb_hash){0});
  ck_assert(a.lo != b.lo || a.hi != b.hi);
  ljb_str rec = {0};
  ljg_graph_write(&rec, &g);
  ljb_reader r = {(const unsigned char *)rec.s, (const unsigned char *)rec.s + rec.n, false};
  ljg_graph read;
  ck_assert(ljg_graph_read(&r, &read));
  ck_assert(ljg_graph_equal(&read, &g));
  /* exp reads the parameter before neg overwrites it in place */
  ljg_program *p = ljg_fuse(&g, &(ljg_fuse_options){0});
  char *kt = ljg_program_text(p, &g);
  ck_assert_msg(strstr(kt, "in place of parameter 0"), "%s", kt);
  ck_assert_int_eq(p->slots[p->root_slot[1]].param, 0);
  ck_assert_int_eq(p->slots[p->root_slot[0]].param, -1);
  free(kt);
  ljg_program_free(p);
  ljg_graph_free(&read);
  free(ljb_str_take(&rec));
  free(no_donor);
  ljg_graph_free(&g);
  ljg_graph_free(&plain);
}
END_TEST

/* An index check made for another op (a scatter-add written as a select) prints that op and
 * reads back the same. */
START_TEST(test_index_check_for) {
  static const char *text = "IR {\n  %0 = i64[2] data(), param=0\n"
                            "  %1 = i64[2] index_check(%0), bound=3, for=scatter_add, ROOT=0\n}\n";
  ljg_graph g;
  ljg_graph_init(&g);
  ljg_binding *vals = NULL;
  ck_assert_msg(ljg_graph_parse(text, &g, &vals), "%s", lj_last_error());
  ck_assert_int_eq(g.nodes[1].attr.a[1], LJG_OP_SCATTER_ADD);
  char *text2 = ljg_graph_text(&g, vals);
  ck_assert_str_eq(text, text2);
  free(text2);
  free(vals);
  ljg_graph_free(&g);
}
END_TEST

START_TEST(test_parse_errors) {
  static const struct {
    const char *text, *msg;
  } bad[] = {
      {"nothing here", "IR {"},
      {"IR {\n  %0 = f32[2] data(), param=0\n", "missing '}'"},
      {"IR {\n  %1 = f32[2] data(), param=0\n}\n", "numbered"},
      {"IR {\n  %0 = f99[2] data(), param=0\n}\n", "dtype"},
      {"IR {\n  %0 = f32[2] nosuchop(), param=0\n}\n", "unknown op"},
      {"IR {\n  %0 = f32[2] data(), param=0\n  %1 = f32[2] add(%0), ROOT=0\n}\n", "operand count"},
      {"IR {\n  %0 = f32[2] data(), param=0\n  %1 = f32[3] exp(%0), ROOT=0\n}\n", "shape"},
      {"IR {\n  %0 = f32[2] data(), param=0\n  %1 = f32[2] exp(%5), ROOT=0\n}\n", "earlier"},
      {"IR {\n  %0 = f32[2] data(), param=0\n  %1 = i32[2] exp(%0), ROOT=0\n}\n", "dtype"},
      {"IR {\n  %0 = f32[2] data(), param=0, ROOT=3\n}\n", "ROOT"},
      {"IR {\n  %0 = f32[2,3] data(), param=0\n  %1 = f32[2,2] permute(%0), perm=(0,0), ROOT=0\n}\n", "permutation"},
      {"IR {\n  %0 = f32[2] data(), param=0 junk\n}\n", "unexpected"},
      {"IR {\n  %0 = f32[2] data(), param=0\n  %1 = f32[2] exp(%0), ROOT=0, DONOR=0\n}\n", "DONOR goes with data"},
      {"IR {\n  %0 = f32[2] data(), param=0, DONOR=1\n  %1 = f32[2] exp(%0), ROOT=0\n}\n", "DONOR names a root"},
      {"IR {\n  %0 = f32[3] data(), param=0, DONOR=0\n  %1 = f32[2] data(), param=1\n  %2 = f32[2] exp(%1), ROOT=0\n}\n",
       "donor of root 0"},
      {"IR {\n  %0 = f32[2] data(), param=0\n  %1 = f32[2] where(%0, %0, %0), ROOT=0\n}\n", "condition is not bool"},
      {"IR {\n  %0 = f32[2] data(), param=0\n  %1 = f32[2] index_check(%0), bound=3, ROOT=0\n}\n",
       "index_check needs i64"},
      {"IR {\n  %0 = i64[2] data(), param=0\n  %1 = i64[2] index_check(%0), bound=3, for=nosuchop, ROOT=0\n}\n",
       "unknown op after for="},
      {"IR {\n  %0 = f32[2,3] data(), param=0\n  %1 = f32[2,1] argmax(%0), dims=(1), ROOT=0\n}\n",
       "argmax/argmin: one dim, i64, i32 or i8 result"},
      {"IR {\n  %0 = f32[1,1,4,4] data(), param=0\n"
       "  %1 = f32[1,9,5] im2col(%0), window=(3,3,1,1,0,0,1,1), fill=0, ROOT=0\n}\n",
       "window shapes do not match"},
      {"IR {\n  %0 = f32[2,3] data(), param=0\n  %1 = i64[2,2] data(), param=1\n"
       "  %2 = f32[2,2] gather(%0, %1), dim=2, ROOT=0\n}\n",
       "bad dim or index"},
      {"IR {\n  %0 = f32[2,3] data(), param=0\n  %1 = i64[2,2] data(), param=1\n"
       "  %2 = f32[2,3] gather(%0, %1), dim=1, ROOT=0\n}\n",
       "result shape is not the index shape"},
      {"IR {\n  %0 = i32[] scalar(), param=0, value=1\n  %1 = i64[] scalar(), param=1, value=0\n"
       "  %2 = f32[2] rand(%0, %1), ROOT=0\n}\n",
       "seed and offset must be 0-d i64"},
      {"IR {\n  %0 = f32[1,2,3] data(), param=0\n  %1 = f32[1,4,5] data(), param=1\n"
       "  %2 = f32[1,2,5] matmul(%0, %1), ROOT=0\n}\n",
       "shapes do not chain"},
      {"IR {\n  %0 = f32[6,2,3] data(), param=0\n  %1 = f32[6,3,5] data(), param=1\n"
       "  %2 = f32[4,2,5] matmul_sum(%0, %1), ROOT=0\n}\n",
       "a batch sum's matrices must divide the batch"},
      {"IR {\n  %0 = f32[2] data(), param=1\n  %1 = f32[2] data(), param=0\n  %2 = f32[2] add(%0, %1), ROOT=0\n}\n",
       "parameters must be numbered in order"},
      /* what the compiler does not take (the frontend casts or rejects before recording) */
      {"IR {\n  %0 = i32[2] data(), param=0\n  %1 = i32[2] exp(%0), ROOT=0\n}\n",
       "node %1 (exp): operands of dtype i32 (it takes floats only)"},
      {"IR {\n  %0 = u8[2] data(), param=0\n  %1 = u8[2] div(%0, %0), ROOT=0\n}\n",
       "node %1 (div): operands of dtype u8 (it takes floats only)"},
      {"IR {\n  %0 = bool[2] data(), param=0\n  %1 = bool[2] sub(%0, %0), ROOT=0\n}\n",
       "node %1 (sub): operands of dtype bool (it takes numbers only)"},
      {"IR {\n  %0 = bool[2] data(), param=0\n  %1 = bool[2] neg(%0), ROOT=0\n}\n",
       "node %1 (neg): operands of dtype bool (it takes numbers only)"},
      {"IR {\n  %0 = i64[2] data(), param=0\n  %1 = bool[2] lt(%0, %0)\n  %2 = bool[2] sqrt(%1), ROOT=0\n}\n",
       "node %2 (sqrt): operands of dtype bool (it takes floats only)"},
      {"IR {\n  %0 = bool[1,2,2] data(), param=0\n  %1 = bool[1,2,2] matmul(%0, %0), ROOT=0\n}\n",
       "node %1 (matmul): operands of dtype bool (it takes numbers only)"},
      {"IR {\n  %0 = bool[2,3] data(), param=0\n  %1 = i64[2,3] data(), param=1\n"
       "  %2 = bool[2,3] scatter_add(%0, %1, %0), dim=1, ROOT=0\n}\n",
       "node %2 (scatter_add): operands of dtype bool (it takes numbers only)"},
      {"IR {\n  %0 = f32[3,0] data(), param=0\n  %1 = f32[3,1] amax(%0), dims=(1), ROOT=0\n}\n",
       "node %1 (amax): reduces a dim of size 0"},
      {"IR {\n  %0 = i32[0,2] data(), param=0\n  %1 = i64[1,2] argmin(%0), dims=(0), ROOT=0\n}\n",
       "node %1 (argmin): reduces a dim of size 0"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ljg_graph g;
    ljg_graph_init(&g);
    ck_assert_msg(!ljg_graph_parse(bad[i].text, &g, NULL), "accepted case %zu", i);
    tu_expect_error(LJ_ERR_ARG, "graph", bad[i].msg, NULL);
    ljg_graph_free(&g);
  }
}
END_TEST

/* ---- hand-edited graphs ------------------------------------------------------------------- */

static uint64_t edit_state = 0x2545f4914f6cdd1dULL;

static int64_t pick(int64_t lo, int64_t hi) { return tu_pick(&edit_state, lo, hi); }

/* text with its len bytes at `at` replaced by `with` (malloc'd). */
static char *splice(const char *text, size_t at, size_t len, const char *with) {
  size_t n = strlen(text), w = strlen(with);
  char *r = malloc(n - len + w + 1);
  memcpy(r, text, at);
  memcpy(r + at, with, w);
  memcpy(r + at + w, text + at + len, n - at - len + 1);
  return r;
}

/* One random edit of a graph's text: a digit (a size, an operand, an attribute), an op's
 * name or a node's dtype replaced (the text is freed). */
static char *edit_graph(char *text) {
  size_t n = strlen(text);
  for (;;) {
    size_t i = (size_t)pick(6, (int64_t)n - 1);
    int kind = (int)pick(0, 2);
    if (kind == 0 && text[i] >= '0' && text[i] <= '9') {
      char d[2] = {(char)('0' + pick(0, 9)), 0};
      char *r = splice(text, i, 1, d);
      free(text);
      return r;
    }
    /* "] name(" is an op, "= name[" a dtype */
    const char *start = kind == 1 ? "] " : "= ";
    if (kind == 0 || strncmp(text + i, start, 2) != 0) continue;
    size_t a = i + 2, b = a;
    while (b < n && ((text[b] >= 'a' && text[b] <= 'z') || (text[b] >= '0' && text[b] <= '9') || text[b] == '_')) b++;
    if (b == a || b >= n || text[b] != (kind == 1 ? '(' : '[')) continue;
    const char *with = kind == 1 ? ljg_ops[pick(0, LJG_NUM_OPS - 1)].name : lj_dtype_name((lj_dtype)pick(0, LJ_NUM_DTYPES - 1));
    char *r = splice(text, a, b - a, with);
    free(text);
    return r;
  }
}

static bool agree(lj_dtype dt, double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (a == b || !ljg_dtype_is_float(dt)) return a == b;
  return fabs(a - b) <= 10 * tu_rtol(dt) * fmax(fabs(a), fabs(b)) + 1e-5;
}

/* Runs a parsed graph compiled and interpreted on the same inputs and compares the roots;
 * false if it is too big to bother. */
static bool run_both(ljg_graph *g, ljg_binding *vals, const char *text) {
  int64_t total = 0;
  for (int i = 0; i < g->n; i++) total += ljg_gnumel(&g->nodes[i]);
  if (total > 200000) return false;
  lj_device *d = lj_default_device();
  const void *inputs[64] = {0};
  ck_assert_int_le(g->nparams, 64);
  for (int k = 0; k < g->nparams; k++) {
    const ljg_gnode *p = &g->nodes[g->params[k]];
    if (p->op != LJG_OP_DATA) continue;
    ljr_buffer *b = ljr_buffer_new(d, (size_t)ljg_gnumel(p) * lj_dtype_size(p->dtype) + 1);
    for (int64_t e = 0; e < ljg_gnumel(p); e++) ljg_store_f64(p->dtype, b->data, e, (double)((e * 7 + k) % 11) / 4 - 1);
    vals[k].buf = b;
    inputs[k] = b->data;
  }
  ljr_buffer *out[64] = {0};
  void *want[64] = {0};
  ck_assert_int_le(g->nroots, 64);
  for (int r = 0; r < g->nroots; r++) {
    const ljg_gnode *root = &g->nodes[g->roots[r]];
    want[r] = calloc((size_t)ljg_gnumel(root) + 1, lj_dtype_size(root->dtype));
  }
  lj_status ist = ljg_interpret(g, inputs, vals, want);
  lj_status st = ljr_run_graph(d, g, vals, false, out, LJR_CAUSE_REPLAY);
  if (st == LJ_OK) st = lj_wait(d);
  ck_assert_msg(st == ist, "compiled: %s (%s), interpreter: %s, for\n%s", lj_status_str(st), lj_last_error(),
                lj_status_str(ist), text);
  lj_clear_error();
  for (int r = 0; r < g->nroots && st == LJ_OK; r++) {
    const ljg_gnode *root = &g->nodes[g->roots[r]];
    for (int64_t e = 0; e < ljg_gnumel(root); e++) {
      double a = ljg_load_f64(root->dtype, out[r]->data, e), b = ljg_load_f64(root->dtype, want[r], e);
      ck_assert_msg(agree(root->dtype, a, b), "root %d element %lld: compiled %.17g, interpreter %.17g, for\n%s", r,
                    (long long)e, a, b, text);
    }
  }
  for (int r = 0; r < g->nroots; r++) {
    free(want[r]);
    if (out[r]) ljr_buffer_release(out[r]);
  }
  for (int k = 0; k < g->nparams; k++)
    if (vals[k].buf) ljr_buffer_release(vals[k].buf);
  return true;
}

/* Hand-edited graphs (random edits of a graph that uses every kind of node): what the parser
 * accepts compiles, runs and agrees with the interpreter (or both report the same runtime
 * error); what it refuses, it refuses with a message. */
/* Pending tensors of the nn ops: windows, row reductions, indexing, a weight gradient. */
static int build_nn(lj_tensor **ts) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 3, 6, 6), TU_ANY, 4);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(4, 3, 3, 3), TU_ANY, 5);
  lj_tensor *m = tu_tensor(LJ_F32, LJ_SHAPE(5, 7), TU_ANY, 6);
  lj_tensor *idx = lj_tensor_from_host(lj_default_device(), LJ_I64, LJ_SHAPE(5, 2), (int64_t[]){0, 6, 1, 5, 2, 4, 3, 3, 4, 2});
  lj_tensor_set_requires_grad(w, true);
  int n = 0;
  lj_tensor *y = lj_max_pool2d(lj_relu(lj_conv2d(x, w, NULL, NULL, (const int[]){1, 1}, NULL, 1)), (const int[]){2, 2},
                               NULL, NULL);
  ck_assert_int_eq(lj_backward(lj_sum(y, 0, NULL, false)), LJ_OK);
  ts[n++] = y;
  ts[n++] = lj_tensor_retain(lj_tensor_grad(w)); /* w is released below, its gradient kept */
  ts[n++] = lj_log_softmax(m, 1);
  ts[n++] = lj_gather(m, 1, idx);
  ts[n++] = lj_scatter_add(m, 1, idx, lj_gather(m, 1, idx));
  ts[n++] = lj_avg_pool2d(x, (const int[]){3, 3}, (const int[]){2, 2}, (const int[]){1, 1});
  lj_tensor_release(x);
  lj_tensor_release(w);
  lj_tensor_release(m);
  lj_tensor_release(idx);
  return n;
}

START_TEST(test_edited_graphs) {
  lj_tensor *ts[16];
  int n1 = build(ts, 1.5), n2 = build_nn(ts + n1), n = n1 + n2;
  char *bases[2] = {lj_tensors_text(n1, ts), lj_tensors_text(n2, ts + n1)};
  int accepted = 0, ran = 0;
  /* found by the edits: a random op whose offset is 0-d data, read at every point */
  ljg_graph g0;
  ljg_graph_init(&g0);
  ljg_binding *vals0 = NULL;
  static const char offset_data[] = "IR {\n  %0 = i64[] scalar(), param=0, value=5\n  %1 = i64[] data(), param=1\n"
                                    "  %2 = f32[37] rand(%0, %1), ROOT=0\n}\n";
  ck_assert_msg(ljg_graph_parse(offset_data, &g0, &vals0), "%s", lj_last_error());
  ck_assert(run_both(&g0, vals0, offset_data));
  free(vals0);
  ljg_graph_free(&g0);
  for (int it = 0; it < 3000; it++) {
    char *text = edit_graph(strdup(bases[it & 1]));
    for (int e = (int)pick(0, 2); e > 0; e--) text = edit_graph(text);
    ljg_graph g;
    ljg_graph_init(&g);
    ljg_binding *vals = NULL;
    if (ljg_graph_parse(text, &g, &vals)) {
      accepted++;
      ran += run_both(&g, vals, text);
    } else {
      tu_expect_error(LJ_ERR_ARG, "graph", NULL);
    }
    free(vals);
    ljg_graph_free(&g);
    free(text);
  }
  ck_assert_int_ge(ran, 100);
  ck_assert_int_ge(3000 - accepted, 1000);
  free(bases[0]);
  free(bases[1]);
  for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
}
END_TEST

/* Every elementwise op, product and reduction over every dtype, as a graph read from text:
 * the verifier refuses what the lowering does not take (integers and bool in the float
 * functions, bool in negation and products, a max over an empty dim, ...) with a message
 * naming the node, and what it accepts agrees with the interpreter (once, such graphs broke
 * assertions in the lowering, a bf16 product corrupted the heap). */
START_TEST(test_ops_by_dtype) {
  int accepted = 0, refused = 0;
  for (int op = 0; op < LJG_NUM_OPS; op++) {
    ljg_kind kind = ljg_ops[op].kind;
    if ((kind != LJG_ELEMWISE && kind != LJG_MATMUL && kind != LJG_REDUCE) || op == LJG_OP_INDEX_CHECK ||
        op == LJG_OP_WHERE)
      continue;
    for (int dt = 0; dt < LJ_NUM_DTYPES; dt++)
      for (int empty = 0; empty < 2; empty++) {
        const char *name = ljg_ops[op].name, *dn = lj_dtype_name((lj_dtype)dt);
        const char *out = op == LJG_OP_CAST ? (dt == LJ_F32 ? "i32" : "f32") : ljg_op_gives_bool(op) ? "bool" : dn;
        char text[512];
        int cols = empty ? 0 : 5;
        if (kind == LJG_MATMUL)
          snprintf(text, sizeof text,
                   "IR {\n  %%0 = %s[2,3,%d] data(), param=0\n  %%1 = %s[2,%d,4] data(), param=1\n"
                   "  %%2 = %s[%d,3,4] %s(%%0, %%1), ROOT=0\n}\n",
                   dn, cols, dn, cols, dn, op == LJG_OP_MATMUL_SUM ? 1 : 2, name);
        else if (kind == LJG_REDUCE) {
          bool arg = op == LJG_OP_ARGMAX || op == LJG_OP_ARGMIN;
          bool widen = (op == LJG_OP_SUM || op == LJG_OP_PROD) && !ljg_dtype_is_float((lj_dtype)dt);
          snprintf(text, sizeof text, "IR {\n  %%0 = %s[3,%d] data(), param=0\n  %%1 = %s[3,1] %s(%%0), dims=(1), ROOT=0\n}\n",
                   dn, cols, arg || widen ? "i64" : dn, name);
        } else if (ljg_ops[op].arity == 1)
          snprintf(text, sizeof text, "IR {\n  %%0 = %s[3,%d] data(), param=0\n  %%1 = %s[3,%d] %s(%%0), ROOT=0\n}\n", dn,
                   cols, out, cols, name);
        else
          snprintf(text, sizeof text,
                   "IR {\n  %%0 = %s[3,%d] data(), param=0\n  %%1 = %s[3,%d] data(), param=1\n"
                   "  %%2 = %s[3,%d] %s(%%0, %%1), ROOT=0\n}\n",
                   dn, cols, dn, cols, out, cols, name);
        ljg_graph g;
        ljg_graph_init(&g);
        ljg_binding *vals = NULL;
        if (ljg_graph_parse(text, &g, &vals)) {
          accepted++;
          ck_assert(run_both(&g, vals, text));
        } else {
          refused++;
          char node[64];
          snprintf(node, sizeof node, "(%s)", name);
          tu_expect_error(LJ_ERR_ARG, "graph: node", node, NULL);
        }
        free(vals);
        ljg_graph_free(&g);
      }
  }
  ck_assert_int_ge(accepted, 400);
  ck_assert_int_ge(refused, 150);
}
END_TEST

START_TEST(test_dot) {
  lj_tensor *ts[8];
  int n = build(ts, 2.0);
  char *dot = lj_tensors_dot(n, ts);
  ck_assert(dot && strstr(dot, "digraph G {") && strstr(dot, "matmul") && strstr(dot, "peripheries=2"));
  free(dot);
}
END_TEST

START_TEST(test_hash_is_structural) {
  char h1[33], h2[33], h3[33], h4[33];
  lj_tensor *ts[8];
  int n = build(ts, 1.5);
  ck_assert_int_eq(lj_graph_hash(n, ts, h1), LJ_OK);
  lj_tensor *us[8];
  build(us, 2.5); /* new data, new scalar value: same structure */
  ck_assert_int_eq(lj_graph_hash(n, us, h2), LJ_OK);
  ck_assert_str_eq(h1, h2);
  ck_assert_int_eq(lj_graph_hash(n - 1, ts, h3), LJ_OK);
  ck_assert_str_ne(h1, h3);
  lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(3), TU_ANY, 1), *b = tu_tensor(LJ_F32, LJ_SHAPE(3), TU_ANY, 2);
  lj_tensor *ab[2] = {lj_mul(a, b), lj_mul(b, a)}, *aa[2] = {lj_mul(a, a), lj_mul(b, b)};
  ck_assert_int_eq(lj_graph_hash(2, ab, h3), LJ_OK);
  ck_assert_int_eq(lj_graph_hash(2, aa, h4), LJ_OK);
  ck_assert_str_ne(h3, h4); /* same shapes of nodes, different wiring */
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("graph_text");
  TCase *tc = tu_tcase("text");
  tcase_add_test(tc, test_round_trip);
  tcase_add_test(tc, test_binary_round_trip);
  tcase_add_test(tc, test_donors);
  tcase_add_test(tc, test_parse_errors);
  tcase_add_test(tc, test_index_check_for);
  tcase_add_test(tc, test_edited_graphs);
  tcase_add_test(tc, test_ops_by_dtype);
  tcase_add_test(tc, test_dot);
  tcase_add_test(tc, test_hash_is_structural);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
