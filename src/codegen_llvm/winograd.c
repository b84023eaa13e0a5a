/* winograd.c — the f32 GEMM routines for 3×3 and 5×5 convolutions of stride and dilation 1
 * through Winograd's minimal filtering F(m×m, r×r) (Lavin and Gray, "Fast Algorithms for
 * Convolutional Neural Networks", 2015): each m×m tile of outputs from an n×n tile of inputs
 * (n = m + r - 1) in n² products per channel pair instead of r²m². For 3×3: m = 4 (36
 * products for 16 outputs) or m = 5 (49 for 25); for 5×5: m = 2 (36 for 4) or m = 3 (49 for
 * 9, a 4.6th of the GEMM's); whichever takes fewer over the output's tiles (gemm.c's
 * winograd_kind; the edge tiles are computed whole). F(2×2, 5×5) and F(3×3, 5×5) take the
 * points, hence the input transform Bᵀ, of F(4×4, 3×3) and F(5×5, 3×3).
 *
 * For one matrix b (an image), its rows ρ (output channels) and its channels c, C[ρ, (oy, ox)]
 * = Σ_c Σ_{i,j} W[ρ, c, i, j] · x[c, oy - py + i, ox - px + j]. With tiles t of m×m outputs:
 *   U[e][c][ρ] = (G g Gᵀ)[e]   the weight g = W[ρ, c] transformed, G n×r
 *   V[e][t][c] = (Bᵀ d B)[e]   the input tile d (n×n at m·(ty, tx) - (py, px)) transformed
 *   M[e][t][ρ] = Σ_c V[e][t][c] · U[e][c][ρ]   n² products, one per element e of the n×n tile
 *   C tile t   = Aᵀ M[·][t][ρ] A  (m×m)
 * The matrices come from Toom-Cook's construction with the points 0, 1, -1, 2, -2 (and -1/2
 * for n = 7) and infinity (winograd_matrices); each 1-D transform is emitted as additions and
 * fused multiply-adds of its constants, two rows that differ in the signs of some columns
 * (the points p and -p) sharing their partial sums (apply). Three variants (ljc_gemm_routine
 * chooses them when a kernel is lowered) in two routines:
 *   - LJC_GEMM_WINOGRAD, the forward product W·im2col(x);
 *   - LJC_GEMM_WINOGRAD_DX, the input gradient col2im(Wᵀ·dY): the convolution of dY, padded
 *     by r - 1 - p, with the weight flipped and its rows and channels swapped, written straight
 *     into the col2im's output (the kernel does not run the col2im). The forward product's
 *     routine: the calling kernel says where the weight's elements are (the argument block's
 *     W_ fields), and the window's fields describe dY's image (one routine compiled instead
 *     of two: ~120 ms of a process's first compile on one Zen 4 core);
 *   - LJC_GEMM_WINOGRAD_DW, the weight gradient Σ_b im2col(x_b)·dY_bᵀ: with dM the output
 *     transform's adjoint of dY's tiles (A dY Aᵀ), dU[e][c][r] = Σ_{b,t} V[e][t][c]·dM[e][t][r]
 *     and dW = Gᵀ dU G; with BSUM, dY's sums over the batch and positions too (a convolution's
 *     bias gradient, ljc_gemm_b_sum), from the block copies of dY it transforms anyway.
 * The work goes in blocks of at most TB tiles (whole tile rows, or segments of a wide one),
 * MB rows and CB channels, in buffers on the stack that stay in L2: a block's input copied
 * channels last (P: vector loads along the image's rows, transposed in registers; a gather per
 * position for an image whose rows are not contiguous), transformed into V; the products
 * register-blocked like the GEMM's micro-kernel (mr rows × NV vectors, a loop over the n² e);
 * the outputs transformed into a rows-last buffer (Q) and transposed back into C's rows (a
 * row's bias, when there is one, added to M's point (1, 1) first: Aᵀ adds that point to
 * every output, one vector add for m × m outputs). U is the same for every matrix of a
 * convolution: it is kept in the calling kernel's frame (LJC_GEMM_WORK) from one call to the
 * next of a run. Images that are one block of tiles each (7×7: 4 tiles of F(4×4)) go several
 * at a time, their tiles one after another in V and M, up to TG (TG_DW for the weight
 * gradient): a block of U then serves them all, and the products' register tiles run over all
 * their tiles (3×3, 512 channels on 7×7, batch 32, one thread: the forward product 52.0 ->
 * 22.3 ms, the input gradient 53.3 -> 22.1, the weight gradient 25.7–26.0 -> 22.4–23.3).
 *
 * Measured on one Zen 4 core with MNISTNet's conv2 (32 channels in, 64 out, 14×14, batch 64),
 * the GEMM's time → F(2×2, 3×3)'s (16 products per 2×2 tile, this file's first version): the
 * forward product 4.74 → 2.26 ms, the input gradient 4.83 → 2.33, the weight gradient 5.09 →
 * 2.30; F(2×2) → F(4×4) in interleaved runs on a busier machine: 2.74–2.81 → 2.21–2.36 ms,
 * 2.72–2.86 → 2.24–2.41 and 2.81–2.95 → 2.27–2.66 (14×14 outputs take 16 tiles, 576 products
 * a channel pair, against F(2×2)'s 49 tiles and 784); F(4×4) → F(5×5) (9 tiles, 441 products)
 * in winograd_tile. The sums are ordered otherwise than the GEMM's and the transforms round
 * (their points ±2 scale values by up to 8 and 1/24): the results agree with the GEMM's to
 * about 3e-5 of the output's magnitude (F(2×2): a few ulps; F(5×5) as F(4×4), measured
 * against float64 over 32 channels: 3.4e-6 and 3.5e-6 of the largest output), the weight
 * gradient's long sums to about 1e-4 of theirs. LJ_WINOGRAD=0 keeps convolutions in the
 * GEMM. */
#include "codegen_llvm/ir.h"

/* R_MAX: the largest window side r; TN_MAX: the most inputs a tile side (m + r - 1), NE_MAX =
 * TN_MAX² elements; TB
 * tiles, CB channels (CB_DW for the weight gradient, whose products over a block's tiles then
 * run twice as long between loads and stores of dU's register tiles: batch 8, one thread,
 * alternated runs, 128 channels on 28×28 3.96-4.66 -> 3.58-3.63 ms, 256 on 14×14 4.63-4.82 ->
 * 4.26-4.43, 64 on 56×56 and 512 on 7×7 as fast; the forward product at 64 took 5% longer on
 * 128 channels of 28×28), MB rows a block; TG, TG_DW: the most tiles of several images that go
 * together (the weight gradient's fewer: its V, dM and dU, 1.7 MiB for F(5×5) at 64, left L2,
 * MNISTNet's conv2 1.05 -> 1.08–1.20 ms; at 32, 1.01–1.06); UC: the most channels U holds (all of a matrix's when
 * they fit, else one block of CB, transformed again for every matrix: a 128 to 64 channel
 * convolution on 14×14 took 2.4–3.1 ms with UC 64, 1.8–1.9 with 128, one thread; U is then
 * 1.2 MiB of the calling kernel's frame for F(4×4), 1.6 for F(5×5), on threads of 8 MiB
 * stacks); MR_MAX: the most rows of the GEMM's register tile, MR_WIDE a tile's rows over a
 * multiple of MR_WIDE tiles (products); DU_ROWS: the weight gradient's dU rows per element
 * (CB_DW, and room for the last tile of mr). */
enum { R_MAX = 5, TN_MAX = 7, NE_MAX = TN_MAX * TN_MAX };
enum { NV = 2, TB = 16, TG = 64, TG_DW = 32, CB = 32, CB_DW = 64, MB = 64, UC = 128, MR_MAX = 8, MR_WIDE = 9 };
enum { DU_ROWS = CB_DW + MR_MAX };
_Static_assert(TG_DW * CB_DW <= TG * CB, "the weight gradient's V fits the forward product's");
/* The most elements of an image whose copy prefetches the next image (prefetch_ahead). */
enum { PREFETCH_IMAGE_MAX = 128 << 10 };
/* The elements between the buffers' planes of the n² e: a cache line more than a plane holds.
 * At a multiple of 4 KiB the loads or stores of one tile's elements all fall in one L1 set
 * (8 ways): measured, one thread, conv2 at batch 64, the input gradient 3.65 -> 3.35 ms, the
 * weight gradient 3.70 -> 3.1-3.35 ms, the forward product unchanged. */
#define PLANE(n) ((n) + 16)

/* A constant matrix of at most TN_MAX × TN_MAX, row-major. */
typedef struct tmat {
  int rows, cols;
  double a[TN_MAX * TN_MAX];
} tmat;

/* Winograd's matrices for F(m, r) (n = m + r - 1) by Toom-Cook's construction from n - 1 points
 * and the point at infinity: the output's Aᵀ (m × n, Aᵀ[i][j] = p_j^i), the weight's G (n × r,
 * G[j][k] = p_j^k / Π_{l≠j}(p_j - p_l)) and the input's Bᵀ (n × n, row j the coefficients of
 * Π_{l≠j}(x - p_l)); the point at infinity adds a last column to Aᵀ, a last row to G and to
 * Bᵀ (the coefficients of Π_l(x - p_l)). Then y = Aᵀ[(G g) ⊙ (Bᵀ d)] is the correlation of g
 * with d; a and gt hold A and Gᵀ, the adjoints the weight gradient takes. The first point
 * after 0 must be 1: a bias goes in at M's point (1, 1), which Aᵀ adds to every output. */
typedef struct winograd_mats {
  tmat at, a, g, gt, bt;
} winograd_mats;

static void transpose(const tmat *x, tmat *t) {
  t->rows = x->cols, t->cols = x->rows;
  for (int i = 0; i < x->rows; i++)
    for (int j = 0; j < x->cols; j++) t->a[j * t->cols + i] = x->a[i * x->cols + j];
}

static double power(double x, int n) {
  double r = 1;
  while (n-- > 0) r *= x;
  return r;
}

/* The coefficients of Π_{l ≠ skip}(x - p_l) over the n points, lowest first, into c[0..n]. */
static void roots_poly(const double *p, int n, int skip, double *c) {
  int deg = 0;
  c[0] = 1;
  for (int l = 0; l < n; l++) {
    if (l == skip) continue;
    c[deg + 1] = 0;
    for (int i = deg + 1; i > 0; i--) c[i] = c[i - 1] - p[l] * c[i];
    c[0] *= -p[l];
    deg++;
  }
  for (int i = deg + 1; i <= n; i++) c[i] = 0;
}

