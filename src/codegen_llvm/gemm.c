/* gemm.c — the matmul routines: register-blocked f32/f64 GEMM, C[b] = A[b] @ B[b] with C
 * contiguous [B, M, N] and A, B read through strides of any values, over shapes and strides
 * given at run time. A JIT session compiles each routine once, when the first program that
 * calls it is compiled or loaded (ljc_define_gemm_routine, a module of its own), and every
 * matmul kernel calls one (ljc_emit_gemm): a kernel holds only its argument block and its
 * fused nests, so the code generator does not go through the micro-kernel and the packers
 * again for every matmul of every graph (they were most of a matmul kernel's compile time).
 * One routine per dtype, way of reading B (ljc_gemm_variant), chosen from B's strides when
 * the kernel is lowered, and way of reading A: where it is, or, for an A that is an im2col,
 * packed from its image (implicit GEMM, as B can be; ljg_kernel.mm_cols); and routines of
 * bf16 operands and f32 products, which multiply pairs along k ("bf16 operands" below).
 *
 * Loop order, for one matrix's run of rows of the task range [begin, end) (rows b·M + m):
 * blocks of NP panels of NV vectors of columns (NP_FEW for a run of at most MC rows, the
 * tiles prefetching B's next block: prefetch_next); blocks of at most KC values of k, as equal as
 * whole vectors allow, the block of panels packed for each; blocks of MC rows (A's block
 * stays in L2 while the panels go by); panels; tiles of mr rows. With the blocks of k inside
 * the blocks of panels, each block of k adds into the panels' columns of C (in L2 or L3)
 * instead of all of C (2048³ on one Zen 4 core: 170-173 -> 163-171 ms, C's 16 MB no longer
 * read and written from memory once a block of k).
 *
 * Packing copies a block of panels of B into an aligned buffer on the stack, panel after
 * panel, KC rows each, zeros past the last column, so the micro-kernel reads each panel
 * sequentially from L1 for every tile of rows whatever B's strides (a large power-of-two row
 * stride otherwise maps every row of a panel to the same cache set, and every row is another
 * page). Three packers: B contiguous along n (vector copies; the block's part of a row is one
 * run), contiguous along k (vw × vw transposes in registers, e.g. a transposed weight), any
 * other layout (element by element, as is the narrower last panel of a B contiguous along k).
 * A B contiguous along n with at most LJG_MATMUL_DIRECT_K rows, or that few rows share
 * (ljg_matmul_b_in_place), is read where it is, a block of k at a time: its panel already sits
 * in L1, or the few tiles that read it find it in the caches, and packing would cost more than
 * it saves. A call of that few k (short_k), B read in place or packed (transposed, or strided
 * along both dims: packed whole, as many panels at once as the buffer holds), runs its rows in
 * bands of a tile's rows across all the panels, writing C's rows in runs (panel_run): a block of
 * panels' columns for MC rows at a time scattered C's lines over its rows, and streamed C at
 * half the rate (x·yᵀ of two [4096, 3], one Zen 5 thread: 4.0 -> 1.8-2.7 ms). A B that is an im2col is packed from the image (pack_window; for a
 * window of stride 2, from the image split into phase planes once a call: split_phases), and
 * one that is an im2col transposed by transposes of the window's vectors (pack_window_t); an A
 * that is one, a block of MC rows at a time into a buffer of KC values a row, from which the
 * tiles broadcast (pack_a); and, chosen at run time, an A contiguous along m whose k are a whole number of
 * pages apart likewise, by transposes (pack_a_rows_of).
 *
 * The micro-kernel: an mr × NV-vector tile of C lives in registers; for each k, the NV vectors
 * of the panel's row are loaded once and multiplied by mr broadcast elements of A's column k.
 * Each block of k is summed in the plain order from zero, then added to what C holds; the
 * first starts from the row's bias instead when the kernel's epilogue would only add one (a
 * convolution's: ljc_gemm_bias; conv1 of MNISTNet at batch 64, its forward kernel with the
 * pooling, one thread: 1.06-1.10 -> 0.97-0.98 ms), or from the bias's vector along the row
 * (a linear layer's, BIAS_SN 1: relu(x·Wᵀ + b) of 128 rows by 512 × 512, two Zen 5 threads,
 * 0.209 -> 0.185-0.188 ms; by 784 → 512 0.311-0.319 -> 0.284-0.306; one thread 2-3%; and
 * the kernel compiled in 4-6 ms rather than 8-10, no nest's loop). Added as C is stored, with
 * a select for each vector, it cost the tiles of a short K what the epilogue's pass over the
 * block saved.
 * Where the epilogue is the relu of that sum, the last block of k stores the relu (the
 * argument RELU, a branch for each tile: ResNet's stem, a 7×7 convolution of stride 2 to 64
 * channels of 112×112 at batch 8, whose C, an image's 3.2 MB, went through memory to the
 * epilogue: one Zen 5 thread 11.5-11.8 -> 10.4 ms).
 * Columns that do not fill a panel form one last panel of one or NV vectors, loaded and
 * stored with masks. The vector width is the target's (ljc_ir.vec_bytes).
 *
 * A call of a few rows packs nothing (few_rows): the COLS routine takes dot products along k
 * (dot_rows_of), the ROWS and DIRECT routines add B's rows into its rows' sums kept in L1
 * (axpy_rows_of); all read B once, where it is. A COLS call of a whole number of panels of rows
 * up to MC computes its product transposed (swap_rows_of): B's columns are the tiles' rows. */
#include "codegen_llvm/ir.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MR_MAX: the most rows a tile has (tile_rows). MC by measurement (one thread of a
 * 5th-generation Xeon, AVX-512 and AVX2 code; 384 before): A's block of MC rows stays in L2
 * beside the panel the tiles read. KC by measurement on a Zen 4 core, whose L1 holds no
 * panel of more than 256 k anyway: each block of k is a pass over C's rows (every tile reads
 * and writes its lines of C, from L3 for a large C), and fewer passes pay more than panels
 * that stay in L1 (2048³, one thread: 165-168 ms with KC 320, 160 with 512, 156-161 with 768,
 * 155-157 with 1024; 1024³ 20.1 -> 19.6); the panels still stream from L2, and the stack
 * holds NP of them (768 KiB) and A's block (288 KiB). */
enum { MR_MAX = 8, NV = 2, KC = 768, NP = 8, MC = 96 };
/* The panels of a block for a call of at most MC rows, whose tiles prefetch the next block
 * (prefetch_next): the block and the next fit L2 together (32 rows by 4096 × 4096 on a Zen 4
 * core: 12.0 ms with 8 panels, 11.5 with 4, 11.4 with 2; 16 rows 7.2, 6.6, 6.7). */
enum { NP_FEW = 4 };
/* A transposed is packed when its rows are a multiple of this many bytes apart along k, or
 * of half as many where K takes more than a block of k (pack_a_rows_of). */
enum { A_PAGE = 4096 };
/* The shortest block of k whose tiles prefetch their lines of C (tile). */
enum { PREFETCH_C_MIN_K = 32 };

typedef struct gemm {
  ljc_ir *ir;
  LLVMBuilderRef b;
  int variant;                      /* ljc_gemm_variant */
  bool a_window;                    /* A an im2col, packed from its image into apack */
  LLVMValueRef arg[LJC_GEMM_NARGS]; /* the argument block's fields */
  LLVMValueRef packed;              /* the packed panels of B: NP panels of KC rows of NV vectors */
  LLVMValueRef apack, apos;         /* A's block of MC rows of KC, and (a_window) its k's positions and lane_base */
  /* the tiles' rows of A, for the block of rows and of k: row m at a_base + m·a_sm, its k
   * a_step apart (in apack where A is packed) */
  LLVMValueRef a_base, a_sm;
  /* (i1) whether A is packed into apack by transposes (pack_a_rows_of), NULL where the
   * routine never packs it so (a_window, or B read where it is); and the step from one k to
   * the next in the tiles' rows of A */
  LLVMValueRef a_transposed, a_step;
  /* (i1, bf16 operands) whether A is packed into apack (pack_a_pairs); not where its rows are
   * contiguous along k and K is even, whose pairs the tiles read where they are */
  LLVMValueRef a_pairs_packed;
  /* (B an im2col) the taps of the block of k, TAP_FIELDS i64 each (fill_taps) */
  LLVMValueRef taps;
  /* (B or A an im2col, not of bf16) the call's image split into phase planes, and whether it
   * is (an i1; split_phases), or NULL where the routine never splits; and which operand */
  LLVMValueRef phases, phased;
  int phase_operand;
  LLVMTypeRef t, vt;                /* element and vector types (C's, and the products') */
  /* bf16 operands (kind LJC_GEMM_BF16), multiplied in pairs along k (see "bf16 operands"
   * below); and the element type of A, B and the packed buffers: t, or i16 for bf16 */
  bool pairs;
  LLVMTypeRef ot;
  LLVMTypeRef ivt; /* an image's vector (pack_window): vw elements of ot */
  int vw;                           /* elements per vector */
  int mr;                           /* rows of C in a tile (the register file decides) */
  int kc;                           /* the most k a block takes: KC, or 2·KC for bf16 (the
                                       same bytes of A's rows and of the panels) */
  unsigned esize;
  /* the block of k being done, and whether it is the first (C starts from zero) or adds to
   * what C holds; summed over the batch, only the first matrix's first block starts C */
  LLVMValueRef k0, k1, first, batch_first;
  /* B's next block (prefetch_next), for the panel the tiles are in: where its source starts,
   * NULL where the routine does not prefetch it; the offset of the half of its lines the
   * panel's odd tiles take; and, for a tile, where its part starts and the offset of a second
   * line it takes with each of its own (the other half, where it is the panel's only tile);
   * and an i1, whether the call's tiles prefetch (it has at most MC rows: prefetch_panel) */
  LLVMValueRef pf_panel, pf_half, pf, pf_second, pf_few;
  LLVMValueRef stream; /* an i1, whether the call stores C's full vectors non-temporally
                          (streams_c), or NULL on a target without such stores */
  /* (DIRECT routines; COLS and ELEMENTS routines of f32 and f64, A not an im2col) an i1,
   * whether K is at most LJG_MATMUL_DIRECT_K: the call takes all of B at once (panels; packed,
   * as many panels as the buffer holds) and runs its rows in bands of a tile's rows across it
   * (panel_run); NULL in other routines. And the rows a panel takes in the packed buffer: KC, or
   * K rounded up to whole vectors in such a call. */
  LLVMValueRef short_k, panel_k;
} gemm;

/* A block of C's columns from n0: nv vectors, `cols` columns in all (i64); mask[j]: the
 * lanes of vector j that are columns, NULL for all of them (a full panel). */
typedef struct panel {
  LLVMValueRef n0, cols, mask[NV];
  int nv;
} panel;

static LLVMValueRef at(gemm *g, LLVMValueRef base, LLVMValueRef off) {
  return LLVMBuildInBoundsGEP2(g->b, g->t, base, &off, 1, "");
}

/* The same in elements of A, B and the packed buffers (g->ot). */
static LLVMValueRef oat(gemm *g, LLVMValueRef base, LLVMValueRef off) {
  return LLVMBuildInBoundsGEP2(g->b, g->ot, base, &off, 1, "");
}

static LLVMValueRef add(gemm *g, LLVMValueRef x, int64_t v) {
  return v ? LLVMBuildNSWAdd(g->b, x, ljc_i64(g->ir, v), "") : x;
}

static LLVMValueRef mul(gemm *g, LLVMValueRef x, int64_t v) {
  return LLVMBuildNSWMul(g->b, x, ljc_i64(g->ir, v), "");
}

static LLVMValueRef vmul(gemm *g, LLVMValueRef x, LLVMValueRef y) {
  return LLVMBuildNSWMul(g->b, x, y, "");
}

static LLVMValueRef vadd(gemm *g, LLVMValueRef x, LLVMValueRef y) {
  return LLVMBuildNSWAdd(g->b, x, y, "");
}

/* Pointer to element (b, i, j) of A (operand LJC_GEMM_A, less A_ORIGIN) or B (LJC_GEMM_B). */
static LLVMValueRef elem(gemm *g, int operand, LLVMValueRef i0, LLVMValueRef i1, LLVMValueRef i2) {
  const LLVMValueRef *s = &g->arg[operand + 1];
  LLVMValueRef off = vadd(g, vadd(g, vmul(g, i0, s[0]), vmul(g, i1, s[1])), vmul(g, i2, s[2]));
  if (operand == LJC_GEMM_A) off = LLVMBuildNSWSub(g->b, off, g->arg[LJC_GEMM_A_ORIGIN], "");
  return oat(g, g->arg[operand], off);
}

/* Element `col` of row `row` (relative to the block's k0) of the packed panel at buf. */
static LLVMValueRef packed_at(gemm *g, const panel *p, LLVMValueRef buf, LLVMValueRef row, int64_t col) {
  return oat(g, buf, add(g, mul(g, row, (int64_t)p->nv * g->vw), col));
}

static LLVMValueRef splat(gemm *g, LLVMValueRef x, LLVMTypeRef vt) { return ljc_splat(g->ir, x, vt); }

/* The lanes l < n (n <= 64) with lo + l < hi (i64 values). */
static LLVMValueRef lanes_below_n(gemm *g, int n, LLVMValueRef lo, LLVMValueRef hi) {
  ljc_ir *ir = g->ir;
  LLVMValueRef lanes[64];
  for (int l = 0; l < n; l++) lanes[l] = ljc_i64(ir, l);
  LLVMTypeRef iv = LLVMVectorType(ir->i64, (unsigned)n);
  LLVMValueRef x = LLVMBuildAdd(g->b, splat(g, lo, iv), LLVMConstVector(lanes, (unsigned)n), "");
  return LLVMBuildICmp(g->b, LLVMIntSLT, x, splat(g, hi, iv), "");
}

/* The same for the lanes of a vector. */
static LLVMValueRef lanes_below(gemm *g, LLVMValueRef lo, LLVMValueRef hi) { return lanes_below_n(g, g->vw, lo, hi); }

static LLVMValueRef masked_load(gemm *g, LLVMValueRef p, LLVMValueRef mask) {
  return ljc_masked_load(g->ir, g->vt, p, (int)g->esize, mask);
}

/* The bytes of an element of A, B and the packed buffers (g->ot). */
static int osize(const gemm *g) { return g->pairs ? 2 : (int)g->esize; }

/* The same for a vector of an image's elements (g->ivt). */
static LLVMValueRef image_load(gemm *g, LLVMValueRef p, LLVMValueRef mask) {
  return ljc_masked_load(g->ir, g->ivt, p, osize(g), mask);
}

/* The lanes of p that mask has (all with mask NULL); the others are zero. */
static LLVMValueRef vload(gemm *g, LLVMValueRef p, LLVMValueRef mask) {
  if (mask) return masked_load(g, p, mask);
  LLVMValueRef v = LLVMBuildLoad2(g->b, g->vt, p, "");
  LLVMSetAlignment(v, g->esize);
  return v;
}

static void vstore(gemm *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask) {
  if (!mask) {
    LLVMSetAlignment(LLVMBuildStore(g->b, v, p), g->esize);
    return;
  }
  ljc_masked_store(g->ir, v, p, (int)g->esize, mask);
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

/* Rows of a tile: NV·mr accumulators, NV vectors of B and a broadcast element of A fit the
 * vector registers: 16 of them (AVX2) hold 6 rows, 32 (AVX-512, 64-byte vectors) 8. */
static int tile_rows(int vec_bytes) { return vec_bytes == 64 ? MR_MAX : LJG_MATMUL_TILE_ROWS; }

/* Runs then() when cond holds; the builder continues after. */
static void when(gemm *g, LLVMValueRef cond, void (*then)(gemm *, void *), void *ctx) {
  LLVMBasicBlockRef after = ljc_if_begin(g->ir, cond, "gemm.then");
  then(g, ctx);
  ljc_if_end(g->ir, after);
}

/* ---- packing B ---------------------------------------------------------------------------- */

/* Packed panel q of the block: panel_k rows of the panel's width. */
static LLVMValueRef panel_buffer(gemm *g, const panel *p, LLVMValueRef q) {
  return oat(g, g->packed, mul(g, LLVMBuildNSWMul(g->b, q, g->panel_k, ""), (int64_t)p->nv * g->vw));
}

/* B contiguous along n: row by row of k, each panel's part of the row is nv vector loads (the
 * block's columns are one contiguous run of the row). */
static void pack_rows(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef np) {
  ljc_ir *ir = g->ir;
  ljc_loop K, Q;
  ljc_loop_begin(ir, &K, g->k0, g->k1, false, 0, NULL);
  LLVMValueRef row = LLVMBuildNSWSub(g->b, K.iv, g->k0, "");
  ljc_loop_begin(ir, &Q, ljc_i64(ir, 0), np, false, 0, NULL);
  LLVMValueRef src = elem(g, LJC_GEMM_B, bi, K.iv, LLVMBuildNSWAdd(g->b, p->n0, mul(g, Q.iv, (int64_t)p->nv * g->vw), ""));
  LLVMValueRef dst = packed_at(g, p, panel_buffer(g, p, Q.iv), row, 0);
  for (int j = 0; j < p->nv; j++) {
    LLVMValueRef v = vload(g, at(g, src, ljc_i64(ir, (int64_t)j * g->vw)), p->mask[j]);
    packed_store(g, v, at(g, dst, ljc_i64(ir, (int64_t)j * g->vw)));
  }
  ljc_loop_end(ir, &Q, NULL, NULL);
  ljc_loop_end(ir, &K, NULL, NULL);
}

/* B contiguous along k, full panels: panel by panel, the block's whole multiples of vw rows
 * vw rows of vw columns at a time, loaded along k and transposed in registers; then the rows
 * left (where the block's length is not a multiple of vw) element by element, written up to
 * the next multiple with zeros (the buffer has room: KC is a multiple of vw). */
static void pack_cols(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef np) {
  ljc_ir *ir = g->ir;
  int vw = g->vw;
  LLVMValueRef len = LLVMBuildNSWSub(g->b, g->k1, g->k0, "");
  LLVMValueRef full = LLVMBuildNSWAdd(g->b, g->k0, LLVMBuildAnd(g->b, len, ljc_i64(ir, -vw), ""), "");
  LLVMValueRef hi = LLVMBuildNSWAdd(g->b, g->k0, LLVMBuildAnd(g->b, add(g, len, vw - 1), ljc_i64(ir, -vw), ""), "");
  ljc_loop Q, K, T, C;
  ljc_loop_begin(ir, &Q, ljc_i64(ir, 0), np, false, 0, NULL);
  LLVMValueRef n0 = LLVMBuildNSWAdd(g->b, p->n0, mul(g, Q.iv, (int64_t)NV * vw), ""), buf = panel_buffer(g, p, Q.iv);
  ljc_loop_begin_step(ir, &K, g->k0, full, vw, true, 0, NULL);
  LLVMValueRef row = LLVMBuildNSWSub(g->b, K.iv, g->k0, "");
  for (int j = 0; j < NV; j++) {
    LLVMValueRef v[64];
    for (int c = 0; c < vw; c++) v[c] = vload(g, elem(g, LJC_GEMM_B, bi, K.iv, add(g, n0, j * vw + c)), NULL);
    ljc_transpose(ir, vw, v);
    for (int r = 0; r < vw; r++) packed_store(g, v[r], packed_at(g, p, buf, add(g, row, r), (int64_t)j * vw));
  }
  ljc_loop_end(ir, &K, NULL, NULL);
  ljc_loop_begin(ir, &T, full, hi, true, 0, NULL);
  LLVMValueRef in = LLVMBuildICmp(g->b, LLVMIntSLT, T.iv, g->k1, "");
  LLVMValueRef k = ljc_intrinsic2(ir, "smin", T.iv, add(g, g->k1, -1)); /* an address of B's */
  row = LLVMBuildNSWSub(g->b, T.iv, g->k0, "");
  ljc_loop_begin(ir, &C, ljc_i64(ir, 0), ljc_i64(ir, (int64_t)NV * vw), false, 0, NULL);
  LLVMValueRef x = LLVMBuildLoad2(g->b, g->t, elem(g, LJC_GEMM_B, bi, k, LLVMBuildNSWAdd(g->b, n0, C.iv, "")), "");
  LLVMValueRef dst = at(g, packed_at(g, p, buf, row, 0), C.iv);
  LLVMBuildStore(g->b, LLVMBuildSelect(g->b, in, x, ljc_const_f(g->t, 0), ""), dst);
  ljc_loop_end(ir, &C, NULL, NULL);
  ljc_loop_end(ir, &T, NULL, NULL);
  ljc_loop_end(ir, &Q, NULL, NULL);
}

/* Any layout: element by element, zeros past the panel's last column (whose element is read
 * in their place, so every address read is B's). This and pack_cols' rows left loop over the
 * panel's columns rather than unroll them: unrolled, the COLS routine took 115-137 ms to
 * compile instead of 68-75 (one Zen 4 core), for no faster packing. */
static void pack_elements(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef np) {
  ljc_ir *ir = g->ir;
  int64_t width = (int64_t)p->nv * g->vw;
  ljc_loop Q, K, C;
  ljc_loop_begin(ir, &Q, ljc_i64(ir, 0), np, false, 0, NULL);
  LLVMValueRef n0 = LLVMBuildNSWAdd(g->b, p->n0, mul(g, Q.iv, width), ""), buf = panel_buffer(g, p, Q.iv);
  ljc_loop_begin(ir, &K, g->k0, g->k1, false, 0, NULL);
  LLVMValueRef row = LLVMBuildNSWSub(g->b, K.iv, g->k0, "");
  ljc_loop_begin(ir, &C, ljc_i64(ir, 0), ljc_i64(ir, width), false, 0, NULL);
  LLVMValueRef c = C.iv;
  if (p->mask[0]) c = ljc_intrinsic2(ir, "smin", c, add(g, p->cols, -1));
  LLVMValueRef x = LLVMBuildLoad2(g->b, g->t, elem(g, LJC_GEMM_B, bi, K.iv, LLVMBuildNSWAdd(g->b, n0, c, "")), "");
  if (p->mask[0])
    x = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, C.iv, p->cols, ""), x, ljc_const_f(g->t, 0), "");
  LLVMBuildStore(g->b, x, at(g, packed_at(g, p, buf, row, 0), C.iv));
  ljc_loop_end(ir, &C, NULL, NULL);
  ljc_loop_end(ir, &K, NULL, NULL);
  ljc_loop_end(ir, &Q, NULL, NULL);
}

/* ---- bf16 operands: pairs along k ---------------------------------------------------------- */

/* A routine of bf16 operands (kind LJC_GEMM_BF16: an f32 product of bf16 values, fuse.c's
 * bf16_operands) multiplies them in pairs along k: a vector of 2·vw bf16 holds vw pairs
 * (k, k + 1), one for each f32 lane of C, which one instruction (vdpbf16ps: the two products
 * exact, added to the lane in f32) multiplies and adds. The packed panels hold, for each pair
 * of B's rows from the block's k0 on, nv vectors of 2·vw: the panel's column c of vector j at
 * elements 2·c and 2·c + 1 (B[k, n], B[k + 1, n]), zeros past the block's last k and the
 * panel's last column. A tile broadcasts a pair of A as one 32-bit element: from A's rows
 * where they are contiguous along k and K is even (one Zen 4 thread: 1024³ 10.2 -> 9.8 ms,
 * 2048³ 87 -> 80), else from A packed a block of MC rows at a time, each row's block of k in
 * a row of KC, a zero after an odd block. */

/* The pairs of the block of k. */
static LLVMValueRef pair_count(gemm *g) {
  return LLVMBuildSDiv(g->b, add(g, LLVMBuildNSWSub(g->b, g->k1, g->k0, ""), 1), ljc_i64(g->ir, 2), "");
}

/* Vector j of pair q of the packed panel at buf. */
static LLVMValueRef pairs_at(gemm *g, const panel *p, LLVMValueRef buf, LLVMValueRef q, int j) {
  return oat(g, buf, add(g, mul(g, q, 2 * (int64_t)p->nv * g->vw), 2 * (int64_t)j * g->vw));
}

/* The vector of type vt at p, bf16 aligned, its lanes where mask (all with mask NULL). */
static LLVMValueRef pair_load(gemm *g, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef mask) {
  if (mask) return ljc_masked_load(g->ir, vt, p, 2, mask);
  LLVMValueRef v = LLVMBuildLoad2(g->b, vt, p, "");
  LLVMSetAlignment(v, 2);
  return v;
}

/* B's row k of the pair from k (the pair's first) and, where k + 1 < the block's end, row k + 1
 * (in *second, else k again, an address of B's), and whether it is (*has). */
static void pair_rows(gemm *g, LLVMValueRef q, LLVMValueRef *k, LLVMValueRef *second, LLVMValueRef *has) {
  *k = vadd(g, g->k0, mul(g, q, 2));
  LLVMValueRef next = add(g, *k, 1);
  *has = LLVMBuildICmp(g->b, LLVMIntSLT, next, g->k1, "");
  *second = LLVMBuildSelect(g->b, *has, next, *k, "");
}

/* The vector of the vw pairs (x0[l], x1[l]) of two vectors of vw bf16. */
static LLVMValueRef interleave(gemm *g, LLVMValueRef x0, LLVMValueRef x1) {
  LLVMValueRef lanes[128];
  for (int l = 0; l < 2 * g->vw; l++) lanes[l] = ljc_const_i(g->ir->i32, l / 2 + (l % 2) * g->vw);
  return LLVMBuildShuffleVector(g->b, x0, x1, LLVMConstVector(lanes, 2 * (unsigned)g->vw), "");
}

/* B contiguous along n: for each pair of rows, each panel's vector j interleaves the vw
 * columns of both rows (the second zeros past the block's end). */
static void pack_rows_pairs(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef np) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  int vw = g->vw;
  LLVMTypeRef half = LLVMVectorType(ir->i16, (unsigned)vw);
  ljc_loop K, Q;
  ljc_loop_begin(ir, &K, ljc_i64(ir, 0), pair_count(g), false, 0, NULL);
  LLVMValueRef k, second, has;
  pair_rows(g, K.iv, &k, &second, &has);
  ljc_loop_begin(ir, &Q, ljc_i64(ir, 0), np, false, 0, NULL);
  LLVMValueRef n = LLVMBuildNSWAdd(b, p->n0, mul(g, Q.iv, (int64_t)p->nv * vw), ""), buf = panel_buffer(g, p, Q.iv);
  LLVMValueRef row0 = elem(g, LJC_GEMM_B, bi, k, n), row1 = elem(g, LJC_GEMM_B, bi, second, n);
  for (int j = 0; j < p->nv; j++) {
    LLVMValueRef c = ljc_i64(ir, (int64_t)j * vw);
    LLVMValueRef x0 = pair_load(g, half, oat(g, row0, c), p->mask[j]);
    LLVMValueRef x1 = pair_load(g, half, oat(g, row1, c), p->mask[j]);
    x1 = LLVMBuildSelect(b, has, x1, LLVMConstNull(half), "");
    packed_store(g, interleave(g, x0, x1), pairs_at(g, p, buf, K.iv, j));
  }
  ljc_loop_end(ir, &Q, NULL, NULL);
  ljc_loop_end(ir, &K, NULL, NULL);
}

/* Pair q's `width` columns of the panel from column n0 at buf, element by element, zeros past
 * the panel's `cols` columns (whose element is read in their place). */
static void pack_pair_elements(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef n0, LLVMValueRef buf,
                               LLVMValueRef q, int64_t width) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  LLVMValueRef k, second, has, zero = ljc_const_i(ir->i16, 0);
  pair_rows(g, q, &k, &second, &has);
  LLVMValueRef dst = pairs_at(g, p, buf, q, 0);
  ljc_loop C;
  ljc_loop_begin(ir, &C, ljc_i64(ir, 0), ljc_i64(ir, width), false, 0, NULL);
  LLVMValueRef c = C.iv, in = NULL;
  if (p->mask[0]) {
    c = ljc_intrinsic2(ir, "smin", c, add(g, p->cols, -1));
    in = LLVMBuildICmp(b, LLVMIntSLT, C.iv, p->cols, "");
  }
  LLVMValueRef n = LLVMBuildNSWAdd(b, n0, c, "");
  LLVMValueRef x0 = LLVMBuildLoad2(b, ir->i16, elem(g, LJC_GEMM_B, bi, k, n), "");
  LLVMValueRef x1 = LLVMBuildLoad2(b, ir->i16, elem(g, LJC_GEMM_B, bi, second, n), "");
  x1 = LLVMBuildSelect(b, has, x1, zero, "");
  if (in) x0 = LLVMBuildSelect(b, in, x0, zero, ""), x1 = LLVMBuildSelect(b, in, x1, zero, "");
  LLVMValueRef at0 = oat(g, dst, LLVMBuildShl(b, C.iv, ljc_i64(ir, 1), ""));
  LLVMBuildStore(b, x0, at0);
  LLVMBuildStore(b, x1, oat(g, at0, ljc_i64(ir, 1)));
  ljc_loop_end(ir, &C, NULL, NULL);
}

