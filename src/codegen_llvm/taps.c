/* taps.c — the f32 GEMM routines of 3×3 convolutions computed from the image's rows where they
 * are: the weight gradient with few input channels (TAPS_DW) and the forward product with few
 * output rows a matrix (TAPS_FWD, below; and TAPS_DX, an input gradient as that product).
 *
 * The weight gradient with few input channels (fewer than the Winograd routine wants;
 * MNISTNet's conv1 has 1):
 *   C[c·9 + 3·ky + kx, n] = Σ_b Σ_{oy, ox} x_b[c, oy·sy + ky·dy - py, ox + kx·dx - px] · dY_b[n, oy·OW + ox]
 * with x zero outside the image. As a GEMM it is a product of 9 rows a channel by a few columns
 * over a K of the image's positions: the rows are fewer than a register tile's 8 and its
 * transposed dY is packed again for every image (MNISTNet's conv1 at batch 64, one thread:
 * 0.67-0.8 ms, a third of the FMA peak; 0.38 ms here). Here each image's dY is read where it
 * is, a row of vw positions at a time: for each of NB columns n, the 9 taps' x rows at the
 * same positions shifted by the tap (masked loads: the lanes outside the image read as 0)
 * multiply it into 9·NB vector accumulators, summed across their lanes at the end. Where
 * the window's row stride is its dilation, two rows of dY at a time share the image's rows
 * they read (add_rows: 12 loads for 36 multiply-adds instead of 18; a 3-channel 32×32
 * convolution's weight gradient at batch 64 to 64 channels, fastest of 300: 2.3-2.5 -> 2.1
 * ms on one thread, 1.06-1.18 -> 0.88-0.93 on two; with the channels inside the columns
 * instead, so that the columns' dY came from L2 after the first channel, within noise there,
 * and MNISTNet's conv1 took 0.35 -> 0.45-0.48 ms). A call
 * takes blocks of LJG_TAPS_COL_TASK columns (the kernel's tasks), so that each thread reads
 * its share of dY once; the share of the columns that a range of the rows stood for, as in
 * the Winograd weight gradient, split MNISTNet's conv1 as 14 and 18 columns on two threads.
 * Each row of dY read prefetches the same row of the next image into L2: a column's plane of
 * an image is a short stream (3 KB for 28×28) that the hardware prefetchers picked up too late
 * (0.55-0.67 -> 0.42 ms, MNISTNet's conv1, fastest of 200 runs, one thread). With BSUM, the
 * first channel's tiles also sum each dY row they read (the bias gradient, ljc_gemm_b_sum):
 * one add a row to 9 multiply-adds, in the time the routine took without it.
 *
 * With UNPOOL_AT, dY is a 2×2 max-pool's gradient that was never written (graph/
 * fuse_unpool.c): B is the pooled gradient, and each pooled row, loaded once with its window
 * positions (and its relu mask, UNPOOL_MASK), gives two rows of dY: its lanes doubled, each
 * kept where the position is that row's and that column's of the window. MNISTNet's conv1 at
 * batch 64, fastest of 300 runs: the routine takes 0.58-0.59 ms instead of 0.41-0.42 on one
 * thread, 0.31-0.33 instead of 0.24 on two, and the pool's gradient kernel, 0.60-0.67 and
 * 0.27-0.32 ms, does not run. Building one row of dY at a time from its pooled row, instead
 * of two, took 0.70 and 0.38. The two rows share the image's rows they read as dense ones do
 * (add_rows): in the training step on a Zen 5, fastest of 300 runs, 0.49-0.50 -> 0.35 ms
 * on one thread, 0.24-0.25 -> 0.17 on two.
 *
 * The forward product with at most 8 rows a matrix (a grouped convolution's groups of a few
 * channels, ResNeXt's 4 or 8; a convolution to a few channels), over any channels:
 *   C[m, oy·OW + ox] = Σ_c Σ_{ky, kx} A[m, c·9 + 3·ky + kx] · x[c, oy·sy + ky·dy - py, ox·sx + kx·dx - px]
 * The GEMM packs the window's 9 rows a channel of B for each matrix and multiplies each packed
 * vector into those few rows of C only, the packing most of its time. Here each vector of an
 * image row under a tap is loaded where it is (masked at the image's edges) and multiplied by
 * the weights' broadcasts into tiles of 4 rows of C for two output rows or of 8 rows for one,
 * each at two vectors of an output row where it is longer than one (fwd_channels has the tap's
 * loop). One Zen 4 thread, batch 32, without a bias: 128 ->
 * 128 channels in groups of 4 over 28×28 5.6-5.8 -> 3.35 ms; 256 -> 256 in groups of 8 20.4-21.0
 * (Winograd's) -> 12.8; 64 -> 4 channels over 56×56 12.8-14.0 -> 5.7-6.2, 64 -> 8 12.0-12.7
 * (Winograd's) -> 10.1, 3 -> 8 0.71 -> 0.50. With 16 rows it lost: 512 -> 512 in groups of 16
 * over 14×14 15.2-16.2 against Winograd's 12.1-12.5, 16 -> 16 over 28×28 1.32 against 0.80.
 * A column stride of 2 reads the even lanes of two vectors of an image row (the forward product
 * and the weight gradient): a ResNeXt's downsampling, 56×56 to 28×28 in groups of 8, one
 * thread, 26.7 -> 22.2 ms forward; in groups of 4 10.9 -> 10.2 (waiting on the image's 51 MB).
 * An input gradient of stride 1 is such a product too (TAPS_DX, as WINOGRAD_DX): of dY, padded
 * by 2 - p, with the flipped weight (the W_ fields), each matrix's rows the planes of the
 * image's gradient, written where the col2im would write them. The groups of 4 above, one
 * thread: 9.0 ms for the product of Wᵀ and dY (K = 4) and its col2im -> 3.4-3.9.
 * A grouped convolution's weight gradient for each image (TAPS_WT, WINDOW_T's product dY·colsᵀ
 * for at most 8 rows a matrix) is summed from dY's rows and the image's under each tap, two
 * rows of C's 9 taps in vector accumulators, down a column of vectors (two output rows at a
 * time where they share the image's rows), summed across their lanes at the end. The groups
 * of 4 above, one thread: 9.8-10.0 ms through WINDOW_T's packed transposes -> 3.1-3.3 (4.9 a
 * row at a time and the columns inside the rows); groups of 8 21.6 -> 12.7 (and their input
 * gradient, Winograd's before, 20.6 -> 13.1); of stride 2 from 56×56, groups of 4 17.0 -> 7.7,
 * of 8 36.3 -> 26.0. With 16 rows a matrix it lost over 7×7 (36.6 against 14.4 ms) and won a
 * little over 14×14 (14.9 against 16.1): the lanes past a short row's end are wasted. */
#include "codegen_llvm/ir.h"

/* The columns a register tile: 10·NB accumulators (the 9 taps' and dY's sum), NB dY vectors
 * and the 9 taps' rows of x (LLVM loads them all before the FMAs) in 32 vector registers; 1
 * where there are 16. With 3, 39 vectors, LLVM spilled and shuffled accumulators: 0.58 ms
 * instead of 0.38. */
enum { NB_MAX = 2, TAPS = 9 };

typedef struct taps {
  ljc_ir *ir;
  LLVMBuilderRef b;
  LLVMValueRef arg[LJC_GEMM_NARGS];
  LLVMTypeRef vt, it, mt; /* f32, i32 and i1 vectors of vw lanes */
  int vw, nb;
  bool shared; /* the window's row stride is its dilation: add_rows */
  int cs;                  /* the window's column stride (tap_columns) */
  int rows, out_rows;      /* the rows of C a tile; the forward product's output rows (FWD_ACC) */
  int nv;                  /* the forward product's vectors of output columns a tile */
  bool inside;             /* the forward product's output rows read only rows in the image (fwd_inside) */
  LLVMValueRef zero_slot;  /* the forward product's bias of a call without one: a 0 */
} taps;

