/* test_runtime_fusion.c — how many kernels fusion makes, asserted through the inspection
 * call and the CompiledKernels / ExecutedKernels counters: a 10-op elementwise chain with a
 * broadcast and a transpose is one kernel; a reduction fuses its producers; values used twice
 * are computed once; LJ_DISABLE_FUSION gives one kernel per op; results agree either way, and
 * at every LLVM opt level, and for random programs (also loaded back from the persistent
 * cache, and over several syncs with donation), training steps and nn op chains;
 * a row-fused kernel keeps its own intermediates on the stack a block of rows at a time (softmax,
 * a matmul's epilogue, pooling's windows). */
#include "test_util.h"

#include "codegen_llvm/codegen.h"
#include "frontend/frontend.h"
#include "graph/graph.h"
#include "runtime/runtime.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static lj_tensor *chain10(lj_tensor *x, lj_tensor *bias, lj_tensor *y) {
  lj_tensor *t = lj_add(x, bias);                 /* broadcast */
  t = lj_mul(t, lj_transpose(y, 0, 1));           /* transpose */
  t = lj_tanh(t);
  t = lj_mul_scalar(t, 1.5);
  t = lj_add_scalar(t, 0.25);
  t = lj_relu(t);
  t = lj_exp(t);
  t = lj_sub(t, x);
  t = lj_sqrt(lj_abs(t));
  return lj_neg(t);
}

START_TEST(test_chain_is_one_kernel) {
  lj_device *d = lj_default_device();
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(64, 48), TU_ANY, 1);
  lj_tensor *bias = tu_tensor(LJ_F32, LJ_SHAPE(48), TU_ANY, 2);
  lj_tensor *y = tu_tensor(LJ_F32, LJ_SHAPE(48, 64), TU_ANY, 3);
  lj_scope_begin();
  lj_tensor *r = lj_keep(chain10(x, bias, y));
  lj_scope_end();
  ck_assert_int_eq(lj_graph_kernel_count(1, &r), 1);
  int64_t k0 = lj_counter_value("CompiledKernels"), e0 = lj_counter_value("ExecutedKernels");
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  ck_assert_int_eq(lj_counter_value("CompiledKernels") - k0, 1);
  ck_assert_int_eq(lj_wait(d), LJ_OK); /* the run is queued */
  ck_assert_int_eq(lj_counter_value("ExecutedKernels") - e0, 1);
  lj_tensor_release(r);
}
END_TEST

/* The fused program of an elementwise op over contiguous 4-D tensors is one kernel whose
 * loops collapsed into one; a row reduction keeps [rows, cols] with the reduced dim last; an
 * elementwise op of a broadcast flattened ([6, 1, 20] expanded to [6, 4, 20], read as [24,
 * 20]: a view of two levels) and a contiguous [24, 20] runs over [6, 4, 20], every access
 * one level of strides (fuse.c's drop_reshape_level); and a group norm's per-channel
 * weight, [2, 6, 5] read as [2, 2, 15] (two groups of 3 channels), beside a per-group value
 * broadcast along the group, added and summed over each group: over [2, 2, 3, 5] (the
 * group's channels and positions reduced), every access one level. With the interpreter's
 * values. */
START_TEST(test_loop_normalization) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 3, 4, 5), TU_ANY, 1);
  lj_tensor *b = lj_expand(tu_tensor(LJ_F32, LJ_SHAPE(6, 1, 20), TU_ANY, 2), LJ_SHAPE(6, 4, 20));
  lj_tensor *w = lj_reshape(lj_expand(tu_tensor(LJ_F32, LJ_SHAPE(1, 6, 1), TU_ANY, 4), LJ_SHAPE(2, 6, 5)), LJ_SHAPE(2, 2, 15));
  lj_tensor *per_group = lj_add(w, lj_expand(tu_tensor(LJ_F32, LJ_SHAPE(2, 2, 1), TU_ANY, 5), LJ_SHAPE(2, 2, 15)));
  lj_tensor *r[5] = {lj_exp(lj_mul(x, x)), lj_sum(lj_transpose(x, 0, 3), 2, (const int[]){0, 2}, false),
                     lj_add(lj_reshape(b, LJ_SHAPE(24, 20)), tu_tensor(LJ_F32, LJ_SHAPE(24, 20), TU_ANY, 3)),
                     per_group, lj_sum(lj_mul(per_group, tu_tensor(LJ_F32, LJ_SHAPE(2, 2, 15), TU_ANY, 6)), 1, (const int[]){2}, true)};
  for (int k = 0; k < 5; k++) {
    ljg_node *n = ljf_node(r[k]);
    ljg_graph g;
    ljg_graph_init(&g);
    ljg_collect(&r[k]->dev->trace, 1, &n, &g, NULL);
    ljg_optimize(&g);
    ljg_program *p = ljg_fuse(&g, NULL);
    char *text = ljg_program_text(p, &g);
    ck_assert_int_eq(p->nkernels, 1);
    const ljg_nest *nest = &p->kernels[0].nests[0];
    if (k == 0) {
      ck_assert_msg(nest->ndim == 1 && nest->shape[0] == 120, "%s", text);
    } else if (k >= 2) {
      static const int64_t shapes[3][4] = {{6, 4, 20}, {2, 2, 3, 5}, {2, 2, 3, 5}};
      int nd = k == 2 ? 3 : 4;
      ck_assert_msg(nest->ndim == nd && !memcmp(nest->shape, shapes[k - 2], (size_t)nd * sizeof *nest->shape), "%s", text);
      ck_assert_msg(nest->rmask == (k == 4 ? 0xcu : 0), "%s", text);
      for (int v = 0; v < p->kernels[0].nviews; v++) ck_assert_msg(p->kernels[0].views[v].n == 1, "%s", text);
    } else {
      /* transposed [5,4,3,2] summed over dims 0 and 2: kept (4, 2) first, reduced (5, 3) last */
      ck_assert_msg(nest->rop == LJG_OP_SUM && nest->ndim >= 2 && (nest->rmask >> (nest->ndim - 1) & 1) &&
                        !(nest->rmask & 1),
                    "%s", text);
    }
    free(text);
    ljg_program_free(p);
    ljg_graph_free(&g);
  }
  tu_check_interp(3, &r[2], 1e-6);
}
END_TEST

/* Kernels that differ only in their buffers (two layers alike: relu(x·W + b) on other
 * tensors of the same shapes) are twins: the second calls the first's body (twins.c),
 * counted by TwinKernels; a third of another shape is compiled whole. Values against the
 * interpreter. */
START_TEST(test_twin_kernels) {
  lj_scope_begin();
  lj_tensor *out[3];
  for (int i = 0; i < 3; i++) {
    int64_t n = i < 2 ? 24 : 20;
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(30, 40), TU_ANY, 150 + 3 * i);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(40, n), TU_ANY, 151 + 3 * i);
    lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(n), TU_ANY, 152 + 3 * i);
    out[i] = lj_relu(lj_add(lj_matmul(x, w), b));
  }
  ck_assert_int_eq(lj_graph_kernel_count(3, out), 3);
  int64_t twins = lj_counter_value("TwinKernels"), kernels = lj_counter_value("CompiledKernels");
  tu_check_interp_tol(3, out, 1e-5, 1e-5); /* compiles and runs them, then the interpreter */
  ck_assert_int_eq(lj_counter_value("CompiledKernels") - kernels, 3);
  ck_assert_int_eq(lj_counter_value("TwinKernels") - twins, 1);
  lj_scope_end();
}
END_TEST

START_TEST(test_kernel_counts) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(32, 40), TU_ANY, 1);
  lj_tensor *v = tu_tensor(LJ_F32, LJ_SHAPE(40), TU_ANY, 2);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(40, 16), TU_ANY, 3);
  /* a reduction with its producers */
  lj_tensor *s = lj_sum(lj_exp(lj_mul_scalar(x, 2)), 1, (const int[]){1}, false);
  ck_assert_int_eq(lj_graph_kernel_count(1, &s), 1);
  /* softmax: max, exp (used twice), sum, divide: four nests over the same rows, row-fused
   * into one kernel */
  lj_tensor *m = lj_amax(x, 1, (const int[]){1}, true);
  lj_tensor *e = lj_exp(lj_sub(x, m));
  lj_tensor *sm = lj_div(e, lj_sum(e, 1, (const int[]){1}, true));
  ck_assert_int_eq(lj_graph_kernel_count(1, &sm), 1);
  /* a value two roots use is computed once, into a buffer the other two nests read at the
   * same rows: one row-fused kernel */
  lj_tensor *y = lj_exp(x);
  lj_tensor *two[2] = {lj_add_scalar(y, 1), lj_mul_scalar(y, 2)};
  ck_assert_int_eq(lj_graph_kernel_count(2, two), 1);
  /* a consumer that reads other rows' maxima (x[i][j] - max of row j) cannot join: its
   * rows would read maxima not computed yet */
  lj_tensor *sq = tu_tensor(LJ_F32, LJ_SHAPE(33, 33), TU_ANY, 4);
  lj_tensor *across = lj_sub(sq, lj_amax(sq, 1, (const int[]){1}, false));
  ck_assert_int_eq(lj_graph_kernel_count(1, &across), 2);
  tu_check_interp(1, &across, 0);
  /* linear layer: the matmul with bias + relu as its epilogue, one kernel */
  lj_tensor *lin = lj_relu(lj_add(lj_matmul(x, w), lj_slice(v, 0, 0, 16, 1)));
  ck_assert_int_eq(lj_graph_kernel_count(1, &lin), 1);
  /* an expensive value broadcast to a bigger shape is computed once, then read */
  lj_tensor *bc = lj_add(x, lj_exp(v));
  ck_assert_int_eq(lj_graph_kernel_count(1, &bc), 2);
  /* a cheap broadcast leaf stays fused */
  lj_tensor *cheap = lj_add(x, v);
  ck_assert_int_eq(lj_graph_kernel_count(1, &cheap), 1);
}
END_TEST

START_TEST(test_disable_fusion) {
  double *vals[2];
  int64_t n;
  for (int off = 0; off < 2; off++) {
    lj_config cfg = lj_config_default();
    cfg.disable_fusion = off;
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(16, 12), TU_ANY, 1);
    lj_tensor *bias = tu_tensor(LJ_F32, LJ_SHAPE(12), TU_ANY, 2);
    lj_tensor *y = tu_tensor(LJ_F32, LJ_SHAPE(12, 16), TU_ANY, 3);
    lj_tensor *r = chain10(x, bias, y);
    int k = lj_graph_kernel_count(1, &r);
    if (off)
      ck_assert_int_ge(k, 12);
    else
      ck_assert_int_eq(k, 1);
    vals[off] = tu_read(r, &n);
    lj_shutdown();
  }
  for (int64_t i = 0; i < n; i++) ck_assert_double_eq_tol(vals[0][i], vals[1][i], 1e-6);
  free(vals[0]);
  free(vals[1]);
}
END_TEST

/* Every LLVM opt level (LJ_OPT_LEVEL 0-3: no vectorizer at 0 and 1) computes the
 * interpreter's values for an elementwise chain, a row-fused softmax, a matmul with its
 * epilogue and a pooled convolution. */
START_TEST(test_opt_levels) {
  for (int level = 0; level <= 3; level++) {
    lj_config cfg = lj_config_default();
    cfg.opt_level = level;
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(16, 12), TU_ANY, 1);
    lj_tensor *bias = tu_tensor(LJ_F32, LJ_SHAPE(12), TU_ANY, 2);
    lj_tensor *y = tu_tensor(LJ_F32, LJ_SHAPE(12, 16), TU_ANY, 3);
    lj_tensor *img = tu_tensor(LJ_F32, LJ_SHAPE(2, 3, 9, 9), TU_ANY, 4);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(5, 3, 3, 3), TU_ANY, 5);
    lj_tensor *r[4] = {chain10(x, bias, y), lj_softmax(lj_matmul(x, y), 1),
                       lj_relu(lj_add(lj_matmul(y, x), lj_expand(bias, LJ_SHAPE(12, 12)))),
                       lj_max_pool2d(lj_conv2d(img, w, NULL, NULL, (const int[]){1, 1}, NULL, 1), (const int[]){2, 2},
                                     NULL, NULL)};
    tu_check_interp_tol(4, r, 1e-5, 1e-4); /* f32 sums of 12-27 products up to ~16 */
    lj_shutdown();
  }
}
END_TEST

/* Row-fused kernels against the interpreter: softmax, log_softmax, layer_norm and a value
 * with two users, over row counts that are and are not multiples of the row block, rows of 1
 * to 1000 elements, 3-D tensors, and sizes that split across threads. */
START_TEST(test_row_fusion_values) {
  static const int64_t shapes[][3] = {{2, 1, 1}, {2, 7, 13}, {2, 33, 1000}, {2, 130, 17}, {3, 4, 3}, {2, 300, 257}};
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    int nd = (int)shapes[i][0];
    int64_t shape[3] = {shapes[i][1], shapes[i][2], 5};
    lj_tensor *x = tu_tensor(LJ_F32, nd, shape, TU_ANY, 10 + i);
    lj_scope_begin();
    lj_tensor *y = lj_exp(lj_mul_scalar(x, 0.5));
    lj_tensor *r[5] = {lj_softmax(x, -1), lj_log_softmax(x, -1),
                       lj_layer_norm(x, 1, NULL, NULL, 1e-5), lj_add_scalar(y, 1),
                       lj_mul(y, x)};
    for (int k = 0; k < 5; k++) lj_keep(r[k]);
    lj_scope_end();
    if (shape[0] > 1) ck_assert_int_eq(lj_graph_kernel_count(5, r), 1); /* all five row-fused */
    tu_check_interp(5, r, 1e-5);
    for (int k = 0; k < 5; k++) lj_tensor_release(r[k]);
    lj_tensor_release(x);
  }
}
END_TEST

/* The fused program of t's pending graph (the caller frees it and *opt). */
/* The program of n tensors' graph together (their roots in order). */
/* The program of tensors t fused with options o. */
static ljg_program *program_with(int n, lj_tensor *const *t, const ljg_fuse_options *o, ljg_graph **opt) {
  ljg_node *nodes[8];
  for (int i = 0; i < n; i++) nodes[i] = ljf_node(t[i]);
  ljg_graph g;
  ljg_graph_init(&g);
  ljg_collect(&lj_default_device()->trace, n, nodes, &g, NULL);
  *opt = ljg_graph_clone(&g);
  ljg_graph_free(&g);
  ljg_optimize(*opt);
  return ljg_fuse(*opt, o);
}

static ljg_program *program_of_n(int n, lj_tensor *const *t, ljg_graph **opt) {
  return program_with(n, t, &(ljg_fuse_options){0}, opt);
}

static ljg_program *program_of(lj_tensor *t, ljg_graph **opt) { return program_of_n(1, &t, opt); }

static void free_program(ljg_program *p, ljg_graph *opt) {
  ljg_program_free(p);
  ljg_graph_free(opt);
  free(opt);
}

/* The lowering's text of the program of outs (the caller frees it). */
static char *lowering_of(int n, lj_tensor *const *outs) {
  ljg_graph *opt;
  ljg_program *p = program_of_n(n, outs, &opt);
  char *text = ljc_lowering_text(p, NULL);
  free_program(p, opt);
  return text;
}

/* How many times `what` occurs in text. */
static int occurrences(const char *text, const char *what) {
  int n = 0;
  for (const char *at = text; (at = strstr(at, what)) != NULL; at++) n++;
  return n;
}

/* An unrolled recurrence, h = tanh(h·W + xp[t]) over 4 steps, each step's input a part of
 * one tensor computed for all of them (an RNN's inputs times its input weights): each kernel
 * that adds a step's part reads xp from the line the part starts in (lower.c's slot_shifts),
 * "its code reads slot2 from element 256 on". Where the parts start on lines (8 × 32 floats),
 * those kernels are twins, as the steps' products are (4 twins); parts of 6 × 5 floats start
 * mid-line, their reads move by the whole lines before them, and only the products are twins
 * (2). Values against the interpreter. */
START_TEST(test_twin_kernels_steps) {
  static const struct {
    int64_t b, h;
    int twins;
  } cases[] = {{8, 32, 4}, {6, 5, 2}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    lj_scope_begin();
    int64_t B = cases[i].b, H = cases[i].h, T = 4;
    lj_tensor *xp = tu_tensor(LJ_F32, LJ_SHAPE(T, B, H), TU_UNIT, 170);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(H, H), TU_UNIT, 171);
    lj_tensor *h = tu_tensor(LJ_F32, LJ_SHAPE(B, H), TU_UNIT, 172);
    for (int64_t t = 0; t < T; t++)
      h = lj_tanh(lj_add(lj_matmul(h, w), lj_reshape(lj_slice(xp, 0, t, t + 1, 1), 2, (int64_t[]){B, H})));
    char *text = lowering_of(1, &h);
    ck_assert_msg(occurrences(text, "its code reads slot") == T - 1, "%s", text);
    free(text);
    int64_t twins = lj_counter_value("TwinKernels");
    tu_check_interp_tol(1, &h, 1e-5, 1e-6);
    ck_assert_int_eq(lj_counter_value("TwinKernels") - twins, cases[i].twins);
    lj_scope_end();
  }
}
END_TEST

/* What p's kernels compute: im2cols (a window kernel's own, or one joined to another kernel)
 * and matmuls by the operand they pack from an image (ljg_mm_cols). */
static void conv_kernels(const ljg_program *p, int *im2cols, int matmuls[3]) {
  *im2cols = matmuls[0] = matmuls[1] = matmuls[2] = 0;
  for (int k = 0; k < p->nkernels; k++) {
    *im2cols += p->kernels[k].win_op == LJG_OP_IM2COL;
    if (p->kernels[k].kind == LJG_K_MATMUL) matmuls[p->kernels[k].mm_cols]++;
  }
}

/* Asserts that the program of ts[0..n) stores `im2cols` im2cols and runs `matmuls` matmuls
 * that pack operand `cols` (ljg_mm_cols) from an image. */
static void expect_conv_kernels(int n, lj_tensor *const *ts, int im2cols, int cols, int matmuls) {
  ljg_graph *opt;
  ljg_program *p = program_of_n(n, ts, &opt);
  int got_im2cols, got[3];
  conv_kernels(p, &got_im2cols, got);
  ck_assert_int_eq(got_im2cols, im2cols);
  ck_assert_int_eq(got[cols], matmuls);
  free_program(p, opt);
}

static int local_slots(const ljg_program *p) {
  int n = 0;
  for (int s = 0; s < p->nslots; s++) n += p->slots[s].kind == LJG_SLOT_LOCAL;
  return n;
}

/* How many vectorized loops the optimized IR text has: the blocks LLVM names vector.body, with
 * a number when there are several (not the narrower epilogues' vec.epilog.vector.body). */
static int vector_loops(const char *ir) {
  int n = 0;
  for (const char *p = ir; (p = strstr(p, "\nvector.body")) != NULL; p++) n++;
  return n;
}

/* A bias for each row of C (a convolution's) added by an epilogue of its own is where the
 * GEMM routine starts C's rows from instead, and a relu of that sum what the routine's last
 * block of k stores: the kernel runs no loop of its own (none vectorized in its IR).
 * Convolutions of one channel (B packed from the image) and of 16 (Winograd's routine), f32
 * and f64, and of 3 by a 7×7 window of stride 2 whose C (an image's 40 channels of 64×64) is
 * too large for the stack; batched products with the bias along each matrix's rows and along
 * a flat [B·M] of rows; a K of 900 (blocks of k: the bias goes in the first only, the relu in
 * the last); relus of products of B transposed, of two rows, of a stride-2 convolution and
 * of Winograd's. A bias along the columns (a linear layer's) likewise: B read in place,
 * packed from rows (the bias in the first of two blocks of k), transposed (64 rows: Cᵀ
 * computed, whose rows the bias is along; column tasks, the last of 8 columns), two rows (a
 * sum of B's rows, dot products), and a matrix as large as C added; bf16 operands' f32
 * products, B packed and Cᵀ, where the host has bf16 dot products.
 * C read by more than the add (a relu's and another's, along its columns or rows) keeps its
 * loops. Values against the interpreter, two threads. */
START_TEST(test_matmul_bias_start) {
  for (int folded = 1; folded >= 0; folded--) {
    lj_config cfg = lj_config_default();
    cfg.num_threads = 2;
    char path[64];
    tu_init_saving(cfg, "llvm", path, sizeof path);
    lj_tensor *outs[40];
    int n = 0;
    for (int di = 0; di < 2; di++) {
      lj_dtype dt = di ? LJ_F64 : LJ_F32;
      lj_tensor *a = tu_tensor(dt, LJ_SHAPE(3, 37, 50), TU_ANY, 1 + di), *w = tu_tensor(dt, LJ_SHAPE(50, 45), TU_ANY, 3 + di);
      if (folded) {
        lj_tensor *x = tu_tensor(dt, LJ_SHAPE(2, 1, 11, 13), TU_ANY, 5 + di), *k = tu_tensor(dt, LJ_SHAPE(7, 1, 3, 3), TU_ANY, 7 + di);
        lj_tensor *kb = tu_tensor(dt, LJ_SHAPE(7), TU_ANY, 9 + di), *rows = tu_tensor(dt, LJ_SHAPE(37, 1), TU_ANY, 11 + di);
        outs[n++] = lj_conv2d(x, k, kb, NULL, (const int[]){1, 1}, NULL, 1);
        outs[n++] = lj_add(lj_matmul(a, w), rows);
        /* relus: B transposed; two rows (B read where it is, or dot products along k) */
        lj_tensor *wt = tu_tensor(dt, LJ_SHAPE(45, 50), TU_ANY, 25 + di);
        lj_tensor *two = tu_tensor(dt, LJ_SHAPE(1, 2, 50), TU_ANY, 27 + di);
        lj_tensor *rows2 = tu_tensor(dt, LJ_SHAPE(2, 1), TU_ANY, 29 + di);
        outs[n++] = lj_relu(lj_add(lj_matmul(a, lj_transpose(wt, 0, 1)), rows));
        outs[n++] = lj_relu(lj_add(lj_matmul(two, w), rows2));
        lj_tensor *wt3 = tu_tensor(dt, LJ_SHAPE(45, 50), TU_ANY, 57 + di); /* its own: not stored transposed */
        outs[n++] = lj_relu(lj_add(lj_matmul(two, lj_transpose(wt3, 0, 1)), rows2));
        /* along the columns */
        lj_tensor *cols = tu_tensor(dt, LJ_SHAPE(45), TU_ANY, 41 + di);
        lj_tensor *mat = tu_tensor(dt, LJ_SHAPE(3, 37, 45), TU_ANY, 43 + di);
        lj_tensor *x64 = tu_tensor(dt, LJ_SHAPE(64, 50), TU_ANY, 45 + di);
        lj_tensor *w520 = tu_tensor(dt, LJ_SHAPE(520, 50), TU_ANY, 47 + di);
        lj_tensor *c520 = tu_tensor(dt, LJ_SHAPE(520), TU_ANY, 49 + di);
        lj_tensor *a2 = tu_tensor(dt, LJ_SHAPE(3, 37, 50), TU_ANY, 51 + di);
        lj_tensor *two2 = tu_tensor(dt, LJ_SHAPE(2, 50), TU_ANY, 53 + di);
        outs[n++] = lj_add(lj_matmul(a2, w), cols);
        outs[n++] = lj_relu(lj_add(lj_matmul(a2, lj_transpose(wt, 0, 1)), mat));
        outs[n++] = lj_relu(lj_add(lj_matmul(x64, lj_transpose(w520, 0, 1)), c520));
        outs[n++] = lj_relu(lj_add(lj_matmul(two2, w), cols));
        lj_tensor *wt2 = tu_tensor(dt, LJ_SHAPE(45, 50), TU_ANY, 55 + di);
        outs[n++] = lj_add(lj_matmul(two2, lj_transpose(wt2, 0, 1)), cols);
        lj_tensor_release(x), lj_tensor_release(k), lj_tensor_release(kb), lj_tensor_release(rows);
        lj_tensor_release(wt), lj_tensor_release(two), lj_tensor_release(rows2), lj_tensor_release(cols);
        lj_tensor_release(mat), lj_tensor_release(x64), lj_tensor_release(w520), lj_tensor_release(c520);
        lj_tensor_release(a2), lj_tensor_release(two2), lj_tensor_release(wt2), lj_tensor_release(wt3);
      } else { /* along the columns; inside a relu; C an output too */
        lj_tensor *cols = tu_tensor(dt, LJ_SHAPE(45), TU_ANY, 13 + di), *rows = tu_tensor(dt, LJ_SHAPE(37, 1), TU_ANY, 11 + di);
        lj_tensor *c = lj_matmul(a, w);
        outs[n++] = lj_add(c, cols);
        outs[n++] = lj_relu(lj_add(c, rows));
        outs[n++] = lj_add(c, rows);
        outs[n++] = c;
        lj_tensor_release(cols), lj_tensor_release(rows);
      }
      lj_tensor_release(a), lj_tensor_release(w);
    }
    if (folded) {
      lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 16, 9, 10), TU_ANY, 15), *k = tu_tensor(LJ_F32, LJ_SHAPE(12, 16, 3, 3), TU_ANY, 16);
      lj_tensor *kb = tu_tensor(LJ_F32, LJ_SHAPE(12), TU_ANY, 17);
      lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(2, 20, 900), TU_ANY, 18), *w = tu_tensor(LJ_F32, LJ_SHAPE(900, 30), TU_ANY, 19);
      lj_tensor *flat = tu_tensor(LJ_F32, LJ_SHAPE(40, 1), TU_ANY, 20);
      outs[n++] = lj_conv2d(x, k, kb, NULL, (const int[]){1, 1}, NULL, 1);
      outs[n++] = lj_add(lj_reshape(lj_matmul(a, w), LJ_SHAPE(40, 30)), flat);
      lj_tensor_release(x), lj_tensor_release(k), lj_tensor_release(kb), lj_tensor_release(a), lj_tensor_release(flat);
      x = tu_tensor(LJ_F32, LJ_SHAPE(1, 3, 128, 128), TU_ANY, 21);
      k = tu_tensor(LJ_F32, LJ_SHAPE(40, 3, 7, 7), TU_ANY, 22), kb = tu_tensor(LJ_F32, LJ_SHAPE(40), TU_ANY, 23);
      outs[n++] = lj_conv2d(x, k, kb, (const int[]){2, 2}, (const int[]){3, 3}, NULL, 1);
      lj_tensor_release(x), lj_tensor_release(k), lj_tensor_release(kb);
      /* relus: of the products over two blocks of k (the last only), a 3×3 convolution of
       * stride 2 (B packed from the image) whose C is too large for the stack */
      a = tu_tensor(LJ_F32, LJ_SHAPE(2, 20, 900), TU_ANY, 31), flat = tu_tensor(LJ_F32, LJ_SHAPE(40, 1), TU_ANY, 32);
      outs[n++] = lj_relu(lj_add(lj_reshape(lj_matmul(a, w), LJ_SHAPE(40, 30)), flat));
      x = tu_tensor(LJ_F32, LJ_SHAPE(1, 8, 160, 160), TU_ANY, 33);
      k = tu_tensor(LJ_F32, LJ_SHAPE(40, 8, 3, 3), TU_ANY, 34), kb = tu_tensor(LJ_F32, LJ_SHAPE(40), TU_ANY, 35);
      outs[n++] = lj_relu(lj_conv2d(x, k, kb, (const int[]){2, 2}, (const int[]){1, 1}, NULL, 1));
      lj_tensor_release(x), lj_tensor_release(k), lj_tensor_release(kb), lj_tensor_release(a), lj_tensor_release(w);
      lj_tensor_release(flat);
      x = tu_tensor(LJ_F32, LJ_SHAPE(2, 16, 9, 10), TU_ANY, 36);
      k = tu_tensor(LJ_F32, LJ_SHAPE(12, 16, 3, 3), TU_ANY, 37), kb = tu_tensor(LJ_F32, LJ_SHAPE(12), TU_ANY, 38);
      outs[n++] = lj_relu(lj_conv2d(x, k, kb, NULL, (const int[]){1, 1}, NULL, 1));
      lj_tensor_release(x), lj_tensor_release(k), lj_tensor_release(kb);
      /* a bias along the columns of B packed (100 rows), K of 900 */
      a = tu_tensor(LJ_F32, LJ_SHAPE(100, 900), TU_ANY, 51), w = tu_tensor(LJ_F32, LJ_SHAPE(900, 30), TU_ANY, 52);
      lj_tensor *c30 = tu_tensor(LJ_F32, LJ_SHAPE(30), TU_ANY, 53);
      outs[n++] = lj_relu(lj_add(lj_matmul(a, w), c30));
      lj_tensor_release(a), lj_tensor_release(w), lj_tensor_release(c30);
      /* bf16 operands' products in f32 (their routines take pairs of k), where the host has the
       * instruction (else the casts run loops of their own): B packed from rows, and Cᵀ */
      if (ljc_session_bf16_dot(ljr_get()->cg)) {
        lj_tensor *bx = tu_tensor(LJ_BF16, LJ_SHAPE(40, 64), TU_ANY, 61);
        lj_tensor *bw = tu_tensor(LJ_BF16, LJ_SHAPE(64, 45), TU_ANY, 62);
        lj_tensor *bx64 = tu_tensor(LJ_BF16, LJ_SHAPE(64, 64), TU_ANY, 63);
        lj_tensor *bwt = tu_tensor(LJ_BF16, LJ_SHAPE(45, 64), TU_ANY, 64);
        lj_tensor *c45 = tu_tensor(LJ_F32, LJ_SHAPE(45), TU_ANY, 65);
        outs[n++] = lj_relu(lj_add(lj_matmul(lj_cast(bx, LJ_F32), lj_cast(bw, LJ_F32)), c45));
        outs[n++] = lj_relu(lj_add(lj_matmul(lj_cast(bx64, LJ_F32), lj_transpose(lj_cast(bwt, LJ_F32), 0, 1)), c45));
        lj_tensor_release(bx), lj_tensor_release(bw), lj_tensor_release(bx64), lj_tensor_release(bwt);
        lj_tensor_release(c45);
      }
    }
    /* f32 sums of up to 700 products of values up to a few units, Winograd's transforms */
    tu_check_interp_tol(n, outs, 5e-5, 1e-2);
    char *ir = tu_take_saved(path);
    if (folded) ck_assert_int_eq(vector_loops(ir), 0);
    else ck_assert_int_ge(vector_loops(ir), 2);
    free(ir);
    for (int i = 0; i < n; i++) lj_tensor_release(outs[i]);
    lj_shutdown();
  }
}
END_TEST

