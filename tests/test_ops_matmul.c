/* test_ops_matmul.c — torch.matmul semantics against the interpreter: 1-D·1-D, 2-D·1-D,
 * 1-D·2-D, 2-D·2-D, batched with broadcast batch dims, transposed and sliced operands, fused
 * producers and consumers, every non-bool dtype, empty dims, the register-blocked kernels'
 * tile edges; and the errors. */
#include "test_util.h"

#include "codegen_llvm/codegen.h"
#include "runtime/runtime.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double tol(lj_dtype dt) {
  if (dt == LJ_F32) return 1e-5;
  if (dt == LJ_F64) return 1e-12;
  return tu_rtol(dt);
}

START_TEST(test_matmul_shapes) {
  for (int di = 0; di < LJ_NUM_DTYPES; di++) {
    lj_dtype dt = tu_all_dtypes[di];
    tu_values kind = (dt == LJ_BF16 || dt == LJ_F16) ? TU_UNIT : TU_ANY;
    lj_tensor *a = tu_tensor(dt, LJ_SHAPE(5, 7), kind, 1 + di);
    if (dt == LJ_BOOL) {
      ck_assert(!lj_matmul(a, a));
      tu_expect_error(LJ_ERR_DTYPE, "lj_matmul", "bool", NULL);
      lj_tensor_release(a);
      continue;
    }
    lj_tensor *b = tu_tensor(dt, LJ_SHAPE(7, 3), kind, 2 + di);
    lj_tensor *v7 = tu_tensor(dt, LJ_SHAPE(7), kind, 3 + di);
    lj_tensor *v5 = tu_tensor(dt, LJ_SHAPE(5), kind, 4 + di);
    lj_tensor *ba = tu_tensor(dt, LJ_SHAPE(2, 1, 5, 7), kind, 5 + di);
    lj_tensor *bb = tu_tensor(dt, LJ_SHAPE(3, 7, 4), kind, 6 + di);
    lj_tensor *ts[16];
    int n = 0;
    ts[n++] = lj_matmul(a, b);                          /* [5,3] */
    ts[n++] = lj_matmul(v7, v7);                        /* [] */
    ts[n++] = lj_matmul(a, v7);                         /* [5] */
    ts[n++] = lj_matmul(v5, a);                         /* [7] */
    ts[n++] = lj_matmul(ba, bb);                        /* [2,3,5,4] */
    ts[n++] = lj_matmul(lj_transpose(b, 0, 1), lj_transpose(a, 0, 1)); /* [3,5] via transposes */
    ts[n++] = lj_matmul(lj_slice(a, 1, 0, 7, 2), lj_slice(b, 0, 0, 7, 2));
    ts[n++] = lj_matmul(ba, v7);                        /* [2,1,5] */
    ts[n++] = lj_matmul(v5, ba);                        /* [2,1,7] */
    for (int i = 0; i < n; i++) ck_assert_msg(ts[i], "%s #%d: %s", lj_dtype_name(dt), i, lj_last_error());
    tu_check_interp_tol(n, ts, tol(dt), dt == LJ_F32 ? 1e-5 : -1);
    for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
    lj_tensor_release(a);
    lj_tensor_release(b);
    lj_tensor_release(v7);
    lj_tensor_release(v5);
    lj_tensor_release(ba);
    lj_tensor_release(bb);
  }
}
END_TEST

/* A linear layer: fused producer (relu) and consumers (bias, tanh) around the matmul; big
 * enough to be split across threads; an empty inner dim gives zeros, in f32 and in bf16 (the
 * first graph of the test: its casts' outputs, empty, are all the scratch it has, and it ran
 * while the device had no scratch memory yet). */
START_TEST(test_matmul_fused_and_large) {
  lj_tensor *h0 = tu_tensor(LJ_BF16, LJ_SHAPE(3, 0), TU_ANY, 7), *h1 = tu_tensor(LJ_BF16, LJ_SHAPE(0, 5), TU_ANY, 8);
  lj_tensor *h = lj_matmul(h0, h1);
  tu_check_interp_tol(1, &h, 0, 0);
  lj_tensor_release(h0);
  lj_tensor_release(h1);
  lj_tensor_release(h);
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(160, 96), TU_ANY, 1);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(80, 96), TU_UNIT, 2);
  lj_tensor *bias = tu_tensor(LJ_F32, LJ_SHAPE(80), TU_ANY, 3);
  lj_tensor *y = lj_tanh(lj_add(lj_matmul(lj_relu(x), lj_transpose(w, 0, 1)), bias));
  lj_tensor *e0 = tu_tensor(LJ_F32, LJ_SHAPE(4, 0), TU_ANY, 4), *e1 = tu_tensor(LJ_F32, LJ_SHAPE(0, 6), TU_ANY, 5);
  lj_tensor *ts[2] = {y, lj_matmul(e0, e1)};
  tu_check_interp_tol(2, ts, 2e-5, 1e-5);
  /* f64 sums of 257 products, whose order depends on how the threads split the rows (a
   * thread's few rows take dot products along k): an error of a few ulps of the terms' size,
   * not of an element that cancels to near zero */
  lj_tensor *big = tu_tensor(LJ_F64, LJ_SHAPE(130, 257), TU_ANY, 6);
  lj_tensor *gram = lj_matmul(big, lj_transpose(big, 0, 1));
  tu_check_interp_tol(1, &gram, 1e-12, 1e-12);
  lj_tensor_release(gram);
}
END_TEST

/* The operands of an [M, K] x [K, N] product of dtype dt laid out as layout 0..3 says: both
 * as stored, B transposed (an [N, K] read through a transpose), A transposed, B strided
 * along both dims (every other element of a [2K, 2N]). */
static void layout_operands(lj_dtype dt, int layout, int64_t M, int64_t N, int64_t K, uint64_t seed, lj_tensor **a,
                            lj_tensor **b) {
  *a = layout == 2 ? lj_transpose(tu_tensor(dt, LJ_SHAPE(K, M), TU_ANY, seed), 0, 1) : tu_tensor(dt, LJ_SHAPE(M, K), TU_ANY, seed);
  *b = layout == 1   ? lj_transpose(tu_tensor(dt, LJ_SHAPE(N, K), TU_ANY, seed + 7), 0, 1)
       : layout == 3 ? lj_slice(lj_slice(tu_tensor(dt, LJ_SHAPE(2 * K, 2 * N), TU_ANY, seed + 7), 0, 0, 2 * K, 2), 1, 1,
                                2 * N, 2)
                     : tu_tensor(dt, LJ_SHAPE(K, N), TU_ANY, seed + 7);
}

/* The products of every M × N × K of the grid (layout_operands' layout), into ts, seeded from
 * seed on; returns how many. */
static int grid_products(lj_dtype dt, int layout, const int64_t *Ms, int nm, const int64_t *Ns, int nn,
                         const int64_t *Ks, int nk, uint64_t seed, lj_tensor **ts) {
  int n = 0;
  for (int mi = 0; mi < nm; mi++)
    for (int ni = 0; ni < nn; ni++)
      for (int ki = 0; ki < nk; ki++) {
        lj_tensor *a, *b;
        layout_operands(dt, layout, Ms[mi], Ns[ni], Ks[ki], seed + (uint64_t)n, &a, &b);
        ts[n++] = lj_matmul(a, b);
        lj_tensor_release(a);
        lj_tensor_release(b);
      }
  return n;
}

/* The GEMM routines around their tile edges: rows 1, 3, 5, 6, 8, 13, 17 (with B transposed, up
 * to 4 of them as dot products; with B contiguous along n, read where it is, up to 4 as sums
 * of B's rows; fewer rows than a tile, up to half a tile's in a tile of half its rows, whole
 * tiles of 6 rows under AVX2 and of 8 under AVX-512, a tile for the rows left) and 70 (more
 * than read B in place: packed), columns 1, 12, 17, 150, 300 (a last panel with its first
 * vector partial, with its second partial for 12 under AVX2 and 150 under AVX-512, one column
 * past a full panel under AVX2, more panels than one packed block: 150 under AVX2, 300 under
 * both), k of 1 and 16 (B read where it is), 17 (rows of a transposed B left after whole
 * vectors) and 800 (blocks of k, run for each block of panels: C starts from zero in each);
 * with B contiguous along n, B transposed (packed by transposes), A transposed (and, where its
 * k are a page apart, or half a page over more than a block of k, packed by transposes:
 * batched, in blocks of rows and of k), and B
 * strided along both dims (packed element by element); batched with B broadcast; and more rows
 * than a block of rows, split across threads inside a matrix; convolutions, whose routine
 * packs B from the image, of 7 output channels, of 3 and of 4 groups of 2 (half a tile's rows
 * or fewer). Compiled for the host, and for an AVX2 and an SSE2 machine where the host runs
 * their code (x86-64). */
static const char *const tile_targets[] = {NULL, "haswell", "x86-64"};

/* Starts the runtime compiling for cpu (NULL: the host); false, starting nothing, where the
 * host cannot run that code. */
static bool init_target(const char *cpu) {
  if (!tu_host_runs(cpu)) return false;
  lj_config cfg = lj_config_default();
  cfg.cpu = cpu;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
  return true;
}

START_TEST(test_matmul_tiles) {
  static const int64_t Ms[] = {1, 3, 5, 6, 8, 13, 17, 70}, Ns[] = {1, 12, 17, 150, 300}, Ks[] = {1, 16, 17, 800};
  if (!init_target(tile_targets[_i])) return;
  for (int di = 0; di < 2; di++) {
    lj_dtype dt = di ? LJ_F64 : LJ_F32;
    for (int layout = 0; layout < 4; layout++) {
      lj_tensor *ts[160];
      int n = grid_products(dt, layout, Ms, 8, Ns, 5, Ks, 4, (uint64_t)(200 * layout), ts);
      tu_check_interp_tol(n, ts, tol(dt), dt == LJ_F32 ? 1e-3 : 1e-11); /* f32: sums of 800 products */
      for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
    }
    lj_tensor *ba = tu_tensor(dt, LJ_SHAPE(3, 37, 300), TU_ANY, 900);
    lj_tensor *w = tu_tensor(dt, LJ_SHAPE(300, 45), TU_ANY, 901), *wt = tu_tensor(dt, LJ_SHAPE(45, 300), TU_ANY, 902);
    lj_tensor *tall = tu_tensor(dt, LJ_SHAPE(2, 803, 40), TU_ANY, 903), *tw = tu_tensor(dt, LJ_SHAPE(37, 40), TU_ANY, 904);
    /* convolutions: B packed from the image (padded, strided), a pooled epilogue */
    lj_tensor *img = tu_tensor(dt, LJ_SHAPE(2, 5, 11, 11), TU_ANY, 905), *k = tu_tensor(dt, LJ_SHAPE(7, 5, 3, 3), TU_ANY, 906);
    /* a few rows without packing: batched with B broadcast, summed over the batch (B
     * transposed, and contiguous along n: read in place by 2 and by 37 rows), and x·W over two
     * chunks of columns (the second partial) and blocks of k whose last leaves rows of B after
     * whole steps; one row's chunks are longer: 4133 columns */
    lj_tensor *few = tu_tensor(dt, LJ_SHAPE(3, 2, 300), TU_ANY, 907), *fb = tu_tensor(dt, LJ_SHAPE(3, 45, 300), TU_ANY, 908);
    lj_tensor *fbn = tu_tensor(dt, LJ_SHAPE(3, 300, 45), TU_ANY, 916);
    lj_tensor *x2 = tu_tensor(dt, LJ_SHAPE(3, 643), TU_ANY, 909), *wide = tu_tensor(dt, LJ_SHAPE(643, 2100), TU_ANY, 910);
    lj_tensor *x1 = tu_tensor(dt, LJ_SHAPE(1, 50), TU_ANY, 911), *wider = tu_tensor(dt, LJ_SHAPE(50, 4133), TU_ANY, 912);
    /* A transposed, its k a page apart, packed by transposes: batched, 1000 rows of 1024 (a
     * block of rows of a partial vector), and blocks of k; and half a page apart, over more k
     * than a block (packed) */
    lj_tensor *bat = lj_slice(tu_tensor(dt, LJ_SHAPE(3, 300, 1024), TU_ANY, 913), 2, 0, 1000, 1);
    lj_tensor *tallt = tu_tensor(dt, LJ_SHAPE(800, 1024), TU_ANY, 914), *b20 = tu_tensor(dt, LJ_SHAPE(800, 20), TU_ANY, 915);
    lj_tensor *tallh = tu_tensor(dt, LJ_SHAPE(800, 2048 / (int64_t)lj_dtype_size(dt)), TU_ANY, 920);
    /* convolutions of 3 output channels, and of 4 groups of 2: fewer rows than half a tile */
    lj_tensor *k3 = tu_tensor(dt, LJ_SHAPE(3, 5, 3, 3), TU_ANY, 917);
    lj_tensor *img8 = tu_tensor(dt, LJ_SHAPE(2, 8, 9, 9), TU_ANY, 918);
    lj_tensor *kg = tu_tensor(dt, LJ_SHAPE(8, 2, 3, 3), TU_ANY, 919);
    static const int batch[1] = {0};
    lj_tensor *ts[16] = {lj_matmul(ba, w), lj_matmul(ba, lj_transpose(wt, 0, 1)),
                        lj_matmul(tall, lj_transpose(tw, 0, 1)),
                        lj_max_pool2d(lj_relu(lj_conv2d(img, k, NULL, NULL, (const int[]){1, 1}, NULL, 1)),
                                      (const int[]){2, 2}, NULL, NULL),
                        lj_conv2d(img, k, NULL, (const int[]){2, 2}, (const int[]){1, 1}, NULL, 1),
                        lj_matmul(few, lj_transpose(wt, 0, 1)), lj_sum(lj_matmul(few, lj_transpose(fb, 1, 2)), 1, batch, false),
                        lj_matmul(x2, wide), lj_matmul(x1, wider), lj_matmul(lj_transpose(bat, 1, 2), w),
                        lj_matmul(lj_transpose(tallt, 0, 1), b20), lj_sum(lj_matmul(few, fbn), 1, batch, false),
                        lj_sum(lj_matmul(ba, fbn), 1, batch, false),
                        lj_conv2d(img, k3, NULL, NULL, (const int[]){1, 1}, NULL, 1),
                        lj_conv2d(img8, kg, NULL, NULL, (const int[]){1, 1}, NULL, 4),
                        lj_matmul(lj_transpose(tallh, 0, 1), b20)};
    tu_check_interp_tol(16, ts, tol(dt), dt == LJ_F32 ? 1e-3 : 1e-11);
  }
}
END_TEST


