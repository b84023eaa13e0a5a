/* fuse_rows.c — row fusion: consecutive kernels over the same rows become one kernel that
 * runs all their nests on a block of rows before going to the next block.
 *
 * softmax is max → exp(x - max) → sum → divide: four kernels, each streaming the whole
 * [rows, cols] tensor through memory. When every kernel splits the same rows across threads
 * and each reads the others' results only at its own row, the four can run row block by row
 * block: the block's max, exps, sum and quotients stay in cache, and one dispatch replaces
 * four. The kernel's row_block says how many rows a block holds (sized so a block of its
 * widest nest fits in L1, and so do the rows its nests read: row_read_bytes); the lowering
 * runs the nests in order inside each block.
 *
 * A matmul is the first kernel of such a group when what follows reads its C only at its own
 * row (rows b·M + m of N): a linear layer's bias and activation, a convolution's bias. The
 * kernel computes a block of rows of C, then runs those nests on them — an epilogue. Its
 * blocks are sized by matmul_row_block (B is packed again for every block). An elementwise
 * kernel that writes C permuted, its rows among other dims than its first (the output [N, O,
 * P] of a 1×1 convolution computed as one product [O, C] · [C, N·P] of the images side by
 * side), is such an epilogue too, its nest's dims reordered with the rows first
 * (as_permuted_rows): the permuted output is written from C as the product's thread computed
 * it rather than by a kernel of its own (512 to 2048 channels over 7×7 at batch 32, alternated
 * runs: one thread 31.1 -> 30.8 ms, bf16 16.35 -> 15.83; two threads bf16 8.07 -> 7.85).
 * So is such a kernel after a group without a product, reading what the group's last nests
 * write: a depthwise convolution's output [N, C, P], which the 1×1 convolution after it reads
 * as [C, N·P], is stored so by the window kernel plane by plane (MobileNetV2's block, 160 ->
 * 960 -> 160 channels over 7×7 at batch 32, two threads: 3.85-3.88 -> 3.75-3.79 ms, a 6 MB
 * copy's kernel gone); a training batch norm's output, by channel after the channel's
 * statistics, from L2 rather than by images in a kernel of its own (as fast, one kernel less).
 *
 * A matmul whose A is what the group's nests write, read at its own row, ends the group as
 * its trailing product when its rows are the group's matmul's (the same matrices of as many
 * rows) and each of its matrices has its own B: attention, softmax(Q·Kᵀ)·V, runs Q·Kᵀ, the
 * softmax and then P·V on each block of rows, so P, B·M·N elements that went through memory
 * twice (and for long sequences took more scratch memory than anything else), is a LOCAL
 * block.
 *
 * A window kernel's rows are its (n, c) image planes. im2col is the first kernel of a group
 * (max-pool's argmax and gather, avg-pool's mean over each window follow it), or follows a
 * matmul's group whose rows are those planes (a convolution's C, biased: the pooling of a
 * convolution runs on each block of its planes as they are computed); col2im is the last, on
 * what the group's nests wrote (max-pool's gradient, scattered into zeros window by window,
 * then added back into the image), or on a matmul's C (a convolution's input gradient: Wᵀ·dY
 * computes each image's columns, KH·KW rows of C per plane, which col2im adds up; the joined
 * kernel's tasks are the planes, and its blocks whole images up to L2's size). col2im joins
 * are made first, so that the planes, larger than the image, are the intermediate a block at a
 * time holds.
 *
 * A kernel B joins the group before it when
 *   - B is a LOOPS kernel split over its rows, the group has as many rows, every nest of B
 *     has them as its first dims (row_dims of them: a [B, M, N] bias add after a batched
 *     matmul's B·M rows splits B and M together) and does not reduce them, none scatters
 *     along them; or B is elementwise, of one nest that has them as other dims than its last,
 *     and the group a plain matmul's of more rows than column tasks take (no window, no batch
 *     sum) or one without a product (permuted_slot); or B is a col2im and the group only LOOPS
 *     nests; or B is an im2col and the group a matmul's without a window;
 *     or B is a matmul that multiplies_rows (above; nothing joins after it);
 *   - every slot the group writes is written row-disjointly (row r at [r·S, (r+1)·S) of a
 *     buffer of rows·S elements) and B reads it only at its own row: plain loads (one view
 *     level, offset 0, no negative stride, the row dims' strides S-steps row-major), col2im's
 *     operand planes, gathers along a dim inside the row — never a gather across rows, whose
 *     index may point at rows not computed yet;
 *   - B and the group are not both elementwise with either reading an operand transposed
 *     across its rows (x.t() · 2 after a kept x.t()): apart, the lowering reads it in tiles,
 *     which a block of a few rows cannot hold, and elementwise kernels share nothing a block
 *     would keep.
 * A flat elementwise kernel (its loops collapsed to one dim) is read as rows of the other's
 * row count when that divides it. Only neighbours merge, so no kernel moves past one it
 * depends on.
 *
 * An intermediate that only its row-fused kernel uses (softmax's exps, a matmul's C before
 * its bias) then needs no more than the block being computed: it becomes a LOCAL slot, one
 * block of rows on the stack of the thread running the kernel, instead of a whole tensor in
 * the scratch arena that every block would write to memory and read back. */
#include "graph/graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The most a LOCAL slot's block may take on a kernel's stack. */
#define LOCAL_MAX_BYTES (64 << 10)
/* The most a block of C may take when a col2im reads it (a convolution's input gradient):
 * a whole matrix (an image's columns) up to L2's size, so B is packed once per image; and a
 * window kernel's im2col, a plane's windows (a 3×3 depthwise convolution's of a 56×56 plane:
 * 110 KiB), which would otherwise go through a tensor of every plane's in scratch memory. */
#define LOCAL_COLUMNS_MAX_BYTES (256 << 10)
/* A matmul kernel with an epilogue: its blocks hold at least this many rows when it packs B
 * (its register tiles are 6 rows, and each block packs B again), more while the block's C fits
 * in a LOCAL slot. */
#define MATMUL_BLOCK_MIN_ROWS 48
/* A matmul kernel with a trailing product (attention) whose MATMUL_BLOCK_MIN_ROWS rows of
 * C take more than MATMUL_BLOCK_L2_BYTES: fewer rows, down to this many, that fit it, so
 * that C, the softmax's intermediates and its A stay on the stack, each B packed more often. */
#define MATMUL_TRAILING_MIN_ROWS 8
/* A matmul kernel with an epilogue whose blocks of C do not fit LOCAL_MAX_BYTES at
 * MATMUL_BLOCK_MIN_ROWS rows: the most of C a block may take (half of L2), so the epilogue
 * reads it from L2. Its LOCAL slots may take as much (without a window, which keeps its own
 * limits): C, what its nests write and a trailing product reads stay on the stack instead of
 * going through scratch memory block after block (attention over 2048 keys, 8 heads of 64,
 * one thread: 384 MB of scratch memory and 115-118 ms -> none and 98 ms; a stride-2
 * convolution, 64 -> 128 channels of 56×56 at batch 32: 12.8 MB -> none, 39.6-39.7 ->
 * 38.4-39.2 ms). */
#define MATMUL_BLOCK_L2_BYTES (512 << 10)
/* A convolution (B an im2col) with an epilogue summing at least this many products into each
 * element of C: no blocks, the thread's range in one call and C through scratch memory, whose
 * round trip costs little beside the products; a routine that takes several images at a time
 * (Winograd's, over small images) then does (512 channels on 7×7 with bias and relu, batch 32,
 * one thread, in blocks of half an image, each transforming the weight again: the forward
 * product 74.7 ms -> 18.1). */
#define MATMUL_WHOLE_K 2048
/* Independent kernels join only when neither reads an operand transposed across its rows with
 * rows of more than this many bytes of lines (a line a column), which would not stay in L1
 * for the next row to read (can_join). */