/* B contiguous along k, full panels: B[k, n], B[k + 1, n] are one 32-bit element, so the
 * whole multiples of 2·vw rows of the block go vw pairs of vw columns at a time, loaded along
 * k and transposed in registers as 32-bit elements; then the pairs left element by element. */
static void pack_cols_pairs(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef np) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  int vw = g->vw;
  LLVMTypeRef wt = LLVMVectorType(ir->i32, (unsigned)vw);
  LLVMValueRef len = LLVMBuildNSWSub(b, g->k1, g->k0, "");
  LLVMValueRef full = LLVMBuildNSWAdd(b, g->k0, LLVMBuildAnd(b, len, ljc_i64(ir, -2 * vw), ""), "");
  ljc_loop Q, K, T;
  ljc_loop_begin(ir, &Q, ljc_i64(ir, 0), np, false, 0, NULL);
  LLVMValueRef n0 = LLVMBuildNSWAdd(b, p->n0, mul(g, Q.iv, (int64_t)NV * vw), ""), buf = panel_buffer(g, p, Q.iv);
  ljc_loop_begin_step(ir, &K, g->k0, full, 2 * vw, true, 0, NULL);
  LLVMValueRef q0 = LLVMBuildAShr(b, LLVMBuildNSWSub(b, K.iv, g->k0, ""), ljc_i64(ir, 1), "");
  for (int j = 0; j < NV; j++) {
    LLVMValueRef v[64];
    for (int c = 0; c < vw; c++) v[c] = pair_load(g, wt, elem(g, LJC_GEMM_B, bi, K.iv, add(g, n0, j * vw + c)), NULL);
    ljc_transpose(ir, vw, v);
    for (int r = 0; r < vw; r++) packed_store(g, v[r], pairs_at(g, p, buf, add(g, q0, r), j));
  }
  ljc_loop_end(ir, &K, NULL, NULL);
  LLVMValueRef done = LLVMBuildAShr(b, LLVMBuildNSWSub(b, full, g->k0, ""), ljc_i64(ir, 1), "");
  ljc_loop_begin(ir, &T, done, pair_count(g), true, 0, NULL);
  pack_pair_elements(g, bi, p, n0, buf, T.iv, (int64_t)NV * vw);
  ljc_loop_end(ir, &T, NULL, NULL);
  ljc_loop_end(ir, &Q, NULL, NULL);
}

/* Any layout, and the last panel of one contiguous along k: element by element. */
static void pack_elements_pairs(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef np) {
  ljc_ir *ir = g->ir;
  int64_t width = (int64_t)p->nv * g->vw;
  ljc_loop Q, K;
  ljc_loop_begin(ir, &Q, ljc_i64(ir, 0), np, false, 0, NULL);
  LLVMValueRef n0 = LLVMBuildNSWAdd(g->b, p->n0, mul(g, Q.iv, width), ""), buf = panel_buffer(g, p, Q.iv);
  ljc_loop_begin(ir, &K, ljc_i64(ir, 0), pair_count(g), false, 0, NULL);
  pack_pair_elements(g, bi, p, n0, buf, K.iv, width);
  ljc_loop_end(ir, &K, NULL, NULL);
  ljc_loop_end(ir, &Q, NULL, NULL);
}

/* Rows m0 .. m0 + len - 1 of matrix bi of A (what `when` passes the A packers). */
typedef struct a_rows {
  LLVMValueRef bi, m0, len;
} a_rows;

static void pack_a_pairs_along_k(gemm *g, void *ctx) {
  const a_rows *a = ctx;
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  int w = 2 * g->vw;
  LLVMTypeRef vt = LLVMVectorType(ir->i16, (unsigned)w);
  LLVMValueRef len = LLVMBuildNSWSub(b, g->k1, g->k0, "");
  ljc_loop R, C;
  ljc_loop_begin(ir, &R, ljc_i64(ir, 0), a->len, false, 0, NULL);
  LLVMValueRef src = elem(g, LJC_GEMM_A, a->bi, LLVMBuildNSWAdd(b, a->m0, R.iv, ""), g->k0);
  LLVMValueRef dst = oat(g, g->apack, mul(g, R.iv, g->kc));
  ljc_loop_begin_step(ir, &C, ljc_i64(ir, 0), LLVMBuildAnd(b, add(g, len, w - 1), ljc_i64(ir, -w), ""), w, false, 0,
                      NULL);
  LLVMValueRef v = pair_load(g, vt, oat(g, src, C.iv), lanes_below_n(g, w, C.iv, len));
  packed_store(g, v, oat(g, dst, C.iv));
  ljc_loop_end(ir, &C, NULL, NULL);
  ljc_loop_end(ir, &R, NULL, NULL);
}

static void pack_a_pairs_elements(gemm *g, void *ctx) {
  const a_rows *a = ctx;
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  LLVMValueRef len = LLVMBuildNSWSub(b, g->k1, g->k0, "");
  ljc_loop R, C;
  ljc_loop_begin(ir, &R, ljc_i64(ir, 0), a->len, false, 0, NULL);
  LLVMValueRef m = LLVMBuildNSWAdd(b, a->m0, R.iv, ""), dst = oat(g, g->apack, mul(g, R.iv, g->kc));
  ljc_loop_begin(ir, &C, ljc_i64(ir, 0), LLVMBuildAnd(b, add(g, len, 1), ljc_i64(ir, -2), ""), false, 0, NULL);
  LLVMValueRef k = vadd(g, g->k0, ljc_intrinsic2(ir, "smin", C.iv, add(g, len, -1)));
  LLVMValueRef x = LLVMBuildLoad2(b, ir->i16, elem(g, LJC_GEMM_A, a->bi, m, k), "");
  x = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, C.iv, len, ""), x, ljc_const_i(ir->i16, 0), "");
  LLVMBuildStore(b, x, oat(g, dst, C.iv));
  ljc_loop_end(ir, &C, NULL, NULL);
  ljc_loop_end(ir, &R, NULL, NULL);
}

/* A contiguous along m (a transposed operand: a weight gradient's xᵀ or dYᵀ): vw rows at a
 * time, vw pairs of k of them loaded along m, interleaved, and transposed in registers as
 * 32-bit elements into a row's vw pairs; the lanes past the rows and the block's k zeros
 * (rows up to the next multiple of vw are written: MC is one). */
static void pack_a_pairs_along_m(gemm *g, void *ctx) {
  const a_rows *a = ctx;
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  int vw = g->vw;
  LLVMTypeRef half = LLVMVectorType(ir->i16, (unsigned)vw), wt = LLVMVectorType(ir->i32, (unsigned)vw);
  LLVMValueRef len = LLVMBuildNSWSub(b, g->k1, g->k0, "");
  ljc_loop R, C;
  ljc_loop_begin_step(ir, &R, ljc_i64(ir, 0), LLVMBuildAnd(b, add(g, a->len, vw - 1), ljc_i64(ir, -vw), ""), vw, false,
                      0, NULL);
  LLVMValueRef rows = lanes_below(g, R.iv, a->len), m = LLVMBuildNSWAdd(b, a->m0, R.iv, "");
  ljc_loop_begin_step(ir, &C, ljc_i64(ir, 0), LLVMBuildAnd(b, add(g, len, 2 * vw - 1), ljc_i64(ir, -2 * vw), ""),
                      2 * vw, false, 0, NULL);
  LLVMValueRef v[64];
  for (int q = 0; q < vw; q++) {
    LLVMValueRef x[2];
    for (int h = 0; h < 2; h++) {
      LLVMValueRef k = add(g, C.iv, 2 * q + h), in = LLVMBuildICmp(b, LLVMIntSLT, k, len, "");
      LLVMValueRef mask = LLVMBuildAnd(b, rows, ljc_splat(ir, in, LLVMTypeOf(rows)), "");
      LLVMValueRef kk = vadd(g, g->k0, ljc_intrinsic2(ir, "smin", k, add(g, len, -1))); /* an address of A's */
      x[h] = pair_load(g, half, elem(g, LJC_GEMM_A, a->bi, m, kk), mask);
    }
    v[q] = LLVMBuildBitCast(b, interleave(g, x[0], x[1]), wt, "");
  }
  ljc_transpose(ir, vw, v);
  for (int r = 0; r < vw; r++) packed_store(g, v[r], oat(g, g->apack, vadd(g, mul(g, add(g, R.iv, r), g->kc), C.iv)));
  ljc_loop_end(ir, &C, NULL, NULL);
  ljc_loop_end(ir, &R, NULL, NULL);
}

/* Rows m0 .. m0 + len - 1 of matrix bi of A (ctx, an a_rows), the block of k, into apack's rows
 * of g->kc: by vectors of 2·vw where A is contiguous along k (the lanes past the block zeros),
 * by transposes where it is contiguous along m, else element by element up to an even length
 * (a zero after an odd block). */
static void pack_a_pairs(gemm *g, void *ctx) {
  a_rows a = *(const a_rows *)ctx;
  LLVMValueRef along_k = LLVMBuildICmp(g->b, LLVMIntEQ, g->arg[LJC_GEMM_A_SK], ljc_i64(g->ir, 1), "");
  LLVMValueRef along_m = LLVMBuildICmp(g->b, LLVMIntEQ, g->arg[LJC_GEMM_A_SM], ljc_i64(g->ir, 1), "");
  along_m = LLVMBuildAnd(g->b, along_m, LLVMBuildNot(g->b, along_k, ""), "");
  when(g, along_k, pack_a_pairs_along_k, &a);
  when(g, along_m, pack_a_pairs_along_m, &a);
  when(g, LLVMBuildNot(g->b, LLVMBuildOr(g->b, along_k, along_m, ""), ""), pack_a_pairs_elements, &a);
}

/* acc + the dot products of the pairs of a and b (vectors of 2·vw bf16) in each lane
 * (vdpbf16ps: subnormal bf16 read as zero, a subnormal sum stored as zero). */
static LLVMValueRef dot_pairs(gemm *g, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b) {
  LJ_ASSERT(g->ir->bf16_dot && g->vw == 16);
  LLVMValueRef args[3] = {acc, a, b};
  return ljc_intrinsic_over(g->ir, "x86.avx512bf16.dpbf16ps.512", 0, NULL, 3, args);
}

static LLVMValueRef splat32(gemm *g, LLVMValueRef x64) {
  LLVMTypeRef iv = LLVMVectorType(g->ir->i32, (unsigned)g->vw);
  return splat(g, LLVMBuildTrunc(g->b, x64, g->ir->i32, ""), iv);
}

/* Packing an operand from its image: the matrix's image, the lanes' indices, all lanes, and
 * for B the panels packed (pack_window, pack_a). */
typedef struct window_pack {
  const panel *p;
  LLVMValueRef image, np, iota, all;
} window_pack;

/* The window positions (oh, ow) of the vw columns from n0 on, as i32 vectors: lane 0's by a
 * division, the others' by subtracting OW from the lanes past the row's end until none is
 * (once or twice unless rows are narrower than a vector). */
static void lane_positions(gemm *g, const window_pack *w, LLVMValueRef n0, LLVMValueRef *oh, LLVMValueRef *ow) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  LLVMValueRef OW = g->arg[LJC_GEMM_WIN_OW], OWv = splat32(g, OW);
  LLVMValueRef oh0 = LLVMBuildSDiv(b, n0, OW, "");
  LLVMValueRef t0 = LLVMBuildAdd(b, splat32(g, LLVMBuildNSWSub(b, n0, vmul(g, oh0, OW), "")), w->iota, "");
  LLVMValueRef h0 = splat32(g, oh0);
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(ir->ctx, fn, "window.wrap");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "window.wrapped");
  LLVMBuildBr(b, loop);
  LLVMPositionBuilderAtEnd(b, loop);
  LLVMValueRef t = LLVMBuildPhi(b, LLVMTypeOf(t0), ""), h = LLVMBuildPhi(b, LLVMTypeOf(h0), "");
  LLVMValueRef past = LLVMBuildICmp(b, LLVMIntSGE, t, OWv, "");
  LLVMValueRef t1 = LLVMBuildSelect(b, past, LLVMBuildSub(b, t, OWv, ""), t, "");
  LLVMValueRef h1 = LLVMBuildAdd(b, h, LLVMBuildZExt(b, past, LLVMTypeOf(h0), ""), "");
  LLVMValueRef bits = LLVMBuildBitCast(b, past, LLVMIntTypeInContext(ir->ctx, (unsigned)g->vw), "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntNE, bits, LLVMConstNull(LLVMTypeOf(bits)), ""), loop, done);
  LLVMAddIncoming(t, (LLVMValueRef[]){t0, t1}, (LLVMBasicBlockRef[]){pre, loop}, 2);
  LLVMAddIncoming(h, (LLVMValueRef[]){h0, h1}, (LLVMBasicBlockRef[]){pre, loop}, 2);
  LLVMPositionBuilderAtEnd(b, done);
  *oh = h, *ow = t;
}

/* How a vector of window positions is read from the image: one masked load of a run (stride 1
 * over contiguous rows of the image, window_runs; a window of stride 2 over the image's phase
 * planes, split_phases); for each row of the image its lanes are
 * on, one masked load where a window's next column is the next element (stride 1 without
 * "same" padding: the rows do not continue each other) or two with their even elements kept
 * where it is two elements on (stride 2); or a gather (any other layout). A gather costs ~20
 * cycles from L1 on Zen 5, two loads and a shuffle ~1: a 3×3 convolution of stride 2, 64 ->
 * 128 channels on 56×56 at batch 32, took 39 ms on one thread with gathers, 33 with pairs;
 * one of 1 -> 32 channels on 28×28 without padding at batch 64, 0.49 ms with gathers. */
enum window_read { WINDOW_RUN, WINDOW_ROWS, WINDOW_PAIRS, WINDOW_GATHER };

/* The elements between a row's lanes when a window_read reads by rows (1 or 2), else 0. */
static int rows_step(int how) { return how == WINDOW_ROWS ? 1 : how == WINDOW_PAIRS ? 2 : 0; }

/* Prefetches into L1 the n vectors from p of the image's channel plane two on, which the taps
 * of the channel after next read: a stride-2 window reads twice the image's lines a run does,
 * and the planes are far apart (12.5 KB for 56×56). The 3×3 stride-2 convolution of
 * window_read's comment: 31.5-32.3 -> 27.6-28.4 ms one thread with the next plane; two on,
 * its 64 -> 128 channel forward product at batch 32 went 20.9-22.4 -> 20.0-21.5 ms (eight
 * alternated runs; four planes on, or 8 KB on, no better, nor any for 14×14 and 28×28). A
 * run's packing gained 2-3% for a stride-1 convolution of 64 channels and lost as much for
 * MNISTNet's conv1 (one channel: its next plane is the next image's), so only pairs prefetch. */
static void prefetch_plane_ahead(gemm *g, LLVMValueRef p, int n) {
  ljc_ir *ir = g->ir;
  LLVMValueRef two = LLVMBuildShl(g->b, g->arg[LJC_GEMM_IMG_SC], ljc_i64(ir, 1), "");
  LLVMValueRef q = LLVMBuildGEP2(g->b, g->ot, p, &two, 1, "");
  for (int i = 0; i < n; i++) {
    LLVMValueRef off = ljc_i64(ir, (int64_t)i * g->vw);
    LLVMValueRef args[4] = {LLVMBuildGEP2(g->b, g->ot, q, &off, 1, ""), ljc_const_i(ir->i32, 0), ljc_const_i(ir->i32, 3),
                            ljc_const_i(ir->i32, 1)};
    ljc_intrinsic(ir, "prefetch", ir->ptr, 4, args);
  }
}

/* The even elements of the 2·vw from element b0 of plane at the lanes of `row`, zeros at the
 * others (WINDOW_PAIRS). */
static LLVMValueRef pair_at(gemm *g, LLVMValueRef plane, LLVMValueRef b0, LLVMValueRef row) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  int vw = g->vw;
  LLVMValueRef even[64], lo[64], hi[64];
  for (int l = 0; l < vw; l++) {
    even[l] = ljc_const_i(ir->i32, 2 * l);
    lo[l] = ljc_const_i(ir->i32, l % 2 ? vw : l / 2);
    hi[l] = ljc_const_i(ir->i32, l % 2 ? vw : vw / 2 + l / 2);
  }
  LLVMValueRef none = LLVMConstNull(LLVMTypeOf(row)), vw_off = ljc_const_i(ir->i32, vw);
  LLVMValueRef p0 = LLVMBuildGEP2(b, g->ot, plane, &b0, 1, ""), p1 = LLVMBuildGEP2(b, g->ot, p0, &vw_off, 1, "");
  prefetch_plane_ahead(g, p0, 2);
  LLVMValueRef m0 = LLVMBuildShuffleVector(b, row, none, LLVMConstVector(lo, (unsigned)vw), "");
  LLVMValueRef m1 = LLVMBuildShuffleVector(b, row, none, LLVMConstVector(hi, (unsigned)vw), "");
  return LLVMBuildShuffleVector(b, image_load(g, p0, m0), image_load(g, p1, m1), LLVMConstVector(even, (unsigned)vw),
                                "");
}

/* The lanes of `row` from element b0 of plane, lanes `step` (1 or 2) elements apart. */
static LLVMValueRef row_at(gemm *g, LLVMValueRef plane, LLVMValueRef b0, LLVMValueRef row, int step) {
  return step == 1 ? image_load(g, LLVMBuildGEP2(g->b, g->ot, plane, &b0, 1, ""), row) : pair_at(g, plane, b0, row);
}

/* WINDOW_ROWS and WINDOW_PAIRS: the grouping of a vector's lanes by the row of the image they
 * read, lanes `step` (1 or 2) elements apart within a row. It is the same for every tap, which
 * adds one offset to all lanes, so a panel works it out once for each of its vectors. */
typedef struct lane_rows {
  LLVMValueRef base;        /* i32 lanes: the lane's element offset at tap (0, 0), less step·lane */
  LLVMValueRef first, last; /* base's first and last lanes */
  LLVMValueRef r0, r1;      /* the lanes whose base is first's; last's, not in r0 */
} lane_rows;

/* lane_rows' base of the window positions (ohs, ows) (window_positions). */
static LLVMValueRef lane_base(gemm *g, const window_pack *w, LLVMValueRef ohs, LLVMValueRef ows, int step) {
  LLVMBuilderRef b = g->b;
  const LLVMValueRef *a = g->arg;
  LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, ohs, splat32(g, a[LJC_GEMM_IMG_SH]), ""),
                                  LLVMBuildMul(b, ows, splat32(g, a[LJC_GEMM_IMG_SW]), ""), "");
  return LLVMBuildSub(b, off, step == 1 ? w->iota : LLVMBuildAdd(b, w->iota, w->iota, ""), "");
}

/* The lane_rows of a lane_base. */
static lane_rows lane_rows_at(gemm *g, LLVMValueRef base) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  lane_rows r;
  r.base = base;
  r.first = LLVMBuildExtractElement(b, r.base, ljc_const_i(ir->i32, 0), "");
  r.last = LLVMBuildExtractElement(b, r.base, ljc_const_i(ir->i32, g->vw - 1), "");
  LLVMTypeRef it = LLVMTypeOf(r.base);
  r.r0 = LLVMBuildICmp(b, LLVMIntEQ, r.base, ljc_splat(ir, r.first, it), "");
  LLVMValueRef at_last = LLVMBuildICmp(b, LLVMIntEQ, r.base, ljc_splat(ir, r.last, it), "");
  r.r1 = LLVMBuildAnd(b, at_last, LLVMBuildNot(b, r.r0, ""), "");
  return r;
}

/* The mask of 2·vw elements whose pair of lanes `lanes` (vw of them) has. */
static LLVMValueRef lane_pairs(gemm *g, LLVMValueRef lanes) {
  LLVMValueRef twice[128];
  for (int l = 0; l < 2 * g->vw; l++) twice[l] = ljc_const_i(g->ir->i32, l / 2);
  return LLVMBuildShuffleVector(g->b, lanes, lanes, LLVMConstVector(twice, 2 * (unsigned)g->vw), "");
}

/* row_at, or with in2 (the pairs of elements of side_pair_vector) the 2·vw elements from b0
 * at the pairs of `row`'s lanes that in2 has. */
static LLVMValueRef rows_at(gemm *g, LLVMValueRef plane, LLVMValueRef b0, LLVMValueRef row, int step,
                            LLVMValueRef in2) {
  if (!in2) return row_at(g, plane, b0, row, step);
  LLVMValueRef p0 = LLVMBuildGEP2(g->b, g->ot, plane, &b0, 1, "");
  prefetch_plane_ahead(g, p0, 2);
  LLVMValueRef mask = LLVMBuildAnd(g->b, lane_pairs(g, row), in2, "");
  return ljc_masked_load(g->ir, LLVMVectorType(g->ot, 2 * (unsigned)g->vw), p0, osize(g), mask);
}

/* x at `lanes`, y at the others: of vw lanes, or of 2·vw elements by pairs of lanes (in2). */
static LLVMValueRef pick(gemm *g, LLVMValueRef lanes, LLVMValueRef x, LLVMValueRef y, LLVMValueRef in2) {
  return LLVMBuildSelect(g->b, in2 ? lane_pairs(g, lanes) : lanes, x, y, "");
}

/* The lanes of `in` of a vector grouped as lr says, at tap offset c (i32) from plane: the
 * elements from b0 = base + c on (row_at) for the lanes whose base is the same, the first
 * lane's row and the last lane's independently of each other, then, where rows are narrower
 * than a vector, one round for each row left between them (the least base of the lanes left);
 * the lanes not in `in` zero; when the first lane's row holds all of `in` (a vector within one
 * row of the window positions), that read alone. Working the rows out again for every tap took
 * 12% longer for the 3×3 stride-2 convolution of window_read's comment (30.2-30.6 against
 * 26.5-27.2 ms, one thread). The one-row read: ResNet's 7×7 stride-2 stem (3 -> 64 channels,
 * 224×224, batch 8; every vector within a row of 112), forward 12.8-13.2 -> 11.6-11.9 ms,
 * weight gradient 15.8-17.1 -> 13.8-14.0 (its A packed likewise, pack_a_rows). With in2, the
 * pairs of elements of side_pair_vector: `in` the lanes with either, the result 2·vw elements. */
static LLVMValueRef window_rows_read(gemm *g, const lane_rows *lr, LLVMValueRef plane, LLVMValueRef c, LLVMValueRef in,
                                     int step, LLVMValueRef in2) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  LLVMTypeRef vt = in2 ? LLVMVectorType(g->ot, 2 * (unsigned)g->vw) : g->ivt;
  LLVMTypeRef bits_t = LLVMIntTypeInContext(ir->ctx, (unsigned)g->vw), it = LLVMTypeOf(lr->base);
  LLVMValueRef row0 = LLVMBuildAnd(b, in, lr->r0, ""), row1 = LLVMBuildAnd(b, in, lr->r1, "");
  LLVMValueRef v0 =
      pick(g, row0, rows_at(g, plane, LLVMBuildAdd(b, lr->first, c, ""), row0, step, in2), LLVMConstNull(vt), in2);
  LLVMValueRef others = LLVMBuildBitCast(b, LLVMBuildAnd(b, in, LLVMBuildNot(b, lr->r0, ""), ""), bits_t, "");
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef one = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef more = LLVMAppendBasicBlockInContext(ir->ctx, fn, "window.more_rows");
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(ir->ctx, fn, "window.rows");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "window.rows_done");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, others, LLVMConstNull(bits_t), ""), done, more);
  LLVMPositionBuilderAtEnd(b, more);
  LLVMValueRef v = pick(g, row1, rows_at(g, plane, LLVMBuildAdd(b, lr->last, c, ""), row1, step, in2), v0, in2);
  LLVMValueRef left = LLVMBuildAnd(b, in, LLVMBuildNot(b, LLVMBuildOr(b, lr->r0, lr->r1, ""), ""), "");
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(ir->ctx, fn, "window.row");
  LLVMBuildBr(b, head);
  LLVMPositionBuilderAtEnd(b, head);
  LLVMValueRef vp = LLVMBuildPhi(b, vt, ""), lp = LLVMBuildPhi(b, LLVMTypeOf(in), "");
  LLVMValueRef bits = LLVMBuildBitCast(b, lp, bits_t, "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntNE, bits, LLVMConstNull(bits_t), ""), body, done);
  LLVMPositionBuilderAtEnd(b, body);
  LLVMValueRef none_left = ljc_splat(ir, ljc_const_i(ir->i32, INT32_MAX), it);
  LLVMValueRef bmin = ljc_intrinsic1(ir, "vector.reduce.smin", LLVMBuildSelect(b, lp, lr->base, none_left, ""));
  LLVMValueRef row = LLVMBuildAnd(b, lp, LLVMBuildICmp(b, LLVMIntEQ, lr->base, ljc_splat(ir, bmin, it), ""), "");
  LLVMValueRef v1 = pick(g, row, rows_at(g, plane, LLVMBuildAdd(b, bmin, c, ""), row, step, in2), vp, in2);
  LLVMValueRef left1 = LLVMBuildAnd(b, lp, LLVMBuildNot(b, row, ""), "");
  LLVMBasicBlockRef end = LLVMGetInsertBlock(b);
  LLVMBuildBr(b, head);
  LLVMAddIncoming(vp, (LLVMValueRef[]){v, v1}, (LLVMBasicBlockRef[]){pre, end}, 2);
  LLVMAddIncoming(lp, (LLVMValueRef[]){left, left1}, (LLVMBasicBlockRef[]){pre, end}, 2);
  LLVMPositionBuilderAtEnd(b, done);
  LLVMValueRef out = LLVMBuildPhi(b, vt, "");
  LLVMAddIncoming(out, (LLVMValueRef[]){v0, vp}, (LLVMBasicBlockRef[]){one, head}, 2);
  return out;
}

/* The lanes at (ih, iw) inside the image that mask has (all with mask NULL). */
static LLVMValueRef inside(gemm *g, const window_pack *w, LLVMValueRef ih, LLVMValueRef iw, LLVMValueRef mask) {
  LLVMBuilderRef b = g->b;
  LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, ih, splat32(g, g->arg[LJC_GEMM_IMG_H]), ""),
                                 LLVMBuildICmp(b, LLVMIntULT, iw, splat32(g, g->arg[LJC_GEMM_IMG_W]), ""), "");
  return LLVMBuildAnd(b, in, mask ? mask : w->all, "");
}

/* Window position vector (ohs = oh·sy - py, ows = ow·sx - px) of tap (kh, kw) of channel
 * `plane` (dy = kh·dh, dx = kw·dw): the image's elements at the lanes inside it that mask
 * has, zeros at the others, read as `how` says (window_read); n0 is lane 0's column of the
 * im2col, which makes the address of a run (pack_window). */
static LLVMValueRef window_vector(gemm *g, const window_pack *w, LLVMValueRef ohs, LLVMValueRef ows, LLVMValueRef plane,
                                  LLVMValueRef dy, LLVMValueRef dx, LLVMValueRef n0, LLVMValueRef mask, int how,
                                  const lane_rows *lr) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  const LLVMValueRef *a = g->arg;
  LLVMValueRef ih = LLVMBuildAdd(b, ohs, splat32(g, dy), ""), iw = LLVMBuildAdd(b, ows, splat32(g, dx), "");
  LLVMValueRef in = inside(g, w, ih, iw, mask);
  if (how == WINDOW_RUN) { /* lane 0 at (oh0·sy + dy - py, ow0 + dx - px): n0 + (dy - py)·SH + dx - px */
    LLVMValueRef off = vmul(g, LLVMBuildNSWSub(b, dy, a[LJC_GEMM_WIN_PY], ""), a[LJC_GEMM_IMG_SH]);
    off = vadd(g, vadd(g, off, LLVMBuildNSWSub(b, dx, a[LJC_GEMM_WIN_PX], "")), n0);
    return image_load(g, LLVMBuildGEP2(b, g->ot, plane, &off, 1, ""), in);
  }
  if (how != WINDOW_GATHER) { /* the tap moves every lane by dy·SH + dx·SW */
    LLVMValueRef c = vadd(g, vmul(g, dy, a[LJC_GEMM_IMG_SH]), vmul(g, dx, a[LJC_GEMM_IMG_SW]));
    return window_rows_read(g, lr, plane, LLVMBuildTrunc(b, c, ir->i32, ""), in, rows_step(how), NULL);
  }
  LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, ih, splat32(g, a[LJC_GEMM_IMG_SH]), ""),
                                  LLVMBuildMul(b, iw, splat32(g, a[LJC_GEMM_IMG_SW]), ""), "");
  LLVMTypeRef types[2] = {g->ivt, LLVMVectorType(ir->ptr, (unsigned)g->vw)};
  LLVMValueRef args[4] = {LLVMBuildGEP2(b, g->ot, plane, &off, 1, ""),
                          ljc_const_i(ir->i32, osize(g)), in, LLVMConstNull(g->ivt)};
  return ljc_intrinsic_over(ir, "masked.gather", 2, types, 4, args);
}