/* x·Wᵀ of a few rows, a whole number of panels (16 to 96: the panels' widths of every target
 * and dtype), computed as (W·xᵀ)ᵀ: W's rows read where they are, the product transposed into
 * C block by block of 256 of its columns. f32, f64 and bf16 (a K of 17: W's pairs of k
 * packed); columns 1, 17 and 300 (two blocks, the second of 44), k of 1, 17 and 800 (blocks of
 * k); 40 rows, not whole panels under AVX-512; batched, relu(x·Wᵀ + b) with its epilogue, and A
 * a slice of rows from 3 on. Host, AVX2 and SSE2 code. */
START_TEST(test_matmul_swapped) {
  static const int64_t Ms[] = {16, 32, 40, 64, 96}, Ns[] = {1, 17, 300}, Ks[] = {1, 17, 800};
  if (!init_target(tile_targets[_i])) return;
  static const lj_dtype dts[3] = {LJ_F32, LJ_F64, LJ_BF16};
  for (int di = 0; di < 3; di++) {
    lj_dtype dt = dts[di];
    lj_tensor *ts[48];
    int n = grid_products(dt, 1, Ms, 5, Ns, 3, Ks, 3, 3000, ts);
    lj_tensor *xb = tu_tensor(dt, LJ_SHAPE(2, 32, 70), TU_ANY, 3100);
    lj_tensor *w = tu_tensor(dt, LJ_SHAPE(300, 70), TU_ANY, 3101);
    lj_tensor *bias = tu_tensor(dt, LJ_SHAPE(300), TU_ANY, 3102), *big = tu_tensor(dt, LJ_SHAPE(40, 70), TU_ANY, 3103);
    ts[n++] = lj_matmul(xb, lj_transpose(w, 0, 1));
    ts[n++] = lj_relu(lj_linear(lj_reshape(xb, LJ_SHAPE(64, 70)), w, bias));
    ts[n++] = lj_matmul(lj_slice(big, 0, 3, 35, 1), lj_transpose(w, 0, 1));
    tu_check_interp_tol(n, ts, tol(dt), dt == LJ_F64 ? 1e-11 : 1e-3);
    for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
    lj_tensor_release(xb);
    lj_tensor_release(w);
    lj_tensor_release(bias);
    lj_tensor_release(big);
  }
}
END_TEST

/* Starts the runtime on `threads` threads (on two, the larger products split between them)
 * compiling for cpu (NULL: the host), Winograd on or off, and dumping its compiles into a new
 * directory made from the template dir (mkdtemp). */
static void init_dumping(int threads, const char *cpu, bool winograd, char *dir) {
  ck_assert_ptr_nonnull(mkdtemp(dir));
  lj_config cfg = lj_config_default();
  cfg.num_threads = threads;
  cfg.cpu = cpu;
  cfg.winograd = winograd;
  cfg.dump_dir = dir;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
}

/* The convolution y of x by w with padding pad (NULL: none) and, for a gradient drawn from
 * seed flowing into it, the gradients of the leaves x and w are (views of), retained into
 * *dx and *dw; *y is y detached (the caller releases the three). */
static void conv_gradients(lj_tensor *x, lj_tensor *x_leaf, lj_tensor *w, lj_tensor *w_leaf, const int *pad,
                           uint64_t seed, lj_tensor **y, lj_tensor **dx, lj_tensor **dw) {
  ck_assert_int_eq(lj_tensor_set_requires_grad(x_leaf, true), LJ_OK);
  ck_assert_int_eq(lj_tensor_set_requires_grad(w_leaf, true), LJ_OK);
  lj_tensor *c = lj_conv2d(x, w, NULL, NULL, pad, NULL, 1);
  lj_tensor *g = tu_tensor(LJ_F32, lj_tensor_ndim(c), lj_tensor_shape(c), TU_ANY, seed);
  ck_assert_int_eq(lj_backward(lj_sum(lj_mul(c, g), 0, NULL, false)), LJ_OK);
  *y = lj_detach(c);
  *dx = lj_tensor_retain(lj_tensor_grad(x_leaf));
  *dw = lj_tensor_retain(lj_tensor_grad(w_leaf));
  lj_tensor_release(c);
  lj_tensor_release(g);
}

/* Weight gradients dY·colsᵀ for each image (not summed over the batch as one product): a
 * grouped convolution's, and an ungrouped one's at batch 1. The window_t routine packs B, the
 * im2col transposed, from the image, the window vectors of a panel's taps transposed into its
 * rows: "same" windows read as runs (4 groups; 899 positions, two blocks of k and a last
 * vector of positions past the end; 18 taps, a last panel of few columns), stride 2 (by pairs),
 * 5×5 without padding (by rows; 75 taps, a panel and a last one), stride 3 dilated (gathered),
 * and 360 taps at batch 1 (more panels than a block of them); f32 and, for the first, f64.
 * Their input gradients too. On two threads, compiled for the host, AVX2 and SSE2
 * (tile_targets). */
START_TEST(test_matmul_window_t) {
  const char *cpu = tile_targets[_i];
  if (!tu_host_runs(cpu)) return;
  char dir[] = "/tmp/lj_test_window_t_XXXXXX";
  init_dumping(2, cpu, true, dir);
  static const int64_t xs[][4] = {{3, 8, 29, 31}, {3, 8, 29, 31}, {2, 6, 13, 13}, {2, 9, 12, 10}, {2, 4, 14, 14}, {1, 40, 10, 10}};
  static const int64_t ws[][4] = {{12, 2, 3, 3}, {12, 2, 3, 3}, {4, 3, 3, 3}, {6, 3, 5, 5}, {4, 2, 3, 3}, {16, 40, 3, 3}};
  static const int groups[] = {4, 4, 2, 3, 2, 1}, strides[] = {1, 1, 2, 1, 3, 1}, pads[] = {1, 1, 1, 0, 2, 1};
  static const int dils[] = {1, 1, 1, 1, 2, 1};
  enum { NCASES = sizeof groups / sizeof *groups };
  lj_tensor *dws[NCASES], *dxs[NCASES];
  for (int i = 0; i < NCASES; i++) {
    lj_dtype dt = i == 1 ? LJ_F64 : LJ_F32;
    lj_tensor *x = tu_tensor(dt, 4, xs[i], TU_ANY, 40 + (uint64_t)i), *w = tu_tensor(dt, 4, ws[i], TU_ANY, 50 + (uint64_t)i);
    ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
    ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
    const int st[2] = {strides[i], strides[i]}, pd[2] = {pads[i], pads[i]}, dl[2] = {dils[i], dils[i]};
    lj_tensor *y = lj_conv2d(x, w, NULL, st, pd, dl, groups[i]);
    lj_tensor *g = tu_tensor(dt, lj_tensor_ndim(y), lj_tensor_shape(y), TU_ANY, 60 + (uint64_t)i);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
    dws[i] = lj_tensor_retain(lj_tensor_grad(w));
    dxs[i] = lj_tensor_retain(lj_tensor_grad(x));
    lj_tensor *ts[] = {x, w, y, g};
    for (int t = 0; t < 4; t++) lj_tensor_release(ts[t]);
  }
  /* sums of up to 899 products (f32); the ungrouped input gradient through Winograd's
   * transforms (test_matmul_winograd's bounds) */
  tu_check_interp_tol(NCASES, dws, 1e-5, 1e-4);
  tu_check_interp_tol(NCASES, dxs, 5e-5, 1e-2);
  ck_assert(tu_dir_has(dir, ".kernels.txt", "calls lj_gemm_f32_window_t"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "calls lj_gemm_f64_window_t"));
  for (int i = 0; i < NCASES; i++) {
    lj_tensor_release(dws[i]);
    lj_tensor_release(dxs[i]);
  }
  lj_shutdown();
  tu_remove_dir(dir);
}
END_TEST

/* Products of a short K (at most LJG_MATMUL_DIRECT_K) whose B is packed (transposed: the COLS
 * routine; strided along both dims: ELEMENTS): the call packs all of B at once and computes C
 * a tile of rows at a time across it. Rows over several blocks of MC and a band of fewer rows
 * than a tile at the end, a last panel of part of its columns, more columns than the buffer
 * holds panels of (13000 at K 16: blocks of panels), B broadcast over a batch, a relu after,
 * K 17 past the bound; f32 and f64, on two threads, compiled for the host, AVX2 and SSE2. */
START_TEST(test_matmul_short_k) {
  static const struct {
    int64_t batch, m, n, k;
    int layout; /* layout_operands' */
  } cases[] = {{1, 203, 1000, 3, 1}, {1, 9, 13000, 16, 1}, {1, 150, 700, 5, 3}, {2, 150, 500, 4, 1},
               {1, 203, 300, 17, 1}, {1, 300, 33, 1, 3}};
  enum { NCASES = sizeof cases / sizeof *cases };
  if (!tu_host_runs(tile_targets[_i])) return;
  for (int di = 0; di < 2; di++) {
    lj_dtype dt = di ? LJ_F64 : LJ_F32;
    char dir[] = "/tmp/lj_test_short_k_XXXXXX";
    init_dumping(2, tile_targets[_i], false, dir);
    lj_tensor *ts[NCASES + 1];
    lj_scope_begin();
    for (int c = 0; c < NCASES; c++) {
      lj_tensor *a, *b;
      layout_operands(dt, cases[c].layout, cases[c].batch * cases[c].m, cases[c].n, cases[c].k, 4000 + 20 * (uint64_t)c,
                      &a, &b);
      ts[c] = lj_matmul(lj_reshape(a, LJ_SHAPE(cases[c].batch, cases[c].m, cases[c].k)), b);
    }
    ts[NCASES] = lj_relu(lj_add_scalar(ts[0], -0.5));
    tu_check_interp_tol(NCASES + 1, ts, tol(dt), dt == LJ_F32 ? 1e-5 : 1e-13);
    lj_scope_end();
    char cols[40], elements[40];
    snprintf(cols, sizeof cols, "calls lj_gemm_%s_cols", di ? "f64" : "f32");
    snprintf(elements, sizeof elements, "calls lj_gemm_%s_elements", di ? "f64" : "f32");
    ck_assert(tu_dir_has(dir, ".kernels.txt", cols));
    ck_assert(tu_dir_has(dir, ".kernels.txt", elements));
    tu_remove_dir(dir);
    lj_shutdown();
  }
}
END_TEST

