/* gemm.c — register-blocked matmul kernels for f32/f64, C[b] = A[b] @ B[b] with C contiguous
 * [B, M, N] and A, B read through single-level strided views. Two micro-kernels, chosen by
 * B's layout:
 *
 *   axpy (B contiguous along n): an MR × (NV vectors) tile of C lives in registers; for each
 *        k, NV vectors of B's row k are loaded once and multiplied by MR broadcast elements
 *        of A's column k. The order of the sum over k is the plain one.
 *   dot  (A and B contiguous along k, e.g. a transposed weight): an MR × NC tile of C is
 *        MR·NC vector accumulators over k, reduced horizontally at the end (reassociated).
 *
 * The task range [begin, end) counts rows b·M + m; it is covered by MR-row tiles where MR
 * rows of one matrix remain in the range, single rows elsewhere. Columns that do not fill a
 * tile are done by narrower tiles, and the last partial vector with masked loads and stores.
 * The vector width is the target's (ljc_ir.vec_bytes). */
#include "codegen_llvm/ir.h"

enum { AXPY_MR = 6, AXPY_NV = 2, DOT_MR = 3, DOT_NC = 4, KC = 256 };

typedef struct gemm {
  ljc_kctx *kc;
  ljc_ir *ir;
  LLVMBuilderRef b;
  const ljg_kernel *k;
  const ljg_view *av, *bv;
  LLVMValueRef a, bm, c; /* the slots of A, B and C */
  LLVMTypeRef t, vt;     /* element and vector types */
  int vw;                /* elements per vector */
  unsigned esize;
  bool dot;
  /* axpy: the block of k being done, and whether it is the first (C starts from zero) or
   * adds to what C holds */
  LLVMValueRef k0, k1, first;
} gemm;

static LLVMValueRef at(gemm *g, LLVMValueRef base, LLVMValueRef off) {
  return LLVMBuildInBoundsGEP2(g->b, g->t, base, &off, 1, "");
}

static LLVMValueRef add(gemm *g, LLVMValueRef x, int64_t v) {
  return v ? LLVMBuildNSWAdd(g->b, x, ljc_i64(g->ir, v), "") : x;
}

/* Pointer to element (b, i, j) of a 3-d operand view. */
static LLVMValueRef elem(gemm *g, const ljg_view *v, LLVMValueRef base, LLVMValueRef i0, LLVMValueRef i1,
                         LLVMValueRef i2) {
  ljc_point p = {3, {i0, i1, i2}};
  return at(g, base, ljc_view_offset(g->ir, v, &p));
}

/* The first `lanes` lanes on: all when lanes == vw. */
static LLVMValueRef lane_mask(gemm *g, int lanes) {
  LLVMValueRef bits[64];
  for (int i = 0; i < g->vw; i++) bits[i] = ljc_const_i(g->ir->i1, i < lanes);
  return LLVMConstVector(bits, (unsigned)g->vw);
}

static LLVMValueRef vload(gemm *g, LLVMValueRef p, int lanes) {
  if (lanes == g->vw) {
    LLVMValueRef v = LLVMBuildLoad2(g->b, g->vt, p, "");
    LLVMSetAlignment(v, g->esize);
    return v;
  }
  LLVMTypeRef types[2] = {g->vt, g->ir->ptr};
  LLVMValueRef args[4] = {p, ljc_const_i(g->ir->i32, g->esize), lane_mask(g, lanes), LLVMConstNull(g->vt)};
  return ljc_intrinsic_over(g->ir, "masked.load", 2, types, 4, args);
}

static void vstore(gemm *g, LLVMValueRef v, LLVMValueRef p, int lanes) {
  if (lanes == g->vw) {
    LLVMSetAlignment(LLVMBuildStore(g->b, v, p), g->esize);
    return;
  }
  LLVMTypeRef types[2] = {g->vt, g->ir->ptr};
  LLVMValueRef args[4] = {v, p, ljc_const_i(g->ir->i32, g->esize), lane_mask(g, lanes)};
  ljc_intrinsic_over(g->ir, "masked.store", 2, types, 4, args);
}

static LLVMValueRef splat(gemm *g, LLVMValueRef x) {
  LLVMValueRef v = LLVMBuildInsertElement(g->b, LLVMGetUndef(g->vt), x, ljc_const_i(g->ir->i32, 0), "");
  LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(g->ir->i32, (unsigned)g->vw));
  return LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(g->vt), zeros, "");
}

