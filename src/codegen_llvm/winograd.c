/* winograd.c — the f32 GEMM routines for 3×3 convolutions of stride and dilation 1 through
 * Winograd's minimal filtering F(4×4, 3×3) (Lavin and Gray, "Fast Algorithms for
 * Convolutional Neural Networks", 2015): each 4×4 tile of outputs from a 6×6 tile of inputs
 * in 36 products per channel pair instead of 144.
 *
 * For one matrix b (an image), its rows r (output channels) and its channels c, C[r, (oy, ox)]
 * = Σ_c Σ_{i,j} W[r, c, i, j] · x[c, oy - py + i, ox - px + j]. With tiles t of 4×4 outputs:
 *   U[e][c][r] = (G g Gᵀ)[e]   the weight g = W[r, c] transformed, G 6×3
 *   V[e][t][c] = (Bᵀ d B)[e]   the input tile d (6×6 at 4·(ty, tx) - (py, px)) transformed
 *   M[e][t][r] = Σ_c V[e][t][c] · U[e][c][r]   36 products, one per element e of the 6×6 tile
 *   C tile t   = Aᵀ M[·][t][r] A  (4×4)
 * Three routines (ljc_gemm_routine chooses them when a kernel is lowered):
 *   - LJC_GEMM_WINOGRAD, the forward product W·im2col(x);
 *   - LJC_GEMM_WINOGRAD_DX, the input gradient col2im(Wᵀ·dY): the convolution of dY, padded
 *     by 2 - p, with the weight flipped and its rows and channels swapped, written straight
 *     into the col2im's output (the kernel does not run the col2im);
 *   - LJC_GEMM_WINOGRAD_DW, the weight gradient Σ_b im2col(x_b)·dY_bᵀ: with dM the output
 *     transform's adjoint of dY's tiles (A dY Aᵀ), dU[e][c][r] = Σ_{b,t} V[e][t][c]·dM[e][t][r]
 *     and dW = Gᵀ dU G.
 * The work goes in blocks of at most TB tiles (whole tile rows, or segments of a wide one),
 * MB rows and CB channels, in buffers on the stack that stay in L2: a block's input copied
 * channels last (P: vector loads along the image's rows, transposed in registers; a gather per
 * position for an image whose rows are not contiguous), transformed into V; the products
 * register-blocked like the GEMM's micro-kernel (mr rows × NV vectors, a loop over the 36 e);
 * the outputs transformed into a rows-last buffer (Q) and transposed back into C's rows (a
 * row's bias, when there is one, added to M's point (1, 1) first: Aᵀ adds that point to
 * every output, one vector add for TM × TM outputs). U is
 * the same for every matrix of a convolution: it is kept in the calling kernel's frame
 * (LJC_GEMM_WORK) from one call to the next of a run.
 *
 * Measured on one Zen 4 core with MNISTNet's conv2 (32 channels in, 64 out, 14×14, batch 64),
 * the GEMM's time → F(2×2, 3×3)'s (16 products per 2×2 tile, this file's first version): the
 * forward product 4.74 → 2.26 ms, the input gradient 4.83 → 2.33, the weight gradient 5.09 →
 * 2.30; F(2×2) → F(4×4) in interleaved runs on a busier machine: 2.74–2.81 → 2.21–2.36 ms,
 * 2.72–2.86 → 2.24–2.41 and 2.81–2.95 → 2.27–2.66 (14×14 outputs take 16 tiles, 576 products
 * a channel pair, against F(2×2)'s 49 tiles and 784; the products take about 1.4 ms, the
 * transforms the rest). The sums are ordered otherwise than the GEMM's and the transforms
 * round (their points ±2 scale values by up to 8 and 1/24): the results agree with the
 * GEMM's to about 3e-5 of the output's magnitude (F(2×2): a few ulps), the weight gradient's
 * long sums to about 1e-4 of theirs. LJ_WINOGRAD=0 keeps convolutions in the GEMM. */
#include "codegen_llvm/ir.h"

/* TM outputs a tile side from TN inputs, NE = TN² elements (products per channel pair); TB
 * tiles (256 outputs), CB channels, MB rows a block; UC: the most channels U holds (all of a
 * matrix's when they fit, else one block of CB, transformed again for every matrix: a 128 to
 * 64 channel convolution on 14×14 took 2.4–3.1 ms with UC 64, 1.8–1.9 with 128, one thread;
 * U is then 1.2 MiB of the calling kernel's frame, on threads of 8 MiB stacks); DU_ROWS: the
 * weight gradient's dU rows per element (CB, and room for the last tile of mr). */
enum { TM = 4, TN = TM + 2, NE = TN * TN, NV = 2, TB = 16, CB = 32, MB = 64, UC = 128, MR_MAX = 8 };
enum { DU_ROWS = CB + MR_MAX };
/* The elements between the buffers' planes of the NE e: a cache line more than a plane holds.
 * At a multiple of 4 KiB the loads or stores of one tile's elements all fall in one L1 set
 * (8 ways): measured, one thread, conv2 at batch 64, the input gradient 3.65 -> 3.35 ms, the
 * weight gradient 3.70 -> 3.1-3.35 ms, the forward product unchanged. */
#define PLANE(n) ((n) + 16)