static LLVMValueRef i64c(taps *t, int64_t v) { return ljc_i64(t->ir, v); }
static LLVMValueRef add(taps *t, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildNSWAdd(t->b, x, y, ""); }
static LLVMValueRef sub(taps *t, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildNSWSub(t->b, x, y, ""); }
static LLVMValueRef mul(taps *t, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildNSWMul(t->b, x, y, ""); }
static LLVMValueRef mulc(taps *t, LLVMValueRef x, int64_t v) { return mul(t, x, i64c(t, v)); }
static LLVMValueRef sdiv(taps *t, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildSDiv(t->b, x, y, ""); }

/* Element off of the f32 array at base (off may lie outside it: no inbounds). */
static LLVMValueRef at(taps *t, LLVMValueRef base, LLVMValueRef off) {
  return LLVMBuildGEP2(t->b, t->ir->f32, base, &off, 1, "");
}

/* The lanes l of n with 0 <= x + l < hi, x and hi i64 (the lanes compared as unsigned i32: x +
 * l below 0 reads as past hi; the routine's shapes fit in i32). */
static LLVMValueRef lanes_in_n(taps *t, LLVMValueRef x, LLVMValueRef hi, int n) {
  LLVMValueRef l[128];
  for (int i = 0; i < n; i++) l[i] = ljc_const_i(t->ir->i32, i);
  LLVMTypeRef it = LLVMVectorType(t->ir->i32, (unsigned)n);
  LLVMValueRef xs = ljc_splat(t->ir, LLVMBuildTrunc(t->b, x, t->ir->i32, ""), it);
  LLVMValueRef lanes = LLVMBuildAdd(t->b, xs, LLVMConstVector(l, (unsigned)n), "");
  return LLVMBuildICmp(t->b, LLVMIntULT, lanes, ljc_splat(t->ir, LLVMBuildTrunc(t->b, hi, t->ir->i32, ""), it), "");
}

/* lanes_in_n for a vector's lanes, and for half of them. */
static LLVMValueRef lanes_in(taps *t, LLVMValueRef x, LLVMValueRef hi) { return lanes_in_n(t, x, hi, t->vw); }
static LLVMValueRef half_lanes_in(taps *t, LLVMValueRef x, LLVMValueRef hi) {
  return lanes_in_n(t, x, hi, t->vw / 2);
}

/* The source columns of the taps kx = 0, 1, 2 under the vector of output columns from x0, whose
 * lanes in the output's row are in_row, for the column stride t->cs (1 or 2): the first,
 * x0·cs + kx·dx - px, into xoff[kx], and which of the cs·vw columns from it lie in the image
 * under an output lane in the row into xmask[kx] (tap_vector reads every cs-th). */
static void tap_columns(taps *t, LLVMValueRef x0, LLVMValueRef in_row, LLVMValueRef *xoff, LLVMValueRef *xmask) {
  const LLVMValueRef *a = t->arg;
  int n = t->cs * t->vw;
  LLVMValueRef under = in_row, order[128];
  if (t->cs > 1) {
    for (int l = 0; l < n; l++) order[l] = ljc_const_i(t->ir->i32, l / t->cs);
    under = LLVMBuildShuffleVector(t->b, in_row, in_row, LLVMConstVector(order, (unsigned)n), "");
  }
  for (int kx = 0; kx < 3; kx++) {
    xoff[kx] = sub(t, add(t, mulc(t, x0, t->cs), mulc(t, a[LJC_GEMM_WIN_DX], kx)), a[LJC_GEMM_WIN_PX]);
    xmask[kx] = LLVMBuildAnd(t->b, under, lanes_in_n(t, xoff[kx], a[LJC_GEMM_IMG_W], n), "");
  }
}

/* The vector under a tap of the image's row `row` (a row in the image): its columns from xoff,
 * every cs-th, where xmask (tap_columns), else 0; 0 where yin (an i1: whether the tap's row
 * lies in the image) is false: in the load's mask for cs 1, after the load for cs 2 (two
 * vectors' mask ANDed with a row's flag is the pattern that LLVM 19 compiled for AVX2 into
 * loads of lanes past the image: depthwise.c's tap_vector). The forward product of groups of 4
 * channels over 28×28 (one Zen 4 thread, batch 32) took 3.96 ms instead of 3.44 with every
 * row's zeros after the load. */
static LLVMValueRef tap_vector(taps *t, LLVMValueRef row, LLVMValueRef xoff, LLVMValueRef xmask, LLVMValueRef yin) {
  ljc_ir *ir = t->ir;
  if (t->cs == 1)
    return ljc_masked_load(ir, t->vt, at(t, row, xoff), 4, LLVMBuildAnd(t->b, xmask, ljc_splat(ir, yin, t->mt), ""));
  int n = t->cs * t->vw;
  LLVMValueRef v = ljc_masked_load(ir, LLVMVectorType(ir->f32, (unsigned)n), at(t, row, xoff), 4, xmask), order[64];
  for (int l = 0; l < t->vw; l++) order[l] = ljc_const_i(ir->i32, l * t->cs);
  v = LLVMBuildShuffleVector(t->b, v, v, LLVMConstVector(order, (unsigned)t->vw), "");
  return LLVMBuildSelect(t->b, yin, v, LLVMConstNull(t->vt), "");
}

/* Σ of x's lanes (in any order). */
static LLVMValueRef lane_sum(taps *t, LLVMValueRef x) {
  LLVMValueRef args[2] = {ljc_const_f(t->ir->f32, 0), x};
  LLVMValueRef s = ljc_intrinsic_over(t->ir, "vector.reduce.fadd", 1, &t->vt, 2, args);
  LLVMSetFastMathFlags(s, LLVMFastMathAllowReassoc);
  return s;
}

/* How the routine reads dY: where it is, or unpooled from a 2×2 max-pool's gradient
 * (UNPOOL_AT), with a relu's mask (UNPOOL_MASK) or without. */
typedef enum dy_mode { DY_DENSE, DY_UNPOOL, DY_UNPOOL_MASKED } dy_mode;

/* dY's planes of the image, a column's each (B's: the pooled gradient's when unpooled), and
 * for unpooled dY the positions' and the mask's, the lanes of the pooled row read in the loop
 * over a row's positions (half a vector from pv) and the pooled row's width. */
typedef struct unpool {
  LLVMValueRef col[NB_MAX], at[NB_MAX], mask[NB_MAX];
  LLVMValueRef pv, lanes, pw;
  LLVMTypeRef ht, hi8; /* f32 and i8 vectors of vw/2 lanes */
} unpool;

/* Pooled row py of column j, half a vector of lanes from pv: the gradient (0 where the mask is
 * not above 0) and the window positions of the maxima; prefetches the next image's gradient,
 * mask and positions. The kernels that wrote them split the images between the threads, where
 * this one splits the columns: on two threads half of each thread's lines are in the other
 * core's cache, which the gradient's prefetch alone left to the loads (MNISTNet's conv1 at
 * batch 64 on two threads, fastest: 0.74-0.75 -> 0.59-0.61 ms for its backward; in the
 * training step, this routine 0.50-0.58 -> 0.28-0.31; on one core no faster). */