static void winograd_matrices(int tm, int r, winograd_mats *m) {
  static const double points[TN_MAX - 1] = {0, 1, -1, 2, -2, -0.5};
  int n = tm + r - 1;
  m->at = (tmat){tm, n, {0}}, m->g = (tmat){n, r, {0}}, m->bt = (tmat){n, n, {0}};
  for (int j = 0; j < n - 1; j++) {
    double den = 1, c[TN_MAX];
    for (int l = 0; l < n - 1; l++)
      if (l != j) den *= points[j] - points[l];
    for (int i = 0; i < tm; i++) m->at.a[i * n + j] = power(points[j], i);
    for (int k = 0; k < r; k++) m->g.a[j * r + k] = power(points[j], k) / den;
    roots_poly(points, n - 1, j, c);
    for (int k = 0; k < n - 1; k++) m->bt.a[j * n + k] = c[k];
  }
  m->at.a[(tm - 1) * n + n - 1] = 1;
  m->g.a[(n - 1) * r + r - 1] = 1;
  roots_poly(points, n - 1, -1, m->bt.a + (n - 1) * n);
  transpose(&m->at, &m->a);
  transpose(&m->g, &m->gt);
}

typedef struct wino {
  ljc_ir *ir;
  LLVMBuilderRef b;
  LLVMValueRef arg[LJC_GEMM_NARGS];
  LLVMTypeRef vt, it;        /* f32 and i32 vectors of vw lanes */
  int vw, mr;
  int tm, r, tn, ne;          /* F(tm × tm, r × r): tn = tm + r - 1 inputs a tile side, ne = tn² */
  int cb;                     /* the channels of a block: CB, the weight gradient's CB_DW */
  LLVMValueRef u, v, m;      /* U [n²][UC][MB] (the weight gradient's dU [n²][DU_ROWS][MB]),
                                V [n²][TG·CB / cb][cb], M [n²][TG][MB] (dM), each plane PLANE apart */
  LLVMValueRef u_m0, u_rows; /* i64 cells: the first row and the count of rows U holds */
  LLVMValueRef bi, m0, crow0, len;
  LLVMValueRef p, q;          /* the block's input channels last (P) and outputs rows last (Q) */
  LLVMValueRef ws;            /* the weight's block of CB channels rows last (weights) */
  LLVMValueRef oh, ow, th, tw; /* the output's size and its tiles' */
  LLVMValueRef nrb, nseg, rows_per, cols_per; /* the blocks of tiles (matrix) */
  /* the weight of row ρ, channel c, tap t (r·i + j) is A's element w_origin + ρ·w_row +
   * c·w_chan + t·w_tap of each matrix (the argument block's W_ fields) */
  LLVMValueRef w_origin, w_row, w_chan, w_tap;
  winograd_mats mats;
} wino;

static LLVMValueRef i64c(wino *w, int64_t v) { return ljc_i64(w->ir, v); }
static LLVMValueRef add(wino *w, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildNSWAdd(w->b, x, y, ""); }
static LLVMValueRef sub(wino *w, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildNSWSub(w->b, x, y, ""); }
static LLVMValueRef mul(wino *w, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildNSWMul(w->b, x, y, ""); }
static LLVMValueRef addc(wino *w, LLVMValueRef x, int64_t v) { return v ? add(w, x, i64c(w, v)) : x; }
static LLVMValueRef mulc(wino *w, LLVMValueRef x, int64_t v) { return mul(w, x, i64c(w, v)); }
static LLVMValueRef smin(wino *w, LLVMValueRef x, LLVMValueRef y) { return ljc_intrinsic2(w->ir, "smin", x, y); }
static LLVMValueRef fadd(wino *w, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildFAdd(w->b, x, y, ""); }
static LLVMValueRef fsub(wino *w, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildFSub(w->b, x, y, ""); }
static LLVMValueRef lt(wino *w, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildICmp(w->b, LLVMIntSLT, x, y, ""); }

static LLVMValueRef at(wino *w, LLVMValueRef base, LLVMValueRef off) {
  return LLVMBuildInBoundsGEP2(w->b, w->ir->f32, base, &off, 1, "");
}

/* Element [e][i][j] of a stack buffer of rows of `row` elements, `rows` rows per e. */
static LLVMValueRef buf_at(wino *w, LLVMValueRef buf, int e, int64_t rows, int64_t row, LLVMValueRef i,
                           LLVMValueRef j) {
  return at(w, buf, add(w, addc(w, mulc(w, i, row), (int64_t)e * PLANE(rows * row)), j));
}

static LLVMValueRef splat(wino *w, LLVMValueRef x, LLVMTypeRef vt) { return ljc_splat(w->ir, x, vt); }

/* An i64 value splat as i32 lanes (ljc_gemm_routine keeps the offsets within i32). */
static LLVMValueRef splat32(wino *w, LLVMValueRef x) {
  return splat(w, LLVMBuildTrunc(w->b, x, w->ir->i32, ""), w->it);
}

/* The i32 vector (x, x + 1, ..., x + vw - 1) for an i64 x. */
static LLVMValueRef lanes_from(wino *w, LLVMValueRef x) {
  LLVMValueRef l[64];
  for (int i = 0; i < w->vw; i++) l[i] = ljc_const_i(w->ir->i32, i);
  return LLVMBuildAdd(w->b, splat32(w, x), LLVMConstVector(l, (unsigned)w->vw), "");
}

/* The vector of f32 elements at base + idx[l] (i32 offsets) where mask, else 0. */
static LLVMValueRef gather(wino *w, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef mask) {
  LLVMValueRef ptrs = LLVMBuildInBoundsGEP2(w->b, w->ir->f32, base, &idx, 1, "");
  LLVMTypeRef types[2] = {w->vt, LLVMVectorType(w->ir->ptr, (unsigned)w->vw)};
  LLVMValueRef args[4] = {ptrs, ljc_const_i(w->ir->i32, 4), mask, LLVMConstNull(w->vt)};
  return ljc_intrinsic_over(w->ir, "masked.gather", 2, types, 4, args);
}

static LLVMValueRef vload(wino *w, LLVMValueRef p) {
  LLVMValueRef x = LLVMBuildLoad2(w->b, w->vt, p, "");
  LLVMSetAlignment(x, 4);
  return x;
}

static void vstore(wino *w, LLVMValueRef x, LLVMValueRef p) { LLVMSetAlignment(LLVMBuildStore(w->b, x, p), 4); }

/* The vector at p, its lanes where mask (0 elsewhere: those are not read). */
static LLVMValueRef masked_load(wino *w, LLVMValueRef p, LLVMValueRef mask) {
  return ljc_masked_load(w->ir, w->vt, p, 4, mask);
}

static LLVMValueRef fmul(wino *w, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildFMul(w->b, x, y, ""); }
static LLVMValueRef fk(LLVMValueRef like, double v) { return ljc_fconst_like(like, v); }


/* ---- the transforms ------------------------------------------------------------------------ */

/* Σ_j c_j·x_j over the columns j of `use` (c_j nonzero), signs folded into adds and
 * subtractions, other factors into fused multiply-adds. */
static LLVMValueRef combination(wino *w, const double *c, const bool *use, const LLVMValueRef *x, int n) {
  LLVMValueRef s = NULL;
  for (int pass = 0; pass < 2; pass++) /* a term with factor 1 first, when there is one */
    for (int j = 0; j < n; j++) {
      if (!use[j] || (pass == 0) != (c[j] == 1)) continue;
      if (!s) s = c[j] == 1 ? x[j] : fmul(w, x[j], fk(x[j], c[j]));
      else if (c[j] == 1) s = fadd(w, s, x[j]);
      else if (c[j] == -1) s = fsub(w, s, x[j]);
      else s = ljc_fmuladd(w->ir, fk(x[j], c[j]), x[j], s);
    }
  return s ? s : LLVMConstNull(LLVMTypeOf(x[0]));
}

/* o = T·x. Two rows equal up to the sign of some columns (the points p and -p of Aᵀ, Bᵀ, G)
 * share their two partial sums: the columns of equal sign S and of opposite sign D, o = S + D
 * and o' = S - D. */
static void apply(wino *w, const tmat *t, LLVMValueRef *o, const LLVMValueRef *x) {
  bool done[TN_MAX] = {false};
  int n = t->cols;
  for (int i = 0; i < t->rows; i++) {
    if (done[i]) continue;
    const double *r = t->a + i * n;
    bool same[TN_MAX], opposite[TN_MAX], all[TN_MAX];
    int pair = -1;
    for (int i2 = i + 1; i2 < t->rows && pair < 0; i2++) {
      const double *r2 = t->a + i2 * n;
      bool fits = !done[i2], any_same = false, any_opposite = false;
      for (int j = 0; j < n; j++) {
        same[j] = r[j] != 0 && r2[j] == r[j];
        opposite[j] = r[j] != 0 && r2[j] == -r[j];
        fits &= (r[j] == 0 && r2[j] == 0) || same[j] || opposite[j];
        any_same |= same[j], any_opposite |= opposite[j];
      }
      if (fits && any_same && any_opposite) pair = i2;
    }
    if (pair < 0) {
      for (int j = 0; j < n; j++) all[j] = r[j] != 0;
      o[i] = combination(w, r, all, x, n);
      continue;
    }
    LLVMValueRef s = combination(w, r, same, x, n), d = combination(w, r, opposite, x, n);
    o[i] = fadd(w, s, d), o[pair] = fsub(w, s, d);
    done[pair] = true;
  }
}

/* The 2-D transform T·x·Tᵀ of the n_in × n_in tile x (row-major) into the n_out × n_out tile
 * o: T down each column, then along each row. */
static void transform_2d(wino *w, const tmat *t, const LLVMValueRef *x, LLVMValueRef *o) {
  LLVMValueRef tmp[TN_MAX][TN_MAX], in[TN_MAX], out[TN_MAX];
  int n_in = t->cols, n_out = t->rows;
  for (int j = 0; j < n_in; j++) {
    for (int i = 0; i < n_in; i++) in[i] = x[i * n_in + j];
    apply(w, t, out, in);
    for (int i = 0; i < n_out; i++) tmp[i][j] = out[i];
  }
  for (int i = 0; i < n_out; i++) apply(w, t, o + i * n_out, tmp[i]);
}

/* A block of tiles: tile rows ty0 .. ty0 + nr - 1 by tile columns tx0 .. tx0 + nc - 1, count
 * = nr·nc tiles numbered r·nc + c. */
typedef struct tblock {
  LLVMValueRef ty0, tx0, nr, nc, count;
} tblock;

/* Block (rb, cs) of the tiles (the grid ljc_define_winograd sets up). */
static tblock tile_block(wino *w, LLVMValueRef rb, LLVMValueRef cs) {
  tblock tb;
  tb.ty0 = mul(w, rb, w->rows_per), tb.tx0 = mul(w, cs, w->cols_per);
  tb.nr = smin(w, w->rows_per, sub(w, w->th, tb.ty0)), tb.nc = smin(w, w->cols_per, sub(w, w->tw, tb.tx0));
  tb.count = mul(w, tb.nr, tb.nc);
  return tb;
}