#define TRANSPOSED_JOIN_ROW_BYTES (32 << 10)
/* A block of one row wider than LOCAL_MAX_BYTES (softmax or cross-entropy over a vocabulary
 * of 32000 words: 125 KiB a row; a depthwise convolution's windows of a 112×112 plane, 441
 * KiB; a softmax over the 64 channels of a 56×56 image, 784 KiB) is still LOCAL up to this,
 * an L2's size: partly in L2 rather than L1, it spares the round trip through memory of a
 * tensor as large as the input or larger (softmax over [512, 32000] on two threads: 5.7 →
 * 2.7 ms; the depthwise convolution of 32 such planes at batch 16, whose windows took 231 MB
 * of scratch memory: 8.5 → 2.2 ms; the softmax over channels of [32, 64, 56, 56] forward and
 * backward, 512 KiB before: 9.0–9.4 → 7.6–7.8 ms on one thread, 4.6–4.8 → 3.8–4.0 on two). */
#define LOCAL_ROW_MAX_BYTES (1024 << 10)
/* The most a kernel's LOCAL slots may take together, on the stack of a thread whose stack
 * is LJB_THREAD_STACK (8 MiB); slots beyond it stay TEMP. */
#define LOCAL_KERNEL_MAX_BYTES (2 << 20)

/* The most a LOCAL block of slot may take in kernel k. */
static int64_t local_max_bytes(const ljg_kernel *k, int32_t slot) {
  return (k->kind == LJG_K_MATMUL && k->mm_task_rows > 1 && slot == k->mm_out_slot) ||
                 (k->kind == LJG_K_WINDOW && k->win_op == LJG_OP_IM2COL && slot == k->win_out_slot)
             ? LOCAL_COLUMNS_MAX_BYTES
             : LOCAL_MAX_BYTES;
}

/* Rows per block of a matmul kernel with an epilogue. One B shared by all rows (a linear
 * layer's weight) packed (of more than LJG_MATMUL_DIRECT_K rows, or of any where it is not
 * contiguous along n: relu(x·Wᵀ + b) to [4096, 4096] from 3 inputs took 33 ms on one thread
 * in blocks of 4 rows, calls that packed nothing and took dot products of 3 values, 12.4 in
 * one block), or products summed over the batch
 * (every row goes through every matrix's B): the whole task range, so B is packed once per
 * thread as without the epilogue, or, read in place by few rows (ljg_matmul_b_in_place), split
 * by columns between threads (fuse.c's column tasks; by blocks of 16 rows instead, an LSTM's
 * steps' products of 32 rows by a 1024×256 weight took 3.5-4.3 ms of its step on two threads
 * rather than 3.4-3.6); so too for a convolution of MATMUL_WHOLE_K products an element.
 * Otherwise as many rows as keep a block of C within a LOCAL slot, at least
 * MATMUL_BLOCK_MIN_ROWS when B is packed or read in place by few rows (each matrix of a batch
 * has its own B anyway), or, with a trailing product, at least MATMUL_TRAILING_MIN_ROWS that
 * fit half of L2 (8 heads of attention over 4096 keys: 1.6 GB of scratch memory and 545-628 ms
 * on one thread -> none and 458-539), and a whole matrix where its C fits there, so that its B
 * is packed once (attention over 256 keys, one thread, blocks of 64 rows -> 256: 32 heads of
 * 64, 3.12-3.49 -> 3.07-3.24 ms; 16 heads of 128, 3.19-3.29 -> 2.98-2.99; two threads within
 * noise); when that many rows do not fit one, C goes through scratch memory anyway, and blocks
 * take up to MATMUL_BLOCK_L2_BYTES of it (unless a window follows, a pooling whose windows of
 * the block are to stay on the stack), so that B is packed once per matrix where a matrix fits
 * (a window packed from an image costs most: a stride-2 convolution's 128 rows of 784 in blocks
 * of 48 packed each image's window three times, 27.5 ms on one thread; 19.2 in one block) and
 * the epilogue reads C from L2. Rounded down to whole matrices when more than one fits, else to
 * equal parts of a matrix when its rows divide evenly, so that no block straddles two matrices
 * (packing both Bs, and a register tile short at each end: MNISTNet's conv1, 32 rows of 784,
 * took blocks of 20 rows, 0.84–0.86 ms on one thread; blocks of 16, 0.73–0.79); in tasks, which
 * a col2im's join makes several rows each. A window packed from an image with no window after
 * the epilogue takes a whole matrix a block, however large its C, so that the window is
 * packed once for all the matrix's rows (relu(conv + b), 3 to 64 channels, 7×7 of stride 2
 * over 224×224 at batch 8, one thread: 24.4 ms in blocks of 32 rows, 21.3 an image a block;
 * 3×3 of stride 2, 64 to 128 channels, 186 -> 149). A block that is part of a matrix, of
 * tasks of several rows (a col2im's planes), takes a multiple of 8 tasks where 8 or more fit,
 * so that its rows are whole register tiles of 8 (the input gradient of a 3×3 convolution of
 * stride 2, 64 -> 128 channels over 56×56 at batch 8, one thread: 9 planes a block, 81 rows,
 * its last tile of one row, 6.49 ms; 8 planes, 5.99). */
static int64_t matmul_row_block(const ljg_kernel *k) {
  /* B packed (of any K where it is not contiguous along n), or read in place by few rows */
  bool long_k = k->mm_k > LJG_MATMUL_DIRECT_K || (!k->mm_cols && !ljg_kernel_b_in_place(k));
  bool shared = k->mm_b == 1 || k->mm_sum || ljg_view_top(&k->views[k->exprs[k->mm_bm].view])->stride[0] == 0;
  if (long_k && shared) return k->ntasks;
  if (k->mm_cols == LJG_MM_COLS_B && k->mm_k >= MATMUL_WHOLE_K && !ljg_kernel_has_window(k)) return k->ntasks;
  int64_t row = k->mm_n * (int64_t)lj_dtype_size((lj_dtype)k->mm_dtype);
  int64_t rb = local_max_bytes(k, k->mm_out_slot) / row;
  int64_t l2_rows = MATMUL_BLOCK_L2_BYTES / row;
  if (long_k && k->tm && rb < k->mm_m) rb = l2_rows < k->mm_m ? l2_rows : k->mm_m;
  if (long_k && rb < MATMUL_BLOCK_MIN_ROWS && !ljg_kernel_has_window(k)) rb = l2_rows;
  if (k->mm_cols == LJG_MM_COLS_B && !ljg_kernel_has_window(k) && rb < k->mm_m) rb = k->mm_m;
  if (long_k && rb < MATMUL_BLOCK_MIN_ROWS && !(k->tm && rb >= MATMUL_TRAILING_MIN_ROWS)) rb = MATMUL_BLOCK_MIN_ROWS;
  if (rb < 1) rb = 1; /* a row of C wider than a LOCAL slot (a linear layer's weight gradient) */
  int64_t parts = (k->mm_m + rb - 1) / rb;
  if (rb > k->mm_m) rb = rb / k->mm_m * k->mm_m; /* a block straddling two matrices packs both */
  else if (k->mm_m % parts == 0) rb = k->mm_m / parts; /* equal parts of each matrix */
  if (k->mm_task_rows > 1 && rb < k->mm_m && rb >= 8 * k->mm_task_rows && rb / k->mm_task_rows % 8)
    rb = rb / (8 * k->mm_task_rows) * (8 * k->mm_task_rows);
  return rb / k->mm_task_rows;
}

/* The number of leading dims of shape whose product is rows (0: none). */
static int leading_dims(int ndim, const int64_t *shape, int64_t rows) {
  int64_t prod = 1;
  for (int d = 0; d < ndim; d++) {
    prod *= shape[d];
    if (prod == rows) return d + 1;
    if (prod > rows || prod == 0) return 0;
  }
  return 0;
}

/* Rows of a nest: its first row_dims dims. */
static int64_t nest_rows(const ljg_nest *n) {
  int64_t rows = 1;
  for (int d = 0; d < n->row_dims && d < n->ndim; d++) rows *= n->shape[d];
  return rows;
}