static void init_threads(int threads) {
  tu_init_threads(threads);
}

/* A 3×3 convolution (padding 1) of 3 images [3, c, h, w] by a weight [k, c, 3, 3] and a bias
 * [k] whose gradients are wanted (the images' too when x_grad), random from seed on: its
 * output, the operands in *x, *w and *b. */
/* A 3×3 convolution of x [3, c, h, w] by w [k, c, 3, 3] plus b [k] (all random, seed), stride
 * sy and dilation dy along the height (padded by dy), 1 and 1 along the width (padded by 1). */
static lj_tensor *conv_layer(lj_dtype dt, int64_t c, int64_t k, int64_t h, int64_t w, int sy, int dy, bool x_grad,
                             uint64_t seed, lj_tensor **xp, lj_tensor **wp, lj_tensor **bp) {
  *xp = tu_tensor(dt, LJ_SHAPE(3, c, h, w), TU_ANY, seed);
  *wp = tu_tensor(dt, LJ_SHAPE(k, c, 3, 3), TU_ANY, seed + 1);
  *bp = tu_tensor(dt, LJ_SHAPE(k), TU_ANY, seed + 2);
  lj_tensor_set_requires_grad(*xp, x_grad);
  lj_tensor_set_requires_grad(*wp, true);
  lj_tensor_set_requires_grad(*bp, true);
  return lj_conv2d(*xp, *wp, *bp, (const int[]){sy, 1}, (const int[]){dy, 1}, (const int[]){dy, 1}, 1);
}

/* Back-propagates Σ y·g for a random g of y's shape and dtype (seed); returns g. */
static lj_tensor *backward_random(lj_tensor *y, uint64_t seed) {
  lj_tensor *g = tu_tensor(lj_tensor_dtype(y), lj_tensor_ndim(y), lj_tensor_shape(y), TU_ANY, seed);
  ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
  return g;
}

/* A convolution's bias gradient, Σ of dY over the batch and the positions, is summed by the
 * weight gradient's routine as it reads dY (taps.c's, one channel; Winograd's, 16 channels):
 * the later kernel's sum does not run, as the lowering's text says. An f64 convolution, whose
 * weight gradient goes through the GEMM, keeps its sum. Output channels 7 (taps: an odd last
 * pair), 12 (Winograd: fewer than a block) and 70 from 40 channels (two blocks of columns and
 * of channels: each block's sums stored at its columns), odd image sizes; values of both gradients
 * against the interpreter, one and two threads (each thread sums its share of the columns). */
START_TEST(test_conv_bias_grad_summed) {
  static const struct {
    lj_dtype dt;
    int64_t c, k, h, w;
    bool summed;
  } cases[] = {{LJ_F32, 1, 7, 11, 13, true},
               {LJ_F32, 16, 12, 9, 10, true},
               {LJ_F32, 40, 70, 7, 9, true},
               {LJ_F64, 1, 7, 11, 13, false}};
  for (int threads = 1; threads <= 2; threads++)
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      init_threads(threads);
      lj_tensor *x, *w, *b;
      lj_tensor *y = conv_layer(cases[i].dt, cases[i].c, cases[i].k, cases[i].h, cases[i].w, 1, 1, false, 160, &x, &w, &b);
      lj_tensor *g = backward_random(y, 163);
      lj_tensor *out[2] = {lj_tensor_grad(w), lj_tensor_grad(b)};
      ljg_graph *opt;
      ljg_program *prog = program_of_n(2, out, &opt);
      char *lowering = ljc_lowering_text(prog, NULL);
      ck_assert_msg((strstr(lowering, "the routine also sums B for kernel") != NULL) == cases[i].summed, "%s", lowering);
      ck_assert_msg((strstr(lowering, "routine writes it") != NULL) == cases[i].summed, "%s", lowering);
      free(lowering);
      free_program(prog, opt);
      /* one sync for both (the fold needs both in the graph); the weight gradient through
       * Winograd's transforms to about 1e-4 of its sums */
      tu_check_interp_tol(2, out, 1e-4, 1e-2);
      lj_tensor_release(x), lj_tensor_release(w), lj_tensor_release(b), lj_tensor_release(y), lj_tensor_release(g);
      lj_shutdown();
    }
}
END_TEST

/* A 2×2 max-pool's gradient (behind a relu or not) that only the weight gradient's taps
 * routine and the bias gradient's sum read is never written: the routine builds dY's rows
 * from the pooled gradient, the window positions and the relu's mask, the sum reads the pooled
 * gradient, and the bias sum still goes to the routine (not when the bias gradient is only
 * an intermediate, scaled here: the sum then runs on its own). It stays a kernel of its own when its
 * image is more than the windows cover (an odd size), for a 3×3 pool, for f64 (no taps
 * routine) and when the input gradient reads dY too. The convolution's row stride equal to
 * its dilation (1 and 1, 2 and 2: the routine loads x's rows once for both rows of a window)
 * or not (1 and 2, 2 and 1). Values of every gradient against the interpreter, one and two
 * threads (each thread builds its share of the columns' rows). */
START_TEST(test_pool_grad_unpooled) {
  static const struct {
    lj_dtype dt;
    int64_t c, k, h, w;
    int pool;
    bool relu, dx, scaled, unpooled;
    int sy, dy; /* the convolution's stride and dilation along the height (0: 1) */
  } cases[] = {{LJ_F32, 1, 7, 10, 12, 2, true, false, false, true},   {LJ_F32, 3, 5, 8, 38, 2, false, false, false, true},
               {LJ_F32, 2, 4, 11, 13, 2, true, false, false, false},  {LJ_F32, 1, 6, 10, 12, 3, true, false, false, false},
               {LJ_F64, 1, 7, 10, 12, 2, true, false, false, false},  {LJ_F32, 1, 7, 10, 12, 2, true, true, false, false},
               {LJ_F32, 2, 5, 6, 34, 2, true, false, true, true},
               {LJ_F32, 1, 7, 10, 12, 2, true, false, false, true, 1, 2},    {LJ_F32, 2, 5, 12, 12, 2, true, false, false, true, 2, 2},
               {LJ_F32, 1, 3, 7, 8, 2, false, false, false, true, 2, 1}};
  for (int threads = 1; threads <= 2; threads++)
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      init_threads(threads);
      lj_tensor *x, *w, *b;
      lj_tensor *c = conv_layer(cases[i].dt, cases[i].c, cases[i].k, cases[i].h, cases[i].w, cases[i].sy ? cases[i].sy : 1,
                                cases[i].dy ? cases[i].dy : 1, cases[i].dx, 170, &x, &w, &b);
      lj_tensor *p = lj_max_pool2d(c, (const int[]){cases[i].pool, cases[i].pool}, NULL, NULL);
      lj_tensor *y = cases[i].relu ? lj_relu(p) : p;
      lj_tensor *g = backward_random(y, 173);
      lj_tensor *bg = lj_tensor_grad(b);
      lj_tensor *out[3] = {lj_tensor_grad(w), cases[i].scaled ? lj_mul_scalar(bg, 2.0) : bg, cases[i].dx ? lj_tensor_grad(x) : NULL};
      int n = cases[i].dx ? 3 : 2;
      ljg_graph *opt;
      ljg_program *prog = program_of_n(n, out, &opt);
      char *text = ljg_program_text(prog, opt), *lowering = ljc_lowering_text(prog, NULL);
      ck_assert_msg((strstr(text, "unpooled") != NULL) == cases[i].unpooled, "case %zu: %s", i, text);
      bool summed = strstr(lowering, "the routine also sums B for kernel") != NULL;
      if (cases[i].unpooled) ck_assert_msg(summed == !cases[i].scaled, "%s", lowering);
      free(text), free(lowering);
      free_program(prog, opt);
      tu_check_interp_tol(n, out, 1e-4, 1e-2);
      if (cases[i].scaled) lj_tensor_release(out[1]);
      if (y != p) lj_tensor_release(y);
      lj_tensor_release(x), lj_tensor_release(w), lj_tensor_release(b), lj_tensor_release(c), lj_tensor_release(p);
      lj_tensor_release(g);
      lj_shutdown();
    }
}
END_TEST

/* Loads of i8 or i64 elements, scalar or vector, in IR text: max-pool's window positions and
 * lj_argmax's indices read back. */
static int index_loads(const char *ir) {
  int n = 0;
  for (const char *p = ir; (p = strstr(p, " = load ")) != NULL; p++) {
    const char *t = p + strlen(" = load ");
    if (*t == '<' && (t = strstr(t, " x ")) != NULL) t += 3;
    n += strncmp(t, "i8", 2) == 0 ? !isdigit((unsigned char)t[2]) : strncmp(t, "i64", 3) == 0;
  }
  return n;
}

/* An argmax or argmin whose found element the next nest gathers back from the same values
 * (max-pool's maximum of each window, lj_gather at lj_argmax or lj_argmin along the same dim)
 * stores that element itself: no kernel reads the indices back. The same bits as the
 * interpreter's, with ties (the first of equal maxima), NaNs and zeros of both signs among
 * the values. A gather of other values at the indices still reads them. The lowering's text
 * (LJ_DUMP_DIR's kernels.txt) says which. One and two threads. */
START_TEST(test_argmax_stores_found) {
  for (int threads = 1; threads <= 2; threads++)
    for (int folded = 1; folded >= 0; folded--) {
      lj_config cfg = lj_config_default();
      cfg.num_threads = threads;
      char path[64];
      tu_init_saving(cfg, "llvm", path, sizeof path);
      lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 7, 10, 12), TU_ANY, 1), *xd = tu_tensor(LJ_F64, LJ_SHAPE(2, 3, 9, 9), TU_ANY, 2);
      float v[5 * 9 * 6];
      for (int i = 0; i < 5 * 9 * 6; i++) v[i] = (float)(i * 7 % 5) - 2.0f; /* ties */
      v[4] = NAN, v[50] = NAN, v[51] = NAN, v[100] = -0.0f, v[101] = 0.0f, v[106] = -0.0f;
      lj_tensor *a = lj_tensor_from_host(lj_default_device(), LJ_F32, LJ_SHAPE(5, 9, 6), v);
      lj_tensor *other = tu_tensor(LJ_F32, LJ_SHAPE(5, 9, 6), TU_ANY, 3);
      lj_tensor *outs[4];
      if (folded) {
        outs[0] = lj_max_pool2d(x, (const int[]){2, 2}, NULL, NULL);
        outs[1] = lj_max_pool2d(xd, (const int[]){3, 3}, (const int[]){2, 2}, (const int[]){1, 1});
        outs[2] = lj_gather(a, 1, lj_argmax(a, 1, true));
        outs[3] = lj_gather(a, 2, lj_argmin(a, 2, true));
      } else {
        outs[0] = lj_gather(other, 1, lj_argmax(a, 1, true));
        outs[1] = lj_gather(other, 2, lj_argmin(a, 2, true));
      }
      int n = folded ? 4 : 2;
      ljg_graph *opt; /* the dump's kernels.txt says so */
      ljg_program *p = program_of(outs[0], &opt);
      char *lowering = ljc_lowering_text(p, NULL);
      ck_assert_msg((strstr(lowering, "stores the elements it found") != NULL) == folded, "%s", lowering);
      free(lowering);
      free_program(p, opt);
      tu_check_interp_tol(n, outs, 0, 0);
      char *ir = tu_take_saved(path);
      if (folded) ck_assert_int_eq(index_loads(ir), 0);
      else ck_assert_int_ge(index_loads(ir), 2);
      free(ir);
      for (int i = 0; i < n; i++) lj_tensor_release(outs[i]);
      lj_tensor_release(x), lj_tensor_release(xd), lj_tensor_release(a), lj_tensor_release(other);
      lj_shutdown();
    }
}
END_TEST

/* A nest after such an argmax that only maps each found element (a scale after a 3×3 max-pool
 * of stride 3) is stored by the argmax too and does not run, the pooled values an output or
 * not; one that also reads another tensor runs, and so does a relu after a 2×2 max-pool, whose
 * windows are read from the image's rows (test_pool_rows). Values against the interpreter,
 * with NaNs and zeros of both signs among the values; the lowering's text says which. One and
 * two threads. */
START_TEST(test_argmax_maps_found) {
  for (int threads = 1; threads <= 2; threads++)
    for (int mapped = 1; mapped >= 0; mapped--) {
      tu_init_threads(threads);
      float v[3 * 5 * 10 * 12];
      for (int i = 0; i < 3 * 5 * 10 * 12; i++) v[i] = (float)(i * 7 % 11) - 5.0f;
      v[3] = NAN, v[40] = -0.0f, v[41] = 0.0f, v[300] = -0.0f;
      lj_tensor *x = lj_tensor_from_host(lj_default_device(), LJ_F32, LJ_SHAPE(3, 5, 10, 12), v);
      lj_tensor *other = tu_tensor(LJ_F32, LJ_SHAPE(3, 5, 5, 6), TU_ANY, 4);
      lj_tensor *pooled = lj_max_pool2d(x, (const int[]){2, 2}, NULL, NULL), *outs[2];
      int n = 1;
      if (mapped) {
        outs[0] = lj_relu(pooled);
        const int k3[2] = {3, 3}, p1[2] = {1, 1};
        outs[n++] = lj_mul_scalar(lj_max_pool2d(x, k3, k3, p1), -0.5);
      } else {
        outs[0] = lj_mul(pooled, other);
      }
      ljg_graph *opt;
      ljg_program *p = program_of_n(n, outs, &opt);
      char *lowering = ljc_lowering_text(p, NULL);
      ck_assert_msg(occurrences(lowering, "stores what it maps them to") == (mapped ? 1 : 0), "%s", lowering);
      free(lowering);
      free_program(p, opt);
      tu_check_interp_tol(n, outs, 0, 0);
      for (int i = 0; i < n; i++) lj_tensor_release(outs[i]);
      lj_tensor_release(pooled), lj_tensor_release(x), lj_tensor_release(other);
      lj_shutdown();
    }
}
END_TEST

/* A tensor of dtype dt holding the doubles v, rounded to it. */
static lj_tensor *from_doubles(lj_dtype dt, int ndim, const int64_t *shape, const double *v) {
  int64_t n = ljg_numel(ndim, shape);
  void *buf = malloc((size_t)n * lj_dtype_size(dt));
  for (int64_t i = 0; i < n; i++) ljg_store_f64(dt, buf, i, v[i]);
  lj_tensor *t = lj_tensor_from_host(lj_default_device(), dt, ndim, shape, buf);
  free(buf);
  return t;
}

/* x's gradient from sum(max_pool2d(r) * g), r = x or relu(x) read back (planes of h×w, pooled
 * planes of oh×ow), summed as col2im sums it: each window's first maximum (a NaN first) gets
 * 0 + its g (0 where a relu's mask drops it: the pooled value not positive), the taps in order
 * for each element, in f32 arithmetic or f64. */
static void unpool_reference(const double *r, const double *g, int64_t planes, int64_t h, int64_t w, const int *k,
                             const int *st, const int *pad, int64_t oh, int64_t ow, bool relu, bool f32, double *dx) {
  int64_t kk = k[0] * k[1];
  for (int64_t i = 0; i < planes * h * w; i++) dx[i] = 0;
  for (int64_t t = 0; t < kk; t++)
    for (int64_t pl = 0; pl < planes; pl++)
      for (int64_t p = 0; p < oh * ow; p++) {
        int64_t best = -1, at = -1;
        double bv = -INFINITY;
        for (int64_t u = 0; u < kk; u++) {
          int64_t ih = p / ow * st[0] - pad[0] + u / k[1], iw = p % ow * st[1] - pad[1] + u % k[1];
          double v = ih >= 0 && ih < h && iw >= 0 && iw < w ? r[(pl * h + ih) * w + iw] : -INFINITY;
          if (best < 0 || (!isnan(bv) && (isnan(v) || v > bv))) best = u, bv = v, at = ih * w + iw;
        }
        if (best != t) continue;
        double v = relu && !(bv > 0) ? 0 : g[pl * oh * ow + p];
        double sum = dx[pl * h * w + at] + (f32 ? (double)(0.0f + (float)v) : 0.0 + v);
        dx[pl * h * w + at] = f32 ? (double)(float)sum : sum;
      }
}

/* A max-pool's window, stride and padding on an image of h × w, and whether the lowering takes
 * the rows path under test for it. */
typedef struct pool_case {
  int k[2], s[2], pad[2];
  int64_t h, w;
  bool rows;
} pool_case;

/* A max-pool's gradient stores the image's rows from each window's value and position instead
 * of laying out a column buffer by col2im: windows that overlap (3×3 of stride 2 with padding,
 * ResNet's stem's; 3×3 of stride 1), that tile in pairs (2×2), of row stride 3 over rows not a
 * multiple of it; rows of fewer columns than a vector, and more, not a multiple of it (the last
 * vector overlapping the one before); f32 and f64; a relu before the pool (its mask on the
 * pooled gradient) or not. The values: ties, so that windows share maxima, and a NaN; the
 * gradients of magnitudes 1e-2 to 1e2 (sums that round by their order), with a NaN and zeros of
 * both signs; the same bits as col2im's sums in the order of its taps (unpool_reference; the
 * interpreter sums in another order). An odd width at a column stride of 2 keeps the buffer.
 * The lowering's text says which. */
START_TEST(test_unpool_rows) {
  static const pool_case cases[] = {{{3, 3}, {2, 2}, {1, 1}, 12, 40, true}, {{3, 3}, {2, 2}, {1, 1}, 9, 8, true},
                                    {{2, 2}, {2, 2}, {0, 0}, 14, 14, true}, {{3, 3}, {1, 1}, {1, 1}, 7, 19, true},
                                    {{3, 2}, {3, 2}, {0, 0}, 10, 6, true},  {{3, 3}, {2, 2}, {1, 1}, 7, 7, false}};
  static const lj_dtype dts[] = {LJ_F32, LJ_F64};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
    for (int t = 0; t < 2; t++)
      for (int relu = 0; relu < 2; relu++) {
        int64_t n = 2 * 3 * cases[c].h * cases[c].w;
        double *v = malloc((size_t)n * sizeof *v);
        for (int64_t i = 0; i < n; i++) v[i] = (double)(i * 7 % 11) - 5.0;
        v[5] = NAN;
        lj_tensor *x = from_doubles(dts[t], LJ_SHAPE(2, 3, cases[c].h, cases[c].w), v);
        lj_tensor_set_requires_grad(x, true);
        lj_scope_begin();
        lj_tensor *r = relu ? lj_relu(x) : x, *y = lj_max_pool2d(r, cases[c].k, cases[c].s, cases[c].pad);
        int64_t m = lj_tensor_numel(y);
        double *gv = malloc((size_t)m * sizeof *gv);
        for (int64_t i = 0; i < m; i++) gv[i] = (double)(i * 13 % 7 - 3) * pow(10.0, (double)(i % 5) - 2.0);
        gv[1] = -0.0, gv[m / 2] = NAN;
        lj_tensor *g = from_doubles(dts[t], 4, lj_tensor_shape(y), gv);
        ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
        lj_tensor *dx = lj_tensor_grad(x);
        char *lowering = lowering_of(1, &dx);
        bool rows = strstr(lowering, "store the image's rows") != NULL;
        ck_assert_msg(rows == cases[c].rows, "case %zu: %s", c, lowering);
        free(lowering);
        int64_t cnt;
        double *got = tu_read(dx, &cnt), *rv = tu_read(r, &cnt), *gr = tu_read(g, &m);
        double *want = malloc((size_t)n * sizeof *want);
        const int64_t *ys = lj_tensor_shape(y);
        unpool_reference(rv, gr, 6, cases[c].h, cases[c].w, cases[c].k, cases[c].s, cases[c].pad, ys[2], ys[3], relu,
                         dts[t] == LJ_F32, want);
        for (int64_t i = 0; i < n; i++)
          ck_assert_msg(got[i] == want[i] || (isnan(got[i]) && isnan(want[i])),
                        "case %zu, %s, relu %d: dx[%lld] %.17g, want %.17g", c, lj_dtype_name(dts[t]), relu,
                        (long long)i, got[i], want[i]);
        free(got), free(rv), free(gr), free(want), free(v), free(gv);
        lj_scope_end();
        lj_tensor_release(x);
      }
}
END_TEST

/* A max-pool of column stride 1 or 2 and at most 5×5 reads each window from the image's rows
 * instead of its im2col: 2×2 of stride 2 (MNISTNet's, VGG's), 3×2 of stride 3×2, 1×2, 3×3 of
 * stride 2 padded by 1 (ResNet's), 3×3 and 2×2 of stride 1, 5×5 of stride 2 padded by 2 and
 * 2×2 of stride 2 padded by 1 (windows that reach past the image's last row and column); rows
 * of fewer windows than a vector has lanes and of more, not a multiple of it (the last vector
 * overlapping the one before), with vectors of plain loads between masked ones at the rows'
 * ends and without; an odd width (its last column in no window); f32 and f64, compiled for the
 * host and for AVX2; of the image, of a relu of it (one row-fused kernel: the relu's nest
 * writes a block's planes on the stack, which the pool reads) and with a relu after it (a
 * nest mapping the maxima, which then runs on them). The image lies between NaNs
 * in memory (a slice of a longer buffer), which the masked loads at its edges must not read.
 * The values: ties, so that windows share maxima, NaNs, -inf and zeros of both signs; the
 * maxima bit for bit against the interpreter, and through the gradient their positions (bit
 * for bit where windows do not overlap; where they do, each element's sum in another order).
 * Windows of column stride 3 or of more than 5 rows keep the im2col. The lowering's text says
 * which. */
START_TEST(test_pool_rows) {
  static const pool_case cases[] = {
      {{2, 2}, {2, 2}, {0, 0}, 6, 9, true},  {{2, 2}, {2, 2}, {0, 0}, 10, 37, true},
      {{2, 2}, {2, 2}, {0, 0}, 4, 70, true}, {{3, 2}, {3, 2}, {0, 0}, 9, 28, true},
      {{1, 2}, {1, 2}, {0, 0}, 3, 6, true},  {{2, 2}, {2, 2}, {1, 1}, 6, 8, true},
      {{3, 3}, {2, 2}, {1, 1}, 7, 9, true},  {{3, 3}, {2, 2}, {1, 1}, 8, 70, true},
      {{3, 3}, {2, 2}, {1, 1}, 5, 40, true}, {{3, 3}, {1, 1}, {1, 1}, 5, 40, true},
      {{2, 2}, {1, 1}, {0, 0}, 4, 19, true}, {{5, 5}, {2, 2}, {2, 2}, 9, 37, true},
      {{2, 3}, {2, 3}, {0, 0}, 6, 9, false}, {{6, 2}, {6, 2}, {0, 0}, 12, 8, false}};
  static const lj_dtype dts[] = {LJ_F32, LJ_F64};
  static const char *const cpus[] = {NULL, "haswell"};
  enum { EDGE = 64 };
  for (size_t cpu = 0; cpu < 2; cpu++) {
    if (!tu_host_runs(cpus[cpu])) continue;
    lj_config cfg = lj_config_default();
    cfg.cpu = cpus[cpu];
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
      for (int t = 0; t < 2; t++)
        for (int form = 0; form < 3; form++) { /* the image's pool, a relu's, a relu of the pool */
          int64_t n = 2 * 3 * cases[c].h * cases[c].w;
          double *v = malloc((size_t)(n + 2 * EDGE) * sizeof *v), *img = v + EDGE;
          for (int64_t i = 0; i < n + 2 * EDGE; i++) v[i] = NAN;
          for (int64_t i = 0; i < n; i++) img[i] = (double)(i * 7 % 11) - 5.0;
          img[1] = NAN, img[n / 2] = NAN, img[n / 3] = -INFINITY, img[n / 3 + 1] = -INFINITY, img[4] = -0.0;
          img[n - 2] = -0.0;
          /* the pools read the image between NaNs; the relu, which joins the pool's kernel,
           * a tensor of its own (a slice's elements would stay a kernel apart) */
          lj_tensor *flat = form == 1 ? from_doubles(dts[t], LJ_SHAPE(2, 3, cases[c].h, cases[c].w), img)
                                      : from_doubles(dts[t], LJ_SHAPE(n + 2 * EDGE), v);
          lj_tensor_set_requires_grad(flat, true);
          lj_scope_begin();
          lj_tensor *x = flat;
          if (form != 1) x = lj_reshape(lj_slice(flat, 0, EDGE, EDGE + n, 1), LJ_SHAPE(2, 3, cases[c].h, cases[c].w));
          lj_tensor *y = lj_max_pool2d(form == 1 ? lj_relu(x) : x, cases[c].k, cases[c].s, cases[c].pad);
          lj_tensor *out = form == 2 ? lj_relu(y) : y;
          ck_assert_msg(lj_graph_kernel_count(1, &y) == 1, "case %zu, form %d", c, form);
          lj_tensor *g = tu_tensor(dts[t], lj_tensor_ndim(out), lj_tensor_shape(out), TU_ANY, 40 + (uint64_t)c);
          ck_assert_int_eq(lj_backward(lj_sum(lj_mul(out, g), 0, NULL, false)), LJ_OK);
          lj_tensor *outs[2] = {out, lj_tensor_grad(flat)};
          char *lowering = lowering_of(2, outs);
          bool rows = strstr(lowering, "reads its windows from the image's rows") != NULL;
          ck_assert_msg(rows == cases[c].rows, "case %zu, form %d: %s", c, form, lowering);
          free(lowering);
          /* the maxima bit for bit; the gradient's sums, where windows overlap, in another
           * order than the interpreter's (test_unpool_rows checks their bits) */
          tu_check_interp_tol(1, outs, 0, 0);
          bool overlap = cases[c].k[0] > cases[c].s[0] || cases[c].k[1] > cases[c].s[1];
          tu_check_interp_tol(1, outs + 1, overlap ? (t ? 1e-12 : 1e-5) : 0, overlap ? (t ? 1e-12 : 1e-6) : 0);
          free(v);
          lj_scope_end();
          lj_tensor_release(flat);
        }
    lj_shutdown();
  }
}
END_TEST

/* Nests over the same points share one loop when what each reads of another's output is the
 * element being written (SGD with momentum: the state, then the parameter from it); a
 * reduction of the first output keeps a loop of its own. One kernel either way; values
 * against the interpreter. A row-fused kernel whose second nest reads the first's output
 * transposed within the row (elements not yet written in a shared loop) keeps two loops:
 * its values would be wrong in one. */
START_TEST(test_nests_share_loops) {
  for (int threads = 1; threads <= 2; threads++)
    for (int shared = 0; shared < 2; shared++) {
      lj_config cfg = lj_config_default();
      cfg.num_threads = threads;
      char path[64];
      tu_init_saving(cfg, "llvm", path, sizeof path);
      lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(37, 301), TU_ANY, 1);
      lj_tensor *m = tu_tensor(LJ_F32, LJ_SHAPE(37, 301), TU_ANY, 2);
      lj_tensor *g = tu_tensor(LJ_F32, LJ_SHAPE(37, 301), TU_ANY, 3);
      lj_tensor *m2 = lj_add(lj_mul_scalar(m, 0.9), g);
      lj_tensor *outs[2] = {m2, shared ? lj_sub(w, lj_mul_scalar(m2, 0.1)) : lj_sum(m2, 1, (const int[]){1}, false)};
      ck_assert_int_eq(lj_graph_kernel_count(2, outs), 1);
      /* the sum: 301 f32 values added in the order of the target's vector width (SSE's 4
       * lanes put it 1.2e-6 from the interpreter's) */
      tu_check_interp(2, outs, shared ? 1e-6 : 1e-5);
      char *ir = tu_take_saved(path);
      ck_assert_int_eq(vector_loops(ir), (shared ? 1 : 2));
      free(ir);
      lj_shutdown();
    }
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(37, 16, 16), TU_ANY, 4);
  lj_tensor *y = lj_exp(lj_transpose(x, 1, 2)), *yt = lj_mul_scalar(lj_transpose(y, 1, 2), 2.0);
  lj_tensor *rows[3] = {y, yt, lj_div(yt, lj_sum(y, 2, (const int[]){1, 2}, true))};
  ck_assert_int_eq(lj_graph_kernel_count(3, rows), 1);
  tu_check_interp(3, rows, 1e-5);
}
END_TEST

/* Elementwise kernels that read an operand transposed across their rows stay apart, so that
 * each reads it in tiles (row-fused, in blocks of a few rows, they gathered it an element a
 * line): a kept x.t() with x.t()·2, which reads the first's output at its own point, and two
 * transposes of as many rows, on one and two threads; so does a large one beside a row sum
 * it shares nothing with; values against the interpreter. A transpose within each row still
 * joins (test_nests_share_loops). */