bool ljc_winograd_rows_outer(int tm, int64_t oh, int64_t ow, int64_t rows) {
  int64_t th = (oh + tm - 1) / tm, tw = (ow + tm - 1) / tm; /* one block: one segment, one row block */
  return tw <= TB && th <= TB / tw && TG / (th * tw) > 1 && rows > MB;
}

/* How many images go together, up to cap tiles: those that are one block of tiles each (the
 * grid ljc_define_winograd sets up), else 1. */
static LLVMValueRef images_together(wino *w, int64_t cap) {
  LLVMValueRef one_block = LLVMBuildICmp(w->b, LLVMIntEQ, mul(w, w->nrb, w->nseg), i64c(w, 1), "");
  return LLVMBuildSelect(w->b, one_block, LLVMBuildSDiv(w->b, i64c(w, cap), mul(w, w->th, w->tw), ""), i64c(w, 1), "");
}

/* The vw-channel vectors of a block of clen channels. */
static LLVMValueRef channel_vectors(wino *w, LLVMValueRef clen) {
  return LLVMBuildSDiv(w->b, addc(w, clen, w->vw - 1), i64c(w, w->vw), "");
}

/* An image of one matrix: element (c, y, x) at base + c·sc + y·sh + x·sw, h × wd positions;
 * what lies `next` elements on is prefetched into L2 while this is read (prefetch_ahead:
 * mostly the next matrix's image; the loads of the copy to channels last waited on L3 without
 * it: measured on MNISTNet's conv2 at batch 64, fastest of 200 runs, one thread, the weight
 * gradient 2.41-2.60 -> 1.92-2.05 ms, the input gradient 2.27-2.43 -> 2.10-2.22, the forward
 * product 2.28-2.32 -> 2.18-2.26). */
typedef struct image {
  LLVMValueRef base, sc, sh, sw, h, wd, next;
} image;

/* The elements from an image's element to the one the copy to channels last prefetches with
 * it (image.next), for images sb elements apart, rows sh: the next image's, or, for an image
 * of more than one block of tiles and over PREFETCH_IMAGE_MAX elements, two blocks' rows on in
 * the same image, whose next image would not stay in L2 beside it and U. 64 channels of 56×56
 * (800 KB), one thread, fastest of 70 runs, five alternated pairs: forward 3.84-4.22 ->
 * 3.62-3.83 ms, input gradient 3.88-4.23 -> 3.55-3.88, weight gradient 4.51-4.99 -> 4.20-4.31;
 * 128 channels of 28×28 (400 KB) as fast or slower that way, so they keep the next image. */
static LLVMValueRef prefetch_ahead(wino *w, LLVMValueRef sb, LLVMValueRef sh) {
  LLVMBuilderRef b = w->b;
  LLVMValueRef blocks = LLVMBuildICmp(b, LLVMIntSGT, mul(w, w->nrb, w->nseg), i64c(w, 1), "");
  LLVMValueRef big = LLVMBuildAnd(b, blocks, LLVMBuildICmp(b, LLVMIntSGT, sb, i64c(w, PREFETCH_IMAGE_MAX), ""), "");
  return LLVMBuildSelect(b, big, mul(w, sh, mulc(w, w->rows_per, 2 * w->tm)), sb, "");
}

/* The image operand B of a convolution (or A, im2col of the weight gradient's) for matrix bi. */
static image operand_image(wino *w, int operand, LLVMValueRef bi) {
  const LLVMValueRef *a = w->arg;
  LLVMValueRef base = at(w, a[operand], mul(w, bi, a[operand + 1]));
  return (image){base, a[LJC_GEMM_IMG_SC], a[LJC_GEMM_IMG_SH], a[LJC_GEMM_IMG_SW], a[LJC_GEMM_IMG_H], a[LJC_GEMM_IMG_W],
                 prefetch_ahead(w, a[operand + 1], a[LJC_GEMM_IMG_SH])};
}

/* A square of channels_last: the vw channels' elements from ch on (a channel's plane sc on
 * from the one before) at the lanes of xin, zeros for the channels from `left` on (NULL:
 * none), transposed into dst, dst + run, ... (vw positions). Where all vw channels are read,
 * the masks are xin's: working out each channel's took a compare, a select and a mask move a
 * channel besides its multiply. */
static void square(wino *w, const image *im, LLVMValueRef ch, LLVMValueRef xin, LLVMValueRef left, LLVMValueRef dst,
                   int64_t run) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  LLVMValueRef v[64];
  LLVMValueRef rows = left ? LLVMBuildICmp(b, LLVMIntSLT, lanes_from(w, i64c(w, 0)), splat32(w, left), "") : NULL;
  for (int i = 0; i < w->vw; i++) {
    LLVMValueRef mask = xin;
    if (rows)
      mask = LLVMBuildAnd(b, xin, splat(w, LLVMBuildExtractElement(b, rows, ljc_const_i(ir->i32, i), ""),
                                       LLVMTypeOf(xin)), "");
    v[i] = masked_load(w, ch, mask);
    ljc_prefetch(ir, LLVMBuildGEP2(b, ir->f32, ch, (LLVMValueRef[]){im->next}, 1, ""));
    ch = LLVMBuildGEP2(b, ir->f32, ch, (LLVMValueRef[]){im->sc}, 1, "");
  }
  ljc_transpose(ir, w->vw, v);
  for (int i = 0; i < w->vw; i++) vstore(w, v[i], at(w, dst, i64c(w, (int64_t)i * run)));
}

/* dst[(Y·cols + X)·run + c] = the image's (c0 + c, y0 + Y, x0 + X) for Y < rows, X < cols and c
 * < clen rounded up to vw, channels last: zeros outside the image and past clen. From an image
 * whose rows are contiguous (sw 1): vw channels × vw positions at a time, loaded along the
 * rows and transposed in registers (a row's last square may write up to vw - 1 positions
 * past the row: the next row overwrites them, the buffers have room past their last); else a
 * gather of vw channels a position. */
static void channels_last(wino *w, const image *im, LLVMValueRef y0, LLVMValueRef x0, LLVMValueRef rows,
                          LLVMValueRef cols, LLVMValueRef c0, LLVMValueRef clen, LLVMValueRef dst, int64_t run) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  LLVMTypeRef mvt = LLVMVectorType(ir->i1, (unsigned)w->vw);
  LLVMValueRef rows_contiguous = LLVMBuildICmp(b, LLVMIntEQ, im->sw, i64c(w, 1), "");
  ljc_loop Y, X, Cv;
  ljc_loop_begin(ir, &Y, i64c(w, 0), rows, false, 0, NULL);
  LLVMValueRef y = add(w, y0, Y.iv);
  LLVMValueRef yin = LLVMBuildICmp(b, LLVMIntULT, y, im->h, "");
  LLVMValueRef drow = at(w, dst, mulc(w, mul(w, Y.iv, cols), run));
  /* rows contiguous: squares of vw channels × vw positions */
  LLVMBasicBlockRef after = ljc_if_begin(ir, rows_contiguous, "wino.rows");
  ljc_loop_begin_step(ir, &X, i64c(w, 0), mulc(w, channel_vectors(w, cols), w->vw), w->vw, false, 0, NULL);
  LLVMValueRef xs = lanes_from(w, add(w, x0, X.iv));
  LLVMValueRef xin = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, xs, LLVMConstNull(w->it), ""),
                                  LLVMBuildICmp(b, LLVMIntSLT, xs, splat32(w, im->wd), ""), "");
  xin = LLVMBuildAnd(b, xin, splat(w, yin, mvt), "");
  LLVMValueRef first = add(w, mul(w, y, im->sh), add(w, x0, X.iv)); /* may lie before the image: no inbounds */
  LLVMValueRef row = LLVMBuildGEP2(b, ir->f32, im->base, &first, 1, "");
  /* a square all outside the image (padding, or the columns past a row's last tile's) is zeros */
  LLVMTypeRef lanes_int = LLVMIntTypeInContext(ir->ctx, (unsigned)w->vw);
  LLVMValueRef touches =
      LLVMBuildICmp(b, LLVMIntNE, LLVMBuildBitCast(b, xin, lanes_int, ""), LLVMConstNull(lanes_int), "");
  ljc_loop_begin(ir, &Cv, i64c(w, 0), channel_vectors(w, clen), false, 0, NULL);
  LLVMValueRef c = mulc(w, Cv.iv, w->vw);
  LLVMBasicBlockRef inside = ljc_if_begin(ir, touches, "wino.square");
  LLVMValueRef ch = LLVMBuildGEP2(b, ir->f32, row, (LLVMValueRef[]){mul(w, add(w, c0, c), im->sc)}, 1, "");
  LLVMValueRef whole = LLVMBuildICmp(b, LLVMIntSLE, addc(w, c, w->vw), clen, "");
  LLVMBasicBlockRef done = ljc_if_begin(ir, whole, "wino.whole");
  square(w, im, ch, xin, NULL, at(w, drow, add(w, mulc(w, X.iv, run), c)), run);
  ljc_if_end(ir, done);
  done = ljc_if_begin(ir, LLVMBuildNot(b, whole, ""), "wino.part");
  square(w, im, ch, xin, LLVMBuildSub(b, clen, c, ""), at(w, drow, add(w, mulc(w, X.iv, run), c)), run);
  ljc_if_end(ir, done);
  ljc_if_end(ir, inside);
  LLVMBasicBlockRef outside = ljc_if_begin(ir, LLVMBuildNot(b, touches, ""), "wino.zeros");
  for (int i = 0; i < w->vw; i++)
    vstore(w, LLVMConstNull(w->vt), at(w, drow, add(w, mulc(w, addc(w, X.iv, i), run), c)));
  ljc_if_end(ir, outside);
  ljc_loop_end(ir, &Cv, NULL, NULL);
  ljc_loop_end(ir, &X, NULL, NULL);
  ljc_if_end(ir, after);
  /* else: a gather of vw channels a position */
  after = ljc_if_begin(ir, LLVMBuildNot(b, rows_contiguous, ""), "wino.gather");
  ljc_loop_begin(ir, &X, i64c(w, 0), cols, false, 0, NULL);
  LLVMValueRef x = add(w, x0, X.iv);
  LLVMValueRef in = LLVMBuildAnd(b, yin, LLVMBuildICmp(b, LLVMIntULT, x, im->wd, ""), "");
  LLVMValueRef off = splat32(w, LLVMBuildSelect(b, in, add(w, mul(w, y, im->sh), mul(w, x, im->sw)), i64c(w, 0), ""));
  LLVMValueRef pos = at(w, drow, mulc(w, X.iv, run));
  ljc_loop_begin(ir, &Cv, i64c(w, 0), channel_vectors(w, clen), false, 0, NULL);
  LLVMValueRef cg = mulc(w, Cv.iv, w->vw), lanes = lanes_from(w, cg);
  LLVMValueRef mask = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLT, lanes, splat32(w, clen), ""), splat(w, in, mvt), "");
  LLVMValueRef chan = LLVMBuildMul(b, LLVMBuildAdd(b, lanes, splat32(w, c0), ""), splat32(w, im->sc), "");
  vstore(w, gather(w, im->base, LLVMBuildAdd(b, chan, off, ""), mask), at(w, pos, cg));
  ljc_loop_end(ir, &Cv, NULL, NULL);
  ljc_loop_end(ir, &X, NULL, NULL);
  ljc_if_end(ir, after);
  ljc_loop_end(ir, &Y, NULL, NULL);
}

