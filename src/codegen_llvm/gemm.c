/* gemm.c — register-blocked matmul kernels for f32/f64, C[b] = A[b] @ B[b] with C contiguous
 * [B, M, N] and A, B read through single-level strided views of any strides.
 *
 * Loop order, for one matrix's run of rows of the task range [begin, end) (rows b·M + m):
 * blocks of KC values of k; blocks of NP panels of NV vectors of columns, packed; blocks of MC
 * rows (A's block stays in L2 while the panels go by); panels; tiles of MR rows.
 *
 * Packing copies a block of panels of B into an aligned buffer on the stack, panel after
 * panel, KC rows each, zeros past the last column, so the micro-kernel reads each panel
 * sequentially from L1 for every tile of rows whatever B's strides (a large power-of-two row
 * stride otherwise maps every row of a panel to the same cache set, and every row is another
 * page). Three packers, by B's layout: contiguous along n (vector copies; the block's part of
 * a row is one run), contiguous along k (vw × vw transposes in registers, e.g. a transposed
 * weight), anything else (element by element). A B contiguous along n with at most
 * LJG_MATMUL_DIRECT_K rows is read where it is: its panel already sits in L1 and packing
 * would cost more than it saves.
 *
 * The micro-kernel: an MR × NV-vector tile of C lives in registers; for each k, the NV vectors
 * of the panel's row are loaded once and multiplied by MR broadcast elements of A's column k.
 * Each block of k is summed in the plain order from zero, then added to what C holds.
 * Columns that do not fill a panel form one narrower panel whose last vector is loaded and
 * stored with a mask. The vector width is the target's (ljc_ir.vec_bytes). */
#include "codegen_llvm/ir.h"

enum { MR = 6, NV = 2, KC = 256, NP = 8, MC = 384 };

typedef struct gemm {
  ljc_ir *ir;
  LLVMBuilderRef b;
  const ljg_kernel *k;
  const ljg_view *av, *bv;
  LLVMValueRef a, bm, c; /* the slots of A, B and C */
  LLVMValueRef c_origin; /* C in a LOCAL slot: the element offset of its block's first row */
  LLVMValueRef packed;   /* the packed panels of B: NP panels of KC rows of NV vectors */
  bool direct;           /* B is read where it is (contiguous along n, short k) */
  LLVMTypeRef t, vt;     /* element and vector types */
  int vw;                /* elements per vector */
  unsigned esize;
  /* the block of k being done, and whether it is the first (C starts from zero) or adds to
   * what C holds; summed over the batch, only the first matrix's first block starts C */
  LLVMValueRef k0, k1, first, batch_first;
} gemm;

/* A block of C's columns from n0: nv vectors, the last with `last` lanes. */
typedef struct panel {
  LLVMValueRef n0;
  int nv, last;
} panel;

static int panel_cols(const gemm *g, const panel *p) {
  return (p->nv - 1) * g->vw + p->last;
}

static LLVMValueRef at(gemm *g, LLVMValueRef base, LLVMValueRef off) {
  return LLVMBuildInBoundsGEP2(g->b, g->t, base, &off, 1, "");
}

static LLVMValueRef add(gemm *g, LLVMValueRef x, int64_t v) {
  return v ? LLVMBuildNSWAdd(g->b, x, ljc_i64(g->ir, v), "") : x;
}

static LLVMValueRef mul(gemm *g, LLVMValueRef x, int64_t v) {
  return LLVMBuildNSWMul(g->b, x, ljc_i64(g->ir, v), "");
}

/* Pointer to element (b, i, j) of a 3-d operand view. */
static LLVMValueRef elem(gemm *g, const ljg_view *v, LLVMValueRef base, LLVMValueRef i0, LLVMValueRef i1,
                         LLVMValueRef i2) {
  ljc_point p = {3, {i0, i1, i2}};
  return at(g, base, ljc_view_offset(g->ir, v, &p));
}

/* Element `col` of row `row` (relative to the block's k0) of the packed panel at buf. */
static LLVMValueRef packed_at(gemm *g, const panel *p, LLVMValueRef buf, LLVMValueRef row, int64_t col) {
  return at(g, buf, add(g, mul(g, row, (int64_t)p->nv * g->vw), col));
}