static void pooled_row(taps *t, const unpool *u, int j, LLVMValueRef py, dy_mode mode, LLVMValueRef *g, LLVMValueRef *pos) {
  ljc_ir *ir = t->ir;
  LLVMBuilderRef b = t->b;
  LLVMValueRef ppos = add(t, mul(t, py, u->pw), u->pv), zero = LLVMConstNull(u->ht);
  *g = ljc_masked_load(ir, u->ht, at(t, u->col[j], ppos), 4, u->lanes);
  if (mode == DY_UNPOOL_MASKED) {
    LLVMValueRef m = ljc_masked_load(ir, u->ht, at(t, u->mask[j], ppos), 4, u->lanes);
    *g = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, m, zero, ""), *g, zero, "");
  }
  *pos = ljc_masked_load(ir, u->hi8, LLVMBuildGEP2(b, ir->i8, u->at[j], &ppos, 1, ""), 1, u->lanes);
  LLVMValueRef next = add(t, ppos, t->arg[LJC_GEMM_B_SB]);
  ljc_prefetch(ir, at(t, u->col[j], next));
  if (mode == DY_UNPOOL_MASKED) ljc_prefetch(ir, at(t, u->mask[j], next));
  ljc_prefetch(ir, LLVMBuildGEP2(b, ir->i8, u->at[j], &next, 1, ""));
}

/* x's lanes each twice: lane l of the result is x's l/2. */
static LLVMValueRef doubled(taps *t, LLVMValueRef x) {
  LLVMValueRef order[64];
  for (int l = 0; l < t->vw; l++) order[l] = ljc_const_i(t->ir->i32, l / 2);
  return LLVMBuildShuffleVector(t->b, x, x, LLVMConstVector(order, (unsigned)t->vw), "");
}

/* Row 2·py + dy of dY (vw lanes) from its pooled row's gradient and positions, both doubled:
 * element x is the gradient's x/2 where the position there is 2·dy + x%2, else 0. */
static LLVMValueRef unpooled_row(taps *t, LLVMValueRef g2, LLVMValueRef pos2, int dy) {
  ljc_ir *ir = t->ir;
  LLVMValueRef want[64];
  for (int l = 0; l < t->vw; l++) want[l] = ljc_const_i(ir->i8, 2 * dy + l % 2);
  LLVMValueRef hit = LLVMBuildICmp(t->b, LLVMIntEQ, pos2, LLVMConstVector(want, (unsigned)t->vw), "");
  return LLVMBuildSelect(t->b, hit, g2, LLVMConstNull(t->vt), "");
}

/* What the loop over a row's positions holds for add_rows: x's image plane, the taps' column
 * offsets and lanes in the image. */
typedef struct row_ctx {
  LLVMValueRef x_img, xoff[3], xmask[3];
} row_ctx;

/* Rows y .. y + n - 1 of dY (n 1 or 2), dy[h·nb + j] for row y + h and column j, into the
 * accumulators: out = in + x's shifted rows times dy (and dy's sums). Tap ky of row y + h reads
 * x's row (y + h)·sy + ky·dy - py; for two rows the caller has checked that the window's row
 * stride is its dilation, so that is (y + s)·sy - py with s = h + ky: the two rows' 18 taps
 * read 4 rows of x, each loaded once (3 shifts) and multiplied into both rows' accumulators
 * that take it, 12 loads to 36 multiply-adds instead of 18 (which LLVM loaded all before the
 * multiply-adds and spilled). Each accumulator adds row y's product before row y + 1's. */
static void add_rows(taps *t, const row_ctx *r, LLVMValueRef y, int n, const LLVMValueRef *dy, const LLVMValueRef *in,
                     LLVMValueRef *out) {
  ljc_ir *ir = t->ir;
  LLVMBuilderRef b = t->b;
  const LLVMValueRef *a = t->arg;
  int nacc = (TAPS + 1) * t->nb;
  for (int i = 0; i < nacc; i++) out[i] = in[i];
  for (int j = 0; j < t->nb; j++)
    for (int h = 0; h < n; h++) out[TAPS * t->nb + j] = LLVMBuildFAdd(b, out[TAPS * t->nb + j], dy[h * t->nb + j], "");
  for (int s = 0; s < n + 2; s++) {
    LLVMValueRef iy = n == 2 ? mul(t, add(t, y, i64c(t, s)), a[LJC_GEMM_WIN_SY])
                             : add(t, mul(t, y, a[LJC_GEMM_WIN_SY]), mulc(t, a[LJC_GEMM_WIN_DY], s));
    iy = sub(t, iy, a[LJC_GEMM_WIN_PY]);
    LLVMValueRef yin = ljc_splat(ir, LLVMBuildICmp(b, LLVMIntULT, iy, a[LJC_GEMM_IMG_H], ""), t->mt);
    LLVMValueRef row = at(t, r->x_img, mul(t, iy, a[LJC_GEMM_IMG_SH]));
    for (int kx = 0; kx < 3; kx++) {
      LLVMValueRef x = ljc_masked_load(ir, t->vt, at(t, row, r->xoff[kx]), 4, LLVMBuildAnd(b, r->xmask[kx], yin, ""));
      for (int h = 0; h < n; h++) {
        int ky = s - h;
        if (ky < 0 || ky > 2) continue;
        for (int j = 0; j < t->nb; j++) {
          int i = (ky * 3 + kx) * t->nb + j;
          out[i] = ljc_fmuladd(ir, x, dy[h * t->nb + j], out[i]);
        }
      }
    }
  }
}

/* The rows of a dense dY (column j's plane at u->col[j]), at the row's positions from v
 * (in_row: those in the row), into the accumulators in -> out: two at a time where they share
 * the image's rows (t->shared; add_rows), the last of an odd number alone, else one at a
 * time. Each row read prefetches the same row of the next image. */
static void dense_rows(taps *t, const row_ctx *r, const unpool *u, LLVMValueRef v, LLVMValueRef in_row,
                       const LLVMValueRef *in, LLVMValueRef *out) {
  ljc_ir *ir = t->ir;
  const LLVMValueRef *a = t->arg;
  int nacc = (TAPS + 1) * t->nb;
  LLVMValueRef OW = a[LJC_GEMM_WIN_OW], OH = sdiv(t, a[LJC_GEMM_K], OW);
  LLVMValueRef pairs_end = t->shared ? mulc(t, sdiv(t, OH, i64c(t, 2)), 2) : i64c(t, 0);
  LLVMValueRef acc[NB_MAX * (TAPS + 1)];
  for (int i = 0; i < nacc; i++) acc[i] = in[i];
  for (int n = t->shared ? 2 : 1; n >= 1; n--) {
    ljc_loop Y;
    ljc_loop_begin_step(ir, &Y, n == 2 ? i64c(t, 0) : pairs_end, n == 2 ? pairs_end : OH, n, true, nacc, acc);
    LLVMValueRef dy[2 * NB_MAX], next[NB_MAX * (TAPS + 1)];
    for (int h = 0; h < n; h++)
      for (int j = 0; j < t->nb; j++) {
        LLVMValueRef pos = add(t, mul(t, add(t, Y.iv, i64c(t, h)), OW), v);
        dy[h * t->nb + j] = ljc_masked_load(ir, t->vt, at(t, u->col[j], pos), 4, in_row);
        ljc_prefetch(ir, at(t, u->col[j], add(t, pos, a[LJC_GEMM_B_SB])));
      }
    add_rows(t, r, Y.iv, n, dy, Y.acc, next);
    ljc_loop_end(ir, &Y, next, n == 2 ? acc : out);
  }
}

/* The accumulators acc[tap·nb + j] of channel c and columns n0 + j: Σ over the batch and the
 * positions (oy, ox) of x's shifted row times dY's row of column min(n0 + j, n_last); and
 * acc[TAPS·nb + j], Σ of that dY row alone (BSUM's, the bias gradient: one add to 9 FMAs). */