/* Transforms the weight's r × r taps g (vectors of vw rows) into U's row c, rows mv on. */
static void weight_vectors(wino *w, LLVMValueRef *g, LLVMValueRef c, LLVMValueRef mv) {
  LLVMValueRef u[NE_MAX];
  transform_2d(w, &w->mats.g, g, u);
  for (int e = 0; e < w->ne; e++) vstore(w, u[e], buf_at(w, w->u, e, UC, MB, c, mv));
}

/* U for rows mb0 .. mb0 + mwide - 1 of the call's rows (those past `mlen` repeat the last, or
 * are zeros: their products are never stored) and channels cb0 .. cb0 + clen - 1, at U's
 * channels from 0. When a row's taps of a channel lie one after another (forward, or
 * backward: the input gradient's flipped weight), CB channels at a time are copied rows last
 * by loads along the taps, transposed in registers (channels_last): one row of all the
 * channels' taps where they run on from one channel to the next (the forward product's
 * weight [ρ, c·r² + t]), else a row of r² taps a channel; then read from there a vector of vw
 * rows at a time. A gather of vw rows touched a page a lane where the rows are C·r² elements
 * apart (256 channels on 14×14, batch 32, one thread, the forward product 16.7–17.0 ->
 * 15.2–15.7 ms in alternated runs; 512 on 7×7, the input gradient 18.8–19.5 -> 17.5–17.7);
 * otherwise it is what the weights take. */
static void weights(wino *w, LLVMValueRef mb0, LLVMValueRef mlen, LLVMValueRef mwide, LLVMValueRef cb0,
                    LLVMValueRef clen) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  const LLVMValueRef *a = w->arg;
  LLVMValueRef rows = at(w, a[LJC_GEMM_A], add(w, add(w, mul(w, w->bi, a[LJC_GEMM_A_SB]), w->w_origin),
                                                mul(w, add(w, w->m0, mb0), w->w_row)));
  int64_t taps = (int64_t)w->r * w->r;
  LLVMValueRef flip = LLVMBuildICmp(b, LLVMIntEQ, w->w_tap, i64c(w, -1), "");
  LLVMValueRef along = LLVMBuildOr(b, flip, LLVMBuildICmp(b, LLVMIntEQ, w->w_tap, i64c(w, 1), ""), "");
  LLVMValueRef flat =
      LLVMBuildAnd(b, LLVMBuildNot(b, flip, ""), LLVMBuildICmp(b, LLVMIntEQ, w->w_chan, i64c(w, taps), ""), "");
  ljc_loop Ch, Cl, Mv;
  LLVMBasicBlockRef after = ljc_if_begin(ir, along, "wino.weights_along");
  /* the first tap as the weight lies (the last one read, flipped) */
  LLVMValueRef first_tap = LLVMBuildSelect(b, flip, i64c(w, 1 - taps), i64c(w, 0), "");
  LLVMValueRef tap0 = LLVMBuildGEP2(b, ir->f32, rows, &first_tap, 1, "");
  ljc_loop_begin_step(ir, &Ch, i64c(w, 0), clen, CB, false, 0, NULL);
  LLVMValueRef cl = smin(w, i64c(w, CB), sub(w, clen, Ch.iv)), c0 = add(w, cb0, Ch.iv);
  LLVMValueRef sel_h = LLVMBuildSelect(b, flat, i64c(w, 1), add(w, c0, cl), "");
  LLVMValueRef sel_w = LLVMBuildSelect(b, flat, mulc(w, add(w, c0, cl), taps), i64c(w, taps), "");
  image im = {tap0, w->w_row, w->w_chan, i64c(w, 1), sel_h, sel_w, i64c(w, 0)};
  channels_last(w, &im, LLVMBuildSelect(b, flat, i64c(w, 0), c0, ""),
                LLVMBuildSelect(b, flat, mulc(w, c0, taps), i64c(w, 0), ""), LLVMBuildSelect(b, flat, i64c(w, 1), cl, ""),
                LLVMBuildSelect(b, flat, mulc(w, cl, taps), i64c(w, taps), ""),
                i64c(w, 0), mlen, w->ws, MB);
  ljc_loop_begin(ir, &Cl, i64c(w, 0), cl, false, 0, NULL);
  ljc_loop_begin_step(ir, &Mv, i64c(w, 0), mwide, w->vw, false, 0, NULL);
  LLVMValueRef g[R_MAX * R_MAX];
  for (int i = 0; i < taps; i++) {
    LLVMValueRef t = LLVMBuildSelect(b, flip, i64c(w, taps - 1 - i), i64c(w, i), "");
    g[i] = vload(w, at(w, w->ws, add(w, mul(w, add(w, mulc(w, Cl.iv, taps), t), i64c(w, MB)), Mv.iv)));
  }
  weight_vectors(w, g, add(w, Ch.iv, Cl.iv), Mv.iv);
  ljc_loop_end(ir, &Mv, NULL, NULL);
  ljc_loop_end(ir, &Cl, NULL, NULL);
  ljc_loop_end(ir, &Ch, NULL, NULL);
  ljc_if_end(ir, after);
  after = ljc_if_begin(ir, LLVMBuildNot(b, along, ""), "wino.weights_gather");
  LLVMValueRef all = LLVMConstAllOnes(LLVMVectorType(ir->i1, (unsigned)w->vw));
  ljc_loop_begin(ir, &Cl, i64c(w, 0), clen, false, 0, NULL);
  LLVMValueRef k0g = at(w, rows, mul(w, add(w, cb0, Cl.iv), w->w_chan));
  ljc_loop_begin_step(ir, &Mv, i64c(w, 0), mwide, w->vw, false, 0, NULL);
  LLVMValueRef m = ljc_intrinsic2(ir, "smin", lanes_from(w, Mv.iv), splat32(w, addc(w, mlen, -1)));
  LLVMValueRef idx = LLVMBuildMul(b, m, splat32(w, w->w_row), "");
  for (int i = 0; i < taps; i++) g[i] = gather(w, at(w, k0g, mulc(w, w->w_tap, i)), idx, all);
  weight_vectors(w, g, Cl.iv, Mv.iv);
  ljc_loop_end(ir, &Mv, NULL, NULL);
  ljc_loop_end(ir, &Cl, NULL, NULL);
  ljc_if_end(ir, after);
}

/* P: the block's input tiles' positions, rows m·ty0 - py .. m·(ty0 + nr) - py + r - 2 and
 * columns likewise, channels cb0 .. cb0 + clen - 1 a run of cb each. */
static void gather_block(wino *w, const image *im, const tblock *tb, LLVMValueRef cb0, LLVMValueRef clen) {
  const LLVMValueRef *a = w->arg;
  LLVMValueRef y0 = sub(w, mulc(w, tb->ty0, w->tm), a[LJC_GEMM_WIN_PY]);
  LLVMValueRef x0 = sub(w, mulc(w, tb->tx0, w->tm), a[LJC_GEMM_WIN_PX]);
  LLVMValueRef rows = addc(w, mulc(w, tb->nr, w->tm), w->r - 1), cols = addc(w, mulc(w, tb->nc, w->tm), w->r - 1);
  channels_last(w, im, y0, x0, rows, cols, cb0, clen, w->p, w->cb);
}

/* V for the block's tiles and clen channels, from P by vector loads, at V's tiles from t0. */
static void inputs(wino *w, const tblock *tb, LLVMValueRef clen, LLVMValueRef t0) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  LLVMValueRef pw = addc(w, mulc(w, tb->nc, w->tm), w->r - 1);
  ljc_loop T, Cv;
  ljc_loop_begin(ir, &T, i64c(w, 0), tb->count, false, 0, NULL);
  LLVMValueRef r = LLVMBuildSDiv(b, T.iv, tb->nc, ""), c = LLVMBuildSRem(b, T.iv, tb->nc, "");
  LLVMValueRef rows[TN_MAX];
  for (int i = 0; i < w->tn; i++) {
    LLVMValueRef pos = add(w, mul(w, addc(w, mulc(w, r, w->tm), i), pw), mulc(w, c, w->tm));
    rows[i] = at(w, w->p, mulc(w, pos, w->cb));
  }
  ljc_loop_begin(ir, &Cv, i64c(w, 0), channel_vectors(w, clen), false, 0, NULL);
  LLVMValueRef cv = mulc(w, Cv.iv, w->vw);
  LLVMValueRef d[NE_MAX], o[NE_MAX];
  for (int i = 0; i < w->tn; i++)
    for (int j = 0; j < w->tn; j++) d[i * w->tn + j] = vload(w, at(w, rows[i], addc(w, cv, (int64_t)j * w->cb)));
  transform_2d(w, &w->mats.bt, d, o);
  for (int e = 0; e < w->ne; e++) vstore(w, o[e], buf_at(w, w->v, e, TG * CB / w->cb, w->cb, add(w, t0, T.iv), cv));
  ljc_loop_end(ir, &Cv, NULL, NULL);
  ljc_loop_end(ir, &T, NULL, NULL);
}

/* Adds to acc[0 .. mr·nv) the products of k = lo .. hi - 1 in order, the a element broadcast
 * (register_tile's sums). */
static void tile_sums(wino *w, int mr, int nv, LLVMValueRef *acc, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef a,
                      int64_t a_row, int64_t a_step, LLVMValueRef bp, int64_t b_step) {
  ljc_ir *ir = w->ir;
  int nacc = mr * nv;
  LLVMValueRef next[MR_WIDE * NV], bv[MR_WIDE * NV];
  ljc_loop K;
  ljc_loop_begin(ir, &K, lo, hi, true, nacc, acc);
  LLVMValueRef brow = at(w, bp, mulc(w, K.iv, b_step)), arow = at(w, a, mulc(w, K.iv, a_step));
  for (int j = 0; j < nv; j++) bv[j] = vload(w, at(w, brow, i64c(w, (int64_t)j * w->vw)));
  for (int r = 0; r < mr; r++) {
    LLVMValueRef s = splat(w, LLVMBuildLoad2(w->b, ir->f32, at(w, arow, i64c(w, r * a_row)), ""), w->vt);
    for (int j = 0; j < nv; j++) next[r * nv + j] = ljc_fmuladd(ir, s, bv[j], K.acc[r * nv + j]);
  }
  ljc_loop_end(ir, &K, next, acc);
}