/* Whether nest n, split over its first row_dims dims, scatters into other rows than its own. */
static bool scatters_across_rows(const ljg_nest *n, int row_dims) {
  return n->scatter_index >= 0 && n->scatter_dim < row_dims;
}

static bool rows_kernel(const ljg_kernel *k) {
  if (k->kind != LJG_K_LOOPS || k->task_dim != 0 || k->ntasks < 1) return false;
  for (int s = 0; s < k->nnests; s++) {
    const ljg_nest *n = &k->nests[s];
    if (n->ndim == 0 || nest_rows(n) != k->ntasks || (n->rmask & ((1u << n->row_dims) - 1)) ||
        scatters_across_rows(n, n->row_dims))
      return false;
  }
  return true;
}

/* A window kernel's elements per task (one image plane): what it writes, and what it reads. */
static int64_t window_out_row(const ljg_kernel *k) {
  return k->win_op == LJG_OP_IM2COL ? ljg_window_cols_plane(k) : ljg_window_image_plane(k);
}

static int64_t window_src_row(const ljg_kernel *k) {
  return k->win_op == LJG_OP_IM2COL ? ljg_window_image_plane(k) : ljg_window_cols_plane(k);
}

/* The row stride S of view v as `rows` rows: its first dims whose product is rows, taken
 * together row-major, step S elements a row, so row r lies in [r·S, (r+1)·S). 0 when v is
 * not laid out that way: several levels, an offset, a negative stride, merged dims that do
 * not nest, or a row whose points leave its S elements. */
static int64_t view_row_stride(const ljg_view *v, int64_t rows) {
  if (v->n != 1 || v->v[0].offset != 0) return 0;
  const ljg_view1 *t = &v->v[0];
  int nd = leading_dims(t->ndim, t->shape, rows);
  if (nd == 0) return 0;
  int64_t last = 0; /* the offset of a row's last point */
  for (int d = 0; d < t->ndim; d++) {
    if (t->stride[d] < 0) return 0;
    if (d >= nd) last += (t->shape[d] - 1) * t->stride[d];
  }
  int64_t s = 0, next = 0; /* merged dims, from the innermost: stride s, then s·shape... */
  for (int d = nd - 1; d >= 0; d--) {
    if (t->shape[d] == 1) continue;
    if (s == 0) s = t->stride[d];
    else if (t->stride[d] != next) return 0;
    next = t->stride[d] * t->shape[d];
  }
  if (s == 0) s = last + 1; /* one row */
  return last < s ? s : 0;
}

/* The row stride S of a row-disjoint write by nest n, or 0 when it is not one. */
static int64_t write_row_stride(const ljg_program *p, const ljg_kernel *k, const ljg_nest *n) {
  int64_t s = view_row_stride(&k->views[n->out_view], k->ntasks);
  int64_t numel = p->slots[n->out_slot].nbytes / lj_dtype_size(n->out_dtype);
  return s > 0 && s * k->ntasks == numel ? s : 0;
}

/* The row stride of kernel k's load e, as view_row_stride. col2im's operand [N, C·KH·KW, L]
 * is read a task's KH·KW rows at a time: rows of KH·KW·L elements when it is contiguous. */
static int64_t load_row_stride(const ljg_kernel *k, int e) {
  const ljg_view *v = &k->views[k->exprs[e].view];
  if (k->win_op != LJG_OP_COL2IM || e != k->win_src) return view_row_stride(v, k->ntasks);
  const ljg_view1 *t = &v->v[0];
  int64_t row = window_src_row(k);
  bool plain = v->n == 1 && t->offset == 0 && t->ndim == 3 && t->stride[2] == 1 && t->stride[1] == t->shape[2] &&
               t->stride[0] == t->shape[1] * t->shape[2] && t->shape[0] * t->shape[1] * t->shape[2] == k->ntasks * row;
  return plain ? row : 0;
}

/* Whether b reads slot only at its own row, with row stride s: loads, and gathers along a dim
 * inside the row (max-pool's pick of each window's maximum). */
static bool reads_own_row(const ljg_kernel *b, int32_t slot, int64_t s) {
  for (int e = 0; e < b->nexprs; e++) {
    const ljg_kexpr *x = &b->exprs[e];
    if ((x->kind == LJG_X_LOAD || x->kind == LJG_X_BUFFER) && x->slot == slot && load_row_stride(b, e) != s)
      return false;
    if (x->kind == LJG_X_GATHER && b->exprs[x->in[1]].slot == slot) {
      const ljg_view1 *t = ljg_view_top(&b->views[b->exprs[x->in[1]].view]);
      if (x->aux < leading_dims(t->ndim, t->shape, b->ntasks)) return false;
    }
  }
  return true;
}

/* A kernel whose nests' first dims multiply to `rows` (e.g. [B, M, N] after a matmul's B·M
 * rows): the nests split those dims together. The nests are copied into the arena, so the
 * kernel it came from is intact when the join does not happen. */
static bool as_leading_rows(ljb_arena *arena, ljg_kernel *k, int64_t rows) {
  if (k->kind != LJG_K_LOOPS || k->task_dim != 0 || k->nnests < 1 || rows < 1) return false;
  ljg_nest *nests = ljb_arena_alloc(arena, (size_t)k->nnests * sizeof *nests);
  for (int s = 0; s < k->nnests; s++) {
    nests[s] = k->nests[s];
    int nd = leading_dims(nests[s].ndim, nests[s].shape, rows);
    if (nd == 0 || (nests[s].rmask & ((1u << nd) - 1)) || scatters_across_rows(&nests[s], nd)) return false;
    nests[s].row_dims = nd;
  }
  k->nests = nests;
  k->ntasks = rows;
  return true;
}

/* A flat elementwise kernel (one 1-D nest over N points, every view one level, 1-D, offset
 * 0) read as `rows` rows of N / rows: the same points in the same order, now splittable like
 * its neighbours. Its views are copied into the arena, so the kernel it came from is intact
 * when the join does not happen. */
static bool as_rows(ljb_arena *arena, ljg_kernel *k, int64_t rows) {
  if (as_leading_rows(arena, k, rows)) return true;
  if (k->kind != LJG_K_LOOPS || k->nnests != 1 || k->task_dim != 0 || rows < 1) return false;
  const ljg_nest *n = &k->nests[0];
  if (n->ndim != 1 || n->rop >= 0 || n->scatter_index >= 0 || n->shape[0] % rows != 0) return false;
  int64_t cols = n->shape[0] / rows;
  for (int v = 0; v < k->nviews; v++) {
    const ljg_view *w = &k->views[v];
    if (w->n != 1 || w->v[0].ndim != 1 || w->v[0].offset != 0 || w->v[0].stride[0] < 0) return false;
  }
  for (int e = 0; e < k->nexprs; e++)
    if (k->exprs[e].kind == LJG_X_BUFFER || k->exprs[e].kind == LJG_X_GATHER) return false;
  ljg_view *views = ljb_arena_alloc(arena, (size_t)k->nviews * sizeof *views);
  for (int v = 0; v < k->nviews; v++) {
    ljg_view1 *w = &views[v].v[0];
    int64_t s = k->views[v].v[0].stride[0];
    views[v] = k->views[v];
    w->ndim = 2;
    w->shape[0] = rows;
    w->shape[1] = cols;
    w->stride[0] = s * cols;
    w->stride[1] = s;
  }
  ljg_nest *nest = ljb_arena_alloc(arena, sizeof *nest);
  *nest = *n;
  nest->ndim = 2;
  nest->shape[0] = rows;
  nest->shape[1] = cols;
  k->views = views;
  k->nests = nest;
  k->ntasks = rows;
  return true;
}

/* An elementwise kernel of one nest that reads `slot` with its dims in another order than the
 * rows the slot is written in (images side by side' product, [O, N·P] to [N, O, P]: the rows O
 * of the product's C are the second dim of the output), with the dims that make `rows` rows
 * of that read moved first: the dims by the read's strides, largest first, until their
 * extents multiply to rows, the others after them in their order. The nest's last dim stays
 * last, so that each row still writes and reads runs. Its nest and views are copied into the
 * arena, so the kernel it came from is intact when the join does not happen. */