/* Products of one column, turned by the matmul pass into a row times the matrix transposed:
 * A's rows contiguous, the vector's elements too (dot products, the columns split across
 * the two threads in tasks, the last task partial), A transposed (B's rows added into the
 * row's sums, in chunks of columns), the vector a strided column of a matrix (tiles of one
 * row), batched, the vector broadcast over the batch, and relu(A·v + b) with its epilogue. f32
 * and f64; host, AVX2 and SSE2 code. */
START_TEST(test_matmul_vector) {
  if (!tu_host_runs(tile_targets[_i])) return;
  for (int di = 0; di < 2; di++) {
    lj_dtype dt = di ? LJ_F64 : LJ_F32;
    char dir[] = "/tmp/lj_test_vector_XXXXXX";
    init_dumping(2, tile_targets[_i], false, dir);
    lj_scope_begin();
    lj_tensor *w = tu_tensor(dt, LJ_SHAPE(2100, 643), TU_ANY, 5000), *v = tu_tensor(dt, LJ_SHAPE(643), TU_ANY, 5001);
    lj_tensor *wt = tu_tensor(dt, LJ_SHAPE(643, 2100), TU_ANY, 5002);
    lj_tensor *cols = tu_tensor(dt, LJ_SHAPE(643, 5), TU_ANY, 5003);
    lj_tensor *ba = tu_tensor(dt, LJ_SHAPE(3, 300, 70), TU_ANY, 5004);
    lj_tensor *bv = tu_tensor(dt, LJ_SHAPE(3, 70, 1), TU_ANY, 5005);
    lj_tensor *v70 = tu_tensor(dt, LJ_SHAPE(70), TU_ANY, 5006), *bias = tu_tensor(dt, LJ_SHAPE(2100), TU_ANY, 5007);
    lj_tensor *ts[6] = {lj_matmul(w, v),
                        lj_matmul(lj_transpose(wt, 0, 1), v),
                        lj_matmul(w, lj_slice(cols, 1, 3, 4, 1)),
                        lj_matmul(ba, bv),
                        lj_matmul(ba, v70),
                        lj_relu(lj_add(lj_matmul(w, v), bias))};
    tu_check_interp_tol(6, ts, tol(dt), dt == LJ_F32 ? 1e-3 : 1e-11); /* sums of 643 products */
    lj_scope_end();
    char routine[40];
    for (int r = 0; r < 2; r++) {
      snprintf(routine, sizeof routine, "calls lj_gemm_%s_%s", di ? "f64" : "f32", r ? "direct" : "cols");
      ck_assert_msg(tu_dir_has(dir, ".kernels.txt", routine), "%s", routine);
    }
    ck_assert(!tu_dir_has(dir, ".kernels.txt", "[1x2100x643] * [643x1]"));
    tu_remove_dir(dir);
    lj_shutdown();
  }
}
END_TEST

/* Convolutions of stride 2 over images of even height and width whose windows a row are half
 * the image's width (an odd window padded by (k - 1) / 2) pack their im2col from the image's
 * phase planes (gemm.c's split_phases), as B of the forward product and as A of the weight
 * gradient (the A-window routines): 3×3 over 12×12 and 14×10 (rows of 6 and 5 window
 * positions, fewer than a vector: runs across rows), 1×1 without padding, 7×7 and 5×5 (rows of
 * 8 and 9 positions), 9 to 20 output channels (not the taps routines' few), a bias and a relu
 * after, f32 and f64; an image of more than the phases' room (80 channels of 64×64, 1.25 MiB),
 * an odd side and a padding of 0 read the image as before. The output and the weight's
 * gradient against the interpreter, for the host, AVX2 and SSE2, one and two threads. */
START_TEST(test_matmul_window_phases) {
  const char *cpu = tile_targets[_i];
  if (!tu_host_runs(cpu)) return;
  static const struct {
    int64_t n, c, h, w, o;
    int k, pad;
    lj_dtype dt;
  } cases[] = {{2, 3, 12, 12, 9, 3, 1, LJ_F32},  {3, 5, 14, 10, 12, 3, 1, LJ_F32}, {2, 16, 8, 8, 20, 1, 0, LJ_F32},
               {1, 3, 16, 16, 10, 7, 3, LJ_F32}, {2, 4, 10, 18, 11, 5, 2, LJ_F32}, {2, 3, 12, 12, 9, 3, 1, LJ_F64},
               {1, 80, 64, 64, 9, 3, 1, LJ_F32}, {2, 3, 13, 12, 9, 3, 1, LJ_F32}, {2, 3, 12, 12, 9, 3, 0, LJ_F32}};
  enum { NCASES = sizeof cases / sizeof *cases };
  for (int threads = 1; threads <= 2; threads++) {
    char dir[] = "/tmp/lj_test_phases_XXXXXX";
    init_dumping(threads, cpu, true, dir);
    lj_tensor *ys[NCASES], *dws[NCASES];
    for (int i = 0; i < NCASES; i++) {
      int64_t n = cases[i].n, c = cases[i].c, o = cases[i].o, k = cases[i].k;
      lj_dtype dt = cases[i].dt;
      lj_tensor *x = tu_tensor(dt, LJ_SHAPE(n, c, cases[i].h, cases[i].w), TU_ANY, 70 + (uint64_t)i);
      lj_tensor *w = tu_tensor(dt, LJ_SHAPE(o, c, k, k), TU_ANY, 80 + (uint64_t)i);
      lj_tensor *b = tu_tensor(dt, LJ_SHAPE(o), TU_ANY, 90 + (uint64_t)i);
      const int pad[2] = {cases[i].pad, cases[i].pad};
      ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
      ys[i] = lj_relu(lj_conv2d(x, w, b, (const int[]){2, 2}, pad, NULL, 1));
      ck_assert_ptr_nonnull(ys[i]);
      lj_tensor *g = tu_tensor(dt, lj_tensor_ndim(ys[i]), lj_tensor_shape(ys[i]), TU_ANY, 100 + (uint64_t)i);
      ck_assert_int_eq(lj_backward(lj_sum(lj_mul(ys[i], g), 0, NULL, false)), LJ_OK);
      dws[i] = lj_tensor_retain(lj_tensor_grad(w));
      lj_tensor *ts[] = {x, w, b, g};
      for (size_t t = 0; t < sizeof ts / sizeof *ts; t++) lj_tensor_release(ts[t]);
    }
    tu_check_interp_tol(NCASES, ys, 1e-4, 1e-3);  /* sums of up to 720 products */
    tu_check_interp_tol(NCASES, dws, 1e-4, 1e-3); /* of up to 1024 */
    ck_assert(tu_dir_has(dir, ".kernels.txt", "calls lj_gemm_f32_window"));
    ck_assert(tu_dir_has(dir, ".kernels.txt", "calls lj_gemm_f64_window"));
    ck_assert(tu_dir_has(dir, ".kernels.txt", "calls lj_gemm_f32_cols_a_window"));
    ck_assert(tu_dir_has(dir, ".kernels.txt", "calls lj_gemm_f64_cols_a_window"));
    for (int i = 0; i < NCASES; i++) {
      lj_tensor_release(ys[i]);
      lj_tensor_release(dws[i]);
    }
    lj_shutdown();
    tu_remove_dir(dir);
  }
}
END_TEST

/* 3×3 convolutions of stride 1 go through the Winograd routines (the dump holds their
 * objects), both tilings: F(5×5, 3×3) where it takes fewer products (the 14×14 and 30×30
 * outputs), else F(4×4, 3×3); output sizes odd and even (tiles past the edge), padding 0, 1
 * and 2, channels in and out beyond one block of the routine (40 in: 32 and 8; 72 out: 64
 * and 8), more tiles than a block (30×30), fewer than a register tile's rows (4×6: 2 tiles,
 * in a register tile of 2; 27×28's blocks of 14 and 7 tiles take tiles of 4, 2 and 1 past a
 * multiple of 8; 14×14's 9 tiles an image, one register tile of 9 rows), a tile row wider
 * than a block (6×70: 18 tiles a row, in two segments), a strided image (a
 * permuted NHWC tensor), and a fused bias, relu and max-pool run block by block (the
 * transformed weight kept from one block to the next); and their input and weight
 * gradients, through its variants for them; 20 images of one block of tiles each (7×7: 4
 * tiles) with more channels than the routine's U holds (136), their products 16 images at a
 * time and then 4, the threads' ranges cutting some images' rows (the input gradient's 136
 * rows, more than a block's, row by row of every image); a weight stored [C, 3, 3,
 * O] (its taps O apart: gathered for the transform). Against the interpreter, for
 * the host, AVX2 and SSE2. */