/* The first `lanes` lanes on: all when lanes == vw. */
static LLVMValueRef lane_mask(gemm *g, int lanes) {
  LLVMValueRef bits[64];
  for (int i = 0; i < g->vw; i++) bits[i] = ljc_const_i(g->ir->i1, i < lanes);
  return LLVMConstVector(bits, (unsigned)g->vw);
}

static LLVMValueRef masked_load(gemm *g, LLVMValueRef p, LLVMValueRef mask) {
  LLVMTypeRef types[2] = {g->vt, g->ir->ptr};
  LLVMValueRef args[4] = {p, ljc_const_i(g->ir->i32, g->esize), mask, LLVMConstNull(g->vt)};
  return ljc_intrinsic_over(g->ir, "masked.load", 2, types, 4, args);
}

/* `lanes` elements from p; the other lanes are zero. */
static LLVMValueRef vload(gemm *g, LLVMValueRef p, int lanes) {
  if (lanes < g->vw) return masked_load(g, p, lane_mask(g, lanes));
  LLVMValueRef v = LLVMBuildLoad2(g->b, g->vt, p, "");
  LLVMSetAlignment(v, g->esize);
  return v;
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

/* A full vector at a vector-aligned place of the packed panel. */
static LLVMValueRef packed_load(gemm *g, LLVMValueRef p) {
  LLVMValueRef v = LLVMBuildLoad2(g->b, g->vt, p, "");
  LLVMSetAlignment(v, (unsigned)g->ir->vec_bytes);
  return v;
}

static void packed_store(gemm *g, LLVMValueRef v, LLVMValueRef p) {
  LLVMSetAlignment(LLVMBuildStore(g->b, v, p), (unsigned)g->ir->vec_bytes);
}

static LLVMValueRef splat(gemm *g, LLVMValueRef x) {
  LLVMValueRef v = LLVMBuildInsertElement(g->b, LLVMGetUndef(g->vt), x, ljc_const_i(g->ir->i32, 0), "");
  LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(g->ir->i32, (unsigned)g->vw));
  return LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(g->vt), zeros, "");
}

/* ---- packing B ---------------------------------------------------------------------------- */

/* Packed panel q of the block: KC rows of the panel's width. */
static LLVMValueRef panel_buffer(gemm *g, const panel *p, LLVMValueRef q) {
  return at(g, g->packed, mul(g, q, (int64_t)KC * p->nv * g->vw));
}

/* B contiguous along n: row by row of k, each panel's part of the row is nv vector loads (the
 * block's columns are one contiguous run of the row). */
static void pack_rows(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef np) {
  ljc_ir *ir = g->ir;
  int64_t width = (int64_t)p->nv * g->vw;
  ljc_loop K, Q;
  ljc_loop_begin(ir, &K, g->k0, g->k1, false, 0, NULL);
  LLVMValueRef row = LLVMBuildNSWSub(g->b, K.iv, g->k0, "");
  ljc_loop_begin(ir, &Q, ljc_i64(ir, 0), np, false, 0, NULL);
  LLVMValueRef src = elem(g, g->bv, g->bm, bi, K.iv, LLVMBuildNSWAdd(g->b, p->n0, mul(g, Q.iv, width), ""));
  LLVMValueRef dst = packed_at(g, p, panel_buffer(g, p, Q.iv), row, 0);
  for (int j = 0; j < p->nv; j++) {
    LLVMValueRef v = vload(g, at(g, src, ljc_i64(ir, (int64_t)j * g->vw)), j == p->nv - 1 ? p->last : g->vw);
    packed_store(g, v, at(g, dst, ljc_i64(ir, (int64_t)j * g->vw)));
  }
  ljc_loop_end(ir, &Q, NULL, NULL);
  ljc_loop_end(ir, &K, NULL, NULL);
}

/* Transposes the vw × vw matrix whose rows are v[0..vw) in place: log2(vw) rounds, each
 * interleaving the halves of the pairs (i, i + vw/2). */