static bool as_permuted_rows(ljb_arena *arena, ljg_kernel *k, int64_t rows, int32_t slot) {
  if (k->kind != LJG_K_LOOPS || k->nnests != 1 || k->task_dim != 0 || rows < 2) return false;
  const ljg_nest *n = &k->nests[0];
  if (n->rop >= 0 || n->scatter_index >= 0 || n->ndim < 2) return false;
  const ljg_view1 *read = NULL;
  for (int e = 0; e < k->nexprs; e++) {
    if (k->exprs[e].kind == LJG_X_BUFFER || k->exprs[e].kind == LJG_X_GATHER) return false;
    if (k->exprs[e].kind == LJG_X_LOAD && k->exprs[e].slot == slot && !read)
      read = ljg_view_top(&k->views[k->exprs[e].view]);
  }
  if (!read || read->ndim != n->ndim) return false;
  int by_stride[LJ_MAX_DIMS], nd = n->ndim;
  for (int i = 0; i < nd; i++) {
    int j = i;
    for (; j > 0 && read->stride[by_stride[j - 1]] < read->stride[i]; j--) by_stride[j] = by_stride[j - 1];
    by_stride[j] = i;
  }
  int64_t prod = 1;
  int nr = 0;
  bool moved = false, is_row[LJ_MAX_DIMS] = {false};
  while (nr < nd && prod < rows) {
    int d = by_stride[nr++];
    prod *= n->shape[d];
    is_row[d] = true;
    moved |= d != nr - 1;
  }
  if (prod != rows || !moved || is_row[nd - 1]) return false;
  int order[LJ_MAX_DIMS], at = nr;
  for (int r = 0; r < nr; r++) order[r] = by_stride[r];
  for (int d = 0; d < nd; d++)
    if (!is_row[d]) order[at++] = d;
  ljg_view *views = ljb_arena_alloc(arena, (size_t)k->nviews * sizeof *views);
  for (int v = 0; v < k->nviews; v++) {
    views[v] = k->views[v];
    const ljg_view1 *from = ljg_view_top(&k->views[v]);
    ljg_view1 *to = &views[v].v[views[v].n - 1];
    if (from->ndim != nd) return false;
    for (int d = 0; d < nd; d++) to->shape[d] = from->shape[order[d]], to->stride[d] = from->stride[order[d]];
  }
  ljg_nest *nest = ljb_arena_alloc(arena, sizeof *nest);
  *nest = *n;
  for (int d = 0; d < nd; d++) nest->shape[d] = n->shape[order[d]];
  nest->row_dims = nr;
  k->views = views;
  k->nests = nest;
  k->ntasks = rows;
  return true;
}

/* Whether b is a col2im of matmul a's C, read as it lies: a gradient's columns [N, C·KH·KW, L]
 * computed by the matmul (a convolution's input gradient, Wᵀ·dY per image), added into the
 * image plane by plane as they are computed. A task of the joined kernel is a plane: KH·KW
 * rows of C. */
static bool adds_up_rows(const ljg_kernel *a, const ljg_kernel *b) {
  if (a->kind != LJG_K_MATMUL || a->nnests || ljg_kernel_has_window(a) || a->mm_sum || a->mm_task_rows != 1 ||
      b->kind != LJG_K_WINDOW || b->win_op != LJG_OP_COL2IM || b->nnests)
    return false;
  int64_t rows = b->win[0] * b->win[1];
  return b->exprs[b->win_src].slot == a->mm_out_slot && a->ntasks == b->ntasks * rows &&
         load_row_stride(b, b->win_src) == rows * a->mm_n;
}

/* Whether kernel k reads slot. */
static bool kernel_reads(const ljg_kernel *k, int32_t slot) {
  for (int e = 0; e < k->nexprs; e++)
    if (ljg_expr_reads(&k->exprs[e], slot)) return true;
  return false;
}

/* Whether matmul b can follow a's nests as its trailing product (ljg_kernel.tm): b's A is
 * what a nest of a writes row-disjointly, read at its own row as [B, M, K]; b's rows are
 * those of a's matmul (B matrices of M rows), each of b's matrices has its own B (attention's
 * V; one B for every row, a weight, would be packed again for every block), which a does not
 * write; f32 or f64 through single-level views (what the GEMM routines take); nothing fused
 * into b; a neither reads nor writes b's C. */
static bool multiplies_rows(const ljg_program *p, const ljg_kernel *a, const ljg_kernel *b) {
  if (a->kind != LJG_K_MATMUL || !a->nnests || ljg_kernel_has_window(a) || a->mm_sum ||
      a->mm_task_rows != 1 || a->mm_col_tasks || b->kind != LJG_K_MATMUL || b->nnests || ljg_kernel_has_window(b) ||
      b->mm_sum || b->mm_cols || b->mm_task_rows != 1 || b->mm_col_tasks || b->mm_unpool_at >= 0 ||
      b->mm_b != a->mm_b || b->mm_m != a->mm_m || b->ntasks != a->ntasks || b->mm_b < 2 || b->mm_n < 1 ||
      b->mm_k < 1 || (b->mm_dtype != LJ_F32 && b->mm_dtype != LJ_F64))
    return false;
  const ljg_kexpr *ea = &b->exprs[b->mm_a], *eb = &b->exprs[b->mm_bm];
  if (ea->kind != LJG_X_LOAD || eb->kind != LJG_X_LOAD || b->views[ea->view].n != 1 || b->views[eb->view].n != 1 ||
      b->views[eb->view].v[0].stride[0] == 0 || ljg_kernel_writes(a, eb->slot, -1) ||
      ljg_kernel_writes(a, b->mm_out_slot, -1) || kernel_reads(a, b->mm_out_slot))
    return false;
  for (int s = a->nnests - 1; s >= 0; s--)
    if (a->nests[s].out_slot == ea->slot)
      return write_row_stride(p, a, &a->nests[s]) == b->mm_k && load_row_stride(b, b->mm_a) == b->mm_k;
  return false;
}

/* Whether k is a LOOPS kernel whose nests are all elementwise. */
static bool elementwise(const ljg_kernel *k) {
  for (int s = 0; s < k->nnests; s++)
    if (k->nests[s].rop >= 0) return false;
  return k->kind == LJG_K_LOOPS;
}

/* Whether k reads a slot that w writes or, with writes, writes one: by w's outputs, a few,
 * not by every slot of the program (join_neighbours and join_task_sums ask for many pairs of
 * kernels: ResNet-18's step spent ~20 ms of its compile here). */
static bool uses_output_of(const ljg_kernel *w, const ljg_kernel *k, bool writes) {
  int32_t own[3];
  int nown = ljg_kernel_own_outputs(w, own);
  for (int i = 0; i < w->nnests + nown; i++) {
    int32_t s = i < w->nnests ? w->nests[i].out_slot : own[i - w->nnests];
    if (s >= 0 && (kernel_reads(k, s) || (writes && ljg_kernel_writes(k, s, -1)))) return true;
  }
  return false;
}

/* Whether b may run before a: it reads nothing a writes, and writes nothing a reads or writes. */
static bool independent(const ljg_kernel *a, const ljg_kernel *b) {
  return !uses_output_of(a, b, true) && !uses_output_of(b, a, false);
}

/* The least rows of a block of a kernel of column sums (column_sums): four vectors of f32. */
enum { COLUMN_ROWS_MIN = 64 };

/* Whether k is a loops kernel of column sums: every nest a reduction in column order
 * (ljg_column_order; the sums over rows of a layer norm's weight and bias gradients, where
 * there are too few rows for pass_reduce.c's two stages). Its rows are columns of what it
 * reads, so a block of R rows reads a run of R elements of each of theirs: sized like a plain
 * row's block (a few columns where the rows are long), it read a few elements of every line
 * from memory and summed them in vectors of as many lanes. Blocks of COLUMN_ROWS_MIN or more
 * instead, one thread: a layer norm's weight and bias gradients over [512, 1024], blocks of
 * 4 -> 64 columns, their kernel 1.33 -> 0.10 ms (the layer norm forward and backward 1.41 ->
 * 0.22); the sums of x and x·y over [2048, 128], blocks of 2 -> 64, 0.91 -> 0.044 ms. */