START_TEST(test_matmul_winograd) {
  const char *cpu = tile_targets[_i];
  if (!tu_host_runs(cpu)) return;
  char dir[] = "/tmp/lj_test_winograd_XXXXXX";
  init_dumping(2, cpu, true, dir);
  const int one[2] = {1, 1}, two[2] = {2, 2};
  lj_tensor *x1 = tu_tensor(LJ_F32, LJ_SHAPE(2, 40, 13, 11), TU_ANY, 1), *w1 = tu_tensor(LJ_F32, LJ_SHAPE(72, 40, 3, 3), TU_ANY, 2);
  lj_tensor *x2 = tu_tensor(LJ_F32, LJ_SHAPE(3, 16, 9, 20), TU_ANY, 3), *w2 = tu_tensor(LJ_F32, LJ_SHAPE(20, 16, 3, 3), TU_ANY, 4);
  lj_tensor *x3 = tu_tensor(LJ_F32, LJ_SHAPE(1, 8, 5, 6), TU_ANY, 5), *w3 = tu_tensor(LJ_F32, LJ_SHAPE(9, 8, 3, 3), TU_ANY, 6);
  lj_tensor *x4 = tu_tensor(LJ_F32, LJ_SHAPE(1, 8, 30, 30), TU_ANY, 7), *w4 = tu_tensor(LJ_F32, LJ_SHAPE(16, 8, 3, 3), TU_ANY, 8);
  lj_tensor *nhwc = tu_tensor(LJ_F32, LJ_SHAPE(2, 12, 12, 16), TU_ANY, 9), *w5 = tu_tensor(LJ_F32, LJ_SHAPE(24, 16, 3, 3), TU_ANY, 10);
  lj_tensor *x7 = tu_tensor(LJ_F32, LJ_SHAPE(6, 32, 14, 14), TU_ANY, 13), *w7 = tu_tensor(LJ_F32, LJ_SHAPE(64, 32, 3, 3), TU_ANY, 14);
  lj_tensor *b7 = tu_tensor(LJ_F32, LJ_SHAPE(64), TU_ANY, 15);
  lj_tensor *x6 = tu_tensor(LJ_F32, LJ_SHAPE(2, 40, 4, 6), TU_ANY, 11), *w6 = tu_tensor(LJ_F32, LJ_SHAPE(36, 40, 3, 3), TU_ANY, 12);
  lj_tensor *x9 = tu_tensor(LJ_F32, LJ_SHAPE(2, 8, 6, 70), TU_ANY, 18), *w9 = tu_tensor(LJ_F32, LJ_SHAPE(8, 8, 3, 3), TU_ANY, 19);
  lj_tensor *x10 = tu_tensor(LJ_F32, LJ_SHAPE(20, 136, 7, 7), TU_ANY, 30);
  lj_tensor *w10 = tu_tensor(LJ_F32, LJ_SHAPE(40, 136, 3, 3), TU_ANY, 31);
  lj_tensor *cwho = tu_tensor(LJ_F32, LJ_SHAPE(16, 3, 3, 20), TU_ANY, 32); /* [C, H, W, O] */
  lj_tensor *w11 = lj_permute(cwho, 4, (const int[]){3, 0, 1, 2});
  lj_tensor *x11 = tu_tensor(LJ_F32, LJ_SHAPE(3, 16, 9, 20), TU_ANY, 33);
  lj_tensor *ts[] = {
      lj_conv2d(x11, w11, NULL, NULL, one, NULL, 1),
      lj_conv2d(x10, w10, NULL, NULL, one, NULL, 1),
      lj_conv2d(x1, w1, NULL, NULL, one, NULL, 1),
      lj_conv2d(x2, w2, NULL, NULL, NULL, NULL, 1),
      lj_conv2d(x3, w3, NULL, NULL, two, NULL, 1),
      lj_conv2d(x4, w4, NULL, NULL, one, NULL, 1),
      lj_conv2d(x6, w6, NULL, NULL, one, NULL, 1),
      lj_conv2d(x9, w9, NULL, NULL, one, NULL, 1),
      lj_conv2d(lj_permute(nhwc, 4, (const int[]){0, 3, 1, 2}), w5, NULL, NULL, one, NULL, 1),
      lj_max_pool2d(lj_relu(lj_conv2d(x7, w7, b7, NULL, one, NULL, 1)), two, NULL, NULL),
  };
  int n = (int)(sizeof ts / sizeof *ts);
  /* outputs of magnitude up to ~100 (360 products of values up to 4): F(4×4, 3×3)'s transforms
   * round to about 3e-5 of it, so elements near 0 take the absolute bound */
  tu_check_interp_tol(n, ts, 5e-5, 1e-2);
  ck_assert(tu_dir_has(dir, ".lj_gemm_f32_winograd.o", NULL));
  ck_assert(tu_dir_has(dir, ".lj_gemm_f32_winograd5.o", NULL));
  for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
  /* input and weight gradients: col2im(Wᵀ·dY) as the convolution of dY with the flipped
   * weight, padding 2 - p (p = 0, 1, 2), more rows and channels than a block (72 in, 40
   * out), odd sizes, many tiles, a strided image; Σ_b im2col(x_b)·dY_bᵀ through the
   * transforms' adjoints, on two threads each a share of dY's channels (32 split at the share
   * of the 81 rows, 9 channels' taps, each thread's range stands for) */
  lj_tensor *x8 = tu_tensor(LJ_F32, LJ_SHAPE(8, 9, 27, 28), TU_ANY, 16), *w8 = tu_tensor(LJ_F32, LJ_SHAPE(32, 9, 3, 3), TU_ANY, 17);
  lj_tensor *x5 = lj_permute(nhwc, 4, (const int[]){0, 3, 1, 2});
  lj_tensor *xs[] = {x1, x2, x3, x4, x6, x7, x8, x9, x10, x11, x5}, *ws[] = {w1, w2, w3, w4, w6, w7, w8, w9, w10, w11, w5};
  const int *pads[] = {one, NULL, two, one, one, one, one, one, one, one, one};
  enum { NCASES = sizeof xs / sizeof *xs };
  lj_tensor *dxs[NCASES], *dws[NCASES];
  for (int i = 0; i < NCASES; i++) {
    lj_tensor *y;
    conv_gradients(xs[i], i == NCASES - 1 ? nhwc : xs[i], ws[i], ws[i] == w11 ? cwho : ws[i], pads[i], 20 + (uint64_t)i,
                   &y, &dxs[i], &dws[i]);
    lj_tensor_release(y);
  }
  /* sums of up to 72·9 products (input) and 8·27·28 (weight, of magnitude up to ~400) through
   * the transforms: the weight gradient's sums of thousands of transformed products (the
   * transforms scale them by up to ~100 and back) round to about 1e-4 of their magnitude, the
   * GEMM's to about 1e-5 */
  tu_check_interp_tol(NCASES, dxs, 5e-5, 1e-2);
  tu_check_interp_tol(NCASES, dws, 1e-4, 5e-2);
  /* the input gradients call the forward product's routines (ljc_gemm_code) */
  ck_assert(tu_dir_has(dir, ".kernels.txt", "calls lj_gemm_f32_winograd; its col2im not run"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "calls lj_gemm_f32_winograd5; its col2im not run"));
  /* 30×30 planes of 72 rows (259 KB of C an image) had blocks sized for a C it never stores */
  ck_assert(tu_dir_has(dir, ".kernels.txt", "the image; no blocks: the routine takes a thread's planes in one call"));
  /* 136 rows of 20 images of 7×7 (the input gradient of x10) go row by row of every image */
  ck_assert(tu_dir_has(dir, ".kernels.txt", "one call; its tasks go row by row of every image"));
  ck_assert(!tu_dir_has(dir, "_dx.o", NULL));
  ck_assert(tu_dir_has(dir, ".lj_gemm_f32_winograd_dw.o", NULL));
  ck_assert(tu_dir_has(dir, ".lj_gemm_f32_winograd5_dw.o", NULL));
  for (int i = 0; i < NCASES; i++) {
    lj_tensor_release(dxs[i]);
    lj_tensor_release(dws[i]);
  }
  lj_tensor_release(x5);
  lj_tensor_release(w11);
  tu_remove_dir(dir);
}
END_TEST

/* 5×5 convolutions of stride 1 go through the Winograd routines of F(3×3, 5×5) and, where it
 * takes fewer products (4×4 outputs), F(2×2, 5×5): forward, input gradient (the convolution
 * of dY with the flipped weight, padded by 4 - p for p = 0 to 4, written into the col2im's
 * output) and weight gradient (the transforms' adjoints). Odd output sizes (tiles past the
 * edge), channels in and out beyond one block (40 in, 72 out), more channels than the
 * routine's U holds (136) over images of one block of tiles each (7×7: 9 tiles), a tile row
 * wider than a block (6×70), a strided image (a permuted NHWC tensor), a weight stored [C, 5,
 * 5, O] (gathered for the transform), and a fused bias, relu and max-pool. Against the
 * interpreter, for the host, AVX2 and SSE2, on two threads. */
START_TEST(test_matmul_winograd_5x5) {
  const char *cpu = tile_targets[_i];
  if (!tu_host_runs(cpu)) return;
  char dir[] = "/tmp/lj_test_winograd_5x5_XXXXXX";
  init_dumping(2, cpu, true, dir);
  const int two[2] = {2, 2};
  lj_tensor *nhwc = tu_tensor(LJ_F32, LJ_SHAPE(2, 12, 12, 16), TU_ANY, 40);
  lj_tensor *cwho = tu_tensor(LJ_F32, LJ_SHAPE(16, 5, 5, 20), TU_ANY, 41); /* [C, H, W, O] */
  lj_tensor *xs[] = {tu_tensor(LJ_F32, LJ_SHAPE(2, 40, 13, 11), TU_ANY, 42), tu_tensor(LJ_F32, LJ_SHAPE(3, 9, 8, 8), TU_ANY, 43),
                     tu_tensor(LJ_F32, LJ_SHAPE(1, 8, 9, 10), TU_ANY, 44), tu_tensor(LJ_F32, LJ_SHAPE(1, 8, 9, 9), TU_ANY, 45),
                     tu_tensor(LJ_F32, LJ_SHAPE(4, 136, 7, 7), TU_ANY, 46), tu_tensor(LJ_F32, LJ_SHAPE(2, 8, 6, 70), TU_ANY, 47),
                     lj_permute(nhwc, 4, (const int[]){0, 3, 1, 2}), tu_tensor(LJ_F32, LJ_SHAPE(3, 16, 9, 20), TU_ANY, 48),
                     tu_tensor(LJ_F32, LJ_SHAPE(2, 9, 4, 4), TU_ANY, 49)};
  lj_tensor *ws[] = {tu_tensor(LJ_F32, LJ_SHAPE(72, 40, 5, 5), TU_ANY, 50), tu_tensor(LJ_F32, LJ_SHAPE(16, 9, 5, 5), TU_ANY, 51),
                     tu_tensor(LJ_F32, LJ_SHAPE(8, 8, 5, 5), TU_ANY, 52), tu_tensor(LJ_F32, LJ_SHAPE(12, 8, 5, 5), TU_ANY, 53),
                     tu_tensor(LJ_F32, LJ_SHAPE(40, 136, 5, 5), TU_ANY, 54), tu_tensor(LJ_F32, LJ_SHAPE(8, 8, 5, 5), TU_ANY, 55),
                     tu_tensor(LJ_F32, LJ_SHAPE(24, 16, 5, 5), TU_ANY, 56), lj_permute(cwho, 4, (const int[]){3, 0, 1, 2}),
                     tu_tensor(LJ_F32, LJ_SHAPE(16, 9, 5, 5), TU_ANY, 58)};
  static const int pads[] = {2, 0, 3, 4, 2, 1, 2, 2, 2};
  enum { NCASES = sizeof pads / sizeof *pads };
  lj_tensor *ys[NCASES + 1], *dxs[NCASES], *dws[NCASES];
  for (int i = 0; i < NCASES; i++)
    conv_gradients(xs[i], i == 6 ? nhwc : xs[i], ws[i], i == 7 ? cwho : ws[i], (const int[]){pads[i], pads[i]},
                   60 + (uint64_t)i, &ys[i], &dxs[i], &dws[i]);
  lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(72), TU_ANY, 57);
  ys[NCASES] = lj_max_pool2d(lj_relu(lj_conv2d(lj_detach(xs[0]), lj_detach(ws[0]), b, NULL, two, NULL, 1)), two, NULL, NULL);
  /* sums of up to 136·25 products through the transforms (points ±2, -1/2: they scale values
   * by up to 16 and back), and the weight gradients' long sums, to test_matmul_winograd's
   * bounds */
  tu_check_interp_tol(NCASES + 1, ys, 5e-5, 1e-2);
  tu_check_interp_tol(NCASES, dxs, 5e-5, 1e-2);
  tu_check_interp_tol(NCASES, dws, 1e-4, 5e-2);
  ck_assert(tu_dir_has(dir, ".lj_gemm_f32_winograd3_5x5.o", NULL));
  ck_assert(tu_dir_has(dir, ".lj_gemm_f32_winograd2_5x5.o", NULL));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "calls lj_gemm_f32_winograd3_5x5; its col2im not run"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "calls lj_gemm_f32_winograd2_5x5; its col2im not run"));
  ck_assert(tu_dir_has(dir, ".lj_gemm_f32_winograd3_5x5_dw.o", NULL));
  ck_assert(tu_dir_has(dir, ".lj_gemm_f32_winograd2_5x5_dw.o", NULL));
  for (int i = 0; i < NCASES; i++) {
    lj_tensor *ts[] = {ys[i], dxs[i], dws[i], xs[i], ws[i]};
    for (size_t t = 0; t < sizeof ts / sizeof *ts; t++) lj_tensor_release(ts[t]);
  }
  lj_tensor_release(ys[NCASES]);
  lj_tensor_release(b);
  lj_tensor_release(nhwc);
  lj_tensor_release(cwho);
  lj_shutdown();
  tu_remove_dir(dir);
}
END_TEST

/* The dilated convolutions of test_matmul_winograd_dilated. */
static const struct {
  int64_t x[4], w[4];
  int pad[2], dil[2];
  bool transforms; /* through the sub-images and Winograd's transforms (with Winograd on) */
} dilated[] = {{{2, 16, 20, 24}, {12, 16, 3, 3}, {2, 2}, {2, 2}, true},
               {{1, 8, 15, 18}, {8, 8, 5, 5}, {6, 4}, {3, 2}, true},
               {{2, 16, 21, 24}, {12, 16, 3, 3}, {2, 2}, {2, 2}, false}};

/* Dilated convolution c's output and input and weight gradients for a gradient drawn from a
 * seed flowing into it, on two threads with Winograd on or off, checked against the
 * interpreter, read into out[0..2] (n[0..2] elements; the caller frees them); whether a
 * kernel called a Winograd routine. */
static bool dilated_conv(size_t c, bool winograd, double *out[3], int64_t n[3]) {
  char dir[] = "/tmp/lj_test_winograd_dilated_XXXXXX";
  init_dumping(2, NULL, winograd, dir);
  lj_tensor *x = tu_tensor(LJ_F32, 4, dilated[c].x, TU_ANY, 70 + c), *w = tu_tensor(LJ_F32, 4, dilated[c].w, TU_ANY, 80 + c);
  ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
  ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
  lj_tensor *y = lj_conv2d(x, w, NULL, NULL, dilated[c].pad, dilated[c].dil, 1);
  ck_assert_msg(y != NULL, "%s", lj_last_error());
  lj_tensor *g = tu_tensor(LJ_F32, lj_tensor_ndim(y), lj_tensor_shape(y), TU_ANY, 90 + c);
  ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
  lj_tensor *values[] = {y, lj_tensor_grad(x), lj_tensor_grad(w)};
  tu_check_interp_tol(2, values, 5e-5, 1e-2); /* test_matmul_winograd_5x5's bounds */
  tu_check_interp_tol(1, values + 2, 1e-4, 5e-2);
  for (int i = 0; i < 3; i++) out[i] = tu_read(values[i], &n[i]);
  bool transforms = tu_dir_has(dir, ".kernels.txt", "calls lj_gemm_f32_winograd");
  lj_tensor *all[] = {x, w, y, g};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) lj_tensor_release(all[i]);
  lj_shutdown();
  tu_remove_dir(dir);
  return transforms;
}