START_TEST(test_transposes_apart) {
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(64, 100), TU_ANY, 1), *y = tu_tensor(LJ_F32, LJ_SHAPE(64, 100), TU_ANY, 2);
    lj_tensor *z = tu_tensor(LJ_F32, LJ_SHAPE(64, 100), TU_ANY, 3), *xt = lj_transpose(x, 0, 1);
    lj_tensor *pairs[2][2] = {{xt, lj_mul_scalar(xt, 2.0)},
                              {lj_mul_scalar(lj_transpose(y, 0, 1), 3.0), lj_add_scalar(lj_transpose(z, 0, 1), 1.0)}};
    for (int i = 0; i < 2; i++) {
      ck_assert_int_eq(lj_graph_kernel_count(2, pairs[i]), 2);
      ljg_graph *opt;
      ljg_program *p = program_of_n(2, pairs[i], &opt);
      char *lowering = ljc_lowering_text(p, NULL);
      ck_assert_msg(strstr(lowering, "kernel 0: nest 0 reads e0 transposed, in tiles along dims 0 and 1"), "%s", lowering);
      ck_assert_msg((strstr(lowering, "kernel 1: nest 0 reads e0 transposed") != NULL) == (i == 1), "%s", lowering);
      free(lowering);
      free_program(p, opt);
      tu_check_interp(2, pairs[i], 1e-6);
      lj_tensor_release(pairs[i][0]);
      lj_tensor_release(pairs[i][1]);
    }
    /* a row sum beside a transpose it does not depend on joins it with rows of 64 columns,
     * not with rows of 1000 (64 × 1000 points; TRANSPOSED_JOIN_ROW_BYTES), where the
     * transpose keeps its tiles */
    for (int i = 0; i < 2; i++) {
      int64_t n = i ? 1000 : 64, m = i ? 64 : 100;
      lj_tensor *big = tu_tensor(LJ_F32, LJ_SHAPE(n, m), TU_ANY, 4), *rows = tu_tensor(LJ_F32, LJ_SHAPE(m, 8), TU_ANY, 5);
      lj_tensor *pair[2] = {lj_mul_scalar(lj_transpose(big, 0, 1), 2.0), lj_sum(rows, 1, (const int[]){1}, false)};
      ck_assert_int_eq(lj_graph_kernel_count(2, pair), i ? 2 : 1);
      tu_check_interp_tol(2, pair, 1e-5, 1e-5); /* sums of 8 that may cancel */
      for (int j = 0; j < 2; j++) lj_tensor_release(pair[j]);
      lj_tensor_release(big);
      lj_tensor_release(rows);
    }
    lj_tensor_release(x);
    lj_tensor_release(y);
    lj_tensor_release(z);
    lj_shutdown();
  }
}
END_TEST

/* softmax's max, exps, sum and reciprocal live a block of rows at a time on the kernel's stack
 * (no scratch arena at all), in every dtype; so does a block of one row wider than the usual
 * block (a vocabulary's logits), up to 1 MiB a slot and 2 MiB a kernel; beyond that rows keep
 * scratch memory. Values agree with the interpreter either way, with rows split across
 * threads. */
static void check_local_rows(lj_tensor *y, int locals, int64_t scratch) {
  ljg_graph *opt;
  ljg_program *p = program_of(y, &opt);
  ck_assert_int_eq(p->nkernels, 1);
  ck_assert_int_eq(local_slots(p), locals);
  ck_assert_int_eq(p->scratch_bytes, scratch);
  for (int s = 0; s < p->nslots; s++)
    if (p->slots[s].kind == LJG_SLOT_LOCAL)
      ck_assert_int_eq(p->slots[s].nbytes, p->kernels[0].row_block * p->slots[s].row_bytes);
  free_program(p, opt);
}

START_TEST(test_row_fusion_local_slots) {
  static const lj_dtype dts[] = {LJ_F32, LJ_F64, LJ_BF16};
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
    lj_tensor *x = tu_tensor(dts[i], LJ_SHAPE(301, 67), TU_ANY, 3);
    lj_tensor *y = lj_softmax(x, 1);
    check_local_rows(y, 4, 0);
    tu_check1(y, tu_rtol(dts[i]));
    lj_tensor_release(x);
  }
  lj_shutdown();
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    /* a row of 20000 f32, 80 KB: one row per block, on the stack */
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(6, 20000), TU_ANY, 4);
    lj_tensor *y = lj_softmax(x, 1);
    check_local_rows(y, 4, 0);
    tu_check1(y, 1e-5);
    /* 140000 f32, 560 KB: on the stack too; 270000, 1080 KB: the exps in scratch memory, the
     * per-row max, sum and reciprocal not */
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(3, 140000), TU_ANY, 5);
    lj_tensor *z = lj_softmax(w, 1);
    check_local_rows(z, 4, 0);
    tu_check1(z, 1e-5);
    lj_tensor *w2 = tu_tensor(LJ_F32, LJ_SHAPE(3, 270000), TU_ANY, 7);
    lj_tensor *z2 = lj_softmax(w2, 1);
    check_local_rows(z2, 3, 3 * 270000 * 4);
    tu_check1(z2, 1e-5);
    /* rows of 60000 f32 (240 KB) centred ten times over, through a tanh (stored, where a
     * subtraction alone would be recomputed): of the nine intermediates, eight fit in 2 MiB of
     * LOCAL slots, one does not */
    lj_tensor *c = tu_tensor(LJ_F32, LJ_SHAPE(5, 60000), TU_ANY, 6);
    for (int r = 0; r < 10; r++) {
      lj_tensor *m = lj_mean(c, 1, (const int[]){1}, true);
      lj_tensor *centred = lj_sub(c, m);
      lj_tensor *next = lj_tanh(centred);
      lj_tensor_release(c);
      lj_tensor_release(m);
      lj_tensor_release(centred);
      c = next;
    }
    check_local_rows(c, 10 + 8, 5 * 60000 * 4);
    tu_check1(c, 1e-5);
    /* a depthwise convolution's windows of a 112×112 plane, 441 KiB: on the stack */
    lj_tensor *img = tu_tensor(LJ_F32, LJ_SHAPE(2, 3, 112, 112), TU_ANY, 7);
    lj_tensor *dw = lj_conv2d(img, tu_tensor(LJ_F32, LJ_SHAPE(3, 1, 3, 3), TU_ANY, 8), NULL, NULL,
                              (const int[]){1, 1}, NULL, 3);
    check_local_rows(dw, 1, 0);
    tu_check_interp_tol(1, &dw, 1e-5, 1e-5); /* 9 products of either sign */
    lj_tensor_release(dw);
    lj_tensor_release(img);
    lj_tensor_release(x);
    lj_tensor_release(w);
    lj_tensor_release(w2);
    lj_shutdown();
  }
}
END_TEST

/* Whether the program of ts[0..n) has a kernel of column blocks of `cols` columns, or for
 * cols 0 none of any. */
static bool column_blocks_are(int n, lj_tensor *const *ts, int64_t cols) {
  ljg_graph *opt;
  ljg_program *p = program_of_n(n, ts, &opt);
  bool found = false;
  for (int k = 0; k < p->nkernels; k++) found |= cols ? p->kernels[k].col_block == cols : p->kernels[k].col_block != 0;
  free_program(p, opt);
  return found == (cols != 0);
}

/* Row-fused kernels of rows over 1 MiB whose nests keep the same last dim (the positions of
 * [N, C, H, W] along a reduction over the channels) run a block of its columns at a time:
 * softmax and log_softmax over the channels, their gradients, a normalization over the
 * channels (a layer norm of channels-first images), and a cross-entropy over the channels
 * with its gradient, 64 channels of 48×48 in blocks of 256 positions; NaNs and infinities
 * among the inputs. 47×47 positions, which no multiple of 16
 * divides, keep whole rows; so do 16 channels, whose rows fit. Values against the
 * interpreter, one and two threads. */
START_TEST(test_column_blocks) {
  static const struct {
    int64_t c, hw;
    tu_values kind;
    int64_t cols;
  } cases[] = {{64, 48, TU_ANY, 256}, {64, 48, TU_SPECIAL, 256}, {64, 47, TU_ANY, 0}, {16, 48, TU_ANY, 0}};
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(3, cases[i].c, cases[i].hw, cases[i].hw), cases[i].kind, 40 + i);
      ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
      lj_scope_begin();
      lj_tensor *sm = lj_softmax(x, 1), *lsm = lj_log_softmax(x, 1);
      lj_tensor *centred = lj_sub(x, lj_mean(x, 1, (const int[]){1}, true));
      lj_tensor *var = lj_mean(lj_mul(centred, centred), 1, (const int[]){1}, true);
      lj_tensor *norm = lj_mul(centred, lj_rsqrt(lj_add_scalar(var, 1e-5)));
      lj_tensor *out[4] = {lj_keep(sm), lj_keep(lsm), lj_keep(norm)};
      lj_scope_end();
      lj_tensor *g[2] = {backward_random(out[0], 50 + i), backward_random(out[1], 60 + i)};
      out[3] = lj_tensor_grad(x);
      ck_assert_msg(column_blocks_are(3, out, cases[i].cols), "case %zu", i);
      ck_assert_msg(column_blocks_are(1, &out[3], cases[i].cols), "case %zu", i);
      tu_check_interp_tol(4, out, 1e-4, 1e-5);
      for (int k = 0; k < 3; k++) lj_tensor_release(out[k]);
      lj_tensor_release(g[0]), lj_tensor_release(g[1]);
      lj_tensor_zero_grad(x);
      /* cross-entropy over the channels: its kernel's gather of each position's target logit,
       * over [N, 1, H, W], has its positions merged to run in the same blocks */
      int64_t npos = 3 * cases[i].hw * cases[i].hw;
      int64_t *classes = malloc((size_t)npos * sizeof *classes);
      for (int64_t q = 0; q < npos; q++) classes[q] = (q * 7 + (int64_t)i) % cases[i].c;
      lj_tensor *target =
          lj_tensor_from_host(lj_default_device(), LJ_I64, LJ_SHAPE(3, cases[i].hw, cases[i].hw), classes);
      free(classes);
      lj_tensor *ce[2] = {lj_cross_entropy(x, target, LJ_REDUCE_MEAN)};
      ck_assert_int_eq(lj_backward(ce[0]), LJ_OK);
      ce[1] = lj_tensor_grad(x);
      ck_assert_msg(column_blocks_are(2, ce, cases[i].cols), "case %zu", i);
      tu_check_interp_tol(2, ce, 1e-4, 1e-6);
      lj_tensor_release(ce[0]);
      lj_tensor_release(target);
      lj_tensor_release(x);
    }
    lj_shutdown();
  }
}
END_TEST

/* The gradients of a layer norm over [rows, cols] with a weight and a bias, of the sum of its
 * output times a random tensor, into grads (x's, the weight's, the bias's). */
static void layer_norm_grads(int64_t rows, int64_t cols, lj_tensor *grads[3]) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(rows, cols), TU_UNIT, 7);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(cols), TU_UNIT, 8);
  lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(cols), TU_UNIT, 9);
  lj_tensor *r = tu_tensor(LJ_F32, LJ_SHAPE(rows, cols), TU_UNIT, 10);
  lj_tensor_set_requires_grad(x, true);
  lj_tensor_set_requires_grad(w, true);
  lj_tensor_set_requires_grad(b, true);
  lj_tensor *loss = lj_sum(lj_mul(lj_layer_norm(x, 1, w, b, 1e-5), r), 0, NULL, false);
  ck_assert_int_eq(lj_backward(loss), LJ_OK);
  grads[0] = lj_tensor_grad(x);
  grads[1] = lj_tensor_grad(w);
  grads[2] = lj_tensor_grad(b);
}

/* A kernel joins an earlier one over the same rows when it depends on none of the kernels
 * between: layer norm's gradient sums the weight's and the bias's gradients over the rows,
 * each in two stages (1024 rows of 1024); the two first stages become one kernel, which then
 * runs once a task after the row kernel (test_sums_once_a_task), and the two second ones
 * become one (2 kernels, 5 without). A kernel that reads one between stays where it is: rows
 * minus the column sums of their softmax (3 kernels). Values and gradients against the
 * interpreter on one and two threads. */
START_TEST(test_join_past_independent_kernels) {
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    lj_scope_begin();
    lj_tensor *grads[3];
    layer_norm_grads(1024, 1024, grads);
    ck_assert_int_eq(lj_graph_kernel_count(3, grads), 2);
    tu_check_interp_tol(3, grads, 1e-4, 1e-4);
    lj_tensor *y = tu_tensor(LJ_F32, LJ_SHAPE(301, 67), TU_ANY, 11);
    lj_tensor *sm = lj_softmax(y, 1);
    lj_tensor *outs[2] = {sm, lj_sub(y, lj_sum(sm, 1, (const int[]){0}, true))};
    ck_assert_int_eq(lj_graph_kernel_count(2, outs), 3);
    tu_check_interp_tol(2, outs, 1e-5, 1e-5); /* column sums of 301 in another order */
    lj_scope_end();
    lj_shutdown();
  }
}
END_TEST

/* A column sum in blocks of rows runs once a task after the row kernel over those rows
 * (fuse_rows.c's join_task_sums): layer norm's weight and bias gradients over [3200, 333] sum
 * 64 blocks of 50 rows, which become the row kernel's tasks, its nests running on a task's
 * rows in blocks of 4, the last of 2 (2 kernels; the blocks' sums are added up in the other),
 * and the two sums adding up each block's rows right after the row nests ran on it; over
 * [1024, 2100], rows wider than a column-order nest's blocks (16 rows a task, one a block). Values
 * against the interpreter on one and two threads. Not a column sum of another tensor, which
 * would find nothing of its rows in cache: softmax over [4096, 256] and the column sums of
 * another [4096, 256] (3 kernels). */
START_TEST(test_sums_once_a_task) {
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    lj_scope_begin();
    lj_tensor *grads[3];
    static const int64_t shapes[2][4] = {{3200, 333, 50, 4}, {1024, 2100, 16, 1}}; /* rows, cols, task, block */
    ljg_graph *opt;
    ljg_program *p;
    for (int i = 0; i < 2; i++) {
      layer_norm_grads(shapes[i][0], shapes[i][1], grads);
      p = program_of_n(3, grads, &opt);
      ck_assert_int_eq(p->nkernels, 2);
      ck_assert_int_eq(p->kernels[0].ntasks, 64);
      ck_assert_int_eq(p->kernels[0].task_rows, shapes[i][2]);
      ck_assert_int_eq(p->kernels[0].row_block, shapes[i][3]);
      ck_assert_int_eq(p->kernels[1].task_rows, 0);
      int at = p->kernels[0].per_task_at;
      ck_assert_int_eq(p->kernels[0].nnests, at + 2);
      char *lowering = ljc_lowering_text(p, NULL), want[2][96];
      for (int s = 0; s < 2; s++) {
        snprintf(want[s], sizeof want[s], "nest %d adds up each block's rows after the nests before %d", at + s, at);
        ck_assert_msg(strstr(lowering, want[s]), "%s", lowering);
      }
      free(lowering);
      free_program(p, opt);
      tu_check_interp_tol(3, grads, 1e-4, 1e-4);
    }
    lj_tensor *other[2] = {lj_softmax(tu_tensor(LJ_F32, LJ_SHAPE(4096, 256), TU_ANY, 11), 1),
                           lj_sum(tu_tensor(LJ_F32, LJ_SHAPE(4096, 256), TU_UNIT, 12), 1, (const int[]){0}, false)};
    p = program_of_n(2, other, &opt);
    ck_assert_int_eq(p->nkernels, 3);
    ck_assert_int_eq(p->kernels[0].task_rows, 0);
    free_program(p, opt);
    lj_scope_end();
    lj_shutdown();
  }
}
END_TEST

/* A kernel of column sums (fuse_rows.c's column_sums) goes in blocks of at least 64 of its
 * rows, the columns it sums, or all of them where there are fewer: a layer norm's weight and
 * bias gradients over [500, 333] (too few rows for two stages; blocks of 64, the last of 13),
 * the sums of x and x·y over [700, 100] (64 and 36) and over [40, 20] (one block of 20).
 * Values against the interpreter on one and two threads. */
START_TEST(test_column_sums_blocks) {
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    lj_scope_begin();
    lj_tensor *grads[3];
    layer_norm_grads(500, 333, grads);
    ljg_graph *opt;
    ljg_program *p = program_of_n(3, grads, &opt);
    ck_assert_int_eq(p->nkernels, 2);
    ck_assert_int_eq(p->kernels[1].ntasks, 333);
    ck_assert_int_eq(p->kernels[1].row_block, 64);
    free_program(p, opt);
    tu_check_interp_tol(3, grads, 1e-4, 1e-4);
    static const int64_t shapes[2][3] = {{700, 100, 64}, {40, 20, 20}}; /* rows, cols, block */
    for (int i = 0; i < 2; i++) {
      lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(shapes[i][0], shapes[i][1]), TU_ANY, 21 + i);
      lj_tensor *y = tu_tensor(LJ_F32, LJ_SHAPE(shapes[i][0], shapes[i][1]), TU_ANY, 23 + i);
      const int dim0[] = {0};
      lj_tensor *sums[2] = {lj_sum(x, 1, dim0, false), lj_sum(lj_mul(x, y), 1, dim0, false)};
      p = program_of_n(2, sums, &opt);
      ck_assert_int_eq(p->nkernels, 1);
      ck_assert_int_eq(p->kernels[0].nnests, 2);
      ck_assert_int_eq(p->kernels[0].row_block, shapes[i][2]);
      free_program(p, opt);
      tu_check_interp_tol(2, sums, 1e-5, 1e-3); /* sums of 700 products of [-4, 4)s */
    }
    lj_scope_end();
    lj_shutdown();
  }
}
END_TEST

/* A group norm written as a layer norm over [N, G, C/G·H·W] with a per-channel affine
 * (torch.nn.functional.group_norm), forward and the gradients of its input, weight and bias:
 * the per-channel weight read through the groups' reshape loops over [N, G, C/G, H·W]
 * (fuse.c's drop_reshape_level), so the group's rows join one kernel with the statistics and
 * the input's gradient, and the weight's and bias's sums another (2 kernels). Against the
 * interpreter on one and two threads. */
START_TEST(test_group_norm_rows) {
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    lj_scope_begin();
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(4, 12, 9, 7), TU_ANY, 21);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(1, 12, 1, 1), TU_ANY, 22), *b = tu_tensor(LJ_F32, LJ_SHAPE(1, 12, 1, 1), TU_ANY, 23);
    lj_tensor *g = tu_tensor(LJ_F32, LJ_SHAPE(4, 12, 9, 7), TU_ANY, 24);
    lj_tensor_set_requires_grad(x, true);
    lj_tensor_set_requires_grad(w, true);
    lj_tensor_set_requires_grad(b, true);
    lj_tensor *y = lj_layer_norm(lj_reshape(x, LJ_SHAPE(4, 3, 4 * 9 * 7)), 1, NULL, NULL, 1e-5);
    y = lj_add(lj_mul(lj_reshape(y, LJ_SHAPE(4, 12, 9, 7)), w), b);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
    lj_tensor *outs[4] = {y, lj_tensor_grad(x), lj_tensor_grad(w), lj_tensor_grad(b)};
    ck_assert_int_eq(lj_graph_kernel_count(4, outs), 2);
    tu_check_interp_tol(4, outs, 1e-4, 1e-4);
    lj_scope_end();
    lj_shutdown();
  }
}
END_TEST

/* How many TEMP slots of p take at least `bytes`. */
static int temps_of(const ljg_program *p, int64_t bytes) {
  int n = 0;
  for (int s = 0; s < p->nslots; s++) n += p->slots[s].kind == LJG_SLOT_TEMP && p->slots[s].nbytes >= bytes;
  return n;
}

/* A cheap elementwise node used by several kernels is computed again in each instead of
 * stored: batch norm's forward and backward over [8, 16, 20, 20] keep no intermediate of the
 * input's size (the input's gradient before its mean, which reads two such tensors, stayed
 * one until its sum was taken apart: pass_simplify.c's sum_of_scaled), where storing every
 * such node used twice kept four. An exp used by two kernels is stored: a column sum of
 * exp(x) and exp(x)·2. Values against the interpreter. */
START_TEST(test_recompute_cheap_nodes) {
  lj_scope_begin();
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(8, 16, 20, 20), TU_UNIT, 12);
  lj_tensor *g = tu_tensor(LJ_F32, LJ_SHAPE(8, 16, 20, 20), TU_UNIT, 13);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(16), TU_UNIT, 14);
  lj_tensor_set_requires_grad(x, true);
  lj_tensor_set_requires_grad(w, true);
  lj_tensor *y = lj_batch_norm(x, NULL, NULL, w, NULL, true, 0.1, 1e-5);
  ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
  lj_tensor *outs[3] = {y, lj_tensor_grad(x), lj_tensor_grad(w)};
  ljg_graph *opt;
  ljg_program *p = program_of_n(3, outs, &opt);
  ck_assert_int_eq(temps_of(p, 8 * 16 * 20 * 20 * 4), 0);
  free_program(p, opt);
  tu_check_interp_tol(3, outs, 1e-4, 1e-4);
  lj_tensor *e = lj_exp(tu_tensor(LJ_F32, LJ_SHAPE(300, 70), TU_UNIT, 15));
  lj_tensor *two[2] = {lj_sum(e, 1, (const int[]){0}, false), lj_mul_scalar(e, 2)};
  p = program_of_n(2, two, &opt);
  ck_assert_int_eq(temps_of(p, 300 * 70 * 4), 1);
  free_program(p, opt);
  tu_check_interp(2, two, 1e-5);
  lj_scope_end();
}
END_TEST

/* The reductions of the optimized graph whose operand has numel elements. */
static int reductions_over(const ljg_graph *g, int64_t numel) {
  int n = 0;
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *v = &g->nodes[i];
    n += (v->op == LJG_OP_SUM || v->op == LJG_OP_MEAN) && ljg_gnumel(&g->nodes[ljg_in(g, v)[0]]) == numel;
  }
  return n;
}

/* A batch norm's backward sums dY·(x - mean) once: its weight's gradient, sum(dY·x̂) with x̂ =
 * (x - mean)·rstd, and its input gradient's sum(dY·w·(x - mean)) are that sum times per-channel
 * factors (pass_simplify.c's sum_of_scaled takes their products apart). Five reductions of the
 * input's size in all: the forward's mean and variance, then sum(dY), sum(dY·(x - mean)) and
 * sum(x - mean), where the weight's gradient made a sixth, read in a kernel of its own. Values
 * against the interpreter. */
START_TEST(test_batch_norm_shares_sums) {
  lj_scope_begin();
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(8, 16, 20, 20), TU_UNIT, 16);
  lj_tensor *g = tu_tensor(LJ_F32, LJ_SHAPE(8, 16, 20, 20), TU_UNIT, 17);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(16), TU_UNIT, 18), *b = tu_tensor(LJ_F32, LJ_SHAPE(16), TU_UNIT, 19);
  lj_tensor *params[3] = {x, w, b};
  for (int i = 0; i < 3; i++) lj_tensor_set_requires_grad(params[i], true);
  lj_tensor *y = lj_batch_norm(x, NULL, NULL, w, b, true, 0.1, 1e-5);
  ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
  lj_tensor *outs[4] = {y, lj_tensor_grad(x), lj_tensor_grad(w), lj_tensor_grad(b)};
  ljg_graph *opt;
  ljg_program *p = program_of_n(4, outs, &opt);
  ck_assert_int_eq(reductions_over(opt, 8 * 16 * 20 * 20), 5);
  free_program(p, opt);
  tu_check_interp_tol(4, outs, 1e-4, 1e-4);
  lj_scope_end();
}
END_TEST

/* A depthwise convolution's weight gradient, a sum of its windows times dY over images and
 * positions, is summed per (image, channel) plane first: that stage joins the kernel that
 * cuts the planes' windows, which stay on its stack; no temp is as large as the windows
 * (4.7 MB for 8 channels of 64×64 at batch 4). Values and gradients against the interpreter
 * on one and two threads. */
START_TEST(test_window_sums_by_plane) {
  for (int threads = 1; threads <= 2; threads++) {
    init_threads(threads);
    lj_scope_begin();
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(4, 8, 64, 64), TU_UNIT, 20);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(8, 1, 3, 3), TU_UNIT, 21);
    lj_tensor *g = tu_tensor(LJ_F32, LJ_SHAPE(4, 8, 64, 64), TU_UNIT, 22);
    lj_tensor_set_requires_grad(x, true);
    lj_tensor_set_requires_grad(w, true);
    lj_tensor *y = lj_conv2d(x, w, NULL, NULL, (const int[]){1, 1}, NULL, 8);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
    lj_tensor *outs[3] = {y, lj_tensor_grad(x), lj_tensor_grad(w)};
    ljg_graph *opt;
    ljg_program *p = program_of_n(3, outs, &opt);
    ck_assert_int_eq(temps_of(p, 4 * 8 * 9 * 64 * 64 * 4), 0);
    free_program(p, opt);
    /* the weight gradient's sums of 16384 products of values up to 1 */
    tu_check_interp_tol(3, outs, 1e-4, 1e-3);
    lj_scope_end();
    lj_shutdown();
  }
}
END_TEST

/* A 1×1 convolution over small images is one product of the weight [O, C] and the images
 * side by side [C, N·P]; its output [N, O, P], C permuted (and biased, relu'd), is written by
 * the product's kernel as the epilogue of C's rows: two kernels (the images copied side by
 * side, the product), not three; so is a batched product's C, permuted with its rows [B, M]
 * inside the output's dims. A product of few rows (whose columns the threads may split) keeps
 * its copy apart. Values against the interpreter, f32 and bf16, with a bias and relu and
 * without, on one and two threads (rows split across them). */
START_TEST(test_permuted_epilogue) {
  static const lj_dtype dts[] = {LJ_F32, LJ_BF16};
  for (int threads = 1; threads <= 2; threads++) {
    init_threads(threads);
    for (int i = 0; i < 4; i++) {
      lj_scope_begin();
      lj_dtype dt = dts[i / 2];
      lj_tensor *x = lj_cast(tu_tensor(LJ_F32, LJ_SHAPE(5, 24, 7, 7), TU_UNIT, 40), dt);
      lj_tensor *w = lj_cast(tu_tensor(LJ_F32, LJ_SHAPE(300, 24, 1, 1), TU_UNIT, 41), dt);
      lj_tensor *b = lj_cast(tu_tensor(LJ_F32, LJ_SHAPE(300), TU_UNIT, 42), dt);
      ck_assert_int_eq(lj_sync_tensors(3, (lj_tensor *[]){x, w, b}), LJ_OK);
      lj_tensor *y = i % 2 ? lj_relu(lj_conv2d(x, w, b, NULL, NULL, NULL, 1))
                           : lj_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
      ljg_graph *opt;
      ljg_program *p = program_of(y, &opt);
      ck_assert_int_eq(p->nkernels, 2);
      const ljg_kernel *k = &p->kernels[1];
      ck_assert_int_eq(k->kind, LJG_K_MATMUL);
      const ljg_nest *n = &k->nests[k->nnests - 1]; /* C's rows first: [O, N, P] */
      ck_assert(n->ndim == 3 && n->shape[0] == 300 && n->shape[1] == 5 && n->shape[2] == 49 && n->row_dims == 1);
      free_program(p, opt);
      tu_check_interp_tol(1, &y, dt == LJ_BF16 ? 1e-2 : 1e-5, dt == LJ_BF16 ? 1e-2 : 1e-5);
      lj_scope_end();
    }
    /* a batched product's rows, [B, M], two dims of the permuted output's: [P, B, M, Q] */
    lj_scope_begin();
    lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(2, 150, 24), TU_UNIT, 43);
    lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(2, 24, 245), TU_UNIT, 44);
    lj_tensor *c = lj_reshape(lj_matmul(a, b), LJ_SHAPE(2, 150, 5, 49));
    lj_tensor *per_b = tu_tensor(LJ_F32, LJ_SHAPE(1, 2, 1, 1), TU_UNIT, 45); /* keeps B and M apart */
    lj_tensor *y = lj_relu(lj_add(lj_permute(c, 4, (const int[]){2, 0, 1, 3}), per_b));
    ljg_graph *opt;
    ljg_program *p = program_of(y, &opt);
    ck_assert_int_eq(p->nkernels, 1);
    const ljg_nest *n = &p->kernels[0].nests[0];
    ck_assert(n->ndim == 4 && n->shape[0] == 2 && n->shape[1] == 150 && n->shape[2] == 5 && n->row_dims == 2);
    ck_assert_int_eq(p->kernels[0].ntasks, 300);
    free_program(p, opt);
    tu_check_interp_tol(1, &y, 1e-5, 1e-5);
    /* a product of few rows, whose columns may be split between threads, keeps its copy apart */
    lj_tensor *few = lj_conv2d(tu_tensor(LJ_F32, LJ_SHAPE(5, 24, 7, 7), TU_UNIT, 46),
                               tu_tensor(LJ_F32, LJ_SHAPE(70, 24, 1, 1), TU_UNIT, 47), NULL, NULL, NULL, NULL, 1);
    p = program_of(few, &opt);
    ck_assert_int_eq(p->nkernels, 3);
    free_program(p, opt);
    tu_check_interp_tol(1, &few, 1e-5, 1e-5);
    lj_scope_end();
    lj_shutdown();
  }
}
END_TEST

/* What row-fused kernels without a product write, read by the next kernel with their rows
 * among its later dims, is stored that way by them as each row is computed instead of being
 * copied by a kernel of its own: a depthwise convolution's output [N, C, P] that the 1×1
 * convolution after it reads as [C, N·P] (MobileNetV2's block: the window kernel's rows, the
 * N·C planes, become the two leading dims of its store, N first); a batch norm's output
 * [N, C, P], stored by channel as the channel's statistics are computed. A transposed copy,
 * whose rows would take its last dim (a store of single elements along the rows), stays a
 * kernel of its own. Values against the interpreter on one and two threads. */