static void transpose(gemm *g, LLVMValueRef *v) {
  int n = g->vw;
  LLVMValueRef lo[64], hi[64], out[64];
  for (int t = 0; t < n; t++) {
    lo[t] = ljc_const_i(g->ir->i32, (t & 1 ? n : 0) + t / 2);
    hi[t] = ljc_const_i(g->ir->i32, (t & 1 ? n : 0) + n / 2 + t / 2);
  }
  LLVMValueRef lo_mask = LLVMConstVector(lo, (unsigned)n), hi_mask = LLVMConstVector(hi, (unsigned)n);
  for (int round = 1; round < n; round *= 2) {
    for (int i = 0; i < n / 2; i++) {
      out[2 * i] = LLVMBuildShuffleVector(g->b, v[i], v[i + n / 2], lo_mask, "");
      out[2 * i + 1] = LLVMBuildShuffleVector(g->b, v[i], v[i + n / 2], hi_mask, "");
    }
    for (int i = 0; i < n; i++) v[i] = out[i];
  }
}

/* The lanes of k .. k + vw - 1 below g->k1. */
static LLVMValueRef k_mask(gemm *g, LLVMValueRef k) {
  ljc_ir *ir = g->ir;
  int vw = g->vw;
  LLVMValueRef lanes[64];
  for (int l = 0; l < vw; l++) lanes[l] = ljc_i64(ir, l);
  LLVMTypeRef iv = LLVMVectorType(ir->i64, (unsigned)vw);
  LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(ir->i32, (unsigned)vw));
  LLVMValueRef kv = LLVMBuildInsertElement(g->b, LLVMGetUndef(iv), k, ljc_const_i(ir->i32, 0), "");
  kv = LLVMBuildAdd(g->b, LLVMBuildShuffleVector(g->b, kv, LLVMGetUndef(iv), zeros, ""),
                    LLVMConstVector(lanes, (unsigned)vw), "");
  LLVMValueRef k1 = LLVMBuildInsertElement(g->b, LLVMGetUndef(iv), g->k1, ljc_const_i(ir->i32, 0), "");
  k1 = LLVMBuildShuffleVector(g->b, k1, LLVMGetUndef(iv), zeros, "");
  return LLVMBuildICmp(g->b, LLVMIntSLT, kv, k1, "");
}

/* Rows lo .. hi (a multiple of vw apart) of one panel of B contiguous along k, into buf: vw
 * rows of vw columns at a time, loaded along k and transposed; loads masked at k1 if `masked`. */
static void pack_cols_run(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef n0, LLVMValueRef buf,
                          LLVMValueRef lo, LLVMValueRef hi, bool masked) {
  int vw = g->vw, cols = panel_cols(g, p);
  ljc_loop K;
  ljc_loop_begin_step(g->ir, &K, lo, hi, vw, true, 0, NULL);
  LLVMValueRef mask = masked ? k_mask(g, K.iv) : NULL;
  LLVMValueRef row = LLVMBuildNSWSub(g->b, K.iv, g->k0, "");
  for (int j = 0; j < p->nv; j++) {
    LLVMValueRef v[64];
    for (int c = 0; c < vw; c++) {
      int col = j * vw + c;
      if (col >= cols) {
        v[c] = LLVMConstNull(g->vt);
        continue;
      }
      LLVMValueRef src = elem(g, g->bv, g->bm, bi, K.iv, add(g, n0, col));
      v[c] = mask ? masked_load(g, src, mask) : vload(g, src, vw);
    }
    transpose(g, v);
    for (int r = 0; r < vw; r++) packed_store(g, v[r], packed_at(g, p, buf, add(g, row, r), (int64_t)j * vw));
  }
  ljc_loop_end(g->ir, &K, NULL, NULL);
}

/* B contiguous along k: panel by panel, the block's whole multiples of vw rows unmasked, then
 * where K is not a multiple of vw the rest with loads masked at k1, written up to the next
 * multiple with zeros (the buffer has room: KC is a multiple of vw). */