typedef struct wino {
  ljc_ir *ir;
  LLVMBuilderRef b;
  LLVMValueRef arg[LJC_GEMM_NARGS];
  LLVMTypeRef vt, it;        /* f32 and i32 vectors of vw lanes */
  int vw, mr;
  LLVMValueRef u, v, m;      /* U [NE][UC][MB] (the weight gradient's dU [NE][DU_ROWS][MB]),
                                V [NE][TB][CB], M [NE][TB][MB] (dM), each plane PLANE apart */
  LLVMValueRef u_m0, u_rows; /* i64 cells: the first row and the count of rows U holds */
  LLVMValueRef bi, m0, crow0, len;
  LLVMValueRef p, q;          /* the block's input channels last (P) and outputs rows last (Q) */
  LLVMValueRef oh, ow, th, tw; /* the output's size and its tiles' */
  LLVMValueRef nrb, nseg, rows_per, cols_per; /* the blocks of tiles (matrix) */
  /* the weight of row r, channel c, tap t (3·i + j) is A's element w_origin + r·w_row +
   * c·w_chan + t·w_tap of each matrix (ljc_define_winograd) */
  LLVMValueRef w_origin, w_row, w_chan, w_tap;
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

/* c·x + y */
static LLVMValueRef fma_k(wino *w, double c, LLVMValueRef x, LLVMValueRef y) {
  return ljc_fmuladd(w->ir, fk(x, c), x, y);
}

/* The 1-D transforms of one row or column, points x to points o, with the points 0, 1, -1, 2,
 * -2 and infinity: the input's Bᵀ (6 to 6), the output's Aᵀ (6 to 4), the weight's G (3 to 6);
 * for the weight gradient, the adjoints of the output's (4 to 6) and of the weight's (6 to 3). */
typedef void transform_1d(wino *w, LLVMValueRef *o, const LLVMValueRef *x);

static void input_1d(wino *w, LLVMValueRef *o, const LLVMValueRef *d) {
  LLVMValueRef a = fma_k(w, -4, d[2], d[4]), b = fma_k(w, -4, d[1], d[3]); /* d4 - 4 d2, d3 - 4 d1 */
  LLVMValueRef c = fsub(w, d[4], d[2]), e = fmul(w, fsub(w, d[3], d[1]), fk(d[0], 2));
  o[0] = fma_k(w, 4, d[0], fma_k(w, -5, d[2], d[4]));
  o[1] = fadd(w, a, b), o[2] = fsub(w, a, b), o[3] = fadd(w, c, e), o[4] = fsub(w, c, e);
  o[5] = fma_k(w, 4, d[1], fma_k(w, -5, d[3], d[5]));
}

static void output_1d(wino *w, LLVMValueRef *o, const LLVMValueRef *m) {
  LLVMValueRef s12 = fadd(w, m[1], m[2]), d12 = fsub(w, m[1], m[2]);
  LLVMValueRef s34 = fadd(w, m[3], m[4]), d34 = fsub(w, m[3], m[4]);
  o[0] = fadd(w, fadd(w, m[0], s12), s34), o[1] = fma_k(w, 2, d34, d12);
  o[2] = fma_k(w, 4, s34, s12), o[3] = fadd(w, fma_k(w, 8, d34, d12), m[5]);
}

static void weight_1d(wino *w, LLVMValueRef *o, const LLVMValueRef *g) {
  LLVMValueRef s = fadd(w, g[0], g[2]), b = fma_k(w, 1.0 / 24, g[0], fmul(w, g[2], fk(g[0], 1.0 / 6)));
  LLVMValueRef c = fmul(w, g[1], fk(g[0], 1.0 / 12));
  o[0] = fmul(w, g[0], fk(g[0], 0.25));
  o[1] = fmul(w, fadd(w, s, g[1]), fk(g[0], -1.0 / 6)), o[2] = fmul(w, fsub(w, s, g[1]), fk(g[0], -1.0 / 6));
  o[3] = fadd(w, b, c), o[4] = fsub(w, b, c), o[5] = g[2];
}

static void grad_output_1d(wino *w, LLVMValueRef *o, const LLVMValueRef *d) {
  LLVMValueRef s = fadd(w, d[0], d[2]), t = fadd(w, d[1], d[3]);
  LLVMValueRef u = fma_k(w, 4, d[2], d[0]), v = fmul(w, fma_k(w, 4, d[3], d[1]), fk(d[0], 2));
  o[0] = d[0], o[1] = fadd(w, s, t), o[2] = fsub(w, s, t), o[3] = fadd(w, u, v), o[4] = fsub(w, u, v), o[5] = d[3];
}

static void grad_weight_1d(wino *w, LLVMValueRef *o, const LLVMValueRef *x) {
  LLVMValueRef p = fadd(w, x[1], x[2]), q = fadd(w, x[3], x[4]), r = fsub(w, x[2], x[1]), s = fsub(w, x[3], x[4]);
  o[0] = fma_k(w, 0.25, x[0], fma_k(w, -1.0 / 6, p, fmul(w, q, fk(x[0], 1.0 / 24))));
  o[1] = fma_k(w, 1.0 / 6, r, fmul(w, s, fk(x[0], 1.0 / 12)));
  o[2] = fma_k(w, 1.0 / 6, fsub(w, q, p), x[5]);
}

/* The 2-D transform T·x·Tᵀ of the n_in × n_in tile x (row-major) into the n_out × n_out tile
 * o: f down each column, then along each row. */
static void transform_2d(wino *w, transform_1d *f, int n_in, int n_out, const LLVMValueRef *x, LLVMValueRef *o) {
  LLVMValueRef t[TN][TN], in[TN], out[TN];
  for (int j = 0; j < n_in; j++) {
    for (int i = 0; i < n_in; i++) in[i] = x[i * n_in + j];
    f(w, out, in);
    for (int i = 0; i < n_out; i++) t[i][j] = out[i];
  }
  for (int i = 0; i < n_out; i++) f(w, o + i * n_out, t[i]);
}

/* U for rows mb0 .. mb0 + mwide - 1 of the call's rows (those past `mlen` repeat the last:
 * their products are never stored) and channels cb0 .. cb0 + clen - 1, at U's channels from
 * 0; vw rows a gather. */
static void weights(wino *w, LLVMValueRef mb0, LLVMValueRef mlen, LLVMValueRef mwide, LLVMValueRef cb0,
                    LLVMValueRef clen) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  const LLVMValueRef *a = w->arg;
  LLVMValueRef rows = at(w, a[LJC_GEMM_A], add(w, add(w, mul(w, w->bi, a[LJC_GEMM_A_SB]), w->w_origin),
                                                mul(w, add(w, w->m0, mb0), w->w_row)));
  LLVMValueRef all = LLVMConstAllOnes(LLVMVectorType(ir->i1, (unsigned)w->vw));
  ljc_loop Cl, Mv;
  ljc_loop_begin(ir, &Cl, i64c(w, 0), clen, false, 0, NULL);
  LLVMValueRef k0 = at(w, rows, mul(w, add(w, cb0, Cl.iv), w->w_chan));
  ljc_loop_begin_step(ir, &Mv, i64c(w, 0), mwide, w->vw, false, 0, NULL);
  LLVMValueRef m = ljc_intrinsic2(ir, "smin", lanes_from(w, Mv.iv), splat32(w, addc(w, mlen, -1)));
  LLVMValueRef idx = LLVMBuildMul(b, m, splat32(w, w->w_row), "");
  LLVMValueRef g[9], u[NE];
  for (int i = 0; i < 9; i++) g[i] = gather(w, at(w, k0, mulc(w, w->w_tap, i)), idx, all);
  transform_2d(w, weight_1d, 3, TN, g, u);
  for (int e = 0; e < NE; e++) vstore(w, u[e], buf_at(w, w->u, e, UC, MB, Cl.iv, Mv.iv));
  ljc_loop_end(ir, &Mv, NULL, NULL);
  ljc_loop_end(ir, &Cl, NULL, NULL);
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

/* The vw-channel vectors of a block of clen channels. */
static LLVMValueRef channel_vectors(wino *w, LLVMValueRef clen) {
  return LLVMBuildSDiv(w->b, addc(w, clen, w->vw - 1), i64c(w, w->vw), "");
}

/* An image of one matrix: element (c, y, x) at base + c·sc + y·sh + x·sw, h × wd positions;
 * the next matrix's image `next` elements on, prefetched into L2 while this one is read (the
 * loads of the copy to channels last waited on L3 without it: measured on MNISTNet's conv2 at
 * batch 64, fastest of 200 runs, one thread, the weight gradient 2.41-2.60 -> 1.92-2.05 ms,
 * the input gradient 2.27-2.43 -> 2.10-2.22, the forward product 2.28-2.32 -> 2.18-2.26). */
typedef struct image {
  LLVMValueRef base, sc, sh, sw, h, wd, next;
} image;

/* The image operand B of a convolution (or A, im2col of the weight gradient's) for matrix bi. */
static image operand_image(wino *w, int operand, LLVMValueRef bi) {
  const LLVMValueRef *a = w->arg;
  LLVMValueRef base = at(w, a[operand], mul(w, bi, a[operand + 1]));
  return (image){base, a[LJC_GEMM_IMG_SC], a[LJC_GEMM_IMG_SH], a[LJC_GEMM_IMG_SW], a[LJC_GEMM_IMG_H], a[LJC_GEMM_IMG_W],
                 a[operand + 1]};
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
  LLVMValueRef c = mulc(w, Cv.iv, w->vw), v[64];
  LLVMBasicBlockRef inside = ljc_if_begin(ir, touches, "wino.square");
  for (int i = 0; i < w->vw; i++) {
    LLVMValueRef ci = addc(w, c, i);
    LLVMValueRef ch = LLVMBuildGEP2(b, ir->f32, row, (LLVMValueRef[]){mul(w, add(w, c0, ci), im->sc)}, 1, "");
    v[i] = masked_load(w, ch, LLVMBuildAnd(b, xin, splat(w, lt(w, ci, clen), mvt), ""));
    ljc_prefetch(ir, LLVMBuildGEP2(b, ir->f32, ch, (LLVMValueRef[]){im->next}, 1, ""));
  }
  ljc_transpose(ir, w->vw, v);
  for (int i = 0; i < w->vw; i++) vstore(w, v[i], at(w, drow, add(w, mulc(w, addc(w, X.iv, i), run), c)));
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

/* P: the block's input tiles' positions, rows TM·ty0 - py .. TM·(ty0 + nr) - py + 1 and
 * columns likewise, channels cb0 .. cb0 + clen - 1 a run of CB each. */
static void gather_block(wino *w, const image *im, const tblock *tb, LLVMValueRef cb0, LLVMValueRef clen) {
  const LLVMValueRef *a = w->arg;
  LLVMValueRef y0 = sub(w, mulc(w, tb->ty0, TM), a[LJC_GEMM_WIN_PY]);
  LLVMValueRef x0 = sub(w, mulc(w, tb->tx0, TM), a[LJC_GEMM_WIN_PX]);
  channels_last(w, im, y0, x0, addc(w, mulc(w, tb->nr, TM), 2), addc(w, mulc(w, tb->nc, TM), 2), cb0, clen, w->p, CB);
}

/* V for the block's tiles and clen channels, from P by vector loads. */
static void inputs(wino *w, const tblock *tb, LLVMValueRef clen) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  LLVMValueRef pw = addc(w, mulc(w, tb->nc, TM), 2);
  ljc_loop T, Cv;
  ljc_loop_begin(ir, &T, i64c(w, 0), tb->count, false, 0, NULL);
  LLVMValueRef r = LLVMBuildSDiv(b, T.iv, tb->nc, ""), c = LLVMBuildSRem(b, T.iv, tb->nc, "");
  LLVMValueRef rows[TN];
  for (int i = 0; i < TN; i++) {
    LLVMValueRef pos = add(w, mul(w, addc(w, mulc(w, r, TM), i), pw), mulc(w, c, TM));
    rows[i] = at(w, w->p, mulc(w, pos, CB));
  }
  ljc_loop_begin(ir, &Cv, i64c(w, 0), channel_vectors(w, clen), false, 0, NULL);
  LLVMValueRef cv = mulc(w, Cv.iv, w->vw);
  LLVMValueRef d[NE], o[NE];
  for (int i = 0; i < TN; i++)
    for (int j = 0; j < TN; j++) d[i * TN + j] = vload(w, at(w, rows[i], addc(w, cv, (int64_t)j * CB)));
  transform_2d(w, input_1d, TN, TN, d, o);
  for (int e = 0; e < NE; e++) vstore(w, o[e], buf_at(w, w->v, e, TB, CB, T.iv, cv));
  ljc_loop_end(ir, &Cv, NULL, NULL);
  ljc_loop_end(ir, &T, NULL, NULL);
}

/* A register tile: the mr rows of NV vectors at row[r] become (first ? 0 : what they hold;
 * first NULL: what they hold) +
 * Σ_{k<n} a[r·a_row + k·a_step] · (the NV vectors at b + k·b_step), the a element broadcast. */
static void register_tile(wino *w, int mr, const LLVMValueRef *row, LLVMValueRef first, LLVMValueRef n,
                          LLVMValueRef a, int64_t a_row, int64_t a_step, LLVMValueRef bp, int64_t b_step) {
  ljc_ir *ir = w->ir;
  int nv = NV;
  LLVMValueRef acc[MR_MAX * NV], next[MR_MAX * NV], bv[NV];
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nv; j++) {
      LLVMValueRef held = vload(w, at(w, row[r], i64c(w, (int64_t)j * w->vw)));
      acc[r * nv + j] = first ? LLVMBuildSelect(w->b, first, LLVMConstNull(w->vt), held, "") : held;
    }
  ljc_loop K;
  ljc_loop_begin(ir, &K, i64c(w, 0), n, false, mr * nv, acc);
  LLVMValueRef brow = at(w, bp, mulc(w, K.iv, b_step)), arow = at(w, a, mulc(w, K.iv, a_step));
  for (int j = 0; j < nv; j++) bv[j] = vload(w, at(w, brow, i64c(w, (int64_t)j * w->vw)));
  for (int r = 0; r < mr; r++) {
    LLVMValueRef s = splat(w, LLVMBuildLoad2(w->b, ir->f32, at(w, arow, i64c(w, r * a_row)), ""), w->vt);
    for (int j = 0; j < nv; j++) next[r * nv + j] = ljc_fmuladd(ir, s, bv[j], K.acc[r * nv + j]);
  }
  ljc_loop_end(ir, &K, next, acc);
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nv; j++) vstore(w, acc[r * nv + j], at(w, row[r], i64c(w, (int64_t)j * w->vw)));
}