/* A dilated convolution of stride 1 whose dilation divides the image's sides and the padding
 * runs as the undilated convolutions of the image's sub-images (every d-th row and column,
 * as batches), and so through Winograd's transforms: 3×3 dilated by 2 (20×24), 5×5 dilated by
 * 3 along the rows and 2 along the columns (15×18, six sub-images). Not where the dilation
 * does not divide a side (21 rows), nor with Winograd off. Forward, input and weight
 * gradients against the interpreter (which computes the sub-images too) and, with Winograd
 * on, against the same with it off (the dilated windows as they are). */
START_TEST(test_matmul_winograd_dilated) {
  for (size_t c = 0; c < sizeof dilated / sizeof *dilated; c++) {
    double *on[3], *off[3];
    int64_t n[3], m[3];
    ck_assert_int_eq(dilated_conv(c, true, on, n), dilated[c].transforms);
    ck_assert(!dilated_conv(c, false, off, m));
    for (int i = 0; i < 3; i++) {
      ck_assert_int_eq(n[i], m[i]);
      double atol = i == 2 ? 5e-2 : 1e-2, rtol = i == 2 ? 1e-4 : 5e-5;
      for (int64_t j = 0; j < n[i]; j++)
        ck_assert_msg(fabs(on[i][j] - off[i][j]) <= atol + rtol * fabs(off[i][j]),
                      "case %zu, tensor %d, element %lld: %g against %g", c, i, (long long)j, on[i][j], off[i][j]);
      free(on[i]);
      free(off[i]);
    }
  }
}
END_TEST

/* With lj_config.winograd off, a 3×3 convolution that would take the Winograd routines
 * (MNISTNet's conv2, a bias, relu and max-pool fused) goes through the GEMM, forward, input
 * and weight gradients, and agrees with the interpreter to the GEMM's rounding. */
START_TEST(test_matmul_winograd_off) {
  char dir[] = "/tmp/lj_test_winograd_off_XXXXXX";
  init_dumping(2, NULL, false, dir);
  const int one[2] = {1, 1}, two[2] = {2, 2};
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(4, 32, 14, 14), TU_UNIT, 1), *w = tu_tensor(LJ_F32, LJ_SHAPE(64, 32, 3, 3), TU_UNIT, 2);
  lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(64), TU_UNIT, 3);
  ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
  ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
  lj_tensor *y = lj_conv2d(x, w, b, NULL, one, NULL, 1);
  lj_tensor *pooled = lj_max_pool2d(lj_relu(y), two, NULL, NULL);
  lj_tensor *g = tu_tensor(LJ_F32, LJ_SHAPE(4, 64, 14, 14), TU_UNIT, 4);
  ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
  lj_tensor *values[] = {y, pooled, lj_tensor_grad(x), lj_tensor_grad(w)};
  /* sums of 288 products (forward, input gradient) and 784 (weight), magnitudes ~10: the
   * Winograd routines' rounding (~3e-4 here) would not pass */
  tu_check_interp_tol(4, values, 1e-5, 2e-5);
  ck_assert(!tu_dir_has(dir, ".lj_gemm_f32_winograd.o", NULL));
  ck_assert(!tu_dir_has(dir, ".kernels.txt", "its col2im not run"));
  ck_assert(!tu_dir_has(dir, ".lj_gemm_f32_winograd_dw.o", NULL));
  lj_tensor *all[] = {x, w, b, y, pooled, g};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) lj_tensor_release(all[i]);
  tu_remove_dir(dir);
}
END_TEST

/* The weight gradients of 3×3 convolutions over 1 to 3 channels go through the taps routine
 * (the dump holds its object): rows narrower than a vector and wider than one (two vectors, the
 * second partly past the row), padding 0 to 2, a row stride of 2 and dilation 2, output
 * channels odd (the last register tile's second column a copy of its first) and split between
 * two threads at the share of the rows each thread's range stands for; MNISTNet's conv1; and an
 * image whose rows are not contiguous, which the GEMM takes. Against the interpreter, for the
 * host, AVX2 and SSE2. */
START_TEST(test_matmul_taps) {
  const char *cpu = tile_targets[_i];
  if (!tu_host_runs(cpu)) return;
  char dir[] = "/tmp/lj_test_taps_XXXXXX";
  init_dumping(2, cpu, true, dir);
  struct {
    int64_t n, c, h, w, o;
    int stride[2], pad[2], dilation[2];
    bool nhwc; /* a permuted NHWC image: its rows not contiguous, the GEMM's */
  } cases[] = {
      {3, 1, 13, 11, 5, {1, 1}, {1, 1}, {1, 1}, false}, {2, 3, 9, 20, 7, {1, 1}, {2, 2}, {1, 1}, false},
      {2, 2, 17, 19, 4, {2, 1}, {1, 0}, {2, 2}, false}, {4, 1, 28, 28, 32, {1, 1}, {1, 1}, {1, 1}, false},
      {1, 1, 3, 3, 1, {1, 1}, {0, 0}, {1, 1}, false},   {2, 3, 9, 10, 5, {1, 1}, {1, 1}, {1, 1}, true},
      {2, 2, 28, 28, 40, {1, 1}, {1, 1}, {1, 1}, false}, {2, 2, 28, 28, 39, {1, 1}, {1, 1}, {1, 1}, false},
  };
  enum { NCASES = sizeof cases / sizeof *cases };
  lj_tensor *dws[NCASES];
  for (int i = 0; i < NCASES; i++) {
    lj_tensor *leaf = cases[i].nhwc
                          ? tu_tensor(LJ_F32, LJ_SHAPE(cases[i].n, cases[i].h, cases[i].w, cases[i].c), TU_ANY, 30 + (uint64_t)i)
                          : tu_tensor(LJ_F32, LJ_SHAPE(cases[i].n, cases[i].c, cases[i].h, cases[i].w), TU_ANY, 30 + (uint64_t)i);
    lj_tensor *x = cases[i].nhwc ? lj_permute(leaf, 4, (const int[]){0, 3, 1, 2}) : lj_tensor_retain(leaf);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(cases[i].o, cases[i].c, 3, 3), TU_ANY, 40 + (uint64_t)i);
    ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
    lj_tensor *y = lj_conv2d(x, w, NULL, cases[i].stride, cases[i].pad, cases[i].dilation, 1);
    ck_assert_ptr_nonnull(y);
    lj_tensor *g = tu_tensor(LJ_F32, lj_tensor_ndim(y), lj_tensor_shape(y), TU_ANY, 50 + (uint64_t)i);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
    dws[i] = lj_tensor_retain(lj_tensor_grad(w));
    lj_tensor *all[] = {leaf, x, w, y, g};
    for (size_t j = 0; j < sizeof all / sizeof *all; j++) lj_tensor_release(all[j]);
  }
  /* each lane sums a share of up to 4·28·28 products in order (SSE2's 4 lanes 784 each); the
   * last two cases' 720 and 702 sums of 2·28·28 products each have some that cancel to a few
   * hundredths, 1.5e-4 from the interpreter's with SSE2 */
  tu_check_interp_tol(NCASES - 2, dws, 1e-4, 1e-4);
  tu_check_interp_tol(2, dws + NCASES - 2, 1e-4, 5e-4);
  ck_assert(tu_dir_has(dir, ".lj_gemm_f32_taps_dw.o", NULL));
  /* tasks of columns (40 output channels: 20 tasks; 39: 20, the last of one column; the last
   * two cases split between the threads) */
  ck_assert(tu_dir_has(dir, ".kernels.txt", "(matmul_sum), 20 tasks of 2 columns"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "(matmul_sum), 16 tasks of 2 columns"));
  for (int i = 0; i < NCASES; i++) lj_tensor_release(dws[i]);
  tu_remove_dir(dir);
}
END_TEST

/* 3×3 convolutions of column stride 1 or 2 with at most 8 output rows a matrix (output channels
 * a group) take the taps routine for their forward product, their input gradient (at most 8
 * input channels a group, stride 1) and their weight gradient for each image, and agree with
 * the interpreter: groups of 4 channels (a bias after the product, its nest), 1 to 8 rows
 * (tiles of 4 and of 8 rows, partly filled), rows of 7, 11, 22 and 28 positions (a vector's
 * lanes partly used; two vectors), two output rows at a time sharing the image's rows (row
 * stride 1, or 2 with dilation 2) or not (stride 2, dilation 1; an odd row last), a column
 * stride of 2 (the even lanes of two vectors; output rows of 6, 11 and 20 positions), a bias the
 * routine starts from (groups = 1), padding 0 to 2, a relu after, one and two threads. The
 * GEMM's and the Winograd routine's grouped convolutions (groups of 12 rows from 4 channels;
 * of 16 from 16) start C's rows from their bias too, a group's matrices each image's. */
START_TEST(test_matmul_taps_few_rows) {
  const char *cpu = tile_targets[_i];
  if (!tu_host_runs(cpu)) return;
  for (int threads = 1; threads <= 2; threads++) {
    char dir[] = "/tmp/lj_test_taps_rows_XXXXXX";
    init_dumping(threads, cpu, true, dir);
    struct {
      int64_t n, c, h, w, o;
      int groups, stride[2], pad[2], dilation[2];
      bool bias, relu;
    } cases[] = {
        {2, 8, 28, 28, 8, 2, {1, 1}, {1, 1}, {1, 1}, true, false},
        {3, 3, 13, 11, 5, 1, {1, 1}, {1, 1}, {1, 1}, true, true},
        {2, 4, 9, 20, 6, 2, {2, 1}, {2, 2}, {2, 2}, false, false},
        {2, 4, 12, 20, 6, 2, {2, 1}, {1, 1}, {1, 1}, false, true},
        {2, 8, 7, 7, 24, 4, {1, 1}, {1, 1}, {1, 1}, true, true},
        {1, 1, 3, 3, 1, 1, {1, 1}, {0, 0}, {1, 1}, false, false},
        {2, 6, 11, 17, 3, 1, {1, 1}, {0, 2}, {1, 1}, false, false},
        {2, 8, 9, 9, 24, 2, {1, 1}, {1, 1}, {1, 1}, true, false},
        {2, 8, 15, 21, 8, 2, {2, 2}, {1, 1}, {1, 1}, true, false},
        {2, 12, 9, 40, 12, 2, {1, 2}, {1, 1}, {1, 1}, false, false},
        {1, 4, 11, 13, 4, 2, {2, 2}, {2, 2}, {2, 2}, false, true},
        {5, 9, 10, 9, 8, 1, {1, 1}, {1, 1}, {1, 1}, true, false},
        {2, 32, 9, 9, 32, 2, {1, 1}, {1, 1}, {1, 1}, true, false},
    };
    enum { NCASES = sizeof cases / sizeof *cases };
    lj_tensor *ys[NCASES], *dxs[NCASES], *dws[NCASES];
    for (int i = 0; i < NCASES; i++) {
      uint64_t seed = 60 + 4 * (uint64_t)i;
      lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(cases[i].n, cases[i].c, cases[i].h, cases[i].w), TU_ANY, seed);
      lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(cases[i].o, cases[i].c / cases[i].groups, 3, 3), TU_ANY, seed + 1);
      lj_tensor *b = cases[i].bias ? tu_tensor(LJ_F32, LJ_SHAPE(cases[i].o), TU_ANY, seed + 2) : NULL;
      ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
      ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
      lj_tensor *y = lj_conv2d(x, w, b, cases[i].stride, cases[i].pad, cases[i].dilation, cases[i].groups);
      ck_assert_ptr_nonnull(y);
      ys[i] = cases[i].relu ? lj_relu(y) : lj_tensor_retain(y);
      lj_tensor *g = tu_tensor(LJ_F32, lj_tensor_ndim(y), lj_tensor_shape(y), TU_ANY, seed + 3);
      ck_assert_int_eq(lj_backward(lj_sum(lj_mul(ys[i], g), 0, NULL, false)), LJ_OK);
      dxs[i] = lj_tensor_retain(lj_tensor_grad(x));
      dws[i] = lj_tensor_retain(lj_tensor_grad(w));
      lj_tensor *all[] = {x, w, b, y, g, ys[i]};
      ys[i] = lj_detach(ys[i]);
      for (size_t j = 0; j < sizeof all / sizeof *all; j++) lj_tensor_release(all[j]);
    }
    tu_check_interp_tol(NCASES - 1, ys, 1e-5, 1e-4); /* sums of up to 9·9 products, some cancelling */
    tu_check_interp_tol(1, ys + NCASES - 1, 5e-5, 1e-3); /* Winograd: about 3e-5 of values of ~10 */
    tu_check_interp_tol(NCASES - 2, dxs, 1e-5, 1e-4); /* sums of up to 12·9 products, some cancelling */
    tu_check_interp_tol(2, dxs + NCASES - 2, 5e-5, 1e-3); /* Winograd's, from 8 and 16 channels */
    tu_check_interp_tol(NCASES - 2, dws, 1e-4, 1e-3); /* sums of up to 2·784 products */
    ck_assert(tu_dir_has(dir, ".kernels.txt", "calls lj_gemm_f32_taps_wt"));
    ck_assert(tu_dir_has(dir, ".kernels.txt", "calls lj_gemm_f32_taps_fwd; its col2im not run: the routine writes"));
    static const char *const routines[] = {"taps_fwd", "window", "winograd5"};
    for (int r = 0; r < 3; r++) {
      char text[96];
      snprintf(text, sizeof text, "calls lj_gemm_f32_%s; nest 0 not run: the routine starts C's rows", routines[r]);
      ck_assert_msg(tu_dir_has(dir, ".kernels.txt", text), "%s", text);
    }
    for (int i = 0; i < NCASES; i++) lj_tensor_release(ys[i]), lj_tensor_release(dxs[i]), lj_tensor_release(dws[i]);
    tu_remove_dir(dir);
    lj_shutdown();
  }
}
END_TEST