static void tile(taps *t, LLVMValueRef c, LLVMValueRef n0, LLVMValueRef n_last, LLVMValueRef *acc, dy_mode mode) {
  ljc_ir *ir = t->ir;
  LLVMBuilderRef b = t->b;
  const LLVMValueRef *a = t->arg;
  int nacc = (TAPS + 1) * t->nb;
  LLVMValueRef OW = a[LJC_GEMM_WIN_OW], OH = sdiv(t, a[LJC_GEMM_K], OW);
  LLVMValueRef zero[NB_MAX * (TAPS + 1)];
  for (int i = 0; i < nacc; i++) zero[i] = LLVMConstNull(t->vt);
  ljc_loop Bl, V, Y;
  ljc_loop_begin(ir, &Bl, i64c(t, 0), a[LJC_GEMM_BATCH], false, nacc, zero);
  row_ctx r = {.x_img = at(t, a[LJC_GEMM_A], add(t, mul(t, Bl.iv, a[LJC_GEMM_A_SB]), mul(t, c, a[LJC_GEMM_IMG_SC])))};
  LLVMValueRef dy_img = at(t, a[LJC_GEMM_B], mul(t, Bl.iv, a[LJC_GEMM_B_SB]));
  unpool u = {.pw = sdiv(t, OW, i64c(t, 2)), .ht = LLVMVectorType(ir->f32, (unsigned)t->vw / 2),
              .hi8 = LLVMVectorType(ir->i8, (unsigned)t->vw / 2)};
  for (int j = 0; j < t->nb; j++) {
    LLVMValueRef n = ljc_intrinsic2(ir, "smin", add(t, n0, i64c(t, j)), n_last);
    u.col[j] = at(t, dy_img, mul(t, n, a[LJC_GEMM_B_SN]));
    if (mode == DY_DENSE) continue;
    LLVMValueRef off = add(t, mul(t, Bl.iv, a[LJC_GEMM_B_SB]), mul(t, n, a[LJC_GEMM_B_SN]));
    u.at[j] = LLVMBuildGEP2(b, ir->i8, a[LJC_GEMM_UNPOOL_AT], &off, 1, "");
    if (mode == DY_UNPOOL_MASKED) u.mask[j] = at(t, a[LJC_GEMM_UNPOOL_MASK], off);
  }
  /* vw positions of a row at a time; the lanes of the tap kx that fall in the image */
  ljc_loop_begin_step(ir, &V, i64c(t, 0), mulc(t, sdiv(t, add(t, OW, i64c(t, t->vw - 1)), i64c(t, t->vw)), t->vw),
                      t->vw, false, nacc, Bl.acc);
  LLVMValueRef in_row = lanes_in(t, V.iv, OW);
  tap_columns(t, V.iv, in_row, r.xoff, r.xmask);
  LLVMValueRef next[NB_MAX * (TAPS + 1)], out[NB_MAX * (TAPS + 1)];
  if (mode == DY_DENSE) {
    dense_rows(t, &r, &u, V.iv, in_row, V.acc, out);
  } else { /* the two rows of each pooled row */
    u.pv = sdiv(t, V.iv, i64c(t, 2));
    u.lanes = half_lanes_in(t, u.pv, u.pw);
    ljc_loop_begin(ir, &Y, i64c(t, 0), sdiv(t, OH, i64c(t, 2)), false, nacc, V.acc);
    LLVMValueRef g[NB_MAX], pos[NB_MAX], dy[2 * NB_MAX], mid[NB_MAX * (TAPS + 1)];
    for (int j = 0; j < t->nb; j++) {
      pooled_row(t, &u, j, Y.iv, mode, &g[j], &pos[j]);
      g[j] = doubled(t, g[j]), pos[j] = doubled(t, pos[j]);
    }
    for (int half = 0; half < 2; half++)
      for (int j = 0; j < t->nb; j++) dy[half * t->nb + j] = unpooled_row(t, g[j], pos[j], half);
    LLVMValueRef y2 = mulc(t, Y.iv, 2);
    if (t->shared) {
      add_rows(t, &r, y2, 2, dy, Y.acc, next);
    } else {
      add_rows(t, &r, y2, 1, dy, Y.acc, mid);
      add_rows(t, &r, add(t, y2, i64c(t, 1)), 1, dy + t->nb, mid, next);
    }
    ljc_loop_end(ir, &Y, next, out);
  }
  ljc_loop_end(ir, &V, out, out);
  ljc_loop_end(ir, &Bl, out, acc);
}

/* The routine's loops over its channels and columns with dY read as mode says. */
static void columns(taps *t, dy_mode mode) {
  ljc_ir *ir = t->ir;
  LLVMBuilderRef b = t->b;
  const LLVMValueRef *a = t->arg;
  /* the columns of this call's tasks */
  LLVMValueRef rows = a[LJC_GEMM_M], N = a[LJC_GEMM_N];
  LLVMValueRef n_lo = mul(t, a[LJC_GEMM_BEGIN], a[LJC_GEMM_COL_TASKS]);
  LLVMValueRef n_hi = ljc_intrinsic2(ir, "smin", mul(t, a[LJC_GEMM_END], a[LJC_GEMM_COL_TASKS]), N);
  LLVMValueRef n_last = sub(t, n_hi, i64c(t, 1));
  ljc_loop C, Nb;
  ljc_loop_begin(ir, &C, i64c(t, 0), sdiv(t, rows, i64c(t, TAPS)), false, 0, NULL);
  ljc_loop_begin_step(ir, &Nb, n_lo, add(t, n_lo, mulc(t, sdiv(t, add(t, sub(t, n_hi, n_lo), i64c(t, t->nb - 1)),
                                                                 i64c(t, t->nb)), t->nb)),
                      t->nb, true, 0, NULL);
  LLVMValueRef acc[NB_MAX * (TAPS + 1)];
  tile(t, C.iv, Nb.iv, n_last, acc, mode);
  /* B's sums, once: with the first channel's tiles */
  LLVMValueRef bsum = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, C.iv, i64c(t, 0), ""),
                                   LLVMBuildIsNotNull(b, a[LJC_GEMM_BSUM], ""), "");
  for (int j = 0; j < t->nb; j++) {
    LLVMValueRef n = add(t, Nb.iv, i64c(t, j));
    LLVMBasicBlockRef after = ljc_if_begin(ir, LLVMBuildICmp(b, LLVMIntSLT, n, n_hi, ""), "taps.store");
    for (int tap = 0; tap < TAPS; tap++) {
      LLVMValueRef m = add(t, mulc(t, C.iv, TAPS), i64c(t, tap));
      LLVMValueRef off = sub(t, add(t, mul(t, m, N), n), a[LJC_GEMM_C_ORIGIN]);
      LLVMBuildStore(b, lane_sum(t, acc[tap * t->nb + j]), at(t, a[LJC_GEMM_C], off));
    }
    LLVMBasicBlockRef summed = ljc_if_begin(ir, bsum, "taps.bsum");
    LLVMBuildStore(b, lane_sum(t, acc[TAPS * t->nb + j]), at(t, a[LJC_GEMM_BSUM], mul(t, n, a[LJC_GEMM_BSUM_S])));
    ljc_if_end(ir, summed);
    ljc_if_end(ir, after);
  }
  ljc_loop_end(ir, &Nb, NULL, NULL);
  ljc_loop_end(ir, &C, NULL, NULL);
}

/* Adds the routine `name` (void name(i64 *args)) and returns the taps state of its code: the
 * builder at its entry, the argument block's fields loaded, vectors of the target's f32 width,
 * a column stride of 1. */