/* M[e] (m) for the tiles t0 .. t0 + mr - 1 and the rows mv .. mv + NV·vw - 1 of C: V[e] (v) ·
 * U[e] (u, at those rows) over clen channels. */
static void product_tile(wino *w, int mr, LLVMValueRef t0, LLVMValueRef mv, LLVMValueRef m, LLVMValueRef v,
                         LLVMValueRef u, LLVMValueRef clen, LLVMValueRef first) {
  LLVMValueRef row[MR_MAX];
  for (int r = 0; r < mr; r++) row[r] = at(w, m, add(w, mulc(w, addc(w, t0, r), MB), mv));
  register_tile(w, mr, row, first, clen, at(w, v, mulc(w, t0, CB)), CB, 1, u, MB);
}

/* M[e] for the block's count tiles and mwide rows: V[e] · U[e] over the block's clen channels
 * (U's from uc0), added to what M holds unless `first`; e a loop over the NE elements (the
 * routine compiles one product nest). The tiles go mr at a time, the last count mod mr in tiles of 4, 2 and 1 rows
 * (conv2 of MNISTNet has 49 tiles an image: rounded up to mr 8, a seventh more products). */
static void products(wino *w, LLVMValueRef count, LLVMValueRef mwide, LLVMValueRef clen, LLVMValueRef uc0,
                     LLVMValueRef first) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  LLVMValueRef whole = mulc(w, LLVMBuildSDiv(b, count, i64c(w, w->mr), ""), w->mr), rest = sub(w, count, whole);
  ljc_loop E, Mv, Tr;
  ljc_loop_begin(ir, &E, i64c(w, 0), i64c(w, NE), false, 0, NULL);
  LLVMValueRef u = at(w, w->u, mulc(w, E.iv, PLANE(UC * MB))), v = at(w, w->v, mulc(w, E.iv, PLANE(TB * CB)));
  LLVMValueRef m = at(w, w->m, mulc(w, E.iv, PLANE(TB * MB)));
  ljc_loop_begin_step(ir, &Mv, i64c(w, 0), mwide, NV * w->vw, false, 0, NULL);
  LLVMValueRef ut = at(w, u, add(w, mulc(w, uc0, MB), Mv.iv));
  ljc_loop_begin_step(ir, &Tr, i64c(w, 0), whole, w->mr, true, 0, NULL);
  product_tile(w, w->mr, Tr.iv, Mv.iv, m, v, ut, clen, first);
  ljc_loop_end(ir, &Tr, NULL, NULL);
  for (int part = 4; part >= 1; part /= 2) {
    if (part >= w->mr) continue;
    LLVMValueRef has = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, rest, i64c(w, part), ""), i64c(w, 0), "");
    LLVMBasicBlockRef after = ljc_if_begin(ir, has, "wino.rest");
    LLVMValueRef t0 = add(w, whole, LLVMBuildAnd(b, rest, i64c(w, ~(int64_t)(2 * part - 1)), ""));
    product_tile(w, part, t0, Mv.iv, m, v, ut, clen, first);
    ljc_if_end(ir, after);
  }
  ljc_loop_end(ir, &Mv, NULL, NULL);
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
  LLVMValueRef qw = mulc(w, tb->nc, TM), oy0 = mulc(w, tb->ty0, TM), ox0 = mulc(w, tb->tx0, TM);
  LLVMValueRef nrows = smin(w, mulc(w, tb->nr, TM), sub(w, w->oh, oy0)), ncols = smin(w, qw, sub(w, w->ow, ox0));
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
  ljc_loop_end(ir, &Mv, NULL, NULL);
  ljc_loop_end(ir, &Xv, NULL, NULL);
  ljc_loop_end(ir, &Y, NULL, NULL);
}