/* The window position vectors of the vw im2col columns from n0 on. */
static void window_positions(gemm *g, const window_pack *w, LLVMValueRef n0, LLVMValueRef *ohs, LLVMValueRef *ows) {
  LLVMBuilderRef b = g->b;
  const LLVMValueRef *a = g->arg;
  LLVMValueRef oh, ow;
  lane_positions(g, w, n0, &oh, &ow);
  *ohs = LLVMBuildSub(b, LLVMBuildMul(b, oh, splat32(g, a[LJC_GEMM_WIN_SY]), ""), splat32(g, a[LJC_GEMM_WIN_PY]), "");
  *ows = LLVMBuildSub(b, LLVMBuildMul(b, ow, splat32(g, a[LJC_GEMM_WIN_SX]), ""), splat32(g, a[LJC_GEMM_WIN_PX]), "");
}

/* The tap after (c, kh, kw), in place. */
static void next_tap(gemm *g, LLVMValueRef *tap) {
  LLVMBuilderRef b = g->b;
  LLVMValueRef kw1 = add(g, tap[2], 1), wrap = LLVMBuildICmp(b, LLVMIntEQ, kw1, g->arg[LJC_GEMM_WIN_KW], "");
  LLVMValueRef kh1 = LLVMBuildNSWAdd(b, tap[1], LLVMBuildZExt(b, wrap, g->ir->i64, ""), "");
  LLVMValueRef wrap2 = LLVMBuildICmp(b, LLVMIntEQ, kh1, g->arg[LJC_GEMM_WIN_KH], "");
  tap[0] = LLVMBuildNSWAdd(b, tap[0], LLVMBuildZExt(b, wrap2, g->ir->i64, ""), "");
  tap[1] = LLVMBuildSelect(b, wrap2, ljc_i64(g->ir, 0), kh1, "");
  tap[2] = LLVMBuildSelect(b, wrap, ljc_i64(g->ir, 0), kw1, "");
}

/* Tap t's (c, kh, kw). */
static void tap_of(gemm *g, LLVMValueRef t, LLVMValueRef *tap) {
  LLVMBuilderRef b = g->b;
  LLVMValueRef taps = LLVMBuildNSWMul(b, g->arg[LJC_GEMM_WIN_KH], g->arg[LJC_GEMM_WIN_KW], "");
  LLVMValueRef r = LLVMBuildSRem(b, t, taps, "");
  tap[0] = LLVMBuildSDiv(b, t, taps, "");
  tap[1] = LLVMBuildSDiv(b, r, g->arg[LJC_GEMM_WIN_KW], "");
  tap[2] = LLVMBuildSRem(b, r, g->arg[LJC_GEMM_WIN_KW], "");
}

/* The `count` taps from tap `first` on into g->taps: each the offset of its channel's plane in
 * the image and its dy, dx (TAP_PLANE, TAP_DY, TAP_DX), so that packing a row of k computes
 * no tap: for B the im2col, the block of k's, from k0 to k1 (one past its end: a pair's second
 * where the block ends odd, read masked off); for its transpose, a panel's columns'. The
 * packing loops carried the tap from one k to the next, a chain of compares and selects each
 * waited on (a grouped convolution, 32 groups of 4 -> 4 channels, 3×3 on 28×28 at batch 32,
 * one Zen 4 thread: 5.6 -> 5.15 ms). */
enum { TAP_PLANE, TAP_DY, TAP_DX, TAP_FIELDS };

/* Field f of tap t in g->taps. */
static LLVMValueRef tap_field(gemm *g, LLVMValueRef t, int f) {
  LLVMValueRef off = add(g, mul(g, t, TAP_FIELDS), f);
  return LLVMBuildInBoundsGEP2(g->b, g->ir->i64, g->taps, &off, 1, "");
}

/* ---- windows of stride 2 from phase planes ----------------------------------------------- */

/* A window of stride 2 both ways reads every other element of the image's rows: two loads and
 * a shuffle for each row a vector's lanes take (WINDOW_PAIRS), and a vector of a row of 28
 * window positions takes two rows in three. Where the call's image fits PHASE_BYTES, the
 * routine first splits it into its four phase planes (its even and odd rows by its even and
 * odd columns), each H/2 × W/2 (split_phases): tap (kh, kw) of window position (oh, ow), with
 * padding (p, q), reads the image at (2·oh + kh - p, 2·ow + kw - q), which is phase plane
 * ((kh - p) mod 2, (kw - q) mod 2) at (oh + ⌊(kh - p) / 2⌋, ow + ⌊(kw - q) / 2⌋): a window of
 * stride 1 over the planes. Where a row's windows are as many as a plane's columns (an odd
 * window padded by (k - 1) / 2: OW = W/2), a vector of window positions is a run of a plane,
 * one masked load (WINDOW_RUN). For an image of even height and width whose rows are
 * contiguous, dilation 1, f32 or f64 operands; B's im2col (pack_window) or A's (pack_a, a
 * weight gradient's). The 3×3 stride-2 convolution of window_read's comment, one Zen 5 thread:
 * 21.1-21.7 -> 19.3-19.7 ms (its packing ~20% of the kernel before, the split and the packing
 * ~7% each after); two threads 11.5-11.6 -> 10.4-10.7. ResNet-18's step at batch 8, one
 * thread, fastest of 4: the stem's forward product 12.1-15.3 -> 10.4-11.6 ms, its weight
 * gradient 13.1-16.0 -> 11.5-12.9, the stride-2 3×3 weight gradients 5.3-7.7 -> 4.9-6.5. */
enum { PHASE_BYTES = 1 << 20 };
/* The elements ahead of its reads that the split prefetches: it reads each image first, from
 * memory (the convolution above, one thread: 22.1-22.2 ms without the prefetches; 19.3-19.7
 * with them 256, 1024 or 4096 elements ahead). */
enum { SPLIT_AHEAD = 256 };

static LLVMValueRef half(gemm *g, LLVMValueRef x) { return LLVMBuildAShr(g->b, x, ljc_i64(g->ir, 1), ""); }

/* The elements of a phase plane: H/2 × W/2. */
static LLVMValueRef phase_plane(gemm *g) {
  return vmul(g, half(g, g->arg[LJC_GEMM_IMG_H]), half(g, g->arg[LJC_GEMM_IMG_W]));
}

/* The channels of the image of the im2col at g->phase_operand: its taps (B's rows, A's
 * columns) over the window's. */
static LLVMValueRef phase_channels(gemm *g) {
  const LLVMValueRef *a = g->arg;
  LLVMValueRef taps = LLVMBuildNSWMul(g->b, a[LJC_GEMM_WIN_KH], a[LJC_GEMM_WIN_KW], "");
  return LLVMBuildSDiv(g->b, a[g->phase_operand == LJC_GEMM_B ? LJC_GEMM_K : LJC_GEMM_M], taps, "");
}

/* Whether the call's im2col operand is such an image (an i1). */
static LLVMValueRef phases_fit(gemm *g) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  const LLVMValueRef *a = g->arg;
  LLVMValueRef one = ljc_i64(ir, 1), two = ljc_i64(ir, 2), zero = ljc_i64(ir, 0);
  LLVMValueRef H = a[LJC_GEMM_IMG_H], W = a[LJC_GEMM_IMG_W];
  LLVMValueRef bytes = vmul(g, mul(g, phase_channels(g), (int64_t)g->esize), vmul(g, H, W));
  LLVMValueRef positions = a[g->phase_operand == LJC_GEMM_B ? LJC_GEMM_N : LJC_GEMM_K];
  LLVMValueRef ow = half(g, W);
  LLVMValueRef even = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, LLVMBuildOr(b, H, W, ""), one, ""), zero, "");
  LLVMValueRef c[] = {LLVMBuildICmp(b, LLVMIntEQ, a[LJC_GEMM_WIN_SY], two, ""),
                      LLVMBuildICmp(b, LLVMIntEQ, a[LJC_GEMM_WIN_SX], two, ""),
                      LLVMBuildICmp(b, LLVMIntEQ, a[LJC_GEMM_WIN_DY], one, ""),
                      LLVMBuildICmp(b, LLVMIntEQ, a[LJC_GEMM_WIN_DX], one, ""),
                      LLVMBuildICmp(b, LLVMIntEQ, a[LJC_GEMM_IMG_SW], one, ""),
                      LLVMBuildICmp(b, LLVMIntEQ, a[LJC_GEMM_WIN_OW], ow, ""),
                      LLVMBuildICmp(b, LLVMIntEQ, positions, phase_plane(g), ""),
                      LLVMBuildICmp(b, LLVMIntEQ, a[LJC_GEMM_COL_TASKS], zero, ""),
                      LLVMBuildICmp(b, LLVMIntSLE, bytes, ljc_i64(ir, PHASE_BYTES), ""),
                      even};
  LLVMValueRef fit = c[0];
  for (size_t i = 1; i < LJ_COUNT_OF(c); i++) fit = LLVMBuildAnd(b, fit, c[i], "");
  return fit;
}

/* Matrix bi's image (of the im2col at g->phase_operand) into g->phases: element (y, x) of
 * channel plane ci at phase plane (y mod 2, x mod 2), (y / 2, x / 2), planes of H/2 × W/2 by
 * channel, then phase (2·py + px). */
static void split_phases(gemm *g, LLVMValueRef bi) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  const LLVMValueRef *a = g->arg;
  int vw = g->vw;
  LLVMValueRef H = a[LJC_GEMM_IMG_H], W = a[LJC_GEMM_IMG_W], one = ljc_i64(ir, 1);
  LLVMValueRef pw = half(g, W), plane = phase_plane(g);
  LLVMValueRef rows = vmul(g, phase_channels(g), H); /* every channel's */
  LLVMValueRef image = oat(g, a[g->phase_operand], vmul(g, bi, a[g->phase_operand + 1]));
  LLVMValueRef evens[64], odds[64];
  for (int l = 0; l < vw; l++) evens[l] = ljc_const_i(ir->i32, 2 * l), odds[l] = ljc_const_i(ir->i32, 2 * l + 1);
  ljc_loop R, J;
  ljc_loop_begin(ir, &R, ljc_i64(ir, 0), rows, false, 0, NULL);
  LLVMValueRef ci = LLVMBuildSDiv(b, R.iv, H, ""), y = LLVMBuildSRem(b, R.iv, H, "");
  LLVMValueRef src = oat(g, image, vadd(g, vmul(g, ci, a[LJC_GEMM_IMG_SC]), vmul(g, y, a[LJC_GEMM_IMG_SH])));
  LLVMValueRef py = LLVMBuildAnd(b, y, one, "");
  LLVMValueRef at0 = vadd(g, vmul(g, vadd(g, mul(g, ci, 4), mul(g, py, 2)), plane), vmul(g, half(g, y), pw));
  LLVMValueRef dst0 = oat(g, g->phases, at0), dst1 = oat(g, dst0, plane);
  ljc_loop_begin_step(ir, &J, ljc_i64(ir, 0), pw, vw, false, 0, NULL);
  LLVMValueRef x0 = mul(g, J.iv, 2);
  ljc_prefetch(ir, oat(g, src, add(g, x0, SPLIT_AHEAD)));
  ljc_prefetch(ir, oat(g, src, add(g, x0, SPLIT_AHEAD + vw)));
  LLVMValueRef v0 = masked_load(g, oat(g, src, x0), lanes_below(g, x0, W));
  LLVMValueRef v1 = masked_load(g, oat(g, src, add(g, x0, vw)), lanes_below(g, add(g, x0, vw), W));
  LLVMValueRef out = lanes_below(g, J.iv, pw);
  vstore(g, LLVMBuildShuffleVector(b, v0, v1, LLVMConstVector(evens, (unsigned)vw), ""), oat(g, dst0, J.iv), out);
  vstore(g, LLVMBuildShuffleVector(b, v0, v1, LLVMConstVector(odds, (unsigned)vw), ""), oat(g, dst1, J.iv), out);
  ljc_loop_end(ir, &J, NULL, NULL);
  ljc_loop_end(ir, &R, NULL, NULL);
}

/* What a tap's place in the phase planes takes from the image's window: its padding (py, px)
 * and the planes' size, read before the window's arguments are made the planes'. */
typedef struct phase_geom {
  LLVMValueRef py, px, plane;
} phase_geom;

static phase_geom phase_geom_of(gemm *g) {
  return (phase_geom){g->arg[LJC_GEMM_WIN_PY], g->arg[LJC_GEMM_WIN_PX], phase_plane(g)};
}

/* The fields of tap (c, kh, kw) (TAP_PLANE, TAP_DY, TAP_DX: c·IMG_SC, kh·DY, kw·DX of the
 * image) in the phase planes: the plane's offset, and the offsets in it. */
static void phase_tap(gemm *g, const phase_geom *pg, const LLVMValueRef *tap, LLVMValueRef *field) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  LLVMValueRef one = ljc_i64(ir, 1);
  LLVMValueRef qy = LLVMBuildNSWSub(b, field[TAP_DY], pg->py, ""), qx = LLVMBuildNSWSub(b, field[TAP_DX], pg->px, "");
  LLVMValueRef phase = vadd(g, mul(g, LLVMBuildAnd(b, qy, one, ""), 2), LLVMBuildAnd(b, qx, one, ""));
  field[TAP_PLANE] = vmul(g, vadd(g, mul(g, tap[0], 4), phase), pg->plane);
  field[TAP_DY] = half(g, qy);
  field[TAP_DX] = half(g, qx);
}

/* Makes the window's arguments (g->arg) the phase planes': a window of stride 1 and no
 * padding over planes of H/2 × W/2 with contiguous rows (their channels' step is unused: the
 * taps' fields hold it); saved gets them as they were. */
static void window_on_phases(gemm *g, LLVMValueRef *saved) {
  ljc_ir *ir = g->ir;
  LLVMValueRef *a = g->arg;
  memcpy(saved, a, LJC_GEMM_NARGS * sizeof *a);
  LLVMValueRef ph = half(g, a[LJC_GEMM_IMG_H]), pw = half(g, a[LJC_GEMM_IMG_W]);
  a[LJC_GEMM_IMG_SH] = pw, a[LJC_GEMM_IMG_SW] = ljc_i64(ir, 1), a[LJC_GEMM_IMG_H] = ph, a[LJC_GEMM_IMG_W] = pw;
  a[LJC_GEMM_WIN_SY] = a[LJC_GEMM_WIN_SX] = ljc_i64(ir, 1);
  a[LJC_GEMM_WIN_PY] = a[LJC_GEMM_WIN_PX] = ljc_i64(ir, 0);
}

/* phases(g, ctx) where the call's image is split into phase planes (g->phased), else
 * image(g, ctx). */
static void by_phases(gemm *g, void (*phases)(gemm *, void *), void (*image)(gemm *, void *), void *ctx) {
  if (!g->phases) {
    image(g, ctx);
    return;
  }
  when(g, g->phased, phases, ctx);
  when(g, LLVMBuildNot(g->b, g->phased, ""), image, ctx);
}

static void fill_taps(gemm *g, LLVMValueRef first, LLVMValueRef count, bool phases) {
  ljc_ir *ir = g->ir;
  const LLVMValueRef *a = g->arg;
  LLVMValueRef start[3], last[3];
  tap_of(g, first, start);
  ljc_loop T;
  ljc_loop_begin(ir, &T, ljc_i64(ir, 0), count, false, 3, start);
  LLVMValueRef tap[3] = {T.acc[0], T.acc[1], T.acc[2]};
  LLVMValueRef field[TAP_FIELDS] = {vmul(g, tap[0], a[LJC_GEMM_IMG_SC]), vmul(g, tap[1], a[LJC_GEMM_WIN_DY]),
                                    vmul(g, tap[2], a[LJC_GEMM_WIN_DX])};
  if (phases) { /* the tap's phase plane and its offsets in it (split_phases) */
    phase_geom pg = phase_geom_of(g);
    phase_tap(g, &pg, tap, field);
  }
  for (int f = 0; f < TAP_FIELDS; f++)
    LLVMBuildStore(g->b, field[f], tap_field(g, T.iv, f));
  next_tap(g, tap);
  ljc_loop_end(ir, &T, tap, last);
}

/* The window_vector of tap t of the block (fill_taps) for the positions (ohs, ows) of the
 * columns from n0. */
static LLVMValueRef tap_vector(gemm *g, const window_pack *w, LLVMValueRef t, LLVMValueRef ohs, LLVMValueRef ows,
                               LLVMValueRef n0, LLVMValueRef mask, int how, const lane_rows *lr) {
  LLVMValueRef field[TAP_FIELDS];
  for (int f = 0; f < TAP_FIELDS; f++)
    field[f] = LLVMBuildLoad2(g->b, g->ir->i64, tap_field(g, t, f), "");
  return window_vector(g, w, ohs, ows, oat(g, w->image, field[TAP_PLANE]), field[TAP_DY], field[TAP_DX], n0, mask, how,
                       lr);
}

/* WINDOW_PAIRS with bf16 operands: the pairs of tap t and tap t + 1 where the second is the
 * first's neighbour on the right in the same row of the same plane (side_by_side), the image's
 * rows contiguous. A lane's two elements then lie side by side in the image, so the pairs of
 * the lanes in one of its rows are the 2·vw elements from the first lane's as they lie: one
 * load a row, where each tap's vector took two loads and a shuffle and then the two were
 * interleaved. With 3×3 taps, two pairs in three are such (a channel's 9 taps pair across
 * rows and channels); a 3×3 stride-2 convolution, 64 -> 128 channels on 56×56 at batch 32 in
 * bf16, one Zen 4 thread: 21.2 -> 20.0 ms (PyTorch 19.1-19.4). field holds tap t's fields;
 * mask0 and mask1 are the lanes each tap may have. */
static LLVMValueRef side_pair_vector(gemm *g, const window_pack *w, LLVMValueRef ohs, LLVMValueRef ows,
                                     const LLVMValueRef *field, LLVMValueRef mask0, LLVMValueRef mask1,
                                     const lane_rows *lr) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  const LLVMValueRef *a = g->arg;
  LLVMValueRef dy = field[TAP_DY], dx = field[TAP_DX];
  LLVMValueRef ih = LLVMBuildAdd(b, ohs, splat32(g, dy), ""), iw = LLVMBuildAdd(b, ows, splat32(g, dx), "");
  LLVMValueRef in0 = inside(g, w, ih, iw, mask0);
  LLVMValueRef in1 = inside(g, w, ih, LLVMBuildAdd(b, iw, splat32(g, ljc_i64(ir, 1)), ""), mask1);
  LLVMValueRef c = vadd(g, vmul(g, dy, a[LJC_GEMM_IMG_SH]), dx);
  return window_rows_read(g, lr, oat(g, w->image, field[TAP_PLANE]), LLVMBuildTrunc(b, c, ir->i32, ""),
                          LLVMBuildOr(b, in0, in1, ""), 2, interleave(g, in0, in1));
}

/* Whether tap t + 1 of the block is there (has) and tap t's neighbour on the right: the same
 * plane and row of the window, one column on, in an image whose rows are contiguous. */
static LLVMValueRef side_by_side(gemm *g, const LLVMValueRef *f0, const LLVMValueRef *f1, LLVMValueRef has) {
  LLVMBuilderRef b = g->b;
  LLVMValueRef same = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, f0[TAP_PLANE], f1[TAP_PLANE], ""),
                                   LLVMBuildICmp(b, LLVMIntEQ, f0[TAP_DY], f1[TAP_DY], ""), "");
  LLVMValueRef next = LLVMBuildICmp(b, LLVMIntEQ, add(g, f0[TAP_DX], 1), f1[TAP_DX], "");
  LLVMValueRef rows = LLVMBuildICmp(b, LLVMIntEQ, g->arg[LJC_GEMM_IMG_SW], ljc_i64(g->ir, 1), "");
  return LLVMBuildAnd(b, LLVMBuildAnd(b, same, next, ""), LLVMBuildAnd(b, rows, has, ""), "");
}

/* B the im2col (rows of k are taps, columns window positions): panel by panel, the lanes'
 * positions once, then row by row of k (pair by pair with bf16 operands) with its tap carried
 * along. */
static void pack_window_panels(gemm *g, void *ctx, int how) {
  const window_pack *w = ctx;
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  const panel *p = w->p;
  int vw = g->vw;
  ljc_loop Q, K;
  ljc_loop_begin(ir, &Q, ljc_i64(ir, 0), w->np, false, 0, NULL);
  LLVMValueRef n0 = LLVMBuildNSWAdd(b, p->n0, mul(g, Q.iv, (int64_t)p->nv * vw), ""), buf = panel_buffer(g, p, Q.iv);
  LLVMValueRef ohs[NV], ows[NV];
  lane_rows lr[NV];
  for (int j = 0; j < p->nv; j++) {
    window_positions(g, w, add(g, n0, (int64_t)j * vw), &ohs[j], &ows[j]);
    if (rows_step(how)) lr[j] = lane_rows_at(g, lane_base(g, w, ohs[j], ows[j], rows_step(how)));
  }
  /* rows of k, or pairs of them (g->pairs: the second tap's vectors zeros past the block) */
  ljc_loop_begin(ir, &K, ljc_i64(ir, 0), g->pairs ? pair_count(g) : LLVMBuildNSWSub(b, g->k1, g->k0, ""), false, 0,
                 NULL);
  LLVMValueRef t = g->pairs ? mul(g, K.iv, 2) : K.iv, has = NULL;
  if (g->pairs) {
    LLVMValueRef k, second;
    pair_rows(g, K.iv, &k, &second, &has);
  }
  LLVMBasicBlockRef after = NULL;
  if (g->pairs && how == WINDOW_PAIRS) { /* taps side by side: side_pair_vector */
    LLVMValueRef f0[TAP_FIELDS], f1[TAP_FIELDS];
    for (int f = 0; f < TAP_FIELDS; f++) {
      f0[f] = LLVMBuildLoad2(b, ir->i64, tap_field(g, t, f), "");
      f1[f] = LLVMBuildLoad2(b, ir->i64, tap_field(g, add(g, t, 1), f), "");
    }
    LLVMValueRef side = side_by_side(g, f0, f1, has);
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(ir->ctx, fn, "window.side_pairs");
    LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(ir->ctx, fn, "window.pairs");
    after = LLVMAppendBasicBlockInContext(ir->ctx, fn, "window.pairs_done");
    LLVMBuildCondBr(b, side, yes, no);
    LLVMPositionBuilderAtEnd(b, yes);
    for (int j = 0; j < p->nv; j++) {
      LLVMValueRef in1 = p->mask[j] ? p->mask[j] : w->all;
      LLVMValueRef v = side_pair_vector(g, w, ohs[j], ows[j], f0, p->mask[j], in1, &lr[j]);
      packed_store(g, v, pairs_at(g, p, buf, K.iv, j));
    }
    LLVMBuildBr(b, after);
    LLVMPositionBuilderAtEnd(b, no);
  }
  for (int j = 0; j < p->nv; j++) {
    LLVMValueRef nj = add(g, n0, (int64_t)j * vw);
    LLVMValueRef v = tap_vector(g, w, t, ohs[j], ows[j], nj, p->mask[j], how, &lr[j]);
    if (!g->pairs) {
      packed_store(g, v, packed_at(g, p, buf, K.iv, (int64_t)j * vw));
      continue;
    }
    LLVMValueRef in1 = LLVMBuildAnd(b, p->mask[j] ? p->mask[j] : w->all, ljc_splat(ir, has, LLVMTypeOf(w->all)), "");
    packed_store(g, interleave(g, v, tap_vector(g, w, add(g, t, 1), ohs[j], ows[j], nj, in1, how, &lr[j])),
                 pairs_at(g, p, buf, K.iv, j));
  }
  if (after) {
    LLVMBuildBr(b, after);
    LLVMPositionBuilderAtEnd(b, after);
  }
  ljc_loop_end(ir, &K, NULL, NULL);
  ljc_loop_end(ir, &Q, NULL, NULL);
}

/* A window_pack for matrix bi of the image at operand (LJC_GEMM_A or LJC_GEMM_B). */
static window_pack window_pack_of(gemm *g, int operand, LLVMValueRef bi) {
  window_pack w = {0};
  LLVMValueRef lanes[64];
  for (int l = 0; l < g->vw; l++) lanes[l] = ljc_const_i(g->ir->i32, l);
  w.iota = LLVMConstVector(lanes, (unsigned)g->vw);
  w.all = LLVMConstAllOnes(LLVMVectorType(g->ir->i1, (unsigned)g->vw));
  w.image = oat(g, g->arg[operand], vmul(g, bi, g->arg[operand + 1]));
  return w;
}

/* Whether a window's next column and next row are the image's next element and next row
 * (stride 1 over contiguous rows of the image: a "same" convolution), which makes a vector of
 * window positions a run of the image. */
static LLVMValueRef window_runs(gemm *g) {
  LLVMBuilderRef b = g->b;
  const LLVMValueRef *a = g->arg;
  LLVMValueRef sx = LLVMBuildICmp(b, LLVMIntEQ, vmul(g, a[LJC_GEMM_WIN_SX], a[LJC_GEMM_IMG_SW]), ljc_i64(g->ir, 1), "");
  LLVMValueRef sy = LLVMBuildICmp(b, LLVMIntEQ, vmul(g, a[LJC_GEMM_WIN_SY], a[LJC_GEMM_IMG_SH]), a[LJC_GEMM_WIN_OW], "");
  return LLVMBuildAnd(b, sx, sy, "");
}

/* Runs then(g, ctx, how) for the window_read the window's strides call for at run time. */
static void by_window_read(gemm *g, void (*then)(gemm *, void *, int), void *ctx) {
  LLVMBuilderRef b = g->b;
  const LLVMValueRef *a = g->arg;
  LLVMValueRef run = window_runs(g), step = vmul(g, a[LJC_GEMM_WIN_SX], a[LJC_GEMM_IMG_SW]);
  LLVMValueRef step1 = LLVMBuildICmp(b, LLVMIntEQ, step, ljc_i64(g->ir, 1), "");
  LLVMValueRef step2 = LLVMBuildICmp(b, LLVMIntEQ, step, ljc_i64(g->ir, 2), "");
  LLVMValueRef not_run = LLVMBuildNot(b, run, "");
  LLVMValueRef cond[4] = {run, LLVMBuildAnd(b, not_run, step1, ""), LLVMBuildAnd(b, not_run, step2, ""),
                          LLVMBuildNot(b, LLVMBuildOr(b, run, LLVMBuildOr(b, step1, step2, ""), ""), "")};
  for (int how = WINDOW_RUN; how <= WINDOW_GATHER; how++) {
    LLVMBasicBlockRef after = ljc_if_begin(g->ir, cond[how], "gemm.window");
    then(g, ctx, how);
    ljc_if_end(g->ir, after);
  }
}

/* B an im2col of an image, packed from the image (implicit GEMM): each vector holds one tap's
 * elements at vw window positions, the image's where the window position is inside it and
 * zeros elsewhere (padding, and past B's last column), read as window_read says. Offsets
 * within an image fit in i32 (implicit_cols in fuse.c). */
typedef struct window_call {
  LLVMValueRef bi;
  const panel *p;
  LLVMValueRef np;
} window_call;

static void pack_window_image(gemm *g, void *ctx) {
  const window_call *c = ctx;
  window_pack w = window_pack_of(g, LJC_GEMM_B, c->bi);
  w.p = c->p, w.np = c->np;
  fill_taps(g, g->k0, add(g, LLVMBuildNSWSub(g->b, g->k1, g->k0, ""), 1), false);
  by_window_read(g, pack_window_panels, &w);
}

/* The same from the image's phase planes (split_phases): a window of stride 1 over planes
 * of OW columns, whose vectors are runs. */
static void pack_window_phases(gemm *g, void *ctx) {
  const window_call *c = ctx;
  LLVMValueRef saved[LJC_GEMM_NARGS];
  fill_taps(g, g->k0, add(g, LLVMBuildNSWSub(g->b, g->k1, g->k0, ""), 1), true);
  window_on_phases(g, saved);
  window_pack w = window_pack_of(g, LJC_GEMM_B, ljc_i64(g->ir, 0));
  w.image = g->phases, w.p = c->p, w.np = c->np;
  pack_window_panels(g, &w, WINDOW_RUN);
  memcpy(g->arg, saved, sizeof saved);
}

static void pack_window(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef np) {
  window_call c = {bi, p, np};
  by_phases(g, pack_window_phases, pack_window_image, &c);
}