static void pack_cols(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef np) {
  ljc_ir *ir = g->ir;
  int vw = g->vw;
  int64_t width = (int64_t)p->nv * vw;
  LLVMValueRef len = LLVMBuildNSWSub(g->b, g->k1, g->k0, "");
  LLVMValueRef full = LLVMBuildNSWAdd(g->b, g->k0, LLVMBuildAnd(g->b, len, ljc_i64(ir, -vw), ""), "");
  ljc_loop Q;
  ljc_loop_begin(ir, &Q, ljc_i64(ir, 0), np, false, 0, NULL);
  LLVMValueRef n0 = LLVMBuildNSWAdd(g->b, p->n0, mul(g, Q.iv, width), ""), buf = panel_buffer(g, p, Q.iv);
  pack_cols_run(g, bi, p, n0, buf, g->k0, full, false);
  if (g->k->mm_k % vw != 0) {
    LLVMValueRef hi = LLVMBuildNSWAdd(g->b, g->k0, LLVMBuildAnd(g->b, add(g, len, vw - 1), ljc_i64(ir, -vw), ""), "");
    pack_cols_run(g, bi, p, n0, buf, full, hi, true);
  }
  ljc_loop_end(ir, &Q, NULL, NULL);
}

/* Any other layout: element by element. */
static void pack_elements(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef np) {
  ljc_ir *ir = g->ir;
  int cols = panel_cols(g, p);
  int64_t width = (int64_t)p->nv * g->vw;
  ljc_loop Q, K;
  ljc_loop_begin(ir, &Q, ljc_i64(ir, 0), np, false, 0, NULL);
  LLVMValueRef n0 = LLVMBuildNSWAdd(g->b, p->n0, mul(g, Q.iv, width), ""), buf = panel_buffer(g, p, Q.iv);
  ljc_loop_begin(ir, &K, g->k0, g->k1, false, 0, NULL);
  LLVMValueRef row = LLVMBuildNSWSub(g->b, K.iv, g->k0, "");
  for (int col = 0; col < width; col++) {
    LLVMValueRef x = ljc_const_f(g->t, 0);
    if (col < cols) x = LLVMBuildLoad2(g->b, g->t, elem(g, g->bv, g->bm, bi, K.iv, add(g, n0, col)), "");
    LLVMBuildStore(g->b, x, packed_at(g, p, buf, row, col));
  }
  ljc_loop_end(ir, &K, NULL, NULL);
  ljc_loop_end(ir, &Q, NULL, NULL);
}

/* Packs np panels shaped like p, from p's first column on. */
static void pack(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef np) {
  if (g->bv->v[0].stride[2] == 1)
    pack_rows(g, bi, p, np);
  else if (g->bv->v[0].stride[1] == 1)
    pack_cols(g, bi, p, np);
  else
    pack_elements(g, bi, p, np);
}

/* ---- the micro-kernel --------------------------------------------------------------------- */

/* C's row `crow` (b·M + m), column n. */
static LLVMValueRef c_at(gemm *g, LLVMValueRef crow, LLVMValueRef n) {
  LLVMValueRef off = LLVMBuildNSWAdd(g->b, mul(g, crow, g->k->mm_n), n, "");
  return at(g, g->c, g->c_origin ? LLVMBuildNSWSub(g->b, off, g->c_origin, "") : off);
}

/* Stores C's tile rows r for which store[r] (an i1) is true. */
static void store_tile(gemm *g, const LLVMValueRef *crow, const panel *p, const LLVMValueRef *acc, const LLVMValueRef *store) {
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(g->b));
  for (int r = 0; r < MR; r++) {
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(g->ir->ctx, fn, "gemm.store");
    LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(g->ir->ctx, fn, "gemm.stored");
    LLVMBuildCondBr(g->b, store[r], yes, next);
    LLVMPositionBuilderAtEnd(g->b, yes);
    for (int j = 0; j < p->nv; j++)
      vstore(g, acc[r * p->nv + j], c_at(g, crow[r], add(g, p->n0, (int64_t)j * g->vw)),
             j == p->nv - 1 ? p->last : g->vw);
    LLVMBuildBr(g->b, next);
    LLVMPositionBuilderAtEnd(g->b, next);
  }
}

/* An MR-row tile of C in panel p: row r is C's row crow[r] and A's row m[r] of matrix bi;
 * only the rows `store` marks are stored. */