/* The position in Q (qw positions a row) of tile t's first output: its TM × TM outputs are
 * rows TM·(t / nc) on, columns TM·(t mod nc) on. */
static LLVMValueRef tile_q(wino *w, const tblock *tb, LLVMValueRef qw, LLVMValueRef t) {
  LLVMValueRef r = LLVMBuildSDiv(w->b, t, tb->nc, ""), c = LLVMBuildSRem(w->b, t, tb->nc, "");
  return add(w, mul(w, mulc(w, r, TM), qw), mulc(w, c, TM));
}

/* C's TM × TM outputs of the block's tiles for rows mb0 .. mb0 + mlen - 1 of the call's:
 * through Q, the block's outputs rows last (TM·nr rows of TM·nc positions, MB rows of C each). */
static void outputs(wino *w, const tblock *tb, LLVMValueRef mb0, LLVMValueRef mlen) {
  ljc_ir *ir = w->ir;
  LLVMValueRef qw = mulc(w, tb->nc, TM);
  ljc_loop T, Mv;
  ljc_loop_begin(ir, &T, i64c(w, 0), tb->count, false, 0, NULL);
  LLVMValueRef q0 = tile_q(w, tb, qw, T.iv);
  ljc_loop_begin(ir, &Mv, i64c(w, 0), channel_vectors(w, mlen), false, 0, NULL);
  LLVMValueRef mv = mulc(w, Mv.iv, w->vw);
  LLVMValueRef mm[NE], y[NE];
  for (int e = 0; e < NE; e++) mm[e] = vload(w, buf_at(w, w->m, e, TB, MB, T.iv, mv));
  /* the rows' bias, at M's point (1, 1): the output transform adds it to all TM × TM outputs */
  LLVMValueRef rows = LLVMBuildICmp(w->b, LLVMIntSLT, lanes_from(w, mv), splat32(w, mlen), "");
  mm[TN + 1] = ljc_gemm_add_row_bias(ir, w->arg, mm[TN + 1], w->bi, add(w, add(w, w->m0, mb0), mv), rows);
  transform_2d(w, output_1d, TN, TM, mm, y);
  for (int i = 0; i < TM; i++)
    for (int j = 0; j < TM; j++)
      vstore(w, y[i * TM + j], at(w, w->q, add(w, mulc(w, add(w, q0, addc(w, mul(w, i64c(w, i), qw), j)), MB), mv)));
  ljc_loop_end(ir, &Mv, NULL, NULL);
  ljc_loop_end(ir, &T, NULL, NULL);
  copy_out(w, tb, mb0, mlen);
}