/* A register tile: the mr rows of nv vectors at row[r] (mr·nv <= MR_WIDE·NV) become (first ? 0 :
 * what they hold; first NULL: what they hold) + Σ_{k<n} a[r·a_row + k·a_step] · (the nv
 * vectors at b + k·b_step), the a element broadcast, each sum in the order of k whatever the
 * tile's shape: which tile an output falls in (the images a call groups, so the thread count)
 * does not change its bits. */
static void register_tile(wino *w, int mr, int nv, const LLVMValueRef *row, LLVMValueRef first, LLVMValueRef n,
                          LLVMValueRef a, int64_t a_row, int64_t a_step, LLVMValueRef bp, int64_t b_step) {
  LLVMValueRef acc[MR_WIDE * NV];
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nv; j++) {
      LLVMValueRef held = vload(w, at(w, row[r], i64c(w, (int64_t)j * w->vw)));
      acc[r * nv + j] = first ? LLVMBuildSelect(w->b, first, LLVMConstNull(w->vt), held, "") : held;
    }
  tile_sums(w, mr, nv, acc, i64c(w, 0), n, a, a_row, a_step, bp, b_step);
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nv; j++) vstore(w, acc[r * nv + j], at(w, row[r], i64c(w, (int64_t)j * w->vw)));
}

/* M[e] (m) for the tiles t0 .. t0 + mr - 1 and the rows mv .. mv + nv·vw - 1 of C: V[e] (v) ·
 * U[e] (u, at the call's first row) over clen channels. */
static void product_tile(wino *w, int mr, int nv, LLVMValueRef t0, LLVMValueRef mv, LLVMValueRef m, LLVMValueRef v,
                         LLVMValueRef u, LLVMValueRef clen, LLVMValueRef first) {
  LLVMValueRef row[MR_WIDE];
  for (int r = 0; r < mr; r++) row[r] = at(w, m, add(w, mulc(w, addc(w, t0, r), MB), mv));
  register_tile(w, mr, nv, row, first, clen, at(w, v, mulc(w, t0, w->cb)), w->cb, 1, at(w, u, mv), MB);
}

/* product_tile for the rows lo .. hi - 1 (multiples of NV·vw), nv vectors at a time, then NV. */
static void product_rows(wino *w, int mr, int nv, LLVMValueRef t0, LLVMValueRef hi, LLVMValueRef m, LLVMValueRef v,
                         LLVMValueRef u, LLVMValueRef clen, LLVMValueRef first) {
  ljc_ir *ir = w->ir;
  int64_t step = (int64_t)nv * w->vw;
  LLVMValueRef mid = mulc(w, LLVMBuildSDiv(w->b, hi, i64c(w, step), ""), step);
  ljc_loop Mv;
  ljc_loop_begin_step(ir, &Mv, i64c(w, 0), mid, step, true, 0, NULL);
  product_tile(w, mr, nv, t0, Mv.iv, m, v, u, clen, first);
  ljc_loop_end(ir, &Mv, NULL, NULL);
  if (nv == NV) return;
  ljc_loop_begin_step(ir, &Mv, mid, hi, NV * w->vw, true, 0, NULL);
  product_tile(w, mr, NV, t0, Mv.iv, m, v, u, clen, first);
  ljc_loop_end(ir, &Mv, NULL, NULL);
}

/* M[e] for the block's count tiles and mwide rows: V[e] · U[e] over the block's clen channels
 * (U's from uc0), added to what M holds unless `first`; e a loop over the n² elements (the
 * routine compiles one product nest). The tiles go mr at a time, the last count mod mr in
 * register tiles of 4, 2 and 1 rows, a tile of fewer than 4 rows over more of the rows of C
 * (4 / rows times NV vectors, as MB allows): with fewer independent sums than the FMA's
 * latency takes to hide, its loop over k ran at a quarter of the FMA's rate (the 1-row tile
 * of MNISTNet's conv2 took as long as half the 8-row tile's). A multiple of 9 tiles, with 32
 * vector registers, goes 9 at a time instead (18 sums, two vectors of U and a broadcast): an
 * image of 14×14 is 9 tiles of F(5×5), which a fused epilogue's blocks of one image each
 * took as 8 and 1 (MNISTNet's conv2 forward with its relu and max-pool at batch 64, fastest
 * of 300 runs, five alternated pairs: one thread 1.08-1.17 -> 1.04-1.07 ms, two 0.58-0.69 ->
 * 0.55-0.62; 7 images together, 63 tiles, as fast either way). */
static void products(wino *w, LLVMValueRef count, LLVMValueRef mwide, LLVMValueRef clen, LLVMValueRef uc0,
                     LLVMValueRef first) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  LLVMValueRef whole = mulc(w, LLVMBuildSDiv(b, count, i64c(w, w->mr), ""), w->mr), rest = sub(w, count, whole);
  bool wide = w->mr == MR_MAX; /* 32 vector registers */
  LLVMValueRef nines = wide ? LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildSRem(b, count, i64c(w, MR_WIDE), ""), i64c(w, 0), "")
                            : LLVMConstInt(ir->i1, 0, 0);
  ljc_loop E, Tr;
  ljc_loop_begin(ir, &E, i64c(w, 0), i64c(w, w->ne), false, 0, NULL);
  LLVMValueRef u = at(w, w->u, add(w, mulc(w, E.iv, PLANE(UC * MB)), mulc(w, uc0, MB)));
  LLVMValueRef v = at(w, w->v, mulc(w, E.iv, PLANE(TG * CB))), m = at(w, w->m, mulc(w, E.iv, PLANE(TG * MB)));
  if (wide) {
    LLVMBasicBlockRef after = ljc_if_begin(ir, nines, "wino.nines");
    ljc_loop_begin_step(ir, &Tr, i64c(w, 0), count, MR_WIDE, true, 0, NULL);
    product_rows(w, MR_WIDE, NV, Tr.iv, mwide, m, v, u, clen, first);
    ljc_loop_end(ir, &Tr, NULL, NULL);
    ljc_if_end(ir, after);
  }
  LLVMBasicBlockRef by_mr = ljc_if_begin(ir, LLVMBuildNot(b, nines, ""), "wino.by_mr");
  ljc_loop_begin_step(ir, &Tr, i64c(w, 0), whole, w->mr, true, 0, NULL);
  product_rows(w, w->mr, NV, Tr.iv, mwide, m, v, u, clen, first);
  ljc_loop_end(ir, &Tr, NULL, NULL);
  for (int part = 4; part >= 1; part /= 2) {
    if (part >= w->mr) continue;
    int nv = part >= 4 ? NV : NV * 4 / part;
    if (nv > MB / w->vw) nv = MB / w->vw;
    LLVMValueRef has = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, rest, i64c(w, part), ""), i64c(w, 0), "");
    LLVMBasicBlockRef after = ljc_if_begin(ir, has, "wino.rest");
    LLVMValueRef t0 = add(w, whole, LLVMBuildAnd(b, rest, i64c(w, ~(int64_t)(2 * part - 1)), ""));
    product_rows(w, part, nv, t0, mwide, m, v, u, clen, first);
    ljc_if_end(ir, after);
  }
  ljc_if_end(ir, by_mr);
  ljc_loop_end(ir, &E, NULL, NULL);
}

/* Stores x at p where mask. */
static void masked_store(wino *w, LLVMValueRef x, LLVMValueRef p, LLVMValueRef mask) {
  ljc_masked_store(w->ir, x, p, 4, mask);
}

/* C from Q (below): each output row's columns vw at a time for vw rows of C at a time, the
 * vw × vw square transposed in registers (Q runs along the rows, C along the columns). */
static void copy_out(wino *w, const tblock *tb, LLVMValueRef mb0, LLVMValueRef mlen) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  LLVMValueRef qw = mulc(w, tb->nc, w->tm), oy0 = mulc(w, tb->ty0, w->tm), ox0 = mulc(w, tb->tx0, w->tm);
  LLVMValueRef nrows = smin(w, mulc(w, tb->nr, w->tm), sub(w, w->oh, oy0)), ncols = smin(w, qw, sub(w, w->ow, ox0));
  LLVMTypeRef mvt = LLVMVectorType(ir->i1, (unsigned)w->vw);
  LLVMValueRef crow = sub(w, add(w, w->crow0, mb0), i64c(w, 0));
  ljc_loop Y, Xv, Mv;
  ljc_loop_begin(ir, &Y, i64c(w, 0), nrows, false, 0, NULL);
  LLVMValueRef col0 = add(w, mul(w, add(w, oy0, Y.iv), w->ow), ox0);
  ljc_loop_begin(ir, &Xv, i64c(w, 0), channel_vectors(w, ncols), false, 0, NULL);
  LLVMValueRef x0 = mulc(w, Xv.iv, w->vw);
  LLVMValueRef xmask = LLVMBuildICmp(b, LLVMIntSLT, lanes_from(w, x0), splat32(w, ncols), "");
  ljc_loop_begin(ir, &Mv, i64c(w, 0), channel_vectors(w, mlen), false, 0, NULL);
  LLVMValueRef mv = mulc(w, Mv.iv, w->vw);
  LLVMValueRef v[64];
  /* a whole square: vw positions and vw rows on from the first's */
  LLVMValueRef whole = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLE, addc(w, x0, w->vw), ncols, ""),
                                    LLVMBuildICmp(b, LLVMIntSLE, addc(w, mv, w->vw), mlen, ""), "");
  LLVMValueRef q0 = at(w, w->q, add(w, mulc(w, add(w, mul(w, Y.iv, qw), x0), MB), mv));
  LLVMValueRef c0 = at(w, w->arg[LJC_GEMM_C],
                       sub(w, add(w, mul(w, add(w, crow, mv), w->arg[LJC_GEMM_N]), add(w, col0, x0)),
                           w->arg[LJC_GEMM_C_ORIGIN]));
  LLVMBasicBlockRef done = ljc_if_begin(ir, whole, "wino.whole_out");
  for (int i = 0; i < w->vw; i++) v[i] = vload(w, at(w, q0, i64c(w, (int64_t)i * MB)));
  ljc_transpose(ir, w->vw, v);
  for (int j = 0; j < w->vw; j++, c0 = at(w, c0, w->arg[LJC_GEMM_N])) vstore(w, v[j], c0);
  ljc_if_end(ir, done);
  done = ljc_if_begin(ir, LLVMBuildNot(b, whole, ""), "wino.part_out");
  for (int i = 0; i < w->vw; i++) {
    LLVMValueRef x = smin(w, addc(w, x0, i), addc(w, ncols, -1));
    v[i] = vload(w, at(w, w->q, add(w, mulc(w, add(w, mul(w, Y.iv, qw), x), MB), mv)));
  }
  ljc_transpose(ir, w->vw, v);
  for (int j = 0; j < w->vw; j++) {
    LLVMValueRef m = addc(w, mv, j), in = lt(w, m, mlen);
    LLVMValueRef row = add(w, crow, smin(w, m, addc(w, mlen, -1)));
    LLVMValueRef off = sub(w, add(w, mul(w, row, w->arg[LJC_GEMM_N]), add(w, col0, x0)), w->arg[LJC_GEMM_C_ORIGIN]);
    masked_store(w, v[j], at(w, w->arg[LJC_GEMM_C], off), LLVMBuildAnd(b, xmask, splat(w, in, mvt), ""));
  }
  ljc_if_end(ir, done);
  ljc_loop_end(ir, &Mv, NULL, NULL);
  ljc_loop_end(ir, &Xv, NULL, NULL);
  ljc_loop_end(ir, &Y, NULL, NULL);
}