START_TEST(test_permuted_rows_store) {
  for (int threads = 1; threads <= 2; threads++) {
    init_threads(threads);
    lj_scope_begin();
    const int pad[2] = {1, 1};
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(5, 24, 7, 7), TU_UNIT, 50);
    lj_tensor *dw = tu_tensor(LJ_F32, LJ_SHAPE(24, 1, 3, 3), TU_UNIT, 51);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(300, 24, 1, 1), TU_UNIT, 52);
    lj_tensor *y = lj_conv2d(lj_relu(lj_conv2d(x, dw, NULL, NULL, pad, NULL, 24)), w, NULL, NULL, NULL, NULL, 1);
    ljg_graph *opt;
    ljg_program *p = program_of(y, &opt);
    ck_assert_int_eq(p->nkernels, 2);
    const ljg_kernel *k = &p->kernels[0];
    ck_assert_int_eq(k->kind, LJG_K_WINDOW);
    const ljg_nest *n = &k->nests[k->nnests - 1];
    const ljg_view1 *out = ljg_view_top(&k->views[n->out_view]);
    ck_assert(n->ndim == 3 && n->shape[0] == 5 && n->shape[1] == 24 && n->shape[2] == 49 && n->row_dims == 2);
    ck_assert(out->stride[0] == 49 && out->stride[1] == 5 * 49 && out->stride[2] == 1);
    free_program(p, opt);
    tu_check_interp_tol(1, &y, 1e-5, 1e-5);

    lj_tensor *z = tu_tensor(LJ_F32, LJ_SHAPE(4, 8, 6, 6), TU_UNIT, 53);
    lj_tensor *bw = tu_tensor(LJ_F32, LJ_SHAPE(8), TU_UNIT, 54), *bb = tu_tensor(LJ_F32, LJ_SHAPE(8), TU_UNIT, 55);
    lj_tensor *bn = lj_relu(lj_batch_norm(z, NULL, NULL, bw, bb, true, 0.1, 1e-5));
    p = program_of(bn, &opt);
    ck_assert_int_eq(p->nkernels, 1);
    n = &p->kernels[0].nests[p->kernels[0].nnests - 1];
    ck_assert(n->ndim == 3 && n->shape[0] == 8 && n->shape[1] == 4 && n->shape[2] == 36 && n->row_dims == 1);
    free_program(p, opt);
    tu_check_interp_tol(1, &bn, 1e-5, 1e-5);

    lj_tensor *t = lj_transpose(lj_softmax(tu_tensor(LJ_F32, LJ_SHAPE(64, 48), TU_UNIT, 56), 1), 0, 1);
    ck_assert_int_eq(lj_graph_kernel_count(1, &t), 2);
    tu_check_interp_tol(1, &t, 1e-6, 1e-6);
    lj_scope_end();
    lj_shutdown();
  }
}
END_TEST

/* The LOOPS kernels of p that load from a slot of at least `bytes`. */
static int loops_reading(const ljg_program *p, int64_t bytes) {
  int n = 0;
  for (int ki = 0; ki < p->nkernels; ki++) {
    const ljg_kernel *k = &p->kernels[ki];
    bool reads = false;
    for (int e = 0; k->kind == LJG_K_LOOPS && e < k->nexprs; e++)
      reads |= k->exprs[e].kind == LJG_X_LOAD && p->slots[k->exprs[e].slot].nbytes >= bytes;
    n += reads;
  }
  return n;
}

/* The sums of the optimized graph from numel elements to `to`. */
static int sums_to(const ljg_graph *g, int64_t numel, int64_t to) {
  int n = 0;
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *v = &g->nodes[i];
    n += v->op == LJG_OP_SUM && ljg_gnumel(&g->nodes[ljg_in(g, v)[0]]) == numel && ljg_gnumel(v) == to;
  }
  return n;
}

/* A convolution's bias gradient, Σ of dY over images and positions, where dY is multiplied
 * with each image's windows for the weight gradient (a depthwise convolution's, a grouped
 * one's per image), is summed per (image, channel) plane first, in the kernel that computes
 * dY, and then over the images: no kernel of its own reads dY back. A dense convolution's,
 * whose weight gradient is one product summed over the images, stays one sum, which that
 * product's routine takes (it sums dY as it reads it). Values and gradients against the
 * interpreter on one and two threads. */
START_TEST(test_bias_gradient_by_plane) {
  static const int64_t shapes[][3] = {{8, 8, 8} /* depthwise */, {8, 8, 2} /* groups of 4 */, {1, 8, 1}};
  for (int threads = 1; threads <= 2; threads++) {
    init_threads(threads);
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
      lj_scope_begin();
      int64_t C = shapes[i][0], O = shapes[i][1], G = shapes[i][2], dy = 4 * O * 24 * 20;
      lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(4, C, 24, 20), TU_UNIT, 30);
      lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(O, C / G, 3, 3), TU_UNIT, 31);
      lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(O), TU_UNIT, 32);
      lj_tensor *g = tu_tensor(LJ_F32, LJ_SHAPE(4, O, 24, 20), TU_UNIT, 33);
      lj_tensor *params[3] = {x, w, b};
      for (int j = 0; j < 3; j++) lj_tensor_set_requires_grad(params[j], true);
      lj_tensor *y = lj_relu(lj_conv2d(x, w, b, NULL, (const int[]){1, 1}, NULL, (int)G));
      ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
      lj_tensor *outs[4] = {y, lj_tensor_grad(x), lj_tensor_grad(w), lj_tensor_grad(b)};
      ljg_graph *opt;
      ljg_program *p = program_of_n(4, outs, &opt);
      bool dense = G == 1;
      ck_assert_int_eq(sums_to(opt, dy, 4 * O), !dense);
      ck_assert_int_eq(sums_to(opt, dy, O), dense);
      if (!dense) ck_assert_msg(loops_reading(p, dy * 4) == 0, "case %zu: a kernel reads dY back", i);
      free_program(p, opt);
      tu_check_interp_tol(4, outs, 1e-4, 1e-4);
      lj_scope_end();
    }
    lj_shutdown();
  }
}
END_TEST

/* Whether the lowering runs a nest of p's with its reduced dims outside its last kept one. */
static bool in_column_order(const ljg_program *p) {
  char *lowering = ljc_lowering_text(p, NULL);
  bool found = strstr(lowering, "runs its reduced dims outside its last kept one") != NULL;
  free(lowering);
  return found;
}

/* A sum over a leading dim reads its values along the kept dim: column order, also where the
 * kept dim's stride is 2 (every other column; plain, each column's sum read a value a line:
 * 1.1 -> 0.27 ms over [512, 1024] of [512, 2048] on one thread). A sum over
 * each channel's values of (x - mean)·w + b reads x along the reduced dims and the channel's
 * mean, w and b once per channel: the plain order, however many such values it reads (they
 * outvoted x, and the loop gathered x across channels, 30× slower on batch norm's gradient).
 * Values against the interpreter. */
START_TEST(test_column_order) {
  lj_scope_begin();
  lj_tensor *c = lj_sum(tu_tensor(LJ_F32, LJ_SHAPE(300, 70), TU_UNIT, 16), 1, (const int[]){0}, false);
  ljg_graph *opt;
  ljg_program *p = program_of(c, &opt);
  ck_assert(in_column_order(p));
  free_program(p, opt);
  tu_check_interp(1, &c, 1e-5);
  lj_tensor *every_other = lj_slice(tu_tensor(LJ_F32, LJ_SHAPE(300, 140), TU_UNIT, 20), 1, 0, 140, 2);
  c = lj_sum(every_other, 1, (const int[]){0}, false);
  p = program_of(c, &opt);
  ck_assert(in_column_order(p));
  free_program(p, opt);
  tu_check_interp(1, &c, 1e-5);
  static const int dims[3] = {0, 2, 3};
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(8, 16, 20, 20), TU_UNIT, 17);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(1, 16, 1, 1), TU_UNIT, 18);
  lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(1, 16, 1, 1), TU_UNIT, 19);
  lj_tensor *m = lj_mean(x, 3, dims, true);
  lj_tensor *s = lj_sum(lj_add(lj_mul(lj_sub(x, m), w), b), 3, dims, false);
  p = program_of(s, &opt);
  ck_assert(!in_column_order(p));
  free_program(p, opt);
  tu_check_interp_tol(1, &s, 1e-4, 1e-4);
  lj_scope_end();
}
END_TEST

/* Elementwise consumers of a matmul that read C only at their own row become its epilogue:
 * the kernel computes a block of rows of C, then runs the consumers on those rows. C lives on
 * the kernel's stack when only the epilogue reads it and a block of it fits (up to half of L2
 * where 48 rows of it would not fit L1), else in scratch memory (longer rows, or C also an
 * output). A consumer that reads other rows of C (through a
 * transpose) stays a kernel of its own. Values against the interpreter, rows split across
 * threads: batched, with a bias broadcast along each matrix's rows (the epilogue's rows span
 * two dims), f32 and f64; an integer matmul (the scalar loops) too. */
START_TEST(test_matmul_epilogue) {
  static const lj_dtype dts[] = {LJ_F32, LJ_F64};
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
    lj_tensor *a = tu_tensor(dts[i], LJ_SHAPE(3, 37, 50), TU_ANY, 1);
    lj_tensor *w = tu_tensor(dts[i], LJ_SHAPE(50, 45), TU_ANY, 2);
    lj_tensor *bias = tu_tensor(dts[i], LJ_SHAPE(37, 1), TU_ANY, 3);
    lj_tensor *y = lj_relu(lj_add(lj_matmul(a, w), bias));
    ljg_graph *opt;
    ljg_program *p = program_of(y, &opt);
    ck_assert_int_eq(p->nkernels, 1);
    ck_assert_int_eq(p->kernels[0].kind, LJG_K_MATMUL);
    ck_assert_int_eq(p->kernels[0].nests[0].row_dims, 2);
    ck_assert_int_eq(local_slots(p), 1);
    ck_assert_int_eq(p->scratch_bytes, 0);
    free_program(p, opt);
    /* sums of 50 products of values up to a few units: f32 rounding in another order (or
     * without fused multiply-adds) moves one by up to ~1e-4 */
    tu_check_interp_tol(1, &y, dts[i] == LJ_F32 ? 1e-5 : 1e-12, dts[i] == LJ_F32 ? 1e-4 : 1e-12);
    lj_tensor_release(a);
    lj_tensor_release(w);
    lj_tensor_release(bias);
  }
  /* rows of 600 f32, a B per matrix: 48 rows of C (115 KB) do not fit 64 KiB, so a block
   * takes whole matrices up to 512 KiB of C (both matrices of 65 rows here), or equal parts of
   * one (two halves of a matrix of 300 rows), C on the stack; rows of 3000, the fewest rows
   * a block takes (48: 576 KB) past 512 KiB: C in scratch */
  static const int64_t brows[3] = {65, 300, 65}, bcols[3] = {600, 600, 3000}, bblock[3] = {130, 150, 48};
  lj_tensor *bias = tu_tensor(LJ_F32, LJ_SHAPE(600), TU_ANY, 6);
  for (int i = 0; i < 3; i++) {
    lj_tensor *ba = tu_tensor(LJ_F32, LJ_SHAPE(2, brows[i], 40), TU_ANY, 11);
    lj_tensor *bw = tu_tensor(LJ_F32, LJ_SHAPE(2, 40, bcols[i]), TU_ANY, 12);
    lj_tensor *by = lj_tanh(lj_add_scalar(lj_matmul(ba, bw), 0.5));
    ljg_graph *opt;
    ljg_program *p = program_of(by, &opt);
    ck_assert_int_eq(p->nkernels, 1);
    ck_assert_int_eq(p->kernels[0].row_block, bblock[i]);
    ck_assert_int_eq(local_slots(p), i < 2);
    ck_assert_int_ge(p->scratch_bytes, i < 2 ? 0 : 2 * brows[i] * bcols[i] * 4);
    if (i < 2) ck_assert_int_eq(p->scratch_bytes, 0);
    free_program(p, opt);
    tu_check_interp_tol(1, &by, 1e-5, 1e-4); /* k = 40, as above */
    lj_tensor_release(ba), lj_tensor_release(bw);
  }
  ljg_graph *opt;
  ljg_program *p;
  /* rows of 784, B read in place (k = 10): 20 rows would fit, blocks of 16 (a quarter of each
   * matrix) instead of blocks straddling two */
  lj_tensor *qa = tu_tensor(LJ_F32, LJ_SHAPE(2, 64, 10), TU_ANY, 13), *qw = tu_tensor(LJ_F32, LJ_SHAPE(2, 10, 784), TU_ANY, 14);
  lj_tensor *qbias = tu_tensor(LJ_F32, LJ_SHAPE(64, 1), TU_ANY, 15);
  lj_tensor *qy = lj_relu(lj_add(lj_matmul(qa, qw), qbias));
  p = program_of(qy, &opt);
  ck_assert_int_eq(p->nkernels, 1);
  ck_assert_int_eq(p->kernels[0].row_block, 16);
  free_program(p, opt);
  tu_check_interp_tol(1, &qy, 1e-5, 1e-4);
  lj_tensor_release(qa), lj_tensor_release(qw), lj_tensor_release(qbias), lj_tensor_release(qy);
  /* one B for all rows (a linear layer's weight): one block, B packed once per thread */
  lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(130, 40), TU_ANY, 4), *w = tu_tensor(LJ_F32, LJ_SHAPE(40, 600), TU_ANY, 5);
  lj_tensor *c = lj_matmul(a, w), *y = lj_tanh(lj_add(c, bias));
  p = program_of(y, &opt);
  ck_assert_int_eq(p->nkernels, 1);
  ck_assert_int_eq(p->kernels[0].row_block, 130);
  free_program(p, opt);
  /* a transposed weight over a K of a few: packed all the same (by transposes), so one block */
  lj_tensor *xa = tu_tensor(LJ_F32, LJ_SHAPE(300, 3), TU_ANY, 16);
  lj_tensor *wt = tu_tensor(LJ_F32, LJ_SHAPE(600, 3), TU_ANY, 17);
  lj_tensor *ty = lj_relu(lj_add(lj_matmul(xa, lj_transpose(wt, 0, 1)), bias));
  p = program_of(ty, &opt);
  ck_assert_int_eq(p->nkernels, 1);
  ck_assert_int_eq(p->kernels[0].row_block, 300);
  free_program(p, opt);
  tu_check_interp_tol(1, &ty, 1e-5, 1e-5);
  lj_tensor_release(xa), lj_tensor_release(wt), lj_tensor_release(ty);
  /* C is an output too: still one kernel */
  lj_tensor *both[2] = {c, y};
  ck_assert_int_eq(lj_graph_kernel_count(2, both), 1);
  tu_check_interp_tol(2, both, 1e-5, 1e-4);
  /* a transpose reads other rows: two kernels */
  lj_tensor *sq = lj_matmul(tu_tensor(LJ_F32, LJ_SHAPE(33, 20), TU_ANY, 7), tu_tensor(LJ_F32, LJ_SHAPE(20, 33), TU_ANY, 8));
  lj_tensor *across = lj_add(sq, lj_transpose(sq, 0, 1));
  ck_assert_int_eq(lj_graph_kernel_count(1, &across), 2);
  tu_check_interp_tol(1, &across, 1e-5, 1e-4);
  /* integers: the scalar loops, C on the stack */
  lj_tensor *ia = tu_tensor(LJ_I32, LJ_SHAPE(2, 9, 7), TU_ANY, 9), *ib = tu_tensor(LJ_I32, LJ_SHAPE(7, 5), TU_ANY, 10);
  lj_tensor *iy = lj_mul_scalar(lj_matmul(ia, ib), 3);
  p = program_of(iy, &opt);
  ck_assert_int_eq(p->nkernels, 1);
  ck_assert_int_eq(local_slots(p), 1);
  free_program(p, opt);
  tu_check1(iy, 0);
}
END_TEST

/* A matmul of few rows with nothing fused into it splits its columns between threads: its
 * tasks are blocks of LJG_MATMUL_COL_TASK columns (a matrix-vector product is one row, one
 * task split by rows). Values against the interpreter: one row and a few, columns past a
 * whole block, a batch of matrices with one B and with a B each, a transposed B, f32 and f64,
 * on one thread and on two (the products of a million multiplies or more split between them).
 * Rows past the limit, a fused consumer, or fewer blocks of columns than rows (and than 16)
 * keep the rows' tasks. */
START_TEST(test_matmul_column_tasks) {
  struct {
    lj_dtype dt;
    int64_t batch, m, k, n;
    bool transposed, batched_b;
  } cases[] = {
      {LJ_F32, 1, 1, 300, 200, false, false},  {LJ_F32, 1, 7, 400, 517, true, false},
      {LJ_F64, 1, 3, 19, 130, false, false},   {LJ_F64, 1, 5, 300, 1000, false, false},
      {LJ_F32, 4, 5, 33, 1100, false, false},  {LJ_F32, 2, 9, 200, 1030, false, true},
      {LJ_F32, 1, 64, 16, 1024, false, false}, {LJ_F32, 1, 2, 1000, 700, false, false},
  };
  enum { NCASES = sizeof cases / sizeof *cases };
  for (int threads = 1; threads <= 2; threads++) {
    lj_shutdown();
    tu_init_threads(threads);
    lj_tensor *ys[NCASES];
    for (int i = 0; i < NCASES; i++) {
      lj_dtype dt = cases[i].dt;
      int64_t B = cases[i].batch, M = cases[i].m, K = cases[i].k, N = cases[i].n;
      lj_tensor *a = B > 1 ? tu_tensor(dt, LJ_SHAPE(B, M, K), TU_ANY, 60 + (uint64_t)i)
                           : tu_tensor(dt, LJ_SHAPE(M, K), TU_ANY, 60 + (uint64_t)i);
      lj_tensor *w = cases[i].batched_b ? tu_tensor(dt, LJ_SHAPE(B, K, N), TU_ANY, 70 + (uint64_t)i)
                     : cases[i].transposed ? tu_tensor(dt, LJ_SHAPE(N, K), TU_ANY, 70 + (uint64_t)i)
                                           : tu_tensor(dt, LJ_SHAPE(K, N), TU_ANY, 70 + (uint64_t)i);
      lj_tensor *b = cases[i].transposed ? lj_transpose(w, 0, 1) : lj_tensor_retain(w);
      ys[i] = lj_matmul(a, b);
      ljg_graph *opt;
      ljg_program *p = program_of(ys[i], &opt);
      ck_assert_int_eq(p->nkernels, 1);
      ck_assert_int_eq(p->kernels[0].mm_col_tasks, LJG_MATMUL_COL_TASK);
      ck_assert_int_eq(p->kernels[0].ntasks, (N + LJG_MATMUL_COL_TASK - 1) / LJG_MATMUL_COL_TASK);
      free_program(p, opt);
      lj_tensor_release(a);
      lj_tensor_release(w);
      lj_tensor_release(b);
    }
    tu_check_interp_tol(NCASES, ys, 1e-5, 1e-3); /* f32 sums of up to 1000 products, in blocks of k */
    for (int i = 0; i < NCASES; i++) lj_tensor_release(ys[i]);
  }
  /* 65 rows, 40 rows of 5 blocks of columns (fewer tasks than the rows give), and 2 rows
   * less their first column, which the first task's columns hold: tasks of rows */
  lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(65, 30), TU_ANY, 80), *w = tu_tensor(LJ_F32, LJ_SHAPE(30, 300), TU_ANY, 81);
  lj_tensor *small = tu_tensor(LJ_F32, LJ_SHAPE(2, 30), TU_ANY, 82), *mid = tu_tensor(LJ_F32, LJ_SHAPE(40, 30), TU_ANY, 83);
  lj_tensor *c = lj_matmul(small, w);
  lj_tensor *first = lj_sub(c, lj_slice(c, 1, 0, 1, 1));
  lj_tensor_release(c);
  lj_tensor *ys[3] = {lj_matmul(a, w), first, lj_matmul(mid, w)};
  static const int64_t row_tasks[3] = {65, 2, 40};
  for (int i = 0; i < 3; i++) {
    ljg_graph *opt;
    ljg_program *p = program_of(ys[i], &opt);
    ck_assert_int_eq(p->nkernels, 1);
    ck_assert_int_eq(p->kernels[0].mm_col_tasks, 0);
    ck_assert_int_eq(p->kernels[0].ntasks, row_tasks[i]);
    free_program(p, opt);
  }
  tu_check_interp_tol(3, ys, 1e-5, 1e-4);
  lj_tensor *all[] = {a, w, small, mid, ys[0], ys[1], ys[2]};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) lj_tensor_release(all[i]);
}
END_TEST

/* A matmul of few rows with nests fused in splits its columns too: a task computes its
 * columns of every row, then runs the nests elementwise over C on those columns (a linear
 * layer's bias and tanh; the SGD step after a weight's gradient), and the first task runs the
 * nests over other points whole (a loss's one-hot over the same rows, joined past the
 * kernels between). A bias and relu the routine computes itself, no nest runs on the
 * columns. Values against the interpreter, one and two threads. */
START_TEST(test_matmul_column_tasks_with_nests) {
  for (int threads = 1; threads <= 2; threads++)
    for (int relu = 0; relu < 2; relu++) {
      lj_shutdown();
      tu_init_threads(threads);
      lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(5, 400), TU_ANY, 90);
      lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(600, 400), TU_ANY, 91);
      lj_tensor *bias = tu_tensor(LJ_F32, LJ_SHAPE(600), TU_ANY, 92);
      lj_tensor *z = tu_tensor(LJ_F32, LJ_SHAPE(5, 10), TU_ANY, 93);
      lj_tensor *h = relu ? lj_relu(lj_linear(x, w, bias)) : lj_tanh(lj_linear(x, w, bias));
      lj_tensor *ez = lj_exp(z);
      lj_tensor *s = lj_sum(ez, 1, (const int[]){1}, true);
      lj_tensor *outs[2] = {h, s};
      ljg_graph *opt;
      ljg_program *p = program_of_n(2, outs, &opt);
      ck_assert_int_eq(p->nkernels, 1);
      ck_assert_int_eq(p->kernels[0].mm_col_tasks, LJG_MATMUL_COL_TASK);
      ck_assert_int_eq(p->kernels[0].ntasks, 10);
      char *lowering = ljc_lowering_text(p, NULL);
      bool on_columns = strstr(lowering, "nest 0 runs on a task's columns of every row") != NULL;
      ck_assert_msg(on_columns == !relu, "%s", lowering);
      ck_assert_msg(!relu || strstr(lowering, "nest 0 not run: the routine starts C's rows from its bias and stores their "
                                              "relu; nest 1 runs whole in the first task") != NULL, "%s", lowering);
      ck_assert_msg(strstr(lowering, "whole in the first task") != NULL, "%s", lowering);
      free(lowering);
      free_program(p, opt);
      tu_check_interp_tol(2, outs, 1e-5, 1e-4);
      lj_tensor *all[] = {x, w, bias, z, h, ez, s};
      for (size_t i = 0; i < sizeof all / sizeof *all; i++) lj_tensor_release(all[i]);
    }
}
END_TEST

/* A matmul summed over its batch (a weight's gradient when the weight was expanded over the
 * batch) is one kernel that sums the products as it computes them: no product is stored per
 * matrix. It is turned, (Σ Bᵀ·Aᵀ)ᵀ, when that packs less (a convolution's weight gradient
 * dY·colsᵀ per image, where the rows become the taps) or wastes fewer lanes (a product of 9
 * columns). Values against the interpreter with
 * rows split across threads: f32 turned (its transposed result copied out), f64 over two
 * blocks of k with a partial panel and an epilogue, i64 through the scalar loops with B
 * contiguous along n and along k. A matmul used elsewhere too keeps its sum. */
START_TEST(test_matmul_batch_sum) {
  static const int batch[1] = {0};
  lj_tensor *dy = tu_tensor(LJ_F32, LJ_SHAPE(6, 16, 50), TU_ANY, 1);
  lj_tensor *cols = tu_tensor(LJ_F32, LJ_SHAPE(6, 120, 50), TU_ANY, 2);
  lj_tensor *dw = lj_sum(lj_matmul(dy, lj_transpose(cols, 1, 2)), 1, batch, false);
  ljg_graph *opt;
  ljg_program *p = program_of(dw, &opt);
  ck_assert_int_eq(p->nkernels, 2);
  ck_assert_int_eq(p->kernels[0].kind, LJG_K_MATMUL);
  ck_assert(p->kernels[0].mm_sum);
  ck_assert_int_eq(p->kernels[0].mm_m, 120); /* turned: rows are cols' */
  ck_assert_int_eq(p->kernels[0].mm_b, 6);
  free_program(p, opt);
  tu_check_interp_tol(1, &dw, 1e-4, 1e-4);
  /* a first convolution's: 9 taps take two vectors (9 of 16 lanes used), turned two tiles (9 of 12 rows) */
  lj_tensor *dy1 = tu_tensor(LJ_F32, LJ_SHAPE(6, 32, 50), TU_ANY, 8);
  lj_tensor *cols1 = tu_tensor(LJ_F32, LJ_SHAPE(6, 9, 50), TU_ANY, 9);
  lj_tensor *dw1 = lj_sum(lj_matmul(dy1, lj_transpose(cols1, 1, 2)), 1, batch, false);
  p = program_of(dw1, &opt);
  ck_assert(p->kernels[0].kind == LJG_K_MATMUL && p->kernels[0].mm_sum);
  ck_assert_int_eq(p->kernels[0].mm_m, 9);
  free_program(p, opt);
  tu_check_interp_tol(1, &dw1, 1e-4, 1e-4);

  lj_tensor *a = tu_tensor(LJ_F64, LJ_SHAPE(3, 13, 800), TU_ANY, 3), *b = tu_tensor(LJ_F64, LJ_SHAPE(3, 800, 20), TU_ANY, 4);
  lj_tensor *y = lj_relu(lj_sum(lj_matmul(a, b), 1, batch, false));
  p = program_of(y, &opt);
  ck_assert_int_eq(p->nkernels, 1);
  ck_assert(p->kernels[0].mm_sum);
  ck_assert_int_eq(p->kernels[0].mm_m, 13);
  ck_assert_int_eq(p->kernels[0].nnests, 1);
  free_program(p, opt);
  tu_check_interp_tol(1, &y, 1e-11, 1e-11); /* f64 sums of 2400 products, in blocks of k */

  lj_tensor *ia = tu_tensor(LJ_I64, LJ_SHAPE(4, 5, 9), TU_ANY, 5), *ib = tu_tensor(LJ_I64, LJ_SHAPE(4, 9, 7), TU_ANY, 6);
  lj_tensor *ibt = lj_transpose(tu_tensor(LJ_I64, LJ_SHAPE(4, 7, 9), TU_ANY, 7), 1, 2);
  lj_tensor *isums[2] = {lj_sum(lj_matmul(ia, ib), 1, batch, true), lj_sum(lj_matmul(ia, ibt), 1, batch, true)};
  for (int i = 0; i < 2; i++) {
    p = program_of(isums[i], &opt);
    ck_assert_int_eq(p->nkernels, 1);
    ck_assert(p->kernels[0].mm_sum);
    free_program(p, opt);
  }
  tu_check_interp_tol(2, isums, 0, 0);

  lj_tensor *prod = lj_matmul(a, b);
  lj_tensor *both = lj_add(lj_sum(prod, 1, batch, true), lj_exp(prod));
  p = program_of(both, &opt);
  for (int k = 0; k < p->nkernels; k++) ck_assert(!p->kernels[k].mm_sum);
  free_program(p, opt);
  tu_check_interp_tol(1, &both, 1e-11, 1e-11);
}
END_TEST

/* The matmul kernels of p: how many, and the largest m and k among them. */
static int matmul_kernels(const ljg_program *p, int64_t *m, int64_t *k) {
  int n = 0;
  *m = *k = 0;
  for (int i = 0; i < p->nkernels; i++)
    if (p->kernels[i].kind == LJG_K_MATMUL) {
      n++;
      if (p->kernels[i].mm_m > *m) *m = p->kernels[i].mm_m;
      if (p->kernels[i].mm_k > *k) *k = p->kernels[i].mm_k;
    }
  return n;
}

/* A sum of products of one shape that only the sum reads (a weight's gradient when the weight
 * served several steps: an RNN's, Σ_t h_tᵀ · dg_t) is one product over the operands
 * concatenated along k, when copying them costs less than storing the products and adding
 * them: one matmul kernel with k = Σ k_t. Values against the interpreter on two threads, f32
 * and f64: steps of k 1, 7 and 32 with A transposed and one A a broadcast zero, a term that is
 * no product added too; batched products; an RNN's weight gradients through autograd. Products of a k large next
 * to m and n (cheaper stored), one read elsewhere too and a lone product keep their kernels. */