/* B the transpose of an im2col (rows of k window positions, columns taps), panel by panel:
 * its columns' taps once (fill_taps), then vw positions at a time, for each column the
 * window_vector of its tap at those positions (read as window_read says), vw of them
 * transposed in registers into vw rows of the panel (as pack_cols packs columns contiguous
 * along k); positions past the block's end and taps past B's last column zeros. Before, a
 * grouped convolution's weight gradient, dY·colsᵀ for each image and group, stored its im2col
 * (115 MB for 32 groups of 4 -> 4 channels, 3×3 on 28×28 at batch 32): the convolution's
 * forward and both gradients 21.6-23.1 -> 17.6-18.3 ms on one Zen 4 thread (PyTorch 40.8). */
static void pack_window_t_panels(gemm *g, void *ctx, int how) {
  const window_pack *w = ctx;
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  const panel *p = w->p;
  int vw = g->vw;
  LLVMValueRef len = LLVMBuildNSWSub(b, g->k1, g->k0, "");
  LLVMValueRef hi = LLVMBuildNSWAdd(b, g->k0, LLVMBuildAnd(b, add(g, len, vw - 1), ljc_i64(ir, -vw), ""), "");
  ljc_loop Q, K;
  ljc_loop_begin(ir, &Q, ljc_i64(ir, 0), w->np, false, 0, NULL);
  LLVMValueRef n0 = LLVMBuildNSWAdd(b, p->n0, mul(g, Q.iv, (int64_t)p->nv * vw), ""), buf = panel_buffer(g, p, Q.iv);
  fill_taps(g, n0, ljc_i64(ir, (int64_t)p->nv * vw), false);
  ljc_loop_begin_step(ir, &K, g->k0, hi, vw, true, 0, NULL);
  LLVMValueRef ohs, ows, row = LLVMBuildNSWSub(b, K.iv, g->k0, ""), in = lanes_below(g, K.iv, g->k1);
  window_positions(g, w, K.iv, &ohs, &ows);
  lane_rows lr;
  if (rows_step(how)) lr = lane_rows_at(g, lane_base(g, w, ohs, ows, rows_step(how)));
  for (int j = 0; j < p->nv; j++) {
    LLVMValueRef v[64];
    for (int c = 0; c < vw; c++) { /* a column past B's last (the last panel's) reads nothing */
      LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
      LLVMValueRef col = LLVMBuildICmp(b, LLVMIntSLT, add(g, n0, j * vw + c), g->arg[LJC_GEMM_N], "");
      LLVMBasicBlockRef after = ljc_if_begin(ir, col, "gemm.window_t_column");
      LLVMValueRef x = tap_vector(g, w, ljc_i64(ir, j * vw + c), ohs, ows, K.iv, in, how, &lr);
      LLVMBasicBlockRef read = LLVMGetInsertBlock(b);
      ljc_if_end(ir, after);
      v[c] = LLVMBuildPhi(b, g->ivt, "");
      LLVMAddIncoming(v[c], (LLVMValueRef[]){LLVMConstNull(g->ivt), x}, (LLVMBasicBlockRef[]){pre, read}, 2);
    }
    ljc_transpose(ir, vw, v);
    for (int r = 0; r < vw; r++) packed_store(g, v[r], packed_at(g, p, buf, add(g, row, r), (int64_t)j * vw));
  }
  ljc_loop_end(ir, &K, NULL, NULL);
  ljc_loop_end(ir, &Q, NULL, NULL);
}

static void pack_window_t(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef np) {
  window_pack w = window_pack_of(g, LJC_GEMM_B, bi);
  w.p = p, w.np = np;
  by_window_read(g, pack_window_t_panels, &w);
}

/* A's block of rows [m0, m0 + len) of one matrix (pack_a). */
typedef struct a_block {
  window_pack w;
  LLVMValueRef m0, len;
  const phase_geom *phases; /* the taps' places in the phase planes, or NULL (the image's) */
} a_block;

/* A an im2col (rows are taps, k window positions): the block of rows and of k, row after row
 * into g->apack (KC values a row), the window positions of the block's vectors of k (and
 * their lane_base, for a read by rows) worked out first (into g->apos) and the row's tap
 * carried along; past the block's last k, zeros up to the vector's end. */
static void pack_a_rows(gemm *g, void *ctx, int how) {
  const a_block *ab = ctx;
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  const LLVMValueRef *a = g->arg;
  int vw = g->vw;
  LLVMTypeRef iv = LLVMVectorType(ir->i32, (unsigned)vw);
  LLVMValueRef nkv = LLVMBuildSDiv(b, add(g, LLVMBuildNSWSub(b, g->k1, g->k0, ""), vw - 1), ljc_i64(ir, vw), "");
  ljc_loop P, R, V;
  ljc_loop_begin(ir, &P, ljc_i64(ir, 0), nkv, false, 0, NULL);
  LLVMValueRef pos[3];
  window_positions(g, &ab->w, vadd(g, g->k0, mul(g, P.iv, vw)), &pos[0], &pos[1]);
  pos[2] = rows_step(how) ? lane_base(g, &ab->w, pos[0], pos[1], rows_step(how)) : NULL;
  for (int h = 0; h < 3 && pos[h]; h++) {
    LLVMValueRef at_p = add(g, mul(g, P.iv, 3 * vw), h * vw);
    LLVMSetAlignment(LLVMBuildStore(b, pos[h], LLVMBuildInBoundsGEP2(b, ir->i32, g->apos, &at_p, 1, "")),
                     (unsigned)ir->vec_bytes);
  }
  ljc_loop_end(ir, &P, NULL, NULL);
  LLVMValueRef start[3];
  tap_of(g, ab->m0, start);
  ljc_loop_begin(ir, &R, ljc_i64(ir, 0), ab->len, false, 3, start);
  LLVMValueRef tap[3] = {R.acc[0], R.acc[1], R.acc[2]};
  LLVMValueRef field[TAP_FIELDS] = {vmul(g, tap[0], a[LJC_GEMM_IMG_SC]), vmul(g, tap[1], a[LJC_GEMM_WIN_DY]),
                                    vmul(g, tap[2], a[LJC_GEMM_WIN_DX])};
  if (ab->phases) phase_tap(g, ab->phases, tap, field);
  LLVMValueRef plane = at(g, ab->w.image, field[TAP_PLANE]), dy = field[TAP_DY], dx = field[TAP_DX];
  LLVMValueRef row = at(g, g->apack, mul(g, R.iv, g->kc));
  ljc_loop_begin(ir, &V, ljc_i64(ir, 0), nkv, false, 0, NULL);
  LLVMValueRef k = vadd(g, g->k0, mul(g, V.iv, vw));
  for (int h = 0; h < (rows_step(how) ? 3 : 2); h++) {
    LLVMValueRef off = add(g, mul(g, V.iv, 3 * vw), h * vw);
    pos[h] = LLVMBuildLoad2(b, iv, LLVMBuildInBoundsGEP2(b, ir->i32, g->apos, &off, 1, ""), "");
    LLVMSetAlignment(pos[h], (unsigned)ir->vec_bytes);
  }
  LLVMValueRef rows_in = LLVMBuildICmp(b, LLVMIntULT, ab->w.iota, splat32(g, LLVMBuildNSWSub(b, g->k1, k, "")), "");
  lane_rows lr;
  if (rows_step(how)) lr = lane_rows_at(g, pos[2]);
  LLVMValueRef v = window_vector(g, &ab->w, pos[0], pos[1], plane, dy, dx, k, rows_in, how, &lr);
  packed_store(g, v, at(g, row, mul(g, V.iv, vw)));
  ljc_loop_end(ir, &V, NULL, NULL);
  next_tap(g, tap);
  LLVMValueRef last[3];
  ljc_loop_end(ir, &R, tap, last);
}

/* A an im2col of an image, its rows [m0, m0 + len) of matrix bi packed from the image into
 * g->apack (implicit GEMM, as pack_window for B). */
static void pack_a_image(gemm *g, void *ctx) {
  const a_rows *ar = ctx;
  a_block ab = {window_pack_of(g, LJC_GEMM_A, ar->bi), ar->m0, ar->len, NULL};
  by_window_read(g, pack_a_rows, &ab);
}

/* The same from the image's phase planes (split_phases), as pack_window_phases. */
static void pack_a_phases(gemm *g, void *ctx) {
  const a_rows *ar = ctx;
  LLVMValueRef saved[LJC_GEMM_NARGS];
  phase_geom pg = phase_geom_of(g);
  window_on_phases(g, saved);
  a_block ab = {window_pack_of(g, LJC_GEMM_A, ljc_i64(g->ir, 0)), ar->m0, ar->len, &pg};
  ab.w.image = g->phases;
  pack_a_rows(g, &ab, WINDOW_RUN);
  memcpy(g->arg, saved, sizeof saved);
}

static void pack_a(gemm *g, LLVMValueRef bi, LLVMValueRef m0, LLVMValueRef len) {
  a_rows ar = {bi, m0, len};
  by_phases(g, pack_a_phases, pack_a_image, &ar);
}

/* A contiguous along m and a whole number of pages from one k to the next (a transposed
 * operand of 1024 rows and more, dY^T of a weight's gradient): its rows [m0, m0 + len) of
 * matrix bi, the block of k, into g->apack (KC values a row, as pack_a), vw rows of vw values
 * of k at a time, loaded along m and transposed in registers, the next vw values of k
 * prefetched. Read in place, the lines of a block of k all fell into a few of L2's sets, too
 * few to hold them for the next tile: one thread, 3072 × 2048 · 2048 × 768 from A's transpose
 * took 52-53 ms, from a contiguous A 46, packed 48-49; 1024³ 11.4-12.3 -> 10.6. With rows a
 * stride apart that spreads the lines over more sets, reading in place is faster (512 × 128 ·
 * 128 × 784: 0.47 ms, packed 0.50), also half a page apart while K fits a block of k (512 ×
 * K · K × 512 from A's transpose, one Zen 4 thread: 0.61 and 0.63 ms at K 128, 3.65 and 3.69
 * at 768), but not beyond it: 5.13 and 5.02 at 1024, 8.36 and 7.61 at 1536, 11.4 and 10.2 at
 * 2048. */
static void pack_a_rows_of(gemm *g, LLVMValueRef bi, LLVMValueRef m0, LLVMValueRef len) {
  ljc_ir *ir = g->ir;
  int vw = g->vw;
  LLVMValueRef sk = g->arg[LJC_GEMM_A_SK];
  ljc_loop K, R;
  ljc_loop_begin_step(ir, &K, g->k0, g->k1, vw, false, 0, NULL);
  LLVMValueRef last = LLVMBuildNSWSub(g->b, add(g, g->k1, -1), K.iv, ""), col = LLVMBuildNSWSub(g->b, K.iv, g->k0, "");
  LLVMValueRef ks_in[64];
  for (int c = 0; c < vw; c++) ks_in[c] = LLVMBuildICmp(g->b, LLVMIntSLE, ljc_i64(ir, c), last, "");
  ljc_loop_begin_step(ir, &R, ljc_i64(ir, 0), len, vw, false, 0, NULL);
  LLVMValueRef rows_in = lanes_below(g, R.iv, len);
  LLVMValueRef p0 = elem(g, LJC_GEMM_A, bi, LLVMBuildNSWAdd(g->b, m0, R.iv, ""), K.iv), v[64];
  for (int c = 0; c < vw; c++) {
    LLVMValueRef mask = LLVMBuildAnd(g->b, rows_in, splat(g, ks_in[c], LLVMTypeOf(rows_in)), "");
    LLVMValueRef off = vmul(g, ljc_intrinsic2(ir, "smin", ljc_i64(ir, c), last), sk); /* an address of A's */
    v[c] = masked_load(g, at(g, p0, off), mask);
    LLVMValueRef ahead = mul(g, sk, vw + c);
    ljc_prefetch(ir, LLVMBuildGEP2(g->b, g->t, p0, &ahead, 1, ""));
  }
  ljc_transpose(ir, vw, v);
  for (int r = 0; r < vw; r++) packed_store(g, v[r], at(g, g->apack, vadd(g, mul(g, add(g, R.iv, r), g->kc), col)));
  ljc_loop_end(ir, &R, NULL, NULL);
  ljc_loop_end(ir, &K, NULL, NULL);
}

static void pack_a_rows_then(gemm *g, void *ctx) {
  const a_rows *ar = ctx;
  pack_a_rows_of(g, ar->bi, ar->m0, ar->len);
}

/* Packs np panels shaped like p, from p's first column on. */
static void pack(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef np) {
  if (g->variant == LJC_GEMM_WINDOW)
    pack_window(g, bi, p, np);
  else if (g->variant == LJC_GEMM_WINDOW_T)
    pack_window_t(g, bi, p, np);
  else if (g->pairs && g->variant == LJC_GEMM_ROWS)
    pack_rows_pairs(g, bi, p, np);
  else if (g->pairs && g->variant == LJC_GEMM_COLS && !p->mask[0])
    pack_cols_pairs(g, bi, p, np);
  else if (g->pairs)
    pack_elements_pairs(g, bi, p, np);
  else if (g->variant == LJC_GEMM_ROWS)
    pack_rows(g, bi, p, np);
  else if (g->variant == LJC_GEMM_COLS && !p->mask[0])
    pack_cols(g, bi, p, np);
  else
    pack_elements(g, bi, p, np);
}

/* ---- the micro-kernel --------------------------------------------------------------------- */

/* The bytes of a cache line. */
enum { CACHE_LINE = 64 };

/* The lines of the next block's part of a panel per iteration of a tile's loop over k: 1 or
 * 2 (a panel's row is one line or two; a pair of k is two rows of B). */
static int pf_lines(const gemm *g) { return NV * g->vw * osize(g) * (g->pairs ? 2 : 1) / CACHE_LINE; }

/* B's next block, prefetched by the tiles of the one before: a run of a few rows (a linear
 * layer's batch of 8 to 64 rows against a weight of 4096 × 4096) packed each block from memory,
 * then ran its tiles, and neither overlapped the other; 8, 16, 32 and 64 rows of that product,
 * one Zen 4 thread: 7.2, 9.6, 14.1, 23.3 -> 4.8, 6.6, 11.5, 21.3 ms. With iteration k of its
 * loop over k a tile prefetches one line of the next block's part of its panel (two where it
 * is the panel's only tile): of B contiguous along n, row k's (of a pair of k, row 2k's); of B
 * contiguous along k, a column's, column k mod the panel's width, the lines after as k goes by
 * widths, so that the columns' runs of the block are taken a line of each at a time. Where the
 * panel has other tiles, the second prefetch is the first's line again (no cost measured; a
 * branch would sit in the loop). */
static void prefetch_next(gemm *g, LLVMValueRef k) {
  ljc_ir *ir = g->ir;
  int wide = NV * g->vw, shift = 0;
  LLVMValueRef off;
  if (g->variant == LJC_GEMM_ROWS)
    off = vmul(g, k, g->pairs ? mul(g, g->arg[LJC_GEMM_B_SK], 2) : g->arg[LJC_GEMM_B_SK]);
  else {
    while ((1 << shift) < wide) shift++;
    LLVMValueRef col = LLVMBuildAnd(g->b, k, ljc_i64(ir, wide - 1), "");
    LLVMValueRef line = LLVMBuildLShr(g->b, k, ljc_i64(ir, shift), "");
    off = LLVMBuildNSWAdd(g->b, vmul(g, col, g->arg[LJC_GEMM_B_SN]), mul(g, line, CACHE_LINE / osize(g)), "");
  }
  LLVMValueRef p = oat(g, g->pf, off);
  ljc_prefetch(ir, p);
  if (pf_lines(g) > 1) ljc_prefetch(ir, oat(g, p, g->pf_second));
}

/* Sets g->pf_panel and g->pf_half for the tiles of panel q (its first column n0) where the
 * routine prefetches: B packed (contiguous along n or k), full panels. The next block is the
 * panels' next block of k, or after the last the next block of panels' first; past B's last
 * block the addresses lie past its end, which prefetches may. Only the tiles of a call of at
 * most MC rows prefetch (few, an i1; the others run a copy of the tile's loop without): a
 * call of more packs each block for as many tiles as it has rows, and there the prefetches'
 * addresses took registers, and the loop reloaded A's row pointers from the stack, 4 loads
 * more beside its 16 FMAs (one Zen 5 thread: 512³ 1.29-1.31 -> 1.22-1.25 ms, 2048³ 87-88 ->
 * 82-83). */
static void prefetch_panel(gemm *g, LLVMValueRef bi, const panel *p, LLVMValueRef n0, LLVMValueRef np,
                           LLVMValueRef few) {
  ljc_ir *ir = g->ir;
  g->pf_panel = NULL;
  if ((g->variant != LJC_GEMM_ROWS && g->variant != LJC_GEMM_COLS) || p->mask[0]) return;
  g->pf_few = few;
  int64_t wide = (int64_t)NV * g->vw;
  LLVMValueRef more_k = LLVMBuildICmp(g->b, LLVMIntSLT, g->k1, g->arg[LJC_GEMM_K], "");
  LLVMValueRef next_k = elem(g, LJC_GEMM_B, bi, g->k1, n0);
  LLVMValueRef next_n = elem(g, LJC_GEMM_B, bi, ljc_i64(ir, 0), LLVMBuildNSWAdd(g->b, n0, mul(g, np, wide), ""));
  g->pf_panel = LLVMBuildSelect(g->b, more_k, next_k, next_n, "");
  int line = CACHE_LINE / osize(g);
  if (pf_lines(g) == 1)
    g->pf_half = ljc_i64(ir, 0);
  else if (g->variant == LJC_GEMM_ROWS)
    g->pf_half = g->pairs ? g->arg[LJC_GEMM_B_SK] : ljc_i64(ir, line);
  else {
    LLVMValueRef count = g->pairs ? pair_count(g) : LLVMBuildNSWSub(g->b, g->k1, g->k0, "");
    g->pf_half = mul(g, LLVMBuildSDiv(g->b, count, ljc_i64(ir, wide), ""), line);
  }
}

/* C's row `crow` (b·M + m), column n. */
static LLVMValueRef c_at(gemm *g, LLVMValueRef crow, LLVMValueRef n) {
  LLVMValueRef off = vadd(g, vmul(g, crow, g->arg[LJC_GEMM_LDC]), n);
  return at(g, g->arg[LJC_GEMM_C], LLVMBuildNSWSub(g->b, off, g->arg[LJC_GEMM_C_ORIGIN], ""));
}

LLVMValueRef ljc_gemm_bias_at(ljc_ir *ir, const LLVMValueRef *arg, LLVMTypeRef t, LLVMValueRef bi, LLVMValueRef m,
                              LLVMValueRef n) {
  LLVMBuilderRef b = ir->b;
  bi = LLVMBuildURem(b, bi, arg[LJC_GEMM_BIAS_NB], "");
  LLVMValueRef off = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, bi, arg[LJC_GEMM_BIAS_SB], ""),
                                     LLVMBuildNSWMul(b, m, arg[LJC_GEMM_BIAS_SM], ""), "");
  off = LLVMBuildNSWAdd(b, off, LLVMBuildNSWMul(b, n, arg[LJC_GEMM_BIAS_SN], ""), "");
  return LLVMBuildGEP2(b, t, arg[LJC_GEMM_BIAS], &off, 1, "");
}

/* The argument block's BIAS moved to `at` (ljc_gemm_bias_at's, for a call on part of C), or NULL
 * where it is NULL. */
static LLVMValueRef moved_bias(ljc_ir *ir, const LLVMValueRef *arg, LLVMValueRef at) {
  return LLVMBuildSelect(ir->b, LLVMBuildIsNotNull(ir->b, arg[LJC_GEMM_BIAS], ""), at, arg[LJC_GEMM_BIAS], "");
}

/* The bias of element (m, n) of matrix bi of C where `when` (an i1) and there is one, else 0. */
static LLVMValueRef elem_bias(gemm *g, LLVMValueRef bi, LLVMValueRef m, LLVMValueRef n, LLVMValueRef when) {
  LLVMBuilderRef b = g->b;
  LLVMTypeRef one = LLVMVectorType(g->t, 1);
  LLVMValueRef mask = LLVMBuildAnd(b, when, LLVMBuildIsNotNull(b, g->arg[LJC_GEMM_BIAS], ""), "");
  mask = LLVMBuildInsertElement(b, LLVMGetUndef(LLVMVectorType(g->ir->i1, 1)), mask, ljc_i64(g->ir, 0), "");
  LLVMValueRef v = ljc_masked_load(g->ir, one, ljc_gemm_bias_at(g->ir, g->arg, g->t, bi, m, n), (int)g->esize, mask);
  return LLVMBuildExtractElement(b, v, ljc_i64(g->ir, 0), "");
}

/* The biases of row m of matrix bi of C at columns n .. n + vw - 1 (those `mask` marks; NULL:
 * all) where `when` (an i1) and there is one, else zeros: the row's one value where BIAS_SN is
 * 0 (a convolution's), else a vector of the row's (a linear layer's). */
static LLVMValueRef bias_vector(gemm *g, LLVMValueRef bi, LLVMValueRef m, LLVMValueRef n, LLVMValueRef mask,
                                LLVMValueRef when) {
  LLVMBuilderRef b = g->b;
  LLVMValueRef along = LLVMBuildICmp(b, LLVMIntNE, g->arg[LJC_GEMM_BIAS_SN], ljc_i64(g->ir, 0), "");
  LLVMValueRef one = elem_bias(g, bi, m, n, LLVMBuildAnd(b, when, LLVMBuildNot(b, along, ""), ""));
  LLVMValueRef has = LLVMBuildAnd(b, when, along, "");
  has = LLVMBuildAnd(b, has, LLVMBuildIsNotNull(b, g->arg[LJC_GEMM_BIAS], ""), "");
  LLVMValueRef lanes = splat(g, has, LLVMVectorType(g->ir->i1, (unsigned)g->vw));
  if (mask) lanes = LLVMBuildAnd(b, lanes, mask, "");
  LLVMValueRef v = masked_load(g, ljc_gemm_bias_at(g->ir, g->arg, g->t, bi, m, n), lanes);
  return LLVMBuildSelect(b, along, v, splat(g, one, g->vt), "");
}

LLVMValueRef ljc_gemm_add_row_bias(ljc_ir *ir, const LLVMValueRef *arg, LLVMValueRef x, LLVMValueRef bi,
                                   LLVMValueRef m, LLVMValueRef rows) {
  LLVMBuilderRef b = ir->b;
  LLVMTypeRef vt = LLVMTypeOf(x), t = LLVMGetElementType(vt);
  LLVMValueRef has = LLVMBuildIsNotNull(b, arg[LJC_GEMM_BIAS], "");
  LLVMValueRef lanes = LLVMBuildAnd(b, rows, ljc_splat(ir, has, LLVMVectorType(ir->i1, LLVMGetVectorSize(vt))), "");
  LLVMValueRef bias = ljc_masked_load(ir, vt, ljc_gemm_bias_at(ir, arg, t, bi, m, ljc_i64(ir, 0)), t == ir->f64 ? 8 : 4,
                                      lanes);
  return LLVMBuildSelect(b, has, LLVMBuildFAdd(b, x, bias, ""), x, "");
}

/* Stores C's tile rows r < mr for which store[r] (an i1) is true; with nontemporal, their full
 * vectors (the call streams C: streams_c) non-temporally. */
static void store_rows(gemm *g, int mr, const LLVMValueRef *crow, const panel *p, const LLVMValueRef *acc,
                       const LLVMValueRef *store, bool nontemporal) {
  for (int r = 0; r < mr; r++) {
    LLVMBasicBlockRef after = ljc_if_begin(g->ir, store[r], "gemm.store");
    for (int j = 0; j < p->nv; j++) {
      LLVMValueRef c = c_at(g, crow[r], add(g, p->n0, (int64_t)j * g->vw));
      if (!nontemporal || p->mask[j]) {
        vstore(g, acc[r * p->nv + j], c, p->mask[j]);
        continue;
      }
      LLVMValueRef st = LLVMBuildStore(g->b, acc[r * p->nv + j], c);
      LLVMSetAlignment(st, (unsigned)g->ir->vec_bytes);
      ljc_set_nontemporal(g->ir->ctx, st);
    }
    ljc_if_end(g->ir, after);
  }
}

LLVMValueRef ljc_gemm_relu_now(ljc_ir *ir, const LLVMValueRef *arg, LLVMValueRef last) {
  LLVMValueRef relu = LLVMBuildICmp(ir->b, LLVMIntNE, arg[LJC_GEMM_RELU], ljc_i64(ir, 0), "");
  return last ? LLVMBuildAnd(ir->b, relu, last, "") : relu;
}

LLVMValueRef ljc_gemm_relu_if(ljc_ir *ir, LLVMValueRef now, LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef neg = LLVMBuildFCmp(ir->b, LLVMRealOLT, x, LLVMConstNull(t), "");
  if (now && LLVMGetTypeKind(t) == LLVMVectorTypeKind) now = ljc_splat(ir, now, LLVMTypeOf(neg));
  if (now) neg = LLVMBuildAnd(ir->b, now, neg, "");
  return LLVMBuildSelect(ir->b, neg, LLVMConstNull(t), x, "");
}

/* Stores the tile's rows that `store` marks: their full vectors non-temporally where the call
 * streams C and this is the last block of k (C's lines are written once, never read); relu'd
 * first where the call asks for it (ljc_gemm_relu_now), in a branch of its own: a select for each
 * vector on every tile would cost the short blocks of k of the calls without one. */
static void store_tile(gemm *g, int mr, const LLVMValueRef *crow, const panel *p, const LLVMValueRef *in,
                       const LLVMValueRef *store) {
  LLVMValueRef last = LLVMBuildICmp(g->b, LLVMIntEQ, g->k1, g->arg[LJC_GEMM_K], "");
  LLVMValueRef acc[MR_MAX * NV], relu[MR_MAX * NV];
  int n = mr * p->nv;
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b);
  LLVMValueRef now = ljc_gemm_relu_now(g->ir, g->arg, last);
  LLVMBasicBlockRef after = ljc_if_begin(g->ir, now, "gemm.relu_c");
  for (int i = 0; i < n; i++) relu[i] = ljc_gemm_relu_if(g->ir, NULL, in[i]);
  LLVMBasicBlockRef done = LLVMGetInsertBlock(g->b);
  ljc_if_end(g->ir, after);
  for (int i = 0; i < n; i++) {
    acc[i] = LLVMBuildPhi(g->b, g->vt, "");
    LLVMAddIncoming(acc[i], (LLVMValueRef[]){in[i], relu[i]}, (LLVMBasicBlockRef[]){pre, done}, 2);
  }
  if (!g->stream) {
    store_rows(g, mr, crow, p, acc, store, false);
    return;
  }
  LLVMValueRef nt = LLVMBuildAnd(g->b, g->stream, last, "");
  after = ljc_if_begin(g->ir, nt, "gemm.stream_c");
  store_rows(g, mr, crow, p, acc, store, true);
  ljc_if_end(g->ir, after);
  after = ljc_if_begin(g->ir, LLVMBuildNot(g->b, nt, ""), "gemm.store_c");
  store_rows(g, mr, crow, p, acc, store, false);
  ljc_if_end(g->ir, after);
}

/* One k of a tile: its products added to the accumulators kacc (then A's offset), into next. */
static void tile_k(gemm *g, int mr, int nv, LLVMValueRef k, const LLVMValueRef *kacc, const LLVMValueRef *arow,
                   const panel *p, LLVMValueRef buf, LLVMValueRef *next) {
  ljc_ir *ir = g->ir;
  LLVMValueRef bvec[NV];
  LLVMValueRef koff = kacc[mr * nv];
  if (g->pairs) { /* a pair of A's k a 32-bit element, B's pairs a vector of 2·vw bf16 */
    LLVMTypeRef pt = LLVMVectorType(LLVMBFloatTypeInContext(ir->ctx), 2 * (unsigned)g->vw);
    LLVMTypeRef it = LLVMVectorType(ir->i32, (unsigned)g->vw);
    for (int j = 0; j < nv; j++) {
      bvec[j] = LLVMBuildLoad2(g->b, pt, pairs_at(g, p, buf, k, j), "");
      LLVMSetAlignment(bvec[j], (unsigned)ir->vec_bytes);
    }
    next[mr * nv] = add(g, koff, 2);
    for (int r = 0; r < mr; r++) {
      LLVMValueRef x = LLVMBuildLoad2(g->b, ir->i32, oat(g, arow[r], koff), "");
      LLVMSetAlignment(x, 2);
      LLVMValueRef s = LLVMBuildBitCast(g->b, splat(g, x, it), pt, "");
      for (int j = 0; j < nv; j++) next[r * nv + j] = dot_pairs(g, kacc[r * nv + j], s, bvec[j]);
    }
  } else {
    for (int j = 0; j < nv; j++)
      bvec[j] = g->variant == LJC_GEMM_DIRECT
                    ? vload(g, at(g, buf, add(g, vmul(g, k, g->arg[LJC_GEMM_B_SK]), (int64_t)j * g->vw)), p->mask[j])
                    : packed_load(g, packed_at(g, p, buf, k, (int64_t)j * g->vw));
    next[mr * nv] = vadd(g, koff, g->a_step);
    for (int r = 0; r < mr; r++) {
      LLVMValueRef s = splat(g, LLVMBuildLoad2(g->b, g->t, at(g, arow[r], koff), ""), g->vt);
      for (int j = 0; j < nv; j++) next[r * nv + j] = ljc_fmuladd(ir, s, bvec[j], kacc[r * nv + j]);
    }
  }
}