/* A product whose A is broadcast over B's leading batch dims, [G, M, K] · [N, G, K, P], reads
 * A's G matrices again for each of the N (mm_a_period) instead of storing the N·G of them: f32
 * through the GEMM (rows of C in tasks that split each run of G matrices on two threads), f64,
 * an i64 product (no routine: A stored as before) and one of no broadcast. Against the
 * interpreter; fails with the runs' B left at the first run's. */
START_TEST(test_matmul_a_period) {
  for (int threads = 1; threads <= 2; threads++) {
    char dir[] = "/tmp/lj_test_a_period_XXXXXX";
    init_dumping(threads, NULL, true, dir);
    lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(3, 37, 64), TU_ANY, 1);
    lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(5, 3, 64, 100), TU_ANY, 2);
    lj_tensor *c = tu_tensor(LJ_F64, LJ_SHAPE(2, 8, 33), TU_ANY, 3);
    lj_tensor *d = tu_tensor(LJ_F64, LJ_SHAPE(5, 2, 33, 17), TU_ANY, 4);
    lj_tensor *e = tu_tensor(LJ_I64, LJ_SHAPE(2, 3, 4), TU_ANY, 5), *f = tu_tensor(LJ_I64, LJ_SHAPE(3, 2, 4, 5), TU_ANY, 6);
    lj_tensor *bt = lj_permute(b, 4, (const int[]){0, 1, 3, 2});
    lj_tensor *ys[] = {lj_matmul(a, b), lj_matmul(c, d), lj_matmul(e, f), lj_matmul(bt, b)};
    for (int i = 0; i < 4; i++) ck_assert_ptr_nonnull(ys[i]);
    tu_check_interp_tol(4, ys, 1e-5, 1e-4); /* sums of 64 products */
    ck_assert(tu_dir_has(dir, ".kernels.txt", "A's 3 matrices again and again"));
    ck_assert(tu_dir_has(dir, ".kernels.txt", "A's 2 matrices again and again"));
    lj_tensor *all[] = {a, b, c, d, e, f, bt, ys[0], ys[1], ys[2], ys[3]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) lj_tensor_release(all[i]);
    tu_remove_dir(dir);
    lj_shutdown();
  }
}
END_TEST

/* Random weight gradients of 3×3 convolutions over 1 to 3 channels that take the taps routine
 * (1 to 3 images of 1 to 20 × 1 to 30, 1 to 40 output channels, padding 0 to 2, a row stride
 * and dilations of 1 or 2) agree with the interpreter. */
START_TEST(test_matmul_taps_random) {
  uint64_t state = 91;
  int checked = 0;
  for (int prog = 0; prog < 24; prog++) {
    lj_scope_begin();
    int64_t N = tu_pick(&state, 1, 3), C = tu_pick(&state, 1, 3), O = tu_pick(&state, 1, 40);
    int64_t H = tu_pick(&state, 1, 20), W = tu_pick(&state, 1, 30);
    int stride[2] = {(int)tu_pick(&state, 1, 2), 1}, pad[2] = {(int)tu_pick(&state, 0, 2), (int)tu_pick(&state, 0, 2)};
    int dilation[2] = {(int)tu_pick(&state, 1, 2), (int)tu_pick(&state, 1, 2)};
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(N, C, H, W), TU_UNIT, 100 + (uint64_t)prog);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(O, C, 3, 3), TU_UNIT, 200 + (uint64_t)prog);
    ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
    lj_tensor *y = lj_conv2d(x, w, NULL, stride, pad, dilation, 1);
    if (!y) { /* a window larger than the padded image */
      lj_clear_error();
      lj_scope_end();
      continue;
    }
    lj_tensor *g = tu_tensor(LJ_F32, lj_tensor_ndim(y), lj_tensor_shape(y), TU_UNIT, 300 + (uint64_t)prog);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
    lj_tensor *dw = lj_tensor_grad(w);
    tu_check_interp_tol(1, &dw, 1e-4, 1e-4);
    checked++;
    lj_scope_end();
  }
  ck_assert_int_ge(checked, 12);
}
END_TEST

/* Random 3×3 convolutions of stride 1 that take the Winograd routine (8 to 40 channels in, 8
 * to 72 out, 1 to 3 images of 1 to 20 × 1 to 20, padding 0 to 2, a bias or not, the image
 * contiguous or a permuted NHWC tensor): the output, a relu and max-pool of it (the fused
 * epilogue) and the gradients of the image and the weight agree with the interpreter. */
START_TEST(test_matmul_winograd_random) {
  uint64_t state = 77;
  int checked = 0;
  for (int prog = 0; prog < 16; prog++) {
    lj_scope_begin();
    int64_t N = tu_pick(&state, 1, 3), C = tu_pick(&state, 8, 40), O = tu_pick(&state, 8, 72);
    int64_t H = tu_pick(&state, 1, 20), W = tu_pick(&state, 1, 20);
    int pad[2] = {(int)tu_pick(&state, 0, 2), (int)tu_pick(&state, 0, 2)};
    bool nhwc = tu_pick(&state, 0, 3) == 0, pool = tu_pick(&state, 0, 2) == 0;
    lj_tensor *leaf = nhwc ? tu_tensor(LJ_F32, LJ_SHAPE(N, H, W, C), TU_UNIT, (uint64_t)prog)
                           : tu_tensor(LJ_F32, LJ_SHAPE(N, C, H, W), TU_UNIT, (uint64_t)prog);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(O, C, 3, 3), TU_UNIT, (uint64_t)prog + 1);
    lj_tensor *b = tu_pick(&state, 0, 1) ? tu_tensor(LJ_F32, LJ_SHAPE(O), TU_UNIT, (uint64_t)prog + 2) : NULL;
    ck_assert_int_eq(lj_tensor_set_requires_grad(leaf, true), LJ_OK);
    ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
    lj_tensor *x = nhwc ? lj_permute(leaf, 4, (const int[]){0, 3, 1, 2}) : leaf;
    lj_tensor *y = lj_conv2d(x, w, b, NULL, pad, NULL, 1);
    if (!y) { /* a window larger than the padded image */
      lj_clear_error();
      lj_scope_end();
      continue;
    }
    /* the pooled value only: the gradient through a max-pool goes where the rounding of the
     * product puts the maximum of two values within an ulp, the interpreter's elsewhere */
    lj_tensor *pooled = pool && lj_tensor_shape(y)[2] >= 2 && lj_tensor_shape(y)[3] >= 2
                            ? lj_max_pool2d(lj_relu(y), (const int[]){2, 2}, NULL, NULL)
                            : y;
    lj_tensor *g = tu_tensor(LJ_F32, lj_tensor_ndim(y), lj_tensor_shape(y), TU_UNIT, (uint64_t)prog + 3);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
    lj_tensor *values[3] = {y, pooled, lj_tensor_grad(leaf)};
    tu_check_interp_tol(3, values, 5e-5, 1e-3); /* values of magnitude ~10: about 3e-5 of it */
    lj_tensor *dw = lj_tensor_grad(w);
    tu_check_interp_tol(1, &dw, 1e-4, 1e-3);
    checked++;
    lj_scope_end();
  }
  ck_assert_int_ge(checked, 10);
}
END_TEST

/* The weight gradients of test_matmul_batch_halves on `threads` threads, checked against the
 * interpreter: their values, one after another (malloc'd), and their count in *n. */
static void *halves_gradients(int threads, int64_t *n) {
  char dir[] = "/tmp/lj_test_halves_XXXXXX";
  init_dumping(threads, NULL, true, dir);
  const int one[2] = {1, 1}, two[2] = {2, 2};
  lj_tensor *x2 = tu_tensor(LJ_F32, LJ_SHAPE(8, 32, 14, 14), TU_UNIT, 1), *w2 = tu_tensor(LJ_F32, LJ_SHAPE(64, 32, 3, 3), TU_UNIT, 2);
  lj_tensor *b2 = tu_tensor(LJ_F32, LJ_SHAPE(64), TU_UNIT, 3);
  lj_tensor *x1 = tu_tensor(LJ_F32, LJ_SHAPE(8, 1, 28, 28), TU_UNIT, 4), *w1 = tu_tensor(LJ_F32, LJ_SHAPE(32, 1, 3, 3), TU_UNIT, 5);
  lj_tensor *b1 = tu_tensor(LJ_F32, LJ_SHAPE(32), TU_UNIT, 6);
  lj_tensor *xs = tu_tensor(LJ_F32, LJ_SHAPE(16, 8, 33, 33), TU_UNIT, 7), *ws = tu_tensor(LJ_F32, LJ_SHAPE(16, 8, 3, 3), TU_UNIT, 8);
  lj_tensor *w[] = {w2, b2, w1, b1, ws};
  for (int i = 0; i < 5; i++) ck_assert_int_eq(lj_tensor_set_requires_grad(w[i], true), LJ_OK);
  lj_tensor *ys[] = {
      lj_conv2d(x2, w2, b2, NULL, one, NULL, 1),
      lj_relu(lj_max_pool2d(lj_conv2d(x1, w1, b1, NULL, one, NULL, 1), two, NULL, NULL)),
      lj_conv2d(xs, ws, NULL, two, NULL, NULL, 1),
  };
  for (int i = 0; i < 3; i++) {
    lj_tensor *g = tu_tensor(LJ_F32, lj_tensor_ndim(ys[i]), lj_tensor_shape(ys[i]), TU_UNIT, 10 + (uint64_t)i);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(ys[i], g), 0, NULL, false)), LJ_OK);
    lj_tensor_release(g);
  }
  lj_tensor *ai = tu_tensor(LJ_I64, LJ_SHAPE(8, 32, 512), TU_ANY, 20), *bi = tu_tensor(LJ_I64, LJ_SHAPE(8, 512, 32), TU_ANY, 21);
  lj_tensor *grads[] = {lj_tensor_grad(w2), lj_tensor_grad(b2), lj_tensor_grad(w1), lj_tensor_grad(b1), lj_tensor_grad(ws),
                        lj_sum(lj_matmul(ai, bi), 1, (const int[]){0}, false)};
  enum { NGRADS = sizeof grads / sizeof *grads };
  /* sums of 8·196 (conv2) and 8·784 (conv1) products of magnitude ~1 */
  tu_check_interp_tol(NGRADS, grads, 1e-4, 1e-3);
  ck_assert(tu_dir_has(dir, ".kernels.txt", "lj_gemm_f32_winograd5_dw; the routine also sums B for kernel"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "lj_gemm_f32_taps_dw; the routine also sums B for kernel"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "unpooled, 2x2 windows"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "adds the sums of each run kernel"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "lj_gemm_f32_window"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "summed over the batch in 2 runs"));
  *n = 0;
  double *all = NULL;
  for (int i = 0; i < NGRADS; i++) {
    int64_t m;
    double *v = tu_read(grads[i], &m);
    all = realloc(all, (size_t)(*n + m) * sizeof *all);
    memcpy(all + *n, v, (size_t)m * sizeof *v);
    *n += m;
    free(v);
  }
  lj_tensor *rest[] = {x2, w2, b2, x1, w1, b1, xs, ws, ai, bi, ys[0], ys[1], ys[2], grads[NGRADS - 1]};
  for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) lj_tensor_release(rest[i]);
  lj_shutdown();
  tu_remove_dir(dir);
  return all;
}