static taps routine_begin(ljc_ir *ir, const char *name) {
  LLVMTypeRef param = ir->ptr;
  LLVMValueRef fn = LLVMAddFunction(ir->mod, name, LLVMFunctionType(ir->void_, &param, 1, 0));
  ljc_add_fn_attr(ir, fn, "nounwind");
  taps t = {.ir = ir, .b = ir->b, .vw = ir->vec_bytes / 4, .cs = 1, .nv = 1};
  t.vt = LLVMVectorType(ir->f32, (unsigned)t.vw);
  t.it = LLVMVectorType(ir->i32, (unsigned)t.vw);
  t.mt = LLVMVectorType(ir->i1, (unsigned)t.vw);
  LLVMPositionBuilderAtEnd(t.b, LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry"));
  ljc_gemm_load_args(ir, LLVMGetParam(fn, 0), t.arg);
  return t;
}

void ljc_define_taps_dw(ljc_ir *ir, const char *name) {
  taps t = routine_begin(ir, name);
  t.nb = ir->vec_bytes >= 64 ? NB_MAX : 1;
  LLVMBuilderRef b = t.b;
  const LLVMValueRef *a = t.arg;
  LLVMValueRef unpooled = LLVMBuildIsNotNull(b, a[LJC_GEMM_UNPOOL_AT], "");
  LLVMValueRef masked = LLVMBuildIsNotNull(b, a[LJC_GEMM_UNPOOL_MASK], "");
  LLVMValueRef mode = LLVMBuildAdd(b, LLVMBuildZExt(b, unpooled, ir->i32, ""), LLVMBuildZExt(b, masked, ir->i32, ""), "");
  LLVMValueRef shares = LLVMBuildICmp(b, LLVMIntEQ, a[LJC_GEMM_WIN_SY], a[LJC_GEMM_WIN_DY], "");
  for (dy_mode m = DY_DENSE; m <= DY_UNPOOL_MASKED; m++) {
    LLVMBasicBlockRef after = ljc_if_begin(ir, LLVMBuildICmp(b, LLVMIntEQ, mode, ljc_const_i(ir->i32, m), ""), "taps.mode");
    for (int shared = 0; shared <= 1; shared++) {
      LLVMBasicBlockRef rows_after = ljc_if_begin(ir, shared ? shares : LLVMBuildNot(b, shares, ""), "taps.rows");
      t.shared = shared;
      columns(&t, m);
      ljc_if_end(ir, rows_after);
    }
    ljc_if_end(ir, after);
  }
  LLVMBuildRetVoid(b);
}

/* Prefetches into L2 the next matrix's image (the call's next, or past its last: a prefetch
 * does not fault) where a vector of output columns reads this one's: row `row` of this image
 * from column xoff, the cs·vw columns its taps read, B_SB elements on. The matrices of a call
 * are an image's groups of channels (a grouped convolution's), whose planes of a few KiB the
 * hardware's prefetchers took up too late: ResNeXt's block at batch 16 (groups of 4 over
 * 28×28), one Zen 5 thread, its forward products 2.8-2.9 -> 1.6-1.7 ms, its weight gradient
 * 3.1 -> 1.2; 128 channels in groups of 4 over 28×28 at batch 32, two threads, 3.0 -> 2.3 ms
 * forward, 9.5-10.2 -> 6.8-6.9 with both gradients. */
static void prefetch_next_image(taps *t, LLVMValueRef row, LLVMValueRef xoff) {
  LLVMValueRef ahead = at(t, row, t->arg[LJC_GEMM_B_SB]);
  for (int j = 0; j <= t->cs * t->nv; j++) ljc_prefetch(t->ir, at(t, ahead, add(t, xoff, i64c(t, j * t->vw))));
}

/* ---- the forward product (TAPS_FWD) ---------------------------------------------------------- */

/* The accumulators of a tile of the forward product: its rows of C (t->rows, 4 or 8) for each
 * output row it computes at a time (t->out_rows, 2 or 1), 8 a vector of output columns, its
 * weight rows' broadcasts multiplied into each vector of the image loaded; and the vectors a
 * tile (t->nv): two where the output's rows are longer than one, 16 accumulators, each
 * broadcast multiplied into twice as many (128 channels in groups of 4 over 28×28 at batch 32,
 * one Zen 5 thread, the kernel's fastest of 100 runs: 2.8-3.3 ms with one vector, 2.3-2.7). */
enum { FWD_ACC = 8, FWD_NV = 2, FWD_ROWS_MAX = 8 };

/* A tile's rows m0 .. m0 + t->rows - 1 of matrix bi (clamped to its last: a row past it is
 * the last row again, computed and stored twice) at t->nv vectors of output positions: the
 * image and weight rows, each vector's taps' column offsets and lanes in the image. */
typedef struct fwd_tile {
  LLVMValueRef img, w[FWD_ROWS_MAX], xoff[FWD_NV][3], xmask[FWD_NV][3];
} fwd_tile;

/* The image's row (maybe outside it) that tap row ky (an i64) of output row y + h reads. */
static LLVMValueRef fwd_row(taps *t, LLVMValueRef y, int h, LLVMValueRef ky) {
  const LLVMValueRef *a = t->arg;
  LLVMValueRef iy = add(t, mul(t, add(t, y, i64c(t, h)), a[LJC_GEMM_WIN_SY]), mul(t, a[LJC_GEMM_WIN_DY], ky));
  return sub(t, iy, a[LJC_GEMM_WIN_PY]);
}

/* The image's row for tap ky of output row y + h, its vector v at tap kx's columns: the lanes
 * outside the image 0. */
static LLVMValueRef fwd_source(taps *t, const fwd_tile *f, LLVMValueRef plane, LLVMValueRef y, int h, LLVMValueRef ky,
                               int kx, int v) {
  LLVMBuilderRef b = t->b;
  const LLVMValueRef *a = t->arg;
  LLVMValueRef iy = fwd_row(t, y, h, ky);
  if (t->inside)
    return tap_vector(t, at(t, plane, mul(t, iy, a[LJC_GEMM_IMG_SH])), f->xoff[v][kx], f->xmask[v][kx],
                      ljc_const_i(t->ir->i1, 1));
  LLVMValueRef yin = LLVMBuildICmp(b, LLVMIntULT, iy, a[LJC_GEMM_IMG_H], "");
  LLVMValueRef row = at(t, plane, mul(t, LLVMBuildSelect(b, yin, iy, i64c(t, 0), ""), a[LJC_GEMM_IMG_SH]));
  return tap_vector(t, row, f->xoff[v][kx], f->xmask[v][kx], yin);
}

/* Output rows y .. y + n - 1 (n 1 or 2) of the tile at its vectors of positions: in + Σ over
 * the channels and taps of the image's shifted rows times the weight, into
 * out[(h·t->nv + v)·t->rows + j]: for each tap column kx, a loop over the tap rows ky, each
 * loading its weights' broadcasts and the image's vectors under the tap, multiplied into every
 * accumulator. With the channel's 9 taps in one block of code (and the two output rows' image
 * rows loaded once for both), LLVM's machine scheduler moved the broadcasts and the image's
 * loads to the block's start and spilled them (57 of its 81 vector moves spills, a channel of
 * two vectors); a loop body of one tap leaves it nothing to move so far. The groups of 4 above,
 * alternated processes, fastest of 60 runs each: 3.2-3.4 ms -> 1.8-2.2 (1.7-2.0 with that
 * scheduler off for all code, which slowed other kernels: gelu over 16M floats 2.9 -> 4.6). */
static void fwd_channels(taps *t, const fwd_tile *f, LLVMValueRef y, int n, LLVMValueRef *in, LLVMValueRef *out) {
  ljc_ir *ir = t->ir;
  LLVMBuilderRef b = t->b;
  const LLVMValueRef *a = t->arg;
  int nacc = n * t->rows * t->nv;
  ljc_loop C;
  ljc_loop_begin(ir, &C, i64c(t, 0), sdiv(t, a[LJC_GEMM_K], i64c(t, TAPS)), false, nacc, in);
  LLVMValueRef plane = at(t, f->img, mul(t, C.iv, a[LJC_GEMM_IMG_SC]));
  LLVMValueRef w0 = mul(t, C.iv, a[LJC_GEMM_W_CHAN]);
  LLVMValueRef last = fwd_row(t, y, n - 1, i64c(t, 2));
  for (int r = 0; r < t->cs * n; r++) /* the rows the output rows before did not read (square strides) */
    prefetch_next_image(t, at(t, plane, mul(t, sub(t, last, i64c(t, r)), a[LJC_GEMM_IMG_SH])), f->xoff[0][0]);
  LLVMValueRef acc[FWD_ACC * FWD_NV];
  for (int i = 0; i < nacc; i++) acc[i] = C.acc[i];
  for (int kx = 0; kx < 3; kx++) {
    ljc_loop Y;
    ljc_loop_begin(ir, &Y, i64c(t, 0), i64c(t, 3), false, nacc, acc);
    LLVMValueRef next[FWD_ACC * FWD_NV], w[FWD_ROWS_MAX];
    LLVMValueRef off = add(t, w0, mul(t, a[LJC_GEMM_W_TAP], add(t, mulc(t, Y.iv, 3), i64c(t, kx))));
    for (int j = 0; j < t->rows; j++) w[j] = ljc_splat(ir, LLVMBuildLoad2(b, ir->f32, at(t, f->w[j], off), ""), t->vt);
    for (int h = 0; h < n; h++)
      for (int v = 0; v < t->nv; v++) {
        LLVMValueRef x = fwd_source(t, f, plane, y, h, Y.iv, kx, v);
        int i = (h * t->nv + v) * t->rows;
        for (int j = 0; j < t->rows; j++) next[i + j] = ljc_fmuladd(ir, x, w[j], Y.acc[i + j]);
      }
    ljc_loop_end(ir, &Y, next, acc);
  }
  ljc_loop_end(ir, &C, acc, out);
}

/* The tile's output rows y .. y + n - 1 at every vector of their positions, t->nv at a time,
 * each stored to the tile's rows of C (rows mrow[j], c0 the offset of matrix bi's row 0) from
 * their bias; outside the image's rows (!t->inside), only those below OH. */
static void fwd_rows(taps *t, fwd_tile *f, LLVMValueRef y, int n, const LLVMValueRef *mrow, LLVMValueRef c0,
                     const LLVMValueRef *bias, LLVMValueRef OH) {
  ljc_ir *ir = t->ir;
  const LLVMValueRef *a = t->arg;
  LLVMValueRef OW = a[LJC_GEMM_WIN_OW];
  int step = t->nv * t->vw;
  ljc_loop V;
  ljc_loop_begin_step(ir, &V, i64c(t, 0), mulc(t, sdiv(t, add(t, OW, i64c(t, step - 1)), i64c(t, step)), step), step,
                      false, 0, NULL);
  LLVMValueRef in_row[FWD_NV], x0[FWD_NV];
  for (int v = 0; v < t->nv; v++) {
    x0[v] = add(t, V.iv, i64c(t, v * t->vw));
    in_row[v] = lanes_in(t, x0[v], OW);
    tap_columns(t, x0[v], in_row[v], f->xoff[v], f->xmask[v]);
  }
  LLVMValueRef start[FWD_ACC * FWD_NV], sums[FWD_ACC * FWD_NV];
  for (int i = 0; i < n * t->nv; i++)
    for (int j = 0; j < t->rows; j++) start[i * t->rows + j] = bias[j];
  fwd_channels(t, f, y, n, start, sums);
  for (int h = 0; h < n; h++)
    for (int v = 0; v < t->nv; v++) {
      LLVMValueRef lanes = in_row[v];
      if (!t->inside && h > 0) {
        LLVMValueRef below = LLVMBuildICmp(t->b, LLVMIntSLT, add(t, y, i64c(t, h)), OH, "");
        lanes = LLVMBuildAnd(t->b, lanes, ljc_splat(ir, below, t->mt), "");
      }
      for (int j = 0; j < t->rows; j++) {
        LLVMValueRef pos = add(t, mul(t, add(t, y, i64c(t, h)), OW), x0[v]);
        LLVMValueRef off = add(t, add(t, c0, mul(t, mrow[j], a[LJC_GEMM_LDC])), pos);
        LLVMValueRef dst = at(t, a[LJC_GEMM_C], sub(t, off, a[LJC_GEMM_C_ORIGIN]));
        ljc_masked_store(ir, sums[(h * t->nv + v) * t->rows + j], dst, 4, lanes);
      }
    }
  ljc_loop_end(ir, &V, NULL, NULL);
}

/* The tiles of t->out_rows output rows from a multiple y of that many, below blocks_end, whose
 * taps read only rows in the image: those from *lo to *hi (y·sy ≥ py, and the last output
 * row's last tap row, (y + n - 1)·sy + 2·dy - py, below the image's height). Their loads need
 * no mask of the row, only the tap column's (the groups of 4 above, the kernel's fastest of
 * 100 runs in 6 alternated processes: 2.10-3.37 ms, median 2.48, with every tile's loads
 * ANDing the row's mask; 1.84-2.52, median 2.04). */
static void fwd_inside(taps *t, LLVMValueRef blocks_end, LLVMValueRef *lo, LLVMValueRef *hi) {
  ljc_ir *ir = t->ir;
  const LLVMValueRef *a = t->arg;
  int n = t->out_rows;
  LLVMValueRef SY = a[LJC_GEMM_WIN_SY], first = sdiv(t, add(t, a[LJC_GEMM_WIN_PY], sub(t, SY, i64c(t, 1))), SY);
  /* the output rows y with (y + n - 1)·sy ≤ lim: those below end */
  LLVMValueRef reach = add(t, mulc(t, a[LJC_GEMM_WIN_DY], 2), i64c(t, 1));
  LLVMValueRef lim = sub(t, add(t, a[LJC_GEMM_IMG_H], a[LJC_GEMM_WIN_PY]), reach);
  LLVMValueRef end = sub(t, sdiv(t, ljc_intrinsic2(ir, "smax", lim, i64c(t, 0)), SY), i64c(t, n - 2));
  end = LLVMBuildSelect(t->b, LLVMBuildICmp(t->b, LLVMIntSLT, lim, i64c(t, 0), ""), i64c(t, 0), end, "");
  end = ljc_intrinsic2(ir, "smax", end, i64c(t, 0));
  *lo = ljc_intrinsic2(ir, "smin", mulc(t, sdiv(t, add(t, first, i64c(t, n - 1)), i64c(t, n)), n), blocks_end);
  LLVMValueRef up = mulc(t, sdiv(t, add(t, end, i64c(t, n - 1)), i64c(t, n)), n);
  *hi = ljc_intrinsic2(ir, "smax", *lo, ljc_intrinsic2(ir, "smin", up, blocks_end));
}

/* Rows m0 .. min(m0 + t->rows, last + 1) - 1 of matrix bi of C. */
static void fwd_tile_rows(taps *t, LLVMValueRef bi, LLVMValueRef m0, LLVMValueRef last) {
  ljc_ir *ir = t->ir;
  LLVMBuilderRef b = t->b;
  const LLVMValueRef *a = t->arg;
  LLVMValueRef OH = sdiv(t, a[LJC_GEMM_N], a[LJC_GEMM_WIN_OW]);
  fwd_tile f = {.img = at(t, a[LJC_GEMM_B], mul(t, bi, a[LJC_GEMM_B_SB]))};
  LLVMValueRef mrow[FWD_ROWS_MAX], bias[FWD_ROWS_MAX];
  LLVMValueRef has_bias = LLVMBuildIsNotNull(b, a[LJC_GEMM_BIAS], "");
  LLVMValueRef a_mat = at(t, a[LJC_GEMM_A], add(t, mul(t, bi, a[LJC_GEMM_A_SB]), a[LJC_GEMM_W_ORIGIN]));
  for (int j = 0; j < t->rows; j++) {
    mrow[j] = ljc_intrinsic2(ir, "smin", add(t, m0, i64c(t, j)), last);
    f.w[j] = at(t, a_mat, mul(t, mrow[j], a[LJC_GEMM_W_ROW]));
    LLVMValueRef bias_at = ljc_gemm_bias_at(ir, a, ir->f32, bi, mrow[j], ljc_i64(ir, 0));
    LLVMValueRef bp = LLVMBuildSelect(b, has_bias, bias_at, t->zero_slot, "");
    bias[j] = ljc_splat(ir, LLVMBuildLoad2(b, ir->f32, bp, ""), t->vt);
  }
  LLVMValueRef c0 = mul(t, mul(t, bi, a[LJC_GEMM_M]), a[LJC_GEMM_LDC]);
  int n = t->out_rows;
  LLVMValueRef blocks_end = mulc(t, sdiv(t, OH, i64c(t, n)), n), lo, hi;
  fwd_inside(t, blocks_end, &lo, &hi);
  /* the tiles at the image's edges: those from 0 before lo, then those from hi, the last of an
   * odd number of rows with its second row not stored (one copy of the tiles' code less to
   * compile) */
  LLVMValueRef all_end = mulc(t, sdiv(t, add(t, OH, i64c(t, n - 1)), i64c(t, n)), n);
  ljc_loop Y;
  ljc_loop_begin_step(ir, &Y, i64c(t, 0), add(t, lo, sub(t, all_end, hi)), n, true, 0, NULL);
  LLVMValueRef past = add(t, Y.iv, sub(t, hi, lo));
  LLVMValueRef y = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, Y.iv, lo, ""), Y.iv, past, "");
  fwd_rows(t, &f, y, n, mrow, c0, bias, OH);
  ljc_loop_end(ir, &Y, NULL, NULL);
  t->inside = true;
  ljc_loop_begin_step(ir, &Y, lo, hi, n, true, 0, NULL);
  fwd_rows(t, &f, Y.iv, n, mrow, c0, bias, OH);
  ljc_loop_end(ir, &Y, NULL, NULL);
  t->inside = false;
}