/* C's row `crow` (b·M + m), column n. */
static LLVMValueRef c_at(gemm *g, LLVMValueRef crow, LLVMValueRef n) {
  LLVMValueRef off = LLVMBuildNSWAdd(g->b, LLVMBuildNSWMul(g->b, crow, ljc_i64(g->ir, g->k->mm_n), ""), n, "");
  return at(g, g->c, off);
}

/* axpy: C[crow + r, n0 + j·vw + l] for r < mr, j < nv, l < lanes of vector j (the last
 * vector has `last` lanes). */
static void axpy_tile(gemm *g, LLVMValueRef bi, LLVMValueRef m, LLVMValueRef crow, int mr, LLVMValueRef n0, int nv,
                      int last) {
  ljc_ir *ir = g->ir;
  LLVMValueRef zero = ljc_i64(ir, 0), arow[AXPY_MR], acc[AXPY_MR * AXPY_NV];
  for (int r = 0; r < mr; r++) arow[r] = elem(g, g->av, g->a, bi, add(g, m, r), zero);
  LLVMValueRef b0 = elem(g, g->bv, g->bm, bi, zero, n0);
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nv; j++) {
      LLVMValueRef c = vload(g, c_at(g, add(g, crow, r), add(g, n0, (int64_t)j * g->vw)), j == nv - 1 ? last : g->vw);
      acc[r * nv + j] = LLVMBuildSelect(g->b, g->first, LLVMConstNull(g->vt), c, "");
    }
  int64_t sa = g->av->v[0].stride[2], sb = g->bv->v[0].stride[1];
  ljc_loop K;
  ljc_loop_begin(ir, &K, g->k0, g->k1, false, mr * nv, acc);
  LLVMValueRef brow = at(g, b0, LLVMBuildNSWMul(g->b, K.iv, ljc_i64(ir, sb), ""));
  LLVMValueRef bvec[AXPY_NV], next[AXPY_MR * AXPY_NV];
  for (int j = 0; j < nv; j++) bvec[j] = vload(g, at(g, brow, ljc_i64(ir, (int64_t)j * g->vw)), j == nv - 1 ? last : g->vw);
  LLVMValueRef koff = LLVMBuildNSWMul(g->b, K.iv, ljc_i64(ir, sa), "");
  for (int r = 0; r < mr; r++) {
    LLVMValueRef s = splat(g, LLVMBuildLoad2(g->b, g->t, at(g, arow[r], koff), ""));
    for (int j = 0; j < nv; j++) next[r * nv + j] = ljc_fmuladd(ir, s, bvec[j], K.acc[r * nv + j]);
  }
  ljc_loop_end(ir, &K, next, acc);
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nv; j++)
      vstore(g, acc[r * nv + j], c_at(g, add(g, crow, r), add(g, n0, (int64_t)j * g->vw)), j == nv - 1 ? last : g->vw);
}

/* dot: C[crow + r, n0 + c] for r < mr, c < nc as vector dot products over k. */
static void dot_tile(gemm *g, LLVMValueRef bi, LLVMValueRef m, LLVMValueRef crow, int mr, LLVMValueRef n0, int nc) {
  ljc_ir *ir = g->ir;
  LLVMValueRef zero = ljc_i64(ir, 0), arow[DOT_MR], bcol[DOT_NC], acc[DOT_MR * DOT_NC];
  for (int r = 0; r < mr; r++) arow[r] = elem(g, g->av, g->a, bi, add(g, m, r), zero);
  for (int c = 0; c < nc; c++) bcol[c] = elem(g, g->bv, g->bm, bi, zero, add(g, n0, c));
  for (int i = 0; i < mr * nc; i++) acc[i] = LLVMConstNull(g->vt);
  int64_t K = g->k->mm_k, kfull = K / g->vw * g->vw;
  LLVMValueRef next[DOT_MR * DOT_NC];
  /* one step over k0 .. k0 + lanes into cur */
#define DOT_STEP(k0, lanes, cur)                                                             \
  do {                                                                                    \
    LLVMValueRef av_[DOT_MR];                                                             \
    for (int r = 0; r < mr; r++) av_[r] = vload(g, at(g, arow[r], (k0)), (lanes));        \
    for (int c = 0; c < nc; c++) {                                                        \
      LLVMValueRef bv_ = vload(g, at(g, bcol[c], (k0)), (lanes));                         \
      for (int r = 0; r < mr; r++) next[r * nc + c] = ljc_fmuladd(ir, av_[r], bv_, (cur)[r * nc + c]); \
    }                                                                                     \
  } while (0)
  if (kfull > 0) {
    ljc_loop k;
    ljc_loop_begin_step(ir, &k, zero, ljc_i64(ir, kfull), g->vw, false, mr * nc, acc);
    DOT_STEP(k.iv, g->vw, k.acc);
    ljc_loop_end(ir, &k, next, acc);
  }
  if (K > kfull) {
    DOT_STEP(ljc_i64(ir, kfull), (int)(K - kfull), acc);
    for (int i = 0; i < mr * nc; i++) acc[i] = next[i];
  }
#undef DOT_STEP
  for (int r = 0; r < mr; r++)
    for (int c = 0; c < nc; c++) {
      LLVMValueRef args[2] = {ljc_const_f(g->t, -0.0), acc[r * nc + c]};
      LLVMValueRef s = ljc_intrinsic(ir, "vector.reduce.fadd", g->vt, 2, args);
      LLVMSetFastMathFlags(s, LLVMFastMathAllowReassoc);
      LLVMBuildStore(g->b, s, c_at(g, add(g, crow, r), add(g, n0, c)));
    }
}