/* Rows m0 .. m0 + len - 1 of matrix bi into C's rows from crow0. U is kept from the last
 * matrix's when it is the one block of rows and channels both need (the same weight for every
 * matrix, A's batch stride 0, as a convolution's): w->u_m0 and w->u_rows say which rows it
 * holds, u_rows -1 for none. */
static void matrix(wino *w, LLVMValueRef cin) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  LLVMValueRef nm = LLVMBuildSDiv(b, addc(w, w->len, MB - 1), i64c(w, MB), "");
  LLVMValueRef ncb = LLVMBuildSDiv(b, addc(w, cin, CB - 1), i64c(w, CB), "");
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
  LLVMValueRef cb0 = mulc(w, Cb.iv, CB), clen = smin(w, i64c(w, CB), sub(w, cin, cb0));
  after = ljc_if_begin(ir, LLVMBuildNot(b, all, ""), "wino.block_weights");
  weights(w, mb0, mlen, mwide, cb0, clen);
  ljc_if_end(ir, after);
  image im = operand_image(w, LJC_GEMM_B, w->bi);
  gather_block(w, &im, &tb, cb0, clen);
  inputs(w, &tb, clen);
  products(w, tb.count, mwide, clen, LLVMBuildSelect(b, all, cb0, i64c(w, 0), ""),
           LLVMBuildICmp(b, LLVMIntEQ, Cb.iv, i64c(w, 0), ""));
  ljc_loop_end(ir, &Cb, NULL, NULL);
  outputs(w, &tb, mb0, mlen);
  ljc_loop_end(ir, &Mb, NULL, NULL);
  ljc_loop_end(ir, &Cs, NULL, NULL);
  ljc_loop_end(ir, &Rb, NULL, NULL);
}