static bool column_sums(const ljg_kernel *k) {
  if (k->kind != LJG_K_LOOPS || k->nnests == 0) return false;
  for (int s = 0; s < k->nnests; s++) {
    const ljg_nest *n = &k->nests[s];
    if (!ljg_column_order(k, n, n->ndim - __builtin_popcount(n->rmask))) return false;
  }
  return true;
}

/* Whether a nest of k with rows of more than min_columns points reads an operand transposed
 * across its rows (ljg_view_transposed_dim along one of its row dims), which the lowering
 * reads in tiles of LJG_TILE_MIN rows and more, and not in a row-fused kernel's blocks. */
static bool reads_across_rows(const ljg_kernel *k, int64_t min_columns) {
  bool *used = ljb_xalloc((size_t)k->nexprs * sizeof *used), found = false;
  for (int s = 0; s < k->nnests && !found; s++) {
    const ljg_nest *n = &k->nests[s];
    if (ljg_numel(n->ndim - n->row_dims, n->shape + n->row_dims) <= min_columns) continue;
    memset(used, 0, (size_t)k->nexprs * sizeof *used);
    ljg_nest_exprs(k, &k->nests[s], used);
    for (int e = 0; e < k->nexprs && !found; e++) {
      if (!used[e] || k->exprs[e].kind != LJG_X_LOAD) continue;
      const ljg_view *v = &k->views[k->exprs[e].view];
      int t = v->v[0].ndim == k->nests[s].ndim ? ljg_view_transposed_dim(v, LJG_TILE_MIN) : -1;
      found = t >= 0 && t < k->nests[s].row_dims;
    }
  }
  free(used);
  return found;
}

/* Whether b can join a: the matmul's C (rows b·M + m of N), the window's planes or what a's
 * nests write is read by b only at its own row. An im2col leads its group (its planes are
 * larger than its image) or follows a matmul's (a convolution's pooling: C's rows are the
 * planes of the image it pools); a col2im ends a group, on what the nests wrote (a gradient's
 * planes, larger than the image they add up to). */
static bool can_join(const ljg_program *p, const ljg_kernel *a, const ljg_kernel *b) {
  if (a->tm) return false;
  /* elementwise kernels share no intermediate a block could keep, nor do kernels of which
   * neither reads what the other writes, and one that reads an operand transposed across its
   * rows would lose its tiles: a kept x.t() and x.t() * 2, one thread over [4096, 1024], 17
   * ms in blocks against ~1 ms apart; a convolution's weight gradient [512, 4608] added up
   * from its two halves, stored transposed, beside its bias gradient's sums, one thread,
   * 14.0 ms in blocks of a row against 2.2 apart; ResNet-18's [256, 2304] at batch 8, 1.8 ms
   * against ~0.3 (with rows whose lines stay in L1, TRANSPOSED_JOIN_ROW_BYTES, as an SGD
   * step's updates of small weights, the kernel saved costs more than the tiles would gain;
   * column sums together still go in blocks of columns, column_sums) */
  if (elementwise(a) && elementwise(b) && (reads_across_rows(a, 0) || reads_across_rows(b, 0))) return false;
  int64_t columns = TRANSPOSED_JOIN_ROW_BYTES / 64; /* a line of 64 bytes a column */
  if (independent(a, b) && !(column_sums(a) && column_sums(b)) &&
      (reads_across_rows(a, columns) || reads_across_rows(b, columns)))
    return false;
  if (adds_up_rows(a, b) || multiplies_rows(p, a, b)) return true;
  if (a->ntasks != b->ntasks) return false;
  if (b->kind == LJG_K_WINDOW) {
    bool ends = b->win_op == LJG_OP_COL2IM && rows_kernel(a);
    bool pools = b->win_op == LJG_OP_IM2COL && a->kind == LJG_K_MATMUL && !ljg_kernel_has_window(a);
    /* a map before a max-pool (ResNet's stem: its batch norm and relu, whose 25.7 MB at batch
     * 8 then stay a plane at a time on the stack: with the pool, 4.2 -> 1.7 ms on one thread);
     * not before the other windows (a depthwise convolution's reads the image itself) */
    bool maxpools =
        b->win_op == LJG_OP_IM2COL && b->win_fill == -INFINITY && a->kind == LJG_K_LOOPS && rows_kernel(a);
    if (b->nnests || !(ends || pools || maxpools)) return false;
  } else if (!rows_kernel(b)) {
    return false;
  }
  if (a->kind == LJG_K_LOOPS && !rows_kernel(a)) return false;
  if (a->kind == LJG_K_MATMUL && !reads_own_row(b, a->mm_out_slot, a->mm_n)) return false;
  if (ljg_kernel_has_window(a) &&
      (a->win_op == LJG_OP_COL2IM || !reads_own_row(b, a->win_out_slot, window_out_row(a))))
    return false;
  for (int s = 0; s < a->nnests; s++) {
    int64_t stride = write_row_stride(p, a, &a->nests[s]);
    if (!stride || !reads_own_row(b, a->nests[s].out_slot, stride)) return false;
  }
  return true;
}

/* a followed by b, as one kernel whose exprs and views are a's then b's. */
static void join(ljb_arena *arena, ljg_kernel *a, const ljg_kernel *b) {
  if (adds_up_rows(a, b)) {
    a->mm_task_rows = b->win[0] * b->win[1];
    a->ntasks = b->ntasks;
  }
  int ne = a->nexprs + b->nexprs, nv = a->nviews + b->nviews, nn = a->nnests + b->nnests;
  ljg_kexpr *x = ljb_arena_alloc(arena, (size_t)ne * sizeof *x);
  ljg_view *v = ljb_arena_alloc(arena, (size_t)nv * sizeof *v);
  ljg_nest *n = ljb_arena_alloc(arena, (size_t)nn * sizeof *n);
  memcpy(x, a->exprs, (size_t)a->nexprs * sizeof *x);
  memcpy(v, a->views, (size_t)a->nviews * sizeof *v);
  memcpy(n, a->nests, (size_t)a->nnests * sizeof *n);
  for (int e = 0; e < b->nexprs; e++) {
    ljg_kexpr *y = &x[a->nexprs + e];
    *y = b->exprs[e];
    for (int i = 0; i < y->nin; i++) y->in[i] += a->nexprs;
    if (y->kind == LJG_X_LOAD || y->kind == LJG_X_INDEX || y->kind == LJG_X_BUFFER) y->view += a->nviews;
  }
  memcpy(v + a->nviews, b->views, (size_t)b->nviews * sizeof *v);
  for (int s = 0; s < b->nnests; s++) {
    ljg_nest *m = &n[a->nnests + s];
    *m = b->nests[s];
    m->value += a->nexprs;
    if (m->scatter_index >= 0) m->scatter_index += a->nexprs;
    m->out_view += a->nviews;
  }
  a->exprs = x;
  a->nexprs = ne;
  a->views = v;
  a->nviews = nv;
  a->nests = n;
  a->nnests = nn;
  if (b->kind == LJG_K_WINDOW) { /* after a's nests, on the block's rows of C or what they wrote */
    if (a->kind == LJG_K_LOOPS) a->kind = LJG_K_WINDOW;
    a->win_op = b->win_op;
    a->win_at = (int16_t)(nn - b->nnests);
    a->win_src = b->win_src + (ne - b->nexprs);
    a->win_out_slot = b->win_out_slot;
    a->win_dtype = b->win_dtype;
    memcpy(a->win, b->win, sizeof a->win);
    a->win_fill = b->win_fill;
    memcpy(a->win_img, b->win_img, sizeof a->win_img);
    a->win_oh = b->win_oh;
    a->win_ow = b->win_ow;
  }
  if (b->kind == LJG_K_MATMUL) { /* multiplies_rows: after a's nests, on the block's rows */
    a->tm = 1;
    a->tm_dtype = b->mm_dtype;
    a->tm_n = b->mm_n;
    a->tm_k = b->mm_k;
    a->tm_a = b->mm_a + (ne - b->nexprs);
    a->tm_bm = b->mm_bm + (ne - b->nexprs);
    a->tm_out_slot = b->mm_out_slot;
  }
  a->work += b->work;
  a->task_dim = 0; /* a matmul's or a window's nests split its rows too */
  a->row_block = 1; /* sized below */
}