/* An mr-row tile of C in panel p: row r is C's row crow[r] and A's row m[r] of matrix bi;
 * only the rows `store` marks are stored. */
static void tile(gemm *g, int mr, LLVMValueRef bi, const LLVMValueRef *m, const LLVMValueRef *crow, const panel *p,
                 LLVMValueRef buf, const LLVMValueRef *store) {
  ljc_ir *ir = g->ir;
  int nv = p->nv;
  /* the accumulators, then the offset of A's column k from each row's k0 (added to, so the
   * loop multiplies nothing) */
  LLVMValueRef arow[MR_MAX], acc[MR_MAX * NV + 1], next[MR_MAX * NV + 1];
  for (int r = 0; r < mr; r++) {
    LLVMValueRef off = vmul(g, m[r], g->a_sm);
    arow[r] = LLVMBuildGEP2(g->b, g->ot, g->a_base, &off, 1, "");
  }
  /* the first block of k starts from the bias (0 without one), the others from 0 */
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nv; j++)
      acc[r * nv + j] = bias_vector(g, bi, m[r], add(g, p->n0, (int64_t)j * g->vw), p->mask[j], g->first);
  acc[mr * nv] = ljc_i64(ir, 0);
  /* the tile's lines of C, owned by the time the loop over k ends: stored (and, after the
   * first block of k, read) only then, they missed the cache one after another on every tile
   * of a C larger than it (the 1×1 convolution below: 21.5-22.3 -> 18.7 ms). Not for a short
   * block of k, whose C is a small one's (conv1's 9 taps, its C a block on the stack: 3-5%
   * slower with them), nor where the call streams C: a non-temporal store to a line the cache
   * holds must take it out first ([4096, 64] by [64, 4096], one thread: 21.3 ms with ordinary
   * stores, 25.8 streamed after the prefetches, 20.2 without them) */
  LLVMValueRef klen = LLVMBuildNSWSub(g->b, g->k1, g->k0, "");
  LLVMValueRef long_k = LLVMBuildICmp(g->b, LLVMIntSGE, klen, ljc_i64(ir, PREFETCH_C_MIN_K), "");
  if (g->stream) long_k = LLVMBuildAnd(g->b, long_k, LLVMBuildNot(g->b, g->stream, ""), "");
  LLVMBasicBlockRef no_prefetch = ljc_if_begin(ir, long_k, "gemm.prefetch_c");
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nv; j++) ljc_prefetch_write(ir, c_at(g, crow[r], add(g, p->n0, (int64_t)j * g->vw)));
  ljc_if_end(ir, no_prefetch);
  LLVMValueRef count = g->pairs ? pair_count(g) : klen;
  ljc_loop K;
  ljc_loop_begin(ir, &K, ljc_i64(ir, 0), count, false, mr * nv + 1, acc);
  if (g->pf) prefetch_next(g, K.iv);
  tile_k(g, mr, nv, K.iv, K.acc, arow, p, buf, next);
  ljc_loop_end(ir, &K, next, acc);
  /* the block's sum joins what C holds: sums of a block's length stay accurate however
   * many blocks (and matrices, summed over the batch) there are. C is read only then: the
   * first block's loads, their values unused, missed the cache on every tile of a C larger
   * than it (a 1×1 convolution of 64 to 128 channels of 56×56, batch 32, one Zen 4 core:
   * 23.0-23.5 -> 20.9-21.6 ms, before the prefetches above) */
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b);
  LLVMBasicBlockRef after = ljc_if_begin(ir, LLVMBuildNot(g->b, g->first, ""), "gemm.add_c");
  LLVMValueRef sum[MR_MAX * NV];
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nv; j++) {
      LLVMValueRef c = vload(g, c_at(g, crow[r], add(g, p->n0, (int64_t)j * g->vw)), p->mask[j]);
      sum[r * nv + j] = LLVMBuildFAdd(g->b, c, acc[r * nv + j], "");
    }
  LLVMBasicBlockRef added = LLVMGetInsertBlock(g->b);
  ljc_if_end(ir, after);
  for (int i = 0; i < mr * nv; i++) {
    LLVMValueRef phi = LLVMBuildPhi(g->b, g->vt, "");
    LLVMAddIncoming(phi, (LLVMValueRef[]){acc[i], sum[i]}, (LLVMBasicBlockRef[]){pre, added}, 2);
    acc[i] = phi;
  }
  store_tile(g, mr, crow, p, acc, store);
}

/* A tile's arguments, for when. */
typedef struct tile_call {
  int mr;
  LLVMValueRef bi;
  const LLVMValueRef *m, *crow;
  const panel *p;
  LLVMValueRef buf;
  const LLVMValueRef *store;
} tile_call;

static void tile_then(gemm *g, void *ctx) {
  const tile_call *t = ctx;
  tile(g, t->mr, t->bi, t->m, t->crow, t->p, t->buf, t->store);
}

/* Rows m0 .. m0 + len - 1 (len > 0) of matrix bi in panel p, mr rows at a time by one tile:
 * the tile for the rows left after the last full one ends at the last row and stores only
 * the rows left (it recomputes rows already done in this block of k, but must not add to
 * them again); with fewer than mr rows in all, its rows past the last repeat the last and
 * are not stored. */
static void tiles_of(gemm *g, int mr, LLVMValueRef bi, LLVMValueRef m0, LLVMValueRef crow0, LLVMValueRef len,
                     const panel *p, LLVMValueRef buf) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  LLVMValueRef m[MR_MAX], crow[MR_MAX], store[MR_MAX];
  LLVMValueRef tiles = LLVMBuildSDiv(b, add(g, len, mr - 1), ljc_i64(ir, mr), "");
  LLVMValueRef last = add(g, len, -1), first_max = ljc_intrinsic2(ir, "smax", add(g, len, -mr), ljc_i64(ir, 0));
  ljc_loop R;
  ljc_loop_begin_step(ir, &R, ljc_i64(ir, 0), mul(g, tiles, mr), mr, false, 0, NULL);
  LLVMValueRef first = ljc_intrinsic2(ir, "smin", R.iv, first_max);
  for (int r = 0; r < mr; r++) {
    LLVMValueRef i = add(g, first, r);
    store[r] = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, i, R.iv, ""), LLVMBuildICmp(b, LLVMIntSLE, i, last, ""), "");
    i = ljc_intrinsic2(ir, "smin", i, last);
    m[r] = LLVMBuildNSWAdd(b, m0, i, "");
    crow[r] = LLVMBuildNSWAdd(b, crow0, i, "");
  }
  tile_call t = {mr, bi, m, crow, p, buf, store};
  if (g->pf_panel) { /* the tiles take turns at the halves of the next block's lines */
    LLVMValueRef odd = LLVMBuildAnd(b, LLVMBuildSDiv(b, R.iv, ljc_i64(ir, mr), ""), ljc_i64(ir, 1), "");
    g->pf = oat(g, g->pf_panel, vmul(g, odd, g->pf_half));
    LLVMValueRef alone = LLVMBuildICmp(b, LLVMIntEQ, tiles, ljc_i64(ir, 1), "");
    g->pf_second = LLVMBuildSelect(b, alone, g->pf_half, ljc_i64(ir, 0), "");
    when(g, g->pf_few, tile_then, &t);
    g->pf = NULL;
    when(g, LLVMBuildNot(b, g->pf_few, ""), tile_then, &t);
  } else
    tile_then(g, &t);
  g->pf = NULL;
  ljc_loop_end(ir, &R, NULL, NULL);
}

/* tiles_of the tile's rows (g->mr), except for one row alone (a matrix-vector product), which a
 * tile of one row computes with mr times fewer multiplies (1 × 4096 · 4096 × 4096: 8.1 → 6.2 ms
 * on one thread, 4.1 → 3.1 on two; the routines compile ~10 ms longer), and for up to half the
 * tile's rows, which a tile of half its rows computes with half the multiplies: a grouped
 * convolution's 4 channels a group (32 groups of 4 → 4 channels, 3×3 on 28×28 at batch 32,
 * one Zen 4 thread: 7.7 → 5.3 ms; PyTorch 7.0). With fill_taps's table, MNISTNet's step took
 * 25-50 ms longer to compile its routines (two threads), once a machine where the library's
 * were built for another CPU. */
static void row_tiles(gemm *g, LLVMValueRef bi, LLVMValueRef m0, LLVMValueRef crow0, LLVMValueRef len,
                      const panel *p, LLVMValueRef buf) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  int mr = g->mr, half = mr / 2; /* 3 or 4 (tile_rows) */
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef one_bb = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.one_row");
  LLVMBasicBlockRef several_bb = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.several_rows");
  LLVMBasicBlockRef half_bb = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.half_rows");
  LLVMBasicBlockRef rows_bb = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.rows");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.tiles_done");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, len, ljc_i64(ir, 1), ""), one_bb, several_bb);
  LLVMPositionBuilderAtEnd(b, one_bb);
  LLVMValueRef yes = ljc_const_i(ir->i1, 1);
  tile(g, 1, bi, &m0, &crow0, p, buf, &yes);
  LLVMBuildBr(b, done);
  LLVMPositionBuilderAtEnd(b, several_bb);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLE, len, ljc_i64(ir, half), ""), half_bb, rows_bb);
  LLVMPositionBuilderAtEnd(b, half_bb);
  tiles_of(g, half, bi, m0, crow0, len, p, buf);
  LLVMBuildBr(b, done);
  LLVMPositionBuilderAtEnd(b, rows_bb);
  tiles_of(g, mr, bi, m0, crow0, len, p, buf);
  LLVMBuildBr(b, done);
  LLVMPositionBuilderAtEnd(b, done);
}

/* The rows of one matrix a routine's call is for. */
typedef struct rows {
  LLVMValueRef bi, m0, crow0, len;
} rows;

/* Sets g->a_base and g->a_sm for the block of rows from m0 of matrix bi and the block of k:
 * apack's rows, shifted by m0's, where A is packed there, else A's. */
static void a_rows_at(gemm *g, LLVMValueRef bi, LLVMValueRef m0) {
  LLVMValueRef back = mul(g, m0, -g->kc);
  LLVMValueRef packed = g->apack ? oat(g, g->apack, back) : NULL;
  if (g->a_window) {
    g->a_base = packed, g->a_sm = ljc_i64(g->ir, g->kc);
    return;
  }
  if (g->pairs) {
    g->a_base = LLVMBuildSelect(g->b, g->a_pairs_packed, packed, elem(g, LJC_GEMM_A, bi, ljc_i64(g->ir, 0), g->k0), "");
    g->a_sm = LLVMBuildSelect(g->b, g->a_pairs_packed, ljc_i64(g->ir, g->kc), g->arg[LJC_GEMM_A_SM], "");
    return;
  }
  g->a_base = elem(g, LJC_GEMM_A, bi, ljc_i64(g->ir, 0), g->k0), g->a_sm = g->arg[LJC_GEMM_A_SM];
  if (g->a_transposed) {
    g->a_base = LLVMBuildSelect(g->b, g->a_transposed, packed, g->a_base, "");
    g->a_sm = LLVMBuildSelect(g->b, g->a_transposed, ljc_i64(g->ir, g->kc), g->a_sm, "");
  }
}

/* np panels shaped like p for the rows: packed (unless B is read where it is), then blocks of
 * MC rows (A's block stays in L2), each done panel by panel (the panel stays in L1). */
static void panel_run(gemm *g, const rows *rw, const panel *p, LLVMValueRef np) {
  ljc_ir *ir = g->ir;
  if (g->variant != LJC_GEMM_DIRECT) pack(g, rw->bi, p, np);
  ljc_loop mb, Q;
  LLVMValueRef nblocks = LLVMBuildSDiv(g->b, add(g, rw->len, MC - 1), ljc_i64(ir, MC), "");
  ljc_loop_begin_step(ir, &mb, ljc_i64(ir, 0), mul(g, nblocks, MC), MC, false, 0, NULL);
  LLVMValueRef blen = ljc_intrinsic2(ir, "smin", ljc_i64(ir, MC), LLVMBuildNSWSub(g->b, rw->len, mb.iv, ""));
  LLVMValueRef m = LLVMBuildNSWAdd(g->b, rw->m0, mb.iv, ""), crow = LLVMBuildNSWAdd(g->b, rw->crow0, mb.iv, "");
  if (g->a_window) pack_a(g, rw->bi, m, blen);
  if (g->pairs) when(g, g->a_pairs_packed, pack_a_pairs, &(a_rows){rw->bi, m, blen});
  if (g->a_transposed) when(g, g->a_transposed, pack_a_rows_then, &(a_rows){rw->bi, m, blen});
  a_rows_at(g, rw->bi, m);
  /* A call of a short K (short_k) takes the block's rows in bands of g->mr, each across all the
   * panels before the next: each of C's rows written from end to end, one band after another,
   * rather than the rows of the block a panel at a time. On a Zen 4 core, ordinary full-line
   * stores along rows ran at the speed of non-temporal ones, in the panels' order at less than
   * half (64 MiB, one thread: 27-31 GB/s against 12, non-temporal 28 in either order; two
   * threads 42 against 24 and 28). For a B (a few rows) that stays in L2 for every band, read
   * in place: [2048, 8] by [8, 1024] (8 MiB of C) 0.50 -> 0.49 ms on one thread, 0.271 -> 0.247
   * on two; [4096, 3] by [3, 4096] with ordinary stores 8.4 -> 3.3 ms and 3.9 -> 1.5 (streamed,
   * as C of that size is: 2.6 and 2.35 in either order); packed, B transposed, streamed, one Zen
   * 5 thread: 4.0 -> 1.8-2.7 ms. */
  ljc_loop band;
  if (g->short_k) {
    LLVMValueRef step = LLVMBuildSelect(g->b, g->short_k, ljc_i64(ir, g->mr), blen, "");
    LLVMValueRef nbands = LLVMBuildSDiv(g->b, LLVMBuildNSWAdd(g->b, blen, add(g, step, -1), ""), step, "");
    ljc_loop_begin(ir, &band, ljc_i64(ir, 0), nbands, false, 0, NULL);
    LLVMValueRef off = LLVMBuildNSWMul(g->b, band.iv, step, "");
    m = LLVMBuildNSWAdd(g->b, m, off, ""), crow = LLVMBuildNSWAdd(g->b, crow, off, "");
    blen = ljc_intrinsic2(ir, "smin", step, LLVMBuildNSWSub(g->b, blen, off, ""));
  }
  ljc_loop_begin(ir, &Q, ljc_i64(ir, 0), np, false, 0, NULL);
  panel q = *p;
  q.n0 = LLVMBuildNSWAdd(g->b, p->n0, mul(g, Q.iv, (int64_t)p->nv * g->vw), "");
  LLVMValueRef buf = g->variant == LJC_GEMM_DIRECT ? elem(g, LJC_GEMM_B, rw->bi, g->k0, q.n0) : panel_buffer(g, p, Q.iv);
  prefetch_panel(g, rw->bi, p, q.n0, np, LLVMBuildICmp(g->b, LLVMIntSLE, rw->len, ljc_i64(ir, MC), ""));
  row_tiles(g, rw->bi, m, crow, blen, &q, buf);
  g->pf_panel = NULL;
  ljc_loop_end(ir, &Q, NULL, NULL);
  if (g->short_k) ljc_loop_end(ir, &band, NULL, NULL);
  ljc_loop_end(ir, &mb, NULL, NULL);
}

/* Opens the loop over k's blocks: at most KC values each, about equally long in whole vectors
 * (a K a little over KC would otherwise leave a short last block, whose pass over C costs
 * about what a long one's does); sets g->k0, g->k1 and g->first (the first block of the
 * call's first matrix: C starts from it) for each. */
static void k_blocks_begin(gemm *g, ljc_loop *kb) {
  ljc_ir *ir = g->ir;
  LLVMValueRef K = g->arg[LJC_GEMM_K];
  LLVMValueRef nk = LLVMBuildSDiv(g->b, add(g, K, g->kc - 1), ljc_i64(ir, g->kc), "");
  LLVMValueRef len = LLVMBuildSDiv(g->b, LLVMBuildNSWAdd(g->b, K, add(g, nk, -1), ""), nk, "");
  len = LLVMBuildAnd(g->b, add(g, len, g->vw - 1), ljc_i64(ir, -g->vw), "");
  ljc_loop_begin(ir, kb, ljc_i64(ir, 0), nk, false, 0, NULL);
  g->k0 = vmul(g, kb->iv, len);
  g->k1 = ljc_intrinsic2(ir, "smin", vadd(g, g->k0, len), K);
  g->first = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, kb->iv, ljc_i64(ir, 0), ""), g->batch_first, "");
}

/* panel_run for every block of k (k_blocks_begin), B packed or read in place. The blocks of k
 * go inside the blocks of panels, so that the passes over C for each block of k stay on the
 * panels' NP·NV vectors of columns (in L2 or L3) rather than sweep all of C's rows each time. */
static void panel_k_blocks(gemm *g, const rows *rw, const panel *p, LLVMValueRef np) {
  ljc_ir *ir = g->ir;
  ljc_loop kb;
  k_blocks_begin(g, &kb);
  panel_run(g, rw, p, np);
  ljc_loop_end(ir, &kb, NULL, NULL);
}

/* The last panel, of the `left` columns from nfull on (0 < left < NV·vw): one vector when
 * they fit in one, else NV. */
typedef struct edge {
  const rows *rw;
  LLVMValueRef nfull, left;
} edge;

static void edge_panel(gemm *g, const edge *e, int nv) {
  panel p = {e->nfull, e->left, {NULL}, nv};
  for (int j = 0; j < nv; j++) p.mask[j] = lanes_below(g, ljc_i64(g->ir, (int64_t)j * g->vw), e->left);
  panel_k_blocks(g, e->rw, &p, ljc_i64(g->ir, 1));
}

static void edge_panel_1(gemm *g, void *ctx) { edge_panel(g, ctx, 1); }
static void edge_panel_nv(gemm *g, void *ctx) { edge_panel(g, ctx, NV); }

/* The rows for the block of k: the full panels NP at a time (packed together: the block's
 * part of each row of B is one run), then the last panel of the columns left. */
static void panels(gemm *g, const rows *rw) {
  ljc_ir *ir = g->ir;
  int64_t wide = (int64_t)NV * g->vw;
  LLVMValueRef few = LLVMBuildICmp(g->b, LLVMIntSLE, rw->len, ljc_i64(ir, MC), "");
  LLVMValueRef most = LLVMBuildSelect(g->b, few, ljc_i64(ir, NP_FEW), ljc_i64(ir, NP), "");
  if (g->short_k) /* as many panels as the buffer holds (all of B), for the bands to go across */
    most = LLVMBuildSelect(g->b, g->short_k, LLVMBuildSDiv(g->b, ljc_i64(ir, (int64_t)NP * g->kc), g->panel_k, ""),
                           most, "");
  LLVMValueRef step = mul(g, most, wide);
  LLVMValueRef N = g->arg[LJC_GEMM_N];
  LLVMValueRef nfull = LLVMBuildAnd(g->b, N, ljc_i64(ir, -wide), "");
  LLVMValueRef nsteps = LLVMBuildSDiv(g->b, LLVMBuildNSWAdd(g->b, nfull, add(g, step, -1), ""), step, "");
  ljc_loop n;
  ljc_loop_begin(ir, &n, ljc_i64(ir, 0), nsteps, true, 0, NULL);
  LLVMValueRef n0 = LLVMBuildNSWMul(g->b, n.iv, step, "");
  LLVMValueRef np = LLVMBuildSDiv(g->b, LLVMBuildNSWSub(g->b, nfull, n0, ""), ljc_i64(ir, wide), "");
  panel p = {n0, ljc_i64(ir, wide), {NULL}, NV};
  panel_k_blocks(g, rw, &p, ljc_intrinsic2(ir, "smin", np, most));
  ljc_loop_end(ir, &n, NULL, NULL);
  edge e = {rw, nfull, LLVMBuildNSWSub(g->b, N, nfull, "")};
  LLVMValueRef one = LLVMBuildICmp(g->b, LLVMIntSLE, e.left, ljc_i64(ir, g->vw), "");
  when(g, LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, e.left, ljc_i64(ir, 0), ""), one, ""), edge_panel_1, &e);
  when(g, LLVMBuildNot(g->b, one, ""), edge_panel_nv, &e);
}

/* ---- a few rows: dot products ------------------------------------------------------------- */

/* A call of at most dot_max_rows rows of a COLS routine whose A is contiguous along k (x·Wᵀ
 * of a linear layer at a batch of a few rows) computes each element of C as the dot product
 * of A's row and B's column, both read where they are: B once, without packing, which for so
 * few rows costs more than the products (its transposes ran at a fraction of the products'
 * speed). dot_cols columns at a time, each (row, column) pair a vector accumulator along k
 * (with bf16 operands, a vector of pairs: dot_pairs), its lanes summed at the end. */
enum { DOT_ROWS = 4, DOT_COLS = 4 };

/* The most rows a call takes as dot products: 4 with 32 vector registers, else 2. */
static int dot_max_rows(const gemm *g) { return g->ir->vec_bytes == 64 ? DOT_ROWS : DOT_ROWS / 2; }

/* Columns a block of nr rows takes at a time: up to DOT_COLS, as many as leave room in the
 * register file for the vectors of A and B (16 accumulators with 32 registers, 8 with 16). */
static int dot_cols(const gemm *g, int nr) {
  int cols = (g->ir->vec_bytes == 64 ? 16 : 8) / nr;
  return cols < 1 ? 1 : cols > DOT_COLS ? DOT_COLS : cols;
}

/* Columns n0 .. n0 + ncols - 1 of the nr rows of rw (dot_rows_of). */
static void dot_block(gemm *g, const rows *rw, int nr, LLVMValueRef n0, int ncols) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  LLVMValueRef zero = ljc_i64(ir, 0), K = g->arg[LJC_GEMM_K];
  LLVMValueRef arow[DOT_ROWS], bcol[DOT_COLS], acc[DOT_ROWS * DOT_COLS], next[DOT_ROWS * DOT_COLS];
  for (int r = 0; r < nr; r++) arow[r] = elem(g, LJC_GEMM_A, rw->bi, add(g, rw->m0, r), zero);
  for (int j = 0; j < ncols; j++) bcol[j] = elem(g, LJC_GEMM_B, rw->bi, zero, add(g, n0, j));
  int nacc = nr * ncols;
  for (int i = 0; i < nacc; i++) acc[i] = LLVMConstNull(g->vt);
  /* a vector of k: vw values, or with bf16 operands 2·vw (vw pairs) */
  int step = g->pairs ? 2 * g->vw : g->vw;
  LLVMTypeRef pt = LLVMVectorType(LLVMBFloatTypeInContext(ir->ctx), (unsigned)step);
  LLVMTypeRef ht = LLVMVectorType(ir->i16, (unsigned)step);
  LLVMValueRef kfull = LLVMBuildAnd(b, K, ljc_i64(ir, -step), "");
  ljc_loop L;
  ljc_loop_begin_step(ir, &L, zero, kfull, step, true, nacc, acc);
  for (int pass = 0; pass < 2; pass++) {
    /* the whole vectors of k, then the lanes left, masked (zeros past K) */
    LLVMValueRef k = pass ? kfull : L.iv, mask = pass ? lanes_below_n(g, step, kfull, K) : NULL;
    const LLVMValueRef *in = pass ? acc : L.acc;
    LLVMValueRef av[DOT_ROWS], bv[DOT_COLS];
    for (int r = 0; r < nr; r++)
      av[r] = g->pairs ? LLVMBuildBitCast(b, pair_load(g, ht, oat(g, arow[r], k), mask), pt, "")
                       : vload(g, at(g, arow[r], k), mask);
    for (int j = 0; j < ncols; j++)
      bv[j] = g->pairs ? LLVMBuildBitCast(b, pair_load(g, ht, oat(g, bcol[j], k), mask), pt, "")
                       : vload(g, at(g, bcol[j], k), mask);
    for (int r = 0; r < nr; r++)
      for (int j = 0; j < ncols; j++)
        next[r * ncols + j] = g->pairs ? dot_pairs(g, in[r * ncols + j], av[r], bv[j])
                                       : ljc_fmuladd(ir, av[r], bv[j], in[r * ncols + j]);
    if (!pass) ljc_loop_end(ir, &L, next, acc);
    else memcpy(acc, next, (size_t)nacc * sizeof *acc);
  }
  LLVMValueRef relu = ljc_gemm_relu_now(ir, g->arg, NULL); /* all of k at once */
  for (int r = 0; r < nr; r++) {
    LLVMValueRef m = add(g, rw->m0, r);
    for (int j = 0; j < ncols; j++) {
      LLVMValueRef args[2] = {elem_bias(g, rw->bi, m, add(g, n0, j), g->batch_first), acc[r * ncols + j]};
      LLVMValueRef sum = ljc_intrinsic_over(ir, "vector.reduce.fadd", 1, &g->vt, 2, args);
      LLVMSetFastMathFlags(sum, LLVMFastMathAllowReassoc);
      LLVMValueRef cp = c_at(g, add(g, rw->crow0, r), add(g, n0, j));
      LLVMValueRef old = LLVMBuildLoad2(b, g->t, cp, "");
      sum = LLVMBuildSelect(b, g->batch_first, sum, LLVMBuildFAdd(b, old, sum, ""), "");
      LLVMBuildStore(b, ljc_gemm_relu_if(ir, relu, sum), cp);
    }
  }
}

/* The call's nr rows (nr <= dot_max_rows): dot_cols columns at a time, then one at a time. */
static void dot_rows_of(gemm *g, const rows *rw, int nr) {
  ljc_ir *ir = g->ir;
  int cols = dot_cols(g, nr);
  LLVMValueRef N = g->arg[LJC_GEMM_N];
  LLVMValueRef nfull = LLVMBuildNSWMul(g->b, LLVMBuildSDiv(g->b, N, ljc_i64(ir, cols), ""), ljc_i64(ir, cols), "");
  ljc_loop L, T;
  ljc_loop_begin_step(ir, &L, ljc_i64(ir, 0), nfull, cols, true, 0, NULL);
  dot_block(g, rw, nr, L.iv, cols);
  ljc_loop_end(ir, &L, NULL, NULL);
  ljc_loop_begin(ir, &T, nfull, N, true, 0, NULL);
  dot_block(g, rw, nr, T.iv, 1);
  ljc_loop_end(ir, &T, NULL, NULL);
}

/* ---- a few rows by B's columns: the product transposed ----------------------------------- */

/* A call of a whole number of panels' widths of rows up to MC (NV·vw: 32, 64 or 96 rows of
 * f32 under AVX-512) of a COLS routine whose A is contiguous along k (x·Wᵀ of a linear layer at
 * a batch of 32 or 64) computes Cᵀ = Bᵀ·Aᵀ instead, SWAP_COLS of B's columns at a time: W's
 * rows, contiguous along k, are the tiles' rows of A, read where they are, and the call's rows
 * of A, transposed, the panels, packed from few values; each block of Cᵀ goes into a buffer on
 * the stack, then transposed into C. Packing W, the panels of C, took a transpose of every
 * vw × vw block of it, which for so few rows the tiles did not pay back: one Zen 4 thread, 32
 * rows by 1024 × 1024 0.72 -> 0.61 ms, by 4096 × 4096 11.8 -> 10.2, 64 rows by 512 × 784 0.485
 * -> 0.460 (two threads alike); bf16, 32 rows by 4096 × 4096 5.94 -> 5.32, by 1024 × 1024 0.347
 * -> 0.311. Rows that leave a panel partly empty lost as much as that (17 and 40 rows by
 * 1024 × 1024: 0.57 -> 0.75, 0.86 -> 0.96 ms). */
enum { SWAP_COLS = 256 };

/* C's rows of rw, columns n0 .. n0 + ncols - 1, from the block of Cᵀ in buf (row n of it at
 * buf + n·MC): vw × vw blocks transposed in registers. */