static void tile(gemm *g, LLVMValueRef bi, const LLVMValueRef *m, const LLVMValueRef *crow, const panel *p,
                 LLVMValueRef buf, const LLVMValueRef *store) {
  ljc_ir *ir = g->ir;
  int nv = p->nv;
  LLVMValueRef arow[MR], acc[MR * NV], next[MR * NV], bvec[NV];
  for (int r = 0; r < MR; r++) arow[r] = elem(g, g->av, g->a, bi, m[r], g->k0);
  for (int i = 0; i < MR * nv; i++) acc[i] = LLVMConstNull(g->vt);
  ljc_loop K;
  ljc_loop_begin(ir, &K, ljc_i64(ir, 0), LLVMBuildNSWSub(g->b, g->k1, g->k0, ""), false, MR * nv, acc);
  for (int j = 0; j < nv; j++)
    bvec[j] = g->direct ? vload(g, at(g, buf, add(g, mul(g, K.iv, g->bv->v[0].stride[1]), (int64_t)j * g->vw)),
                                j == nv - 1 ? p->last : g->vw)
                        : packed_load(g, packed_at(g, p, buf, K.iv, (int64_t)j * g->vw));
  LLVMValueRef koff = mul(g, K.iv, g->av->v[0].stride[2]);
  for (int r = 0; r < MR; r++) {
    LLVMValueRef s = splat(g, LLVMBuildLoad2(g->b, g->t, at(g, arow[r], koff), ""));
    for (int j = 0; j < nv; j++) next[r * nv + j] = ljc_fmuladd(ir, s, bvec[j], K.acc[r * nv + j]);
  }
  ljc_loop_end(ir, &K, next, acc);
  /* the block's sum joins what C holds: sums of a block's length stay accurate however
   * many blocks (and matrices, summed over the batch) there are */
  for (int r = 0; r < MR; r++)
    for (int j = 0; j < nv; j++) {
      LLVMValueRef c = vload(g, c_at(g, crow[r], add(g, p->n0, (int64_t)j * g->vw)), j == nv - 1 ? p->last : g->vw);
      acc[r * nv + j] = LLVMBuildSelect(g->b, g->first, acc[r * nv + j], LLVMBuildFAdd(g->b, c, acc[r * nv + j], ""), "");
    }
  store_tile(g, crow, p, acc, store);
}

/* Rows m0 .. m0 + len - 1 (len > 0) of matrix bi in panel p, MR rows at a time by one tile:
 * the tile for the rows left after the last full one ends at the last row and stores only
 * the rows left (it recomputes rows already done in this block of k, but must not add to
 * them again); with fewer than MR rows in all, its rows past the last repeat the last and
 * are not stored. */
static void row_tiles(gemm *g, LLVMValueRef bi, LLVMValueRef m0, LLVMValueRef crow0, LLVMValueRef len,
                      const panel *p, LLVMValueRef buf) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  LLVMValueRef m[MR], crow[MR], store[MR];
  LLVMValueRef tiles = LLVMBuildSDiv(b, add(g, len, MR - 1), ljc_i64(ir, MR), "");
  LLVMValueRef last = add(g, len, -1), first_max = ljc_intrinsic2(ir, "smax", add(g, len, -MR), ljc_i64(ir, 0));
  ljc_loop R;
  ljc_loop_begin_step(ir, &R, ljc_i64(ir, 0), mul(g, tiles, MR), MR, false, 0, NULL);
  LLVMValueRef first = ljc_intrinsic2(ir, "smin", R.iv, first_max);
  for (int r = 0; r < MR; r++) {
    LLVMValueRef i = add(g, first, r);
    store[r] = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, i, R.iv, ""), LLVMBuildICmp(b, LLVMIntSLE, i, last, ""), "");
    i = ljc_intrinsic2(ir, "smin", i, last);
    m[r] = LLVMBuildNSWAdd(b, m0, i, "");
    crow[r] = LLVMBuildNSWAdd(b, crow0, i, "");
  }
  tile(g, bi, m, crow, p, buf, store);
  ljc_loop_end(ir, &R, NULL, NULL);
}

/* np packed panels shaped like p, for rows m0 .. m0 + len - 1 (len > 0) of matrix bi: blocks
 * of MC rows (A's block stays in L2), each done panel by panel (the panel stays in L1). */