/* The position in Q (qw positions a row) of tile t's first output: its m × m outputs are
 * rows m·(t / nc) on, columns m·(t mod nc) on. */
static LLVMValueRef tile_q(wino *w, const tblock *tb, LLVMValueRef qw, LLVMValueRef t) {
  LLVMValueRef r = LLVMBuildSDiv(w->b, t, tb->nc, ""), c = LLVMBuildSRem(w->b, t, tb->nc, "");
  return add(w, mul(w, mulc(w, r, w->tm), qw), mulc(w, c, w->tm));
}

/* C's m × m outputs of the block's tiles (M's from t0) for rows mb0 .. mb0 + mlen - 1 of the
 * call's: through Q, the block's outputs rows last (m·nr rows of m·nc positions, MB rows of C
 * each). */
static void outputs(wino *w, const tblock *tb, LLVMValueRef t0, LLVMValueRef mb0, LLVMValueRef mlen) {
  ljc_ir *ir = w->ir;
  LLVMValueRef qw = mulc(w, tb->nc, w->tm);
  ljc_loop T, Mv;
  ljc_loop_begin(ir, &T, i64c(w, 0), tb->count, false, 0, NULL);
  LLVMValueRef q0 = tile_q(w, tb, qw, T.iv);
  ljc_loop_begin(ir, &Mv, i64c(w, 0), channel_vectors(w, mlen), false, 0, NULL);
  LLVMValueRef mv = mulc(w, Mv.iv, w->vw);
  LLVMValueRef mm[NE_MAX], y[NE_MAX];
  for (int e = 0; e < w->ne; e++) mm[e] = vload(w, buf_at(w, w->m, e, TG, MB, add(w, t0, T.iv), mv));
  /* the rows' bias, at M's point (1, 1): the output transform adds it to all m × m outputs */
  LLVMValueRef rows = LLVMBuildICmp(w->b, LLVMIntSLT, lanes_from(w, mv), splat32(w, mlen), "");
  mm[w->tn + 1] = ljc_gemm_add_row_bias(ir, w->arg, mm[w->tn + 1], w->bi, add(w, add(w, w->m0, mb0), mv), rows);
  transform_2d(w, &w->mats.at, mm, y);
  LLVMValueRef relu = ljc_gemm_relu_now(ir, w->arg, NULL); /* the call's relu (LJC_GEMM_RELU) */
  for (int i = 0; i < w->tm; i++)
    for (int j = 0; j < w->tm; j++)
      vstore(w, ljc_gemm_relu_if(ir, relu, y[i * w->tm + j]),
             at(w, w->q, add(w, mulc(w, add(w, q0, addc(w, mul(w, i64c(w, i), qw), j)), MB), mv)));
  ljc_loop_end(ir, &Mv, NULL, NULL);
  ljc_loop_end(ir, &T, NULL, NULL);
  copy_out(w, tb, mb0, mlen);
}

/* Rows m0 .. m0 + len - 1 of the ng matrices from bi into C's rows from crow0 (ng > 1: each
 * image one block of tiles, the same weight for all): their tiles' products go together,
 * image after image in V and M, so that a block of U serves them all. U is kept
 * from the last call's when it is the one block of rows and channels both need (the same
 * weight for every matrix, A's batch stride 0, as a convolution's): w->u_m0 and w->u_rows say
 * which rows it holds, u_rows -1 for none. */
static void matrices(wino *w, LLVMValueRef cin, LLVMValueRef ng) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  LLVMValueRef nm = LLVMBuildSDiv(b, addc(w, w->len, MB - 1), i64c(w, MB), "");
  LLVMValueRef ncb = LLVMBuildSDiv(b, addc(w, cin, w->cb - 1), i64c(w, w->cb), "");
  /* all: U holds every channel of the one block of rows, computed once for the matrices */
  LLVMValueRef all = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, nm, i64c(w, 1), ""),
                                  LLVMBuildICmp(b, LLVMIntSLE, cin, i64c(w, UC), ""), "");
  LLVMValueRef same = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, w->arg[LJC_GEMM_A_SB], i64c(w, 0), ""),
                                   LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildLoad2(b, ir->i64, w->u_m0, ""), w->m0, ""), "");
  LLVMValueRef keep = LLVMBuildAnd(b, all, same, "");
  LLVMBuildStore(b, LLVMBuildSelect(b, keep, LLVMBuildLoad2(b, ir->i64, w->u_rows, ""), i64c(w, -1), ""), w->u_rows);
  LLVMBuildStore(b, w->m0, w->u_m0);
  ljc_loop Rb, Cs, Mb, Cb;
  ljc_loop_begin(ir, &Rb, i64c(w, 0), w->nrb, false, 0, NULL);
  ljc_loop_begin(ir, &Cs, i64c(w, 0), w->nseg, false, 0, NULL);
  tblock tb = tile_block(w, Rb.iv, Cs.iv);
  ljc_loop_begin(ir, &Mb, i64c(w, 0), nm, false, 0, NULL);
  LLVMValueRef mb0 = mulc(w, Mb.iv, MB), mlen = smin(w, i64c(w, MB), sub(w, w->len, mb0));
  int64_t wide = NV * w->vw;
  LLVMValueRef mwide = mulc(w, LLVMBuildSDiv(b, addc(w, mlen, wide - 1), i64c(w, wide), ""), wide);
  LLVMValueRef held = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildLoad2(b, ir->i64, w->u_rows, ""), mlen, "");
  LLVMBasicBlockRef after = ljc_if_begin(ir, LLVMBuildAnd(b, all, LLVMBuildNot(b, held, ""), ""), "wino.weights");
  weights(w, mb0, mlen, mwide, i64c(w, 0), cin);
  LLVMBuildStore(b, mlen, w->u_rows);
  ljc_if_end(ir, after);
  ljc_loop_begin(ir, &Cb, i64c(w, 0), ncb, false, 0, NULL);
  LLVMValueRef cb0 = mulc(w, Cb.iv, w->cb), clen = smin(w, i64c(w, w->cb), sub(w, cin, cb0));
  after = ljc_if_begin(ir, LLVMBuildNot(b, all, ""), "wino.block_weights");
  weights(w, mb0, mlen, mwide, cb0, clen);
  ljc_if_end(ir, after);
  ljc_loop G;
  ljc_loop_begin(ir, &G, i64c(w, 0), ng, false, 0, NULL);
  image im = operand_image(w, LJC_GEMM_B, add(w, w->bi, G.iv));
  gather_block(w, &im, &tb, cb0, clen);
  inputs(w, &tb, clen, mul(w, G.iv, tb.count));
  ljc_loop_end(ir, &G, NULL, NULL);
  products(w, mul(w, ng, tb.count), mwide, clen, LLVMBuildSelect(b, all, cb0, i64c(w, 0), ""),
           LLVMBuildICmp(b, LLVMIntEQ, Cb.iv, i64c(w, 0), ""));
  ljc_loop_end(ir, &Cb, NULL, NULL);
  LLVMValueRef bi = w->bi, crow0 = w->crow0;
  ljc_loop_begin(ir, &G, i64c(w, 0), ng, false, 0, NULL);
  w->bi = add(w, bi, G.iv), w->crow0 = add(w, crow0, mul(w, G.iv, w->arg[LJC_GEMM_M]));
  outputs(w, &tb, mul(w, G.iv, tb.count), mb0, mlen);
  w->bi = bi, w->crow0 = crow0;
  ljc_loop_end(ir, &G, NULL, NULL);
  ljc_loop_end(ir, &Mb, NULL, NULL);
  ljc_loop_end(ir, &Cs, NULL, NULL);
  ljc_loop_end(ir, &Rb, NULL, NULL);
}

int64_t ljc_winograd_work_bytes(int tn) { return (int64_t)tn * tn * PLANE(UC * MB) * 4 + 16; }

/* ---- the weight gradient ------------------------------------------------------------------ */

/* dM for the block's tiles and mwide rows m of dY: the output transform's adjoint of each
 * tile's m × m gradient (A·dY·Aᵀ), from Q (dY's positions, rows last). */
static void grad_outputs(wino *w, const tblock *tb, LLVMValueRef mwide, LLVMValueRef t0) {
  ljc_ir *ir = w->ir;
  LLVMValueRef qw = mulc(w, tb->nc, w->tm);
  ljc_loop T, Mv;
  ljc_loop_begin(ir, &T, i64c(w, 0), tb->count, false, 0, NULL);
  LLVMValueRef q0 = at(w, w->q, mulc(w, tile_q(w, tb, qw, T.iv), MB));
  ljc_loop_begin_step(ir, &Mv, i64c(w, 0), mwide, w->vw, false, 0, NULL);
  LLVMValueRef d[NE_MAX], o[NE_MAX];
  for (int i = 0; i < w->tm; i++)
    for (int j = 0; j < w->tm; j++)
      d[i * w->tm + j] = vload(w, at(w, q0, add(w, mulc(w, addc(w, mulc(w, qw, i), j), MB), Mv.iv)));
  transform_2d(w, &w->mats.a, d, o);
  for (int e = 0; e < w->ne; e++) vstore(w, o[e], buf_at(w, w->m, e, TG, MB, add(w, t0, T.iv), Mv.iv));
  ljc_loop_end(ir, &Mv, NULL, NULL);
  ljc_loop_end(ir, &T, NULL, NULL);
}

/* dU[e] += V[e]ᵀ · dM[e] over the block's count tiles, for cwide channels (mr at a time) and
 * mwide rows m (NV vectors at a time). */