/* Whether expression e of k (or one it depends on) loads slot. */
static bool expr_reads(const ljg_kernel *k, int32_t e, int32_t slot) {
  const ljg_kexpr *x = &k->exprs[e];
  if (ljg_expr_reads(x, slot)) return true;
  for (int i = 0; i < x->nin; i++)
    if (expr_reads(k, x->in[i], slot)) return true;
  return false;
}

/* Makes slot LOCAL if only row-fused kernel k uses it: written row-disjointly with row
 * stride `stride` by nest w and later nests that write the same rows, or (w = -1 - j) by the
 * matmul or window that runs before nest j, and read after it is written at its own row.
 * *total counts the bytes of k's LOCAL slots so far. */
static void localize_slot(ljg_program *p, ljg_kernel *k, int32_t slot, int w, int64_t stride, int64_t *total) {
  ljg_slot *sl = &p->slots[slot];
  int64_t row_bytes = stride * lj_dtype_size(sl->dtype);
  int64_t max = local_max_bytes(k, slot);
  if (k->row_block == 1 && max < LOCAL_ROW_MAX_BYTES) max = LOCAL_ROW_MAX_BYTES;
  if (k->kind == LJG_K_MATMUL && !ljg_kernel_has_window(k) && max < MATMUL_BLOCK_L2_BYTES) max = MATMUL_BLOCK_L2_BYTES;
  if (sl->kind != LJG_SLOT_TEMP || !stride || k->row_block * row_bytes > max ||
      *total + k->row_block * row_bytes > LOCAL_KERNEL_MAX_BYTES || !reads_own_row(k, slot, stride) ||
      ljg_slot_used_elsewhere(p, k, slot))
    return;
  for (int r = 0; r < k->nnests; r++) {
    if (r == w) continue;
    if (k->nests[r].out_slot == slot) { /* only later nests write it too, on the same rows (a scatter-add) */
      if (r < w || w < 0 || write_row_stride(p, k, &k->nests[r]) != stride) return;
    } else if (r < (w < 0 ? -1 - w : w) && expr_reads(k, k->nests[r].value, slot)) { /* none reads it before */
      return;
    }
  }
  sl->kind = LJG_SLOT_LOCAL;
  sl->row_bytes = row_bytes;
  sl->nbytes = k->row_block * row_bytes;
  *total += sl->nbytes;
}

/* Makes the intermediates that only row-fused kernel k uses LOCAL. */
static void localize(ljg_program *p, ljg_kernel *k) {
  int64_t total = 0;
  if (k->kind == LJG_K_MATMUL) localize_slot(p, k, k->mm_out_slot, -1, k->mm_task_rows * k->mm_n, &total);
  if (k->win_op == LJG_OP_IM2COL) localize_slot(p, k, k->win_out_slot, -1 - k->win_at, window_out_row(k), &total);
  for (int w = 0; w < k->nnests; w++)
    localize_slot(p, k, k->nests[w].out_slot, w, write_row_stride(p, k, &k->nests[w]), &total);
}

/* The slot of a's that b may read permuted, its dims reordered to follow a's rows
 * (as_permuted_rows), or -1: the C of a plain product (no window, not summed over its batch)
 * of more rows than fuse.c's column tasks take (a permuted epilogue would not run on a task's
 * columns: MobileNetV2's block, 960 -> 160 channels over 7×7 at batch 32, two threads, lost
 * 6.5% so); or what the last of the nests of a group without a product writes that b reads (a
 * depthwise convolution's output, [N, C, P], read as [C, N·P] by the 1×1 convolution after
 * it: stored so as its planes are computed rather than copied by a kernel of its own). */
static int32_t permuted_slot(const ljg_kernel *a, const ljg_kernel *b) {
  if (a->kind == LJG_K_MATMUL)
    return !a->mm_sum && a->mm_cols == LJG_MM_COLS_NONE && !ljg_kernel_has_window(a) &&
                   a->mm_b * a->mm_m > LJG_MATMUL_COL_SPLIT_ROWS && kernel_reads(b, a->mm_out_slot)
               ? a->mm_out_slot
               : -1;
  for (int s = a->nnests - 1; s >= 0; s--)
    if (kernel_reads(b, a->nests[s].out_slot)) return a->nests[s].out_slot;
  return -1;
}

/* Joins b into *a, on copies: a flat neighbour is read as rows of the other's row count.
 * Whether it did. */
static bool join_into(ljg_program *p, ljg_kernel *a, const ljg_kernel *b) {
  ljg_kernel x = *a, y = *b;
  if (x.ntasks != y.ntasks && !as_rows(&p->arena, &y, x.ntasks)) as_rows(&p->arena, &x, y.ntasks);
  if (!can_join(p, &x, &y)) {
    x = *a, y = *b;
    int32_t slot = permuted_slot(a, b);
    if (slot < 0 || !as_permuted_rows(&p->arena, &y, x.ntasks, slot) || !can_join(p, &x, &y)) return false;
  }
  join(&p->arena, &x, &y);
  *a = x;
  return true;
}

/* Joins kernels left to right, each into its neighbour or, a LOOPS kernel, into an earlier
 * kernel when it depends on none of those between (layer norm's gradient sums the weight's
 * and the bias's gradients in two kernels over the same rows, each in two stages: the first
 * stages join, reading the gradient once). With col2im_only, only nests followed by a
 * col2im (an im2col waits: a convolution's bias joins its product before the pool does). */
static void join_neighbours(ljg_program *p, bool col2im_only) {
  int out = 0;
  for (int i = 0; i < p->nkernels; i++) {
    const ljg_kernel *b = &p->kernels[i];
    bool joined = false;
    if (!col2im_only || (b->kind == LJG_K_WINDOW && b->win_op == LJG_OP_COL2IM))
      for (int j = out - 1; j >= 0 && !joined; j--) {
        joined = join_into(p, &p->kernels[j], b);
        if (col2im_only || b->kind != LJG_K_LOOPS || !independent(&p->kernels[j], b)) break;
      }
    if (!joined) p->kernels[out++] = *b;
  }
  p->nkernels = out;
}

/* The bytes of a row that a LOOPS kernel's nests read: each slot's row once, however many
 * nests read it (softmax: its input, read by the max and the exps, and the exps, read by their
 * sum and the quotients). Slots read the same at every row (a layer norm's weight) count
 * nothing: one copy serves every block. With memory_only, only slots that are not LOCAL: what
 * a row reads from memory. */
static int64_t row_read_bytes(const ljg_program *p, const ljg_kernel *k, bool memory_only) {
  int64_t total = 0;
  for (int e = 0; e < k->nexprs; e++) {
    const ljg_kexpr *x = &k->exprs[e];
    if (x->kind != LJG_X_LOAD || (memory_only && p->slots[x->slot].kind == LJG_SLOT_LOCAL)) continue;
    bool seen = false;
    for (int f = 0; f < e && !seen; f++) seen = k->exprs[f].kind == LJG_X_LOAD && k->exprs[f].slot == x->slot;
    if (!seen) total += load_row_stride(k, e) * lj_dtype_size(p->slots[x->slot].dtype);
  }
  return total;
}

/* Whether b can run once a task after row-fused kernel a, whose tasks become b's: b is a
 * column sum in blocks of rows (pass_reduce.c's first stage: task g sums rows [g·R, (g+1)·R)
 * of every column) over what a reads or writes, R = a's rows per task of b. a's nests then run
 * on a task's R rows block by block, and b's on the task, reading again from cache what a's
 * just read (a layer norm's weight and bias gradients, sums of the gradient and of the
 * gradient times the normalized input, were a kernel of their own reading both again from
 * memory). b reads what a writes only at its task's rows and writes nothing a reads or
 * writes. However large a task's rows, b reads them from closer than memory then (a layer
 * norm over [4096, 4096] on one thread, 64 tasks of 2 MiB of input and gradient each:
 * 12.7 -> 10.2 ms). */