static void packed_panels(gemm *g, LLVMValueRef bi, LLVMValueRef m0, LLVMValueRef crow0, LLVMValueRef len,
                          const panel *p, LLVMValueRef np) {
  ljc_ir *ir = g->ir;
  int64_t width = (int64_t)p->nv * g->vw;
  ljc_loop mb, Q;
  LLVMValueRef nblocks = LLVMBuildSDiv(g->b, add(g, len, MC - 1), ljc_i64(ir, MC), "");
  ljc_loop_begin_step(ir, &mb, ljc_i64(ir, 0), mul(g, nblocks, MC), MC, false, 0, NULL);
  LLVMValueRef blen = ljc_intrinsic2(ir, "smin", ljc_i64(ir, MC), LLVMBuildNSWSub(g->b, len, mb.iv, ""));
  LLVMValueRef m = LLVMBuildNSWAdd(g->b, m0, mb.iv, ""), crow = LLVMBuildNSWAdd(g->b, crow0, mb.iv, "");
  ljc_loop_begin(ir, &Q, ljc_i64(ir, 0), np, false, 0, NULL);
  panel q = {LLVMBuildNSWAdd(g->b, p->n0, mul(g, Q.iv, width), ""), p->nv, p->last};
  row_tiles(g, bi, m, crow, blen, &q, g->direct ? elem(g, g->bv, g->bm, bi, g->k0, q.n0) : panel_buffer(g, p, Q.iv));
  ljc_loop_end(ir, &Q, NULL, NULL);
  ljc_loop_end(ir, &mb, NULL, NULL);
}

/* Rows m0 .. m0 + len - 1 of matrix bi for the block of k: the full-width panels NP at a
 * time (packed together: the block's part of each row of B is one run), then the narrower
 * panel the columns leave. */
static void panels(gemm *g, LLVMValueRef bi, LLVMValueRef m0, LLVMValueRef crow0, LLVMValueRef len) {
  ljc_ir *ir = g->ir;
  int64_t N = g->k->mm_n, wide = (int64_t)NV * g->vw, nfull = N / wide * wide, step = NP * wide;
  if (nfull > 0) {
    ljc_loop n;
    ljc_loop_begin_step(ir, &n, ljc_i64(ir, 0), ljc_i64(ir, (nfull + step - 1) / step * step), step, false, 0, NULL);
    LLVMValueRef np = LLVMBuildSDiv(g->b, LLVMBuildNSWSub(g->b, ljc_i64(ir, nfull), n.iv, ""), ljc_i64(ir, wide), "");
    np = ljc_intrinsic2(ir, "smin", np, ljc_i64(ir, NP));
    panel p = {n.iv, NV, g->vw};
    if (!g->direct) pack(g, bi, &p, np);
    packed_panels(g, bi, m0, crow0, len, &p, np);
    ljc_loop_end(ir, &n, NULL, NULL);
  }
  if (N > nfull) {
    int left = (int)(N - nfull), nv = (left + g->vw - 1) / g->vw;
    panel p = {ljc_i64(ir, nfull), nv, left - (nv - 1) * g->vw};
    if (!g->direct) pack(g, bi, &p, ljc_i64(ir, 1));
    packed_panels(g, bi, m0, crow0, len, &p, ljc_i64(ir, 1));
  }
}

/* Rows m0 .. m0 + len - 1 of matrix bi: one block of k after another. */
static void blocks(gemm *g, LLVMValueRef bi, LLVMValueRef m0, LLVMValueRef crow0, LLVMValueRef len) {
  ljc_ir *ir = g->ir;
  int64_t K = g->k->mm_k;
  if (K <= KC) {
    g->k0 = ljc_i64(ir, 0), g->k1 = ljc_i64(ir, K), g->first = g->batch_first ? g->batch_first : ljc_const_i(ir->i1, 1);
    panels(g, bi, m0, crow0, len);
    return;
  }
  ljc_loop kb;
  ljc_loop_begin_step(ir, &kb, ljc_i64(ir, 0), ljc_i64(ir, (K + KC - 1) / KC * KC), KC, false, 0, NULL);
  g->k0 = kb.iv;
  g->k1 = ljc_intrinsic2(ir, "smin", add(g, kb.iv, KC), ljc_i64(ir, K));
  g->first = LLVMBuildICmp(g->b, LLVMIntEQ, kb.iv, ljc_i64(ir, 0), "");
  if (g->batch_first) g->first = LLVMBuildAnd(g->b, g->first, g->batch_first, "");
  panels(g, bi, m0, crow0, len);
  ljc_loop_end(ir, &kb, NULL, NULL);
}