/* A block of C's columns: from n0, nv vectors of which the last has `last` lanes (axpy) or
 * nv columns (dot). */
typedef struct panel {
  LLVMValueRef n0;
  int nv, last;
} panel;

static void tile(gemm *g, LLVMValueRef bi, LLVMValueRef m, LLVMValueRef crow, int mr, const panel *p) {
  if (g->dot)
    dot_tile(g, bi, m, crow, mr, p->n0, p->nv);
  else
    axpy_tile(g, bi, m, crow, mr, p->n0, p->nv, p->last);
}

/* Rows m0 .. m0 + len - 1 (len > 0) of matrix bi in panel p: MR-row tiles while MR rows
 * remain, then single rows. */
static void row_tiles(gemm *g, LLVMValueRef bi, LLVMValueRef m0, LLVMValueRef crow0, LLVMValueRef len,
                      const panel *p) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  int mr = g->dot ? DOT_MR : AXPY_MR;
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.rows");
  LLVMBasicBlockRef many = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.tile");
  LLVMBasicBlockRef one = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.row");
  LLVMBasicBlockRef latch = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.next");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.done");
  LLVMBuildBr(b, head);
  LLVMPositionBuilderAtEnd(b, head);
  LLVMValueRef i = LLVMBuildPhi(b, ir->i64, "r");
  LLVMValueRef m = LLVMBuildNSWAdd(b, m0, i, ""), crow = LLVMBuildNSWAdd(b, crow0, i, "");
  LLVMValueRef left = LLVMBuildNSWSub(b, len, i, "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGE, left, ljc_i64(ir, mr), ""), many, one);
  LLVMPositionBuilderAtEnd(b, many);
  tile(g, bi, m, crow, mr, p);
  LLVMValueRef i_many = add(g, i, mr);
  LLVMBasicBlockRef many_end = LLVMGetInsertBlock(b);
  LLVMBuildBr(b, latch);
  LLVMPositionBuilderAtEnd(b, one);
  tile(g, bi, m, crow, 1, p);
  LLVMValueRef i_one = add(g, i, 1);
  LLVMBasicBlockRef one_end = LLVMGetInsertBlock(b);
  LLVMBuildBr(b, latch);
  LLVMPositionBuilderAtEnd(b, latch);
  LLVMValueRef i_next = LLVMBuildPhi(b, ir->i64, "");
  LLVMValueRef nexts[2] = {i_many, i_one};
  LLVMBasicBlockRef froms[2] = {many_end, one_end};
  LLVMAddIncoming(i_next, nexts, froms, 2);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i_next, len, ""), head, done);
  LLVMValueRef zero = ljc_i64(ir, 0);
  LLVMAddIncoming(i, &zero, &pre, 1);
  LLVMAddIncoming(i, &i_next, &latch, 1);
  LLVMPositionBuilderAtEnd(b, done);
}

/* Rows m0 .. m0 + len - 1 of matrix bi, panel by panel (a panel of B stays in L1 while the
 * rows go by): full-width panels, then the narrower ones the columns leave. axpy kernels
 * with a long k do this for one block of KC values of k after another. */