int64_t ljc_winograd_work_bytes(void) { return NE * PLANE(UC * MB) * 4 + 16; }

/* ---- the weight gradient ------------------------------------------------------------------ */

/* dM for the block's tiles and mwide rows m of dY: the output transform's adjoint of each
 * tile's TM × TM gradient (A·dY·Aᵀ), from Q (dY's positions, rows last). */
static void grad_outputs(wino *w, const tblock *tb, LLVMValueRef mwide) {
  ljc_ir *ir = w->ir;
  LLVMValueRef qw = mulc(w, tb->nc, TM);
  ljc_loop T, Mv;
  ljc_loop_begin(ir, &T, i64c(w, 0), tb->count, false, 0, NULL);
  LLVMValueRef q0 = at(w, w->q, mulc(w, tile_q(w, tb, qw, T.iv), MB));
  ljc_loop_begin_step(ir, &Mv, i64c(w, 0), mwide, w->vw, false, 0, NULL);
  LLVMValueRef d[NE], o[NE];
  for (int i = 0; i < TM; i++)
    for (int j = 0; j < TM; j++)
      d[i * TM + j] = vload(w, at(w, q0, add(w, mulc(w, addc(w, mulc(w, qw, i), j), MB), Mv.iv)));
  transform_2d(w, grad_output_1d, TM, TN, d, o);
  for (int e = 0; e < NE; e++) vstore(w, o[e], buf_at(w, w->m, e, TB, MB, T.iv, Mv.iv));
  ljc_loop_end(ir, &Mv, NULL, NULL);
  ljc_loop_end(ir, &T, NULL, NULL);
}

/* dU[e] += V[e]ᵀ · dM[e] over the block's count tiles, for cwide channels (mr at a time) and
 * mwide rows m (NV vectors at a time). */
static void grad_products(wino *w, LLVMValueRef count, LLVMValueRef cwide, LLVMValueRef mwide) {
  ljc_ir *ir = w->ir;
  ljc_loop E, Mv, Cr;
  ljc_loop_begin(ir, &E, i64c(w, 0), i64c(w, NE), false, 0, NULL);
  LLVMValueRef v = at(w, w->v, mulc(w, E.iv, PLANE(TB * CB))), m = at(w, w->m, mulc(w, E.iv, PLANE(TB * MB)));
  LLVMValueRef du = at(w, w->u, mulc(w, E.iv, PLANE(DU_ROWS * MB)));
  ljc_loop_begin_step(ir, &Mv, i64c(w, 0), mwide, NV * w->vw, false, 0, NULL);
  ljc_loop_begin_step(ir, &Cr, i64c(w, 0), cwide, w->mr, false, 0, NULL);
  LLVMValueRef row[MR_MAX];
  for (int r = 0; r < w->mr; r++) row[r] = at(w, du, add(w, mulc(w, addc(w, Cr.iv, r), MB), Mv.iv));
  register_tile(w, w->mr, row, NULL, count, at(w, v, Cr.iv), 1, CB, at(w, m, Mv.iv), MB);
  ljc_loop_end(ir, &Cr, NULL, NULL);
  ljc_loop_end(ir, &Mv, NULL, NULL);
  ljc_loop_end(ir, &E, NULL, NULL);
}

/* C's rows c·9 + t for the channels cb0 .. cb0 + clen - 1, columns mb0 .. mb0 + mlen - 1: the
 * weight transform's adjoint of dU (Gᵀ·dU·G, TN × TN to 3×3). */