/* values(threads, &n) on 1, 2 and 3 threads (malloc'd): the same n elements of `size` bytes each
 * time, bit for bit. */
static void same_bits_on_threads(void *(*values)(int threads, int64_t *n), size_t size) {
  int64_t n[3];
  void *got[3];
  for (int t = 0; t < 3; t++) got[t] = values(t + 1, &n[t]);
  for (int t = 1; t < 3; t++) {
    ck_assert_int_eq(n[t], n[0]);
    ck_assert(memcmp(got[t], got[0], (size_t)n[0] * size) == 0);
  }
  for (int t = 0; t < 3; t++) free(got[t]);
}

/* The batch sums of weight gradients over 8 images or more are computed in two halves added
 * after (pass_matmul.c), the matmul kernel's tasks each half's rows in turn: through the
 * Winograd routine (MNISTNet's conv2 at batch 8) and the taps routine (conv1 with a max-pool
 * and a relu: dY unpooled where it is read), each also summing its half's dY for the bias
 * gradient that a later kernel's nest then adds up; the window GEMM (a stride-2 convolution);
 * and an i64 batch sum, which no routine takes. Against the interpreter on 1, 2 and 3 threads
 * (a thread's range of tasks then spans the two halves), the same bits on each. */
START_TEST(test_matmul_batch_halves) { same_bits_on_threads(halves_gradients, sizeof(double)); }
END_TEST

/* A Winograd convolution's output and input gradient on `threads` threads (malloc'd, n floats). */
static void *winograd_values(int threads, int64_t *n) {
  tu_init_threads(threads);
  const int one[2] = {1, 1};
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(30, 72, 14, 14), TU_UNIT, 1), *w = tu_tensor(LJ_F32, LJ_SHAPE(80, 72, 3, 3), TU_UNIT, 2);
  ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
  lj_tensor *y = lj_conv2d(x, w, NULL, NULL, one, NULL, 1);
  lj_tensor *g = tu_tensor(LJ_F32, lj_tensor_ndim(y), lj_tensor_shape(y), TU_UNIT, 3);
  ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
  lj_tensor *dx = lj_tensor_grad(x);
  int64_t ny = lj_tensor_numel(y), nx = lj_tensor_numel(dx);
  float *all = malloc((size_t)(ny + nx) * sizeof *all);
  ck_assert_int_eq(lj_tensor_to_host(y, all, (size_t)ny * sizeof *all), LJ_OK);
  ck_assert_int_eq(lj_tensor_to_host(dx, all + ny, (size_t)nx * sizeof *all), LJ_OK);
  *n = ny + nx;
  lj_tensor *ts[] = {x, w, y, g};
  for (int i = 0; i < 4; i++) lj_tensor_release(ts[i]);
  lj_shutdown();
  return all;
}

/* The Winograd routine takes the images of one block of tiles each several at a time (30 of
 * 14×14: 9 tiles of F(5×5), 7 images at a time), so that the images a call groups depend on
 * the thread's range of tasks, and the register tiles a tile's products fall in with them: its
 * sums are in the order of the channels in every register tile, so 1, 2 and 3 threads give the
 * same bits for the output and the input gradient. With more rows than a block's (80 and 72
 * channels), the tasks go row by row of every image, the ranges of 3 threads cutting rows. */
START_TEST(test_matmul_winograd_threads) { same_bits_on_threads(winograd_values, sizeof(float)); }
END_TEST

/* bf16 operands, as 2-d products of bf16 values cast to f32 and as bf16 products: with bf16
 * dot products on the host, their routines (lj_gemm_bf16_*, in the dump) multiply pairs along
 * k from B packed by rows (contiguous along n), by 32-bit transposes (B transposed: a pair is
 * one element) and element by element (B strided, and the last panel of a transposed B), A
 * read where it is (contiguous along k, K even: its pairs at odd addresses, rows an odd number
 * of elements apart, three blocks of k), packed by vectors (K odd), by 32-bit transposes (A
 * transposed) or element by element (A strided along both dims); a few rows by B transposed
 * take dot products of vectors of pairs, by B contiguous along n sums of its rows' pairs, read
 * where they are. Around the tiles' edges (rows 1, 5, 8, 13, 70, columns 1, 17, 150, 300) and
 * the pairs' (k 1, 2, 17, 33 and 1601: odd blocks of k, the last of two), batched with B
 * broadcast, a transpose above the cast, summed over the batch, a few rows by column tasks,
 * and an empty k; bf16 convolutions, which the frontend computes in f32: a 3×3 and a 5×5 one
 * through Winograd's routines, the others packing pairs of taps from the bf16 image, its
 * window positions read as runs (7×7 "same", with a bias; a dilated 3×3), by rows (7×7
 * without padding), by pairs (stride 2, with a bias; of 3 channels: 27 taps, an odd block of
 * k) and gathered (stride 3), and 40 channels of 7×7 (blocks of k); a convolution of bf16
 * data is one kernel (its image widened to f32 is not stored); heads permuted out of [B, T, H,
 * D], stored as bf16 for the product. Without the instruction the same
 * graphs run through f32's routines. Against the interpreter: the f32 sums to f32's rounding
 * of their order, the bf16 products to one bf16 rounding. */
START_TEST(test_matmul_bf16_pairs) {
  static const int64_t Ms[] = {1, 5, 8, 13, 70}, Ns[] = {1, 17, 150, 300}, Ks[] = {1, 2, 17, 33, 1601};
  char dir[] = "/tmp/lj_test_bf16_XXXXXX";
  init_dumping(2, NULL, true, dir);
  bool dot = ljc_session_bf16_dot(ljr_get()->cg);
  for (int layout = 0; layout < 4; layout++) {
    lj_tensor *ts[100];
    int n = 0;
    for (int mi = 0; mi < 5; mi++)
      for (int ni = 0; ni < 4; ni++)
        for (int ki = 0; ki < 5; ki++) {
          lj_tensor *a, *b;
          layout_operands(LJ_BF16, layout, Ms[mi], Ns[ni], Ks[ki], (uint64_t)(200 * layout + 20 * mi + 5 * ni + ki), &a,
                          &b);
          ts[n++] = lj_matmul(lj_cast(a, LJ_F32), lj_cast(b, LJ_F32));
          lj_tensor_release(a);
          lj_tensor_release(b);
        }
    tu_check_interp_tol(n, ts, 1e-5, 1e-3);
    for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
  }
  lj_tensor *ba = tu_tensor(LJ_BF16, LJ_SHAPE(3, 37, 300), TU_ANY, 900), *w = tu_tensor(LJ_BF16, LJ_SHAPE(300, 45), TU_ANY, 901);
  lj_tensor *wt = tu_tensor(LJ_BF16, LJ_SHAPE(45, 300), TU_ANY, 902), *few = tu_tensor(LJ_BF16, LJ_SHAPE(3, 2, 300), TU_ANY, 903);
  lj_tensor *fb = tu_tensor(LJ_BF16, LJ_SHAPE(3, 300, 45), TU_ANY, 904), *x = tu_tensor(LJ_BF16, LJ_SHAPE(16, 300), TU_ANY, 905);
  lj_tensor *wide = tu_tensor(LJ_BF16, LJ_SHAPE(300, 700), TU_ANY, 906);
  lj_tensor *e0 = tu_tensor(LJ_BF16, LJ_SHAPE(4, 0), TU_ANY, 907), *e1 = tu_tensor(LJ_BF16, LJ_SHAPE(0, 6), TU_ANY, 908);
  static const int batch[1] = {0};
  lj_tensor *strided = tu_tensor(LJ_BF16, LJ_SHAPE(74, 600), TU_ANY, 917);
  lj_tensor *sa = lj_slice(lj_slice(strided, 0, 0, 74, 2), 1, 1, 600, 2);
  lj_tensor *long_rows = tu_tensor(LJ_BF16, LJ_SHAPE(9, 3101), TU_ANY, 918);
  lj_tensor *tall = tu_tensor(LJ_BF16, LJ_SHAPE(3100, 45), TU_ANY, 919);
  lj_tensor *f32[6] = {lj_matmul(lj_cast(ba, LJ_F32), lj_cast(w, LJ_F32)),
                       lj_matmul(lj_cast(ba, LJ_F32), lj_transpose(lj_cast(wt, LJ_F32), 0, 1)),
                       lj_sum(lj_matmul(lj_cast(few, LJ_F32), lj_cast(fb, LJ_F32)), 1, batch, false),
                       lj_matmul(lj_cast(x, LJ_F32), lj_cast(wide, LJ_F32)), lj_matmul(lj_cast(sa, LJ_F32), lj_cast(w, LJ_F32)),
                       lj_matmul(lj_cast(lj_slice(long_rows, 1, 1, 3101, 1), LJ_F32), lj_cast(tall, LJ_F32))};
  tu_check_interp_tol(6, f32, 1e-5, 1e-3);
  lj_tensor *img = tu_tensor(LJ_BF16, LJ_SHAPE(2, 16, 12, 10), TU_UNIT, 909), *k3 = tu_tensor(LJ_BF16, LJ_SHAPE(24, 16, 3, 3), TU_UNIT, 910);
  lj_tensor *k7 = tu_tensor(LJ_BF16, LJ_SHAPE(24, 16, 7, 7), TU_UNIT, 911), *bias = tu_tensor(LJ_BF16, LJ_SHAPE(24), TU_UNIT, 912);
  lj_tensor *img3 = tu_tensor(LJ_BF16, LJ_SHAPE(3, 3, 17, 19), TU_UNIT, 913), *k33 = tu_tensor(LJ_BF16, LJ_SHAPE(8, 3, 3, 3), TU_UNIT, 914);
  lj_tensor *deep = tu_tensor(LJ_BF16, LJ_SHAPE(1, 40, 9, 9), TU_UNIT, 915), *k40 = tu_tensor(LJ_BF16, LJ_SHAPE(20, 40, 7, 7), TU_UNIT, 916);
  lj_tensor *k5 = tu_tensor(LJ_BF16, LJ_SHAPE(24, 16, 5, 5), TU_UNIT, 920);
  lj_tensor *q4 = tu_tensor(LJ_BF16, LJ_SHAPE(2, 5, 3, 8), TU_ANY, 921);
  lj_tensor *k4 = tu_tensor(LJ_BF16, LJ_SHAPE(2, 5, 3, 8), TU_ANY, 922);
  static const int heads[4] = {0, 2, 1, 3}, heads_t[4] = {0, 2, 3, 1};
  static const int pad[2] = {1, 1}, pad2[2] = {2, 2}, pad3[2] = {3, 3}, s2[2] = {2, 2}, s3[2] = {3, 3};
  int64_t kernels = lj_counter_value("CompiledKernels");
  lj_tensor *one = lj_conv2d(img, k7, NULL, NULL, pad, NULL, 1);
  ck_assert_int_eq(lj_sync_tensors(1, &one), LJ_OK);
  if (dot) ck_assert_int_eq(lj_counter_value("CompiledKernels") - kernels, 1);
  lj_tensor_release(one);
  lj_tensor *bf[13] = {lj_matmul(ba, w), lj_matmul(x, wide), lj_matmul(e0, e1),
                       lj_conv2d(img, k3, NULL, NULL, pad, NULL, 1),
                       lj_conv2d(img, k5, NULL, NULL, pad2, NULL, 1),
                       lj_conv2d(img, k7, bias, NULL, pad3, NULL, 1),
                       lj_conv2d(img, k7, NULL, NULL, NULL, NULL, 1),
                       lj_conv2d(img, k3, bias, s2, pad, NULL, 1),
                       lj_conv2d(img3, k33, NULL, s3, pad, NULL, 1),
                       lj_conv2d(img, k3, NULL, NULL, pad2, s2, 1),
                       lj_conv2d(img3, k33, NULL, s2, NULL, NULL, 1),
                       lj_conv2d(deep, k40, NULL, NULL, pad3, NULL, 1),
                       lj_matmul(lj_permute(q4, 4, heads), lj_permute(k4, 4, heads_t))};
  tu_check_interp_tol(13, bf, tu_rtol(LJ_BF16), 1e-2);
  ck_assert(tu_dir_has(dir, "kernels.txt", "calls lj_gemm_f32_winograd"));
  ck_assert(tu_dir_has(dir, "kernels.txt", "calls lj_gemm_f32_winograd3_5x5"));
  static const char *const routines[4] = {"calls lj_gemm_bf16_rows", "calls lj_gemm_bf16_cols",
                                          "calls lj_gemm_bf16_elements", "calls lj_gemm_bf16_window"};
  for (int r = 0; r < 4; r++) ck_assert_msg(tu_dir_has(dir, "kernels.txt", routines[r]) == dot, "%s", routines[r]);
  lj_tensor *all[] = {ba, w, wt, few, fb, x, wide, e0, e1, img, k3, k5, k7, bias, img3, k33, deep, k40, strided, sa,
                      long_rows, tall, q4, k4, f32[0], f32[1], f32[2], f32[3], f32[4], f32[5]};
  for (size_t i = 0; i < sizeof bf / sizeof *bf; i++) lj_tensor_release(bf[i]);
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) lj_tensor_release(all[i]);
  lj_shutdown();
  tu_remove_dir(dir);
}
END_TEST