static void panels_of_block(gemm *g, LLVMValueRef bi, LLVMValueRef m0, LLVMValueRef crow0, LLVMValueRef len) {
  ljc_ir *ir = g->ir;
  int64_t N = g->k->mm_n, wide = g->dot ? DOT_NC : (int64_t)AXPY_NV * g->vw, nfull = N / wide * wide;
  if (nfull > 0) {
    ljc_loop n;
    ljc_loop_begin_step(ir, &n, ljc_i64(ir, 0), ljc_i64(ir, nfull), wide, false, 0, NULL);
    panel p = {n.iv, g->dot ? DOT_NC : AXPY_NV, g->vw};
    row_tiles(g, bi, m0, crow0, len, &p);
    ljc_loop_end(ir, &n, NULL, NULL);
  }
  if (g->dot) {
    if (N > nfull) row_tiles(g, bi, m0, crow0, len, &(panel){ljc_i64(ir, nfull), (int)(N - nfull), 0});
    return;
  }
  for (int64_t n0 = nfull; n0 < N; n0 += g->vw) {
    int64_t left = N - n0;
    row_tiles(g, bi, m0, crow0, len, &(panel){ljc_i64(ir, n0), 1, left < g->vw ? (int)left : g->vw});
  }
}

static void panels(gemm *g, LLVMValueRef bi, LLVMValueRef m0, LLVMValueRef crow0, LLVMValueRef len) {
  ljc_ir *ir = g->ir;
  int64_t K = g->k->mm_k;
  if (g->dot || K <= KC) {
    g->k0 = ljc_i64(ir, 0), g->k1 = ljc_i64(ir, K), g->first = ljc_const_i(ir->i1, 1);
    panels_of_block(g, bi, m0, crow0, len);
    return;
  }
  ljc_loop kb;
  ljc_loop_begin_step(ir, &kb, ljc_i64(ir, 0), ljc_i64(ir, (K + KC - 1) / KC * KC), KC, false, 0, NULL);
  g->k0 = kb.iv;
  g->k1 = ljc_intrinsic2(ir, "smin", add(g, kb.iv, KC), ljc_i64(ir, K));
  g->first = LLVMBuildICmp(g->b, LLVMIntEQ, kb.iv, ljc_i64(ir, 0), "");
  panels_of_block(g, bi, m0, crow0, len);
  ljc_loop_end(ir, &kb, NULL, NULL);
}

bool ljc_emit_gemm(ljc_kctx *kc, LLVMValueRef begin, LLVMValueRef end) {
  const ljg_kernel *k = kc->k;
  ljc_ir *ir = kc->ir;
  if (k->mm_dtype != LJ_F32 && k->mm_dtype != LJ_F64) return false;
  const ljg_kexpr *ea = &k->exprs[k->mm_a], *eb = &k->exprs[k->mm_bm];
  if (ea->kind != LJG_X_LOAD || eb->kind != LJG_X_LOAD) return false;
  const ljg_view *av = &k->views[ea->view], *bv = &k->views[eb->view];
  if (av->n != 1 || bv->n != 1 || k->mm_n == 0 || k->mm_k == 0) return false;
  bool axpy = bv->v[0].stride[2] == 1, dot = !axpy && av->v[0].stride[2] == 1 && bv->v[0].stride[1] == 1;
  if (!axpy && !dot) return false;
  gemm g = {.kc = kc, .ir = ir, .b = ir->b, .k = k, .av = av, .bv = bv, .a = kc->slot_ptr[ea->slot],
            .bm = kc->slot_ptr[eb->slot], .c = kc->slot_ptr[k->mm_out_slot], .dot = dot};
  g.t = ljc_compute_type(ir, (lj_dtype)k->mm_dtype);
  g.esize = k->mm_dtype == LJ_F64 ? 8 : 4;
  g.vw = ir->vec_bytes / (int)g.esize;
  g.vt = LLVMVectorType(g.t, (unsigned)g.vw);
  /* the task range, one matrix's run of rows at a time */
  LLVMBuilderRef b = ir->b;
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.matrix");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.end");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, begin, end, ""), head, done);
  LLVMPositionBuilderAtEnd(b, head);
  LLVMValueRef r = LLVMBuildPhi(b, ir->i64, "row");
  LLVMValueRef M = ljc_i64(ir, k->mm_m);
  LLVMValueRef bi = LLVMBuildUDiv(b, r, M, ""), m = LLVMBuildURem(b, r, M, "");
  LLVMValueRef len = ljc_intrinsic2(ir, "smin", LLVMBuildNSWSub(b, end, r, ""), LLVMBuildNSWSub(b, M, m, ""));
  panels(&g, bi, m, r, len);
  LLVMValueRef r_next = LLVMBuildNSWAdd(b, r, len, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, r_next, end, ""), head, done);
  LLVMAddIncoming(r, &begin, &pre, 1);
  LLVMAddIncoming(r, &r_next, &latch, 1);
  LLVMPositionBuilderAtEnd(b, done);
  return true;
}