static void grad_weights(wino *w, LLVMValueRef cb0, LLVMValueRef clen, LLVMValueRef mb0, LLVMValueRef mlen) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  const LLVMValueRef *a = w->arg;
  ljc_loop Cl, Mv;
  ljc_loop_begin(ir, &Cl, i64c(w, 0), clen, false, 0, NULL);
  ljc_loop_begin(ir, &Mv, i64c(w, 0), channel_vectors(w, mlen), false, 0, NULL);
  LLVMValueRef mv = mulc(w, Mv.iv, w->vw);
  LLVMValueRef x[NE], o[9];
  for (int e = 0; e < NE; e++) x[e] = vload(w, buf_at(w, w->u, e, DU_ROWS, MB, Cl.iv, mv));
  transform_2d(w, grad_weight_1d, TN, 3, x, o);
  LLVMValueRef lanes = LLVMBuildICmp(b, LLVMIntSLT, lanes_from(w, mv), splat32(w, mlen), "");
  LLVMValueRef row0 = mulc(w, add(w, cb0, Cl.iv), 9);
  for (int tap = 0; tap < 9; tap++) {
    LLVMValueRef off = sub(w, add(w, mul(w, addc(w, row0, tap), a[LJC_GEMM_N]), add(w, mb0, mv)), a[LJC_GEMM_C_ORIGIN]);
    masked_store(w, o[tap], at(w, a[LJC_GEMM_C], off), lanes);
  }
  ljc_loop_end(ir, &Mv, NULL, NULL);
  ljc_loop_end(ir, &Cl, NULL, NULL);
}

/* The weight gradient C = Σ_b im2col(x_b)·dY_bᵀ ([C·9, M], summed over the batch): for each
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
  LLVMValueRef rows = a[LJC_GEMM_M], N = a[LJC_GEMM_N], cin = LLVMBuildSDiv(b, rows, i64c(w, 9), "");
  LLVMValueRef n_lo = LLVMBuildSDiv(b, mul(w, a[LJC_GEMM_BEGIN], N), rows, "");
  LLVMValueRef n_hi = LLVMBuildSDiv(b, mul(w, a[LJC_GEMM_END], N), rows, "");
  LLVMValueRef nm = LLVMBuildSDiv(b, addc(w, sub(w, n_hi, n_lo), MB - 1), i64c(w, MB), "");
  LLVMValueRef ncb = LLVMBuildSDiv(b, addc(w, cin, CB - 1), i64c(w, CB), "");
  int64_t wide = NV * w->vw;
  ljc_loop Cb, Mb, Bl, Rb, Cs;
  ljc_loop_begin(ir, &Cb, i64c(w, 0), ncb, true, 0, NULL);
  LLVMValueRef cb0 = mulc(w, Cb.iv, CB), clen = smin(w, i64c(w, CB), sub(w, cin, cb0));
  LLVMValueRef cwide = mulc(w, LLVMBuildSDiv(b, addc(w, clen, w->mr - 1), i64c(w, w->mr), ""), w->mr);
  ljc_loop_begin(ir, &Mb, i64c(w, 0), nm, true, 0, NULL);
  LLVMValueRef mb0 = add(w, n_lo, mulc(w, Mb.iv, MB)), mlen = smin(w, i64c(w, MB), sub(w, n_hi, mb0));
  LLVMValueRef mwide = mulc(w, LLVMBuildSDiv(b, addc(w, mlen, wide - 1), i64c(w, wide), ""), wide);
  LLVMBuildMemSet(b, w->u, ljc_const_i(ir->i8, 0), ljc_i64(ir, NE * PLANE(DU_ROWS * MB) * 4), 64);
  ljc_loop_begin(ir, &Bl, i64c(w, 0), a[LJC_GEMM_BATCH], false, 0, NULL);
  image x = operand_image(w, LJC_GEMM_A, Bl.iv);
  image dy = {at(w, a[LJC_GEMM_B], mul(w, Bl.iv, a[LJC_GEMM_B_SB])), a[LJC_GEMM_B_SN], mul(w, w->ow, a[LJC_GEMM_B_SK]),
              a[LJC_GEMM_B_SK], w->oh, w->ow, a[LJC_GEMM_B_SB]};
  ljc_loop_begin(ir, &Rb, i64c(w, 0), w->nrb, false, 0, NULL);
  ljc_loop_begin(ir, &Cs, i64c(w, 0), w->nseg, false, 0, NULL);
  tblock tb = tile_block(w, Rb.iv, Cs.iv);
  gather_block(w, &x, &tb, cb0, clen);
  inputs(w, &tb, clen);
  channels_last(w, &dy, mulc(w, tb.ty0, TM), mulc(w, tb.tx0, TM), mulc(w, tb.nr, TM), mulc(w, tb.nc, TM), mb0, mlen,
                w->q, MB);
  grad_outputs(w, &tb, mwide);
  grad_products(w, tb.count, cwide, mwide);
  ljc_loop_end(ir, &Cs, NULL, NULL);
  ljc_loop_end(ir, &Rb, NULL, NULL);
  ljc_loop_end(ir, &Bl, NULL, NULL);
  grad_weights(w, cb0, clen, mb0, mlen);
  ljc_loop_end(ir, &Mb, NULL, NULL);
  ljc_loop_end(ir, &Cb, NULL, NULL);
}

/* The forward product's and the input gradient's matrices, the task range's one matrix's run
 * of rows at a time; U kept in the calling kernel's frame (WORK) from one call to the next. */