static void grad_products(wino *w, LLVMValueRef count, LLVMValueRef cwide, LLVMValueRef mwide) {
  ljc_ir *ir = w->ir;
  ljc_loop E, Mv, Cr;
  ljc_loop_begin(ir, &E, i64c(w, 0), i64c(w, w->ne), false, 0, NULL);
  LLVMValueRef v = at(w, w->v, mulc(w, E.iv, PLANE(TG * CB))), m = at(w, w->m, mulc(w, E.iv, PLANE(TG * MB)));
  LLVMValueRef du = at(w, w->u, mulc(w, E.iv, PLANE(DU_ROWS * MB)));
  ljc_loop_begin_step(ir, &Mv, i64c(w, 0), mwide, NV * w->vw, false, 0, NULL);
  ljc_loop_begin_step(ir, &Cr, i64c(w, 0), cwide, w->mr, false, 0, NULL);
  LLVMValueRef row[MR_MAX];
  for (int r = 0; r < w->mr; r++) row[r] = at(w, du, add(w, mulc(w, addc(w, Cr.iv, r), MB), Mv.iv));
  register_tile(w, w->mr, NV, row, NULL, count, at(w, v, Cr.iv), 1, w->cb, at(w, m, Mv.iv), MB);
  ljc_loop_end(ir, &Cr, NULL, NULL);
  ljc_loop_end(ir, &Mv, NULL, NULL);
  ljc_loop_end(ir, &E, NULL, NULL);
}

/* C's rows c·r² + t for the channels cb0 .. cb0 + clen - 1, columns mb0 .. mb0 + mlen - 1: the
 * weight transform's adjoint of dU (Gᵀ·dU·G, n × n to r × r). */
static void grad_weights(wino *w, LLVMValueRef cb0, LLVMValueRef clen, LLVMValueRef mb0, LLVMValueRef mlen) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  const LLVMValueRef *a = w->arg;
  ljc_loop Cl, Mv;
  ljc_loop_begin(ir, &Cl, i64c(w, 0), clen, false, 0, NULL);
  ljc_loop_begin(ir, &Mv, i64c(w, 0), channel_vectors(w, mlen), false, 0, NULL);
  LLVMValueRef mv = mulc(w, Mv.iv, w->vw);
  LLVMValueRef x[NE_MAX], o[R_MAX * R_MAX];
  for (int e = 0; e < w->ne; e++) x[e] = vload(w, buf_at(w, w->u, e, DU_ROWS, MB, Cl.iv, mv));
  transform_2d(w, &w->mats.gt, x, o);
  LLVMValueRef lanes = LLVMBuildICmp(b, LLVMIntSLT, lanes_from(w, mv), splat32(w, mlen), "");
  int taps = w->r * w->r;
  LLVMValueRef row0 = mulc(w, add(w, cb0, Cl.iv), taps);
  for (int tap = 0; tap < taps; tap++) {
    LLVMValueRef off = sub(w, add(w, mul(w, addc(w, row0, tap), a[LJC_GEMM_N]), add(w, mb0, mv)), a[LJC_GEMM_C_ORIGIN]);
    masked_store(w, o[tap], at(w, a[LJC_GEMM_C], off), lanes);
  }
  ljc_loop_end(ir, &Mv, NULL, NULL);
  ljc_loop_end(ir, &Cl, NULL, NULL);
}

/* Adds Σ over the block's positions of dY (in Q, channels last: zeros past the image and
 * past mlen) to sums[0 .. mlen - 1] (BSUM's, the bias gradient; the edge tiles' positions
 * past the output are zeros). */
static void sum_block(wino *w, const tblock *tb, LLVMValueRef mlen, LLVMValueRef sums) {
  ljc_ir *ir = w->ir;
  LLVMValueRef npos = mul(w, mulc(w, tb->nr, w->tm), mulc(w, tb->nc, w->tm)), zero = LLVMConstNull(w->vt), total;
  ljc_loop Mv, P;
  ljc_loop_begin(ir, &Mv, i64c(w, 0), channel_vectors(w, mlen), false, 0, NULL);
  LLVMValueRef mv = mulc(w, Mv.iv, w->vw), cell = at(w, sums, mv);
  ljc_loop_begin(ir, &P, i64c(w, 0), npos, false, 1, &zero);
  LLVMValueRef next = fadd(w, P.acc[0], vload(w, at(w, w->q, add(w, mulc(w, P.iv, MB), mv))));
  ljc_loop_end(ir, &P, &next, &total);
  vstore(w, fadd(w, vload(w, cell), total), cell);
  ljc_loop_end(ir, &Mv, NULL, NULL);
}

/* BSUM[(mb0 + m)·BSUM_S] = sums[m] for m < mlen. */
static void store_sums(wino *w, LLVMValueRef sums, LLVMValueRef mb0, LLVMValueRef mlen) {
  ljc_ir *ir = w->ir;
  ljc_loop M;
  ljc_loop_begin(ir, &M, i64c(w, 0), mlen, false, 0, NULL);
  LLVMValueRef x = LLVMBuildLoad2(w->b, ir->f32, at(w, sums, M.iv), "");
  LLVMBuildStore(w->b, x, at(w, w->arg[LJC_GEMM_BSUM], mul(w, add(w, mb0, M.iv), w->arg[LJC_GEMM_BSUM_S])));
  ljc_loop_end(ir, &M, NULL, NULL);
}

/* The weight gradient C = Σ_b im2col(x_b)·dY_bᵀ ([C·r², M], summed over the batch): for each
 * block of channels and of columns m, dU summed over every matrix's tiles, then transformed
 * into C. A call's range [begin, end) of the rows stands for the same share of the columns:
 * it computes every row of columns begin·M/rows .. end·M/rows (the ranges of the calls share
 * the columns out as they do the rows), so that each thread transforms its share of dY and
 * all of the image, the smaller (a range of rows would need all of dY: 0.1-0.3 ms slower of
 * ~2 on two threads, conv2 at batch 64). The kernel gives each thread one range (a matmul
 * kernel's B shared by its rows). */
static void weight_gradient(wino *w) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  const LLVMValueRef *a = w->arg;
  LLVMValueRef rows = a[LJC_GEMM_M], N = a[LJC_GEMM_N], cin = LLVMBuildSDiv(b, rows, i64c(w, (int64_t)w->r * w->r), "");
  LLVMValueRef n_lo = LLVMBuildSDiv(b, mul(w, a[LJC_GEMM_BEGIN], N), rows, "");
  LLVMValueRef n_hi = LLVMBuildSDiv(b, mul(w, a[LJC_GEMM_END], N), rows, "");
  LLVMValueRef nm = LLVMBuildSDiv(b, addc(w, sub(w, n_hi, n_lo), MB - 1), i64c(w, MB), "");
  LLVMValueRef ncb = LLVMBuildSDiv(b, addc(w, cin, w->cb - 1), i64c(w, w->cb), "");
  int64_t wide = NV * w->vw;
  LLVMValueRef sums = ljc_entry_array(ir, ir->f32, MB);
  ljc_loop Cb, Mb, Bl, Rb, Cs;
  ljc_loop_begin(ir, &Cb, i64c(w, 0), ncb, true, 0, NULL);
  /* B's sums (BSUM) with the first block of channels' pass over dY */
  LLVMValueRef summing = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, Cb.iv, i64c(w, 0), ""),
                                      LLVMBuildIsNotNull(b, a[LJC_GEMM_BSUM], ""), "");
  LLVMValueRef cb0 = mulc(w, Cb.iv, w->cb), clen = smin(w, i64c(w, w->cb), sub(w, cin, cb0));
  LLVMValueRef cwide = mulc(w, LLVMBuildSDiv(b, addc(w, clen, w->mr - 1), i64c(w, w->mr), ""), w->mr);
  ljc_loop_begin(ir, &Mb, i64c(w, 0), nm, true, 0, NULL);
  LLVMValueRef mb0 = add(w, n_lo, mulc(w, Mb.iv, MB)), mlen = smin(w, i64c(w, MB), sub(w, n_hi, mb0));
  LLVMValueRef mwide = mulc(w, LLVMBuildSDiv(b, addc(w, mlen, wide - 1), i64c(w, wide), ""), wide);
  LLVMBuildMemSet(b, w->u, ljc_const_i(ir->i8, 0), ljc_i64(ir, w->ne * PLANE(DU_ROWS * MB) * 4), 64);
  LLVMBuildMemSet(b, sums, ljc_const_i(ir->i8, 0), ljc_i64(ir, MB * 4), 64);
  /* images that are one block of tiles go TG_DW tiles at a time, a group's tiles together in V
   * and dM: the products' sums over them run that much longer between their loads and stores
   * of dU (a 7×7 image is 4 tiles) */
  LLVMValueRef per = images_together(w, TG_DW);
  LLVMValueRef ngroups = LLVMBuildSDiv(b, add(w, a[LJC_GEMM_BATCH], addc(w, per, -1)), per, "");
  ljc_loop_begin(ir, &Bl, i64c(w, 0), ngroups, false, 0, NULL);
  LLVMValueRef b0 = mul(w, Bl.iv, per), ng = smin(w, per, sub(w, a[LJC_GEMM_BATCH], b0));
  ljc_loop_begin(ir, &Rb, i64c(w, 0), w->nrb, false, 0, NULL);
  ljc_loop_begin(ir, &Cs, i64c(w, 0), w->nseg, false, 0, NULL);
  tblock tb = tile_block(w, Rb.iv, Cs.iv);
  ljc_loop G;
  ljc_loop_begin(ir, &G, i64c(w, 0), ng, false, 0, NULL);
  LLVMValueRef bi = add(w, b0, G.iv), t0 = mul(w, G.iv, tb.count);
  image x = operand_image(w, LJC_GEMM_A, bi);
  image dy = {at(w, a[LJC_GEMM_B], mul(w, bi, a[LJC_GEMM_B_SB])), a[LJC_GEMM_B_SN], mul(w, w->ow, a[LJC_GEMM_B_SK]),
              a[LJC_GEMM_B_SK], w->oh, w->ow, prefetch_ahead(w, a[LJC_GEMM_B_SB], mul(w, w->ow, a[LJC_GEMM_B_SK]))};
  gather_block(w, &x, &tb, cb0, clen);
  inputs(w, &tb, clen, t0);
  channels_last(w, &dy, mulc(w, tb.ty0, w->tm), mulc(w, tb.tx0, w->tm), mulc(w, tb.nr, w->tm), mulc(w, tb.nc, w->tm), mb0, mlen,
                w->q, MB);
  LLVMBasicBlockRef after = ljc_if_begin(ir, summing, "wino.bsum");
  sum_block(w, &tb, mlen, sums);
  ljc_if_end(ir, after);
  grad_outputs(w, &tb, mwide, t0);
  ljc_loop_end(ir, &G, NULL, NULL);
  grad_products(w, mul(w, ng, tb.count), cwide, mwide);
  ljc_loop_end(ir, &Cs, NULL, NULL);
  ljc_loop_end(ir, &Rb, NULL, NULL);
  ljc_loop_end(ir, &Bl, NULL, NULL);
  after = ljc_if_begin(ir, summing, "wino.bsum_store");
  store_sums(w, sums, mb0, mlen);
  ljc_if_end(ir, after);
  grad_weights(w, cb0, clen, mb0, mlen);
  ljc_loop_end(ir, &Mb, NULL, NULL);
  ljc_loop_end(ir, &Cb, NULL, NULL);
}