static void swap_store(gemm *g, const rows *rw, LLVMValueRef buf, LLVMValueRef n0, LLVMValueRef ncols) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  int vw = g->vw;
  ljc_loop I, J;
  ljc_loop_begin_step(ir, &I, ljc_i64(ir, 0), ncols, vw, true, 0, NULL);
  LLVMValueRef cols = lanes_below(g, I.iv, ncols);
  ljc_loop_begin_step(ir, &J, ljc_i64(ir, 0), rw->len, vw, true, 0, NULL);
  LLVMValueRef rows_in = lanes_below(g, J.iv, rw->len), v[64];
  for (int c = 0; c < vw; c++) {
    LLVMValueRef n = add(g, I.iv, c);
    LLVMValueRef in = LLVMBuildAnd(b, rows_in, splat(g, LLVMBuildICmp(b, LLVMIntSLT, n, ncols, ""),
                                                      LLVMTypeOf(rows_in)), "");
    v[c] = masked_load(g, at(g, buf, LLVMBuildNSWAdd(b, mul(g, n, MC), J.iv, "")), in);
  }
  ljc_transpose(ir, vw, v);
  for (int r = 0; r < vw; r++) {
    LLVMValueRef m = add(g, J.iv, r);
    LLVMBasicBlockRef after = ljc_if_begin(ir, LLVMBuildICmp(b, LLVMIntSLT, m, rw->len, ""), "gemm.swap_row");
    vstore(g, v[r], c_at(g, LLVMBuildNSWAdd(b, rw->crow0, m, ""), LLVMBuildNSWAdd(b, n0, I.iv, "")), cols);
    ljc_if_end(ir, after);
  }
  ljc_loop_end(ir, &J, NULL, NULL);
  ljc_loop_end(ir, &I, NULL, NULL);
}

/* The call's rows rw as Cᵀ = Bᵀ·Aᵀ (above), SWAP_COLS of C's columns at a time, each through
 * `panels` with the operands' places swapped and the block of Cᵀ as its C. */
static void swap_rows_of(gemm *g, void *ctx) {
  const rows *rw = ctx;
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  LLVMValueRef arg[LJC_GEMM_NARGS], a_transposed = g->a_transposed, a_step = g->a_step, first = g->batch_first;
  LLVMValueRef a_pairs_packed = g->a_pairs_packed;
  memcpy(arg, g->arg, sizeof arg);
  LLVMValueRef zero = ljc_i64(ir, 0), N = arg[LJC_GEMM_N];
  LLVMValueRef buf = ljc_entry_array(ir, g->t, (int64_t)SWAP_COLS * MC);
  ljc_loop J;
  ljc_loop_begin_step(ir, &J, zero, N, SWAP_COLS, true, 0, NULL);
  LLVMValueRef ncols = ljc_intrinsic2(ir, "smin", ljc_i64(ir, SWAP_COLS), LLVMBuildNSWSub(b, N, J.iv, ""));
  /* A: B's columns from J, along k; B: the call's rows of A, transposed; C: buf */
  LLVMValueRef w_rows = elem(g, LJC_GEMM_B, rw->bi, zero, J.iv), x_rows = elem(g, LJC_GEMM_A, rw->bi, rw->m0, zero);
  LLVMValueRef *s = g->arg;
  s[LJC_GEMM_A] = w_rows, s[LJC_GEMM_B] = x_rows;
  s[LJC_GEMM_A_SB] = zero, s[LJC_GEMM_A_SM] = arg[LJC_GEMM_B_SN], s[LJC_GEMM_A_SK] = arg[LJC_GEMM_B_SK];
  s[LJC_GEMM_B_SB] = zero, s[LJC_GEMM_B_SK] = arg[LJC_GEMM_A_SK], s[LJC_GEMM_B_SN] = arg[LJC_GEMM_A_SM];
  s[LJC_GEMM_A_ORIGIN] = zero, s[LJC_GEMM_C] = buf, s[LJC_GEMM_C_ORIGIN] = zero, s[LJC_GEMM_LDC] = ljc_i64(ir, MC);
  s[LJC_GEMM_M] = ncols, s[LJC_GEMM_N] = rw->len;
  /* the bias of Cᵀ's element (n, m) is C's of (m, J + n) */
  s[LJC_GEMM_BIAS] = moved_bias(ir, arg, ljc_gemm_bias_at(ir, arg, g->t, rw->bi, rw->m0, J.iv));
  s[LJC_GEMM_BIAS_SB] = zero, s[LJC_GEMM_BIAS_NB] = ljc_i64(ir, 1);
  s[LJC_GEMM_BIAS_SM] = arg[LJC_GEMM_BIAS_SN], s[LJC_GEMM_BIAS_SN] = arg[LJC_GEMM_BIAS_SM];
  g->a_transposed = ljc_const_i(ir->i1, 0), g->a_step = arg[LJC_GEMM_B_SK], g->batch_first = ljc_const_i(ir->i1, 1);
  if (g->pairs) /* W's rows read where they are in pairs of k, unless K is odd */
    g->a_pairs_packed = LLVMBuildTrunc(b, arg[LJC_GEMM_K], ir->i1, "");
  panels(g, &(rows){zero, zero, zero, ncols});
  memcpy(g->arg, arg, sizeof arg);
  g->a_transposed = a_transposed, g->a_step = a_step, g->batch_first = first, g->a_pairs_packed = a_pairs_packed;
  swap_store(g, rw, buf, J.iv, ncols);
  ljc_loop_end(ir, &J, NULL, NULL);
}

/* Whether a COLS routine's call of rows rw goes swap_rows_of's way: A contiguous along k, a
 * whole number of panels' widths of rows up to MC, C the product alone or from a bias the
 * same for every row (Cᵀ's along its rows, as the tiles read one), no sum over the batch, not
 * streamed. */
static LLVMValueRef swaps(gemm *g, const rows *rw) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  const LLVMValueRef *a = g->arg;
  LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntEQ, a[LJC_GEMM_A_SK], ljc_i64(ir, 1), "");
  LLVMValueRef wide = ljc_i64(ir, (int64_t)NV * g->vw);
  LLVMValueRef whole = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildSRem(b, rw->len, wide, ""), ljc_i64(ir, 0), "");
  ok = LLVMBuildAnd(b, ok, LLVMBuildAnd(b, whole, LLVMBuildICmp(b, LLVMIntSGE, rw->len, wide, ""), ""), "");
  ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntSLE, rw->len, ljc_i64(ir, MC), ""), "");
  LLVMValueRef no_row_bias = LLVMBuildOr(b, LLVMBuildIsNull(b, a[LJC_GEMM_BIAS], ""),
                                         LLVMBuildICmp(b, LLVMIntEQ, a[LJC_GEMM_BIAS_SM], ljc_i64(ir, 0), ""), "");
  ok = LLVMBuildAnd(b, ok, no_row_bias, "");
  ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntEQ, a[LJC_GEMM_SUM], ljc_i64(ir, 0), ""), "");
  if (g->stream) ok = LLVMBuildAnd(b, ok, LLVMBuildNot(b, g->stream, ""), "");
  return LLVMBuildAnd(b, ok, g->batch_first, "");
}

/* ---- a few rows: rows of B added up ------------------------------------------------------ */

/* A call of at most AXPY_ROWS rows of a ROWS routine (x·W, W contiguous along n, at a batch of
 * a few rows) adds A[m, k]·B[k, chunk] into its rows' sums for each k (each pair of k with bf16
 * operands: bf16 x·W of 1×4096 by 4096×4096, one Zen 4 thread, 3.14 ms packed, 0.93 so), a
 * chunk of columns at a time, the sums in a buffer that stays in L1 (the packed panels' room, unused here), B's
 * rows read where they are, axpy_unroll of them at a time: B once, as runs of a chunk's
 * columns, without packing it for so few rows. The sums go by the tiles' blocks of k
 * (k_blocks_begin), each from zero and then added to C (one plain sum over 1000 values of k
 * drifted past a relative 1e-5 from the exact one). */
enum { AXPY_ROWS = 4, AXPY_CHUNK_MAX = 4096, AXPY_SUMS_BYTES = 32 << 10, AXPY_UNROLL = 4 };

/* Columns a chunk of nr rows takes: the most, a power of two, that keeps their sums within
 * AXPY_SUMS_BYTES of L1, up to AXPY_CHUNK_MAX. B's rows are read as runs of a chunk's
 * columns, and a longer run streams better from memory: x·W of 1×4096 by 4096×4096, one
 * thread, 1.37-1.43 ms in runs of 2048 columns, 1.27-1.30 in runs of 4096; 4 rows' sums of
 * 4096 columns (64 KB) outgrow L1 and ran 3% slower. */
static int64_t axpy_chunk_cols(const gemm *g, int nr) {
  int64_t c = AXPY_SUMS_BYTES / (nr * (int64_t)g->esize);
  while (c & (c - 1)) c &= c - 1; /* a power of two: the rows' sums stay aligned vectors */
  return c < AXPY_CHUNK_MAX ? c : AXPY_CHUNK_MAX;
}

/* Rows of B a step of k takes: their broadcast elements of A, nr·unroll of them, stay in
 * registers (16 with AVX-512's 32, 8 with AVX2's 16). */
static int axpy_unroll(const gemm *g, int nr) {
  int u = (g->ir->vec_bytes == 64 ? 16 : 8) / nr;
  return u < 1 ? 1 : u > AXPY_UNROLL ? AXPY_UNROLL : u;
}

typedef struct axpy {
  const rows *rw;
  int nr;
  LLVMValueRef c0, sums; /* the chunk's first column; its rows' sums, chunk apart */
  int64_t chunk;        /* axpy_chunk_cols */
} axpy;

/* The values of k a step of the sums takes: 1, or a pair (bf16 operands). */
static int axpy_k(const gemm *g) { return g->pairs ? 2 : 1; }

/* sums[r, v] += Σ_u A[m_r, k + u]·B[k + u, c0 + v] for the vectors [v0, v1) of the chunk and u
 * < nu (nu pairs with bf16 operands: B's rows k and k + 1 interleaved, the second zeros past
 * the block's end, by pairs of A's), the vectors' lanes that mask has (all with NULL). */
static void axpy_rows_step(gemm *g, const axpy *x, LLVMValueRef k, int nu, LLVMValueRef v0, LLVMValueRef v1,
                           LLVMValueRef mask) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  const rows *rw = x->rw;
  LLVMTypeRef half = LLVMVectorType(ir->i16, (unsigned)g->vw), it = LLVMVectorType(ir->i32, (unsigned)g->vw);
  LLVMTypeRef pt = LLVMVectorType(LLVMBFloatTypeInContext(ir->ctx), 2 * (unsigned)g->vw);
  LLVMValueRef a[AXPY_ROWS][AXPY_UNROLL], brow[AXPY_UNROLL][2], has[AXPY_UNROLL];
  for (int u = 0; u < nu; u++) {
    LLVMValueRef ku = add(g, k, axpy_k(g) * u), second = ku;
    if (g->pairs) {
      LLVMValueRef next = add(g, ku, 1);
      has[u] = LLVMBuildICmp(b, LLVMIntSLT, next, g->k1, "");
      second = LLVMBuildSelect(b, has[u], next, ku, "");
      brow[u][1] = elem(g, LJC_GEMM_B, rw->bi, second, x->c0);
    }
    brow[u][0] = elem(g, LJC_GEMM_B, rw->bi, ku, x->c0);
    for (int r = 0; r < x->nr; r++) {
      LLVMValueRef m = add(g, rw->m0, r);
      if (!g->pairs) {
        a[r][u] = splat(g, LLVMBuildLoad2(b, g->t, elem(g, LJC_GEMM_A, rw->bi, m, ku), ""), g->vt);
        continue;
      }
      LLVMValueRef a0 = LLVMBuildLoad2(b, ir->i16, elem(g, LJC_GEMM_A, rw->bi, m, ku), "");
      LLVMValueRef a1 = LLVMBuildLoad2(b, ir->i16, elem(g, LJC_GEMM_A, rw->bi, m, second), "");
      a1 = LLVMBuildSelect(b, has[u], a1, ljc_const_i(ir->i16, 0), "");
      LLVMValueRef pair = LLVMBuildOr(b, LLVMBuildZExt(b, a0, ir->i32, ""),
                                      LLVMBuildShl(b, LLVMBuildZExt(b, a1, ir->i32, ""), ljc_const_i(ir->i32, 16), ""), "");
      a[r][u] = LLVMBuildBitCast(b, splat(g, pair, it), pt, "");
    }
  }
  ljc_loop V;
  ljc_loop_begin(ir, &V, v0, v1, true, 0, NULL);
  LLVMValueRef off = vmul(g, V.iv, ljc_i64(ir, g->vw)), bv[AXPY_UNROLL];
  for (int u = 0; u < nu; u++) {
    if (!g->pairs) {
      bv[u] = vload(g, at(g, brow[u][0], off), mask);
      continue;
    }
    LLVMValueRef x0 = pair_load(g, half, oat(g, brow[u][0], off), mask);
    LLVMValueRef x1 = pair_load(g, half, oat(g, brow[u][1], off), mask);
    x1 = LLVMBuildSelect(b, has[u], x1, LLVMConstNull(half), "");
    bv[u] = LLVMBuildBitCast(b, interleave(g, x0, x1), pt, "");
  }
  for (int r = 0; r < x->nr; r++) {
    LLVMValueRef p = at(g, x->sums, add(g, off, r * x->chunk));
    LLVMValueRef t = packed_load(g, p);
    for (int u = 0; u < nu; u++) t = g->pairs ? dot_pairs(g, t, a[r][u], bv[u]) : ljc_fmuladd(ir, a[r][u], bv[u], t);
    packed_store(g, t, p);
  }
  ljc_loop_end(ir, &V, NULL, NULL);
}

/* Every row of B of the block of k [g->k0, g->k1) into the sums: the chunk's whole vectors,
 * then its last vector's columns masked. */
static void axpy_rows_k(gemm *g, const axpy *x, LLVMValueRef k, int nu, LLVMValueRef whole, LLVMValueRef nvec,
                        LLVMValueRef last_mask) {
  axpy_rows_step(g, x, k, nu, ljc_i64(g->ir, 0), whole, NULL);
  axpy_rows_step(g, x, k, nu, whole, nvec, last_mask);
}

/* Columns [c0, c0 + len) (len <= axpy_chunk_cols) of the call's nr rows. */
static void axpy_chunk(gemm *g, const rows *rw, int nr, LLVMValueRef c0, LLVMValueRef len) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  axpy x = {rw, nr, c0, g->packed, axpy_chunk_cols(g, nr)};
  int nu = axpy_unroll(g, nr);
  LLVMValueRef vw = ljc_i64(ir, g->vw);
  LLVMValueRef whole = LLVMBuildSDiv(b, len, vw, ""), nvec = LLVMBuildSDiv(b, add(g, len, g->vw - 1), vw, "");
  LLVMValueRef last_mask = lanes_below(g, vmul(g, whole, vw), len);
  ljc_loop KB, Z, S, R, V;
  k_blocks_begin(g, &KB);
  LLVMValueRef k0 = g->k0, k1 = g->k1, first = g->first;
  ljc_loop_begin(ir, &Z, ljc_i64(ir, 0), nvec, true, 0, NULL);
  for (int r = 0; r < nr; r++)
    packed_store(g, LLVMConstNull(g->vt), at(g, x.sums, add(g, vmul(g, Z.iv, vw), r * x.chunk)));
  ljc_loop_end(ir, &Z, NULL, NULL);
  int64_t per = (int64_t)nu * axpy_k(g);
  LLVMValueRef steps = LLVMBuildSDiv(b, LLVMBuildNSWSub(b, k1, k0, ""), ljc_i64(ir, per), "");
  LLVMValueRef kstep = vadd(g, k0, mul(g, steps, per));
  ljc_loop_begin(ir, &S, ljc_i64(ir, 0), steps, true, 0, NULL);
  axpy_rows_k(g, &x, vadd(g, k0, mul(g, S.iv, per)), nu, whole, nvec, last_mask);
  ljc_loop_end(ir, &S, NULL, NULL);
  LLVMValueRef left = LLVMBuildSDiv(b, add(g, LLVMBuildNSWSub(b, k1, kstep, ""), axpy_k(g) - 1), ljc_i64(ir, axpy_k(g)), "");
  ljc_loop_begin(ir, &R, ljc_i64(ir, 0), left, true, 0, NULL);
  axpy_rows_k(g, &x, vadd(g, kstep, mul(g, R.iv, axpy_k(g))), 1, whole, nvec, last_mask);
  ljc_loop_end(ir, &R, NULL, NULL);
  /* C from the row's bias on the first block, else from what it holds, plus the block's sums;
   * after the last, the call's relu */
  LLVMValueRef relu = ljc_gemm_relu_now(ir, g->arg, LLVMBuildICmp(b, LLVMIntEQ, k1, g->arg[LJC_GEMM_K], ""));
  ljc_loop_begin(ir, &V, ljc_i64(ir, 0), nvec, true, 0, NULL);
  LLVMValueRef off = vmul(g, V.iv, vw), mask = lanes_below(g, off, len);
  for (int r = 0; r < nr; r++) {
    LLVMValueRef p = at(g, c_at(g, add(g, rw->crow0, r), c0), off);
    LLVMValueRef bias = bias_vector(g, rw->bi, add(g, rw->m0, r), LLVMBuildNSWAdd(b, c0, off, ""), mask, first);
    LLVMValueRef from = LLVMBuildSelect(b, first, bias, vload(g, p, mask), "");
    LLVMValueRef t = packed_load(g, at(g, x.sums, add(g, off, r * x.chunk)));
    vstore(g, ljc_gemm_relu_if(ir, relu, LLVMBuildFAdd(b, from, t, "")), p, mask);
  }
  ljc_loop_end(ir, &V, NULL, NULL);
  ljc_loop_end(ir, &KB, NULL, NULL);
}

/* The call's nr rows, chunk by chunk of columns. */
static void axpy_rows_of(gemm *g, const rows *rw, int nr) {
  ljc_ir *ir = g->ir;
  LLVMValueRef N = g->arg[LJC_GEMM_N];
  int64_t chunk = axpy_chunk_cols(g, nr);
  ljc_loop C;
  ljc_loop_begin(ir, &C, ljc_i64(ir, 0), LLVMBuildSDiv(g->b, add(g, N, chunk - 1), ljc_i64(ir, chunk), ""), true, 0,
                 NULL);
  LLVMValueRef c0 = mul(g, C.iv, chunk);
  axpy_chunk(g, rw, nr, c0, LLVMBuildNSWSub(g->b, ljc_intrinsic2(ir, "smin", add(g, c0, chunk), N), c0, ""));
  ljc_loop_end(ir, &C, NULL, NULL);
}

/* A call of up to FEW_GROUPS groups of a few-row path's most rows takes the path group by
 * group when B has at most FEW_GROUPS_B_BYTES, reading B once a group, from cache after the
 * first (one thread, relu(linear) of 6 rows through 1024 -> 1024 0.148 -> 0.087 ms, of 12
 * rows through 512 -> 512 0.053 -> 0.034, of 16 through 784 -> 512 0.080 -> 0.069; x·W of 6
 * rows by 784×512 0.052 -> 0.030); a larger B comes from memory each time, and the packed
 * path, which reads it once, is faster (8 rows through 4096 -> 4096: 4.6 ms packed, 4.8 in
 * two groups). */
enum { FEW_GROUPS = 4, FEW_GROUPS_B_BYTES = 8 << 20 };

typedef struct few_call {
  rows rw;
  int nr;
  void (*rows_of)(gemm *, const rows *, int);
} few_call;

static void few_rows_then(gemm *g, void *ctx) {
  const few_call *f = ctx;
  f->rows_of(g, &f->rw, f->nr);
}

/* Whether the call has at most max rows, or ngroups·max and a B that stays in cache, and
 * `ok` (an i1); if so, rows_of for each whole group of max rows, then for the rows left. */
static LLVMValueRef few_rows(gemm *g, const rows *rw, int max, int ngroups, LLVMValueRef ok,
                             void (*rows_of)(gemm *, const rows *, int)) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  LLVMValueRef b_bytes = mul(g, vmul(g, g->arg[LJC_GEMM_K], g->arg[LJC_GEMM_N]), g->esize);
  LLVMValueRef in_groups = LLVMBuildICmp(b, LLVMIntSLE, rw->len, ljc_i64(ir, ngroups * max), "");
  LLVMValueRef cached = LLVMBuildICmp(b, LLVMIntSLE, b_bytes, ljc_i64(ir, FEW_GROUPS_B_BYTES), "");
  LLVMValueRef groups_pay = LLVMBuildAnd(b, in_groups, cached, "");
  LLVMValueRef one = LLVMBuildICmp(b, LLVMIntSLE, rw->len, ljc_i64(ir, max), "");
  LLVMValueRef use = LLVMBuildAnd(b, LLVMBuildOr(b, one, groups_pay, ""), ok, "");
  LLVMValueRef groups = LLVMBuildSDiv(b, rw->len, ljc_i64(ir, max), "");
  LLVMValueRef whole = LLVMBuildSelect(b, use, groups, ljc_i64(ir, 0), "");
  ljc_loop G;
  ljc_loop_begin(ir, &G, ljc_i64(ir, 0), whole, true, 0, NULL);
  LLVMValueRef at0 = mul(g, G.iv, max);
  few_call f = {{rw->bi, vadd(g, rw->m0, at0), vadd(g, rw->crow0, at0), ljc_i64(ir, max)}, max, rows_of};
  few_rows_then(g, &f);
  ljc_loop_end(ir, &G, NULL, NULL);
  LLVMValueRef done = mul(g, groups, max), left = LLVMBuildNSWSub(b, rw->len, done, "");
  for (int nr = 1; nr < max; nr++) {
    few_call r = {{rw->bi, vadd(g, rw->m0, done), vadd(g, rw->crow0, done), ljc_i64(ir, nr)}, nr, rows_of};
    LLVMValueRef is = LLVMBuildICmp(b, LLVMIntEQ, left, ljc_i64(ir, nr), "");
    when(g, LLVMBuildAnd(b, use, is, ""), few_rows_then, &r);
  }
  return use;
}

static void panels_then(gemm *g, void *ctx) { panels(g, ctx); }

/* ---- the routines ------------------------------------------------------------------------- */

static bool is_winograd(int variant) { return variant >= LJC_GEMM_WINOGRAD && variant <= LJC_GEMM_WINOGRAD_DW; }

/* A Winograd routine's kind's output tile side m and window side r: F(m×m, r×r). */
static const struct {
  int m, r;
} winograd_kinds[] = {{4, 3}, {5, 3}, {2, 5}, {3, 5}};
static int winograd_tm(int routine) { return winograd_kinds[routine / LJC_GEMM_NVARIANTS].m; }
static int winograd_r(int routine) { return winograd_kinds[routine / LJC_GEMM_NVARIANTS].r; }

int ljc_gemm_code(int r) {
  int variant = r % LJC_GEMM_NVARIANTS;
  return variant == LJC_GEMM_WINOGRAD_DX ? r - variant + LJC_GEMM_WINOGRAD
         : variant == LJC_GEMM_TAPS_DX   ? r - variant + LJC_GEMM_TAPS_FWD
                                         : r;
}

bool ljc_gemm_routine_defined(int r, bool bf16_dot) {
  int kind = r / LJC_GEMM_NVARIANTS, variant = r % LJC_GEMM_NVARIANTS;
  if (r < 0 || r >= LJC_GEMM_NROUTINES || ljc_gemm_code(r) != r) return false;
  if (variant == LJC_GEMM_TAPS_DW) return kind == 2; /* f32, A the im2col */
  if (variant == LJC_GEMM_TAPS_FWD || variant == LJC_GEMM_TAPS_WT) return kind == 0;
  if (variant == LJC_GEMM_WINDOW_T) return kind <= 1;
  if (kind == LJC_GEMM_BF16) return bf16_dot && (variant <= LJC_GEMM_ELEMENTS || variant == LJC_GEMM_WINDOW);
  return is_winograd(variant) ? kind <= 3 : true;
}

void ljc_gemm_routine_name(int routine, char name[32]) {
  static const char *const variants[LJC_GEMM_NVARIANTS] = {
      [LJC_GEMM_ROWS] = "rows",         [LJC_GEMM_COLS] = "cols",       [LJC_GEMM_ELEMENTS] = "elements",
      [LJC_GEMM_DIRECT] = "direct",     [LJC_GEMM_WINDOW] = "window",   [LJC_GEMM_WINOGRAD] = "winograd",
      [LJC_GEMM_WINOGRAD_DW] = "winograd_dw", [LJC_GEMM_TAPS_DW] = "taps_dw", [LJC_GEMM_WINDOW_T] = "window_t",
      [LJC_GEMM_TAPS_FWD] = "taps_fwd", [LJC_GEMM_TAPS_WT] = "taps_wt"};
  routine = ljc_gemm_code(routine);
  int kind = routine / LJC_GEMM_NVARIANTS;
  int variant = routine % LJC_GEMM_NVARIANTS;
  if (is_winograd(variant)) { /* lj_gemm_f32_winograd[5][_dw], lj_gemm_f32_winograd{2,3}_5x5 */
    static const char *const tiles[] = {"", "5", "2_5x5", "3_5x5"};
    snprintf(name, 32, "lj_gemm_f32_winograd%s%s", tiles[kind], variants[variant] + strlen("winograd"));
    return;
  }
  snprintf(name, 32, "lj_gemm_%s_%s%s", kind == LJC_GEMM_BF16 ? "bf16" : kind & 1 ? "f64" : "f32", variants[variant],
           kind & 2 && variant < LJC_GEMM_WINOGRAD ? "_a_window" : "");
}

static LLVMTypeRef routine_type(ljc_ir *ir) {
  LLVMTypeRef p = ir->ptr;
  return LLVMFunctionType(ir->void_, &p, 1, 0);
}

/* Whether field i of the argument block is a pointer (else an i64). */
static bool arg_is_pointer(int i) {
  return i == LJC_GEMM_A || i == LJC_GEMM_B || i == LJC_GEMM_C || i == LJC_GEMM_WORK || i == LJC_GEMM_BIAS ||
         i == LJC_GEMM_BSUM || i == LJC_GEMM_UNPOOL_AT || i == LJC_GEMM_UNPOOL_MASK;
}

/* A new argument block (in the function's entry) holding arg[]. */
static LLVMValueRef store_args(ljc_ir *ir, const LLVMValueRef *arg) {
  LLVMValueRef block = ljc_entry_array(ir, ir->i64, LJC_GEMM_NARGS);
  for (int i = 0; i < LJC_GEMM_NARGS; i++) {
    LLVMValueRef idx = ljc_i64(ir, i);
    LLVMBuildStore(ir->b, arg[i], LLVMBuildInBoundsGEP2(ir->b, ir->i64, block, &idx, 1, ""));
  }
  return block;
}

void ljc_gemm_load_args(ljc_ir *ir, LLVMValueRef block, LLVMValueRef *arg) {
  for (int i = 0; i < LJC_GEMM_NARGS; i++) {
    LLVMValueRef idx = ljc_i64(ir, i);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(ir->b, ir->i64, block, &idx, 1, "");
    arg[i] = LLVMBuildLoad2(ir->b, arg_is_pointer(i) ? ir->ptr : ir->i64, p, "");
  }
}

/* Whether the call streams C (an i1; NULL where the target has no non-temporal stores): its
 * kernel asks it to (STREAM), and C's full vectors start on whole vectors (C's address, its
 * origin and its rows' length LDC are whole vectors). */
static LLVMValueRef streams_c(gemm *g) {
  ljc_ir *ir = g->ir;
  LLVMBuilderRef b = g->b;
  if (strncmp(LLVMGetTarget(ir->mod), "x86_64", 6) != 0) return NULL;
  LLVMValueRef addr = LLVMBuildPtrToInt(b, g->arg[LJC_GEMM_C], ir->i64, "");
  LLVMValueRef elems = LLVMBuildOr(b, g->arg[LJC_GEMM_C_ORIGIN], g->arg[LJC_GEMM_LDC], "");
  LLVMValueRef off = LLVMBuildOr(b, LLVMBuildAnd(b, addr, ljc_i64(ir, ir->vec_bytes - 1), ""),
                                 LLVMBuildAnd(b, elems, ljc_i64(ir, g->vw - 1), ""), "");
  LLVMValueRef asked = LLVMBuildICmp(b, LLVMIntNE, g->arg[LJC_GEMM_STREAM], ljc_i64(ir, 0), "");
  return LLVMBuildAnd(b, asked, LLVMBuildICmp(b, LLVMIntEQ, off, ljc_i64(ir, 0), ""), "");
}

static void split_phases_of(gemm *g, void *ctx) {
  const rows *rw = ctx;
  split_phases(g, rw->bi);
}

/* The internal function that computes rows m0 .. m0 + len - 1 (len > 0) of matrix bi into
 * C's rows from crow0, adding to what C holds unless batch_first (an i8):
 * (ptr args, i64 bi, i64 m0, i64 crow0, i64 len, i8 batch_first). */
