/* test_graph_text.c — the IR text format: print → parse → print is the identity, a parsed
 * graph compiles and runs to bit-identical values, malformed or inconsistent text is rejected
 * with the line, the dot printer covers every node, and graph hashes depend on structure
 * only (not on data or scalar values). The binary records of the persistent cache read back
 * to equal graphs and programs, and a record cut short anywhere is refused. */
#include "test_util.h"

#include "frontend/frontend.h"
#include "graph/graph.h"
#include "runtime/runtime.h"

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
  ck_assert_int_eq(ljr_run_graph(d, &g, binds.a, out, LJR_CAUSE_REPLAY), LJ_OK);
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

START_TEST(test_binary_round_trip) {
  lj_tensor *ts[8];
  int n = build(ts, 1.5);
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
  for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
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
      {"IR {\n  %0 = f32[2,3] data(), param=0\n  %1 = f32[2,1] argmax(%0), dims=(1), ROOT=0\n}\n",
       "argmax/argmin: one dim, i64 or i32 result"},
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
      {"IR {\n  %0 = f32[2] data(), param=1\n  %1 = f32[2] data(), param=0\n  %2 = f32[2] add(%0, %1), ROOT=0\n}\n",
       "parameters must be numbered in order"},
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
  tcase_add_test(tc, test_dot);
  tcase_add_test(tc, test_hash_is_structural);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