/* The rows [BEGIN, END) of C (r = b·M + m), a matrix's run of them at a time, in tiles of
 * t->rows: rows(t, bi, m0, last) computes rows m0 .. min(m0 + t->rows, last + 1) - 1 of matrix
 * bi. */
static void row_runs(taps *t, void (*rows)(taps *, LLVMValueRef, LLVMValueRef, LLVMValueRef)) {
  ljc_ir *ir = t->ir;
  LLVMBuilderRef b = t->b;
  const LLVMValueRef *a = t->arg;
  LLVMValueRef M = a[LJC_GEMM_M], end = a[LJC_GEMM_END];
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(ir->ctx, fn, "taps.run");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "taps.runs_end");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, a[LJC_GEMM_BEGIN], end, ""), head, done);
  LLVMPositionBuilderAtEnd(b, head);
  LLVMValueRef r = LLVMBuildPhi(b, ir->i64, "row");
  LLVMValueRef bi = LLVMBuildSDiv(b, r, M, ""), m = LLVMBuildSRem(b, r, M, "");
  LLVMValueRef len = ljc_intrinsic2(ir, "smin", sub(t, end, r), sub(t, M, m));
  LLVMValueRef last = sub(t, add(t, m, len), i64c(t, 1));
  ljc_loop T;
  LLVMValueRef tiles = sdiv(t, add(t, len, i64c(t, t->rows - 1)), i64c(t, t->rows));
  ljc_loop_begin_step(ir, &T, m, add(t, m, mulc(t, tiles, t->rows)), t->rows, false, 0, NULL);
  rows(t, bi, T.iv, last);
  ljc_loop_end(ir, &T, NULL, NULL);
  LLVMValueRef r_next = add(t, r, len);
  LLVMBasicBlockRef tail = LLVMGetInsertBlock(b);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, r_next, end, ""), head, done);
  LLVMAddIncoming(r, (LLVMValueRef[]){a[LJC_GEMM_BEGIN]}, &pre, 1);
  LLVMAddIncoming(r, &r_next, &tail, 1);
  LLVMPositionBuilderAtEnd(b, done);
}