START_TEST(test_matmul_sums_joined) {
  static const lj_dtype dts[2] = {LJ_F32, LJ_F64};
  static const int64_t ks[4] = {1, 7, 32, 5};
  tu_init_threads(2);
  for (int i = 0; i < 2; i++) {
    lj_scope_begin();
    double tol = dts[i] == LJ_F32 ? 1e-5 : 1e-12;
    lj_tensor *sum = tu_tensor(dts[i], LJ_SHAPE(24, 40), TU_ANY, 10), *prods[4];
    for (int t = 0; t < 4; t++) {
      lj_tensor *a = t == 3 ? lj_zeros(lj_default_device(), dts[i], LJ_SHAPE(24, ks[t]))
                            : lj_transpose(tu_tensor(dts[i], LJ_SHAPE(ks[t], 24), TU_ANY, 11 + t), 0, 1);
      prods[t] = lj_matmul(a, tu_tensor(dts[i], LJ_SHAPE(ks[t], 40), TU_ANY, 20 + t));
      sum = lj_add(sum, prods[t]);
    }
    ljg_graph *opt;
    ljg_program *p = program_of(sum, &opt);
    int64_t m, k;
    char *text = ljg_program_text(p, opt);
    ck_assert_msg(matmul_kernels(p, &m, &k) == 1 && k == 45, "%s", text);
    free(text);
    free_program(p, opt);
    lj_tensor *shared[2] = {sum, prods[1]}; /* the second product is a root too: the others join */
    p = program_of_n(2, shared, &opt);
    ck_assert_int_eq(matmul_kernels(p, &m, &k), 2);
    ck_assert_int_eq(k, 38);
    free_program(p, opt);
    tu_check_interp_tol(1, &sum, tol, tol);
    tu_check_interp_tol(1, &prods[1], tol, tol);
    lj_scope_end();
  }
  lj_scope_begin();
  lj_tensor *a[2], *b[2];
  for (int t = 0; t < 2; t++) {
    a[t] = tu_tensor(LJ_F32, LJ_SHAPE(8, 64), TU_ANY, 30 + t);
    b[t] = tu_tensor(LJ_F32, LJ_SHAPE(64, 8), TU_ANY, 32 + t);
  }
  lj_tensor *deep = lj_add(lj_matmul(a[0], b[0]), lj_matmul(a[1], b[1])); /* copies of 2·64·16 > 2·64 */
  lj_tensor *lone = lj_add(lj_matmul(a[0], b[0]), tu_tensor(LJ_F32, LJ_SHAPE(8, 8), TU_ANY, 34));
  int64_t m, k;
  ljg_graph *opt;
  for (int c = 0; c < 2; c++) {
    ljg_program *p = program_of(c ? lone : deep, &opt);
    ck_assert_int_eq(matmul_kernels(p, &m, &k), c ? 1 : 2);
    ck_assert_int_eq(k, 64);
    free_program(p, opt);
  }
  /* batched, [3, 10, k_t] · [3, k_t, 12] with A transposed */
  lj_tensor *bsum = NULL;
  for (int t = 0; t < 3; t++) {
    lj_tensor *x = lj_transpose(tu_tensor(LJ_F32, LJ_SHAPE(3, 2 + t, 10), TU_ANY, 35 + t), 1, 2);
    lj_tensor *prod = lj_matmul(x, tu_tensor(LJ_F32, LJ_SHAPE(3, 2 + t, 12), TU_ANY, 38 + t));
    bsum = bsum ? lj_add(bsum, prod) : prod;
  }
  ljg_program *bp = program_of(bsum, &opt);
  ck_assert_int_eq(matmul_kernels(bp, &m, &k), 1);
  ck_assert_int_eq(k, 9);
  free_program(bp, opt);
  tu_check_interp_tol(1, &bsum, 1e-5, 1e-5);
  /* an RNN, h_t = tanh(x_t·Wxᵀ + h_{t-1}·Whᵀ) from h_0 = 0 over 6 steps of a batch of 4 */
  enum { T = 6, B = 4, I = 5, H = 12 };
  lj_tensor *w[2] = {tu_tensor(LJ_F32, LJ_SHAPE(H, I), TU_ANY, 40), tu_tensor(LJ_F32, LJ_SHAPE(H, H), TU_ANY, 41)};
  lj_tensor *xs = tu_tensor(LJ_F32, LJ_SHAPE(T, B, I), TU_ANY, 42), *r = tu_tensor(LJ_F32, LJ_SHAPE(B, H), TU_ANY, 43);
  for (int i = 0; i < 2; i++) lj_tensor_set_requires_grad(w[i], true);
  lj_tensor *h = lj_zeros(lj_default_device(), LJ_F32, LJ_SHAPE(B, H));
  for (int t = 0; t < T; t++) {
    lj_tensor *x = lj_reshape(lj_slice(xs, 0, t, t + 1, 1), LJ_SHAPE(B, I));
    h = lj_tanh(lj_add(lj_linear(x, w[0], NULL), lj_linear(h, w[1], NULL)));
  }
  ck_assert_int_eq(lj_backward(lj_sum(lj_mul(h, r), 0, NULL, false)), LJ_OK);
  lj_tensor *grads[2] = {lj_tensor_grad(w[0]), lj_tensor_grad(w[1])};
  for (int i = 0; i < 2; i++) {
    ljg_program *p = program_of(grads[i], &opt);
    char *text = ljg_program_text(p, opt);
    ck_assert_msg(matmul_kernels(p, &m, &k) >= 1 && k == T * B, "%s", text); /* every step's product in one */
    free(text);
    free_program(p, opt);
  }
  tu_check_interp_tol(2, grads, 1e-4, 1e-4); /* f32 through six tanh steps: 3e-5 off either way */
  lj_scope_end();
  lj_shutdown();
}
END_TEST

/* The products of every step of a sequence by one matrix (an RNN's input projections: a
 * linear layer on each slice x_t of [T, B, I]) are one product of all T·B rows, each step's
 * product a slice of it: one matmul kernel. Steps of [6, 7] rows, and of [3, 2, 7] read as
 * [6, 7]; values against the interpreter on two threads. Four of five steps, or one step by
 * another matrix, keep a product a step. */
START_TEST(test_matmul_steps_joined) {
  enum { T = 5 };
  tu_init_threads(2);
  lj_scope_begin();
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(9, 7), TU_ANY, 70), *w2 = tu_tensor(LJ_F32, LJ_SHAPE(9, 7), TU_ANY, 71);
  lj_tensor *seqs[2] = {tu_tensor(LJ_F32, LJ_SHAPE(T, 6, 7), TU_ANY, 72), tu_tensor(LJ_F32, LJ_SHAPE(T, 3, 2, 7), TU_ANY, 73)};
  for (int c = 0; c < 4; c++) {
    lj_tensor *y[T];
    int n = c == 2 ? T - 1 : T;
    for (int t = 0; t < n; t++) {
      lj_tensor *x = lj_reshape(lj_slice(seqs[c == 1], 0, t, t + 1, 1), LJ_SHAPE(6, 7));
      y[t] = lj_linear(x, c == 3 && t == 2 ? w2 : w, NULL);
    }
    int64_t m, k;
    ljg_graph *opt;
    ljg_program *p = program_of_n(n, y, &opt);
    ck_assert_int_eq(matmul_kernels(p, &m, &k), c < 2 ? 1 : n);
    free_program(p, opt);
    ck_assert_int_eq(m, c < 2 ? T * 6 : 6);
    if (c < 2) tu_check_interp_tol(T, y, 1e-5, 1e-5);
  }
  lj_scope_end();
  lj_shutdown();
}
END_TEST

/* A transposed B that several products of few rows read (an RNN's h_t·W_hhᵀ at every step)
 * is stored once, contiguous along n, and each product reads it where it lies: three linear
 * layers of 6 rows by one weight are three matmul kernels and the copy, each product's B read
 * in place; values against the interpreter on two threads. One such product alone, or
 * products of more rows than read B in place (100), read the weight transposed, no copy. */
START_TEST(test_matmul_shared_transpose_stored) {
  tu_init_threads(2);
  lj_scope_begin();
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(40, 30), TU_ANY, 80);
  for (int c = 0; c < 3; c++) {
    int n = c == 1 ? 1 : 3, stored = c == 0;
    lj_tensor *y[3];
    for (int t = 0; t < n; t++)
      y[t] = lj_linear(tu_tensor(LJ_F32, LJ_SHAPE(c == 2 ? 100 : 6, 30), TU_ANY, 81 + 3 * (uint64_t)c + (uint64_t)t), w,
                       NULL);
    ljg_graph *opt;
    ljg_program *p = program_of_n(n, y, &opt);
    int products = 0, in_place = 0;
    for (int i = 0; i < p->nkernels; i++)
      if (p->kernels[i].kind == LJG_K_MATMUL) products++, in_place += ljg_kernel_b_in_place(&p->kernels[i]);
    ck_assert_int_eq(products, n);
    ck_assert_int_eq(p->nkernels, n + stored);
    ck_assert_int_eq(in_place, stored ? n : 0);
    free_program(p, opt);
    tu_check_interp_tol(n, y, 1e-5, 1e-5);
  }
  lj_scope_end();
  lj_shutdown();
}
END_TEST

/* A matmul read only through a transpose is computed transposed: a linear layer's weight
 * gradient, d(Wᵀ) = xᵀ·dY transposed back to W's layout, is one matmul kernel writing W's
 * layout (its root a reshape of the product, no copy), with the SGD update as its epilogue. */
START_TEST(test_matmul_read_transposed) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(64, 300), TU_ANY, 1), *dy = tu_tensor(LJ_F32, LJ_SHAPE(64, 40), TU_ANY, 2);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(40, 300), TU_ANY, 3);
  lj_tensor *dw = lj_transpose(lj_matmul(lj_transpose(x, 0, 1), dy), 0, 1);
  lj_tensor *outs[2] = {dw, lj_sub(w, lj_mul_scalar(dw, 0.5))};
  ck_assert_int_eq(lj_graph_kernel_count(2, outs), 1);
  ljg_graph *opt;
  ljg_program *p = program_of(dw, &opt);
  ck_assert_int_eq(p->nkernels, 1);
  ck_assert_int_eq(p->kernels[0].mm_m, 40);
  ck_assert_int_eq(p->kernels[0].mm_n, 300);
  free_program(p, opt);
  tu_check_interp_tol(2, outs, 1e-5, 1e-5);
}
END_TEST

/* The number of nests of p that sum. */
static int sum_nests(const ljg_program *p) {
  int n = 0;
  for (int k = 0; k < p->nkernels; k++)
    for (int s = 0; s < p->kernels[k].nnests; s++) n += p->kernels[k].nests[s].rop == LJG_OP_SUM;
  return n;
}

/* A scatter-add of one value per row into zeros (cross-entropy's gradient of its gather) is
 * a where of a one-hot compare that its readers compute, and its sum along the row (the
 * log-softmax gradient's) the value itself: no nest scatters, one sums (the exps), and of the
 * intermediates of the logits' shape only the exps are stored; values against the
 * interpreter; a target out of range is still reported at the read. Such a sum of -0.0 or of
 * a negated +0.0 is +0.0, as a sum from +0.0 gives. */
START_TEST(test_scatter_as_select) {
  lj_device *d = lj_default_device();
  int64_t t[37];
  for (int i = 0; i < 37; i++) t[i] = i * 389 % 1000;
  for (int bad = 0; bad < 2; bad++) {
    t[5] = bad ? 1000 : 5;
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(37, 1000), TU_ANY, 3);
    lj_tensor *target = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(37), t);
    lj_tensor_set_requires_grad(x, true);
    lj_scope_begin();
    lj_tensor *loss = lj_cross_entropy(x, target, LJ_REDUCE_MEAN);
    ck_assert_int_eq(lj_backward(loss), LJ_OK);
    lj_tensor *outs[2] = {loss, lj_tensor_grad(x)};
    if (bad) {
      float v;
      ck_assert_int_eq(lj_tensor_to_host(loss, &v, sizeof v), LJ_ERR_RUNTIME);
      tu_expect_error(LJ_ERR_RUNTIME, "index 1000", "[0, 1000)", NULL);
    } else {
      ljg_graph *opt;
      ljg_program *p = program_of_n(2, outs, &opt);
      for (int k = 0; k < p->nkernels; k++)
        for (int s = 0; s < p->kernels[k].nnests; s++) ck_assert_int_lt(p->kernels[k].nests[s].scatter_index, 0);
      ck_assert_int_eq(sum_nests(p), 1);
      int wide = 0;
      for (int s = 0; s < p->nslots; s++) {
        const ljg_gnode *n = &opt->nodes[p->slots[s].node];
        bool inter = p->slots[s].kind == LJG_SLOT_TEMP || p->slots[s].kind == LJG_SLOT_LOCAL;
        wide += inter && n->ndim == 2 && n->shape[1] == 1000;
      }
      ck_assert_int_eq(wide, 1);
      free_program(p, opt);
      tu_check_interp_tol(2, outs, 1e-5, 1e-6);
    }
    lj_scope_end();
    lj_tensor_release(x);
    lj_tensor_release(target);
  }
  lj_tensor *idx = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(3, 1), (int64_t[]){1, 3, 0});
  for (int neg = 0; neg < 2; neg++) {
    lj_tensor *src = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(3, 1), (float[]){neg ? 0.0f : -0.0f, 2.5f, -1.0f});
    lj_tensor *sc = lj_scatter_add(lj_zeros(d, LJ_F32, LJ_SHAPE(3, 4)), 1, idx, src);
    lj_tensor *sum = lj_sum(neg ? lj_neg(sc) : sc, 1, (int[]){1}, false);
    ljg_graph *opt;
    ljg_program *p = program_of(sum, &opt);
    ck_assert_int_eq(sum_nests(p), 0);
    free_program(p, opt);
    float got[3];
    ck_assert_int_eq(lj_tensor_to_host(sum, got, sizeof got), LJ_OK);
    ck_assert_msg(got[0] == 0 && !signbit(got[0]) && got[1] == (neg ? -2.5f : 2.5f) && got[2] == (neg ? 1.0f : -1.0f),
                  "%g %g %g", got[0], got[1], got[2]);
    lj_tensor_release(sum);
    lj_tensor_release(sc);
    lj_tensor_release(src);
  }
  lj_tensor_release(idx);
}
END_TEST

/* A row-fused softmax or log_softmax whose input takes at least 64 KiB runs its first nest (the
 * max along the row) over the next block's rows in the loop of the exps (stored, or summed
 * along the row), which reads them into cache while it computes: rows of 1001 columns, f64 in
 * blocks of one row, at most 8 KiB a block, and f32 and bf16. Both run their last nest
 * (x - max - log sum, exps / sum) over the previous block's rows in that loop too where a row
 * takes at most 4 KiB, in blocks of at most 4 KiB (f32 one row, bf16 two), softmax reading the
 * exps the previous block stored in the other of its two buffers. A softmax with noise added to its
 * input (a random number in the first nest) prefetches those rows instead where the input is
 * large (4 MiB), summing its exps in the loop that computes them, and does neither where it is
 * not. Neither for a small input (8 rows), nor for
 * a variance (a sum of squares: no exps). Values against the interpreter, on one and two
 * threads (blocks split across tasks: 97 rows of bf16 on one thread end with a block of one
 * row, on two in chunks of 16 rows and a last of one, a call whose first block is its last and
 * shorter), with a NaN and infinities in rows that are computed ahead or behind, and rows far
 * apart (a row shifted by another's max overflows); and a softmax whose max is an output too,
 * stored a block ahead into it. */
START_TEST(test_rows_ahead) {
  static const lj_dtype dts[] = {LJ_F32, LJ_F64, LJ_BF16};
  static const int dims[1] = {1};
  static const char *const says[] = {"nest 1 runs nest 0 on the next block's rows",
                                     "prefetches the next block's rows of e0", "on the previous block's",
                                     " sums in its loop"};
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    for (int i = 0; i < 3; i++)
      for (int size = 0; size < 3; size++) {
        bool big = size == 2; /* at least 4 MiB; the middle size at least 64 KiB */
        int64_t rows = big ? (dts[i] == LJ_BF16 ? 2100 : 1100) : size ? 97 : 8;
        lj_tensor *x = tu_tensor(dts[i], LJ_SHAPE(rows, 1001), TU_ANY, 9 + i);
        int64_t n;
        double *v = tu_read(x, &n);
        double apart = dts[i] == LJ_F64 ? 2000 : dts[i] == LJ_BF16 ? 100 : 200; /* exp(x - another row's max) overflows */
        for (int64_t j = 0; j < n; j++) v[j] += (double)(j / 1001 % 5) * apart;
        v[7 * 1001 + 5] = NAN;
        if (size) v[40 * 1001 + 1000] = INFINITY, v[41 * 1001] = -INFINITY;
        float *vf = malloc((size_t)n * sizeof *vf);
        for (int64_t j = 0; j < n; j++) vf[j] = (float)v[j];
        lj_tensor_release(x);
        x = lj_tensor_from_host(lj_default_device(), dts[i] == LJ_F64 ? LJ_F64 : LJ_F32, LJ_SHAPE(rows, 1001),
                                dts[i] == LJ_F64 ? (void *)v : vf);
        if (dts[i] == LJ_BF16) { /* rounded to bf16 by a cast, then a tensor of its own */
          lj_tensor *b = lj_cast(x, LJ_BF16);
          ck_assert_int_eq(lj_tensor_to_host(b, vf, (size_t)n * 2), LJ_OK);
          lj_tensor_release(b), lj_tensor_release(x);
          x = lj_tensor_from_host(lj_default_device(), LJ_BF16, LJ_SHAPE(rows, 1001), vf);
        }
        free(vf);
        free(v);
        lj_scope_begin();
        lj_tensor *c = lj_sub(x, lj_mean(x, 1, dims, true));
        lj_tensor *noise = lj_mul_scalar(lj_rand(lj_default_device(), dts[i], LJ_SHAPE(rows, 1001)), 0.01);
        lj_tensor *ys[4] = {lj_softmax(x, 1), lj_log_softmax(x, 1), lj_mean(lj_mul(c, c), 1, dims, true),
                            lj_softmax(lj_add(x, noise), 1)};
        for (int f = 0; f < 4; f++) {
          ljg_graph *opt;
          ljg_program *p = program_of(ys[f], &opt);
          char *lowering = ljc_lowering_text(p, NULL);
          if (size && f < 2 && dts[i] != LJ_BF16)
            ck_assert_msg(strstr(lowering, "in blocks of 1 rows") != NULL, "%d: %s", f, lowering);
          for (int w = 0; w < 4; w++) {
            bool expect = w == 0 ? size && f < 2 : w == 1 || w == 3 ? big && f == 3 : size && f < 2 && dts[i] != LJ_F64;
            ck_assert_msg((strstr(lowering, says[w]) != NULL) == expect, "%d %d: %s", f, w, lowering);
          }
          free(lowering);
          free_program(p, opt);
          tu_check_interp_tol(1, &ys[f], dts[i] == LJ_BF16 ? tu_rtol(LJ_BF16) : 1e-5, 1e-6); /* alone: the program above */
        }
        /* the max an output too: stored into it a block ahead, never past the task's rows */
        lj_tensor *m = lj_amax(x, 1, dims, true), *e = lj_exp(lj_sub(x, m));
        lj_tensor *pair[2] = {lj_div(e, lj_sum(e, 1, dims, true)), m};
        ljg_graph *opt;
        ljg_program *p = program_of_n(2, pair, &opt);
        char *lowering = ljc_lowering_text(p, NULL);
        const ljg_kernel *k = &p->kernels[p->nkernels - 1];
        ck_assert_msg((strstr(lowering, says[0]) != NULL) == (size > 0), "%s", lowering);
        ck_assert_int_ne(p->slots[k->nests[0].out_slot].kind, LJG_SLOT_LOCAL);
        free(lowering);
        free_program(p, opt);
        tu_check_interp_tol(2, pair, dts[i] == LJ_BF16 ? tu_rtol(LJ_BF16) : 1e-5, 1e-6);
        lj_scope_end();
        lj_tensor_release(x);
      }
    lj_shutdown();
  }
}
END_TEST

/* A row-fused kernel without exps whose first nest is a plain reduction along the rows of an
 * input of at least 64 KiB, and which stores rows of the input's shape, runs that nest over
 * the next block's rows in the loop of a later nest, overlapping their reads with its stores:
 * a layer norm (its variance runs the mean ahead and its output a block behind where a row
 * takes at most 4 KiB: f32 and bf16, not f64), an RMS norm and x - max (their outputs run
 * the reduction ahead). A kernel that stores no such rows (a variance alone) does not, nor
 * does a small input (8 rows). Values against the interpreter on one and two threads, rows of
 * 1001 columns, with a NaN and infinities in rows computed ahead or behind. */
START_TEST(test_rows_ahead_of_stores) {
  static const lj_dtype dts[] = {LJ_F32, LJ_F64, LJ_BF16};
  static const int dims[1] = {1};
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    for (int i = 0; i < 3; i++)
      for (int big = 0; big < 2; big++) {
        int64_t rows = big ? 97 : 8, n;
        lj_tensor *x = tu_tensor(dts[i], LJ_SHAPE(rows, 1001), TU_ANY, 40 + i);
        double *v = tu_read(x, &n);
        v[7 * 1001 + 5] = NAN;
        if (big) v[40 * 1001 + 1000] = INFINITY, v[41 * 1001] = -INFINITY;
        lj_tensor_release(x);
        x = lj_cast(lj_tensor_from_host(lj_default_device(), LJ_F64, LJ_SHAPE(rows, 1001), v), dts[i]);
        ck_assert_int_eq(lj_sync_tensors(1, &x), LJ_OK);
        free(v);
        lj_scope_begin();
        lj_tensor *c = lj_sub(x, lj_mean(x, 1, dims, true));
        lj_tensor *ys[4] = {lj_layer_norm(x, 1, NULL, NULL, 1e-5),
                            lj_mul(x, lj_rsqrt(lj_add_scalar(lj_mean(lj_mul(x, x), 1, dims, true), 1e-6))),
                            lj_sub(x, lj_amax(x, 1, dims, true)), lj_mean(lj_mul(c, c), 1, dims, true)};
        for (int f = 0; f < 4; f++) {
          ljg_graph *opt;
          ljg_program *p = program_of(ys[f], &opt);
          char *lowering = ljc_lowering_text(p, NULL);
          bool ahead = big && f < 3, behind = ahead && f == 0 && dts[i] != LJ_F64;
          bool says = strstr(lowering, "runs nest 0 on the next block's rows") != NULL;
          ck_assert_msg(says == ahead, "%d: %s", f, lowering);
          ck_assert_msg((strstr(lowering, "on the previous block's") != NULL) == behind, "%d: %s", f, lowering);
          free(lowering);
          free_program(p, opt);
          tu_check_interp_tol(1, &ys[f], dts[i] == LJ_BF16 ? tu_rtol(LJ_BF16) : 1e-5, 1e-5);
        }
        lj_scope_end();
        lj_tensor_release(x);
      }
    lj_shutdown();
  }
}
END_TEST

/* Sums over the same points run in one loop (lower.c's sum_groups): a batch norm's
 * gradient's Σ (x − mean)·dy, Σ dy and Σ (x − mean) over each channel of [N, C, H·W] after the
 * mean's sum, with a map of the second between them (it runs after the loop): the mean's sum
 * with Σ dy, then the two that read the mean; not a sum that reads what a nest between writes
 * (Σ max(dy, 3·Σ (x − mean)·dy)), nor sums over other dims; Σ x·dy and Σ dy over each row
 * of H·W together. Values
 * against the interpreter, f32 and f64, a channel's rows a block (8 images) and blocks of
 * channels (1 image), one and two threads. */
START_TEST(test_sums_in_one_loop) {
  static const lj_dtype dts[] = {LJ_F32, LJ_F64};
  static const int nhw[2] = {0, 2}, hw[1] = {2};
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    for (int i = 0; i < 2; i++)
      for (int images = 1; images <= 8; images += 7) {
        lj_tensor *x = tu_tensor(dts[i], LJ_SHAPE(images, 24, 300), TU_ANY, 60 + i);
        lj_tensor *dy = tu_tensor(dts[i], LJ_SHAPE(images, 24, 300), TU_ANY, 62 + i);
        lj_scope_begin();
        lj_tensor *xm = lj_sub(x, lj_mean(x, 2, nhw, true));
        lj_tensor *first = lj_sum(lj_mul(xm, dy), 2, nhw, false), *map = lj_mul_scalar(first, 3.0);
        lj_tensor *grouped[4] = {map, lj_sum(dy, 2, nhw, false), lj_mean(xm, 2, nhw, false), first};
        lj_tensor *apart[3] = {first, lj_sum(lj_maximum(dy, lj_reshape(map, LJ_SHAPE(1, 24, 1))), 2, nhw, false),
                               lj_sum(xm, 2, (const int[]){0, 1}, false)};
        lj_tensor *by_rows[2] = {lj_sum(lj_mul(x, dy), 1, hw, false), lj_sum(dy, 1, hw, false)};
        char *lowering = lowering_of(3, grouped);
        ck_assert_msg(strstr(lowering, "nests 0, 3 sum in one loop; nests 1, 4 sum in one loop"), "%s", lowering);
        free(lowering);
        lowering = lowering_of(3, apart);
        ck_assert_msg(!strstr(lowering, "sum in one loop"), "%s", lowering);
        free(lowering);
        lowering = lowering_of(2, by_rows);
        ck_assert_msg(strstr(lowering, "kernel 0: nests 0, 1 sum in one loop"), "%s", lowering);
        free(lowering);
        tu_check_interp_tol(4, grouped, 1e-5, 1e-5);
        tu_check_interp_tol(2, &apart[1], 1e-5, 1e-5);
        tu_check_interp_tol(2, by_rows, 1e-5, 1e-5);
        lj_scope_end();
        lj_tensor_release(x);
        lj_tensor_release(dy);
      }
    lj_shutdown();
  }
}
END_TEST

/* The kernel of p that is a window of op win_op, or NULL. */
static const ljg_kernel *window_kernel(const ljg_program *p, int win_op) {
  for (int i = 0; i < p->nkernels; i++)
    if (p->kernels[i].kind == LJG_K_WINDOW && p->kernels[i].win_op == win_op) return &p->kernels[i];
  return NULL;
}

/* Pooling runs its windows a block of image planes at a time: im2col leads the kernel that
 * reduces each window (max-pool's argmax and its gather of the maximum, avg-pool's mean), its
 * planes on the kernel's stack; max-pool's gradient (each window's maximum gets the output's
 * gradient, scattered into zeros) ends with the col2im that adds the windows back, the
 * scattered planes on the stack too. Values against the interpreter, blocks split across
 * threads, f32 and f64, windows that tile the image and windows that overlap with padding;
 * the windows' positions are i8, or i32 for windows of more than 127 (12×12). */
START_TEST(test_window_row_fusion) {
  static const lj_dtype dts[] = {LJ_F32, LJ_F64};
  static const int k2[2] = {2, 2}, k3[2] = {3, 3}, s2[2] = {2, 2}, p1[2] = {1, 1};
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++)
    for (int overlap = 0; overlap < 2; overlap++) {
      lj_tensor *x = tu_tensor(dts[i], LJ_SHAPE(2, 40, 24, 30), TU_ANY, 20 + i);
      lj_tensor *g = tu_tensor(dts[i], LJ_SHAPE(2, 40, 12, 15), TU_ANY, 30 + i);
      lj_tensor_set_requires_grad(x, true);
      lj_scope_begin();
      lj_tensor *y = overlap ? lj_max_pool2d(x, k3, s2, p1) : lj_max_pool2d(x, k2, NULL, NULL);
      lj_tensor *avg = overlap ? lj_avg_pool2d(x, k3, s2, p1) : lj_avg_pool2d(x, k2, NULL, NULL);
      for (int f = 0; f < 2; f++) {
        ljg_graph *opt;
        ljg_program *p = program_of(f ? avg : y, &opt);
        ck_assert_int_eq(p->nkernels, 1);
        const ljg_kernel *k = window_kernel(p, LJG_OP_IM2COL);
        ck_assert_ptr_nonnull(k);
        ck_assert(k->win_at == 0 && k->nnests >= 1 && k->row_block >= 1 && k->row_block < 80);
        ck_assert_int_eq(p->slots[k->win_out_slot].kind, LJG_SLOT_LOCAL);
        if (!f) ck_assert(k->nests[0].rop == LJG_OP_ARGMAX && k->nests[0].out_dtype == LJ_I8); /* a byte a window */
        free_program(p, opt);
      }
      ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
      lj_tensor *dx = lj_tensor_grad(x);
      ljg_graph *opt;
      ljg_program *p = program_of(dx, &opt);
      const ljg_kernel *k = window_kernel(p, LJG_OP_COL2IM);
      ck_assert_ptr_nonnull(k);
      ck_assert(k->win_at == 2 && k->nnests == 2 && k->nests[1].scatter_index >= 0);
      ck_assert_int_eq(p->slots[k->nests[1].out_slot].kind, LJG_SLOT_LOCAL);
      free_program(p, opt);
      lj_tensor *outs[3] = {y, avg, dx};
      double tol = dts[i] == LJ_F32 ? 1e-5 : 1e-12;
      tu_check_interp_tol(3, outs, tol, tol);
      lj_scope_end();
      lj_tensor_release(x);
      lj_tensor_release(g);
    }
  /* 144 positions a window: past what an i8 holds, they are i32 */
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 3, 25, 24), TU_ANY, 40), *g = tu_tensor(LJ_F32, LJ_SHAPE(2, 3, 2, 2), TU_ANY, 41);
  lj_tensor_set_requires_grad(x, true);
  lj_scope_begin();
  lj_tensor *y = lj_max_pool2d(x, (const int[]){12, 12}, NULL, NULL);
  ljg_graph *opt;
  ljg_program *p = program_of(y, &opt);
  const ljg_kernel *k = window_kernel(p, LJG_OP_IM2COL);
  ck_assert(k && k->nests[0].rop == LJG_OP_ARGMAX && k->nests[0].out_dtype == LJ_I32);
  free_program(p, opt);
  ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
  lj_tensor *outs[2] = {y, lj_tensor_grad(x)};
  tu_check_interp_tol(2, outs, 1e-6, 1e-6);
  lj_scope_end();
  lj_tensor_release(x);
  lj_tensor_release(g);
}
END_TEST

/* A softmax and a log_softmax over the rows of batched products (attention's scores), fused
 * into the product's kernel: its nests run a part of each block of rows at a time (200-wide
 * rows: 20 rows a part, blocks of 81, the last part of a block a single row; 70-wide rows in
 * blocks of three matrices, parts of 58 rows, one crossing into the next matrix), then the
 * product with V. Against the interpreter on one thread and two, and the lowering says it. */
START_TEST(test_product_softmax_parts) {
  for (int threads = 1; threads <= 2; threads++) {
    char dir[] = "/tmp/lj_parts_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    lj_config cfg = lj_config_default();
    cfg.num_threads = threads;
    cfg.dump_dir = dir;
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    lj_tensor *outs[4];
    static const int64_t shapes[2][2] = {{200, 16}, {70, 24}};
    for (int i = 0; i < 2; i++) {
      int64_t t = shapes[i][0], d = shapes[i][1];
      lj_tensor *q = tu_tensor(LJ_F32, LJ_SHAPE(3, t, d), TU_ANY, 80 + (uint64_t)i);
      lj_tensor *k = tu_tensor(LJ_F32, LJ_SHAPE(3, t, d), TU_ANY, 82 + (uint64_t)i);
      lj_tensor *v = tu_tensor(LJ_F32, LJ_SHAPE(3, t, d), TU_ANY, 84 + (uint64_t)i);
      lj_scope_begin();
      lj_tensor *scores = lj_mul_scalar(lj_matmul(q, lj_transpose(k, 1, 2)), 0.25);
      outs[2 * i] = lj_tensor_retain(lj_matmul(lj_softmax(scores, 2), v));
      outs[2 * i + 1] = lj_tensor_retain(lj_log_softmax(scores, 2));
      lj_scope_end();
      lj_tensor_release(q);
      lj_tensor_release(k);
      lj_tensor_release(v);
    }
    /* the outputs sum 70 or 200 products of f32 probabilities that cancel in places */
    tu_check_interp_tol(4, outs, 1e-4, 1e-5);
    ck_assert(tu_dir_has(dir, ".kernels.txt", "its nests run on 20 rows of a block at a time"));
    ck_assert(tu_dir_has(dir, ".kernels.txt", "its nests run on 58 rows of a block at a time"));
    for (int i = 0; i < 4; i++) lj_tensor_release(outs[i]);
    tu_remove_dir(dir);
    lj_shutdown();
  }
}
END_TEST