static bool sums_rows_after(const ljg_program *p, const ljg_kernel *a, const ljg_kernel *b) {
  if (a->kind != LJG_K_LOOPS || !a->row_block || a->task_rows || !rows_kernel(a) || !rows_kernel(b) ||
      b->ntasks < 2 || a->ntasks <= b->ntasks || a->ntasks % b->ntasks)
    return false;
  bool shares = false;
  for (int32_t s = 0; s < p->nslots; s++) {
    bool a_uses = kernel_reads(a, s) || ljg_kernel_writes(a, s, -1), b_reads = kernel_reads(b, s);
    if (ljg_kernel_writes(b, s, -1) && (a_uses || p->slots[s].kind == LJG_SLOT_LOCAL)) return false;
    shares |= b_reads && a_uses;
  }
  if (!shares) return false;
  for (int s = 0; s < a->nnests; s++) {
    int32_t slot = a->nests[s].out_slot;
    if (!kernel_reads(b, slot)) continue;
    int64_t stride = write_row_stride(p, a, &a->nests[s]);
    if (!stride || p->slots[slot].kind == LJG_SLOT_LOCAL || !reads_own_row(b, slot, a->ntasks / b->ntasks * stride))
      return false;
  }
  return true;
}

/* Joins every kernel that sums_rows_after the row-fused kernel before it, or after an earlier
 * one when it depends on none of those between. */
static void join_task_sums(ljg_program *p) {
  int out = 0;
  for (int i = 0; i < p->nkernels; i++) {
    const ljg_kernel *b = &p->kernels[i];
    bool joined = false;
    for (int j = out - 1; j >= 0 && !joined; j--) {
      ljg_kernel *a = &p->kernels[j];
      if (sums_rows_after(p, a, b)) {
        int64_t row_block = a->row_block, rows = a->ntasks;
        int at = a->nnests;
        join(&p->arena, a, b);
        a->row_block = row_block;
        a->task_rows = rows / b->ntasks;
        a->per_task_at = at;
        a->ntasks = b->ntasks;
        joined = true;
      } else if (!independent(a, b)) {
        break;
      }
    }
    if (!joined) p->kernels[out++] = *b;
  }
  p->nkernels = out;
}

/* Row-fused kernels of wide rows (a softmax over the channels of [N, C, H, W], a row an image's
 * C·H·W): a row that a block reads from memory is as large as L2 or larger, and each nest
 * reads it again from L3 or memory. When every nest keeps a last dim of one length, the
 * columns (H·W), and the nests address what they pass each other alike along it, a block's
 * nests run on a block of its columns at a time instead: the max over the channels of a few
 * hundred columns, their exps and sum, then their quotients, each from L1 or L2. A block of
 * columns is a whole number of vectors (COLUMN_BLOCK_ALIGN) that divides the columns, the
 * fewest of at least COLUMN_BLOCK_MIN columns (runs of 1 KiB along each channel, which the
 * prefetchers follow) whose reads take COLUMN_BLOCK_BYTES or more, and at most
 * COLUMN_BLOCK_MAX_BYTES; rows that read at most COLUMN_BLOCK_ROW_BYTES from memory stay
 * whole. Softmax over dim 1 through the API, median of 100 runs, one thread: [32, 64, 56,
 * 56] 3.5-3.6 -> 2.3-2.5 ms in blocks of 448 columns (the kernel's time in `lj-run` on its
 * graph: 16 columns a block 3.5 ms, 64 2.3, 224 2.7, 448 2.2-2.3, 784 2.2-2.3, whole rows
 * 2.7), two threads 1.27-1.37 -> 1.10; [8, 21, 128, 128] 1.49-1.57 -> 1.20 (1024 columns);
 * [4, 150, 128, 128] 7.4-7.7 -> 5.25 (256); log_softmax over [32, 64, 56, 56] 2.3-2.7 ->
 * 2.1-2.2. [16, 32, 64, 64], whose rows of 512 KiB fit L2, within noise either way, so
 * whole; over [64, 1024, 64] (rows of 64 columns), blocks of 16 took 2.1 ms against 1.3.
 * Prefetching the next block's columns as the first nest ends lost 2-10%. A cross-entropy
 * over the channels of [8, 21, 128, 128] with its gradient (a segmentation's loss), one
 * thread: 2.39-2.42 -> 1.54-1.55 ms, the gather of each position's target logit merged to the
 * others' columns (merge_columns). */
enum { COLUMN_BLOCK_ROW_BYTES = 512 << 10, COLUMN_BLOCK_BYTES = 128 << 10, COLUMN_BLOCK_MAX_BYTES = 512 << 10 };
enum { COLUMN_BLOCK_MIN = 256, COLUMN_BLOCK_ALIGN = 16 };

/* A nest's columns: its last kept dim (ljg_kernel.col_block). */
static int nest_column(const ljg_nest *n) { return n->ndim - __builtin_popcount(n->rmask) - 1; }

/* Whether view a over a nest's points, its column dim ca, and view b, its column dim cb,
 * address the element of a column alike: one level each, at one offset, the column dims of
 * one length and one stride (not 0), and their other dims that move (more than one point, a
 * stride not 0) of the same lengths and strides in some order. */
static bool same_columns(const ljg_view *a, int ca, const ljg_view *b, int cb) {
  if (a->n != 1 || b->n != 1) return false;
  const ljg_view1 *x = &a->v[0], *y = &b->v[0];
  if (ca >= x->ndim || cb >= y->ndim || x->offset != y->offset || x->shape[ca] != y->shape[cb] ||
      x->stride[ca] != y->stride[cb] || x->stride[ca] == 0)
    return false;
  bool taken[LJ_MAX_DIMS] = {0};
  int moving = 0;
  for (int e = 0; e < y->ndim; e++) moving += e != cb && y->shape[e] != 1 && y->stride[e] != 0;
  for (int d = 0; d < x->ndim; d++) {
    if (d == ca || x->shape[d] == 1 || x->stride[d] == 0) continue;
    bool found = false;
    for (int e = 0; e < y->ndim && !found; e++)
      if (e != cb && !taken[e] && y->shape[e] == x->shape[d] && y->stride[e] == x->stride[d]) taken[e] = found = true;
    if (!found) return false;
    moving--;
  }
  return moving == 0;
}

/* Whether the nests of k address each slot a nest writes alike along their columns
 * (same_columns with the first nest that writes it) and read it with plain loads only. */
static bool columns_agree(const ljg_kernel *k) {
  bool *used = ljb_xalloc((size_t)k->nexprs * sizeof *used), ok = true;
  for (int s = 0; s < k->nnests && ok; s++) {
    const ljg_nest *n = &k->nests[s];
    memset(used, 0, (size_t)k->nexprs * sizeof *used);
    ljg_nest_exprs(k, n, used);
    for (int e = -1; e < k->nexprs && ok; e++) {
      const ljg_kexpr *x = e >= 0 ? &k->exprs[e] : NULL;
      if (x && (!used[e] || (x->kind != LJG_X_LOAD && x->kind != LJG_X_BUFFER))) continue;
      int32_t slot = x ? x->slot : n->out_slot, view = x ? x->view : n->out_view;
      int w = 0;
      while (w < k->nnests && k->nests[w].out_slot != slot) w++;
      if (w < k->nnests)
        ok = (!x || x->kind == LJG_X_LOAD) &&
             same_columns(&k->views[view], nest_column(n), &k->views[k->nests[w].out_view], nest_column(&k->nests[w]));
    }
  }
  free(used);
  return ok;
}

/* View v with dims [j, c] of its top level merged into one (ljg_view_reshape), into *out; false
 * where the top level does not step through them as through one dim. */