static void products_by_matrix(wino *w, LLVMValueRef fn, int variant) {
  ljc_ir *ir = w->ir;
  LLVMBuilderRef b = w->b;
  LLVMValueRef sm = w->arg[LJC_GEMM_A_SM], sk = w->arg[LJC_GEMM_A_SK];
  if (variant == LJC_GEMM_WINOGRAD_DX) { /* A = Wᵀ [c·9 + t, r]: the weight flipped, rows and channels swapped */
    w->w_origin = mulc(w, sm, 8), w->w_row = mulc(w, sm, 9), w->w_chan = sk, w->w_tap = LLVMBuildNeg(b, sm, "");
  } else { /* A = W [r, c·9 + t] */
    w->w_origin = i64c(w, 0), w->w_row = sm, w->w_chan = mulc(w, sk, 9), w->w_tap = sk;
  }
  w->u = w->arg[LJC_GEMM_WORK];
  w->u_m0 = LLVMBuildInBoundsGEP2(b, ir->i64, w->u, (LLVMValueRef[]){i64c(w, NE * PLANE(UC * MB) / 2)}, 1, "");
  w->u_rows = LLVMBuildInBoundsGEP2(b, ir->i64, w->u_m0, (LLVMValueRef[]){i64c(w, 1)}, 1, "");
  LLVMValueRef fresh = LLVMBuildICmp(b, LLVMIntNE, w->arg[LJC_GEMM_FRESH], i64c(w, 0), "");
  LLVMBuildStore(b, LLVMBuildSelect(b, fresh, i64c(w, -1), LLVMBuildLoad2(b, ir->i64, w->u_m0, ""), ""), w->u_m0);
  LLVMValueRef cin = LLVMBuildSDiv(b, w->arg[LJC_GEMM_K], i64c(w, 9), "");
  LLVMValueRef begin = w->arg[LJC_GEMM_BEGIN], end = w->arg[LJC_GEMM_END], M = w->arg[LJC_GEMM_M];
  LLVMBasicBlockRef entry = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(ir->ctx, fn, "wino.matrix");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "wino.matrices");
  LLVMBuildCondBr(b, lt(w, begin, end), head, done);
  LLVMPositionBuilderAtEnd(b, head);
  LLVMValueRef r = LLVMBuildPhi(b, ir->i64, "row");
  w->bi = LLVMBuildUDiv(b, r, M, ""), w->m0 = LLVMBuildURem(b, r, M, ""), w->crow0 = r;
  w->len = smin(w, sub(w, end, r), sub(w, M, w->m0));
  matrix(w, cin);
  LLVMValueRef r_next = add(w, r, w->len);
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
  LLVMBuildCondBr(b, lt(w, r_next, end), head, done);
  LLVMAddIncoming(r, &begin, &entry, 1);
  LLVMAddIncoming(r, &r_next, &latch, 1);
  LLVMPositionBuilderAtEnd(b, done);
}

void ljc_define_winograd(ljc_ir *ir, const char *name, int mr, int variant) {
  LLVMTypeRef param = ir->ptr;
  LLVMValueRef fn = LLVMAddFunction(ir->mod, name, LLVMFunctionType(ir->void_, &param, 1, 0));
  ljc_add_fn_attr(ir, fn, "nounwind");
  wino w = {.ir = ir, .b = ir->b, .vw = ir->vec_bytes / 4, .mr = mr};
  w.vt = LLVMVectorType(ir->f32, (unsigned)w.vw);
  w.it = LLVMVectorType(ir->i32, (unsigned)w.vw);
  LLVMBuilderRef b = w.b;
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry"));
  ljc_gemm_load_args(ir, LLVMGetParam(fn, 0), w.arg);
  bool wgrad = variant == LJC_GEMM_WINOGRAD_DW;
  /* P: at most (TM·a + 2)(TM·b + 2) positions for a·b <= TB tiles; Q: TM² outputs a tile */
  w.v = ljc_entry_array(ir, ir->f32, NE * PLANE(TB * CB));
  w.m = ljc_entry_array(ir, ir->f32, NE * PLANE(TB * MB));
  w.p = ljc_entry_array(ir, ir->f32, (TN * (TM * TB + 2) + w.vw) * CB);
  w.q = ljc_entry_array(ir, ir->f32, (TM * TM * TB + w.vw) * MB);
  /* the tiles of the output (of the product, or, for the weight gradient, of dY) */
  w.ow = w.arg[LJC_GEMM_WIN_OW];
  w.oh = LLVMBuildSDiv(b, w.arg[wgrad ? LJC_GEMM_K : LJC_GEMM_N], w.ow, "");
  w.tw = LLVMBuildSDiv(b, addc(&w, w.ow, TM - 1), i64c(&w, TM), "");
  w.th = LLVMBuildSDiv(b, addc(&w, w.oh, TM - 1), i64c(&w, TM), "");
  /* blocks of at most TB tiles: whole tile rows, as many as fit, in blocks of about equal
   * height; a tile row wider than TB in segments of about equal width */
  w.nseg = LLVMBuildSDiv(b, addc(&w, w.tw, TB - 1), i64c(&w, TB), "");
  w.cols_per = LLVMBuildSDiv(b, add(&w, w.tw, addc(&w, w.nseg, -1)), w.nseg, "");
  LLVMValueRef fit = LLVMBuildSDiv(b, i64c(&w, TB), w.cols_per, "");
  w.nrb = LLVMBuildSDiv(b, add(&w, w.th, addc(&w, fit, -1)), fit, "");
  w.rows_per = LLVMBuildSDiv(b, add(&w, w.th, addc(&w, w.nrb, -1)), w.nrb, "");
  if (wgrad) {
    w.u = ljc_entry_array(ir, ir->f32, NE * PLANE(DU_ROWS * MB));
    weight_gradient(&w);
  } else {
    products_by_matrix(&w, fn, variant);
  }
  LLVMBuildRetVoid(b);
}