/* A depthwise convolution (groups = input channels: each output channel a weighted sum of
 * one input channel's windows) is no matmul, whose rows would be one output channel against
 * K = 9: it is im2col, a product with the weight and a sum over each window, the windows of a
 * plane on the kernel's stack (110 KiB for 28×32 here) and the sum in column order along the
 * plane (the weight is the same along it). Values and gradients against the interpreter, a
 * channel multiplier of 2, stride 2 with dilation, with and without a bias. */
START_TEST(test_depthwise_conv) {
  static const int p1[2] = {1, 1}, s2[2] = {2, 1}, d2[2] = {1, 2};
  for (int variant = 0; variant < 2; variant++) {
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(3, 8, 28, 32), TU_ANY, 70 + variant);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(16, 1, 3, 3), TU_ANY, 72 + variant);
    lj_tensor *b = variant ? tu_tensor(LJ_F32, LJ_SHAPE(16), TU_ANY, 74) : NULL;
    lj_tensor *g = variant ? tu_tensor(LJ_F32, LJ_SHAPE(3, 16, 14, 30), TU_ANY, 75)
                           : tu_tensor(LJ_F32, LJ_SHAPE(3, 16, 28, 32), TU_ANY, 76);
    ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
    ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
    lj_scope_begin();
    lj_tensor *y = variant ? lj_conv2d(x, w, b, s2, p1, d2, 8) : lj_conv2d(x, w, NULL, NULL, p1, NULL, 8);
    ck_assert_msg(y, "%s", lj_last_error());
    ljg_graph *opt;
    ljg_program *p = program_of(y, &opt);
    const ljg_kernel *k = window_kernel(p, LJG_OP_IM2COL);
    ck_assert(k && k->nnests >= 1 && k->nests[0].rop == LJG_OP_SUM);
    ck_assert_int_eq(p->slots[k->win_out_slot].kind, LJG_SLOT_LOCAL);
    for (int i = 0; i < p->nkernels; i++) ck_assert_int_ne(p->kernels[i].kind, LJG_K_MATMUL);
    free_program(p, opt);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
    lj_tensor *outs[3] = {y, lj_tensor_grad(x), lj_tensor_grad(w)};
    tu_check_interp_tol(2, outs, 1e-5, 1e-4);
    /* each weight's gradient sums 2688 products (1260 with stride 2) that cancel to under 1 in
     * places: 1.3e-4 from the interpreter's with SSE2's 4 lanes */
    tu_check_interp_tol(1, outs + 2, 1e-5, 5e-4);
    lj_scope_end();
    lj_tensor_release(x);
    lj_tensor_release(w);
    lj_tensor_release(b);
    lj_tensor_release(g);
  }
}
END_TEST

/* A depthwise convolution of one output channel a channel, column stride 1, reads its
 * windows from the image's rows (no im2col written): each output row vectors of positions at
 * a time, the taps' masked vectors of the image's rows times the plane's weights, starting
 * from the bias where there is one and bounded after it: a relu, a clamp to [-0.25, 0.5] (two
 * scalars; for the 200-column rows crossed, every value the upper), a relu and a clamp to 0.3
 * above (a constant and a scalar, ReLU6's form), in turn with none (the nest that adds the
 * bias or bounds the sums not run, its planes flattened where there is no bias); so does its
 * weight gradient (dY's rows times the image's under each tap, summed), in the kernel of the
 * forward product when both are in the graph, and the input gradient sums dY's rows under the
 * taps instead of a col2im (of stride 2, a class of the image's rows and columns at a
 * time, each with its taps, the columns' two classes interleaved). 3×3 with a bias (two
 * vectors a row), 5×5 dilated along the rows to 66 positions (two steps, the second mostly
 * masked), 7×7 of row stride 2 on rows of 7 (vectors of 4), 3×3 of stride 2 over 17×35 (odd
 * rows and columns: classes of unequal sizes), f64 5×5 of column stride 2 dilated along the
 * rows, f64 without padding (one vector of 8), rows of 200 (vectors inside the rows and the
 * image's in a loop), 1×17 (more taps than a pass of the weight gradient's accumulators);
 * planes whose rows take at most half a cache line and whose output is the source's size run
 * flat (a vector over several rows, the taps' lanes outside the plane masked), the forward,
 * the weight gradient and the input gradient alike: MobileNet's 3×3 over 7×7 (4 vectors, the
 * last of one lane), 5×5 over 32×8 (16 vectors, 1 KiB), f64 3×3 dilated along the rows over
 * 6×4, 1×3 over 3×6, and not rows of 10; values and gradients against the interpreter. A row stride along the image's columns (an NHWC
 * image) keeps the im2col; bf16 (computed in f32, its im2col a kernel of its own for a batch
 * this small) checks values only. */
START_TEST(test_depthwise_rows) {
  static const char flat[] = "its planes run flat";
  static const struct {
    lj_dtype dt;
    int64_t x[4];
    int k[2], pad[2], stride[2], dil[2];
    bool bias, nhwc;
    int rows;        /* the forward alone reads the image's rows: 1, 0, or -1 not checked */
    int grad_rows;   /* with the gradients, so do the forward and the weight gradient */
    int image_rows;  /* and the input gradient sums dY's rows */
    int flat;        /* kernels whose planes run flat: the forward's, the gradients' (-1 not checked) */
  } cases[] = {
      {LJ_F32, {2, 8, 28, 32}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, true, false, 1, 1, 1, 0},
      {LJ_F32, {2, 8, 13, 70}, {5, 5}, {2, 2}, {1, 1}, {1, 2}, false, false, 1, 1, 1, 0},
      {LJ_F32, {1, 16, 9, 7}, {7, 7}, {3, 3}, {2, 1}, {1, 1}, true, false, 1, 1, 1, 0},
      {LJ_F32, {2, 8, 17, 35}, {3, 3}, {1, 1}, {2, 2}, {1, 1}, false, false, 1, 1, 1, 0},
      {LJ_F64, {1, 4, 12, 9}, {5, 5}, {2, 2}, {1, 2}, {2, 1}, true, false, 1, 1, 1, 0},
      {LJ_F64, {2, 4, 10, 10}, {3, 3}, {0, 0}, {1, 1}, {1, 1}, false, false, 1, 1, 1, 0},
      {LJ_F32, {1, 3, 5, 200}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, false, 1, 1, 1, 0},
      {LJ_F32, {1, 4, 3, 40}, {1, 17}, {0, 8}, {1, 1}, {1, 1}, false, false, 1, 1, 1, 0},
      {LJ_BF16, {2, 8, 12, 12}, {5, 5}, {2, 2}, {1, 1}, {1, 1}, true, false, -1, -1, -1, -1},
      {LJ_F32, {2, 8, 12, 12}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, true, 0, 0, -1, 0},
      {LJ_F32, {2, 12, 7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, true, false, 1, 1, 1, 1},
      {LJ_F32, {1, 8, 32, 8}, {5, 5}, {2, 2}, {1, 1}, {1, 1}, false, false, 1, 1, 1, 1},
      {LJ_F64, {2, 4, 6, 4}, {3, 3}, {2, 1}, {1, 1}, {2, 1}, true, false, 1, 1, 1, 1},
      {LJ_F32, {1, 4, 3, 6}, {1, 3}, {0, 1}, {1, 1}, {1, 1}, false, false, 1, 1, 1, 1},
      {LJ_F32, {1, 4, 10, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, false, 1, 1, 1, 0},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    lj_dtype dt = cases[c].dt;
    int64_t C = cases[c].x[1];
    lj_tensor *leaf = cases[c].nhwc ? tu_tensor(dt, LJ_SHAPE(cases[c].x[0], cases[c].x[2], cases[c].x[3], C), TU_ANY, 80)
                                    : tu_tensor(dt, 4, cases[c].x, TU_ANY, 80 + (uint64_t)c);
    lj_tensor *w = tu_tensor(dt, LJ_SHAPE(C, 1, cases[c].k[0], cases[c].k[1]), TU_ANY, 90 + (uint64_t)c);
    lj_tensor *b = cases[c].bias ? tu_tensor(dt, LJ_SHAPE(C), TU_ANY, 100 + (uint64_t)c) : NULL;
    ck_assert_int_eq(lj_tensor_set_requires_grad(leaf, true), LJ_OK);
    ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
    lj_scope_begin();
    lj_tensor *x = cases[c].nhwc ? lj_permute(leaf, 4, (const int[]){0, 3, 1, 2}) : leaf;
    lj_tensor *y = lj_conv2d(x, w, b, cases[c].stride, cases[c].pad, cases[c].dil, (int)C);
    lj_tensor *alone = lj_conv2d(lj_detach(x), lj_detach(w), b, cases[c].stride, cases[c].pad, cases[c].dil, (int)C);
    int bounds = (int)(c % 4); /* 1: none */
    if (bounds == 0) alone = lj_relu(alone);
    if (bounds == 2) alone = c == 6 ? lj_clamp(alone, 0.5, -0.25) : lj_clamp(alone, -0.25, 0.5);
    if (bounds == 3) alone = lj_clamp_max(lj_relu(alone), 0.3);
    ck_assert_msg(y && alone, "%s", lj_last_error());
    ljg_graph *opt;
    ljg_program *p = program_of(alone, &opt);
    char *lowering = ljc_lowering_text(p, NULL);
    bool rows = strstr(lowering, "reads its windows from the image's rows") != NULL;
    bool epilogue = strstr(lowering, "sums add its bias or bound it and write its output") != NULL;
    ck_assert_msg(cases[c].rows < 0 || rows == (cases[c].rows == 1), "case %zu: %s", c, lowering);
    ck_assert_msg(cases[c].rows < 0 || epilogue == (rows && (cases[c].bias || bounds != 1)), "case %zu: %s", c,
                  lowering);
    ck_assert_msg(cases[c].flat < 0 || occurrences(lowering, flat) == cases[c].flat, "case %zu: %s", c, lowering);
    free(lowering);
    free_program(p, opt);
    /* the forward product alone, of leaves that need no gradient; up to 49 products a sum,
     * in the taps' order; the weight's gradient sums hundreds */
    double rtol = dt == LJ_BF16 ? tu_rtol(LJ_BF16) : 1e-5, atol = dt == LJ_BF16 ? 1e-2 : 5e-4;
    tu_check_interp_tol(1, &alone, rtol, atol);
    lj_tensor *g = tu_tensor(dt, lj_tensor_ndim(y), lj_tensor_shape(y), TU_ANY, 110 + (uint64_t)c);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
    lj_tensor *outs[3] = {y, lj_tensor_grad(leaf), lj_tensor_grad(w)};
    p = program_of_n(3, outs, &opt);
    lowering = ljc_lowering_text(p, NULL);
    rows = strstr(lowering, "read their windows from the image's rows") != NULL;
    bool image = strstr(lowering, "the image is summed from the rows") != NULL;
    ck_assert_msg(cases[c].grad_rows < 0 || rows == (cases[c].grad_rows == 1), "case %zu: %s", c, lowering);
    ck_assert_msg(cases[c].image_rows < 0 || image == (cases[c].image_rows == 1), "case %zu: %s", c, lowering);
    ck_assert_msg(cases[c].flat < 0 || occurrences(lowering, flat) == 2 * cases[c].flat, "case %zu: %s", c, lowering);
    free(lowering);
    free_program(p, opt);
    tu_check_interp_tol(3, outs, rtol, atol);
    lj_scope_end();
    lj_tensor_release(leaf);
    lj_tensor_release(w);
    lj_tensor_release(b);
  }
}
END_TEST

/* A depthwise convolution's weight gradient of stride 2 over an image whose memory ends in
 * NaN right after it (the image a slice of a longer buffer): the edge rows' masked loads read
 * nothing past the image (compiled for AVX2, LLVM had loaded lanes past it from a mask that
 * ANDed the columns' lanes with the row's flag, a NaN in the gradient), for the host and AVX2;
 * so do the flat planes' (3×3 of stride 1 over 7×7: the forward and the weight gradient, whose
 * last vector reaches past the image, and the input gradient); against the interpreter. */
START_TEST(test_depthwise_rows_image_end) {
  static const char *const cpus[] = {NULL, "haswell"};
  static const int64_t shapes[2][4] = {{2, 8, 17, 35}, {2, 8, 7, 7}};
  enum { N = 2 * 8 * 17 * 35, TAIL = 64 };
  for (size_t t = 0; t < 2; t++) {
    if (!tu_host_runs(cpus[t])) continue;
    lj_config cfg = lj_config_default();
    cfg.cpu = cpus[t];
    cfg.num_threads = 2;
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    for (int f = 0; f < 2; f++) {
      const int64_t *shape = shapes[f], n = shape[0] * shape[1] * shape[2] * shape[3];
      static float host[N + TAIL];
      for (int i = 0; i < n + TAIL; i++) host[i] = i < n ? (float)(i * 7919 % 1000) / 1000 - 0.5f : NAN;
      lj_tensor *flat = lj_tensor_from_host(lj_default_device(), LJ_F32, LJ_SHAPE(n + TAIL), host);
      lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(8, 1, 3, 3), TU_ANY, 120);
      ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
      ck_assert_int_eq(lj_tensor_set_requires_grad(flat, f == 1), LJ_OK);
      lj_scope_begin();
      lj_tensor *x = lj_reshape(lj_slice(flat, 0, 0, n, 1), 4, shape);
      lj_tensor *y = lj_conv2d(x, w, NULL, f ? NULL : (const int[]){2, 2}, (const int[]){1, 1}, NULL, 8);
      lj_tensor *g = tu_tensor(LJ_F32, lj_tensor_ndim(y), lj_tensor_shape(y), TU_ANY, 121);
      ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
      lj_tensor *outs[3] = {lj_tensor_grad(w), y, lj_tensor_grad(flat)};
      tu_check_interp_tol(f ? 3 : 1, outs, 1e-5, 5e-4);
      lj_scope_end();
      lj_tensor_release(flat);
      lj_tensor_release(w);
    }
    lj_shutdown();
  }
}
END_TEST

/* A depthwise convolution with its bias and bounds followed by a 1×1 convolution
 * (MobileNetV2's block): the nest after the bounds copies the depthwise output into the 1×1's
 * operand, [C, N·P], and the sums write that layout themselves (neither nest runs), flat over
 * 7×7 planes with a bias and ReLU6, by rows over 10×10 with a bias and a relu; values against
 * the interpreter, forward, then with the gradients of the input and both weights. */
START_TEST(test_depthwise_then_pointwise) {
  static const int64_t sides[2] = {7, 10};
  for (int c = 0; c < 2; c++) {
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(4, 96, sides[c], sides[c]), TU_ANY, 130 + (uint64_t)c);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(96, 1, 3, 3), TU_ANY, 132 + (uint64_t)c);
    lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(96), TU_ANY, 134 + (uint64_t)c);
    lj_tensor *w1 = tu_tensor(LJ_F32, LJ_SHAPE(16, 96, 1, 1), TU_ANY, 136 + (uint64_t)c);
    lj_scope_begin();
    lj_tensor *h = lj_conv2d(x, w, b, NULL, (const int[]){1, 1}, NULL, 96);
    h = c ? lj_relu(h) : lj_clamp(h, 0, 6);
    lj_tensor *y = lj_conv2d(h, w1, NULL, NULL, NULL, NULL, 1);
    ck_assert_msg(y, "%s", lj_last_error());
    char *lowering = lowering_of(1, &y);
    ck_assert_msg(occurrences(lowering, "sums write its output") == 1, "%s", lowering);
    ck_assert_msg(occurrences(lowering, "its planes run flat") == (c ? 0 : 1), "%s", lowering);
    free(lowering);
    tu_check_interp_tol(1, &y, 1e-5, 5e-4); /* sums of 96 products */
    lj_scope_end();
    lj_tensor *leaves[3] = {x, w, w1};
    for (int i = 0; i < 3; i++) ck_assert_int_eq(lj_tensor_set_requires_grad(leaves[i], true), LJ_OK);
    lj_scope_begin();
    h = lj_conv2d(x, w, b, NULL, (const int[]){1, 1}, NULL, 96);
    y = lj_conv2d(c ? lj_relu(h) : lj_clamp(h, 0, 6), w1, NULL, NULL, NULL, NULL, 1);
    lj_tensor *g = tu_tensor(LJ_F32, lj_tensor_ndim(y), lj_tensor_shape(y), TU_ANY, 138 + (uint64_t)c);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
    lj_tensor *outs[4] = {y, lj_tensor_grad(x), lj_tensor_grad(w), lj_tensor_grad(w1)};
    tu_check_interp_tol(4, outs, 1e-5, 5e-4);
    lj_scope_end();
    for (int i = 0; i < 3; i++) lj_tensor_release(leaves[i]);
    lj_tensor_release(b);
  }
}
END_TEST

/* softmax(Q·Kᵀ·s)·V for q, k of [B, M, D] and [B, N, D], v of [B, N, E]. */
static lj_tensor *attention(lj_tensor *q, lj_tensor *k, lj_tensor *v, double scale) {
  return lj_matmul(lj_softmax(lj_mul_scalar(lj_matmul(q, lj_transpose(k, 1, 2)), scale), 2), v);
}

/* Attention, softmax(Q·Kᵀ·s)·V, is one kernel: P·V runs as the trailing product of the kernel
 * that computes Q·Kᵀ and the softmax, on each block of rows after its nests, so P is a LOCAL
 * block and nothing goes through scratch memory. Values against the interpreter on one and
 * two threads (blocks split across tasks), f32 and f64: 37 query rows a matrix (blocks of
 * parts of a matrix), 5 (blocks of several matrices: a call of the routine over rows of two
 * matrices and more), rows of 3000 and 9000 keys (a block of C, the exps and P each up to
 * half of L2, fewer than the 48 rows a matmul's block takes otherwise, still on the stack;
 * in scratch memory for 9000 f64, 8 of whose rows take more), 96 rows of 300 keys (a whole
 * matrix a block, so that its K is packed once: its C takes more than a LOCAL slot's 64 KiB
 * but at most half of L2). Not joined: V one matrix for every row (a weight, which every block
 * would pack again), and the product of a matrix that no nest wrote. Joined, P not LOCAL,
 * where P is an output too. */
START_TEST(test_trailing_product) {
  static const lj_dtype dts[] = {LJ_F32, LJ_F64};
  static const int64_t ms[5] = {37, 5, 40, 40, 96}, ns[5] = {45, 45, 3000, 9000, 300};
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    for (size_t i = 0; i < 2; i++)
      for (int c = 0; c < 5; c++) {
        lj_scope_begin();
        lj_tensor *q = tu_tensor(dts[i], LJ_SHAPE(6, ms[c], 20), TU_ANY, 70 + c);
        lj_tensor *k = tu_tensor(dts[i], LJ_SHAPE(6, ns[c], 20), TU_ANY, 80 + c);
        lj_tensor *v = tu_tensor(dts[i], LJ_SHAPE(6, ns[c], 13), TU_ANY, 90 + c);
        lj_tensor *y = attention(q, k, v, 0.25);
        ljg_graph *opt;
        ljg_program *p = program_of(y, &opt);
        char *text = ljg_program_text(p, opt), *lowering = ljc_lowering_text(p, NULL);
        ck_assert_msg(p->nkernels == 1 && p->kernels[0].tm == 1, "%s", text);
        const ljg_kernel *kr = &p->kernels[0];
        ck_assert_int_eq(kr->tm_n, 13);
        ck_assert_int_eq(kr->tm_k, ns[c]);
        bool local = c != 3 || dts[i] == LJ_F32; /* 8 rows of 9000 f64 take 576 KB */
        ck_assert_msg((p->slots[kr->exprs[kr->tm_a].slot].kind == LJG_SLOT_LOCAL) == local, "%s", text);
        ck_assert_msg((p->scratch_bytes == 0) == local, "%s", text);
        ck_assert(c != 1 || kr->row_block > ms[c]); /* several matrices a block */
        ck_assert_msg(c != 4 || kr->row_block == ms[c], "%s", text);
        ck_assert_msg(strstr(lowering, "the trailing product runs on each block") != NULL, "%s", lowering);
        free(text);
        free(lowering);
        free_program(p, opt);
        tu_check_interp_tol(1, &y, dts[i] == LJ_F32 ? 1e-5 : 1e-12, dts[i] == LJ_F32 ? 1e-5 : 1e-12);
        lj_scope_end();
      }
    lj_shutdown();
  }
  lj_scope_begin();
  lj_tensor *q = tu_tensor(LJ_F32, LJ_SHAPE(4, 37, 20), TU_ANY, 100);
  lj_tensor *k = tu_tensor(LJ_F32, LJ_SHAPE(4, 45, 20), TU_ANY, 101);
  lj_tensor *v = tu_tensor(LJ_F32, LJ_SHAPE(4, 45, 13), TU_ANY, 102);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(45, 13), TU_ANY, 103);
  lj_tensor *shared = attention(q, k, w, 0.25);
  ck_assert_int_eq(lj_graph_kernel_count(1, &shared), 2);
  tu_check_interp_tol(1, &shared, 1e-5, 1e-5);
  lj_tensor *chain = lj_matmul(lj_matmul(q, lj_transpose(k, 1, 2)), v);
  ck_assert_int_eq(lj_graph_kernel_count(1, &chain), 2);
  lj_tensor *s = lj_softmax(lj_mul_scalar(lj_matmul(q, lj_transpose(k, 1, 2)), 0.25), 2);
  lj_tensor *both[2] = {s, lj_matmul(s, v)};
  ljg_graph *opt;
  ljg_program *p = program_of_n(2, both, &opt);
  ck_assert_int_eq(p->nkernels, 1);
  ck_assert_int_eq(p->kernels[0].tm, 1);
  ck_assert_int_eq(p->slots[p->kernels[0].exprs[p->kernels[0].tm_a].slot].kind, LJG_SLOT_OUTPUT);
  free_program(p, opt);
  tu_check_interp_tol(2, both, 1e-5, 1e-5);
  lj_scope_end();
}
END_TEST

/* The gradient of a tensor sliced in three along its last dim, each slice's heads split and
 * moved (a transformer's q, k and v from one projection, [B, T, 3·H·D] read as [B, H, T, D]):
 * autograd pads each slice's gradient with zeros to the whole and adds the three; the adds
 * become one cat of the three parts (pass_simplify.c), whose nests loop over the common
 * refinement of their shape and their reads ([B, T, H, D]), every view one level: one kernel,
 * no division an element. Against the interpreter on one and two threads. */
START_TEST(test_gradient_of_slices) {
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    lj_scope_begin();
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 5, 24), TU_ANY, 120);
    lj_tensor_set_requires_grad(x, true);
    lj_tensor *loss = NULL;
    for (int i = 0; i < 3; i++) {
      lj_tensor *h = lj_reshape(lj_slice(x, 2, 8 * i, 8 * (i + 1), 1), LJ_SHAPE(2, 5, 2, 4));
      h = lj_permute(h, 4, (const int[]){0, 2, 1, 3});
      lj_tensor *r = tu_tensor(LJ_F32, LJ_SHAPE(2, 2, 5, 4), TU_ANY, 121 + i);
      lj_tensor *term = lj_sum(lj_mul(h, r), 0, NULL, false);
      loss = loss ? lj_add(loss, term) : term;
    }
    ck_assert_int_eq(lj_backward(loss), LJ_OK);
    lj_tensor *g = lj_tensor_grad(x);
    ljg_graph *opt;
    ljg_program *p = program_of(g, &opt);
    char *text = ljg_program_text(p, opt);
    ck_assert_msg(p->nkernels == 1 && p->kernels[0].nnests == 3, "%s", text);
    for (int v = 0; v < p->kernels[0].nviews; v++) ck_assert_msg(p->kernels[0].views[v].n == 1, "%s", text);
    free(text);
    free_program(p, opt);
    tu_check_interp_tol(1, &g, 1e-6, 1e-6);
    lj_scope_end();
    lj_shutdown();
  }
}
END_TEST

/* A cat of parts of one shape (a stack of steps) that its first dim would split into fewer
 * than 8 tasks splits the parts' leading dims as rows: task r writes row r of every part. Along
 * the first dim (one task before) and along the second with a first dim of 1; parts of two
 * shapes keep one task. Values against the interpreter on two threads, f32 and i32. */
START_TEST(test_cat_rows) {
  static const int64_t rows[3] = {21, 4, 1};
  tu_init_threads(2);
  for (int c = 0; c < 3; c++) {
    lj_scope_begin();
    lj_tensor *parts[5];
    for (int i = 0; i < 5; i++) {
      lj_dtype dt = i % 2 ? LJ_I32 : LJ_F32;
      lj_tensor *x = c == 0   ? tu_tensor(dt, LJ_SHAPE(3, 7, 33), TU_ANY, 60 + i)
                     : c == 1 ? tu_tensor(dt, LJ_SHAPE(1, 4, 40), TU_ANY, 60 + i)
                              : tu_tensor(dt, LJ_SHAPE(2 + i % 2, 7, 33), TU_ANY, 60 + i);
      parts[i] = lj_cast(lj_abs(x), LJ_F32);
    }
    lj_tensor *y = lj_cat(5, parts, c == 1);
    ljg_graph *opt;
    ljg_program *p = program_of(y, &opt);
    char *text = ljg_program_text(p, opt);
    ck_assert_msg(p->nkernels == 1 && p->kernels[0].ntasks == rows[c], "%s", text);
    ck_assert_int_eq(p->kernels[0].nests[0].row_dims, c < 2 ? 2 : 1);
    free(text);
    free_program(p, opt);
    tu_check_interp_tol(1, &y, 0, 0);
    lj_scope_end();
  }
  lj_shutdown();
}
END_TEST

/* A GPT-2 block, B = 2 sequences of T = 12 tokens, C = 16 wide in H = 2 heads: x + attn(ln(x))
 * (q, k and v sliced from one projection, causal), then that + mlp(ln(that)) with gelu; the
 * gradients of x and of every parameter against the interpreter on one and two threads. It
 * goes through the rewrites of a transformer's backward: the sliced q, k and v's gradients
 * one cat, dK not a transposed copy, the weights' gradients summed over the batch turned. */
START_TEST(test_transformer_block_grads) {
  enum { B = 2, T = 12, C = 16, H = 2 };
  static const int heads[4] = {0, 2, 1, 3};
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    lj_scope_begin();
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(B, T, C), TU_ANY, 130), *p[8], *grads[9];
    static const int64_t rows[4] = {3 * C, C, 4 * C, C}, cols[4] = {C, C, C, 4 * C};
    for (int i = 0; i < 4; i++) p[i] = tu_tensor(LJ_F32, LJ_SHAPE(rows[i], cols[i]), TU_ANY, 131 + i);
    static const int64_t vecs[4] = {C, C, 3 * C, 4 * C}; /* the first norm's weight and bias, two biases */
    for (int i = 0; i < 4; i++) p[4 + i] = tu_tensor(LJ_F32, LJ_SHAPE(vecs[i]), TU_ANY, 135 + i);
    lj_tensor_set_requires_grad(x, true);
    for (int i = 0; i < 8; i++) lj_tensor_set_requires_grad(p[i], true);
    lj_tensor *pos = lj_arange(lj_default_device(), LJ_I64, 0, T, 1);
    lj_tensor *causal = lj_ge(lj_reshape(pos, LJ_SHAPE(T, 1)), lj_reshape(pos, LJ_SHAPE(1, T)));
    lj_tensor *qkv = lj_linear(lj_layer_norm(x, 1, p[4], p[5], 1e-5), p[0], p[6]), *hd[3];
    for (int i = 0; i < 3; i++)
      hd[i] = lj_permute(lj_reshape(lj_slice(qkv, 2, i * C, (i + 1) * C, 1), LJ_SHAPE(B, T, H, C / H)), 4, heads);
    lj_tensor *s = lj_mul_scalar(lj_matmul(hd[0], lj_transpose(hd[1], 2, 3)), 0.35);
    s = lj_where(causal, s, lj_full(lj_default_device(), LJ_F32, 0, NULL, -INFINITY));
    lj_tensor *att = lj_permute(lj_matmul(lj_softmax(s, 3), hd[2]), 4, heads);
    lj_tensor *y = lj_add(x, lj_linear(lj_reshape(att, LJ_SHAPE(B, T, C)), p[1], NULL));
    y = lj_add(y, lj_linear(lj_gelu(lj_linear(lj_layer_norm(y, 1, NULL, NULL, 1e-5), p[2], p[7]), true), p[3], NULL));
    lj_tensor *r = tu_tensor(LJ_F32, LJ_SHAPE(B, T, C), TU_ANY, 139);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, r), 0, NULL, false)), LJ_OK);
    grads[0] = lj_tensor_grad(x);
    for (int i = 0; i < 8; i++) grads[1 + i] = lj_tensor_grad(p[i]);
    /* the gradients reach 2.2e3, whose ulp is 2.4e-4: a sum that cancels to 0.45 beside them
     * keeps an error of that size in any order of its terms (AVX2's order is 2.5e-4 off f64's) */
    tu_check_interp_tol(9, grads, 1e-4, 1e-3);
    lj_scope_end();
    lj_shutdown();
  }
}
END_TEST

/* Multi-head attention's gradients, Q, K, V of [2, 3, 37, 20]: autograd computes K's as
 * the transpose of Qᵀ·dS, a product of [6, 20, 37] reshaped to [2, 3, 20, 37] and transposed
 * back; the transpose goes below the reshape (pass_simplify.c) and the product is turned
 * (pass_matmul.c), dSᵀ·Q, so that it lies as dK does: every kernel is a product, none a copy.
 * Gradients against the interpreter. */