/* y, dX and dW of a convolution of x by w with padding (kk - 1) / 2, its output's gradient g,
 * as x, w and g's dtype says (bf16: f32 leaves cast to bf16 and the output back, as mixed
 * precision is written), read into out[0..3) (the caller frees them; n[i] elements). */
static void conv_and_gradients(lj_tensor *x, lj_tensor *w, lj_tensor *g, int kk, bool bf16, double *out[3], int64_t n[3]) {
  const int pad[2] = {(kk - 1) / 2, (kk - 1) / 2};
  lj_tensor_zero_grad(x);
  lj_tensor_zero_grad(w);
  lj_tensor *xi = bf16 ? lj_cast(x, LJ_BF16) : lj_tensor_retain(x), *wi = bf16 ? lj_cast(w, LJ_BF16) : lj_tensor_retain(w);
  lj_tensor *c = lj_conv2d(xi, wi, NULL, NULL, pad, NULL, 1), *y = bf16 ? lj_cast(c, LJ_F32) : lj_tensor_retain(c);
  lj_tensor *loss = lj_sum(lj_mul(y, g), 0, NULL, false);
  ck_assert_int_eq(lj_backward(loss), LJ_OK);
  lj_tensor *ts[3] = {y, lj_tensor_grad(x), lj_tensor_grad(w)};
  for (int i = 0; i < 3; i++) out[i] = tu_read(ts[i], &n[i]);
  lj_tensor *all[] = {xi, wi, c, y, loss};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) lj_tensor_release(all[i]);
}

/* A bf16 convolution computes in f32 and rounds once, as PyTorch's does: its output, input
 * gradient (the col2im's sums of every tap's products) and weight gradient (the sum over the
 * batch) each within a bf16 rounding (2^-8 of the value, and 1e-5 of the largest for the
 * order of f32's sums) of the f32 convolution's of the same values; rounding each tap's
 * products, or each image's weight gradient, before summing them missed that by up to 20
 * times. A 3×3 one, whose forward product and gradients go through Winograd's routines, and a
 * 5×5 one. */
START_TEST(test_conv_bf16_rounds_once) {
  for (int kk = 3; kk <= 5; kk += 2) {
    lj_tensor *x16 = tu_tensor(LJ_BF16, LJ_SHAPE(4, 16, 10, 12), TU_UNIT, 30 + (uint64_t)kk);
    lj_tensor *w16 = tu_tensor(LJ_BF16, LJ_SHAPE(24, 16, kk, kk), TU_UNIT, 40 + (uint64_t)kk);
    lj_tensor *g16 = tu_tensor(LJ_BF16, LJ_SHAPE(4, 24, 10, 12), TU_UNIT, 50 + (uint64_t)kk);
    lj_tensor *x = lj_cast(x16, LJ_F32), *w = lj_cast(w16, LJ_F32), *g = lj_cast(g16, LJ_F32);
    lj_tensor *leaves[3] = {x, w, g};
    ck_assert_int_eq(lj_sync_tensors(3, leaves), LJ_OK);
    ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
    ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
    double *want[3], *got[3];
    int64_t n[3], m[3];
    conv_and_gradients(x, w, g, kk, false, want, n);
    conv_and_gradients(x, w, g, kk, true, got, m);
    for (int i = 0; i < 3; i++) {
      ck_assert_int_eq(n[i], m[i]);
      double scale = 0;
      for (int64_t e = 0; e < n[i]; e++) scale = fmax(scale, fabs(want[i][e]));
      for (int64_t e = 0; e < n[i]; e++)
        ck_assert_msg(fabs(got[i][e] - want[i][e]) <= 0x1p-8 * fabs(want[i][e]) + 1e-5 * scale,
                      "%dx%d, %s element %lld: bf16 %.9g, f32 %.9g (largest %g)", kk, kk,
                      (const char *[]){"y", "dX", "dW"}[i], (long long)e, got[i][e], want[i][e], scale);
      free(want[i]);
      free(got[i]);
    }
    lj_tensor *all[] = {x16, w16, g16, x, w, g};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) lj_tensor_release(all[i]);
  }
}
END_TEST

/* GEMM routines the session took: compiled, or from the library's precompiled ones. */
static int64_t routines_taken(void) {
  return lj_counter_value("CompiledGemmRoutines") + lj_counter_value("PrecompiledGemmRoutines");
}

/* A GEMM routine is taken once per session: a second graph whose matmul reads B the same way
 * (contiguous along n, f32) calls the routine the first took; f64 has its own. */
START_TEST(test_matmul_routines_compiled_once) {
  int64_t c0 = routines_taken();
  lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(90, 40), TU_ANY, 1), *b = tu_tensor(LJ_F32, LJ_SHAPE(40, 30), TU_ANY, 2);
  lj_tensor *ab = lj_matmul(a, b);
  tu_check_interp_tol(1, &ab, 1e-4, 1e-5); /* sums of 40 products of terms up to 1 that cancel */
  lj_tensor_release(ab);
  int64_t c1 = routines_taken();
  ck_assert_int_le(c1 - c0, 1);
  lj_tensor *c = tu_tensor(LJ_F32, LJ_SHAPE(3, 50, 70), TU_ANY, 3), *d = tu_tensor(LJ_F32, LJ_SHAPE(70, 5), TU_ANY, 4);
  tu_check1(lj_tanh(lj_matmul(c, d)), 1e-4);
  ck_assert_int_eq(routines_taken(), c1);
  lj_tensor *e = tu_tensor(LJ_F64, LJ_SHAPE(7, 20), TU_ANY, 5), *f = tu_tensor(LJ_F64, LJ_SHAPE(20, 11), TU_ANY, 6);
  tu_check1(lj_matmul(e, f), 1e-12);
  ck_assert_int_le(routines_taken() - c1, 1);
  lj_tensor *all[] = {a, b, c, d, e, f};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) lj_tensor_release(all[i]);
}
END_TEST

/* Kernels keep a matmul's packed panels of B (128 KiB), and a Winograd convolution's
 * transformed weight (1.2 MiB, 1.6 with 5×5 tiles as this one's), on the stack of the thread
 * running them: the pool's workers and the device's executor get stacks of their own size,
 * here with the process's default thread stack made 64 KiB before the device starts them. */
START_TEST(test_matmul_small_default_stacks) {
  pthread_attr_t saved, small;
  ck_assert_int_eq(pthread_getattr_default_np(&saved), 0);
  pthread_attr_init(&small);
  pthread_attr_setstacksize(&small, 64 << 10);
  ck_assert_int_eq(pthread_setattr_default_np(&small), 0);
  lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(64, 300), TU_ANY, 1), *b = tu_tensor(LJ_F32, LJ_SHAPE(300, 160), TU_ANY, 2);
  lj_tensor *c = lj_matmul(a, b);
  tu_check_interp_tol(1, &c, 1e-4, 1e-4);
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 8, 10, 10), TU_UNIT, 3), *w = tu_tensor(LJ_F32, LJ_SHAPE(8, 8, 3, 3), TU_UNIT, 4);
  lj_tensor *y = lj_conv2d(x, w, NULL, NULL, (const int[]){1, 1}, NULL, 1);
  tu_check_interp_tol(1, &y, 5e-5, 1e-3);
  ck_assert_int_eq(pthread_setattr_default_np(&saved), 0);
  pthread_attr_destroy(&small);
  pthread_attr_destroy(&saved);
  lj_tensor *all[] = {a, b, c, x, w, y};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) lj_tensor_release(all[i]);
}
END_TEST

START_TEST(test_matmul_errors) {
  lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(2, 3), TU_ANY, 1);
  lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(4, 5), TU_ANY, 2);
  ck_assert(!lj_matmul(a, b));
  tu_expect_error(LJ_ERR_SHAPE, "lj_matmul", "[2,3]", "[4,5]", "3 vs 4", NULL);
  lj_tensor *c = tu_tensor(LJ_F64, LJ_SHAPE(3, 2), TU_ANY, 3);
  ck_assert(!lj_matmul(a, c));
  tu_expect_error(LJ_ERR_DTYPE, "lj_matmul", "f32", "f64", NULL);
  lj_tensor *s = tu_tensor(LJ_F32, LJ_SCALAR_SHAPE, TU_ANY, 4);
  ck_assert(!lj_matmul(s, a));
  tu_expect_error(LJ_ERR_SHAPE, "lj_matmul", "at least 1 dim", NULL);
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 2, 3), TU_ANY, 5), *y = tu_tensor(LJ_F32, LJ_SHAPE(3, 3, 4), TU_ANY, 6);
  ck_assert(!lj_matmul(x, y));
  tu_expect_error(LJ_ERR_SHAPE, "lj_matmul", "broadcast", NULL);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ops_matmul");
  TCase *tc = tu_tcase("matmul");
  tcase_add_test(tc, test_matmul_shapes);
  tcase_add_test(tc, test_matmul_fused_and_large);
  tcase_add_loop_test(tc, test_matmul_tiles, 0, (int)(sizeof tile_targets / sizeof *tile_targets));
  tcase_add_loop_test(tc, test_matmul_swapped, 0, (int)(sizeof tile_targets / sizeof *tile_targets));
  tcase_add_loop_test(tc, test_matmul_short_k, 0, (int)(sizeof tile_targets / sizeof *tile_targets));
  tcase_add_loop_test(tc, test_matmul_window_t, 0, (int)(sizeof tile_targets / sizeof *tile_targets));
  tcase_add_loop_test(tc, test_matmul_vector, 0, (int)(sizeof tile_targets / sizeof *tile_targets));
  tcase_add_loop_test(tc, test_matmul_window_phases, 0, (int)(sizeof tile_targets / sizeof *tile_targets));
  tcase_add_loop_test(tc, test_matmul_winograd, 0, (int)(sizeof tile_targets / sizeof *tile_targets));
  tcase_add_loop_test(tc, test_matmul_winograd_5x5, 0, (int)(sizeof tile_targets / sizeof *tile_targets));
  tcase_add_test(tc, test_matmul_winograd_random);
  tcase_add_test(tc, test_matmul_winograd_threads);
  tcase_add_test(tc, test_matmul_winograd_dilated);
  tcase_add_test(tc, test_matmul_winograd_off);
  tcase_add_loop_test(tc, test_matmul_taps, 0, (int)(sizeof tile_targets / sizeof *tile_targets));
  tcase_add_test(tc, test_matmul_taps_random);
  tcase_add_test(tc, test_matmul_a_period);
  tcase_add_loop_test(tc, test_matmul_taps_few_rows, 0, (int)(sizeof tile_targets / sizeof *tile_targets));
  tcase_add_test(tc, test_matmul_batch_halves);
  tcase_add_test(tc, test_matmul_bf16_pairs);
  tcase_add_test(tc, test_conv_bf16_rounds_once);
  tcase_add_test(tc, test_matmul_routines_compiled_once);
  tcase_add_test(tc, test_matmul_small_default_stacks);
  tcase_add_test(tc, test_matmul_errors);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