static bool merged_view(const ljg_view *v, int j, int c, ljg_view *out) {
  const ljg_view1 *t = ljg_view_top(v);
  int64_t shape[LJ_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (d <= j || d > c) shape[nd++] = t->shape[d];
    else shape[nd - 1] *= t->shape[d];
  }
  *out = *v;
  return ljg_view_reshape(out, nd, shape) && out->n == v->n;
}

/* Marks in views[] the views nest n of k reads and writes through. */
static void nest_views(const ljg_kernel *k, const ljg_nest *n, bool *used, bool *views) {
  memset(used, 0, (size_t)k->nexprs * sizeof *used);
  ljg_nest_exprs(k, n, used);
  views[n->out_view] = true;
  for (int e = 0; e < k->nexprs; e++) {
    const ljg_kexpr *x = &k->exprs[e];
    if (used[e] && (x->kind == LJG_X_LOAD || x->kind == LJG_X_BUFFER || x->kind == LJG_X_INDEX)) views[x->view] = true;
  }
}

/* Nest s of k, whose last kept dim c is shorter than cols, with its kept dims [j, c] that
 * multiply to cols (none of them a row dim) merged into one, as are those dims of the views
 * it reads and writes through (a gather's [N, 1, H, W] beside nests of [N, H·W] whose dims
 * normalization merged). k's nests, views and expressions must be copies of the kernel's own.
 * False where a view does not step through those dims as through one (merged_view) or serves
 * another nest too, or a gather picks along one of them. */
static bool merge_columns(ljg_kernel *k, int s, int64_t cols) {
  ljg_nest *n = &k->nests[s];
  int c = nest_column(n), j = c;
  int64_t prod = n->shape[c];
  while (prod < cols && j > n->row_dims) prod *= n->shape[--j];
  if (prod != cols || j == c) return false;
  bool *used = ljb_xalloc((size_t)k->nexprs * sizeof *used);
  bool *mine = ljb_xcalloc((size_t)k->nviews, sizeof *mine), *other = ljb_xcalloc((size_t)k->nviews, sizeof *other);
  for (int t = 0; t < k->nnests; t++)
    if (t != s) nest_views(k, &k->nests[t], used, other);
  nest_views(k, n, used, mine);
  bool ok = true;
  for (int e = 0; e < k->nexprs && ok; e++)
    ok = !used[e] || k->exprs[e].kind != LJG_X_GATHER || k->exprs[e].aux < j || k->exprs[e].aux > c;
  ljg_view *merged = ljb_xalloc((size_t)k->nviews * sizeof *merged);
  for (int v = 0; v < k->nviews && ok; v++)
    ok = !mine[v] ||
         (!other[v] && ljg_view_top(&k->views[v])->ndim == n->ndim && merged_view(&k->views[v], j, c, &merged[v]));
  if (ok) {
    for (int v = 0; v < k->nviews; v++)
      if (mine[v]) k->views[v] = merged[v];
    for (int e = 0; e < k->nexprs; e++)
      if (used[e] && k->exprs[e].kind == LJG_X_GATHER && k->exprs[e].aux > c) k->exprs[e].aux -= c - j;
    n->shape[j] = cols;
    for (int d = c + 1; d < n->ndim; d++) n->shape[d - (c - j)] = n->shape[d];
    n->rmask >>= c - j;
    n->ndim -= c - j;
  }
  free(merged);
  free(used);
  free(mine);
  free(other);
  return ok;
}

/* The columns a block of row-fused kernel k runs its nests on at a time (ljg_kernel.col_block),
 * or 0 for its whole rows: a LOOPS kernel in blocks of one row, no task rows, one nest or
 * more that reduces, a row's reads from memory over COLUMN_BLOCK_ROW_BYTES, every nest's
 * columns (after merge_columns, on copies that replace k's arrays when it returns columns)
 * of one length and not a row dim, no scatter, columns_agree, and a block of columns as the
 * comment above says. */
static int64_t column_block(ljg_program *p, ljg_kernel *k) {
  if (k->kind != LJG_K_LOOPS || k->row_block != 1 || k->task_rows || k->nnests < 2) return 0;
  const ljg_nest *first = &k->nests[0];
  int c0 = nest_column(first);
  if (c0 < first->row_dims || first->shape[c0] <= COLUMN_BLOCK_MIN) return 0;
  int64_t cols = first->shape[c0], read = row_read_bytes(p, k, false), column = read / cols + 1;
  bool reduces = false;
  for (int s = 0; s < k->nnests; s++) reduces |= k->nests[s].rop >= 0;
  if (!reduces || row_read_bytes(p, k, true) <= COLUMN_BLOCK_ROW_BYTES) return 0;
  int64_t cb = COLUMN_BLOCK_BYTES / column > COLUMN_BLOCK_MIN ? COLUMN_BLOCK_BYTES / column : COLUMN_BLOCK_MIN;
  cb = (cb + COLUMN_BLOCK_ALIGN - 1) / COLUMN_BLOCK_ALIGN * COLUMN_BLOCK_ALIGN;
  while (cb < cols && cols % cb) cb += COLUMN_BLOCK_ALIGN;
  if (cb >= cols || cb * column > COLUMN_BLOCK_MAX_BYTES) return 0;
  ljg_kernel t = *k;
  for (int s = 0; s < t.nnests; s++) {
    const ljg_nest *n = &t.nests[s];
    if (n->scatter_index >= 0 || nest_column(n) < n->row_dims) return 0;
    if (n->shape[nest_column(n)] == cols) continue;
    if (t.nests == k->nests) { /* the first merge: copies of the arrays it changes */
      t.nests = ljb_arena_alloc(&p->arena, (size_t)t.nnests * sizeof *t.nests);
      t.views = ljb_arena_alloc(&p->arena, (size_t)t.nviews * sizeof *t.views);
      t.exprs = ljb_arena_alloc(&p->arena, (size_t)t.nexprs * sizeof *t.exprs);
      memcpy(t.nests, k->nests, (size_t)t.nnests * sizeof *t.nests);
      memcpy(t.views, k->views, (size_t)t.nviews * sizeof *t.views);
      memcpy(t.exprs, k->exprs, (size_t)t.nexprs * sizeof *t.exprs);
    }
    if (!merge_columns(&t, s, cols)) return 0; /* keeps the columns past the row dims */
  }
  if (!columns_agree(&t)) return 0;
  *k = t;
  return cb;
}

void ljg_fuse_rows(ljg_program *p) {
  /* col2im's operand first: kept a block at a time, it spares a whole tensor's round trip
   * (max-pool's gradient planes), where joining the nests to their producer instead would
   * keep that producer's smaller rows */
  join_neighbours(p, true);
  join_neighbours(p, false);
  for (int i = 0; i < p->nkernels; i++) {
    ljg_kernel *k = &p->kernels[i];
    if (k->row_block == 0) continue;
    int64_t widest = 1;
    if (ljg_kernel_has_window(k)) {
      widest = window_out_row(k);
      if (window_src_row(k) > widest) widest = window_src_row(k);
    }
    for (int s = 0; s < k->nnests; s++) {
      int64_t row = ljg_numel(k->nests[s].ndim, k->nests[s].shape) / k->ntasks;
      if (row > widest) widest = row;
    }
    int64_t rb = k->kind == LJG_K_MATMUL ? matmul_row_block(k) : LJG_ROW_BLOCK_ELEMS / widest;
    int64_t read = k->kind == LJG_K_LOOPS ? row_read_bytes(p, k, false) : 0;
    if (read > 0 && LJG_ROW_BLOCK_BYTES / read < rb) rb = LJG_ROW_BLOCK_BYTES / read;
    if (rb < COLUMN_ROWS_MIN && column_sums(k)) rb = COLUMN_ROWS_MIN;
    k->row_block = rb < 1 ? 1 : rb > k->ntasks ? k->ntasks : rb;
    localize(p, k);
  }
  join_task_sums(p);
  for (int i = 0; i < p->nkernels; i++) {
    int64_t cb = column_block(p, &p->kernels[i]);
    p->kernels[i].col_block = cb;
  }
}