START_TEST(test_attention_grads_unpermuted) {
  lj_scope_begin();
  lj_tensor *in[3], *grads[3];
  for (int i = 0; i < 3; i++) {
    in[i] = tu_tensor(LJ_F32, LJ_SHAPE(2, 3, 37, 20), TU_ANY, 110 + i);
    lj_tensor_set_requires_grad(in[i], true);
  }
  lj_tensor *s = lj_mul_scalar(lj_matmul(in[0], lj_transpose(in[1], 2, 3)), 0.25);
  lj_tensor *y = lj_matmul(lj_softmax(s, 3), in[2]);
  lj_tensor *r = tu_tensor(LJ_F32, LJ_SHAPE(2, 3, 37, 20), TU_ANY, 113);
  ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, r), 0, NULL, false)), LJ_OK);
  for (int i = 0; i < 3; i++) grads[i] = lj_tensor_grad(in[i]);
  ljg_graph *opt;
  ljg_program *p = program_of_n(3, grads, &opt);
  char *text = ljg_program_text(p, opt);
  for (int k = 0; k < p->nkernels; k++) ck_assert_msg(p->kernels[k].kind == LJG_K_MATMUL, "%s", text);
  free(text);
  free_program(p, opt);
  tu_check_interp_tol(3, grads, 1e-4, 1e-4);
  lj_scope_end();
}
END_TEST

/* A convolution's pooling joins the matmul kernel that computes the convolution (B packed from
 * the image, test_conv_implicit_gemm): C's rows are
 * the (n, c) planes the pooling's im2col reads, so the kernel computes a block of them, adds
 * the bias (when there is one), cuts the block's planes into windows and reduces them, the
 * image and the windows of the block on the kernel's stack instead of a whole tensor each in
 * scratch memory. Values against the interpreter with blocks split across threads: max-pool
 * 2x2 and avg-pool 3x3 stride 2 padding 1, with a bias and without (then the im2col reads C
 * itself), f32 and f64. A block is the matmul's (48 rows here): the windows of f64 images, and
 * the overlapping windows (9 values per output), take more than the stack holds and stay in
 * scratch memory. */
START_TEST(test_conv_pool_row_fusion) {
  static const lj_dtype dts[] = {LJ_F32, LJ_F64};
  static const int k2[2] = {2, 2}, k3[2] = {3, 3}, s2[2] = {2, 2}, p1[2] = {1, 1};
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++)
    for (int variant = 0; variant < 4; variant++) {
      bool bias = variant & 1, avg = variant & 2;
      lj_tensor *x = tu_tensor(dts[i], LJ_SHAPE(8, 4, 16, 20), TU_ANY, 40 + variant);
      lj_tensor *w = tu_tensor(dts[i], LJ_SHAPE(12, 4, 3, 3), TU_ANY, 50 + variant);
      lj_tensor *b = bias ? tu_tensor(dts[i], LJ_SHAPE(12), TU_ANY, 60 + variant) : NULL;
      lj_scope_begin();
      lj_tensor *c = lj_conv2d(x, w, b, NULL, p1, NULL, 1);
      lj_tensor *y = lj_relu(avg ? lj_avg_pool2d(c, k3, s2, p1) : lj_max_pool2d(c, k2, NULL, NULL));
      ljg_graph *opt;
      ljg_program *p = program_of(y, &opt);
      ck_assert_int_eq(p->nkernels, 1); /* the convolution packs B from the image: no im2col */
      const ljg_kernel *k = &p->kernels[0];
      ck_assert_int_eq(k->kind, LJG_K_MATMUL);
      ck_assert_int_eq(k->mm_cols, LJG_MM_COLS_B);
      ck_assert_int_eq(k->win_op, LJG_OP_IM2COL);
      ck_assert_int_eq(k->win_at, bias);
      ck_assert_int_gt(k->nnests, k->win_at);
      ck_assert(k->row_block >= 12 && k->row_block < k->ntasks);
      ck_assert_int_eq(p->slots[k->win_out_slot].kind, dts[i] == LJ_F32 && !avg ? LJG_SLOT_LOCAL : LJG_SLOT_TEMP);
      free_program(p, opt);
      double tol = dts[i] == LJ_F32 ? 1e-5 : 1e-12;
      tu_check_interp_tol(1, &y, tol, tol);
      lj_scope_end();
      lj_tensor_release(x);
      lj_tensor_release(w);
      lj_tensor_release(b);
    }
}
END_TEST

/* A convolution with an epilogue and no window after it (a bias and a relu) computes each
 * image's C whole in a block, so that its window is packed from the image once for all its
 * output channels: 64 channels of 56×56, stride 2 (48 rows of C take more than half of L2; a
 * block of as many rows as fit would take two of 32). Values against the interpreter, one and
 * two threads. */
START_TEST(test_conv_epilogue_whole_image) {
  static const int s2[2] = {2, 2}, p1[2] = {1, 1};
  for (int threads = 1; threads <= 2; threads++) {
    tu_init_threads(threads);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 3, 112, 112), TU_ANY, 41);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(64, 3, 3, 3), TU_ANY, 42);
    lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(64), TU_ANY, 43);
    lj_scope_begin();
    lj_tensor *y = lj_relu(lj_conv2d(x, w, b, s2, p1, NULL, 1));
    ljg_graph *opt;
    ljg_program *p = program_of(y, &opt);
    ck_assert_int_eq(p->nkernels, 1);
    ck_assert_int_eq(p->kernels[0].mm_cols, LJG_MM_COLS_B);
    ck_assert_int_eq(p->kernels[0].row_block, 64);
    free_program(p, opt);
    tu_check_interp_tol(1, &y, 1e-5, 1e-5); /* sums of 27 products */
    lj_scope_end();
    lj_tensor_release(x);
    lj_tensor_release(w);
    lj_tensor_release(b);
    lj_shutdown();
  }
}
END_TEST

/* Implicit GEMM: a convolution's matmul packs B's panels from the image, and no im2col is
 * stored. Values against the interpreter, f32 and f64, for windows read as runs of the image
 * (stride 1 and "same" padding, with dilation) and gathered (stride 2, no padding, an even
 * window, an image read through a transpose); a K of 810 in two blocks; 35 and 9 columns (one
 * panel and its edge); batch 1. A 1x1 window of stride 1 and no padding is a plain matmul:
 * its im2col is the image reshaped (4×4 positions: images side by side would fill no more
 * lanes, test_conv_1x1_side_by_side). */
START_TEST(test_conv_implicit_gemm) {
  static const struct {
    int64_t n, c, h, w, oc;
    int k, s, p, d;
    bool transposed;
  } cases[] = {
      {2, 3, 5, 7, 5, 3, 1, 1, 1, false}, {1, 1, 28, 28, 8, 3, 1, 1, 1, false}, {3, 90, 6, 6, 7, 3, 1, 1, 1, false},
      {2, 4, 9, 11, 6, 3, 2, 1, 1, false}, {2, 3, 8, 8, 4, 3, 1, 2, 2, false}, {2, 3, 8, 8, 4, 3, 1, 0, 1, false},
      {2, 5, 7, 5, 3, 5, 1, 2, 1, false},  {2, 2, 4, 4, 3, 1, 1, 0, 1, false}, {2, 3, 10, 9, 4, 2, 1, 0, 1, false},
      {2, 3, 6, 9, 4, 3, 1, 1, 1, true},
  };
  static const lj_dtype dts[] = {LJ_F32, LJ_F64};
  for (size_t t = 0; t < sizeof dts / sizeof *dts; t++)
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      lj_tensor *x = tu_tensor(dts[t], LJ_SHAPE(cases[i].n, cases[i].c, cases[i].h, cases[i].w), TU_ANY, 90 + i);
      lj_tensor *w = tu_tensor(dts[t], LJ_SHAPE(cases[i].oc, cases[i].c, cases[i].k, cases[i].k), TU_ANY, 110 + i);
      int s[2] = {cases[i].s, cases[i].s}, pad[2] = {cases[i].p, cases[i].p}, d[2] = {cases[i].d, cases[i].d};
      lj_scope_begin();
      lj_tensor *img = cases[i].transposed ? lj_permute(x, 4, (const int[]){0, 1, 3, 2}) : x;
      lj_tensor *y = lj_conv2d(img, w, NULL, s, pad, d, 1);
      ljg_graph *opt;
      ljg_program *p = program_of(y, &opt);
      int cols = cases[i].k == 1 ? 0 : LJG_MM_COLS_B; /* 1x1: the image reshaped is B */
      ck_assert_msg(p->nkernels == 1 && p->kernels[0].kind == LJG_K_MATMUL && p->kernels[0].mm_cols == cols,
                    "case %zu: %d kernels", i, p->nkernels);
      free_program(p, opt);
      double tol = dts[t] == LJ_F32 ? 1e-4 : 1e-12;
      tu_check_interp_tol(1, &y, tol, tol);
      lj_scope_end();
      lj_tensor_release(x);
      lj_tensor_release(w);
    }
}
END_TEST

/* A 1×1 convolution without padding over images whose output positions leave more than a tenth
 * of a last panel's lanes empty (7×7: 49 of 64; 3×3, 1×1; of stride 2, 7×7 of 13×13) is one
 * product of the weight and the images side by side: one matmul of O by N·H·W (of 1×1 images,
 * its transpose). With a bias and a relu, f32 and f64, on one and two threads, against the
 * images one at a time, and with its input, weight and bias gradients against the interpreter;
 * 5×6 (30 of 32 lanes), 4×4 and, of stride 2, 8×8 positions keep a product per image. Of bf16
 * images, the copy side by side is of bf16 values, whose product multiplies bf16 pairs (its
 * operands bf16 LOADs where the target has the instruction). */
START_TEST(test_conv_1x1_side_by_side) {
  static const int64_t xs[][4] = {{6, 24, 7, 7},   {3, 16, 3, 3}, {5, 8, 1, 1},
                                  {2, 9, 5, 6},    {3, 16, 4, 4}, {3, 16, 13, 13},
                                  {2, 8, 16, 16}};
  static const int strides[] = {1, 1, 1, 1, 1, 2, 2};
  enum { NCASES = sizeof xs / sizeof *xs };
  for (int threads = 1; threads <= 2; threads++) {
    lj_shutdown();
    tu_init_threads(threads);
    for (int i = 0; i < 2 * NCASES; i++) {
      const int64_t *x_shape = xs[i / 2];
      lj_dtype dt = i & 1 ? LJ_F64 : LJ_F32;
      int st = strides[i / 2];
      const int stride[2] = {st, st};
      int64_t N = x_shape[0], HW = ((x_shape[2] - 1) / st + 1) * ((x_shape[3] - 1) / st + 1), O = 20;
      lj_tensor *x = tu_tensor(dt, 4, x_shape, TU_ANY, 160 + (uint64_t)i);
      lj_tensor *w = tu_tensor(dt, LJ_SHAPE(O, x_shape[1], 1, 1), TU_ANY, 170 + (uint64_t)i);
      lj_tensor *b = tu_tensor(dt, LJ_SHAPE(O), TU_ANY, 180 + (uint64_t)i);
      lj_tensor *leaves[3] = {x, w, b};
      for (int l = 0; l < 3; l++) ck_assert_int_eq(lj_tensor_set_requires_grad(leaves[l], true), LJ_OK);
      lj_scope_begin();
      lj_tensor *y = lj_relu(lj_conv2d(x, w, b, stride, NULL, NULL, 1));
      ljg_graph *opt;
      ljg_program *p = program_of(y, &opt);
      int matmuls = 0;
      for (int k = 0; k < p->nkernels; k++)
        if (p->kernels[k].kind == LJG_K_MATMUL) {
          matmuls++;
          const ljg_kernel *mk = &p->kernels[k];
          int64_t lanes = (HW + 15) / 16 * 16;
          bool side_by_side = 10 * (lanes - HW) > lanes; /* one matrix of O by N·HW (or its transpose) */
          bool shaped =
              side_by_side ? mk->mm_b == 1 && mk->mm_m * mk->mm_n == O * N * HW : mk->mm_b == N && mk->mm_n == HW;
          ck_assert_msg(shaped, "case %d: %lld matrices of %lld x %lld", i, (long long)mk->mm_b, (long long)mk->mm_m,
                        (long long)mk->mm_n);
        }
      ck_assert_int_eq(matmuls, 1);
      free_program(p, opt);
      /* against the images one at a time (a product each) */
      lj_tensor *parts[8];
      for (int64_t n = 0; n < N; n++)
        parts[n] = lj_relu(lj_conv2d(lj_detach(lj_slice(x, 0, n, n + 1, 1)), lj_detach(w), lj_detach(b), stride, NULL,
                                     NULL, 1));
      lj_tensor *gap = lj_cast(lj_amax(lj_abs(lj_sub(lj_detach(y), lj_cat((int)N, parts, 0))), 0, NULL, false), LJ_F64);
      double most = -1;
      ck_assert_int_eq(lj_tensor_to_host(gap, &most, sizeof most), LJ_OK);
      ck_assert_msg(most >= 0 && most <= (dt == LJ_F32 ? 1e-5 : 1e-12), "case %d: %g from the images one at a time", i,
                    most);
      lj_tensor *g = tu_tensor(dt, lj_tensor_ndim(y), lj_tensor_shape(y), TU_ANY, 190 + (uint64_t)i);
      ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
      lj_tensor *outs[4] = {y, lj_tensor_grad(x), lj_tensor_grad(w), lj_tensor_grad(b)};
      double tol = dt == LJ_F32 ? 1e-4 : 1e-12; /* the weight's gradient sums up to 294 products */
      tu_check_interp_tol(4, outs, tol, tol);
      lj_tensor_release(g);
      lj_scope_end();
      for (int l = 0; l < 3; l++) lj_tensor_release(leaves[l]);
    }
  }
  /* bf16: the images copied side by side in bf16, which a product of bf16 pairs reads */
  lj_tensor *x = tu_tensor(LJ_BF16, LJ_SHAPE(4, 16, 7, 7), TU_ANY, 200);
  lj_tensor *w = tu_tensor(LJ_BF16, LJ_SHAPE(20, 16, 1, 1), TU_ANY, 201);
  lj_tensor *y = lj_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
  ljg_graph *opt;
  ljg_program *p = program_with(1, &y, &(ljg_fuse_options){.bf16_dot = true}, &opt);
  int matmuls = 0;
  for (int k = 0; k < p->nkernels; k++) {
    const ljg_kernel *mk = &p->kernels[k];
    if (mk->kind != LJG_K_MATMUL) continue;
    matmuls++;
    ck_assert(mk->mm_b == 1 && mk->exprs[mk->mm_a].dtype == LJ_BF16 && mk->exprs[mk->mm_bm].dtype == LJ_BF16);
  }
  ck_assert_int_eq(matmuls, 1);
  free_program(p, opt);
  tu_check_interp_tol(1, &y, tu_rtol(LJ_BF16), 1e-2);
  lj_tensor_release(y), lj_tensor_release(x), lj_tensor_release(w);
}
END_TEST

/* A window whose padded image is too tall for the packers' i32 lane arithmetic is stored as
 * an im2col and read as it lies (the program is only built: its output would be 14 GB). */
START_TEST(test_conv_implicit_gemm_limits) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(1, 1, 1, 1), TU_ANY, 122);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(1, 1, 3, 1), TU_ANY, 123);
  static const int pad[2] = {600000000, 0};
  lj_scope_begin();
  lj_tensor *y = lj_conv2d(x, w, NULL, NULL, pad, NULL, 1);
  ck_assert_ptr_nonnull(y);
  expect_conv_kernels(1, &y, 1, LJG_MM_COLS_NONE, 1);
  lj_scope_end();
  lj_tensor_release(x);
  lj_tensor_release(w);
}
END_TEST

/* An im2col that something else reads too is stored, and the convolution still packs from
 * the image: a 3x3 convolution and a 3x3 average pooling (stride 1, padding 1) of one image
 * share their im2col node. */
START_TEST(test_conv_implicit_gemm_shared_cols) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 3, 6, 7), TU_ANY, 120);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(4, 3, 3, 3), TU_ANY, 121);
  static const int k3[2] = {3, 3}, s1[2] = {1, 1}, p1[2] = {1, 1};
  lj_scope_begin();
  lj_tensor *out[2] = {lj_conv2d(x, w, NULL, NULL, p1, NULL, 1), lj_avg_pool2d(x, k3, s1, p1)};
  expect_conv_kernels(2, out, 1, LJG_MM_COLS_B, 1);
  tu_check_interp_tol(2, out, 1e-5, 1e-5);
  lj_scope_end();
  lj_tensor_release(x);
  lj_tensor_release(w);
}
END_TEST

/* In training the weight gradient, one matmul_sum turned to Σ cols·dYᵀ, packs its A (the
 * im2col) from the image too, a block of rows at a time, so no im2col is stored. Values of
 * the output and the weight gradient against the interpreter, f32 and f64: one or eight
 * channels (a K of 9 or 72 for the convolution, as many rows for the gradient: less than a
 * tile, and whole tiles), 12 channels (108 rows: two blocks of rows), 899 window positions (K
 * in two blocks), stride 2 (gathered) and dilation 2 (runs). */
START_TEST(test_conv_implicit_gemm_training) {
  static const struct {
    int64_t c, h, w;
    int s, p, d;
  } cases[] = {{1, 9, 10, 1, 1, 1}, {8, 9, 10, 1, 1, 1},  {12, 7, 9, 1, 1, 1},
               {3, 29, 31, 1, 1, 1}, {4, 9, 11, 2, 1, 1}, {3, 8, 8, 1, 2, 2}};
  for (int i = 0; i < 12; i++) {
    int64_t c = cases[i / 2].c;
    lj_dtype dt = i & 1 ? LJ_F64 : LJ_F32;
    lj_tensor *x = tu_tensor(dt, LJ_SHAPE(3, c, cases[i / 2].h, cases[i / 2].w), TU_ANY, 130 + i);
    lj_tensor *w = tu_tensor(dt, LJ_SHAPE(6, c, 3, 3), TU_ANY, 140 + i);
    lj_tensor_set_requires_grad(w, true);
    lj_scope_begin();
    int s2[2] = {cases[i / 2].s, cases[i / 2].s}, pad[2] = {cases[i / 2].p, cases[i / 2].p};
    int d2[2] = {cases[i / 2].d, cases[i / 2].d};
    lj_tensor *y = lj_conv2d(x, w, NULL, s2, pad, d2, 1);
    lj_tensor *g = tu_tensor(dt, lj_tensor_ndim(y), lj_tensor_shape(y), TU_ANY, 150);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
    lj_tensor *out[2] = {y, lj_tensor_grad(w)};
    ljg_graph *opt;
    ljg_program *p = program_of_n(2, out, &opt);
    int im2cols, matmuls[3];
    conv_kernels(p, &im2cols, matmuls);
    ck_assert_int_eq(im2cols, 0);
    ck_assert_int_eq(matmuls[LJG_MM_COLS_NONE], 0);
    ck_assert_int_eq(matmuls[LJG_MM_COLS_A], 1);
    ck_assert_int_eq(matmuls[LJG_MM_COLS_B], 1);
    free_program(p, opt);
    double tol = dt == LJ_F32 ? 1e-4 : 1e-12;
    tu_check_interp_tol(2, out, tol, tol);
    lj_tensor_release(g);
    lj_scope_end();
    lj_tensor_release(x);
    lj_tensor_release(w);
  }
}
END_TEST

/* A grouped convolution is one of each group's channels of an image ([N·G, C/G, H, W], a
 * view of the image): its matmul packs B from that image too, as one of a single group does,
 * rather than reading an im2col of every image stored whole (ResNeXt's 32 groups of 4
 * channels at batch 32, 28×28, one thread: 12.6-13.8 -> 7.8 ms forward). f32 and f64, 2 and 4
 * groups, stride 1 and 2, with the gradients of the image and the weight, against the
 * interpreter. */
START_TEST(test_conv_grouped_implicit_gemm) {
  for (int i = 0; i < 8; i++) {
    lj_dtype dt = i & 1 ? LJ_F64 : LJ_F32;
    int groups = i & 2 ? 4 : 2, stride[2] = {i & 4 ? 2 : 1, i & 4 ? 2 : 1};
    lj_tensor *x = tu_tensor(dt, LJ_SHAPE(3, 8, 9, 10), TU_ANY, 160 + i);
    lj_tensor *w = tu_tensor(dt, LJ_SHAPE(12, 8 / groups, 3, 3), TU_ANY, 170 + i);
    lj_scope_begin();
    lj_tensor *y = lj_conv2d(x, w, NULL, stride, (const int[]){1, 1}, NULL, groups);
    expect_conv_kernels(1, &y, 0, LJG_MM_COLS_B, 1);
    lj_tensor_set_requires_grad(x, true);
    lj_tensor_set_requires_grad(w, true);
    lj_tensor *yg = lj_conv2d(x, w, NULL, stride, (const int[]){1, 1}, NULL, groups);
    lj_tensor *g = tu_tensor(dt, lj_tensor_ndim(yg), lj_tensor_shape(yg), TU_ANY, 180);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(yg, g), 0, NULL, false)), LJ_OK);
    lj_tensor *out[4] = {y, yg, lj_tensor_grad(x), lj_tensor_grad(w)};
    double tol = dt == LJ_F32 ? 1e-4 : 1e-12;
    tu_check_interp_tol(4, out, tol, tol);
    lj_scope_end();
    lj_tensor_release(x);
    lj_tensor_release(w);
  }
}
END_TEST

/* A padding of the last two dims is a cat of a cat: one kernel, whose parts write the outer
 * cat's output directly (fuse.c's inner_cat). f32 and f64, both sides padded, one side, a
 * crop on one dim, a pad of the last three dims (three cats, one kernel); a cat along the
 * first dim (a pad of the first and last two: two kernels), or one something else reads too,
 * stays a kernel of its own. Values against the
 * interpreter. */
START_TEST(test_pad_one_kernel) {
  static const struct {
    int npads;
    int64_t pads[8];
    int kernels;
  } cases[] = {{4, {1, 1, 1, 1}, 1}, {4, {0, 2, 3, 0}, 1}, {4, {-1, 2, 1, 1}, 1}, {6, {1, 0, 2, 1, 1, 1}, 1},
               {8, {1, 1, 1, 1, 0, 0, 1, 1}, 2}};
  for (int di = 0; di < 2; di++)
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      lj_dtype dt = di ? LJ_F64 : LJ_F32;
      lj_tensor *x = tu_tensor(dt, LJ_SHAPE(3, 4, 5, 6), TU_ANY, 190 + i);
      lj_scope_begin();
      lj_tensor *y = lj_pad(x, cases[i].npads, cases[i].pads, 0.5);
      ck_assert_ptr_nonnull(y);
      ck_assert_int_eq(lj_graph_kernel_count(1, &y), cases[i].kernels);
      tu_check_interp(1, &y, 0);
      lj_scope_end();
      lj_tensor_release(x);
    }
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 3, 4), TU_ANY, 199);
  lj_scope_begin();
  lj_tensor *inner = lj_cat(2, (lj_tensor *const[]){x, x}, 2);
  lj_tensor *row = lj_full(lj_default_device(), LJ_F32, LJ_SHAPE(2, 1, 8), 2);
  lj_tensor *outer = lj_cat(2, (lj_tensor *const[]){inner, row}, 1);
  lj_tensor *both[2] = {outer, lj_exp(inner)};
  ck_assert_int_eq(lj_graph_kernel_count(1, &outer), 1);
  ck_assert_int_eq(lj_graph_kernel_count(2, both), 3);
  tu_check_interp(2, both, 1e-6);
  lj_scope_end();
  lj_tensor_release(x);
}
END_TEST

/* A small nest that only copies rows of at least 64 bytes (lower.c's copies_rows) copies each
 * with a memcpy: a cat of 16 slices of [5, 40], f32 and bf16, calls llvm.memcpy; one of rows
 * of 8 floats, and one whose parts are read through a transpose, keep their loops. Values
 * against the interpreter. */
START_TEST(test_copy_rows_memcpy) {
  for (int c = 0; c < 4; c++) {
    char path[64];
    tu_init_saving(lj_config_default(), "llvm", path, sizeof path);
    lj_dtype dt = c == 1 ? LJ_BF16 : LJ_F32;
    int64_t cols = c == 2 ? 8 : 40;
    lj_tensor *x = tu_tensor(dt, LJ_SHAPE(16, 5, cols), TU_ANY, 200 + c);
    lj_scope_begin();
    lj_tensor *parts[16];
    for (int i = 0; i < 16; i++) {
      lj_tensor *part = lj_reshape(lj_slice(x, 0, i, i + 1, 1), LJ_SHAPE(5, cols));
      parts[i] = c == 3 ? lj_transpose(lj_reshape(part, LJ_SHAPE(cols, 5)), 0, 1) : part;
    }
    lj_tensor *y = lj_keep(lj_cat(16, parts, 1));
    lj_scope_end();
    tu_check_interp(1, &y, 0);
    char *ir = tu_take_saved(path);
    ck_assert_msg((strstr(ir, "llvm.memcpy") != NULL) == (c < 2), "case %d", c);
    free(ir);
    lj_tensor_release(y);
    lj_tensor_release(x);
    lj_shutdown();
  }
}
END_TEST

/* A row-fused softmax's blocks hold as many rows as the 16 KiB its nests read allow, each
 * slot's rows counted once (the widest nest alone would allow 8 rows of 512): a row of 512
 * f32 reads 4108 bytes (the input, the exps, and the max, sum and reciprocal), so 3 rows; f64,
 * 8216 bytes, 1 row. A log_softmax reads its input and the three scalars: 2060 bytes, 7 rows.
 * Values against the interpreter, an odd row count split across two threads in blocks. */
START_TEST(test_row_block_read_bytes) {
  static const struct {
    lj_dtype dt;
    bool log;
    int64_t block;
  } cases[] = {{LJ_F32, false, 3}, {LJ_F64, false, 1}, {LJ_F32, true, 7}};
  lj_config cfg = lj_config_default();
  cfg.num_threads = 2;
  lj_init(&cfg);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    lj_tensor *x = tu_tensor(cases[i].dt, LJ_SHAPE(37, 512), TU_ANY, 5);
    lj_tensor *y = cases[i].log ? lj_log_softmax(x, 1) : lj_softmax(x, 1);
    ljg_graph *opt;
    ljg_program *p = program_of(y, &opt);
    ck_assert_int_eq(p->nkernels, 1);
    ck_assert_int_eq(p->kernels[0].row_block, cases[i].block);
    free_program(p, opt);
    tu_check1(y, tu_rtol(cases[i].dt));
    lj_tensor_release(x);
  }
}
END_TEST

/* x's gradient (x takes requires_grad) from sum(conv2d(x, w) * g), g of the output's shape
 * from seed, in the caller's scope. */
static lj_tensor *conv_input_grad(lj_tensor *x, lj_tensor *w, const int *stride, const int *pad, uint64_t seed) {
  lj_tensor_set_requires_grad(x, true);
  lj_tensor *y = lj_conv2d(x, w, NULL, stride, pad, NULL, 1);
  lj_tensor *g = tu_tensor(lj_tensor_dtype(y), lj_tensor_ndim(y), lj_tensor_shape(y), TU_ANY, seed);
  ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
  return lj_tensor_grad(x);
}

/* A convolution's input gradient: the matmul Wᵀ·dY that computes the gradient's columns and
 * the col2im that adds them into the image are one kernel whose tasks are image planes, each
 * KH·KW rows of C; a block is whole images, their columns on the kernel's stack (never in
 * scratch memory). Values against the interpreter with the planes split across threads
 * (mid-image), stride 1 with padding and stride 2 without, f32 and f64. */
START_TEST(test_conv_input_gradient_fusion) {
  static const lj_dtype dts[] = {LJ_F32, LJ_F64};
  static const int p1[2] = {1, 1}, s2[2] = {2, 2};
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++)
    for (int strided = 0; strided < 2; strided++) {
      lj_tensor *x = tu_tensor(dts[i], LJ_SHAPE(5, 6, 20, 22), TU_ANY, 80 + strided);
      lj_tensor *w = tu_tensor(dts[i], LJ_SHAPE(20, 6, 3, 3), TU_ANY, 82 + strided);
      lj_scope_begin();
      lj_tensor *dx = strided ? conv_input_grad(x, w, s2, NULL, 84) : conv_input_grad(x, w, NULL, p1, 84);
      ljg_graph *opt;
      ljg_program *p = program_of(dx, &opt);
      ck_assert_int_eq(p->nkernels, 1);
      const ljg_kernel *k = &p->kernels[0];
      ck_assert(k->kind == LJG_K_MATMUL && k->win_op == LJG_OP_COL2IM && k->win_at == 0 && k->nnests == 0);
      ck_assert_int_eq(k->mm_task_rows, 9);
      ck_assert_int_eq(k->ntasks, 5 * 6);
      /* whole images up to 256 KiB of columns: 95 (190) KiB an image in f32 (f64), 19 (38) strided */
      ck_assert_int_eq(k->row_block, strided ? 30 : dts[i] == LJ_F32 ? 12 : 6);
      ck_assert_int_eq(p->slots[k->mm_out_slot].kind, LJG_SLOT_LOCAL);
      ck_assert_int_eq(p->scratch_bytes, 0);
      free_program(p, opt);
      double tol = dts[i] == LJ_F32 ? 1e-4 : 1e-12; /* sums of 180 products */
      tu_check_interp_tol(1, &dx, tol, tol);
      lj_scope_end();
      lj_tensor_release(x);
      lj_tensor_release(w);
    }
}
END_TEST

/* A convolution's input gradient whose blocks are parts of an image takes a multiple of 8
 * planes (72 rows of C, whole register tiles of 8 rows) where its columns' room gives 9 or
 * more (ResNet-18's 64 -> 128 channels over 56×56: 83 rows of 784 in 256 KiB, 9 planes, 81
 * rows, a last tile of one row), and fewer planes as they come (5 at 112×112, 48 rows of
 * 3136 as parts of the image's 576). Values against the interpreter. */
START_TEST(test_conv_input_gradient_blocks) {
  static const struct {
    int64_t h, block;
  } cases[] = {{56, 8}, {112, 5}};
  for (size_t c = 0; c < 2; c++) {
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 64, cases[c].h, cases[c].h), TU_ANY, 150);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(32, 64, 3, 3), TU_ANY, 151);
    lj_scope_begin();
    lj_tensor *dx = conv_input_grad(x, w, (const int[]){2, 2}, (const int[]){1, 1}, 152);
    ljg_graph *opt;
    ljg_program *p = program_of(dx, &opt);
    ck_assert_int_eq(p->nkernels, 1);
    const ljg_kernel *k = &p->kernels[0];
    ck_assert(k->kind == LJG_K_MATMUL && k->win_op == LJG_OP_COL2IM && k->mm_task_rows == 9);
    ck_assert_int_eq(k->row_block, cases[c].block);
    free_program(p, opt);
    tu_check_interp_tol(1, &dx, 1e-4, 1e-4); /* sums of 32 products */
    lj_scope_end();
    lj_tensor_release(x);
    lj_tensor_release(w);
  }
}
END_TEST