void ljc_define_taps_fwd(ljc_ir *ir, const char *name) {
  taps t = routine_begin(ir, name);
  LLVMBuilderRef b = t.b;
  t.zero_slot = ljc_entry_array(ir, ir->f32, 1);
  LLVMBuildStore(b, ljc_const_f(ir->f32, 0), t.zero_slot);
  LLVMValueRef wide = LLVMBuildICmp(b, LLVMIntSGT, t.arg[LJC_GEMM_M], i64c(&t, 4), "");
  /* for column strides 1 and 2 (strided): tiles of 4 rows, two output rows at a time, or of
   * 8, one; of stride 1, two vectors of output columns a tile where the output's rows are
   * longer than one */
  LLVMValueRef strided = LLVMBuildICmp(b, LLVMIntEQ, t.arg[LJC_GEMM_WIN_SX], i64c(&t, 2), "");
  LLVMValueRef long_rows = LLVMBuildICmp(b, LLVMIntSGT, t.arg[LJC_GEMM_WIN_OW], i64c(&t, t.vw), "");
  for (int cs = 1; cs <= 2; cs++)
    for (int rows = 4; rows <= 8; rows *= 2)
      for (int nv = 1; nv <= (cs == 1 ? FWD_NV : 1); nv++) {
        t.cs = cs, t.rows = rows, t.out_rows = FWD_ACC / rows, t.nv = nv;
        LLVMValueRef when = rows == 8 ? wide : LLVMBuildNot(b, wide, "");
        when = LLVMBuildAnd(b, when, cs > 1 ? strided : LLVMBuildNot(b, strided, ""), "");
        if (cs == 1) when = LLVMBuildAnd(b, when, nv > 1 ? long_rows : LLVMBuildNot(b, long_rows, ""), "");
        LLVMBasicBlockRef after = ljc_if_begin(ir, when, "taps.rows");
        row_runs(&t, fwd_tile_rows);
        ljc_if_end(ir, after);
      }
  LLVMBuildRetVoid(b);
}

/* ---- the weight gradient of a few rows (TAPS_WT) --------------------------------------------- */

/* The rows of C a tile of the weight gradient computes: 9 accumulators each (its taps). */
enum { WT_ROWS = 2 };

/* What the loop over a column of vectors holds for wt_rows: the image's plane of the channel,
 * dY's rows of the tile's rows of C, the column's first position, its lanes in the row, the taps' column
 * offsets and lanes in the image. */
typedef struct wt_col {
  LLVMValueRef plane, dy_row[WT_ROWS], col, in_row, xoff[3], xmask[3];
} wt_col;

enum { WT_ACC = WT_ROWS * TAPS };

/* Output rows y .. y + n - 1 (n 1 or 2) at the column's vectors into the accumulators, in ->
 * out: out[j·9 + t] adds dY's row j times the image's row under tap t. Tap ky of row y + h reads
 * the image's row (y + h)·sy + ky·dy - py; two rows at a time where the window's row stride is
 * its dilation (t->shared), so that their 18 taps read 4 rows of the image, each vector
 * loaded once for both (12 loads for 36 multiply-adds instead of 18, as add_rows's). */