/* The calls of matrices from task r of the range [BEGIN, END) on, numbered b·M + m: the
 * rest of one matrix's rows, or whole matrices of images of one block of tiles with the same
 * weight, up to TG tiles together. Returns the task after them. */
static LLVMValueRef by_matrix(wino *w, LLVMValueRef r, LLVMValueRef cin) {
  LLVMBuilderRef b = w->b;
  LLVMValueRef end = w->arg[LJC_GEMM_END], M = w->arg[LJC_GEMM_M];
  w->bi = LLVMBuildUDiv(b, r, M, ""), w->m0 = LLVMBuildURem(b, r, M, ""), w->crow0 = r;
  LLVMValueRef whole = LLVMBuildSDiv(b, sub(w, end, r), M, "");
  LLVMValueRef group = images_together(w, TG);
  LLVMValueRef grouped = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, w->m0, i64c(w, 0), ""),
                                      LLVMBuildICmp(b, LLVMIntEQ, w->arg[LJC_GEMM_A_SB], i64c(w, 0), ""), "");
  grouped = LLVMBuildAnd(b, grouped, LLVMBuildICmp(b, LLVMIntSGT, smin(w, whole, group), i64c(w, 1), ""), "");
  LLVMValueRef ng = LLVMBuildSelect(b, grouped, smin(w, whole, group), i64c(w, 1), "");
  w->len = LLVMBuildSelect(b, grouped, M, smin(w, sub(w, end, r), sub(w, M, w->m0)), "");
  matrices(w, cin, ng);
  return add(w, r, mul(w, ng, w->len));
}

/* As by_matrix, the range numbered m·B + b (ROWS_OUTER): from row m of matrix b, the rows of
 * every matrix from there (whole rows of all the matrices, or the rest of row m's), their
 * images the most that go together at a time. A thread then transforms only its rows' part of
 * the weight, and the inputs as often as before where there are more rows than a block's (MB:
 * V is transformed again for every block of rows; with fewer, each thread would transform
 * every image's): 512 channels on 7×7 at batch 8, where two threads took 4 images each and
 * both transformed all of U, two threads' forward product 3.3-3.7 -> 2.9-3.0 ms (one
 * thread's 5.2), the input gradient 3.0-3.2 -> 2.9-3.1. */
static LLVMValueRef rows_outer(wino *w, LLVMValueRef r, LLVMValueRef cin) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  LLVMValueRef end = w->arg[LJC_GEMM_END], M = w->arg[LJC_GEMM_M], B = w->arg[LJC_GEMM_BATCH];
  LLVMValueRef group = images_together(w, TG);
  LLVMValueRef m = LLVMBuildUDiv(b, r, B, ""), b0 = LLVMBuildURem(b, r, B, "");
  LLVMValueRef whole = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, b0, i64c(w, 0), ""),
                                       LLVMBuildSDiv(b, sub(w, end, r), B, ""), i64c(w, 0), "");
  LLVMValueRef all = LLVMBuildICmp(b, LLVMIntSGT, whole, i64c(w, 0), "");
  LLVMValueRef len = LLVMBuildSelect(b, all, whole, i64c(w, 1), "");
  LLVMValueRef count = LLVMBuildSelect(b, all, B, smin(w, sub(w, B, b0), sub(w, end, r)), "");
  ljc_loop G;
  ljc_loop_begin(ir, &G, i64c(w, 0), LLVMBuildSDiv(b, add(w, count, addc(w, group, -1)), group, ""), false, 0, NULL);
  LLVMValueRef first = mul(w, G.iv, group);
  w->bi = add(w, b0, first), w->m0 = m, w->len = len, w->crow0 = add(w, mul(w, w->bi, M), m);
  matrices(w, cin, smin(w, group, sub(w, count, first)));
  ljc_loop_end(ir, &G, NULL, NULL);
  return add(w, r, LLVMBuildSelect(b, all, mul(w, len, B), count, ""));
}

/* The task range [BEGIN, END), step(w, r, cin) from each task r it returns on. */
static void over_range(wino *w, LLVMValueRef fn, LLVMValueRef (*step)(wino *, LLVMValueRef, LLVMValueRef),
                       LLVMValueRef cin) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  LLVMValueRef begin = w->arg[LJC_GEMM_BEGIN], end = w->arg[LJC_GEMM_END];
  LLVMBasicBlockRef entry = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(ir->ctx, fn, "wino.matrix");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "wino.matrices");
  LLVMBuildCondBr(b, lt(w, begin, end), head, done);
  LLVMPositionBuilderAtEnd(b, head);
  LLVMValueRef r = LLVMBuildPhi(b, ir->i64, "row");
  LLVMValueRef r_next = step(w, r, cin);
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
  LLVMBuildCondBr(b, lt(w, r_next, end), head, done);
  LLVMAddIncoming(r, &begin, &entry, 1);
  LLVMAddIncoming(r, &r_next, &latch, 1);
  LLVMPositionBuilderAtEnd(b, done);
}

/* The forward product's and the input gradient's matrices (by_matrix, or rows_outer); U kept
 * in the calling kernel's frame (WORK) from one call to the next. */
static void products_by_matrix(wino *w, LLVMValueRef fn) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  w->w_origin = w->arg[LJC_GEMM_W_ORIGIN], w->w_row = w->arg[LJC_GEMM_W_ROW];
  w->w_chan = w->arg[LJC_GEMM_W_CHAN], w->w_tap = w->arg[LJC_GEMM_W_TAP];
  w->u = w->arg[LJC_GEMM_WORK];
  w->u_m0 = LLVMBuildInBoundsGEP2(b, ir->i64, w->u, (LLVMValueRef[]){i64c(w, w->ne * PLANE(UC * MB) / 2)}, 1, "");
  w->u_rows = LLVMBuildInBoundsGEP2(b, ir->i64, w->u_m0, (LLVMValueRef[]){i64c(w, 1)}, 1, "");
  LLVMValueRef fresh = LLVMBuildICmp(b, LLVMIntNE, w->arg[LJC_GEMM_FRESH], i64c(w, 0), "");
  LLVMBuildStore(b, LLVMBuildSelect(b, fresh, i64c(w, -1), LLVMBuildLoad2(b, ir->i64, w->u_m0, ""), ""), w->u_m0);
  LLVMValueRef cin = LLVMBuildSDiv(b, w->arg[LJC_GEMM_K], i64c(w, (int64_t)w->r * w->r), "");
  LLVMValueRef outer = LLVMBuildICmp(b, LLVMIntNE, w->arg[LJC_GEMM_ROWS_OUTER], i64c(w, 0), "");
  LLVMBasicBlockRef after = ljc_if_begin(ir, outer, "wino.rows_outer");
  over_range(w, fn, rows_outer, cin);
  LLVMBuildRetVoid(b);
  LLVMPositionBuilderAtEnd(b, after);
  over_range(w, fn, by_matrix, cin);
}

void ljc_define_winograd(ljc_ir *ir, const char *name, int mr, int variant, int tm, int r) {
  LLVMTypeRef param = ir->ptr;
  LLVMValueRef fn = LLVMAddFunction(ir->mod, name, LLVMFunctionType(ir->void_, &param, 1, 0));
  ljc_add_fn_attr(ir, fn, "nounwind");
  wino w = {.ir = ir, .b = ir->b, .vw = ir->vec_bytes / 4, .mr = mr, .tm = tm, .r = r, .tn = tm + r - 1};
  w.ne = w.tn * w.tn;
  winograd_matrices(tm, r, &w.mats);
  w.vt = LLVMVectorType(ir->f32, (unsigned)w.vw);
  w.it = LLVMVectorType(ir->i32, (unsigned)w.vw);
  LLVMBuilderRef b = w.b;
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry"));
  ljc_gemm_load_args(ir, LLVMGetParam(fn, 0), w.arg);
  bool wgrad = variant == LJC_GEMM_WINOGRAD_DW;
  w.cb = wgrad ? CB_DW : CB;
  /* P: at most (m·a + r - 1)(m·b + r - 1) positions for a·b <= TB tiles; Q: m² outputs a tile */
  w.v = ljc_entry_array(ir, ir->f32, w.ne * PLANE(TG * CB));
  w.m = ljc_entry_array(ir, ir->f32, w.ne * PLANE(TG * MB));
  w.p = ljc_entry_array(ir, ir->f32, (w.tn * (w.tm * TB + r - 1) + w.vw) * w.cb);
  w.q = ljc_entry_array(ir, ir->f32, (w.tm * w.tm * TB + w.vw) * MB);
  if (!wgrad) w.ws = ljc_entry_array(ir, ir->f32, ((int64_t)r * r * CB + w.vw) * MB);
  /* the tiles of the output (of the product, or, for the weight gradient, of dY) */
  w.ow = w.arg[LJC_GEMM_WIN_OW];
  w.oh = LLVMBuildSDiv(b, w.arg[wgrad ? LJC_GEMM_K : LJC_GEMM_N], w.ow, "");
  w.tw = LLVMBuildSDiv(b, addc(&w, w.ow, w.tm - 1), i64c(&w, w.tm), "");
  w.th = LLVMBuildSDiv(b, addc(&w, w.oh, w.tm - 1), i64c(&w, w.tm), "");
  /* blocks of at most TB tiles: whole tile rows, as many as fit, in blocks of about equal
   * height; a tile row wider than TB in segments of about equal width */
  w.nseg = LLVMBuildSDiv(b, addc(&w, w.tw, TB - 1), i64c(&w, TB), "");
  w.cols_per = LLVMBuildSDiv(b, add(&w, w.tw, addc(&w, w.nseg, -1)), w.nseg, "");
  LLVMValueRef fit = LLVMBuildSDiv(b, i64c(&w, TB), w.cols_per, "");
  w.nrb = LLVMBuildSDiv(b, add(&w, w.th, addc(&w, fit, -1)), fit, "");
  w.rows_per = LLVMBuildSDiv(b, add(&w, w.th, addc(&w, w.nrb, -1)), w.nrb, "");
  if (wgrad) {
    w.u = ljc_entry_array(ir, ir->f32, w.ne * PLANE(DU_ROWS * MB));
    weight_gradient(&w);
  } else {
    products_by_matrix(&w, fn);
  }
  LLVMBuildRetVoid(b);
}