/* A convolution's input gradient of stride 2 gathers each image row from the window rows
 * whose taps reach it (rows and columns by parity, at fixed shifts), summed in registers and
 * interleaved, instead of adding every tap's windows into the image: 3×3 padded by 1
 * (ResNet's), 2×2 padded by 1, 5×5, 7×7 and 4×4 with their paddings, a row of 4 columns (two a
 * parity), rows of 16-lane vectors with masked ends, rows of whole vectors and long rows with
 * plain vectors between, a 3×3 without padding (window rows above and below none); not for an
 * odd image or a column stride of 1. f32 and f64, one and two threads (planes split between
 * them); the lowering's text says which; values against the interpreter. */
START_TEST(test_col2im_rows) {
  static const struct {
    int k, pad, sw;
    int64_t h, w;
    lj_dtype dt;
    bool rows;
  } cases[] = {{3, 1, 2, 20, 22, LJ_F32, true},   {2, 1, 2, 14, 14, LJ_F32, true},  {5, 2, 2, 16, 18, LJ_F64, true},
               {7, 3, 2, 20, 20, LJ_F32, true},   {4, 1, 2, 12, 12, LJ_F64, true},  {3, 1, 2, 6, 4, LJ_F32, true},
               {3, 1, 2, 64, 64, LJ_F32, true},   {3, 1, 2, 130, 130, LJ_F64, true}, {3, 0, 2, 20, 20, LJ_F32, true},
               {3, 0, 2, 11, 13, LJ_F32, false},  {3, 1, 1, 12, 12, LJ_F32, false}};
  for (int threads = 1; threads <= 2; threads++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      tu_init_threads(threads);
      lj_dtype dt = cases[c].dt;
      int64_t cin = cases[c].h > 100 ? 2 : 6;
      lj_tensor *x = tu_tensor(dt, LJ_SHAPE(3, cin, cases[c].h, cases[c].w), TU_ANY, 90 + c);
      lj_tensor *w = tu_tensor(dt, LJ_SHAPE(8, cin, cases[c].k, cases[c].k), TU_ANY, 110 + c);
      lj_scope_begin();
      const int stride[2] = {2, cases[c].sw}, pad[2] = {cases[c].pad, cases[c].pad};
      lj_tensor *dx = conv_input_grad(x, w, stride, pad, 130 + c);
      char *lowering = lowering_of(1, &dx);
      bool rows = strstr(lowering, "gathers each image row from the windows that reach it") != NULL;
      ck_assert_msg(rows == cases[c].rows, "case %zu: %s", c, lowering);
      free(lowering);
      double tol = dt == LJ_F32 ? 1e-4 : 1e-12; /* sums of up to 392 products */
      tu_check_interp_tol(1, &dx, tol, tol);
      lj_scope_end();
      lj_tensor_release(x);
      lj_tensor_release(w);
      lj_shutdown();
    }
}
END_TEST

/* The buffer plan places what a row-fused kernel's nests write like any kernel's output: in
 * scratch memory freed by temps whose last reader has run. sigmoid(x) feeds a matmul whose
 * product feeds a second matmul with a tanh epilogue, which a third matmul reads: the
 * epilogue's result takes sigmoid(x)'s place, so two [200, 64] temps are live at once, never
 * three. */
START_TEST(test_plan_fused_outputs) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(200, 64), TU_ANY, 70);
  lj_tensor *w1 = tu_tensor(LJ_F32, LJ_SHAPE(64, 64), TU_ANY, 71), *w2 = tu_tensor(LJ_F32, LJ_SHAPE(64, 64), TU_ANY, 72);
  lj_tensor *bias = tu_tensor(LJ_F32, LJ_SHAPE(64), TU_ANY, 73);
  lj_scope_begin();
  lj_tensor *t = lj_tanh(lj_add(lj_matmul(lj_matmul(lj_sigmoid(x), w1), w2), bias));
  lj_tensor *y = lj_matmul(t, w1);
  ljg_graph *opt;
  ljg_program *p = program_of(y, &opt);
  ck_assert_int_eq(p->nkernels, 4);
  ck_assert_int_eq(p->kernels[2].kind, LJG_K_MATMUL);
  ck_assert_int_eq(p->kernels[2].nnests, 1);
  int32_t fused = p->kernels[2].nests[0].out_slot, first = p->kernels[0].nests[0].out_slot;
  ck_assert_int_eq(p->slots[fused].kind, LJG_SLOT_TEMP);
  ck_assert_int_eq(p->slots[fused].offset, p->slots[first].offset);
  ck_assert_int_eq(p->scratch_bytes, 2 * 200 * 64 * 4);
  free_program(p, opt);
  tu_check_interp_tol(1, &y, 1e-4, 1e-3); /* sums of 64 products that cancel */
  lj_scope_end();
  lj_tensor_release(x);
  lj_tensor_release(w1);
  lj_tensor_release(w2);
  lj_tensor_release(bias);
}
END_TEST

/* LJ_SYNC_TENSORS_OPBYOP (a sync) and LJ_GET_TENSORS_OPBYOP (a host read): every op its own
 * cached executable with one kernel; the values are the fused program's; a second step
 * compiles nothing. Each switch leaves the other kind of sync fused. */
START_TEST(test_sync_opbyop) {
  enum { FUSED, SYNC_OPBYOP, GET_OPBYOP, MODES };
  double *vals[MODES] = {NULL};
  int64_t n = 0;
  for (int mode = 0; mode < MODES; mode++)
    for (int read_only = 0; read_only < 2; read_only++) {
      lj_config cfg = lj_config_default();
      cfg.sync_tensors_opbyop = mode == SYNC_OPBYOP;
      cfg.get_tensors_opbyop = mode == GET_OPBYOP;
      ck_assert_int_eq(lj_init(&cfg), LJ_OK);
      lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(16, 12), TU_ANY, 1);
      lj_tensor *bias = tu_tensor(LJ_F32, LJ_SHAPE(12), TU_ANY, 2);
      lj_tensor *y = tu_tensor(LJ_F32, LJ_SHAPE(12, 16), TU_ANY, 3);
      bool opbyop = mode == (read_only ? GET_OPBYOP : SYNC_OPBYOP);
      for (int step = 0; step < 2; step++) {
        int64_t s0 = lj_counter_value("SyncTensors"), e0 = lj_counter_value("ExecutedKernels");
        int64_t c0 = lj_counter_value("UncachedCompile");
        lj_tensor *r = chain10(x, bias, y);
        if (!read_only) ck_assert_int_eq(lj_sync(lj_default_device()), LJ_OK);
        double *v = tu_read(r, &n);
        free(vals[mode]);
        vals[mode] = v;
        int64_t syncs = lj_counter_value("SyncTensors") - s0;
        int64_t kernels = lj_counter_value("ExecutedKernels") - e0;
        if (opbyop) { /* at most one kernel per executable (a view of a parameter needs none) */
          ck_assert_int_ge(kernels, 12);
          ck_assert_int_le(kernels, syncs);
        } else {
          ck_assert_int_eq(kernels, 1);
          ck_assert_int_eq(syncs, 1);
        }
        if (step == 1) ck_assert_int_eq(lj_counter_value("UncachedCompile"), c0);
        if (step == 0 && read_only) tu_check_interp(1, &r, 1e-5);
        lj_tensor_release(r);
      }
      lj_shutdown();
    }
  for (int mode = 1; mode < MODES; mode++)
    for (int64_t i = 0; i < n; i++) ck_assert_double_eq_tol(vals[0][i], vals[mode][i], 1e-6);
  for (int mode = 0; mode < MODES; mode++) free(vals[mode]);
}
END_TEST

/* ---- random programs ----------------------------------------------------------------------- */

static uint64_t prog_state = 0xd1b54a32d192ed03ULL;

static int64_t pick(int64_t lo, int64_t hi) { return tu_pick(&prog_state, lo, hi); }

static lj_tensor *pool_pick(lj_tensor **pool, int n) { return pool[pick(0, n - 1)]; }

/* One random op on tensors of the pool, whose first three are the program's inputs (NULL
 * when its arguments do not fit). */
static lj_tensor *random_op(lj_tensor **pool, int n) {
  lj_tensor *a = pool_pick(pool, n), *b = pool_pick(pool, n);
  int nd = lj_tensor_ndim(a);
  int d0 = nd ? (int)pick(0, nd - 1) : 0, d1 = nd ? (int)pick(0, nd - 1) : 0;
  switch (pick(0, 15)) {
  /* the steps of floor division and argmax's ties on inputs only: computed values within a
   * rounding of a step could land on either side */
  case 14: {
    lj_tensor *x = pool[pick(0, 2)], *t = pool[pick(0, 2)], *y = lj_add_scalar(lj_mul(t, t), 1); /* >= 1 */
    return pick(0, 1) ? lj_floor_divide(x, y) : lj_remainder(x, y);
  }
  case 15: return lj_argmax(pool[pick(0, 2)], (int)pick(-3, 2), pick(0, 1));
  case 0: return lj_tanh(a);
  case 1: return lj_sigmoid(lj_mul_scalar(a, 3));
  case 2: return lj_relu(lj_add_scalar(a, -0.25));
  case 3: return pick(0, 1) ? lj_add(a, b) : lj_sub(a, b);
  case 4: return pick(0, 1) ? lj_mul(a, b) : lj_maximum(a, b);
  case 5: return lj_div(a, lj_add_scalar(lj_mul(b, b), 1));
  case 6: {
    int dims[2] = {d0, d1};
    int k = (int)pick(0, d0 == d1 ? 1 : 2);
    bool keep = pick(0, 1);
    return pick(0, 2) == 0 ? lj_amax(a, k, dims, keep) : pick(0, 1) ? lj_sum(a, k, dims, keep) : lj_mean(a, k, dims, keep);
  }
  case 7: return lj_transpose(a, d0, d1);
  case 8: return lj_slice(a, d0, pick(0, 2), pick(2, 20), pick(1, 2));
  case 9: return pick(0, 1) ? lj_matmul(a, b) : lj_matmul(a, lj_transpose(a, -1, -2));
  case 10: return pick(0, 1) ? lj_softmax(a, d0) : lj_log_softmax(a, d0);
  case 11: return lj_cat(2, (lj_tensor *const[]){a, b}, d0);
  case 12: return lj_where(lj_gt_scalar(pool[pick(0, 2)], 0), a, b); /* an input's sign, as below */
  default: return pick(0, 1) ? lj_unsqueeze(a, d0) : lj_reshape(a, LJ_SHAPE(-1));
  }
}

/* Chains of up to 12 ops amplify rounding (a matmul of values in the thousands, then their
 * differences): 50× a float dtype's usual tolerance, 5× for the 16-bit floats, whose own is
 * already loose; integers promote to f32. */
static double program_tol(lj_dtype dt) {
  if (!ljg_dtype_is_float(dt)) dt = LJ_F32;
  return (dt == LJ_BF16 || dt == LJ_F16 ? 5 : 50) * tu_rtol(dt);
}

/* Adds up to `steps` random ops' results to pool (of n, at most cap); the new count. */
static int grow_pool(lj_tensor **pool, int n, int cap, int steps) {
  for (; steps > 0 && n < cap; steps--) {
    lj_tensor *r = random_op(pool, n);
    if (r && lj_tensor_numel(r) > 0 && lj_tensor_numel(r) < 100000)
      pool[n++] = r;
    else
      lj_clear_error();
  }
  return n;
}

/* Checks ts[0..n) against the interpreter within the loosest of their program_tol
 * (integers compare exactly whatever it is). */
static void check_program(int n, lj_tensor *const *ts) {
  double tol = 0;
  for (int i = 0; i < n; i++) tol = fmax(tol, program_tol(lj_tensor_dtype(ts[i])));
  tu_check_interp_tol(n, ts, tol, tol);
}

/* Random programs of 4-12 ops (elementwise with broadcasting, integer division, reductions,
 * argmax, views, matmuls, softmax, cat, where) over f32, f64, bf16, i32 or i64 inputs of
 * random sizes: whatever fusion and the row, loop and GEMM kernels make of them, the last
 * three values agree with the interpreter (integers exactly, floats within program_tol);
 * the last third of them with fusion off (one kernel per op). */
START_TEST(test_random_programs) {
  static const int64_t sizes[] = {1, 2, 3, 5, 8, 17, 33};
  int checked = 0;
  for (int prog = 0; prog < 150; prog++) {
    if (prog == 100) {
      lj_shutdown();
      lj_config cfg = lj_config_default();
      cfg.disable_fusion = true;
      ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    }
    lj_scope_begin();
    int64_t s[3] = {sizes[pick(0, 6)], sizes[pick(0, 6)], sizes[pick(0, 6)]};
    static const lj_dtype dts[] = {LJ_F32, LJ_F32, LJ_F64, LJ_BF16, LJ_I32, LJ_I64};
    lj_dtype dt = dts[pick(0, 5)];
    lj_tensor *pool[16];
    int n = 0;
    pool[n++] = tu_tensor(dt, LJ_SHAPE(s[0], s[1], s[2]), TU_UNIT, (uint64_t)prog);
    pool[n++] = tu_tensor(dt, LJ_SHAPE(s[1], s[2]), TU_UNIT, (uint64_t)prog + 100);
    pool[n++] = tu_tensor(dt, LJ_SHAPE(s[0], 1, s[2]), TU_UNIT, (uint64_t)prog + 200);
    int inputs = n;
    n = grow_pool(pool, n, 16, (int)pick(4, 12));
    if (n - inputs >= 1) {
      int roots = n - inputs < 3 ? n - inputs : 3;
      check_program(roots, pool + n - roots);
      checked++;
    }
    lj_scope_end();
  }
  ck_assert_int_ge(checked, 120);
}
END_TEST

/* Generates random program `prog` (from the generator's current state) and returns its last
 * value, kept beyond the scope (NULL if the program computed nothing). */
static lj_tensor *random_program(int prog) {
  static const int64_t sizes[] = {1, 2, 3, 5, 8, 17, 33};
  lj_scope_begin();
  int64_t s[3] = {sizes[pick(0, 6)], sizes[pick(0, 6)], sizes[pick(0, 6)]};
  lj_tensor *pool[16];
  int n = 0;
  pool[n++] = tu_tensor(LJ_F32, LJ_SHAPE(s[0], s[1], s[2]), TU_UNIT, (uint64_t)prog);
  pool[n++] = tu_tensor(LJ_F32, LJ_SHAPE(s[1], s[2]), TU_UNIT, (uint64_t)prog + 100);
  pool[n++] = tu_tensor(LJ_F32, LJ_SHAPE(s[0], 1, s[2]), TU_UNIT, (uint64_t)prog + 200);
  n = grow_pool(pool, n, 16, (int)pick(4, 12));
  lj_tensor *last = n > 3 ? lj_keep(pool[n - 1]) : NULL;
  lj_scope_end();
  return last;
}

/* Random programs compiled into the persistent cache, then loaded from it by a new runtime:
 * the same bits, nothing compiled the second time (every kernel feature the programs use
 * survives the disk format). */
START_TEST(test_random_programs_from_disk) {
  char dir[] = "/tmp/lj_test_disk_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  uint64_t start_state = prog_state;
  double *first[30] = {0};
  for (int pass = 0; pass < 2; pass++) {
    lj_config cfg = lj_config_default();
    cfg.cache_dir = dir;
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    prog_state = start_state;
    int64_t compiles = lj_counter_value("UncachedCompile");
    for (int prog = 0; prog < 30; prog++) {
      lj_tensor *r = random_program(prog);
      if (!r) continue;
      int64_t cnt;
      double *v = tu_read(r, &cnt);
      if (pass == 0) {
        first[prog] = v;
      } else {
        ck_assert_msg(memcmp(v, first[prog], (size_t)cnt * sizeof *v) == 0, "program %d differs from disk", prog);
        free(v);
      }
      lj_tensor_release(r);
    }
    if (pass == 1) ck_assert_int_eq(lj_counter_value("UncachedCompile"), compiles);
    lj_shutdown();
  }
  for (int prog = 0; prog < 30; prog++) free(first[prog]);
  tu_remove_dir(dir);
}
END_TEST

/* Random programs over several syncs: each round's ops read the values earlier rounds
 * computed (now device data, some of them views of others), and an input may be given a new
 * value of its shape with lj_assign before lj_sync (donating its buffer); every round's last
 * values agree with the interpreter. */
START_TEST(test_random_programs_across_syncs) {
  lj_device *d = lj_default_device();
  int checked = 0;
  for (int prog = 0; prog < 20; prog++) {
    lj_scope_begin();
    int64_t s0 = pick(1, 9), s1 = pick(1, 9);
    lj_tensor *pool[40];
    int n = 0;
    pool[n++] = tu_tensor(LJ_F32, LJ_SHAPE(s0, s1, s1), TU_UNIT, (uint64_t)prog);
    pool[n++] = tu_tensor(LJ_F32, LJ_SHAPE(s1, s1), TU_UNIT, (uint64_t)prog + 100);
    pool[n++] = tu_tensor(LJ_F32, LJ_SHAPE(s0, 1, s1), TU_UNIT, (uint64_t)prog + 200);
    for (int round = 0; round < 4 && n < 32; round++) {
      int before = n;
      n = grow_pool(pool, n, 40, (int)pick(2, 5));
      if (n == before) continue;
      lj_tensor *last = pool[n - 1];
      int k = (int)pick(0, 2);
      if (lj_tensor_ndim(last) == lj_tensor_ndim(pool[k]) &&
          memcmp(lj_tensor_shape(last), lj_tensor_shape(pool[k]), (size_t)lj_tensor_ndim(last) * sizeof(int64_t)) == 0 &&
          lj_tensor_dtype(last) == lj_tensor_dtype(pool[k]))
        ck_assert_int_eq(lj_assign(pool[k], lj_tanh(last)), LJ_OK);
      int roots = n - before < 2 ? n - before : 2;
      check_program(roots, pool + n - roots);
      ck_assert_int_eq(lj_sync(d), LJ_OK); /* the assigned input, donated */
      checked++;
    }
    lj_scope_end();
  }
  ck_assert_int_ge(checked, 40);
}
END_TEST

/* Random small CNN training steps: a convolution of random geometry (kernel 1-3, stride 1-2,
 * padding 0-2, dilation 1-2, bias or not), a random chain of relu, tanh, max and average
 * pooling, then a linear layer and the NLL loss; the loss and the gradients of the input, the
 * convolution's and the linear layer's weights agree with the interpreter. */
START_TEST(test_random_training_steps) {
  lj_device *d = lj_default_device();
  int checked = 0;
  for (int prog = 0; prog < 40; prog++) {
    lj_scope_begin();
    int64_t N = pick(1, 3), C = pick(1, 3), H = pick(4, 12), W = pick(4, 12), O = pick(1, 5), K = pick(1, 3);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(N, C, H, W), TU_UNIT, (uint64_t)prog);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(O, C, K, K), TU_UNIT, (uint64_t)prog + 1);
    lj_tensor *b = pick(0, 1) ? tu_tensor(LJ_F32, LJ_SHAPE(O), TU_UNIT, (uint64_t)prog + 2) : NULL;
    lj_tensor *leaves[3] = {x, w, NULL};
    for (int i = 0; i < 2; i++) lj_tensor_set_requires_grad(leaves[i], true);
    int stride[2] = {(int)pick(1, 2), (int)pick(1, 2)}, pad[2] = {(int)pick(0, 2), (int)pick(0, 2)};
    int dil[2] = {(int)pick(1, 2), (int)pick(1, 2)};
    lj_tensor *y = lj_conv2d(x, w, b, stride, pad, dil, 1);
    for (int step = (int)pick(1, 3); y && step > 0; step--) {
      int k[2] = {(int)pick(1, 3), (int)pick(1, 3)}, s[2] = {(int)pick(1, 2), (int)pick(1, 2)};
      switch (pick(0, 3)) {
      case 0: y = lj_relu(y); break;
      case 1: y = lj_tanh(y); break;
      case 2: y = lj_max_pool2d(y, k, s, NULL); break;
      default: y = lj_avg_pool2d(y, k, s, NULL); break;
      }
    }
    lj_tensor *loss = NULL;
    if (y && lj_tensor_numel(y) > 0) {
      lj_tensor *f = lj_flatten(y, 1, 3);
      lj_tensor *w2 = tu_tensor(LJ_F32, LJ_SHAPE(4, lj_tensor_shape(f)[1]), TU_UNIT, (uint64_t)prog + 3);
      lj_tensor_set_requires_grad(w2, true);
      leaves[2] = w2;
      int64_t t[3] = {pick(0, 3), pick(0, 3), pick(0, 3)};
      lj_tensor *target = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(N), t);
      loss = lj_nll_loss(lj_log_softmax(lj_linear(f, w2, NULL), 1), target, LJ_REDUCE_MEAN);
    }
    if (loss) {
      ck_assert_int_eq(lj_backward(loss), LJ_OK);
      lj_tensor *check[4] = {loss, lj_tensor_grad(x), lj_tensor_grad(w), lj_tensor_grad(leaves[2])};
      tu_check_interp_tol(4, check, 1e-4, 1e-5);
      checked++;
    } else {
      lj_clear_error(); /* a window larger than its padded input */
    }
    lj_scope_end(); /* the leaves and their gradients go with the scope */
  }
  ck_assert_int_ge(checked, 25);
}
END_TEST

/* An index tensor of the given shape with values in [0, hi) (i64). */
static lj_tensor *valid_index(int ndim, const int64_t *shape, int64_t hi) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  int64_t *v = malloc((size_t)(n + 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = pick(0, hi - 1);
  lj_tensor *t = lj_tensor_from_host(lj_default_device(), LJ_I64, ndim, shape, v);
  free(v);
  return t;
}

/* One random nn op on a 4-D tensor (NULL when its arguments do not fit). */
static lj_tensor *random_nn_op(lj_tensor *y) {
  const int64_t *s = lj_tensor_shape(y);
  int dim = (int)pick(0, 3);
  switch (pick(0, 9)) {
  case 0: return lj_pad(y, 4, (const int64_t[]){pick(-1, 2), pick(0, 2), pick(0, 2), pick(-1, 1)}, 0.5);
  case 1: return lj_batch_norm(y, NULL, NULL, pick(0, 1) ? tu_tensor(LJ_F32, LJ_SHAPE(s[1]), TU_UNIT, 31) : NULL, NULL, true,
                               0.1, 1e-5);
  case 2: {
    int nd = (int)pick(1, 2);
    lj_tensor *w = pick(0, 1) ? tu_tensor(LJ_F32, nd, s + 4 - nd, TU_UNIT, 32) : NULL;
    return lj_layer_norm(y, nd, w, w ? tu_tensor(LJ_F32, nd, s + 4 - nd, TU_UNIT, 33) : NULL, 1e-5);
  }
  case 3: {
    int64_t g = s[1] % 2 == 0 ? 2 : 1;
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(2 * g, s[1] / g, pick(1, 3), pick(1, 3)), TU_UNIT, 34);
    return lj_conv2d(y, w, NULL, (const int[]){(int)pick(1, 2), 1}, (const int[]){(int)pick(0, 1), (int)pick(0, 1)}, NULL,
                     (int)g);
  }
  case 4: return lj_slice(y, dim, pick(0, 1), s[dim], pick(1, 2));
  case 5: return lj_softmax(y, dim);
  case 6: {
    int64_t is[4] = {s[0], s[1], s[2], s[3]};
    is[dim] = pick(1, 4);
    return lj_gather(y, dim, valid_index(4, is, s[dim]));
  }
  case 7: return lj_index_select(y, dim, valid_index(1, (int64_t[]){pick(1, 5)}, s[dim]));
  case 8: return lj_max_pool2d(y, (const int[]){2, 2}, (const int[]){(int)pick(1, 2), (int)pick(1, 2)}, NULL);
  default: return pick(0, 1) ? lj_gelu(y, pick(0, 1)) : lj_silu(y);
  }
}

/* Random chains of 1-4 nn ops (padding and cropping, batch and layer normalization, grouped
 * and strided convolutions, strided slices, softmax, gather and index_select with valid
 * indices, max-pooling, gelu, silu) on a 4-D input: the value and the input's gradient of a
 * weighted sum agree with the interpreter. */
START_TEST(test_random_nn_programs) {
  int checked = 0;
  for (int prog = 0; prog < 40; prog++) {
    lj_scope_begin();
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(pick(1, 3), pick(1, 4), pick(2, 9), pick(2, 9)), TU_UNIT, (uint64_t)prog);
    lj_tensor_set_requires_grad(x, true);
    lj_tensor *y = x;
    for (int step = (int)pick(1, 4); y && step > 0; step--) {
      lj_tensor *next = random_nn_op(y);
      if (next && lj_tensor_ndim(next) == 4 && lj_tensor_numel(next) > 0) y = next;
    }
    lj_clear_error();
    if (y != x) {
      lj_tensor *w = tu_tensor(LJ_F32, 4, lj_tensor_shape(y), TU_UNIT, (uint64_t)prog + 50);
      lj_tensor *loss = lj_sum(lj_mul(y, w), 0, NULL, false);
      ck_assert_int_eq(lj_backward(loss), LJ_OK);
      lj_tensor *check[3] = {y, loss, lj_tensor_grad(x)};
      tu_check_interp_tol(3, check, 1e-4, 1e-4);
      checked++;
    }
    lj_scope_end();
  }
  ck_assert_int_ge(checked, 30);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_fusion");
  TCase *tc = tu_tcase("fusion");
  tcase_add_test(tc, test_chain_is_one_kernel);
  tcase_add_test(tc, test_loop_normalization);
  tcase_add_test(tc, test_kernel_counts);
  tcase_add_test(tc, test_twin_kernels);
  tcase_add_test(tc, test_twin_kernels_steps);
  tcase_add_test(tc, test_disable_fusion);
  tcase_add_test(tc, test_opt_levels);
  tcase_add_test(tc, test_sync_opbyop);
  tcase_add_test(tc, test_row_fusion_values);
  tcase_add_test(tc, test_row_fusion_local_slots);
  tcase_add_test(tc, test_column_blocks);
  tcase_add_test(tc, test_row_block_read_bytes);
  tcase_add_test(tc, test_join_past_independent_kernels);
  tcase_add_test(tc, test_sums_once_a_task);
  tcase_add_test(tc, test_column_sums_blocks);
  tcase_add_test(tc, test_recompute_cheap_nodes);
  tcase_add_test(tc, test_batch_norm_shares_sums);
  tcase_add_test(tc, test_group_norm_rows);
  tcase_add_test(tc, test_column_order);
  tcase_add_test(tc, test_window_sums_by_plane);
  tcase_add_test(tc, test_bias_gradient_by_plane);
  tcase_add_test(tc, test_permuted_epilogue);
  tcase_add_test(tc, test_permuted_rows_store);
  tcase_add_test(tc, test_matmul_epilogue);
  tcase_add_test(tc, test_trailing_product);
  tcase_add_test(tc, test_attention_grads_unpermuted);
  tcase_add_test(tc, test_gradient_of_slices);
  tcase_add_test(tc, test_cat_rows);
  tcase_add_test(tc, test_transformer_block_grads);
  tcase_add_test(tc, test_matmul_bias_start);
  tcase_add_test(tc, test_nests_share_loops);
  tcase_add_test(tc, test_transposes_apart);
  tcase_add_test(tc, test_matmul_batch_sum);
  tcase_add_test(tc, test_matmul_sums_joined);
  tcase_add_test(tc, test_matmul_steps_joined);
  tcase_add_test(tc, test_matmul_shared_transpose_stored);
  tcase_add_test(tc, test_matmul_read_transposed);
  tcase_add_test(tc, test_scatter_as_select);
  tcase_add_test(tc, test_rows_ahead);
  tcase_add_test(tc, test_rows_ahead_of_stores);
  tcase_add_test(tc, test_window_row_fusion);
  tcase_add_test(tc, test_argmax_stores_found);
  tcase_add_test(tc, test_argmax_maps_found);
  tcase_add_test(tc, test_unpool_rows);
  tcase_add_test(tc, test_pool_rows);
  tcase_add_test(tc, test_conv_bias_grad_summed);
  tcase_add_test(tc, test_pool_grad_unpooled);
  tcase_add_test(tc, test_conv_pool_row_fusion);
  tcase_add_test(tc, test_conv_epilogue_whole_image);
  tcase_add_test(tc, test_depthwise_conv);
  tcase_add_test(tc, test_depthwise_rows);
  tcase_add_test(tc, test_depthwise_rows_image_end);
  tcase_add_test(tc, test_depthwise_then_pointwise);
  tcase_add_test(tc, test_product_softmax_parts);
  tcase_add_test(tc, test_conv_implicit_gemm);
  tcase_add_test(tc, test_conv_1x1_side_by_side);
  tcase_add_test(tc, test_conv_implicit_gemm_limits);
  tcase_add_test(tc, test_conv_implicit_gemm_shared_cols);
  tcase_add_test(tc, test_conv_implicit_gemm_training);
  tcase_add_test(tc, test_conv_grouped_implicit_gemm);
  tcase_add_test(tc, test_pad_one_kernel);
  tcase_add_test(tc, test_copy_rows_memcpy);
  tcase_add_test(tc, test_conv_input_gradient_fusion);
  tcase_add_test(tc, test_col2im_rows);
  tcase_add_test(tc, test_conv_input_gradient_blocks);
  tcase_add_test(tc, test_plan_fused_outputs);
  tcase_add_test(tc, test_matmul_column_tasks);
  tcase_add_test(tc, test_matmul_column_tasks_with_nests);
  tcase_add_test(tc, test_sums_in_one_loop);
  tcase_add_test(tc, test_random_programs);
  tcase_add_test(tc, test_random_programs_from_disk);
  tcase_add_test(tc, test_random_programs_across_syncs);
  tcase_add_test(tc, test_random_training_steps);
  tcase_add_test(tc, test_random_nn_programs);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