/* The packed panel's buffer, in the function's entry block. */
static LLVMValueRef packed_buffer(gemm *g) {
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(g->b));
  LLVMBuilderRef eb = LLVMCreateBuilderInContext(g->ir->ctx);
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first)
    LLVMPositionBuilderBefore(eb, first);
  else
    LLVMPositionBuilderAtEnd(eb, entry);
  LLVMValueRef buf = LLVMBuildAlloca(eb, LLVMArrayType2(g->t, (uint64_t)KC * NP * NV * (uint64_t)g->vw), "packed");
  LLVMSetAlignment(buf, 64);
  LLVMDisposeBuilder(eb);
  return buf;
}

bool ljc_emit_gemm(ljc_kctx *kc, LLVMValueRef begin, LLVMValueRef end) {
  const ljg_kernel *k = kc->k;
  ljc_ir *ir = kc->ir;
  if (k->mm_dtype != LJ_F32 && k->mm_dtype != LJ_F64) return false;
  const ljg_kexpr *ea = &k->exprs[k->mm_a], *eb = &k->exprs[k->mm_bm];
  if (ea->kind != LJG_X_LOAD || eb->kind != LJG_X_LOAD) return false;
  const ljg_view *av = &k->views[ea->view], *bv = &k->views[eb->view];
  if (av->n != 1 || bv->n != 1 || k->mm_n == 0 || k->mm_k == 0 || k->mm_b == 0) return false;
  gemm g = {.ir = ir, .b = ir->b, .k = k, .av = av, .bv = bv, .a = kc->slot_ptr[ea->slot],
            .bm = kc->slot_ptr[eb->slot], .c = kc->slot_ptr[k->mm_out_slot], .c_origin = kc->slot_origin[k->mm_out_slot]};
  g.t = ljc_compute_type(ir, (lj_dtype)k->mm_dtype);
  g.esize = k->mm_dtype == LJ_F64 ? 8 : 4;
  g.vw = ir->vec_bytes / (int)g.esize;
  g.vt = LLVMVectorType(g.t, (unsigned)g.vw);
  g.direct = bv->v[0].stride[2] == 1 && k->mm_k <= LJG_MATMUL_DIRECT_K;
  if (!g.direct) g.packed = packed_buffer(&g);
  LLVMBuilderRef b = ir->b;
  if (k->mm_sum) { /* the task range's rows of C, through each matrix in turn */
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(ir->ctx, LLVMGetBasicBlockParent(LLVMGetInsertBlock(b)), "gemm.sum");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, LLVMGetBasicBlockParent(LLVMGetInsertBlock(b)), "gemm.end");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, begin, end, ""), body, done);
    LLVMPositionBuilderAtEnd(b, body);
    ljc_loop bl;
    ljc_loop_begin(ir, &bl, ljc_i64(ir, 0), ljc_i64(ir, k->mm_b), false, 0, NULL);
    g.batch_first = LLVMBuildICmp(b, LLVMIntEQ, bl.iv, ljc_i64(ir, 0), "");
    blocks(&g, bl.iv, begin, begin, LLVMBuildNSWSub(b, end, begin, ""));
    ljc_loop_end(ir, &bl, NULL, NULL);
    LLVMBuildBr(b, done);
    LLVMPositionBuilderAtEnd(b, done);
    return true;
  }
  /* the task range, one matrix's run of rows at a time */
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
  blocks(&g, bi, m, r, len);
  LLVMValueRef r_next = LLVMBuildNSWAdd(b, r, len, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, r_next, end, ""), head, done);
  LLVMAddIncoming(r, &begin, &pre, 1);
  LLVMAddIncoming(r, &r_next, &latch, 1);
  LLVMPositionBuilderAtEnd(b, done);
  return true;
}