static LLVMValueRef define_rows(gemm *g, const char *name) {
  ljc_ir *ir = g->ir;
  LLVMTypeRef params[6] = {ir->ptr, ir->i64, ir->i64, ir->i64, ir->i64, ir->i8};
  LLVMValueRef fn = LLVMAddFunction(ir->mod, name, LLVMFunctionType(ir->void_, params, 6, 0));
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  ljc_add_fn_attr(ir, fn, "nounwind");
  ljc_add_fn_attr(ir, fn, "noinline");
  LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry"));
  ljc_gemm_load_args(ir, LLVMGetParam(fn, 0), g->arg);
  g->stream = streams_c(g);
  /* the packed panels, or the few rows' sums where B is read in place (axpy_rows_of) */
  g->packed = g->variant != LJC_GEMM_DIRECT ? ljc_entry_array(ir, g->ot, (int64_t)g->kc * NP * NV * g->vw)
                                            : ljc_entry_array(ir, g->t, AXPY_SUMS_BYTES / g->esize);
  g->a_step = g->arg[LJC_GEMM_A_SK];
  g->panel_k = ljc_i64(ir, g->kc);
  if (g->variant == LJC_GEMM_DIRECT ||
      ((g->variant == LJC_GEMM_COLS || g->variant == LJC_GEMM_ELEMENTS) && !g->pairs && !g->a_window)) {
    LLVMValueRef K = g->arg[LJC_GEMM_K];
    g->short_k = LLVMBuildICmp(g->b, LLVMIntSLE, K, ljc_i64(ir, LJG_MATMUL_DIRECT_K), "");
    LLVMValueRef whole = ljc_intrinsic2(ir, "smax", LLVMBuildAnd(g->b, add(g, K, g->vw - 1), ljc_i64(ir, -g->vw), ""),
                                        ljc_i64(ir, g->vw));
    g->panel_k = LLVMBuildSelect(g->b, g->short_k, whole, g->panel_k, "");
  }
  if (g->variant == LJC_GEMM_WINDOW) g->taps = ljc_entry_array(ir, ir->i64, TAP_FIELDS * ((int64_t)g->kc + 1));
  if (!g->pairs && (g->a_window || g->variant == LJC_GEMM_WINDOW)) {
    g->phase_operand = g->a_window ? LJC_GEMM_A : LJC_GEMM_B;
    g->phases = ljc_entry_array(ir, g->t, PHASE_BYTES / g->esize);
    g->phased = phases_fit(g);
  }
  if (g->variant == LJC_GEMM_WINDOW_T) g->taps = ljc_entry_array(ir, ir->i64, TAP_FIELDS * (int64_t)NV * g->vw);
  if (g->pairs) {
    g->apack = ljc_entry_array(ir, g->ot, (int64_t)MC * g->kc);
    LLVMValueRef along_k = LLVMBuildICmp(g->b, LLVMIntEQ, g->arg[LJC_GEMM_A_SK], ljc_i64(ir, 1), "");
    LLVMValueRef k_odd = LLVMBuildTrunc(g->b, g->arg[LJC_GEMM_K], ir->i1, "");
    g->a_pairs_packed = LLVMBuildOr(g->b, LLVMBuildNot(g->b, along_k, ""), k_odd, "");
  } else if (g->a_window) {
    g->apack = ljc_entry_array(ir, g->t, (int64_t)MC * g->kc);
    g->apos = ljc_entry_array(ir, ir->i32, 3 * (int64_t)g->kc);
    g->a_step = ljc_i64(ir, 1);
  } else if (g->variant != LJC_GEMM_DIRECT) {
    g->apack = ljc_entry_array(ir, g->t, (int64_t)MC * g->kc);
    LLVMValueRef along_m = LLVMBuildICmp(g->b, LLVMIntEQ, g->arg[LJC_GEMM_A_SM], ljc_i64(ir, 1), "");
    LLVMValueRef k_bytes = mul(g, g->arg[LJC_GEMM_A_SK], g->esize);
    LLVMValueRef pages = LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, k_bytes, ljc_i64(ir, A_PAGE - 1), ""),
                                       ljc_i64(ir, 0), "");
    LLVMValueRef halves = LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, k_bytes, ljc_i64(ir, A_PAGE / 2 - 1), ""),
                                        ljc_i64(ir, 0), "");
    LLVMValueRef blocks = LLVMBuildICmp(g->b, LLVMIntSGT, g->arg[LJC_GEMM_K], ljc_i64(ir, g->kc), "");
    pages = LLVMBuildOr(g->b, pages, LLVMBuildAnd(g->b, halves, blocks, ""), "");
    g->a_transposed = LLVMBuildAnd(g->b, along_m, pages, "");
    g->a_step = LLVMBuildSelect(g->b, g->a_transposed, ljc_i64(ir, 1), g->a_step, "");
  }
  rows rw = {LLVMGetParam(fn, 1), LLVMGetParam(fn, 2), LLVMGetParam(fn, 3), LLVMGetParam(fn, 4)};
  if (g->phases) when(g, g->phased, split_phases_of, &rw);
  g->batch_first = LLVMBuildTrunc(g->b, LLVMGetParam(fn, 5), ir->i1, "");
  LLVMValueRef few = NULL;
  bool a_in_place = !g->a_window && !g->pairs; /* A read where it is */
  if (g->variant == LJC_GEMM_COLS && !g->a_window) {
    LLVMValueRef a_along_k = LLVMBuildICmp(g->b, LLVMIntEQ, g->arg[LJC_GEMM_A_SK], ljc_i64(ir, 1), "");
    few = few_rows(g, &rw, dot_max_rows(g), FEW_GROUPS, a_along_k, dot_rows_of);
  } else if (g->variant == LJC_GEMM_ROWS && !g->a_window) {
    few = few_rows(g, &rw, AXPY_ROWS, FEW_GROUPS, ljc_const_i(ir->i1, 1), axpy_rows_of);
  } else if (g->variant == LJC_GEMM_DIRECT && a_in_place) {
    /* up to 4 rows only: the tiles, which read B once for 8 rows, beat groups of a few rows'
     * sums, once for 4 (16 rows by 784×512, one thread: 74-82 -> 60 µs); a k of a few stays
     * in a tile's registers */
    LLVMValueRef long_k = LLVMBuildICmp(g->b, LLVMIntSGT, g->arg[LJC_GEMM_K], ljc_i64(ir, LJG_MATMUL_DIRECT_K), "");
    few = few_rows(g, &rw, AXPY_ROWS, 1, long_k, axpy_rows_of);
  }
  if (g->variant == LJC_GEMM_COLS && !g->a_window) {
    LLVMValueRef swap = LLVMBuildAnd(g->b, LLVMBuildNot(g->b, few, ""), swaps(g, &rw), "");
    when(g, swap, swap_rows_of, &rw);
    few = LLVMBuildOr(g->b, few, swap, "");
  }
  if (few)
    when(g, LLVMBuildNot(g->b, few, ""), panels_then, &rw);
  else
    panels(g, &rw);
  if (g->stream) { /* the thread that joins the kernel's tasks sees C's non-temporal stores */
    LLVMBasicBlockRef after = ljc_if_begin(ir, g->stream, "gemm.fence");
    ljc_sfence(g->b, ir->mod);
    ljc_if_end(ir, after);
    g->stream = NULL;
  }
  LLVMBuildRetVoid(g->b);
  return fn;
}

static void call_rows(gemm *g, LLVMValueRef fn, LLVMValueRef block, LLVMValueRef bi, LLVMValueRef m0,
                      LLVMValueRef crow0, LLVMValueRef len, LLVMValueRef batch_first) {
  LLVMValueRef args[6] = {block, bi, m0, crow0, len, LLVMBuildZExt(g->b, batch_first, g->ir->i8, "")};
  LLVMBuildCall2(g->b, LLVMGlobalGetValueType(fn), fn, args, 6, "");
}

void ljc_define_gemm_routine(ljc_ir *ir, int routine) {
  LJ_ASSERT(ljc_gemm_code(routine) == routine);
  int kind = routine / LJC_GEMM_NVARIANTS;
  lj_dtype dt = kind & 1 ? LJ_F64 : LJ_F32;
  gemm g = {.ir = ir, .b = ir->b, .variant = routine % LJC_GEMM_NVARIANTS, .a_window = kind & 2};
  g.pairs = kind == LJC_GEMM_BF16;
  g.t = ljc_compute_type(ir, dt);
  g.ot = g.pairs ? ir->i16 : g.t;
  g.kc = g.pairs ? 2 * KC : KC;
  g.esize = dt == LJ_F64 ? 8 : 4;
  g.vw = ir->vec_bytes / (int)g.esize;
  g.vt = LLVMVectorType(g.t, (unsigned)g.vw);
  g.ivt = LLVMVectorType(g.ot, (unsigned)g.vw);
  g.mr = tile_rows(ir->vec_bytes);
  char name[32], rows_name[40];
  ljc_gemm_routine_name(routine, name);
  if (g.variant == LJC_GEMM_TAPS_DW) {
    ljc_define_taps_dw(ir, name);
    return;
  }
  if (g.variant == LJC_GEMM_TAPS_FWD) {
    ljc_define_taps_fwd(ir, name);
    return;
  }
  if (g.variant == LJC_GEMM_TAPS_WT) {
    ljc_define_taps_wt(ir, name);
    return;
  }
  if (is_winograd(g.variant)) {
    ljc_define_winograd(ir, name, g.mr, g.variant, winograd_tm(routine), winograd_r(routine));
    return;
  }
  snprintf(rows_name, sizeof rows_name, "%s_rows", name);
  LLVMValueRef rows_fn = define_rows(&g, rows_name);
  LLVMValueRef fn = LLVMAddFunction(ir->mod, name, routine_type(ir));
  ljc_add_fn_attr(ir, fn, "nounwind");
  LLVMBuilderRef b = ir->b;
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry");
  LLVMBasicBlockRef sum_bb = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.sum");
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.matrix");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.end");
  LLVMPositionBuilderAtEnd(b, entry);
  LLVMValueRef block = LLVMGetParam(fn, 0);
  ljc_gemm_load_args(ir, block, g.arg);
  LLVMValueRef begin = g.arg[LJC_GEMM_BEGIN], end = g.arg[LJC_GEMM_END], M = g.arg[LJC_GEMM_M];
  LLVMValueRef any = LLVMBuildICmp(b, LLVMIntSLT, begin, end, "");
  LLVMValueRef sum = LLVMBuildICmp(b, LLVMIntNE, g.arg[LJC_GEMM_SUM], ljc_i64(ir, 0), "");
  LLVMBasicBlockRef choose = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.choose");
  LLVMBasicBlockRef by_rows = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.by_rows");
  LLVMBasicBlockRef cols_bb = LLVMAppendBasicBlockInContext(ir->ctx, fn, "gemm.columns");
  LLVMBuildCondBr(b, any, choose, done);
  LLVMPositionBuilderAtEnd(b, choose);
  LLVMBuildCondBr(b, sum, sum_bb, by_rows);
  LLVMPositionBuilderAtEnd(b, by_rows);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntNE, g.arg[LJC_GEMM_COL_TASKS], ljc_i64(ir, 0), ""), cols_bb, head);
  /* column tasks: every row of the columns of blocks [begin, end), as a call on B and C from
   * the first of those columns, N of them wide, C's rows still LDC apart */
  LLVMPositionBuilderAtEnd(b, cols_bb);
  LLVMValueRef N = g.arg[LJC_GEMM_N], n0 = LLVMBuildNSWMul(b, begin, g.arg[LJC_GEMM_COL_TASKS], "");
  LLVMValueRef n1 = ljc_intrinsic2(ir, "smin", LLVMBuildNSWMul(b, end, g.arg[LJC_GEMM_COL_TASKS], ""), N);
  LLVMValueRef cols_arg[LJC_GEMM_NARGS];
  memcpy(cols_arg, g.arg, sizeof cols_arg);
  LLVMValueRef b_off = LLVMBuildNSWMul(b, n0, g.arg[LJC_GEMM_B_SN], "");
  cols_arg[LJC_GEMM_B] = LLVMBuildGEP2(b, g.ot, g.arg[LJC_GEMM_B], &b_off, 1, "");
  cols_arg[LJC_GEMM_C] = LLVMBuildGEP2(b, g.t, g.arg[LJC_GEMM_C], &n0, 1, "");
  LLVMValueRef zero = ljc_i64(ir, 0);
  cols_arg[LJC_GEMM_BIAS] = moved_bias(ir, g.arg, ljc_gemm_bias_at(ir, g.arg, g.t, zero, zero, n0));
  cols_arg[LJC_GEMM_N] = LLVMBuildNSWSub(b, n1, n0, "");
  LLVMValueRef cols_block = store_args(ir, cols_arg);
  ljc_loop cm;
  ljc_loop_begin(ir, &cm, ljc_i64(ir, 0), g.arg[LJC_GEMM_BATCH], false, 0, NULL);
  call_rows(&g, rows_fn, cols_block, cm.iv, ljc_i64(ir, 0), LLVMBuildNSWMul(b, cm.iv, M, ""), M, ljc_const_i(ir->i1, 1));
  ljc_loop_end(ir, &cm, NULL, NULL);
  LLVMBuildBr(b, done);
  /* MATMUL_SUM: the task range's rows of C, through each matrix in turn */
  LLVMPositionBuilderAtEnd(b, sum_bb);
  ljc_loop bl;
  ljc_loop_begin(ir, &bl, ljc_i64(ir, 0), g.arg[LJC_GEMM_BATCH], false, 0, NULL);
  call_rows(&g, rows_fn, block, bl.iv, begin, begin, LLVMBuildNSWSub(b, end, begin, ""),
            LLVMBuildICmp(b, LLVMIntEQ, bl.iv, ljc_i64(ir, 0), ""));
  ljc_loop_end(ir, &bl, NULL, NULL);
  LLVMBuildBr(b, done);
  /* otherwise the task range, one matrix's run of rows at a time */
  LLVMPositionBuilderAtEnd(b, head);
  LLVMValueRef r = LLVMBuildPhi(b, ir->i64, "row");
  LLVMValueRef bi = LLVMBuildUDiv(b, r, M, ""), m = LLVMBuildURem(b, r, M, "");
  LLVMValueRef len = ljc_intrinsic2(ir, "smin", LLVMBuildNSWSub(b, end, r, ""), LLVMBuildNSWSub(b, M, m, ""));
  call_rows(&g, rows_fn, block, bi, m, r, len, ljc_const_i(ir->i1, 1));
  LLVMValueRef r_next = LLVMBuildNSWAdd(b, r, len, "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, r_next, end, ""), head, done);
  LLVMAddIncoming(r, &begin, &by_rows, 1);
  LLVMAddIncoming(r, &r_next, &head, 1);
  LLVMPositionBuilderAtEnd(b, done);
  LLVMBuildRetVoid(b);
}

/* ---- the call from a kernel --------------------------------------------------------------- */

/* Whether a matmul is a 3×3 or 5×5 convolution of stride and dilation 1 that the Winograd
 * routine (winograd.c) does faster than the GEMM: f32, B the im2col, and enough input channels and
 * output rows for the transforms to pay (conv1 of MNISTNet, 1 channel in, stays a GEMM); the
 * offsets its gathers take (within one image, and across 64 rows of the weight) fit in 32
 * bits. */
static bool winograd(const ljg_kernel *k, const ljg_view *av, const ljg_view *bv) {
  const int64_t *img = bv->v[0].stride;
  if (k->mm_dtype != LJ_F32 || k->mm_cols != LJG_MM_COLS_B || k->mm_sum || !ljg_winograd_window(k->mm_win) ||
      k->mm_k / (k->mm_win[0] * k->mm_win[1]) < LJG_WINOGRAD_MIN_CHANNELS || k->mm_m < LJG_WINOGRAD_MIN_ROWS)
    return false;
  int64_t extent = 0;
  for (int d = 1; d < 4; d++) extent += (k->mm_img[d] - 1) * llabs(img[d]);
  return extent < INT32_MAX && 64 * llabs(av->v[0].stride[1]) < INT32_MAX;
}

/* The same for a convolution's input gradient: col2im(Wᵀ·dY) as the convolution of dY, padded
 * by r - 1 - p (p < r), with the flipped weight. The col2im joined the kernel (fuse_rows.c),
 * its tasks are the gradient's planes, and nothing else runs in it. */
static bool winograd_dx(const ljg_kernel *k, const ljg_view *av, const ljg_view *bv) {
  const int64_t *w = k->win, *bs = bv->v[0].stride;
  if (k->mm_dtype != LJ_F32 || k->mm_cols || k->mm_sum || k->win_op != LJG_OP_COL2IM || k->nnests ||
      !ljg_winograd_window(w) || k->mm_task_rows != w[0] * w[1] || w[4] >= w[0] || w[5] >= w[1] ||
      k->mm_k < LJG_WINOGRAD_MIN_CHANNELS || k->win_img[1] < LJG_WINOGRAD_MIN_ROWS || k->mm_n != k->win_oh * k->win_ow)
    return false;
  int64_t extent = (k->mm_k - 1) * llabs(bs[1]) + (k->mm_n - 1) * llabs(bs[2]);
  return extent < INT32_MAX && k->mm_task_rows * 64 * llabs(av->v[0].stride[1]) < INT32_MAX;
}

/* The same for a weight gradient Σ_b im2col(x_b)·dY_bᵀ (A the im2col, turned by the matmul
 * pass), the batch sum in one call per thread: no row blocks, no nests after it. */
static bool winograd_dw(const ljg_kernel *k, const ljg_view *av, const ljg_view *bv) {
  const int64_t *img = av->v[0].stride, *bs = bv->v[0].stride;
  if (k->mm_dtype != LJ_F32 || k->mm_cols != LJG_MM_COLS_A || !k->mm_sum || !ljg_winograd_window(k->mm_win) ||
      k->row_block || k->nnests || ljg_kernel_has_window(k) || k->mm_img[1] < LJG_WINOGRAD_MIN_CHANNELS ||
      k->mm_n < LJG_WINOGRAD_MIN_ROWS || k->mm_k != k->mm_oh * k->mm_ow)
    return false;
  int64_t extent = 0;
  for (int d = 1; d < 4; d++) extent += (k->mm_img[d] - 1) * llabs(img[d]);
  return extent < INT32_MAX && (k->mm_k - 1) * llabs(bs[1]) + (k->mm_n - 1) * llabs(bs[2]) < INT32_MAX;
}

/* The kind of a Winograd routine for the kernel (winograd_kinds): of the two tiles for its
 * window, the larger when it takes fewer products over the grid of outputs (a tile's
 * (m + r - 1)² a channel pair, the grid's edge tiles whole), else the smaller. Measured,
 * MNISTNet's conv2 (14×14 outputs: 9 tiles of F(5×5, 3×3), 441 products a channel pair,
 * against 16 tiles of F(4×4, 3×3) and 576) at batch 64, one thread, fastest of 200 runs, the
 * forward product 2.07–2.09 -> 1.91–1.95 ms, the input gradient 2.06–2.10 -> 1.93–2.07, the
 * weight gradient 1.95 -> 1.69–1.85: the transforms of F(5×5) cost more a tile. For 5×5
 * windows, 32 -> 64 channels, the forward product forced to F(2×2, 5×5) or F(3×3, 5×5), one
 * thread: 4×4 outputs (batch 256) 1.74 against 2.6–3.2 ms, 6×6 3.9–4.0 against 2.8–3.1, 24×24
 * (batch 32) 7.4 against 5.0, as the products say. */
static int winograd_kind(const ljg_kernel *k, int variant) {
  int64_t oh = variant == LJC_GEMM_WINOGRAD_DX ? k->win_img[2] : k->mm_oh;
  int64_t ow = variant == LJC_GEMM_WINOGRAD_DX ? k->win_img[3] : k->mm_ow;
  int small = (variant == LJC_GEMM_WINOGRAD_DX ? k->win[0] : k->mm_win[0]) == 3 ? 0 : 2, large = small + 1;
  int64_t tiles[2];
  for (int i = 0; i < 2; i++) {
    int m = winograd_kinds[small + i].m, n = m + winograd_kinds[small + i].r - 1;
    tiles[i] = (int64_t)n * n * ((oh + m - 1) / m) * ((ow + m - 1) / m);
  }
  return tiles[1] < tiles[0] ? large : small;
}

/* Whether variant writes a col2im's output: an input gradient's (WINOGRAD_DX, TAPS_DX). */
static bool is_dx(int variant) { return variant == LJC_GEMM_WINOGRAD_DX || variant == LJC_GEMM_TAPS_DX; }

bool ljc_gemm_writes_window(const ljg_kernel *k) {
  int r = ljc_gemm_routine(k);
  return r >= 0 && is_dx(r % LJC_GEMM_NVARIANTS);
}

bool ljc_gemm_rows_outer(const ljg_kernel *k) {
  int r = ljc_gemm_routine(k), variant = r % LJC_GEMM_NVARIANTS;
  if (r < 0 || (variant != LJC_GEMM_WINOGRAD && variant != LJC_GEMM_WINOGRAD_DX) || k->nnests || k->mm_b < 2 ||
      k->mm_a_period ||
      (k->row_block && !ljc_gemm_in_one_call(k)) || k->views[k->exprs[k->mm_a].view].v[0].stride[0])
    return false;
  bool dx = variant == LJC_GEMM_WINOGRAD_DX;
  return ljc_winograd_rows_outer(winograd_tm(r), dx ? k->win_img[2] : k->mm_oh, dx ? k->win_img[3] : k->mm_ow,
                                 dx ? k->win_img[1] : k->mm_m);
}

/* Whether a matmul is a 3×3 convolution of column stride 1 or 2 with at most TAPS_FWD_ROWS
 * rows a matrix (a grouped convolution's groups of few channels) that the taps routine
 * (taps.c) does faster than the GEMM, which packs the window's columns for those few rows, and
 * than the Winograd routine: f32, B the im2col, the image's rows contiguous; the shapes in 32
 * bits. */
enum { TAPS_FWD_ROWS = 8 };
static bool taps_fwd(const ljg_kernel *k, const ljg_view *bv) {
  const int64_t *w = k->mm_win;
  return k->mm_dtype == LJ_F32 && k->mm_cols == LJG_MM_COLS_B && !k->mm_sum && !k->mm_col_tasks &&
         k->mm_task_rows == 1 && w[0] == 3 && w[1] == 3 && (w[3] == 1 || w[3] == 2) && k->mm_m <= TAPS_FWD_ROWS &&
         bv->v[0].stride[3] == 1 && k->mm_img[3] < INT32_MAX / 2 && k->mm_ow < INT32_MAX / 2;
}

/* The same for WINDOW_T's product (B the im2col transposed) of at most TAPS_FWD_ROWS rows a
 * matrix, a grouped convolution's weight gradient for each image: dY's positions and the
 * image's rows contiguous. */
static bool taps_wt(const ljg_kernel *k, const ljg_view *av, const ljg_view *bv) {
  const int64_t *w = k->mm_win;
  return k->mm_dtype == LJ_F32 && k->mm_cols == LJG_MM_COLS_BT && !k->mm_sum && !k->mm_col_tasks &&
         k->mm_task_rows == 1 && w[0] == 3 && w[1] == 3 && (w[3] == 1 || w[3] == 2) && k->mm_m <= TAPS_FWD_ROWS &&
         k->mm_k == k->mm_oh * k->mm_ow && av->v[0].stride[2] == 1 && bv->v[0].stride[3] == 1 &&
         k->mm_img[3] < INT32_MAX / 2 && k->mm_ow < INT32_MAX / 2;
}

/* The same for an input gradient as winograd_dx's, of at most TAPS_FWD_ROWS channels a plane's
 * matrix: a 3×3 window of stride and dilation 1, dY's rows contiguous. */
static bool taps_dx(const ljg_kernel *k, const ljg_view *bv) {
  const int64_t *w = k->win, *bs = bv->v[0].stride;
  if (k->mm_dtype != LJ_F32 || k->mm_cols || k->mm_sum || k->win_op != LJG_OP_COL2IM || k->nnests || w[0] != 3 ||
      w[1] != 3 || w[2] != 1 || w[3] != 1 || w[6] != 1 || w[7] != 1 || k->mm_task_rows != 9 || w[4] >= 3 ||
      w[5] >= 3 || k->win_img[1] > TAPS_FWD_ROWS || k->mm_n != k->win_oh * k->win_ow || bs[2] != 1)
    return false;
  return (k->mm_k - 1) * llabs(bs[1]) + (k->mm_n - 1) < INT32_MAX && k->win_img[3] < INT32_MAX / 2;
}

bool ljc_gemm_streams_c(const ljg_kernel *k) {
  int routine = ljc_gemm_routine(k), variant = routine % LJC_GEMM_NVARIANTS;
  int64_t kc = routine / LJC_GEMM_NVARIANTS == LJC_GEMM_BF16 ? 2 * KC : KC;
  return routine >= 0 && variant <= LJC_GEMM_WINDOW && !k->mm_sum && k->mm_k <= kc;
}

int ljc_gemm_routine(const ljg_kernel *k) {
  if (k->kind != LJG_K_MATMUL || (k->mm_dtype != LJ_F32 && k->mm_dtype != LJ_F64)) return -1;
  const ljg_kexpr *ea = &k->exprs[k->mm_a], *eb = &k->exprs[k->mm_bm];
  if (ea->kind != LJG_X_LOAD || eb->kind != LJG_X_LOAD) return -1;
  const ljg_view *av = &k->views[ea->view], *bv = &k->views[eb->view];
  if (av->n != 1 || bv->n != 1 || k->mm_n == 0 || k->mm_k == 0 || k->mm_b == 0) return -1;
  const int64_t *bs = bv->v[0].stride;
  if (ea->dtype == LJ_BF16 && eb->dtype == LJ_BF16 && k->mm_dtype == LJ_F32 &&
      (k->mm_cols == LJG_MM_COLS_NONE || k->mm_cols == LJG_MM_COLS_B))
    return LJC_GEMM_BF16 * LJC_GEMM_NVARIANTS + (k->mm_cols ? LJC_GEMM_WINDOW
                                                 : bs[2] == 1 ? LJC_GEMM_ROWS
                                                 : bs[1] == 1 ? LJC_GEMM_COLS
                                                              : LJC_GEMM_ELEMENTS);
  if (ea->dtype != k->mm_dtype || eb->dtype != k->mm_dtype) return -1;
  bool wino = !k->mm_no_winograd;
  int variant = taps_fwd(k, bv)                  ? LJC_GEMM_TAPS_FWD
                : taps_dx(k, bv)                 ? LJC_GEMM_TAPS_DX
                : taps_wt(k, av, bv)             ? LJC_GEMM_TAPS_WT
                : wino && winograd(k, av, bv)    ? LJC_GEMM_WINOGRAD
                : wino && winograd_dx(k, av, bv) ? LJC_GEMM_WINOGRAD_DX
                : wino && winograd_dw(k, av, bv) ? LJC_GEMM_WINOGRAD_DW
                : ljg_taps_dw(k)                 ? LJC_GEMM_TAPS_DW
                : k->mm_cols == LJG_MM_COLS_B    ? LJC_GEMM_WINDOW
                : k->mm_cols == LJG_MM_COLS_BT   ? LJC_GEMM_WINDOW_T
                : bs[2] == 1                     ? (ljg_kernel_b_in_place(k) ? LJC_GEMM_DIRECT : LJC_GEMM_ROWS)
                : bs[1] == 1                     ? LJC_GEMM_COLS
                                                 : LJC_GEMM_ELEMENTS;
  int kind = is_winograd(variant) ? winograd_kind(k, variant)
                                  : (k->mm_dtype == LJ_F64) + 2 * (k->mm_cols == LJG_MM_COLS_A);
  return kind * LJC_GEMM_NVARIANTS + variant;
}

/* A bias's element for element (m, n) of matrix b of C at offset (b mod s[2])·s[0] + m·s[1] +
 * n·s[3] from its view's offset: a view over C's [B·M, N] or [B, M, N], the same along each row
 * (s[3] 0: a convolution's bias) or contiguous along them (s[3] 1: a linear layer's bias, s[1]
 * 0, or a matrix added to C), or over [I, G·M, N] for B = I·G matrices, the same for each i (a
 * grouped convolution's bias, its matrices the groups of each image). */
static bool bias_strides(const ljg_kernel *k, const ljg_view1 *v, int64_t s[4]) {
  int nd = v->ndim;
  s[2] = k->mm_b;
  if (nd == 2) s[0] = k->mm_m * v->stride[0], s[1] = v->stride[0];
  else if (nd == 3 && v->shape[0] == k->mm_b && v->shape[1] == k->mm_m) s[0] = v->stride[0], s[1] = v->stride[1];
  else if (nd == 3 && v->shape[1] % k->mm_m == 0 && v->shape[0] * v->shape[1] == k->mm_b * k->mm_m &&
           v->stride[0] == 0)
    s[0] = k->mm_m * v->stride[1], s[1] = v->stride[1], s[2] = v->shape[1] / k->mm_m;
  else return false;
  s[3] = v->stride[nd - 1];
  return s[3] == 0 || s[3] == 1;
}