static void wt_rows(taps *t, const wt_col *w, LLVMValueRef y, int n, const LLVMValueRef *in, LLVMValueRef *out) {
  ljc_ir *ir = t->ir;
  LLVMBuilderRef b = t->b;
  const LLVMValueRef *a = t->arg;
  LLVMValueRef OW = a[LJC_GEMM_WIN_OW], dy[2][WT_ROWS];
  for (int i = 0; i < WT_ACC; i++) out[i] = in[i];
  for (int h = 0; h < n; h++)
    for (int j = 0; j < WT_ROWS; j++) {
      LLVMValueRef pos = add(t, mul(t, add(t, y, i64c(t, h)), OW), w->col);
      dy[h][j] = ljc_masked_load(ir, t->vt, at(t, w->dy_row[j], pos), 4, w->in_row);
      ljc_prefetch(ir, at(t, w->dy_row[j], add(t, pos, a[LJC_GEMM_A_SB])));
    }
  for (int s = 0; s < (n == 2 ? 4 : 3); s++) {
    LLVMValueRef iy = n == 2 ? mul(t, add(t, y, i64c(t, s)), a[LJC_GEMM_WIN_SY])
                             : add(t, mul(t, y, a[LJC_GEMM_WIN_SY]), mulc(t, a[LJC_GEMM_WIN_DY], s));
    iy = sub(t, iy, a[LJC_GEMM_WIN_PY]);
    LLVMValueRef yin = LLVMBuildICmp(b, LLVMIntULT, iy, a[LJC_GEMM_IMG_H], "");
    LLVMValueRef row = at(t, w->plane, mul(t, LLVMBuildSelect(b, yin, iy, i64c(t, 0), ""), a[LJC_GEMM_IMG_SH]));
    if (s >= 2 * (n - 1)) prefetch_next_image(t, row, w->xoff[0]); /* the pair's rows new to it; a row's all */
    for (int kx = 0; kx < 3; kx++) {
      LLVMValueRef x = tap_vector(t, row, w->xoff[kx], w->xmask[kx], yin);
      for (int h = 0; h < n; h++) {
        int ky = s - h;
        if (ky < 0 || ky > 2) continue;
        for (int j = 0; j < WT_ROWS; j++)
          out[j * TAPS + ky * 3 + kx] = ljc_fmuladd(ir, dy[h][j], x, out[j * TAPS + ky * 3 + kx]);
      }
    }
  }
}

/* Rows m0, m0 + 1 of matrix bi of C (clamped to its last: a row past it is the last again),
 * C[m, c·9 + t] = Σ_{oy, ox} dY[m, oy·OW + ox] · x[c, oy·sy + ky·dy - py, ox·sx + kx·dx - px] (t =
 * 3·ky + kx; dY is A, x B's image): for each channel, a column of vectors of dY's rows at a
 * time, down its rows (wt_rows), the 9 taps' vectors of x under each multiplied into the rows'
 * accumulators, which are summed across their lanes at the end. */
static void wt_tile(taps *t, LLVMValueRef bi, LLVMValueRef m0, LLVMValueRef last) {
  ljc_ir *ir = t->ir;
  LLVMBuilderRef b = t->b;
  const LLVMValueRef *a = t->arg;
  LLVMValueRef OW = a[LJC_GEMM_WIN_OW], OH = sdiv(t, a[LJC_GEMM_K], OW);
  LLVMValueRef img = at(t, a[LJC_GEMM_B], mul(t, bi, a[LJC_GEMM_B_SB])), mrow[WT_ROWS];
  wt_col w;
  for (int j = 0; j < WT_ROWS; j++) {
    mrow[j] = ljc_intrinsic2(ir, "smin", add(t, m0, i64c(t, j)), last);
    w.dy_row[j] = at(t, a[LJC_GEMM_A], add(t, mul(t, bi, a[LJC_GEMM_A_SB]), mul(t, mrow[j], a[LJC_GEMM_A_SM])));
  }
  LLVMValueRef zero[WT_ACC], acc[WT_ACC], pairs[WT_ACC], rows[WT_ACC];
  for (int i = 0; i < WT_ACC; i++) zero[i] = LLVMConstNull(t->vt);
  ljc_loop C, V;
  ljc_loop_begin(ir, &C, i64c(t, 0), sdiv(t, a[LJC_GEMM_N], i64c(t, TAPS)), false, 0, NULL);
  w.plane = at(t, img, mul(t, C.iv, a[LJC_GEMM_IMG_SC]));
  /* a column of vectors at a time: their lanes' masks computed once for every row */
  ljc_loop_begin_step(ir, &V, i64c(t, 0), mulc(t, sdiv(t, add(t, OW, i64c(t, t->vw - 1)), i64c(t, t->vw)), t->vw),
                      t->vw, false, WT_ACC, zero);
  w.col = V.iv;
  w.in_row = lanes_in(t, V.iv, OW);
  tap_columns(t, V.iv, w.in_row, w.xoff, w.xmask);
  LLVMValueRef pairs_end = t->shared ? mulc(t, sdiv(t, OH, i64c(t, 2)), 2) : i64c(t, 0);
  for (int n = 2; n >= 1; n--) {
    ljc_loop Y;
    LLVMValueRef next[WT_ACC];
    ljc_loop_begin_step(ir, &Y, n == 2 ? i64c(t, 0) : pairs_end, n == 2 ? pairs_end : OH, n, true, WT_ACC,
                        n == 2 ? V.acc : pairs);
    wt_rows(t, &w, Y.iv, n, Y.acc, next);
    ljc_loop_end(ir, &Y, next, n == 2 ? pairs : rows);
  }
  ljc_loop_end(ir, &V, rows, acc);
  LLVMValueRef c0 = mulc(t, C.iv, TAPS);
  for (int j = 0; j < WT_ROWS; j++) {
    LLVMValueRef crow = mul(t, add(t, mul(t, bi, a[LJC_GEMM_M]), mrow[j]), a[LJC_GEMM_LDC]);
    for (int tap = 0; tap < TAPS; tap++) {
      LLVMValueRef off = sub(t, add(t, crow, add(t, c0, i64c(t, tap))), a[LJC_GEMM_C_ORIGIN]);
      LLVMBuildStore(b, lane_sum(t, acc[j * TAPS + tap]), at(t, a[LJC_GEMM_C], off));
    }
  }
  ljc_loop_end(ir, &C, NULL, NULL);
}

void ljc_define_taps_wt(ljc_ir *ir, const char *name) {
  taps t = routine_begin(ir, name);
  t.rows = WT_ROWS;
  LLVMValueRef shares = LLVMBuildICmp(t.b, LLVMIntEQ, t.arg[LJC_GEMM_WIN_SY], t.arg[LJC_GEMM_WIN_DY], "");
  LLVMValueRef strided = LLVMBuildICmp(t.b, LLVMIntEQ, t.arg[LJC_GEMM_WIN_SX], i64c(&t, 2), "");
  /* column stride 1, the image's rows shared or not; column stride 2, not */
  for (int version = 0; version < 3; version++) {
    t.cs = version < 2 ? 1 : 2, t.shared = version == 1;
    LLVMValueRef when = version == 2 ? strided
                                     : LLVMBuildAnd(t.b, LLVMBuildNot(t.b, strided, ""),
                                                    version ? shares : LLVMBuildNot(t.b, shares, ""), "");
    LLVMBasicBlockRef after = ljc_if_begin(ir, when, "taps.rows");
    row_runs(&t, wt_tile);
    ljc_if_end(ir, after);
  }
  LLVMBuildRetVoid(t.b);
}