/* Whether C's slot is a block of the kernel's own (LOCAL) or a TEMP that no other kernel
 * reads or writes: a block of rows too large for the stack (a convolution's image of 64
 * channels of 112×112), which fuse_rows leaves in the scratch arena. */
static bool c_own(const ljg_program *p, const ljg_kernel *k) {
  int kind = p->slots[k->mm_out_slot].kind;
  return kind == LJG_SLOT_LOCAL || (kind == LJG_SLOT_TEMP && !ljg_slot_used_elsewhere(p, k, k->mm_out_slot));
}

bool ljc_gemm_bias_relu(const ljg_kernel *k) {
  const ljg_kexpr *v = &k->exprs[k->nests[0].value];
  int routine = ljc_gemm_routine(k);
  return v->kind == LJG_X_OP && v->op == LJG_OP_RELU && v->nin == 1 && routine >= 0 &&
         routine % LJC_GEMM_NVARIANTS <= LJC_GEMM_WINOGRAD;
}

int32_t ljc_gemm_bias(const ljg_program *p, const ljg_kernel *k) {
  int routine = ljc_gemm_routine(k);
  int variant = routine % LJC_GEMM_NVARIANTS;
  if (routine < 0 || (variant > LJC_GEMM_WINOGRAD && variant != LJC_GEMM_TAPS_FWD) || k->nnests == 0 || k->mm_sum ||
      k->mm_task_rows != 1 || !c_own(p, k))
    return -1;
  const ljg_nest *n = &k->nests[0];
  const ljg_kexpr *v = &k->exprs[n->value];
  if (ljc_gemm_bias_relu(k)) v = &k->exprs[v->in[0]];
  int nd = n->ndim;
  if (n->rop >= 0 || n->scatter_index >= 0 || v->kind != LJG_X_OP || v->op != LJG_OP_ADD || v->nin != 2 ||
      v->dtype != k->mm_dtype || n->out_dtype != k->mm_dtype || nd < 2 || nd > 3 || n->shape[nd - 1] != k->mm_n ||
      ljg_numel(nd - 1, n->shape) != k->mm_b * k->mm_m || !ljg_view_row_major(&k->views[n->out_view]))
    return -1;
  bool rows_only = variant >= LJC_GEMM_WINOGRAD; /* Winograd's and taps.c's: s[3] 0 */
  bool rows_vector = variant == LJC_GEMM_WINOGRAD; /* ljc_gemm_add_row_bias */
  int32_t c = v->in[0], bias = v->in[1];
  if (k->exprs[c].slot != k->mm_out_slot || k->exprs[c].kind != LJG_X_LOAD) c = v->in[1], bias = v->in[0];
  const ljg_kexpr *ce = &k->exprs[c], *be = &k->exprs[bias];
  int64_t s[4];
  if (ce->kind != LJG_X_LOAD || ce->slot != k->mm_out_slot || !ljg_view_row_major(&k->views[ce->view]) ||
      k->views[ce->view].v[0].ndim != nd || be->kind != LJG_X_LOAD || be->dtype != k->mm_dtype ||
      be->slot == k->mm_out_slot || p->slots[be->slot].kind == LJG_SLOT_LOCAL || k->views[be->view].n != 1 ||
      k->views[be->view].v[0].ndim != nd || !bias_strides(k, &k->views[be->view].v[0], s) ||
      (rows_vector && s[1] != 1) || (rows_only && s[3] != 0))
    return -1;
  /* C read by that add alone */
  bool *used = ljb_xcalloc((size_t)k->nexprs, sizeof *used), alone = true;
  for (int i = 1; i < k->nnests; i++) ljg_nest_exprs(k, &k->nests[i], used);
  for (int e = 0; e < k->nexprs && alone; e++)
    alone = (k->exprs[e].kind != LJG_X_LOAD && k->exprs[e].kind != LJG_X_BUFFER) || k->exprs[e].slot != k->mm_out_slot ||
            (e == c && !used[e]);
  free(used);
  return alone ? bias : -1;
}

/* ---- B's sum (a convolution's bias gradient) ----------------------------------------------- */

/* The load of B's slot that expression e of kernel k is B's element by: e itself, or for an
 * unpooled B with a mask (ljg_kernel.mm_unpool_mask), e = where(M > 0, that load, 0) with M a
 * load of the mask's slot through the same view, as far from it as the matmul's are; NULL
 * when it is neither. */
static const ljg_kexpr *b_element(const ljg_kernel *mk, const ljg_kernel *k, int32_t e) {
  if (mk->mm_unpool_mask < 0) return &k->exprs[e];
  int32_t mask, value;
  if (!ljg_relu_gradient(k, e, &mask, &value)) return NULL;
  const ljg_kexpr *m = &k->exprs[mask], *g = &k->exprs[value];
  const ljg_kexpr *mm = &mk->exprs[mk->mm_unpool_mask], *mg = &mk->exprs[mk->mm_bm];
  if (m->kind != LJG_X_LOAD || g->kind != LJG_X_LOAD || m->slot != mm->slot || k->views[m->view].n != 1 ||
      k->views[g->view].n != 1)
    return NULL;
  const ljg_view1 *vm = &k->views[m->view].v[0], *vg = &k->views[g->view].v[0];
  int64_t shift = mk->views[mm->view].v[0].offset - mk->views[mg->view].v[0].offset;
  size_t dims = (size_t)vg->ndim * sizeof *vg->shape;
  bool same = vm->ndim == vg->ndim && vm->offset - vg->offset == shift && memcmp(vm->shape, vg->shape, dims) == 0 &&
              memcmp(vm->stride, vg->stride, dims) == 0;
  return same ? g : NULL;
}

/* Whether nest s of kernel k is Σ_{b, p} B[b, p, n] for the B operand (dY) of matmul kernel
 * mk: an f32 sum of a load of B's slot whose one kept dim runs along B's columns n and whose
 * reduced dims cover B's batch and its K positions (in any order and split), into an OUTPUT
 * slot of its own (no donor; a TEMP's bytes may be another's before that kernel). *at and
 * *step: the output's element of column n is at + n·step. */
static bool sums_b(const ljg_program *p, const ljg_kernel *mk, const ljg_kernel *k, int s, int64_t *at, int64_t *step) {
  const ljg_nest *n = &k->nests[s];
  const ljg_kexpr *x = b_element(mk, k, n->value), *eb = &mk->exprs[mk->mm_bm];
  const ljg_slot *out = &p->slots[n->out_slot];
  if (!x || n->rop != LJG_OP_SUM || n->scatter_index >= 0 || n->out_dtype != LJ_F32 || x->kind != LJG_X_LOAD ||
      x->dtype != LJ_F32 || x->slot != eb->slot || k->views[x->view].n != 1 || k->views[n->out_view].n != 1 ||
      out->kind != LJG_SLOT_OUTPUT || out->param >= 0)
    return false;
  const ljg_view1 *v = &k->views[x->view].v[0], *o = &k->views[n->out_view].v[0], *bv = &mk->views[eb->view].v[0];
  const int64_t *bs = bv->stride;
  if (v->ndim != n->ndim || v->offset != bv->offset) return false;
  int kept = -1, nred = 0, red[LJ_MAX_DIMS];
  bool batch = mk->mm_b == 1;
  for (int d = 0; d < n->ndim; d++) {
    if (n->shape[d] == 1) continue;
    if (!(n->rmask >> d & 1)) {
      if (kept >= 0 || n->shape[d] != mk->mm_n || v->stride[d] != bs[2]) return false;
      kept = d;
    } else if (!batch && n->shape[d] == mk->mm_b && v->stride[d] == bs[0]) {
      batch = true;
    } else {
      red[nred++] = d;
    }
  }
  if (kept < 0 || !batch) return false;
  /* the positions: dims whose strides, smallest first, each the last's times its extent */
  int64_t next = bs[1], count = 1;
  for (int i = 0; i < nred; i++) {
    int best = i;
    for (int j = i + 1; j < nred; j++)
      if (v->stride[red[j]] < v->stride[red[best]]) best = j;
    int d = red[best];
    red[best] = red[i];
    if (v->stride[d] != next) return false;
    next *= n->shape[d], count *= n->shape[d];
  }
  *at = o->offset, *step = o->stride[kept];
  return count == (mk->mm_unpool_at >= 0 ? mk->mm_k / 4 : mk->mm_k);
}

/* For a batch sum into runs (mk->mm_sum > 1), whose routine writes each run's sums of B into
 * its C slot after the runs' matrices: whether nest s of kernel k can add them up instead,
 * row by row of its task range: k's tasks are the nest's kept dim 0, its columns, and k reads
 * C (which the buffer plan then keeps until k has run). */
static bool adds_runs(const ljg_program *p, const ljg_kernel *mk, const ljg_kernel *k, int s) {
  const ljg_nest *n = &k->nests[s];
  bool reads_c = false;
  for (int e = 0; e < k->nexprs; e++) reads_c |= ljg_expr_reads(&k->exprs[e], mk->mm_out_slot);
  return reads_c && k->task_dim == 0 && !k->task_rows && k->ntasks == mk->mm_n && n->shape[0] == mk->mm_n &&
         !(n->rmask & 1) && p->slots[mk->mm_out_slot].nbytes == (int64_t)mk->mm_sum * (mk->mm_m + 1) * mk->mm_n * 4;
}

/* Whether kernel k reads or writes slot. */
static bool uses_slot(const ljg_kernel *k, int32_t slot) {
  for (int e = 0; e < k->nexprs; e++)
    if (ljg_expr_reads(&k->exprs[e], slot)) return true;
  return ljg_kernel_writes(k, slot, -1);
}

/* Whether one of nests 0 .. s - 1 of kernel k reads slot. */
static bool read_before(const ljg_kernel *k, int s, int32_t slot) {
  bool *used = ljb_xcalloc((size_t)k->nexprs + 1, sizeof *used), found = false;
  for (int t = 0; t < s && !found; t++) {
    ljg_nest_exprs(k, &k->nests[t], used);
    for (int e = 0; e < k->nexprs && !found; e++) found = used[e] && ljg_expr_reads(&k->exprs[e], slot);
  }
  free(used);
  return found;
}

bool ljc_gemm_b_sum(const ljg_program *p, int ki, int *kj, int *nest, int64_t *at, int64_t *step) {
  const ljg_kernel *mk = &p->kernels[ki];
  int routine = ljc_gemm_routine(mk), variant = routine % LJC_GEMM_NVARIANTS;
  if (routine < 0 || (variant != LJC_GEMM_WINOGRAD_DW && variant != LJC_GEMM_TAPS_DW) || mk->mm_n < 2) return false;
  int32_t b_slot = mk->exprs[mk->mm_bm].slot;
  for (int j = ki + 1; j < p->nkernels; j++) {
    const ljg_kernel *k = &p->kernels[j];
    for (int s = 0; k->kind == LJG_K_LOOPS && s < k->nnests; s++) {
      int32_t out = k->nests[s].out_slot;
      if (!sums_b(p, mk, k, s, at, step) || !ljc_nest_alone(k, s) || ljg_kernel_writes(k, b_slot, -1) ||
          ljg_kernel_writes(k, out, s) || read_before(k, s, out) || (mk->mm_sum > 1 && !adds_runs(p, mk, k, s)))
        continue;
      for (int i = ki + 1; i < j; i++) /* a kernel between: the slot is not yet the sum */
        if (uses_slot(&p->kernels[i], out)) return false;
      *kj = j, *nest = s;
      return true;
    }
    if (ljg_kernel_writes(k, b_slot, -1)) return false;
  }
  return false;
}

/* The address of the element (0, 0, 0) of operand load e's 3-d view at field first and its
 * strides at fields first + 1 .. first + 3. */
static void operand_args(ljc_kctx *kc, LLVMValueRef *arg, int first, const ljg_kexpr *e) {
  ljc_ir *ir = kc->ir;
  const ljg_view1 *t = &kc->k->views[e->view].v[0];
  LLVMValueRef off = ljc_i64(ir, t->offset);
  arg[first] = LLVMBuildInBoundsGEP2(ir->b, ljc_storage_type(ir, (lj_dtype)e->dtype), kc->slot_ptr[e->slot], &off, 1, "");
  for (int d = 0; d < 3; d++) arg[first + 1 + d] = ljc_i64(ir, t->stride[d]);
}

/* The address of load e's element (0, 0, 0) (an unpooled B's positions or mask), or NULL for
 * e < 0. */
static LLVMValueRef unpool_arg(ljc_kctx *kc, int32_t e) {
  ljc_ir *ir = kc->ir;
  if (e < 0) return LLVMConstNull(ir->ptr);
  const ljg_kexpr *x = &kc->k->exprs[e];
  LLVMValueRef off = ljc_i64(ir, kc->k->views[x->view].v[0].offset);
  return LLVMBuildInBoundsGEP2(ir->b, ljc_storage_type(ir, (lj_dtype)x->dtype), kc->slot_ptr[x->slot], &off, 1, "");
}

/* p + off elements of the dtype of load e, or NULL for e < 0 (p NULL then). */
static LLVMValueRef advance(ljc_kctx *kc, int32_t e, LLVMValueRef p, LLVMValueRef off) {
  if (e < 0) return p;
  ljc_ir *ir = kc->ir;
  return LLVMBuildInBoundsGEP2(ir->b, ljc_storage_type(ir, (lj_dtype)kc->k->exprs[e].dtype), p, &off, 1, "");
}

/* Opens a loop over the runs of `units` tasks (an i64) that the task range [BEGIN, END) of the
 * argument block arg reaches, each run `per` matrices: a receives arg with the range made the
 * run's share of it, counted from the run's first task, and *m0 the run's first matrix. */
static void runs_begin(ljc_ir *ir, const LLVMValueRef *arg, LLVMValueRef units, int64_t per, ljc_loop *run,
                       LLVMValueRef *a, LLVMValueRef *m0) {
  LLVMBuilderRef b = ir->b;
  LLVMValueRef begin = arg[LJC_GEMM_BEGIN], end = arg[LJC_GEMM_END];
  LLVMValueRef first = LLVMBuildUDiv(b, begin, units, "");
  LLVMValueRef rounded = LLVMBuildNSWAdd(b, end, LLVMBuildNSWSub(b, units, ljc_i64(ir, 1), ""), "");
  LLVMValueRef last = LLVMBuildUDiv(b, rounded, units, "");
  ljc_loop_begin(ir, run, first, last, false, 0, NULL);
  LLVMValueRef lo = LLVMBuildNSWMul(b, run->iv, units, ""), hi = LLVMBuildNSWAdd(b, lo, units, "");
  memcpy(a, arg, LJC_GEMM_NARGS * sizeof *a);
  a[LJC_GEMM_BEGIN] = LLVMBuildNSWSub(b, ljc_intrinsic2(ir, "smax", begin, lo), lo, "");
  a[LJC_GEMM_END] = LLVMBuildNSWSub(b, ljc_intrinsic2(ir, "smin", end, hi), lo, "");
  *m0 = LLVMBuildNSWMul(b, run->iv, ljc_i64(ir, per), "");
}

/* A batch sum into G matrices (ljg_kernel.mm_sum > 1), its tasks G runs of each matrix's
 * rows or column blocks: the routine called on each run [begin, end) reaches, its share of
 * that run's rows or blocks, with A's and B's matrices of that run of the batch (an unpooled
 * B's positions and mask with B's) and C's matrix of it. */
static void call_by_runs(ljc_kctx *kc, const LLVMValueRef *arg, LLVMValueRef fn) {
  const ljg_kernel *k = kc->k;
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  int64_t per = k->mm_b / k->mm_sum;
  ljc_loop run;
  LLVMValueRef a[LJC_GEMM_NARGS], m0;
  runs_begin(ir, arg, ljc_i64(ir, k->ntasks / k->mm_sum), per, &run, a, &m0);
  LLVMValueRef a_off = LLVMBuildNSWMul(b, m0, arg[LJC_GEMM_A_SB], "");
  LLVMValueRef b_off = LLVMBuildNSWMul(b, m0, arg[LJC_GEMM_B_SB], "");
  a[LJC_GEMM_A] = advance(kc, k->mm_a, arg[LJC_GEMM_A], a_off);
  a[LJC_GEMM_B] = advance(kc, k->mm_bm, arg[LJC_GEMM_B], b_off);
  a[LJC_GEMM_UNPOOL_AT] = advance(kc, k->mm_unpool_at, arg[LJC_GEMM_UNPOOL_AT], b_off);
  a[LJC_GEMM_UNPOOL_MASK] = advance(kc, k->mm_unpool_mask, arg[LJC_GEMM_UNPOOL_MASK], b_off);
  a[LJC_GEMM_C] = LLVMBuildInBoundsGEP2(b, ljc_compute_type(ir, (lj_dtype)k->mm_dtype), arg[LJC_GEMM_C],
                                        (LLVMValueRef[]){LLVMBuildNSWMul(b, run.iv, ljc_i64(ir, k->mm_m * k->mm_n), "")},
                                        1, "");
  a[LJC_GEMM_BATCH] = ljc_i64(ir, per);
  if (kc->b_sum_slot >= 0) /* this run's sums of B, after the runs' matrices in C's slot */
    a[LJC_GEMM_BSUM] = LLVMBuildInBoundsGEP2(b, ir->f32, arg[LJC_GEMM_BSUM],
                                             (LLVMValueRef[]){LLVMBuildNSWMul(b, run.iv, ljc_i64(ir, k->mm_n), "")}, 1, "");
  LLVMValueRef block = store_args(ir, a);
  LLVMBuildCall2(b, routine_type(ir), fn, &block, 1, "");
  ljc_loop_end(ir, &run, NULL, NULL);
}

/* A product whose A repeats along the batch every G = mm_a_period matrices (a grouped
 * convolution's weight for each image): the routine called on each run of G matrices that
 * the task range [begin, end) of C's rows (of the argument block's M a matrix: an input
 * gradient's planes where its routine writes the col2im's image) reaches, its share of that
 * run's rows, with B's and C's matrices of it (and the bias's, where each matrix has its own)
 * and A's G as they are. */
static void call_by_periods(ljc_kctx *kc, const LLVMValueRef *arg, LLVMValueRef fn, int64_t bias_nb) {
  const ljg_kernel *k = kc->k;
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  int64_t G = k->mm_a_period;
  LJ_ASSERT(bias_nb == k->mm_b || G % bias_nb == 0);
  ljc_loop run;
  LLVMValueRef a[LJC_GEMM_NARGS], m0;
  runs_begin(ir, arg, LLVMBuildNSWMul(b, ljc_i64(ir, G), arg[LJC_GEMM_M], ""), G, &run, a, &m0);
  a[LJC_GEMM_B] = advance(kc, k->mm_bm, arg[LJC_GEMM_B], LLVMBuildNSWMul(b, m0, arg[LJC_GEMM_B_SB], ""));
  LLVMTypeRef ct = ljc_compute_type(ir, (lj_dtype)k->mm_dtype);
  LLVMValueRef c_off = LLVMBuildNSWMul(b, m0, LLVMBuildNSWMul(b, arg[LJC_GEMM_M], arg[LJC_GEMM_N], ""), "");
  a[LJC_GEMM_C] = LLVMBuildInBoundsGEP2(b, ct, arg[LJC_GEMM_C], &c_off, 1, "");
  if (kc->mm_bias >= 0 && bias_nb == k->mm_b) /* a bias for each matrix: the run's */
    a[LJC_GEMM_BIAS] = LLVMBuildGEP2(b, ct, arg[LJC_GEMM_BIAS],
                                     (LLVMValueRef[]){LLVMBuildNSWMul(b, m0, arg[LJC_GEMM_BIAS_SB], "")}, 1, "");
  a[LJC_GEMM_BATCH] = ljc_i64(ir, G);
  a[LJC_GEMM_BIAS_NB] = ljc_i64(ir, bias_nb == k->mm_b ? G : bias_nb);
  LLVMValueRef block = store_args(ir, a);
  LLVMBuildCall2(b, routine_type(ir), fn, &block, 1, "");
  ljc_loop_end(ir, &run, NULL, NULL);
}

bool ljc_emit_gemm(ljc_kctx *kc, LLVMValueRef begin, LLVMValueRef end, LLVMValueRef first) {
  const ljg_kernel *k = kc->k;
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  int routine = ljc_gemm_routine(k);
  if (routine < 0) return false;
  const ljg_kexpr *ea = &k->exprs[k->mm_a], *eb = &k->exprs[k->mm_bm];
  LLVMValueRef arg[LJC_GEMM_NARGS];
  operand_args(kc, arg, LJC_GEMM_A, ea);
  operand_args(kc, arg, LJC_GEMM_B, eb);
  arg[LJC_GEMM_A_ORIGIN] = kc->slot_origin[ea->slot] ? kc->slot_origin[ea->slot] : ljc_i64(ir, 0);
  int32_t c_slot = k->mm_out_slot;
  int64_t bias_s[4] = {0, 0, 1, 0};
  arg[LJC_GEMM_BIAS] = LLVMConstNull(ir->ptr);
  if (kc->mm_bias >= 0) { /* C plus the bias, into the first nest's slot */
    const ljg_kexpr *e = &k->exprs[kc->mm_bias];
    const ljg_view1 *v = &k->views[e->view].v[0];
    LJ_ASSERT(bias_strides(k, v, bias_s));
    LLVMValueRef off = ljc_i64(ir, v->offset);
    arg[LJC_GEMM_BIAS] = LLVMBuildGEP2(b, ljc_compute_type(ir, (lj_dtype)k->mm_dtype), kc->slot_ptr[e->slot], &off, 1, "");
    c_slot = k->nests[0].out_slot;
  }
  arg[LJC_GEMM_BIAS_SB] = ljc_i64(ir, bias_s[0]);
  arg[LJC_GEMM_BIAS_SM] = ljc_i64(ir, bias_s[1]);
  arg[LJC_GEMM_BIAS_NB] = ljc_i64(ir, bias_s[2]);
  arg[LJC_GEMM_BIAS_SN] = ljc_i64(ir, bias_s[3]);
  arg[LJC_GEMM_RELU] = ljc_i64(ir, kc->mm_bias >= 0 && ljc_gemm_bias_relu(k));
  arg[LJC_GEMM_BSUM] = LLVMConstNull(ir->ptr);
  if (kc->b_sum_slot >= 0) {
    LLVMValueRef off = ljc_i64(ir, kc->b_sum_at);
    arg[LJC_GEMM_BSUM] = LLVMBuildGEP2(b, ir->f32, kc->slot_ptr[kc->b_sum_slot], &off, 1, "");
  }
  arg[LJC_GEMM_BSUM_S] = ljc_i64(ir, kc->b_sum_slot >= 0 ? kc->b_sum_step : 0);
  LJ_ASSERT(k->mm_unpool_at < 0 || routine % LJC_GEMM_NVARIANTS == LJC_GEMM_TAPS_DW);
  arg[LJC_GEMM_UNPOOL_AT] = unpool_arg(kc, k->mm_unpool_at);
  arg[LJC_GEMM_UNPOOL_MASK] = unpool_arg(kc, k->mm_unpool_mask);
  LLVMValueRef origin = kc->slot_origin[c_slot];
  arg[LJC_GEMM_C] = kc->slot_ptr[c_slot];
  arg[LJC_GEMM_C_ORIGIN] = origin ? origin : ljc_i64(ir, 0);
  arg[LJC_GEMM_M] = ljc_i64(ir, k->mm_m);
  arg[LJC_GEMM_N] = ljc_i64(ir, k->mm_n);
  arg[LJC_GEMM_K] = ljc_i64(ir, k->mm_k);
  arg[LJC_GEMM_BATCH] = ljc_i64(ir, k->mm_b);
  arg[LJC_GEMM_SUM] = ljc_i64(ir, k->mm_sum);
  arg[LJC_GEMM_BEGIN] = begin;
  arg[LJC_GEMM_END] = end;
  int variant = routine % LJC_GEMM_NVARIANTS;
  bool wino = variant == LJC_GEMM_WINOGRAD || variant == LJC_GEMM_WINOGRAD_DX;
  arg[LJC_GEMM_WORK] =
      wino ? ljc_entry_array(ir, ir->i8, ljc_winograd_work_bytes(winograd_tm(routine) + winograd_r(routine) - 1))
           : LLVMConstNull(ir->ptr);
  arg[LJC_GEMM_FRESH] = wino ? LLVMBuildZExt(b, first, ir->i64, "") : ljc_i64(ir, 0);
  int64_t win[LJC_GEMM_NARGS - LJC_GEMM_IMG_SC] = {0};
  if (k->mm_cols) {
    const int64_t *img = k->views[(k->mm_cols == LJG_MM_COLS_A ? ea : eb)->view].v[0].stride;
    int64_t w[] = {img[1],       img[2],       img[3],       k->mm_img[2], k->mm_img[3],
                   k->mm_win[0], k->mm_win[1], k->mm_win[2], k->mm_win[3], k->mm_win[4],
                   k->mm_win[5], k->mm_win[6], k->mm_win[7], k->mm_ow};
    _Static_assert(sizeof w == sizeof win, "the window's argument fields");
    memcpy(win, w, sizeof w);
  }
  int64_t sm = k->views[ea->view].v[0].stride[1], sk = k->views[ea->view].v[0].stride[2];
  int64_t weight[4] = {0, 0, 0, 0}; /* origin, row, channel, tap */
  bool taps_routine = variant == LJC_GEMM_TAPS_FWD || variant == LJC_GEMM_TAPS_DX;
  int64_t r = wino ? winograd_r(routine) : taps_routine ? 3 : 0, taps = r * r;
  if (variant == LJC_GEMM_WINOGRAD || variant == LJC_GEMM_TAPS_FWD) /* A = W [ρ, c·r² + t] */
    memcpy(weight, (int64_t[]){0, sm, taps * sk, sk}, sizeof weight);
  else if (is_dx(variant)) /* A = Wᵀ [c·r² + t, ρ]: flipped, rows and channels swapped */
    memcpy(weight, (int64_t[]){(taps - 1) * sm, taps * sm, sk, -sm}, sizeof weight);
  for (int i = 0; i < 4; i++) arg[LJC_GEMM_W_ORIGIN + i] = ljc_i64(ir, weight[i]);
  if (is_dx(variant)) { /* dY's image, padded by r - 1 - p, into the col2im's output */
    const int64_t *bs = k->views[eb->view].v[0].stride, *cw = k->win;
    int64_t w[] = {bs[1], k->win_ow * bs[2], bs[2], k->win_oh, k->win_ow, r, r, 1, 1, r - 1 - cw[4], r - 1 - cw[5], 1, 1,
                   k->win_img[3]};
    _Static_assert(sizeof w == sizeof win, "the window's argument fields");
    memcpy(win, w, sizeof w);
    LLVMValueRef out_origin = kc->slot_origin[k->win_out_slot];
    arg[LJC_GEMM_C] = kc->slot_ptr[k->win_out_slot];
    arg[LJC_GEMM_C_ORIGIN] = out_origin ? out_origin : ljc_i64(ir, 0);
    arg[LJC_GEMM_M] = ljc_i64(ir, k->win_img[1]);
    arg[LJC_GEMM_N] = ljc_i64(ir, k->win_img[2] * k->win_img[3]);
    arg[LJC_GEMM_K] = ljc_i64(ir, taps * k->mm_k);
  }
  for (int i = LJC_GEMM_IMG_SC; i < LJC_GEMM_NARGS; i++) arg[i] = ljc_i64(ir, win[i - LJC_GEMM_IMG_SC]);
  arg[LJC_GEMM_LDC] = arg[LJC_GEMM_N];
  arg[LJC_GEMM_COL_TASKS] = ljc_i64(ir, k->mm_col_tasks);
  arg[LJC_GEMM_ROWS_OUTER] = ljc_i64(ir, ljc_gemm_rows_outer(k));
  arg[LJC_GEMM_STREAM] = ljc_i64(ir, ir->stream && ir->stream[c_slot]);
  char name[32];
  ljc_gemm_routine_name(routine, name);
  LLVMValueRef fn = LLVMGetNamedFunction(ir->mod, name);
  if (!fn) fn = LLVMAddFunction(ir->mod, name, routine_type(ir));
  if (k->mm_sum > 1) {
    call_by_runs(kc, arg, fn);
  } else if (k->mm_a_period) {
    call_by_periods(kc, arg, fn, bias_s[2]);
  } else {
    LLVMValueRef block = store_args(ir, arg);
    LLVMBuildCall2(b, routine_type(ir), fn, &block, 1, "");
  }
  return true;
}
