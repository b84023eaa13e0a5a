/* lower.c — kernels to LLVM IR. Every kernel becomes two functions:
 *
 *   void <name>_k<i>(void **slots, i64 begin, i64 end, ljg_kerr *err)
 *       loads the slot pointers it uses and calls
 *   internal void <name>_k<i>_body(ptr noalias align 64 s0, ..., i64 begin, i64 end, ptr err)
 *
 * where the buffers the kernel writes are noalias arguments: LLVM then knows no load can see
 * a store, so it vectorizes and hoists freely. (Read-only inputs may alias each other, which
 * is harmless; marking them too would give graphs with hundreds of scalar parameters
 * quadratic alias-analysis time.) The body runs each loop nest: loops over the kept dims (the
 * first one over the task range [begin, end)), and for reductions an inner set of loops
 * carrying the accumulator in phis; reassociation is allowed on sum/prod accumulators only,
 * so they vectorize (an argmax whose found element the next nest only gathers back stores
 * that element itself, and the gather does not run: picks_found; nor does a nest after it
 * that only maps that element, a relu: maps_found); a nest whose rows span
 * several dims unravels each row of the task range into them; consecutive elementwise nests
 * over the same points share one loop when each reads the others' outputs only at the point
 * being written (shares_loop). Matmul kernels of
 * f32/f64 whose operands are loads through single-level views call one of gemm.c's
 * register-blocked GEMM routines; a matmul with an epilogue (row fusion) computes a
 * block of rows of C and then runs its nests on them, block after block (a first nest that
 * only adds a bias to each row of C does not run: the routine starts C's rows from it and
 * writes them into that nest's slot, ljc_gemm_bias). The others compute
 * one output row per task: when B is contiguous along n,
 * zero the row and add a[k] times row k of B for each k (the inner loop over n vectorizes);
 * when B is contiguous along k (a transposed weight), each output is a dot product over k
 * (a vectorized reduction). Division-by-zero flags are checked after the loops and
 * reported through err. */
#include "codegen_llvm/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reductions ----------------------------------------------------------------------------- */

typedef struct reduction {
  int op;
  lj_dtype in_dt;     /* dtype of the reduced values */
  LLVMTypeRef acc_t;  /* accumulator type */
  LLVMTypeRef idx_t;  /* argmax/argmin: the index's type, i32 when the reduced dim fits (it
                         then vectorizes lane for lane with f32 values); a float amax or
                         amin: i1, whether a NaN came */
  bool isfloat, sgn;
} reduction;

static bool flags_nan(const reduction *r) { return r->isfloat && (r->op == LJG_OP_AMAX || r->op == LJG_OP_AMIN); }

static reduction reduction_of(ljc_ir *ir, int op, lj_dtype in_dt, int64_t count) {
  reduction r = {op, in_dt, NULL, NULL, ljg_dtype_is_float(in_dt), in_dt != LJ_BOOL && ljg_dtype_is_signed(in_dt)};
  bool wide = (op == LJG_OP_SUM || op == LJG_OP_MEAN || op == LJG_OP_PROD) && !r.isfloat;
  r.acc_t = wide ? ir->i64 : ljc_compute_type(ir, in_dt);
  r.idx_t = flags_nan(&r) ? ir->i1 : count <= INT32_MAX ? ir->i32 : ir->i64;
  return r;
}

static int reduction_nacc(const reduction *r) {
  return r->op == LJG_OP_ARGMAX || r->op == LJG_OP_ARGMIN || flags_nan(r) ? 2 : 1;
}

static bool wants_max(int op) { return op == LJG_OP_AMAX || op == LJG_OP_ARGMAX; }

static void reduction_init(ljc_ir *ir, const reduction *r, LLVMValueRef *acc) {
  LLVMTypeRef t = r->acc_t;
  switch (r->op) {
  case LJG_OP_SUM:
  case LJG_OP_MEAN: acc[0] = r->isfloat ? ljc_const_f(t, 0) : ljc_const_i(t, 0); break;
  case LJG_OP_PROD: acc[0] = r->isfloat ? ljc_const_f(t, 1) : ljc_const_i(t, 1); break;
  default: {
    bool mx = wants_max(r->op);
    if (r->isfloat) {
      acc[0] = ljc_const_f(t, mx ? -INFINITY : INFINITY);
    } else {
      unsigned w = LLVMGetIntTypeWidth(t);
      uint64_t umax = w == 64 ? ~0ULL : (1ULL << w) - 1;
      if (r->sgn) acc[0] = LLVMConstInt(t, mx ? (1ULL << (w - 1)) : umax >> 1, 0);
      else acc[0] = LLVMConstInt(t, mx ? 0 : umax, 0);
    }
    acc[1] = LLVMConstInt(r->idx_t, flags_nan(r), 0); /* a float max or min: no NaN yet */
    break;
  }
  }
}

static LLVMValueRef reassoc(LLVMValueRef v) {
  LLVMSetFastMathFlags(v, LLVMFastMathAllowReassoc);
  return v;
}

/* Whether v (a float, or a vector of them) replaces acc in an argmax (mx) or argmin: v beyond
 * acc or v NaN, unless acc is already a NaN (the first NaN wins): two compares, the second
 * masked by the first (AVX-512), instead of four. */
static LLVMValueRef float_arg_better(LLVMBuilderRef b, bool mx, LLVMValueRef v, LLVMValueRef acc) {
  return LLVMBuildAnd(b, LLVMBuildFCmp(b, mx ? LLVMRealUGT : LLVMRealULT, v, acc, ""),
                      LLVMBuildFCmp(b, LLVMRealORD, acc, acc, ""), "");
}

static void reduction_combine(ljc_ir *ir, const reduction *r, LLVMValueRef *acc, LLVMValueRef v,
                              LLVMValueRef index, LLVMValueRef *out) {
  LLVMBuilderRef b = ir->b;
  if (!r->isfloat && LLVMTypeOf(v) != r->acc_t)
    v = r->sgn ? LLVMBuildSExt(b, v, r->acc_t, "") : LLVMBuildZExt(b, v, r->acc_t, "");
  switch (r->op) {
  case LJG_OP_SUM:
  case LJG_OP_MEAN:
    out[0] = r->isfloat ? reassoc(LLVMBuildFAdd(b, acc[0], v, "")) : LLVMBuildAdd(b, acc[0], v, "");
    break;
  case LJG_OP_PROD:
    out[0] = r->isfloat ? reassoc(LLVMBuildFMul(b, acc[0], v, "")) : LLVMBuildMul(b, acc[0], v, "");
    break;
  case LJG_OP_AMAX:
  case LJG_OP_AMIN: {
    bool mx = r->op == LJG_OP_AMAX;
    const char *fn = r->isfloat ? (mx ? "maxnum" : "minnum") : r->sgn ? (mx ? "smax" : "smin") : (mx ? "umax" : "umin");
    out[0] = ljc_intrinsic2(ir, fn, acc[0], v);
    if (!r->isfloat) break;
    /* NaN propagates through a flag of its own, so the max is one vmaxps a vector: acc[0] is
     * poison once a NaN came (no-NaNs), and then the result is NaN (reduction_result), not
     * acc[0]. The flag says that none came: an and of ordered compares, which AVX-512 makes
     * one compare masked by the flag (an or of unordered ones takes a korw more a vector:
     * one thread, a softmax over [4096, 1024] with its max among the exps (runs_ahead) 0.570
     * -> 0.548 ms, over [4096, 4096] with a pass of its own 3.11 -> 2.81). Which of -0 and +0
     * comes out is left open (as in PyTorch), which saves the sign test per element. */
    LLVMSetFastMathFlags(out[0], LLVMFastMathNoNaNs | LLVMFastMathNoSignedZeros);
    out[1] = LLVMBuildAnd(b, acc[1], LLVMBuildFCmp(b, LLVMRealORD, v, v, ""), "");
    break;
  }
  default: {
    bool mx = r->op == LJG_OP_ARGMAX;
    LLVMValueRef better;
    if (r->isfloat) {
      better = float_arg_better(b, mx, v, acc[0]);
    } else {
      LLVMIntPredicate p = r->sgn ? (mx ? LLVMIntSGT : LLVMIntSLT) : (mx ? LLVMIntUGT : LLVMIntULT);
      better = LLVMBuildICmp(b, p, v, acc[0], "");
    }
    out[0] = LLVMBuildSelect(b, better, v, acc[0], "");
    index = index ? LLVMBuildTrunc(b, index, r->idx_t, "") : LLVMConstInt(r->idx_t, 0, 0);
    out[1] = LLVMBuildSelect(b, better, index, acc[1], "");
    break;
  }
  }
}

/* ---- nests ---------------------------------------------------------------------------------- */

/* An elementwise nest's operands read transposed, in tiles (find_tiles): the dim t they are
 * contiguous along, the last dim j (the output's), their elements' size, a tile's side vw (a
 * vector's lanes, set by emit_nest), and per operand its LOAD and the tile's buffer. */
enum { TILED_MAX = 4, TILE_LANES_MAX = 16 };
typedef struct tiles {
  int t, j, size, vw, n;
  int64_t run; /* the points along j of a block of tiles (tiles_in_blocks) */
  int32_t load[TILED_MAX];
  bool ahead[TILED_MAX]; /* prefetched TILE_AHEAD_BYTES ahead along t (tile_prefetches) */
  LLVMValueRef buf[TILED_MAX];
} tiles;

/* Prefetching nests (prefetch_loads): columns a strip's prefetches go ahead of, the least a
 * slot must take to be prefetched, and the most loads prefetched. */
enum { PREFETCH_STRIP = 256, PREFETCH_MIN_BYTES = 4 << 20, PREFETCH_LOADS_MAX = 4 };
/* A nest that runs the first one ahead (runs_ahead): the most bytes of the first nest's rows a
 * block then takes, and the least a slot the first nest streams must take. */
enum { AHEAD_BLOCK_BYTES = 8 << 10, AHEAD_MIN_BYTES = 64 << 10 };

/* The most sums one loop computes (sum_groups). */
enum { SUM_GROUP_MAX = 4 };

typedef struct nest_gen {
  ljc_kctx *kc;
  const ljg_nest *nest;
  int check;          /* scatter nests: their index check */
  ljc_point pt;
  int nkept;          /* leading dims that are not reduced */
  bool split;         /* dim 0 runs over the task range */
  bool columns;       /* reduce with the last kept dim innermost (emit_columns) */
  bool into_zeros;    /* a scatter-add whose target the previous nest filled with zeros (skipped) */
  int last;           /* the nests after this one through `last` run in its loop (nest_last) */
  LLVMValueRef begin, end;
  reduction red;
  const ljg_nest *pick; /* the next nest, when it gathers what this argmax or argmin found */
  ljg_view pick_view;   /* its output in this nest's index space (picks_found) */
  const ljg_nest *then; /* the nest after it, when it maps only that element (maps_found) */
  int32_t then_load;    /* that nest's load of the element */
  ljg_view then_view;   /* its output in this nest's index space */
  const tiles *tiles;   /* operands read transposed in tiles, or NULL */
  LLVMValueRef col_lo, col_hi; /* a matmul's column task, or a block's columns (ljg_kernel.col_block): the
                                  last kept dim's range, or NULL */
  int npf;              /* loads of the first nest whose next block this nest prefetches */
  int32_t pf[PREFETCH_LOADS_MAX];
  struct nest_gen *ahead; /* the first nest, run over the next block's rows in this one's loop
                             (runs_ahead), or NULL */
  struct nest_gen *behind; /* then: the last nest, run over the previous block's rows in it
                              (runs_behind), or NULL */
  struct nest_gen *with;   /* the next nest, a sum along the row of what this one writes, run
                              at the same points in its loop (sums_in_loop), or NULL */
  LLVMValueRef *acc;       /* as `with`: its accumulators in that loop */
  int nsums;               /* a sum and the later ones in its loop (sum_groups): how many, or 0 */
  const ljg_nest *sums[SUM_GROUP_MAX];
  reduction sums_red[SUM_GROUP_MAX];
} nest_gen;

static LLVMValueRef point_value(nest_gen *g) {
  ljc_emit_exprs(g->kc, &g->pt, g->nest->value);
  return g->kc->vals[g->nest->value];
}

static void emit_prefetching(nest_gen *g, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef *acc, LLVMValueRef *out);
static void emit_ahead(nest_gen *g, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef *acc, LLVMValueRef *out);

/* An elementwise nest's last dim of at most TINY_INNER_DIM points past one of at least twice
 * as many, that normalization could not merge (a nearest 2× upsampling's pairs of equal
 * values), and the reduced dims of a nest of at most UNROLLED_POINTS reduced points in the
 * plain order past a kept dim of that length (the sums of its gradient's 2×2 windows) are
 * unrolled, so that the loop the vectorizer takes is that kept dim's. One thread: the
 * upsampling of [16, 64, 56, 56] forward and backward (one kernel) 5.9-6.1 -> 3.7-4.7 ms, a
 * sum over the last dim of [262144, 3] 0.165 -> 0.043, that [262144, 3] times a [1, 3]
 * 0.139 -> 0.069. */
enum { TINY_INNER_DIM = 4, UNROLLED_POINTS = 16 };

/* Whether the nest's innermost dims are unrolled (TINY_INNER_DIM): an elementwise nest's last
 * dim, or every reduced dim of a nest in the plain order, unless it is one dim of more than 8
 * points that fill whole vectors: the vectorizer takes a row of them in vector loads, and
 * gathers their points unrolled (LLVM loads 8 interleaved rows or fewer with shuffles). A sum
 * along the rows of [1048576, 16], one Zen 5 thread: 18.8-19.0 -> 1.7-2.3 ms. */
static bool unrolls_inner(const nest_gen *g) {
  const ljg_nest *n = g->nest;
  if (g->columns || g->tiles || g->col_lo || g->nkept == 0) return false;
  if (g->nkept == n->ndim)
    return n->ndim >= 2 && n->shape[n->ndim - 1] <= TINY_INNER_DIM && n->shape[n->ndim - 2] >= 2 * TINY_INNER_DIM;
  int64_t bytes = n->rcount * (int64_t)lj_dtype_size(g->kc->k->exprs[n->value].dtype);
  if (g->nkept == n->ndim - 1 && n->rcount > 8 && bytes % g->kc->ir->vec_bytes == 0) return false;
  return n->rcount <= UNROLLED_POINTS && n->shape[g->nkept - 1] >= 2 * TINY_INNER_DIM;
}

/* Runs the reduced dims from d on, combining into acc. */
static void emit_reduced(nest_gen *g, int d, LLVMValueRef *acc, LLVMValueRef *out) {
  ljc_ir *ir = g->kc->ir;
  int nacc = reduction_nacc(&g->red);
  if (d == g->nest->ndim) {
    LLVMValueRef index = g->nest->ndim > g->nkept ? g->pt.idx[g->nest->ndim - 1] : NULL;
    reduction_combine(ir, &g->red, acc, point_value(g), index, out);
    return;
  }
  if (g->nest->shape[d] == 0) {
    for (int a = 0; a < nacc; a++) out[a] = acc[a];
    return;
  }
  if (g->ahead && d == 1) { /* a row reduction running the first nest ahead (runs_ahead) */
    emit_ahead(g, ljc_i64(ir, 0), ljc_i64(ir, g->nest->shape[d]), acc, out);
    return;
  }
  if (g->npf && d == 1) { /* a prefetching row reduction (prefetch_loads) */
    emit_prefetching(g, ljc_i64(ir, 0), ljc_i64(ir, g->nest->shape[d]), acc, out);
    return;
  }
  LLVMValueRef next[2];
  if (unrolls_inner(g)) {
    LLVMValueRef cur[2] = {acc[0], nacc > 1 ? acc[1] : NULL};
    for (int64_t c = 0; c < g->nest->shape[d]; c++) {
      g->pt.idx[d] = ljc_i64(ir, c);
      emit_reduced(g, d + 1, cur, next);
      for (int a = 0; a < nacc; a++) cur[a] = next[a];
    }
    for (int a = 0; a < nacc; a++) out[a] = cur[a];
    return;
  }
  ljc_loop L;
  ljc_loop_begin(ir, &L, ljc_i64(ir, 0), ljc_i64(ir, g->nest->shape[d]), false, nacc, acc);
  g->pt.idx[d] = L.iv;
  emit_reduced(g, d + 1, L.acc, next);
  ljc_loop_end(ir, &L, next, out);
}

/* Scatter nest n's index at point pt (i64) and, in *bad, whether it is outside [0, bound),
 * which its check records. */
static LLVMValueRef scatter_index(ljc_kctx *kc, const ljg_nest *n, int check, const ljc_point *pt, int64_t bound,
                                  LLVMValueRef *bad) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  ljc_emit_exprs(kc, pt, n->scatter_index);
  LLVMValueRef index = LLVMBuildIntCast2(b, kc->vals[n->scatter_index], ir->i64, 1, ""); /* i8, i32 or i64 */
  *bad = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSLT, index, ljc_i64(ir, 0), ""),
                     LLVMBuildICmp(b, LLVMIntSGE, index, ljc_i64(ir, bound), ""), "");
  ljc_fail_where(kc, check, *bad, index);
  return index;
}

static void store_point(nest_gen *g, LLVMValueRef v) {
  ljc_ir *ir = g->kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_nest *nest = g->nest;
  const ljg_view *view = &g->kc->k->views[nest->out_view];
  LLVMTypeRef st = ljc_storage_type(ir, nest->out_dtype);
  if (nest->scatter_index < 0) {
    LLVMValueRef off = ljc_slot_offset(g->kc, nest->out_slot, view, &g->pt);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(b, st, g->kc->slot_ptr[nest->out_slot], &off, 1, "");
    LLVMBuildStore(b, ljc_to_storage(ir, v, nest->out_dtype), p);
    return;
  }
  /* scatter-add: out[point with dim = index] += v, a bad index adding nothing */
  int64_t bound = ljg_view_top(view)->shape[nest->scatter_dim];
  LLVMValueRef bad, index = scatter_index(g->kc, nest, g->check, &g->pt, bound, &bad);
  ljc_point q = g->pt;
  bool isfloat = ljg_dtype_is_float(nest->out_dtype);
  if (bound >= 1 && bound <= LJC_SMALL_DIM) {
    /* every position of a small dim, each keeping its value unless the index names it */
    for (int64_t c = 0; c < bound; c++) {
      q.idx[nest->scatter_dim] = ljc_i64(ir, c);
      LLVMValueRef off = ljc_slot_offset(g->kc, nest->out_slot, view, &q);
      LLVMValueRef p = LLVMBuildInBoundsGEP2(b, st, g->kc->slot_ptr[nest->out_slot], &off, 1, "");
      LLVMValueRef old = g->into_zeros ? (isfloat ? ljc_const_f(LLVMTypeOf(v), 0) : ljc_const_i(LLVMTypeOf(v), 0))
                                       : ljc_from_storage(ir, LLVMBuildLoad2(b, st, p, ""), nest->out_dtype);
      LLVMValueRef sum = ljc_round_to(ir, isfloat ? LLVMBuildFAdd(b, old, v, "") : LLVMBuildAdd(b, old, v, ""),
                                      nest->out_dtype);
      LLVMValueRef hit = LLVMBuildICmp(b, LLVMIntEQ, index, ljc_i64(ir, c), "");
      LLVMBuildStore(b, ljc_to_storage(ir, LLVMBuildSelect(b, hit, sum, old, ""), nest->out_dtype), p);
    }
    return;
  }
  q.idx[nest->scatter_dim] = LLVMBuildSelect(b, bad, ljc_i64(ir, 0), index, "");
  LLVMValueRef off = ljc_slot_offset(g->kc, nest->out_slot, view, &q);
  LLVMValueRef p = LLVMBuildInBoundsGEP2(b, st, g->kc->slot_ptr[nest->out_slot], &off, 1, "");
  LLVMValueRef old = ljc_from_storage(ir, LLVMBuildLoad2(b, st, p, ""), nest->out_dtype);
  LLVMValueRef zero = isfloat ? ljc_const_f(LLVMTypeOf(v), 0) : ljc_const_i(LLVMTypeOf(v), 0);
  v = LLVMBuildSelect(b, bad, zero, v, "");
  LLVMValueRef sum = isfloat ? LLVMBuildFAdd(b, old, v, "") : LLVMBuildAdd(b, old, v, "");
  LLVMBuildStore(b, ljc_to_storage(ir, ljc_round_to(ir, sum, nest->out_dtype), nest->out_dtype), p);
}

/* What a reduction stores, from its final accumulators. */
static LLVMValueRef reduction_result(nest_gen *g, LLVMValueRef *acc) {
  switch (g->nest->rop) {
  case LJG_OP_MEAN:
    return LLVMBuildFDiv(g->kc->ir->b, acc[0], ljc_const_f(LLVMTypeOf(acc[0]), (double)g->nest->rcount), "");
  case LJG_OP_AMAX:
  case LJG_OP_AMIN:
    if (!flags_nan(&g->red)) return acc[0];
    return LLVMBuildSelect(g->kc->ir->b, acc[1], acc[0], ljc_const_f(LLVMTypeOf(acc[0]), NAN), "");
  case LJG_OP_ARGMAX:
  case LJG_OP_ARGMIN: /* the index's own type to the result's (i64, or i32) */
    return LLVMBuildIntCast2(g->kc->ir->b, acc[1], ljc_compute_type(g->kc->ir, g->nest->out_dtype), 0, "");
  default: return acc[0];
  }
}

/* Stores v as nest n's element at the point of view `view` in g's index space. */
static void store_at(nest_gen *g, const ljg_nest *n, const ljg_view *view, LLVMValueRef v) {
  ljc_ir *ir = g->kc->ir;
  LLVMValueRef off = ljc_slot_offset(g->kc, n->out_slot, view, &g->pt);
  LLVMValueRef p = LLVMBuildInBoundsGEP2(ir->b, ljc_storage_type(ir, n->out_dtype), g->kc->slot_ptr[n->out_slot], &off, 1, "");
  LLVMBuildStore(ir->b, ljc_to_storage(ir, v, n->out_dtype), p);
}

/* Stores a reduction's result from its final accumulators; an argmax or argmin whose found
 * element the next nest gathers also stores that element (acc[0]) where the gather would,
 * and, when the nest after maps that element alone, what it maps it to. */
static void store_reduction(nest_gen *g, LLVMValueRef *acc) {
  store_point(g, reduction_result(g, acc));
  if (!g->pick) return;
  store_at(g, g->pick, &g->pick_view, acc[0]);
  if (!g->then) return;
  ljc_kctx *kc = g->kc;
  kc->found_load = g->then_load, kc->found = acc[0];
  ljc_emit_exprs(kc, &g->pt, g->then->value);
  kc->found_load = -1;
  store_at(g, g->then, &g->then_view, kc->vals[g->then->value]);
}

/* An argmax or argmin over one innermost reduced dim, of a row that the nest reads itself
 * (not a max-pool's window picked back, picks_found) runs as two loops over the row that both
 * vectorize: the max (min), NaN if a NaN came, then the first index holding it (a NaN if it
 * is one), a minimum of indices; the loop carrying a value and its index through a select
 * stayed scalar (an argmax over the rows of [4096, 1000], one thread: 18.8 -> 0.35 ms, where
 * PyTorch takes 3.7). */
static bool arg_in_two_passes(const nest_gen *g) {
  const ljg_nest *n = g->nest;
  return (n->rop == LJG_OP_ARGMAX || n->rop == LJG_OP_ARGMIN) && g->nkept == n->ndim - 1 && n->shape[g->nkept] > 0 &&
         !g->pick && !g->columns && !g->ahead && !g->npf && !unrolls_inner(g);
}

static void emit_arg_in_two_passes(nest_gen *g, LLVMValueRef *out) {
  ljc_ir *ir = g->kc->ir;
  LLVMBuilderRef b = ir->b;
  int d = g->nkept;
  int64_t count = g->nest->shape[d];
  reduction ext = reduction_of(ir, g->red.op == LJG_OP_ARGMAX ? LJG_OP_AMAX : LJG_OP_AMIN, g->red.in_dt, count);
  LLVMValueRef acc[2], next[2], found[2];
  reduction_init(ir, &ext, acc);
  ljc_loop L;
  ljc_loop_begin(ir, &L, ljc_i64(ir, 0), ljc_i64(ir, count), false, reduction_nacc(&ext), acc);
  g->pt.idx[d] = L.iv;
  reduction_combine(ir, &ext, L.acc, point_value(g), NULL, next);
  ljc_loop_end(ir, &L, next, found);
  LLVMValueRef m = found[0], m_nan = NULL;
  if (flags_nan(&ext)) {
    m = LLVMBuildSelect(b, found[1], found[0], ljc_const_f(LLVMTypeOf(m), NAN), "");
    m_nan = LLVMBuildNot(b, found[1], "");
  }
  LLVMValueRef none = LLVMConstInt(g->red.idx_t, (unsigned long long)count, 0);
  ljc_loop_begin(ir, &L, ljc_i64(ir, 0), ljc_i64(ir, count), false, 1, &none);
  g->pt.idx[d] = L.iv;
  LLVMValueRef v = point_value(g), match;
  if (m_nan)
    match = LLVMBuildSelect(b, m_nan, LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), LLVMBuildFCmp(b, LLVMRealOEQ, v, m, ""),
                            "");
  else
    match = ext.isfloat ? LLVMBuildFCmp(b, LLVMRealOEQ, v, m, "") : LLVMBuildICmp(b, LLVMIntEQ, v, m, "");
  LLVMValueRef at = LLVMBuildSelect(b, match, LLVMBuildTrunc(b, L.iv, g->red.idx_t, ""), none, "");
  next[0] = ljc_intrinsic2(ir, "umin", L.acc[0], at);
  ljc_loop_end(ir, &L, next, &out[1]);
  out[0] = m;
}

/* The reduced dims from d on of a group of sums over the same points (nest_gen.sums), each
 * combining its nest's value at the point into its accumulator. */
static void emit_sums(nest_gen *g, int d, LLVMValueRef *acc, LLVMValueRef *out) {
  ljc_ir *ir = g->kc->ir;
  const ljg_nest *nest = g->nest;
  if (d == nest->ndim) {
    for (int i = 0; i < g->nsums; i++) {
      g->nest = g->sums[i];
      ljc_dbg_at(ir, g->kc->k->exprs[g->nest->value].node);
      reduction_combine(ir, &g->sums_red[i], &acc[i], point_value(g), NULL, &out[i]);
    }
    g->nest = nest;
    return;
  }
  if (nest->shape[d] == 0) {
    for (int i = 0; i < g->nsums; i++) out[i] = acc[i];
    return;
  }
  LLVMValueRef next[SUM_GROUP_MAX];
  ljc_loop L;
  ljc_loop_begin(ir, &L, ljc_i64(ir, 0), ljc_i64(ir, nest->shape[d]), false, g->nsums, acc);
  g->pt.idx[d] = L.iv;
  emit_sums(g, d + 1, L.acc, next);
  ljc_loop_end(ir, &L, next, out);
}

static void emit_point(nest_gen *g) {
  ljc_ir *ir = g->kc->ir;
  const ljg_nest *nest = g->nest;
  if (g->nsums) {
    LLVMValueRef acc[SUM_GROUP_MAX], out[SUM_GROUP_MAX];
    for (int i = 0; i < g->nsums; i++) reduction_init(ir, &g->sums_red[i], &acc[i]);
    emit_sums(g, g->nkept, acc, out);
    for (int i = 0; i < g->nsums; i++) {
      g->nest = g->sums[i];
      store_point(g, reduction_result(g, &out[i]));
    }
    g->nest = nest;
    return;
  }
  if (nest->rop < 0) {
    for (const ljg_nest *n = nest; n <= &g->kc->k->nests[g->last]; n++) {
      g->nest = n;
      ljc_dbg_at(ir, g->kc->k->exprs[n->value].node);
      store_point(g, point_value(g));
    }
    g->nest = nest;
    return;
  }
  LLVMValueRef acc[2], out[2];
  if (arg_in_two_passes(g)) {
    emit_arg_in_two_passes(g, out);
  } else {
    reduction_init(ir, &g->red, acc);
    emit_reduced(g, g->nkept, acc, out);
  }
  store_reduction(g, out);
}

/* Column order (ljg_column_order): the reduced dims run outside a loop over the last kept dim
 * that combines into accumulators in a stack array (or, for a few reduced points, inside it:
 * emit_columns_unrolled); the loop vectorizes, and each output still combines its values in
 * the same order as the plain nest does. A long kept dim goes in blocks of COLUMN_BLOCK. */
enum { COLUMN_BLOCK = 2048 };
/* Column order combines this many rows of the last reduced dim into each accumulator between
 * its load and its store: otherwise a few columns' accumulators, each loaded right after the
 * store of the row before, wait on the store's forwarding every row (a max over dim 1 of
 * [64, 512, 64], one thread: 0.205 -> 0.087 ms; a sum 0.142 -> 0.085; PyTorch 0.106 and
 * 0.094). */
enum { COLUMN_ROWS = 4 };

/* The types column order's accumulator arrays hold, into at[2]: the reduction's, but an i8
 * for an i1 (a float max's or min's NaN flag; the loop's loads of an array of i1, not a
 * vector of bytes, went element by element: a max over the rows of [512, 1024] took 27 times
 * a sum's time). */
static void columns_types(ljc_ir *ir, const reduction *r, LLVMTypeRef at[2]) {
  at[0] = r->acc_t;
  at[1] = r->idx_t == ir->i1 ? ir->i8 : r->idx_t;
}

/* Accumulator a of r from p, and v into p (columns_types). */
static LLVMValueRef columns_load(ljc_ir *ir, const reduction *r, int a, LLVMTypeRef t, LLVMValueRef p) {
  LLVMValueRef v = LLVMBuildLoad2(ir->b, t, p, "");
  return a == 1 && r->idx_t != t ? LLVMBuildTrunc(ir->b, v, r->idx_t, "") : v;
}

static void columns_put(ljc_ir *ir, LLVMTypeRef t, LLVMValueRef v, LLVMValueRef p) {
  LLVMBuildStore(ir->b, LLVMTypeOf(v) != t ? LLVMBuildZExt(ir->b, v, t, "") : v, p);
}

/* acc[a] + (iv - base) */
static LLVMValueRef acc_at(ljc_ir *ir, LLVMTypeRef t, LLVMValueRef arr, LLVMValueRef iv, LLVMValueRef base) {
  LLVMValueRef i = LLVMBuildNSWSub(ir->b, iv, base, "");
  return LLVMBuildInBoundsGEP2(ir->b, t, arr, &i, 1, "");
}

/* Column order's accumulators, one for each column c of [lo, hi) along dim j, at
 * arr[a][c - base] (emit_columns; a per-task sum's, block_sum_*). Starts them. */
static void columns_start(nest_gen *g, const LLVMValueRef *arr, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef base) {
  ljc_ir *ir = g->kc->ir;
  LLVMTypeRef at[2];
  columns_types(ir, &g->red, at);
  LLVMValueRef init[2];
  reduction_init(ir, &g->red, init);
  ljc_loop L;
  ljc_loop_begin(ir, &L, lo, hi, false, 0, NULL);
  for (int a = 0; a < reduction_nacc(&g->red); a++) columns_put(ir, at[a], init[a], acc_at(ir, at[a], arr[a], L.iv, base));
  ljc_loop_end(ir, &L, NULL, NULL);
}

/* Combines each column's values at the reduced point g->pt and the rows - 1 after it along the
 * last dim, in that order, into its accumulator. */
static void columns_add(nest_gen *g, int j, const LLVMValueRef *arr, LLVMValueRef lo, LLVMValueRef hi,
                        LLVMValueRef base, int rows) {
  ljc_ir *ir = g->kc->ir;
  LLVMTypeRef at[2];
  columns_types(ir, &g->red, at);
  int nacc = reduction_nacc(&g->red), last = g->nest->ndim - 1;
  LLVMValueRef first = g->pt.idx[last];
  ljc_loop L;
  ljc_loop_begin(ir, &L, lo, hi, false, 0, NULL);
  g->pt.idx[j] = L.iv;
  LLVMValueRef p[2], acc[2], out[2];
  for (int a = 0; a < nacc; a++) {
    p[a] = acc_at(ir, at[a], arr[a], L.iv, base);
    acc[a] = columns_load(ir, &g->red, a, at[a], p[a]);
  }
  for (int r = 0; r < rows; r++) {
    g->pt.idx[last] = r ? LLVMBuildNSWAdd(ir->b, first, ljc_i64(ir, r), "") : first;
    reduction_combine(ir, &g->red, acc, point_value(g), g->pt.idx[last], out);
    for (int a = 0; a < nacc; a++) acc[a] = out[a];
  }
  g->pt.idx[last] = first;
  for (int a = 0; a < nacc; a++) columns_put(ir, at[a], acc[a], p[a]);
  ljc_loop_end(ir, &L, NULL, NULL);
}

/* Stores each column's result from its accumulators. */
static void columns_store(nest_gen *g, int j, const LLVMValueRef *arr, LLVMValueRef lo, LLVMValueRef hi,
                          LLVMValueRef base) {
  ljc_ir *ir = g->kc->ir;
  LLVMTypeRef at[2];
  columns_types(ir, &g->red, at);
  ljc_loop L;
  ljc_loop_begin(ir, &L, lo, hi, false, 0, NULL);
  g->pt.idx[j] = L.iv;
  LLVMValueRef acc[2];
  for (int a = 0; a < reduction_nacc(&g->red); a++)
    acc[a] = columns_load(ir, &g->red, a, at[a], acc_at(ir, at[a], arr[a], L.iv, base));
  store_reduction(g, acc);
  ljc_loop_end(ir, &L, NULL, NULL);
}

static void emit_columns(nest_gen *g, int j, LLVMValueRef lo, LLVMValueRef hi, bool guard) {
  ljc_ir *ir = g->kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_nest *nest = g->nest;
  int64_t block = nest->shape[j] < COLUMN_BLOCK ? nest->shape[j] : COLUMN_BLOCK;
  LLVMTypeRef at[2];
  columns_types(ir, &g->red, at);
  LLVMValueRef arr[2];
  for (int a = 0; a < reduction_nacc(&g->red); a++) arr[a] = ljc_entry_array(ir, at[a], block);
  /* blocks [j0, j1) of the range */
  ljc_loop B;
  LLVMValueRef span = LLVMBuildNSWSub(b, hi, lo, "");
  LLVMValueRef nblocks = LLVMBuildSDiv(b, LLVMBuildNSWAdd(b, span, ljc_i64(ir, block - 1), ""), ljc_i64(ir, block), "");
  ljc_loop_begin(ir, &B, ljc_i64(ir, 0), nblocks, guard, 0, NULL);
  LLVMValueRef j0 = LLVMBuildNSWAdd(b, lo, LLVMBuildNSWMul(b, B.iv, ljc_i64(ir, block), ""), "");
  LLVMValueRef j1 = ljc_intrinsic2(ir, "smin", LLVMBuildNSWAdd(b, j0, ljc_i64(ir, block), ""), hi);
  columns_start(g, arr, j0, j1, j0);
  ljc_loop R[LJ_MAX_DIMS], rest;
  int last = nest->ndim - 1;
  for (int d = g->nkept; d < last; d++) {
    ljc_loop_begin(ir, &R[d], ljc_i64(ir, 0), ljc_i64(ir, nest->shape[d]), nest->shape[d] == 0, 0, NULL);
    g->pt.idx[d] = R[d].iv;
  }
  int64_t n = nest->shape[last], whole = n - n % COLUMN_ROWS;
  ljc_loop_begin_step(ir, &R[last], ljc_i64(ir, 0), ljc_i64(ir, whole), COLUMN_ROWS, whole == 0, 0, NULL);
  g->pt.idx[last] = R[last].iv;
  columns_add(g, j, arr, j0, j1, j0, COLUMN_ROWS);
  ljc_loop_end(ir, &R[last], NULL, NULL);
  if (whole < n) {
    ljc_loop_begin(ir, &rest, ljc_i64(ir, whole), ljc_i64(ir, n), false, 0, NULL);
    g->pt.idx[last] = rest.iv;
    columns_add(g, j, arr, j0, j1, j0, 1);
    ljc_loop_end(ir, &rest, NULL, NULL);
  }
  for (int d = last - 1; d >= g->nkept; d--) ljc_loop_end(ir, &R[d], NULL, NULL);
  columns_store(g, j, arr, j0, j1, j0);
  ljc_loop_end(ir, &B, NULL, NULL);
}

/* Column order over at most UNROLLED_POINTS reduced points (max-pool's windows): the reduced
 * points are unrolled in the plain order inside the loop over the last kept dim, so each
 * output's accumulators stay in registers instead of a stack array that every reduced point
 * loads and stores again. */

static void emit_columns_unrolled(nest_gen *g, int j, LLVMValueRef lo, LLVMValueRef hi, bool guard) {
  ljc_ir *ir = g->kc->ir;
  const ljg_nest *nest = g->nest;
  ljc_loop L;
  ljc_loop_begin(ir, &L, lo, hi, guard, 0, NULL);
  g->pt.idx[j] = L.iv;
  LLVMValueRef acc[2], out[2];
  reduction_init(ir, &g->red, acc);
  for (int64_t p = 0; p < nest->rcount; p++) {
    for (int64_t d = nest->ndim - 1, rest = p; d >= g->nkept; rest /= nest->shape[d], d--)
      g->pt.idx[d] = ljc_i64(ir, rest % nest->shape[d]);
    reduction_combine(ir, &g->red, acc, point_value(g), g->pt.idx[nest->ndim - 1], out);
    for (int a = 0; a < reduction_nacc(&g->red); a++) acc[a] = out[a];
  }
  store_reduction(g, acc);
  ljc_loop_end(ir, &L, NULL, NULL);
}

static void emit_kept(nest_gen *g, int d);

/* ---- transposed operands ------------------------------------------------------------------ */

/* An elementwise nest whose output is contiguous along its last dim j and that reads an
 * operand contiguous along another dim t (x.t(), a permute): point by point, that operand's
 * elements along j are a whole row apart, each in another page, so the loop gathers them a
 * line and a TLB entry each (a [4096, 1024] transpose: 25 ms on one Zen 4 core). In tiles of
 * vw × vw points instead (vw a vector's lanes), that operand's tile is vw vector loads along t,
 * transposed in registers into a buffer on the stack, from which the points read it as the
 * others read their operands (the loop along j vectorizes); the tiles go along t inside a
 * loop along blocks of j (tiles_in_blocks), so the operand's rows are read a block after
 * another and the output's rows, a few vectors each, stay in the TLB (1.4 ms). A tile cut
 * short at the end of t loads masked vectors; one at the end of j reads its last column again
 * in place of those past it.
 * Operands of one size, 4 or 8 bytes (f32, i32, f64, i64: a vector transposes as one), read
 * through one strided view, that no nest of the loop writes; t and j at least LJG_TILE_MIN
 * long; in LOOPS kernels without row blocks, and
 * not in a loop left scalar or narrowed (a few points, random numbers: emit_nest). */

/* Whether an expression the nest computes is one `is` accepts. */
static bool nest_has(const ljg_kernel *k, const ljg_nest *nest, bool (*is)(const ljg_kexpr *)) {
  bool *used = ljb_xcalloc((size_t)k->nexprs, sizeof *used), found = false;
  ljg_nest_exprs(k, nest, used);
  for (int e = 0; e < k->nexprs && !found; e++) found = used[e] && is(&k->exprs[e]);
  free(used);
  return found;
}

static bool has_random(const ljg_kernel *k, const ljg_nest *nest);
static int64_t nest_part_rows(const ljg_program *p, const ljg_kernel *k);
static bool sums_by_block(const ljg_kernel *k, const int *nest_last, bool b_summed, int s);
static bool pools_rows(const ljg_program *p, const ljg_kernel *k, const int *nest_last, int s);
static bool col2im_rows(const ljg_kernel *k);
static void sum_groups(const ljg_program *p, int ki, const int *nest_last, int *head);

static bool find_tiles(const ljg_kernel *k, const ljg_nest *nest, int last, tiles *tl) {
  int j = nest->ndim - 1;
  if (k->kind != LJG_K_LOOPS || k->row_block > 0 || nest->rop >= 0 || nest->scatter_index >= 0 || nest->ndim < 2 ||
      (k->task_dim == 0 && nest->row_dims > 1) || nest->shape[j] < LJG_TILE_MIN ||
      ljg_numel(nest->ndim, nest->shape) <= LJC_SMALL_POINTS || has_random(k, nest))
    return false;
  bool *used = ljb_xalloc((size_t)k->nexprs * sizeof *used), *any = ljb_xcalloc((size_t)k->nexprs, sizeof *any);
  bool ok = true;
  for (const ljg_nest *n = nest; n <= &k->nests[last] && ok; n++) {
    const ljg_view *ov = &k->views[n->out_view];
    ok = n->scatter_index < 0 && ov->n == 1 && ov->v[0].stride[j] == 1;
    ljg_nest_exprs(k, n, used);
    for (int e = 0; e < k->nexprs; e++) any[e] |= used[e];
  }
  tl->n = 0;
  for (int e = 0; e < k->nexprs && ok; e++) {
    const ljg_kexpr *x = &k->exprs[e];
    if (!any[e] || x->kind != LJG_X_LOAD || tl->n == TILED_MAX || k->views[x->view].v[0].ndim != nest->ndim) continue;
    int size = (int)lj_dtype_size(x->dtype), t = ljg_view_transposed_dim(&k->views[x->view], LJG_TILE_MIN);
    bool written = false;
    for (const ljg_nest *n = nest; n <= &k->nests[last]; n++) written |= n->out_slot == x->slot;
    if (t < 0 || (size != 4 && size != 8) || written || (tl->n > 0 && (t != tl->t || size != tl->size)))
      continue;
    tl->t = t, tl->j = j, tl->size = size;
    tl->load[tl->n++] = e;
  }
  free(used);
  free(any);
  return ok && tl->n > 0;
}

/* Whether the tiles go in blocks of TILE_RUN_BYTES along j (emit_tiles): where every output of
 * the loop starts its rows on a 64-byte line (as every slot does). Each output row then takes
 * that many bytes a block, where one tile a block had the stores write a line in another row
 * at every store, past the caches when they stream (a [4096, 1024] transpose on one Zen 5
 * core, streamed: 2.72-2.82 -> 0.76 ms; 4 MB in the caches: 0.42 -> 0.21). Rows that start
 * elsewhere keep blocks of one tile: their stores cannot stream, and with ordinary stores the
 * blocks were slower (an output of [4096, 1000]: 1.23 -> 1.86 ms; [50000, 300]: 8.9 -> 10.4). */
enum { TILE_RUN_BYTES = 256 };

/* Whether load i of the tiles prefetches, with each of its vectors, the line TILE_AHEAD_BYTES
 * further along t in the same row: where its slot takes at least TILE_AHEAD_MIN_BYTES (a Zen 5
 * core's L2). A block of tiles reads its rows of that operand a line at a time, as many rows
 * as run points along j (64 rows of f32), more streams than the hardware's prefetchers follow,
 * so that from memory each line came at a miss's latency. One Zen 5 thread, fastest of 60
 * runs, 96 MB written before each to evict the operand, a transpose of [4608, 512] (a ResNet
 * weight gradient's, which its matmul wrote earlier in the step): 1.11-1.22 -> 0.74-0.82 ms;
 * [4096, 1024] 1.35-1.59 -> 0.89-1.31; [1152, 256] 0.16 -> 0.10; in the caches, [4608, 512]
 * 0.65-1.09 -> 0.45-0.56, [256, 256] within noise (0.006 ms); 4 lines ahead or 8 no better. */
enum { TILE_AHEAD_BYTES = 128, TILE_AHEAD_MIN_BYTES = 1 << 20 };

static void tile_prefetches(const ljg_program *p, const ljg_kernel *k, tiles *tl) {
  for (int i = 0; i < tl->n; i++) tl->ahead[i] = p->slots[k->exprs[tl->load[i]].slot].nbytes >= TILE_AHEAD_MIN_BYTES;
}

static bool tiles_in_blocks(const ljg_kernel *k, const ljg_nest *nest, int last, const tiles *tl) {
  bool lines = true;
  for (const ljg_nest *n = nest; n <= &k->nests[last] && lines; n++) {
    const ljg_view1 *v = &k->views[n->out_view].v[0];
    int64_t size = (int64_t)lj_dtype_size(n->out_dtype);
    lines = v->offset * size % LJC_LINE_BYTES == 0;
    for (int d = 0; d < n->ndim && lines; d++) lines = d == tl->j || v->stride[d] * size % LJC_LINE_BYTES == 0;
  }
  return lines;
}

/* Loads the tiles of the transposed operands at (T0, J0) into their buffers: vw vectors along
 * t (lanes from nt on masked off), columns from the last one on read in place of those past j's
 * end, transposed so that the buffer's row r holds the points (T0 + r, J0 ...). */
static void load_tiles(nest_gen *g, LLVMValueRef t0, LLVMValueRef j0, LLVMValueRef nt) {
  ljc_kctx *kc = g->kc;
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const tiles *tl = g->tiles;
  int vw = tl->vw;
  LLVMValueRef lanes[TILE_LANES_MAX];
  for (int c = 0; c < vw; c++) lanes[c] = ljc_i64(ir, c);
  LLVMValueRef nts = ljc_splat(ir, nt, LLVMVectorType(ir->i64, (unsigned)vw));
  LLVMValueRef mask = LLVMBuildICmp(b, LLVMIntSLT, LLVMConstVector(lanes, (unsigned)vw), nts, "");
  LLVMValueRef jlast = ljc_i64(ir, g->nest->shape[tl->j] - 1);
  for (int i = 0; i < tl->n; i++) {
    const ljg_kexpr *x = &kc->k->exprs[tl->load[i]];
    LLVMTypeRef st = ljc_storage_type(ir, x->dtype), vt = LLVMVectorType(st, (unsigned)vw);
    unsigned size = (unsigned)lj_dtype_size(x->dtype);
    LLVMValueRef v[TILE_LANES_MAX];
    ljc_point p = g->pt;
    p.idx[tl->t] = t0;
    for (int c = 0; c < vw; c++) {
      p.idx[tl->j] = ljc_intrinsic2(ir, "smin", LLVMBuildNSWAdd(b, j0, ljc_i64(ir, c), ""), jlast);
      LLVMValueRef off = ljc_slot_offset(kc, x->slot, &kc->k->views[x->view], &p);
      v[c] = ljc_masked_load(ir, vt, LLVMBuildInBoundsGEP2(b, st, kc->slot_ptr[x->slot], &off, 1, ""), (int)size, mask);
      if (tl->ahead[i]) { /* past the end of t, a line of the next row or none: a prefetch never faults */
        ljc_point q = p;
        q.idx[tl->t] = LLVMBuildNSWAdd(b, t0, ljc_i64(ir, TILE_AHEAD_BYTES / size), "");
        LLVMValueRef ahead = ljc_slot_offset(kc, x->slot, &kc->k->views[x->view], &q);
        ljc_prefetch(ir, LLVMBuildGEP2(b, st, kc->slot_ptr[x->slot], &ahead, 1, ""));
      }
    }
    ljc_transpose_permutes(ir, vw, v);
    for (int r = 0; r < vw; r++) {
      LLVMValueRef at = ljc_i64(ir, (int64_t)r * vw);
      LLVMValueRef store = LLVMBuildStore(b, v[r], LLVMBuildInBoundsGEP2(b, st, tl->buf[i], &at, 1, ""));
      LLVMSetAlignment(store, (unsigned)vw * size);
    }
  }
}

/* The points (T0 + r, J0 + c) of one tile, r < nt and c < nj, each reading the transposed
 * operands from their buffers. */
static void tile_points(nest_gen *g, LLVMValueRef t0, LLVMValueRef j0, LLVMValueRef nt, LLVMValueRef nj) {
  ljc_kctx *kc = g->kc;
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const tiles *tl = g->tiles;
  ljc_loop R, C;
  ljc_loop_begin(ir, &R, ljc_i64(ir, 0), nt, false, 0, NULL);
  g->pt.idx[tl->t] = LLVMBuildNSWAdd(b, t0, R.iv, "");
  ljc_loop_begin(ir, &C, ljc_i64(ir, 0), nj, false, 0, NULL);
  g->pt.idx[tl->j] = LLVMBuildNSWAdd(b, j0, C.iv, "");
  LLVMValueRef at = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, R.iv, ljc_i64(ir, tl->vw), ""), C.iv, "");
  for (int i = 0; i < tl->n; i++) {
    LLVMTypeRef st = ljc_storage_type(ir, kc->k->exprs[tl->load[i]].dtype);
    kc->load_at[tl->load[i]] = LLVMBuildInBoundsGEP2(b, st, tl->buf[i], &at, 1, "");
  }
  emit_point(g);
  for (int i = 0; i < tl->n; i++) kc->load_at[tl->load[i]] = NULL;
  ljc_loop_end(ir, &C, NULL, NULL);
  ljc_loop_end(ir, &R, NULL, NULL);
}

/* The tile at (T0, J0) of a range along t that ends at hi: its loads, then its points. */
static void emit_tile(nest_gen *g, LLVMValueRef t0, LLVMValueRef j0, LLVMValueRef hi) {
  ljc_ir *ir = g->kc->ir;
  LLVMBuilderRef b = ir->b;
  const tiles *tl = g->tiles;
  LLVMValueRef vw = ljc_i64(ir, tl->vw), nj_all = ljc_i64(ir, g->nest->shape[tl->j]);
  LLVMValueRef nt = ljc_intrinsic2(ir, "smin", LLVMBuildNSWSub(b, hi, t0, ""), vw);
  LLVMValueRef nj = ljc_intrinsic2(ir, "smin", LLVMBuildNSWSub(b, nj_all, j0, ""), vw);
  load_tiles(g, t0, j0, nt);
  LLVMValueRef whole =
      LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, nt, vw, ""), LLVMBuildICmp(b, LLVMIntEQ, nj, vw, ""), "");
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef full = LLVMAppendBasicBlockInContext(ir->ctx, fn, "tile.whole");
  LLVMBasicBlockRef part = LLVMAppendBasicBlockInContext(ir->ctx, fn, "tile.part");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(ir->ctx, fn, "tile.next");
  LLVMBuildCondBr(b, whole, full, part);
  LLVMPositionBuilderAtEnd(b, full);
  tile_points(g, t0, j0, vw, vw);
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, part);
  tile_points(g, t0, j0, nt, nj);
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
}

/* Dims d .. j - 1 (those between t and j) as usual, then the tiles of [lo, hi) along t and
 * of the whole of j: in blocks of tl->run points along j, in each the tiles along j inside
 * along t. A whole tile's loops run vw times each, so the loop along j vectorizes into one
 * vector; a tile cut short runs its points alone. */
static void emit_tiles(nest_gen *g, int d, LLVMValueRef lo, LLVMValueRef hi) {
  ljc_ir *ir = g->kc->ir;
  LLVMBuilderRef b = ir->b;
  const tiles *tl = g->tiles;
  if (d < tl->j) {
    if (g->nest->shape[d] == 0) return;
    ljc_loop L;
    ljc_loop_begin(ir, &L, ljc_i64(ir, 0), ljc_i64(ir, g->nest->shape[d]), false, 0, NULL);
    g->pt.idx[d] = L.iv;
    emit_tiles(g, d + 1, lo, hi);
    ljc_loop_end(ir, &L, NULL, NULL);
    return;
  }
  LLVMValueRef nj_all = ljc_i64(ir, g->nest->shape[tl->j]);
  ljc_loop JB, T, J;
  ljc_loop_begin_step(ir, &JB, ljc_i64(ir, 0), nj_all, tl->run, false, 0, NULL);
  LLVMValueRef jb_end = ljc_intrinsic2(ir, "smin", LLVMBuildNSWAdd(b, JB.iv, ljc_i64(ir, tl->run), ""), nj_all);
  ljc_loop_begin_step(ir, &T, lo, hi, tl->vw, true, 0, NULL);
  if (tl->run == tl->vw) {
    emit_tile(g, T.iv, JB.iv, hi);
  } else {
    ljc_loop_begin_step(ir, &J, JB.iv, jb_end, tl->vw, false, 0, NULL);
    emit_tile(g, T.iv, J.iv, hi);
    ljc_loop_end(ir, &J, NULL, NULL);
  }
  ljc_loop_end(ir, &T, NULL, NULL);
  ljc_loop_end(ir, &JB, NULL, NULL);
}

/* The task range [begin, end) of a nest whose rows are its first row_dims dims: one loop over
 * rows, each unravelled into those dims' indices. */
static void emit_rows(nest_gen *g) {
  ljc_ir *ir = g->kc->ir;
  int nd = g->nest->row_dims;
  ljc_loop L;
  ljc_loop_begin(ir, &L, g->begin, g->end, true, 0, NULL);
  LLVMValueRef rem = L.iv;
  for (int d = nd - 1; d > 0; d--) {
    LLVMValueRef size = ljc_i64(ir, g->nest->shape[d]);
    g->pt.idx[d] = LLVMBuildURem(ir->b, rem, size, "");
    rem = LLVMBuildUDiv(ir->b, rem, size, "");
  }
  g->pt.idx[0] = rem;
  emit_kept(g, nd);
  ljc_loop_end(ir, &L, NULL, NULL);
}

static bool is_vmath(const ljg_kexpr *x) {
  if (x->kind != LJG_X_OP) return false;
  switch (x->op) {
  case LJG_OP_EXP: case LJG_OP_EXPM1: case LJG_OP_LOG: case LJG_OP_LOG1P: case LJG_OP_SIN: case LJG_OP_COS:
  case LJG_OP_TANH: case LJG_OP_SIGMOID: case LJG_OP_ERF: case LJG_OP_GELU: case LJG_OP_GELU_TANH:
  case LJG_OP_SILU: case LJG_OP_POW: return true;
  default: return false;
  }
}

/* Whether the nest computes a function of vmath.c's (a polynomial's worth of multiply-adds a
 * point): long enough for the memory to fetch the next block's rows meanwhile. */
static bool computes_vmath(const ljg_kernel *k, const ljg_nest *nest) { return nest_has(k, nest, is_vmath); }

static bool any_vmath(const ljg_kernel *k) {
  for (int s = 0; s < k->nnests; s++)
    if (computes_vmath(k, &k->nests[s])) return true;
  return false;
}

/* Whether a nest of k maps the first nest's [rows, columns] into memory (an output, or
 * scratch), not into a block-local or scalar slot. */
static bool maps_rows_out(const ljg_program *p, const ljg_kernel *k) {
  const ljg_nest *first = &k->nests[0];
  for (const ljg_nest *n = first + 1; first->ndim == 2 && n < k->nests + k->nnests; n++) {
    int kind = p->slots[n->out_slot].kind;
    if (n->rop < 0 && n->scatter_index < 0 && n->ndim == 2 && n->shape[0] == first->shape[0] &&
        n->shape[1] == first->shape[1] && kind != LJG_SLOT_LOCAL && kind != LJG_SLOT_SCALAR)
      return true;
  }
  return false;
}

/* A sum, mean, product, max or min: the reductions runs_ahead runs ahead as the first nest,
 * and those a later nest without a vmath function may compute while it does
 * (carries_prefetch). */
static bool plain_reduction(int rop) {
  return rop == LJG_OP_SUM || rop == LJG_OP_MEAN || rop == LJG_OP_PROD || rop == LJG_OP_AMAX || rop == LJG_OP_AMIN;
}

/* Whether nest n of k may prefetch (prefetch_loads): over [rows, columns], computing a vmath
 * function, into a block-local slot or summed along the row. With `ahead`, whether it may run
 * the first nest ahead instead (runs_ahead): those, and, in a kernel none of whose nests
 * computes a vmath function but one of which stores rows like the first nest's into memory
 * (maps_rows_out), one over [rows, columns] that maps its points or sums, averages,
 * multiplies, maxes or mins along the row (a layer norm's variance, an RMS norm's quotients).
 * Prefetching in such a nest lost (prefetch_loads), but reading the next block's rows in its
 * loop overlaps that read with the stores of the rows (runs_ahead), where blocks of up to
 * three rows had read them and then stored them: over [4096, 1024], a layer norm's forward
 * without weight and bias 0.66-0.72 -> 0.44-0.58 ms on one thread, 0.256 -> 0.207 on two, an
 * RMS norm's 0.49-0.63 -> 0.39-0.43 and 0.227 -> 0.203 (on one thread, blocks of one row
 * alone came within noise of it). A kernel that stores no rows, only reads them, gains
 * nothing: one thread, sum(x·max x) along the rows 0.210-0.215 -> 0.238-0.248 ms, a variance
 * 0.241-0.249 -> 0.192-0.208, sum(x·sum x) and sum((x - max x)²) within noise. */
static bool carries_prefetch(const ljg_program *p, const ljg_kernel *k, const ljg_nest *n, bool ahead) {
  if (n->ndim != 2 || n->row_dims > 1 || n->scatter_index >= 0) return false;
  /* runs_ahead's nest in a kernel without vmath functions that stores rows */
  bool light = ahead && !any_vmath(k) && maps_rows_out(p, k);
  if (!light && !computes_vmath(k, n)) return false;
  if (n->rop >= 0) /* a reduction along the row */
    return n->rmask == 2 && !ljg_column_order(k, n, 1) && (!light || plain_reduction(n->rop));
  return light || p->slots[n->out_slot].kind == LJG_SLOT_LOCAL;
}

/* A row-fused loops kernel's first nest streams its rows from memory (a loss's max over
 * rows of 32000 classes, 128 KB each from DRAM: ~36 GB/s on one core), and the nests after it
 * compute on them from cache while the memory idles. The first later nest that computes a
 * vmath function (the exps) over the row, writing a block-local slot or summing along the
 * row, prefetches the next block's rows of what the first streams, the lines of
 * PREFETCH_STRIP of its row's elements before it computes them, so the next block's first
 * nest reads them from cache: from L2 (ljc_prefetch), which holds a row of 128 KB, while the
 * L1 keeps the lines the exps are computing. One thread: cross-entropy over [512, 32000]
 * 5.27-5.33 -> 4.21-4.27 ms, log_softmax over it 5.05 -> 3.63-3.69 (a Zen 5 core, prefetched
 * into L1); on a Zen 4 core, whose L1 is 32 KB, cross-entropy took 7.3-7.7 ms not prefetched,
 * 8.8-9.0 prefetched into L1 and 5.8 into L2 (a softmax over it the same). Prefetching in the
 * last nest instead gained nothing (its non-temporal stores keep the memory busy), nor in a
 * layer norm's sum of squares (3-4% slower: too little work to hide the fetch behind). The
 * first nest's loads that qualify: of a slot of at least PREFETCH_MIN_BYTES (AHEAD_MIN_BYTES
 * with ahead, for runs_ahead) that is not block-local, one level of view over the nest's
 * [rows, columns] with the columns contiguous. Returns how many, written to loads. */
static int prefetch_loads(const ljg_program *p, const ljg_kernel *k, int s, bool ahead, int32_t *loads) {
  if (k->kind != LJG_K_LOOPS || !k->row_block || k->col_block || s == 0 || !carries_prefetch(p, k, &k->nests[s], ahead))
    return 0;
  for (int t = 1; t < s; t++)
    if (carries_prefetch(p, k, &k->nests[t], ahead)) return 0;
  int64_t min_bytes = ahead ? AHEAD_MIN_BYTES : PREFETCH_MIN_BYTES;
  const ljg_nest *first = &k->nests[0], *n = &k->nests[s];
  if (first->ndim != 2 || first->shape[0] != n->shape[0] || first->shape[1] != n->shape[1]) return 0;
  bool *used = ljb_xcalloc((size_t)k->nexprs, sizeof *used);
  ljg_nest_exprs(k, first, used);
  int nl = 0;
  for (int e = 0; e < k->nexprs && nl < PREFETCH_LOADS_MAX; e++) {
    const ljg_kexpr *x = &k->exprs[e];
    if (!used[e] || x->kind != LJG_X_LOAD) continue;
    const ljg_slot *sl = &p->slots[x->slot];
    const ljg_view *v = &k->views[x->view];
    if (sl->kind == LJG_SLOT_LOCAL || sl->nbytes < min_bytes || v->n != 1 || v->v[0].ndim != 2 ||
        v->v[0].stride[1] != 1 || v->v[0].shape[1] != n->shape[1])
      continue;
    bool dup = false;
    for (int i = 0; i < nl; i++)
      dup |= k->exprs[loads[i]].slot == x->slot && ljg_view_equal(&k->views[k->exprs[loads[i]].view], v);
    if (!dup) loads[nl++] = e;
  }
  free(used);
  return nl;
}

/* Whether nest s + 1 runs in the loop of nest s, which prefetches (prefetch_loads; ahead: the
 * nest that runs the first one ahead instead, if any), at the same points (emit_prefetching):
 * nest s maps a row into a LOCAL slot (a softmax's or a loss's exps), and nest s + 1 sums or
 * averages that row in the plain order, alone in its loop, from that slot where nest s writes
 * it and from what no nest from s on writes, with no checks or random numbers. Its pass over
 * the row, from L2 for a row of 128 KB, goes: one Zen 4 thread, cross-entropy over [512,
 * 32000] 5.85 -> 5.67 ms (the fastest of five alternated runs of 40 steps; a softmax over it
 * 5.8 -> 5.56). */
static bool sums_in_loop(const ljg_program *p, const ljg_kernel *k, const int *nest_last, int ahead, int s) {
  int32_t pf[PREFETCH_LOADS_MAX];
  if (s == ahead || s + 1 >= k->nnests || nest_last[s] != s || nest_last[s + 1] != s + 1 ||
      prefetch_loads(p, k, s, false, pf) == 0)
    return false;
  const ljg_nest *n = &k->nests[s], *t = &k->nests[s + 1];
  if (n->rop >= 0 || (t->rop != LJG_OP_SUM && t->rop != LJG_OP_MEAN) || t->rmask != 2 || t->ndim != 2 ||
      t->row_dims != n->row_dims || t->shape[0] != n->shape[0] || t->shape[1] != n->shape[1] ||
      t->scatter_index >= 0 || ljg_column_order(k, t, 1) || has_random(k, t))
    return false;
  bool *used = ljb_xcalloc((size_t)k->nexprs, sizeof *used), ok = true;
  ljg_nest_exprs(k, t, used);
  for (int e = 0; e < k->nexprs && ok; e++) {
    const ljg_kexpr *x = &k->exprs[e];
    if (!used[e]) continue;
    ok = ljc_expr_check(k, e) == LJG_KERR_NONE;
    if (x->kind != LJG_X_LOAD && x->kind != LJG_X_BUFFER) continue;
    if (x->slot == n->out_slot) {
      ok &= x->kind == LJG_X_LOAD && ljg_view_equal(&k->views[x->view], &k->views[n->out_view]);
      continue;
    }
    for (int i = s + 1; i < k->nnests; i++) ok &= k->nests[i].out_slot != x->slot;
  }
  free(used);
  return ok;
}

/* Whether nest s, which would prefetch the next block's rows (prefetch_loads: of an input of
 * at least AHEAD_MIN_BYTES here), runs the first nest over them instead, in the same loop as
 * its own row (emit_ahead): the first nest is a sum, mean, product, max or min along the row
 * (a softmax's max) of a row-fused kernel's plain blocks, alone in its loop and not in column
 * order, and reads only slots that no nest of the kernel writes, with no checks and no random
 * numbers; nest s reads nothing in tiles; and a row of what the first nest reads takes at
 * most AHEAD_BLOCK_BYTES, the most a block then takes (ahead_block_rows). Its pass over the rows then goes (a softmax's max of the next
 * row computed among the exps of this one), and its loads fetch the rows the prefetches would
 * have. One thread, softmax over [4096, 1024] (rows of 4 KiB, 16 MiB in L3): 0.593-0.602 ->
 * 0.538-0.546 ms; over [16384, 1024] (64 MiB, from memory) 2.91 -> 2.60; log_softmax over
 * [4096, 1024], its blocks of three rows cut to two, 0.70 -> 0.59 (two threads 0.35 -> 0.30).
 * Larger blocks lose: with rows of 16 KiB ([4096, 4096]) the loop's working set (this row,
 * the next, the exps) outgrows L1, 3.11 -> 4.56 ms (3.33 prefetching two blocks ahead as
 * well); with rows of 128 KiB (a loss over 32000 classes) 4.1 -> 7.2 (3.98). Blocks of 8 KiB
 * for every row-fused kernel (a smaller LJG_ROW_BLOCK_BYTES) cost two threads a third more on
 * a layer norm and a loss. Smaller inputs gain too, where prefetching did not: softmax over
 * [256, 1024] (1 MiB) 0.040 -> 0.032 ms on one thread, 0.047 -> 0.024 on two; over [16, 1024]
 * and [32, 1024] the same within noise. */
static int64_t ahead_row_bytes(const ljg_program *p, const ljg_kernel *k, int s) {
  int32_t pf[PREFETCH_LOADS_MAX];
  int npf = prefetch_loads(p, k, s, true, pf);
  int64_t bytes = 0;
  for (int i = 0; i < npf; i++) bytes += k->nests[0].shape[1] * (int64_t)lj_dtype_size(k->exprs[pf[i]].dtype);
  return bytes;
}

static bool runs_ahead(const ljg_program *p, const ljg_kernel *k, const int *nest_last, bool b_summed0, int s) {
  if (nest_last[s] < s) return false; /* it runs in an earlier nest's loop */
  int64_t bytes = k->task_rows || ljg_kernel_has_window(k) || b_summed0 ? 0 : ahead_row_bytes(p, k, s);
  if (bytes == 0 || bytes > AHEAD_BLOCK_BYTES) return false;
  const ljg_nest *n = &k->nests[0];
  tiles tl;
  if (!plain_reduction(n->rop) || n->rmask != 2 || n->row_dims > 1 || n->scatter_index >= 0 || nest_last[0] != 0 ||
      ljg_column_order(k, n, 1) || has_random(k, n) || find_tiles(k, &k->nests[s], nest_last[s], &tl))
    return false;
  bool *used = ljb_xcalloc((size_t)k->nexprs, sizeof *used), ok = true;
  ljg_nest_exprs(k, n, used);
  for (int e = 0; e < k->nexprs && ok; e++) {
    const ljg_kexpr *x = &k->exprs[e];
    if (!used[e]) continue;
    ok = ljc_expr_check(k, e) == LJG_KERR_NONE;
    if (x->kind != LJG_X_LOAD && x->kind != LJG_X_BUFFER) continue;
    ok &= p->slots[x->slot].kind != LJG_SLOT_LOCAL;
    for (int t = 0; t < k->nnests; t++) ok &= k->nests[t].out_slot != x->slot;
  }
  free(used);
  return ok;
}

/* When the last nest runs behind (runs_behind): the most bytes a row and a block of what the
 * first nest reads take, and a row of a LOCAL slot the last nest reads. */
enum { BEHIND_ROW_BYTES = 4 << 10 };

/* The kernel's last nest t when it also runs in the loop of nest s, which runs the first one
 * ahead (runs_ahead), on the previous block's rows; else 0. Beside each point of row r,
 * emit_ahead then computes and stores nest t's at row r - block_rows, and only a task's last
 * block runs nest t's own loop (over its rows, and over those of the previous block that its
 * shorter loop did not reach). A log_softmax's output pass, x - max - log(sum): its
 * non-temporal stores, which held the pass to two cycles a vector, spread over the loop of the
 * exps, and the scalar log of each row's sum leaves the path. Nest t maps [rows, columns] as
 * nest s does, writes memory that no nest reads or writes, and reads what no nest writes or
 * LOCAL slots (a row's max, the log of its sum, a softmax's exps: each has a second buffer,
 * behind_slot, and the blocks take turns writing the one and reading the other); no checks,
 * random numbers, tiles or column order. The first nest's rows take at most BEHIND_ROW_BYTES,
 * and so do the blocks and the LOCAL slots' rows. One thread, log_softmax over [4096, 1024] (16
 * MiB, in L3) 0.60-0.61 -> 0.48 ms; from memory, [16384, 1024] 3.45-3.49 -> 2.97-3.24 and
 * [32768, 256] 1.46 -> 1.27-1.30; two threads over [4096, 1024] 0.39-0.40 -> 0.375. A
 * softmax's, exps / sum, one thread: [4096, 1024] 0.69-0.72 -> 0.58-0.63 ms (medians of 60),
 * [16384, 1024] 2.91-2.93 -> 2.60-2.65 (fastest of 100), [128, 1024] in L2 19-20 -> 17 µs; two
 * threads within noise of before (0.46 ms over [4096, 1024]). Summing the exps in that loop as
 * well, rather than in a pass of their own over the row in L1, gained nothing measurable.
 * Larger rows or blocks lose from memory, as the loop reads three blocks' rows: rows of 6 KiB
 * over 48 MiB 1.97 -> 2.84 ms, blocks of two 4 KiB rows over 64 MiB 3.5 -> 4.2 (in L3 those
 * blocks gain a little more: 0.44-0.46 ms over 16 MiB). */
static int runs_behind(const ljg_program *p, const ljg_kernel *k, const int *nest_last, int s) {
  int t = k->nnests - 1;
  const ljg_nest *n = &k->nests[t], *ns = &k->nests[s];
  const ljg_slot *out = &p->slots[n->out_slot];
  tiles tl;
  if (k->kind != LJG_K_LOOPS || t <= s || nest_last[t] != t || n->rop >= 0 || n->scatter_index >= 0 ||
      n->ndim != 2 || n->row_dims != 1 || ns->ndim != 2 || n->shape[0] != ns->shape[0] ||
      n->shape[1] != ns->shape[1] || ljg_column_order(k, n, 2) || has_random(k, n) || find_tiles(k, n, t, &tl) ||
      out->kind == LJG_SLOT_LOCAL || out->kind == LJG_SLOT_SCALAR || ahead_row_bytes(p, k, s) > BEHIND_ROW_BYTES)
    return 0;
  for (int e = 0; e < k->nexprs; e++)
    if (ljg_expr_reads(&k->exprs[e], n->out_slot)) return 0;
  for (int i = 0; i < t; i++)
    if (k->nests[i].out_slot == n->out_slot) return 0;
  bool *used = ljb_xcalloc((size_t)k->nexprs, sizeof *used), ok = true;
  ljg_nest_exprs(k, n, used);
  for (int e = 0; e < k->nexprs && ok; e++) {
    const ljg_kexpr *x = &k->exprs[e];
    if (!used[e]) continue;
    ok = ljc_expr_check(k, e) == LJG_KERR_NONE;
    if (x->kind != LJG_X_LOAD && x->kind != LJG_X_BUFFER) continue;
    if (p->slots[x->slot].kind == LJG_SLOT_LOCAL) {
      ok &= p->slots[x->slot].row_bytes <= BEHIND_ROW_BYTES;
      continue;
    }
    for (int i = 0; i < k->nnests; i++) ok &= k->nests[i].out_slot != x->slot;
  }
  free(used);
  return ok ? t : 0;
}

/* The rows of a block when nest s runs the first one ahead: at most AHEAD_BLOCK_BYTES of the
 * first nest's rows (BEHIND_ROW_BYTES where the last nest runs behind), and at most the
 * kernel's blocks (its LOCAL slots' rows). */
static int64_t ahead_block_rows(const ljg_program *p, const ljg_kernel *k, const int *nest_last, int s) {
  int64_t rows = (runs_behind(p, k, nest_last, s) ? BEHIND_ROW_BYTES : AHEAD_BLOCK_BYTES) / ahead_row_bytes(p, k, s);
  return rows < k->row_block ? rows : k->row_block;
}

/* The prefetches of the strip of columns from c of the current row, in the same row of the
 * next block (prefetch_loads). */
static void prefetch_strip(nest_gen *g, LLVMValueRef c) {
  ljc_kctx *kc = g->kc;
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  ljc_point next = g->pt;
  next.idx[0] = LLVMBuildAdd(b, g->pt.idx[0], ljc_i64(ir, kc->block_rows), "");
  for (int i = 0; i < g->npf; i++) {
    const ljg_kexpr *x = &kc->k->exprs[g->pf[i]];
    LLVMTypeRef st = ljc_storage_type(ir, x->dtype);
    int64_t lane = 64 / lj_dtype_size(x->dtype);
    for (int64_t j = 0; j < PREFETCH_STRIP; j += lane) {
      next.idx[1] = LLVMBuildAdd(b, c, ljc_i64(ir, j), "");
      LLVMValueRef off = ljc_view_offset(ir, &kc->k->views[x->view], &next);
      ljc_prefetch(ir, LLVMBuildGEP2(b, st, kc->slot_ptr[x->slot], &off, 1, ""));
    }
  }
}

/* One column of a prefetching nest's row at g->pt: its point (acc NULL), or its value
 * combined into acc (a reduction). */
static void prefetching_column(nest_gen *g, LLVMValueRef *acc, LLVMValueRef *out) {
  if (acc) {
    emit_reduced(g, 2, acc, out);
    return;
  }
  emit_kept(g, 2);
  nest_gen *w = g->with;
  if (!w) return;
  w->pt.idx[0] = g->pt.idx[0];
  w->pt.idx[1] = g->pt.idx[1];
  reduction_combine(g->kc->ir, &w->red, w->acc, point_value(w), g->pt.idx[1], out);
}

/* The columns [lo, hi) of a prefetching nest's row, PREFETCH_STRIP at a time: the strip's
 * prefetches, then the strip (a loop of a known count, which vectorizes as the whole row's
 * would); then the columns past the last whole strip. A reduction (acc not NULL) carries its
 * accumulators through, in the same order, into out; an elementwise nest, those of the sum it
 * runs with (g->with), which it then stores. */
static void emit_prefetching(nest_gen *g, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef *acc, LLVMValueRef *out) {
  ljc_ir *ir = g->kc->ir;
  LLVMBuilderRef b = ir->b;
  nest_gen *w = g->with;
  LLVMValueRef init[2], next[2], strip_out[2], whole_out[2], sums[2];
  int n = acc ? reduction_nacc(&g->red) : w ? reduction_nacc(&w->red) : 0;
  for (int i = 0; acc && i < n; i++) init[i] = acc[i];
  if (w) reduction_init(ir, &w->red, init);
  LLVMValueRef strip = ljc_i64(ir, PREFETCH_STRIP);
  LLVMValueRef strips = LLVMBuildSDiv(b, LLVMBuildSub(b, hi, lo, ""), strip, "");
  LLVMValueRef whole = LLVMBuildAdd(b, lo, LLVMBuildMul(b, strips, strip, ""), "");
  ljc_loop S, L, T;
  ljc_loop_begin_step(ir, &S, lo, whole, PREFETCH_STRIP, true, n, init);
  prefetch_strip(g, S.iv);
  ljc_loop_begin(ir, &L, S.iv, LLVMBuildAdd(b, S.iv, strip, ""), false, n, S.acc);
  g->pt.idx[1] = L.iv;
  if (w) w->acc = L.acc;
  prefetching_column(g, acc ? L.acc : NULL, next);
  ljc_loop_end(ir, &L, next, strip_out);
  ljc_loop_end(ir, &S, strip_out, whole_out);
  ljc_loop_begin(ir, &T, whole, hi, true, n, whole_out);
  g->pt.idx[1] = T.iv;
  if (w) w->acc = T.acc;
  prefetching_column(g, acc ? T.acc : NULL, next);
  ljc_loop_end(ir, &T, next, w ? sums : out);
  if (!w) return;
  w->pt.idx[1] = ljc_i64(ir, 0);
  store_reduction(w, sums);
}

/* Where the last nest runs behind (runs_behind): points it to the row a block before `row`.
 * In a task's first block, with no block before, to row itself: its output there is written
 * again, from the next block's loop or, in the task's last block, by the nest's own loop. */
static void behind_row(nest_gen *h, LLVMValueRef row) {
  ljc_kctx *kc = h->kc;
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  LLVMValueRef prev = LLVMBuildSub(b, row, ljc_i64(ir, kc->block_rows), "");
  h->pt.idx[0] = LLVMBuildSelect(b, kc->behind_first, row, prev, "");
}

/* Points the LOCAL slots the last nest reads to the previous block's buffers (behind_slot),
 * their origins a block back (the same element offsets a block of rows before), keeping what
 * they were in saved (two per slot) for behind_slots_end. In a task's first block, whose rows
 * the nest reads itself (behind_row), the origins stay, so that its reads stay within the
 * buffers (the other buffer's zeros: that output is written again). */
static void behind_slots_begin(ljc_kctx *kc, LLVMValueRef *saved) {
  size_t n = (size_t)kc->p->nslots;
  memcpy(saved, kc->slot_ptr, n * sizeof *saved);
  memcpy(saved + n, kc->slot_origin, n * sizeof *saved);
  for (size_t s = 0; s < n; s++) {
    if (!kc->behind_slot[s]) continue;
    const ljg_slot *sl = &kc->p->slots[s];
    LLVMValueRef back = ljc_i64(kc->ir, kc->block_rows * (sl->row_bytes / lj_dtype_size(sl->dtype)));
    back = LLVMBuildSelect(kc->ir->b, kc->behind_first, ljc_i64(kc->ir, 0), back, "");
    kc->slot_ptr[s] = kc->behind_slot[s];
    kc->slot_origin[s] = LLVMBuildSub(kc->ir->b, saved[n + s], back, "");
  }
}

static void behind_slots_end(ljc_kctx *kc, const LLVMValueRef *saved) {
  size_t n = (size_t)kc->p->nslots;
  memcpy(kc->slot_ptr, saved, n * sizeof *saved);
  memcpy(kc->slot_origin, saved + n, n * sizeof *saved);
}

/* The last nest's point at column c of the row behind_row set, stored. */
static void emit_behind_point(nest_gen *h, LLVMValueRef c) {
  LLVMValueRef *saved = ljb_xalloc(2 * (size_t)h->kc->p->nslots * sizeof *saved);
  behind_slots_begin(h->kc, saved);
  h->pt.idx[1] = c;
  store_point(h, point_value(h));
  behind_slots_end(h->kc, saved);
  free(saved);
}

/* The columns [lo, hi) of the row g->pt.idx[0] of nest s (runs_ahead), and in the same loop the
 * first nest's row a block later, combined into its accumulators and stored after the loop
 * (into the next block's copy of its LOCAL slot, ahead_slot, or the buffer the next block reads
 * it from where the last nest reads it behind, or into its slot in memory). In a task's last
 * block that row is past the call's rows: the loop then reads the current row for it again
 * (from cache) and stores nothing, so that the loop is the same for every row. Where the last
 * nest runs behind (runs_behind), the loop also stores its points a block back. A reduction
 * (acc not NULL) carries its accumulators through into out. */
static void emit_ahead(nest_gen *g, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef *acc, LLVMValueRef *out) {
  ljc_kctx *kc = g->kc;
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  nest_gen *a = g->ahead;
  int nacc = acc ? reduction_nacc(&g->red) : 0, na = reduction_nacc(&a->red);
  LLVMValueRef row = g->pt.idx[0], rb = ljc_i64(ir, kc->block_rows);
  LLVMValueRef next = LLVMBuildAdd(b, row, rb, "");
  LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, next, kc->ahead_end, "");
  LLVMValueRef init[4], step[4], done[4];
  for (int i = 0; i < nacc; i++) init[i] = acc[i];
  reduction_init(ir, &a->red, init + nacc);
  a->pt.idx[0] = LLVMBuildSelect(b, in, next, row, "");
  if (g->behind) behind_row(g->behind, row);
  ljc_loop L;
  ljc_loop_begin(ir, &L, lo, hi, false, nacc + na, init);
  g->pt.idx[1] = a->pt.idx[1] = L.iv;
  if (acc)
    emit_reduced(g, 2, L.acc, step);
  else
    emit_kept(g, 2);
  reduction_combine(ir, &a->red, L.acc + nacc, point_value(a), L.iv, step + nacc);
  if (g->behind) emit_behind_point(g->behind, L.iv);
  ljc_loop_end(ir, &L, step, done);
  for (int i = 0; i < nacc; i++) out[i] = done[i];
  LLVMBasicBlockRef after = ljc_if_begin(ir, in, "ahead.store");
  int32_t slot = a->nest->out_slot;
  LLVMValueRef ptr = kc->slot_ptr[slot], origin = kc->slot_origin[slot];
  if (origin) { /* a LOCAL slot: the next block's (its own buffer where the last nest runs behind) */
    const ljg_slot *sl = &kc->p->slots[slot];
    kc->slot_ptr[slot] = kc->behind_slot && kc->behind_slot[slot] ? kc->behind_slot[slot] : kc->ahead_slot;
    kc->slot_origin[slot] =
        LLVMBuildAdd(b, origin, ljc_i64(ir, kc->block_rows * (sl->row_bytes / lj_dtype_size(sl->dtype))), "");
  }
  a->pt.idx[0] = next;
  store_reduction(a, done + nacc);
  kc->slot_ptr[slot] = ptr, kc->slot_origin[slot] = origin;
  ljc_if_end(ir, after);
}

/* A nest too small for vector loops (LJC_SMALL_POINTS) that only copies rows: elementwise,
 * alone in its loop, its value a load of its own dtype, read and written through one strided
 * level each, both contiguous along the last dim for at least COPY_ROW_MIN_BYTES (a cat's
 * small parts): each row is one memcpy, not a scalar loop (a cat of 64 slices of [16, 256],
 * one thread: 0.19 -> 0.025 ms; the LSTM step, whose cat of its 32 steps is 32 such nests,
 * compiles in 347-365 ms instead of 375-399). Larger nests keep their vector loops, which
 * copied faster than a memcpy a row did (a pad's interior rows of 224 bytes 7%, a cat's rows
 * of 4 KiB 12%). */
enum { COPY_ROW_MIN_BYTES = 64 };

static bool copies_rows(const nest_gen *g) {
  const ljg_kernel *k = g->kc->k;
  const ljg_nest *n = g->nest;
  const ljg_kexpr *x = &k->exprs[n->value];
  int last = n->ndim - 1;
  if (n->rop >= 0 || n->scatter_index >= 0 || g->last != (int)(n - k->nests) || g->tiles || g->col_lo ||
      x->kind != LJG_X_LOAD || x->dtype != n->out_dtype || g->kc->load_at[n->value] || g->kc->found_load == n->value ||
      n->shape[last] * (int64_t)lj_dtype_size((lj_dtype)n->out_dtype) < COPY_ROW_MIN_BYTES ||
      ljg_numel(n->ndim, n->shape) > LJC_SMALL_POINTS)
    return false;
  const ljg_view *in = &k->views[x->view], *out = &k->views[n->out_view];
  return in->n == 1 && out->n == 1 && in->v[0].ndim == n->ndim && out->v[0].ndim == n->ndim &&
         in->v[0].stride[last] == 1 && out->v[0].stride[last] == 1;
}

/* The row of a nest that copies_rows at g->pt (its last dim from 0). */
static void copy_row(nest_gen *g) {
  ljc_kctx *kc = g->kc;
  const ljg_nest *n = g->nest;
  const ljg_kexpr *x = &kc->k->exprs[n->value];
  int last = n->ndim - 1;
  size_t size = lj_dtype_size((lj_dtype)n->out_dtype);
  LLVMTypeRef st = ljc_storage_type(kc->ir, n->out_dtype);
  g->pt.idx[last] = ljc_i64(kc->ir, 0);
  LLVMValueRef from = ljc_slot_offset(kc, x->slot, &kc->k->views[x->view], &g->pt);
  LLVMValueRef to = ljc_slot_offset(kc, n->out_slot, &kc->k->views[n->out_view], &g->pt);
  from = LLVMBuildInBoundsGEP2(kc->ir->b, st, kc->slot_ptr[x->slot], &from, 1, "");
  to = LLVMBuildInBoundsGEP2(kc->ir->b, st, kc->slot_ptr[n->out_slot], &to, 1, "");
  LLVMBuildMemCpy(kc->ir->b, to, (unsigned)size, from, (unsigned)size, ljc_i64(kc->ir, n->shape[last] * (int64_t)size));
}

static void emit_kept(nest_gen *g, int d) {
  ljc_ir *ir = g->kc->ir;
  if (d == g->nkept) {
    emit_point(g);
    return;
  }
  bool task = d == 0 && g->split;
  if (task && g->nest->row_dims > 1) {
    emit_rows(g);
    return;
  }
  if (!task && g->nest->shape[d] == 0) return;
  bool cols = g->col_lo && d == g->nkept - 1;
  LLVMValueRef lo = task ? g->begin : cols ? g->col_lo : ljc_i64(ir, 0);
  LLVMValueRef hi = task ? g->end : cols ? g->col_hi : ljc_i64(ir, g->nest->shape[d]);
  if (g->tiles && d == g->tiles->t) {
    emit_tiles(g, d + 1, lo, hi);
    return;
  }
  if (g->columns && d == g->nkept - 1) {
    if (g->nest->rcount <= UNROLLED_POINTS)
      emit_columns_unrolled(g, d, lo, hi, task);
    else
      emit_columns(g, d, lo, hi, task);
    return;
  }
  if (g->ahead && d == 1 && !task) {
    emit_ahead(g, lo, hi, NULL, NULL);
    return;
  }
  if (g->npf && d == 1 && !task) {
    emit_prefetching(g, lo, hi, NULL, NULL);
    return;
  }
  if (!task && d == g->nest->ndim - 1 && g->nkept == g->nest->ndim && copies_rows(g)) {
    copy_row(g);
    return;
  }
  if (!task && d == g->nest->ndim - 1 && unrolls_inner(g)) {
    for (int64_t c = 0; c < g->nest->shape[d]; c++) {
      g->pt.idx[d] = ljc_i64(ir, c);
      emit_kept(g, d + 1);
    }
    return;
  }
  ljc_loop L;
  ljc_loop_begin(ir, &L, lo, hi, task, 0, NULL);
  g->pt.idx[d] = L.iv;
  emit_kept(g, d + 1);
  ljc_loop_end(ir, &L, NULL, NULL);
}

/* Whether nest s only fills with zeros the target of nest s + 1, a scatter-add of one value
 * per line along a small dim (max-pool's gradient): that nest then writes every position of
 * the dim itself, adding to zeros it does not load, and the fill is not emitted. */
static bool fills_for_scatter(const ljg_kernel *k, int s) {
  if (s + 1 >= k->nnests || (ljg_kernel_has_window(k) && k->win_at == s + 1)) return false;
  const ljg_nest *z = &k->nests[s], *sc = &k->nests[s + 1];
  const ljg_kexpr *v = &k->exprs[z->value];
  if (z->rop >= 0 || z->scatter_index >= 0 || v->kind != LJG_X_CONST || v->value != 0 || signbit(v->value))
    return false;
  if (sc->scatter_index < 0 || sc->out_slot != z->out_slot || sc->ndim != z->ndim || sc->shape[sc->scatter_dim] != 1 ||
      sc->row_dims != z->row_dims || sc->scatter_dim < sc->row_dims)
    return false;
  const ljg_view *zv = &k->views[z->out_view], *sv = &k->views[sc->out_view];
  int64_t bound = ljg_view_top(sv)->shape[sc->scatter_dim];
  if (bound < 1 || bound > LJC_SMALL_DIM || zv->n != 1 || sv->n != 1 || zv->v[0].ndim != z->ndim ||
      sv->v[0].ndim != z->ndim || zv->v[0].offset != sv->v[0].offset)
    return false;
  for (int d = 0; d < z->ndim; d++)
    if (z->shape[d] != (d == sc->scatter_dim ? bound : sc->shape[d]) || zv->v[0].shape[d] != sv->v[0].shape[d] ||
        zv->v[0].stride[d] != sv->v[0].stride[d])
      return false;
  return true;
}

/* View v of a gather nest's point (its dim gd the gathered one) seen in the index space of
 * the argmax nest a (its kept dims, then the reduced one): gd moved last, the other dims
 * reshaped to a's kept dims (the same elements in the same order), a gd of size 1 expanded
 * to the reduced dim's size (stride 0). False when that is not one strided level, or gd is
 * neither of size 1 nor of the reduced dim's. */
static bool view_in_reduction(const ljg_view *v, int gd, const ljg_nest *a, ljg_view *out) {
  int nk = a->ndim - 1, nd = ljg_view_top(v)->ndim;
  int64_t perm[LJ_MAX_DIMS], shape[LJ_MAX_DIMS];
  for (int d = 0, n = 0; d < nd; d++)
    if (d != gd) perm[n++] = d;
  perm[nd - 1] = gd;
  memcpy(shape, a->shape, (size_t)nk * sizeof *shape);
  shape[nk] = ljg_view_top(v)->shape[gd];
  *out = *v;
  if (out->n != 1 || (shape[nk] != 1 && shape[nk] != a->shape[nk])) return false;
  ljg_view_permute(out, perm);
  if (!ljg_view_reshape(out, nk + 1, shape) || out->n != 1) return false;
  ljg_view_expand(out, a->shape);
  return true;
}

/* Whether nest s + 1 only gathers, at each point of the argmax or argmin nest s (one reduced
 * dim, the last), the element nest s found: max-pool's maximum of each window read back at
 * the window's argmax (max_pool2d in ops_nn.c) from the buffer the argmax read, in the same
 * order. That element is the argmax's accumulator, so nest s stores it too (through
 * *out_view, nest s + 1's output in nest s's index space) and nest s + 1 does not run: a
 * pass less over the windows, the same bits (the first of equal maxima, the first NaN). */
static bool picks_found(const ljg_kernel *k, const int *nest_last, int s, ljg_view *out_view) {
  if (s < 0 || s + 1 >= k->nnests || nest_last[s] != s || nest_last[s + 1] != s + 1 ||
      (ljg_kernel_has_window(k) && k->win_at == s + 1))
    return false;
  const ljg_nest *a = &k->nests[s], *g = &k->nests[s + 1];
  int nk = a->ndim - 1;
  if ((a->rop != LJG_OP_ARGMAX && a->rop != LJG_OP_ARGMIN) || a->scatter_index >= 0 || nk < 1 ||
      a->rmask != 1u << nk || g->rop >= 0 || g->scatter_index >= 0 || g->out_slot == a->out_slot ||
      ljg_numel(g->ndim, g->shape) != ljg_numel(nk, a->shape))
    return false;
  const ljg_kexpr *xa = &k->exprs[a->value], *xg = &k->exprs[g->value];
  if (xa->kind != LJG_X_LOAD || xg->kind != LJG_X_GATHER) return false;
  const ljg_kexpr *idx = &k->exprs[xg->in[0]], *buf = &k->exprs[xg->in[1]];
  int gd = xg->aux;
  if (idx->kind != LJG_X_LOAD || idx->slot != a->out_slot || buf->slot != xa->slot || g->out_slot == xa->slot ||
      g->shape[gd] != 1 || g->out_dtype != xa->dtype)
    return false;
  int64_t a_rows = 1, g_rows = 1; /* the same rows of a task range */
  for (int d = 0; d < a->row_dims; d++) a_rows *= a->shape[d];
  for (int d = 0; d < g->row_dims; d++) g_rows *= g->shape[d];
  ljg_view data, index;
  return a_rows == g_rows && view_in_reduction(&k->views[buf->view], gd, a, &data) &&
         ljg_view_equal(&data, &k->views[xa->view]) && view_in_reduction(&k->views[idx->view], gd, a, &index) &&
         ljg_view_equal(&index, &k->views[a->out_view]) && view_in_reduction(&k->views[g->out_view], gd, a, out_view);
}

/* View v over the points of a nest as many as the argmax nest a's kept points (the same
 * elements in the same order), in a's index space: reshaped to a's kept dims, expanded
 * along the reduced one (stride 0). False when that is not one strided level. */
static bool view_as_kept(const ljg_view *v, const ljg_nest *a, ljg_view *out) {
  int nk = a->ndim - 1;
  int64_t shape[LJ_MAX_DIMS];
  memcpy(shape, a->shape, (size_t)nk * sizeof *shape);
  shape[nk] = 1;
  *out = *v;
  if (out->n != 1 || !ljg_view_reshape(out, nk + 1, shape) || out->n != 1) return false;
  ljg_view_expand(out, a->shape);
  return true;
}

/* Whether nest s + 2 only maps, point by point, the elements the argmax or argmin nest s
 * found and stores for nest s + 1 (picks_found): its value a function of one load of that
 * element (*load) and of scalars and constants (max-pool's maximum through a relu). Nest s
 * then stores that value too (through *out_view, nest s + 2's output in its index space),
 * and nest s + 2 does not run: a pass less over the pooled elements. */
static bool maps_found(const ljg_kernel *k, const int *nest_last, int s, int32_t *load, ljg_view *out_view) {
  ljg_view pick;
  if (!picks_found(k, nest_last, s, &pick) || s + 2 >= k->nnests || nest_last[s + 2] != s + 2 ||
      (ljg_kernel_has_window(k) && k->win_at == s + 2))
    return false;
  const ljg_nest *a = &k->nests[s], *g = &k->nests[s + 1], *r = &k->nests[s + 2];
  if (r->rop >= 0 || r->scatter_index >= 0 || ljg_numel(r->ndim, r->shape) != ljg_numel(a->ndim - 1, a->shape) ||
      r->out_slot == g->out_slot || r->out_slot == a->out_slot || r->out_slot == k->exprs[a->value].slot)
    return false;
  int64_t a_rows = 1, r_rows = 1;
  for (int d = 0; d < a->row_dims; d++) a_rows *= a->shape[d];
  for (int d = 0; d < r->row_dims; d++) r_rows *= r->shape[d];
  bool *used = ljb_xcalloc((size_t)k->nexprs + 1, sizeof *used), ok = a_rows == r_rows;
  ljg_nest_exprs(k, r, used);
  *load = -1;
  for (int e = 0; e < k->nexprs && ok; e++) {
    const ljg_kexpr *x = &k->exprs[e];
    if (!used[e] || x->kind == LJG_X_OP || x->kind == LJG_X_CONST || x->kind == LJG_X_SCALAR) continue;
    ok = x->kind == LJG_X_LOAD && x->slot == g->out_slot && *load < 0;
    *load = e;
  }
  free(used);
  ljg_view element;
  return ok && *load >= 0 && view_as_kept(&k->views[k->exprs[*load].view], a, &element) &&
         ljg_view_equal(&element, &pick) && view_as_kept(&k->views[r->out_view], a, out_view);
}

/* Whether nest s can run in the loop of the nests first .. s - 1 (which share one): all of
 * them elementwise over the same points, no window between them, each writing a slot of its
 * own, and every element one of them reads from a slot another writes read at the point
 * being written. One pass over the points then computes what the nests one after another
 * would, and what one nest writes the next reads from registers (an optimizer's update of
 * its state, then of the parameter from it). */
static bool shares_loop(const ljg_kernel *k, int first, int s) {
  const ljg_nest *a = &k->nests[first], *n = &k->nests[s];
  if (s <= first || n->rop >= 0 || n->scatter_index >= 0 || a->rop >= 0 || a->scatter_index >= 0 ||
      n->ndim != a->ndim || n->row_dims != a->row_dims ||
      memcmp(n->shape, a->shape, (size_t)n->ndim * sizeof *n->shape) != 0 || fills_for_scatter(k, first) ||
      fills_for_scatter(k, s) ||
      (ljg_kernel_has_window(k) && k->win_at > first && k->win_at <= s))
    return false;
  bool *used = ljb_xalloc((size_t)k->nexprs * sizeof *used), ok = true;
  for (int r = first; ok && r <= s; r++) {
    ljg_nest_exprs(k, &k->nests[r], used);
    for (int e = 0; ok && e < k->nexprs; e++) {
      const ljg_kexpr *x = &k->exprs[e];
      if (!used[e] || (x->kind != LJG_X_LOAD && x->kind != LJG_X_BUFFER)) continue;
      for (int w = first; ok && w <= s; w++)
        if (k->nests[w].out_slot == x->slot)
          ok = x->kind == LJG_X_LOAD && ljg_view_equal(&k->views[x->view], &k->views[k->nests[w].out_view]);
    }
    for (int w = first; ok && w < r; w++) ok = k->nests[w].out_slot != k->nests[r].out_slot;
  }
  free(used);
  return ok;
}

/* Whether a nest computes random numbers (Philox). Their 64-bit products, 16 lanes wide, are
 * two registers each, which instruction selection splits: such a nest's loops are vectorized
 * a register of 64-bit lanes wide instead (three random kernels compiled in 59-68 ms instead
 * of 86-110 on one thread; they run 10% slower, once, to initialize parameters); but a
 * scatter-add's nest, which stays scalar, gets no width to fail to reach. */
static bool is_random(const ljg_kexpr *x) {
  return x->kind == LJG_X_INDEX && (x->op == LJG_OP_RAND_UNIFORM || x->op == LJG_OP_RAND_NORMAL);
}

static bool has_random(const ljg_kernel *k, const ljg_nest *nest) { return nest_has(k, nest, is_random); }

/* last[s] for every nest (ljc_kctx.nest_last): loops shared greedily from the first nest on. */
static void loop_groups(const ljg_kernel *k, int *last) {
  for (int first = 0, s = 0; s < k->nnests; s++) {
    if (s > first && shares_loop(k, first, s)) {
      last[first] = s;
      last[s] = -1;
    } else {
      first = s;
      last[s] = s;
    }
  }
}

int ljc_nest_loop_end(const ljg_kernel *k, int s) {
  int *last = ljb_xalloc(((size_t)k->nnests + 1) * sizeof *last);
  loop_groups(k, last);
  int end = last[s];
  free(last);
  return end;
}

bool ljc_nest_alone(const ljg_kernel *k, int s) { return ljc_nest_loop_end(k, s) == s; }

/* The earlier kernel whose routine writes nest s of kernel ki (ljc_gemm_b_sum), or -1. */
static int summed_by(const ljg_program *p, int ki, int s) {
  for (int i = 0; i < ki; i++) {
    int kj, nest;
    int64_t at, step;
    if (ljc_gemm_b_sum(p, i, &kj, &nest, &at, &step) && kj == ki && nest == s) return i;
  }
  return -1;
}

/* The bias LOAD a row-fused matmul kernel's routine starts C's rows from (its first nest then
 * does not run), or -1 (ljc_gemm_bias). */
static int32_t bias_start(const ljg_program *p, const ljg_kernel *k, const int *nest_last) {
  return k->kind == LJG_K_MATMUL && k->row_block > 0 && k->nnests > 0 && nest_last[0] == 0 ? ljc_gemm_bias(p, k) : -1;
}

/* In one call: in the blocks of rows fuse_rows sizes for C, which the routine never stores,
 * it transformed dY again for every block (a 64-channel input gradient on 56×56, blocks of 5
 * planes: 46 ms on two threads, 8 in one call, as the forward product). */
bool ljc_gemm_in_one_call(const ljg_kernel *k) {
  return k->kind == LJG_K_MATMUL && k->nnests == 0 && ljc_gemm_writes_window(k);
}

/* Says which nests of matmul kernel k, of column tasks, run on a task's columns (columns) or
 * whole in the first task: not nest 0 where the routine starts C from a bias (a LOAD). */
static void column_nests_text(ljb_str *line, const ljg_kernel *k, bool columns, int32_t bias) {
  ljb_str list = {0};
  int n = 0;
  for (int s = bias >= 0; s < k->nnests; s++)
    if (ljg_column_nest(k, s) == columns) ljb_str_printf(&list, "%s%d", n++ ? ", " : "", s);
  if (n)
    ljb_str_printf(line, "; nest%s %s run%s %s", n > 1 ? "s" : "", list.s, n > 1 ? "" : "s",
                   columns ? "on a task's columns of every row" : "whole in the first task");
  free(list.s);
}

/* "; nest 2 <verb>s its <what>" or "; nests 0, 2 <verb> their <what>" for the nests of k that
 * `which` marks, nothing when none is. */
static void nests_text(ljb_str *line, const ljg_kernel *k, const bool *which, const char *verb, const char *what) {
  ljb_str list = {0};
  int n = 0;
  for (int s = 0; s < k->nnests; s++)
    if (which[s]) ljb_str_printf(&list, "%s%d", n++ ? ", " : "", s);
  if (n)
    ljb_str_printf(line, "; nest%s %s %s%s %s %s", n > 1 ? "s" : "", list.s, verb, n > 1 ? "" : "s",
                   n > 1 ? "their" : "its", what);
  free(list.s);
}

/* The nests of kernel k that ljc_emit_depthwise_nest computes. */
static void depthwise_text(ljb_str *line, const ljg_program *p, const ljg_kernel *k) {
  bool *which = ljb_xcalloc((size_t)k->nnests + 1, sizeof *which);
  for (int s = 0; s < k->nnests; s++) which[s] = ljc_depthwise_nest(p, k, s);
  nests_text(line, k, which, "read", "windows from the image's rows: its im2col not run");
  free(which);
}

/* The outputs kernel ki streams under session s: a matmul's C from its routine, nests'. */
static void stream_text(ljb_str *line, const ljg_program *p, int ki, const ljc_session *s) {
  const ljg_kernel *k = &p->kernels[ki];
  uint8_t *stream = ljb_xcalloc((size_t)p->nslots + 1, 1);
  bool *which = ljb_xcalloc((size_t)k->nnests + 1, sizeof *which);
  if (s && ljc_session_stream_slots(s, p, ki, stream)) {
    if (k->kind == LJG_K_MATMUL && stream[k->mm_out_slot])
      ljb_str_puts(line, "; the routine stores C's full vectors non-temporally");
    for (int j = 0; j < k->nnests; j++) which[j] = stream[k->nests[j].out_slot];
    nests_text(line, k, which, "store", "aligned vectors non-temporally");
  }
  free(which);
  free(stream);
}

static int64_t *slot_shifts(const ljg_program *p, int ki);

char *ljc_lowering_text(const ljg_program *p, const ljc_session *session) {
  ljb_str b = {0};
  ljb_str_puts(&b, "lowering (what the code does otherwise than the nests above say):\n");
  for (int ki = 0; ki < p->nkernels; ki++) {
    const ljg_kernel *k = &p->kernels[ki];
    int *last = ljb_xalloc(((size_t)k->nnests + 1) * sizeof *last);
    loop_groups(k, last);
    int *head = ljb_xalloc(((size_t)k->nnests + 1) * sizeof *head);
    sum_groups(p, ki, last, head);
    char routine[LJC_KERNEL_ROUTINES_MAX];
    ljb_str line = {0};
    if (ljc_kernel_routine(k, routine)) ljb_str_printf(&line, "; calls %s", routine);
    stream_text(&line, p, ki, session);
    if (ljg_kernel_has_window(k) && k->kind == LJG_K_MATMUL && ljc_gemm_writes_window(k))
      ljb_str_puts(&line, "; its col2im not run: the routine writes the image");
    if (ljc_unpools(p, k))
      ljb_str_puts(&line, "; nest 1 and the col2im store the image's rows from its values and positions");
    else if (ljg_kernel_has_window(k) && col2im_rows(k) && !ljc_depthwise_image(p, k) &&
             !(k->kind == LJG_K_MATMUL && ljc_gemm_writes_window(k)))
      ljb_str_puts(&line, "; the col2im gathers each image row from the windows that reach it");
    if (pools_rows(p, k, last, k->win_at))
      ljb_str_printf(&line, "; nest %d reads its windows from the image's rows: its im2col not run", k->win_at);
    if (ljc_depthwise_cols(p, k)) depthwise_text(&line, p, k);
    for (int s = 0; s < k->nnests; s++) {
      int sums = ljc_depthwise_epilogue(p, k, s);
      if (sums >= 0 && sums == s - 1)
        ljb_str_printf(&line, "; nest %d not run: nest %d's sums add its bias or bound it and write its output", s,
                       sums);
      else if (sums >= 0)
        ljb_str_printf(&line, "; nest %d not run: nest %d's sums write its output", s, sums);
    }
    if (ljc_depthwise_image(p, k))
      ljb_str_printf(&line, "; nest %d and the col2im not run: the image is summed from the rows nest %d reads",
                     k->win_at - 1, k->win_at - 1);
    if (ljc_depthwise_flat(p, k)) ljb_str_puts(&line, "; its planes run flat: a vector over several of their rows");
    if (k->row_block > 0 && ljc_gemm_in_one_call(k))
      ljb_str_puts(&line, "; no blocks: the routine takes a thread's planes in one call");
    if (ljc_gemm_rows_outer(k)) ljb_str_puts(&line, "; its tasks go row by row of every image");
    int64_t *shift = slot_shifts(p, ki);
    for (int s = 0; shift && s < p->nslots; s++)
      if (shift[s]) ljb_str_printf(&line, "; its code reads slot%d from element %lld on", s, (long long)shift[s]);
    free(shift);
    int32_t bias = bias_start(p, k, last);
    if (bias >= 0)
      ljb_str_printf(&line, "; nest 0 not run: the routine starts C's rows from its bias%s",
                     ljc_gemm_bias_relu(k) ? " and stores their relu" : "");
    int64_t part = nest_part_rows(p, k);
    if (part) ljb_str_printf(&line, "; its nests run on %lld rows of a block at a time", (long long)part);
    if (k->tm) ljb_str_printf(&line, "; the trailing product runs on each block of %lld rows", (long long)k->row_block);
    if (k->kind == LJG_K_MATMUL && k->mm_col_tasks && k->nnests) {
      column_nests_text(&line, k, true, bias);
      column_nests_text(&line, k, false, bias);
    }
    int kj, nest;
    int64_t at, step;
    if (ljc_gemm_b_sum(p, ki, &kj, &nest, &at, &step))
      ljb_str_printf(&line, "; the routine also sums B for kernel %d's nest %d", kj, nest);
    for (int s = 0; s < k->nnests; s++) {
      ljg_view unused;
      int by = summed_by(p, ki, s);
      if (by >= 0 && p->kernels[by].mm_sum > 1)
        ljb_str_printf(&line, "; nest %d adds the sums of each run kernel %d's routine wrote", s, by);
      else if (by >= 0)
        ljb_str_printf(&line, "; nest %d not run: kernel %d's routine writes it", s, by);
      if (fills_for_scatter(k, s))
        ljb_str_printf(&line, "; nest %d not run: nest %d writes every position of its scatter", s, s + 1);
      if (picks_found(k, last, s, &unused))
        ljb_str_printf(&line, "; nest %d not run: nest %d stores the elements it found", s + 1, s);
      int32_t load;
      if (maps_found(k, last, s, &load, &unused) && !pools_rows(p, k, last, s))
        ljb_str_printf(&line, "; nest %d not run: nest %d stores what it maps them to", s + 2, s);
      if (last[s] > s) ljb_str_printf(&line, "; nests %d-%d run in one loop", s, last[s]);
      for (int t = s, n = 0; head[s] == s && t < k->nnests; t++)
        if (head[t] == s) ljb_str_printf(&line, "%s%d", n++ ? ", " : "; nests ", t);
      if (head[s] == s) ljb_str_puts(&line, " sum in one loop");
      const ljg_nest *n = &k->nests[s];
      if (ljg_column_order(k, n, n->ndim - __builtin_popcount(n->rmask)) && !pools_rows(p, k, last, s) &&
          !ljc_depthwise_nest(p, k, s))
        ljb_str_printf(&line, "; nest %d runs its reduced dims outside its last kept one", s);
      if (k->task_rows && sums_by_block(k, last, by >= 0, s))
        ljb_str_printf(&line, "; nest %d adds up each block's rows after the nests before %d", s, k->per_task_at);
      tiles tl;
      int32_t pf[PREFETCH_LOADS_MAX];
      int npf;
      if (last[s] >= s && find_tiles(k, &k->nests[s], last[s], &tl)) {
        ljb_str_printf(&line, "; nest %d reads", s);
        for (int i = 0; i < tl.n; i++) ljb_str_printf(&line, "%s e%d", i ? "," : "", tl.load[i]);
        ljb_str_printf(&line, " transposed, in tiles along dims %d and %d", tl.t, tl.j);
        if (tiles_in_blocks(k, &k->nests[s], last[s], &tl))
          ljb_str_printf(&line, ", in blocks of %d along dim %d", TILE_RUN_BYTES / tl.size, tl.j);
        tile_prefetches(p, k, &tl);
        int nahead = 0;
        for (int i = 0; i < tl.n; i++)
          if (tl.ahead[i]) ljb_str_printf(&line, "%s e%d", nahead++ ? "," : ", prefetching", tl.load[i]);
        if (nahead) ljb_str_printf(&line, " %d bytes ahead along dim %d", TILE_AHEAD_BYTES, tl.t);
      } else if (runs_ahead(p, k, last, summed_by(p, ki, 0) >= 0, s)) {
        int t = runs_behind(p, k, last, s);
        ljb_str_printf(&line, "; nest %d runs nest 0 on the next block's rows", s);
        if (t) ljb_str_printf(&line, " and nest %d on the previous block's", t);
        ljb_str_printf(&line, ", in blocks of %lld rows", (long long)ahead_block_rows(p, k, last, s));
      } else if (last[s] >= s && (npf = prefetch_loads(p, k, s, false, pf)) > 0) {
        ljb_str_printf(&line, "; nest %d prefetches the next block's rows of", s);
        for (int i = 0; i < npf; i++) ljb_str_printf(&line, "%s e%d", i ? "," : "", pf[i]);
        if (sums_in_loop(p, k, last, -1, s)) ljb_str_printf(&line, "; nest %d sums in its loop", s + 1);
      }
    }
    char *text = ljb_str_take(&line);
    if (text[0]) ljb_str_printf(&b, "  kernel %d: %s\n", ki, text + 2);
    free(text);
    free(last);
    free(head);
  }
  return ljb_str_take(&b);
}

/* Vector iterations an elementwise nest's loops interleave when the nests of its loop
 * compute a vmath function, 0 (the vectorizer's choice) otherwise. Such a body is long, so
 * the vectorizer runs one vector an iteration, and each point's chain of dependent
 * operations (exp's: about 20) is longer than the out-of-order core looks ahead: four
 * independent chains an iteration keep the FMA pipes fed. One thread: gelu (tanh form) over
 * 1M floats 0.181-0.184 -> 0.155-0.156 ms, sigmoid 0.134-0.136 -> 0.121-0.122, softmax over
 * [4096, 1024] 0.74-0.75 -> 0.69-0.70. Reductions interleave anyway. With AVX2's 16
 * registers, two: four spill the polynomial's constants. A loop that also runs the first nest
 * ahead, a reduction's too, two (its loads and accumulators take registers as well): one
 * thread, softmax over [4096, 1024] 0.511-0.515 -> 0.489-0.498 ms (three 0.509-0.511, eight
 * 0.529-0.532), log_softmax 0.592-0.609 -> 0.574-0.579 (the vectorizer's choice before). Such
 * a loop without vmath functions (a layer norm's) too: with the vectorizer's choice or four,
 * the same within noise. */
static int vmath_interleave(const ljc_kctx *kc, const ljg_nest *nest, int last, bool ahead) {
  if (ahead) return 2;
  if (nest->rop >= 0) return 0;
  for (const ljg_nest *n = nest; n <= &kc->k->nests[last]; n++)
    if (computes_vmath(kc->k, n)) return kc->ir->vec_bytes == 64 && !ahead ? 4 : 2;
  return 0;
}

static void nest_gen_init(nest_gen *g, ljc_kctx *kc, const ljg_nest *nest, int check, LLVMValueRef begin,
                          LLVMValueRef end) {
  int s = (int)(nest - kc->k->nests);
  *g = (nest_gen){0};
  if (picks_found(kc->k, kc->nest_last, s, &g->pick_view)) g->pick = nest + 1;
  if (maps_found(kc->k, kc->nest_last, s, &g->then_load, &g->then_view)) g->then = nest + 2;
  g->kc = kc;
  g->nest = nest;
  g->check = check;
  g->into_zeros = s > 0 && fills_for_scatter(kc->k, s - 1);
  g->last = kc->nest_last[s];
  g->pt.ndim = nest->ndim;
  g->nkept = nest->ndim - __builtin_popcount(nest->rmask);
  g->split = kc->k->task_dim == 0;
  g->begin = begin;
  g->end = end;
  if (nest->rop >= 0) g->red = reduction_of(kc->ir, nest->rop, kc->k->exprs[nest->value].dtype, nest->rcount);
  g->columns = ljg_column_order(kc->k, nest, g->nkept);
  g->col_lo = kc->col_lo, g->col_hi = kc->col_hi;
  for (int d = g->nkept; d < nest->ndim; d++) LJ_ASSERT(nest->rmask >> d & 1);
}

/* Nest s of the kernel, which matmul kernel mi's routine wrote into runs of sums of its B
 * (ljc_gemm_b_sum of a batch sum into runs), on rows [begin, end): each row the sum of its
 * runs' sums, in the runs' order. */
static void add_runs(ljc_kctx *kc, int mi, int s, LLVMValueRef begin, LLVMValueRef end) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *mk = &kc->p->kernels[mi];
  int kj, nest;
  int64_t at, step;
  LJ_ASSERT(ljc_gemm_b_sum(kc->p, mi, &kj, &nest, &at, &step) && nest == s);
  LLVMValueRef zero = ljc_const_f(ir->f32, 0), sum;
  ljc_loop r, g;
  ljc_loop_begin(ir, &r, begin, end, true, 0, NULL);
  ljc_loop_begin(ir, &g, ljc_i64(ir, 0), ljc_i64(ir, mk->mm_sum), false, 1, &zero);
  LLVMValueRef off = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, g.iv, ljc_i64(ir, mk->mm_n), ""), r.iv, "");
  off = LLVMBuildNSWAdd(b, off, ljc_i64(ir, mk->mm_sum * mk->mm_m * mk->mm_n), "");
  LLVMValueRef x = LLVMBuildLoad2(b, ir->f32, LLVMBuildInBoundsGEP2(b, ir->f32, kc->slot_ptr[mk->mm_out_slot], &off, 1, ""), "");
  LLVMValueRef next = LLVMBuildFAdd(b, g.acc[0], x, "");
  ljc_loop_end(ir, &g, &next, &sum);
  off = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, r.iv, ljc_i64(ir, step), ""), ljc_i64(ir, at), "");
  LLVMBuildStore(b, sum, LLVMBuildInBoundsGEP2(b, ir->f32, kc->slot_ptr[kc->k->nests[s].out_slot], &off, 1, ""));
  ljc_loop_end(ir, &r, NULL, NULL);
}

static int ahead_nest(const ljg_program *p, const ljg_kernel *k, const int *nest_last, bool b_summed0, int nnests);

/* Whether nest n reads slot. */
static bool nest_reads(const ljg_kernel *k, const ljg_nest *n, int32_t slot, bool *used) {
  ljg_nest_exprs(k, n, used);
  for (int e = 0; e < k->nexprs; e++)
    if (used[e] && ljg_expr_reads(&k->exprs[e], slot)) return true;
  return false;
}

/* Whether kernel ki's nests run one after another, so that sums may share a loop (sum_groups):
 * loops, or a matmul's epilogue in row blocks, with no window, tasks of several rows, column
 * tasks or nest run ahead. */
static bool sums_may_group(const ljg_program *p, int ki, const int *nest_last) {
  const ljg_kernel *k = &p->kernels[ki];
  return (k->kind == LJG_K_LOOPS || (k->kind == LJG_K_MATMUL && k->row_block > 0 && !ljc_gemm_in_one_call(k))) &&
         !ljg_kernel_has_window(k) && k->task_rows == 0 && !k->mm_col_tasks && !ljc_unpools(p, k) &&
         (k->row_block == 0 || ahead_nest(p, k, nest_last, summed_by(p, ki, 0) >= 0, k->nnests) == 0);
}

/* Whether nest s of kernel ki may sum in a loop with others (sum_groups): a sum or mean over
 * more than UNROLLED_POINTS points in the plain order, alone in its loop, with no checks or
 * random numbers, not written by a matmul's routine, not prefetching and not summing in a
 * mapping nest's loop. */
static bool summable(const ljg_program *p, int ki, const int *nest_last, int s) {
  const ljg_kernel *k = &p->kernels[ki];
  const ljg_nest *n = &k->nests[s];
  int32_t pf[PREFETCH_LOADS_MAX];
  if ((n->rop != LJG_OP_SUM && n->rop != LJG_OP_MEAN) || n->scatter_index >= 0 || nest_last[s] != s ||
      n->rcount <= UNROLLED_POINTS || ljg_column_order(k, n, n->ndim - __builtin_popcount(n->rmask)) ||
      has_random(k, n) || summed_by(p, ki, s) >= 0 || prefetch_loads(p, k, s, false, pf) > 0 ||
      (s > 0 && sums_in_loop(p, k, nest_last, 0, s - 1)))
    return false;
  bool *used = ljb_xcalloc((size_t)k->nexprs, sizeof *used), ok = true;
  ljg_nest_exprs(k, n, used);
  for (int e = 0; e < k->nexprs && ok; e++) ok = !used[e] || ljc_expr_check(k, e) == LJG_KERR_NONE;
  free(used);
  return ok;
}

/* The sums that run in one loop, into head (per nest: the first nest of its group, itself for
 * that one; -1 for a nest that sums alone or does not sum): from the first nest on, a nest not
 * yet in a group heads one, and each later nest t not yet in one joins when it sums over the
 * same points (shape, reduced dims and rows) and can move before the nests between: it reads
 * nothing that the nests from the head to t write, and none of those reads or writes its
 * output; at most SUM_GROUP_MAX a group. A batch norm's gradient, Σ dy and Σ dy·(x − mean)
 * over each channel, then reads x and dy once instead of once a sum. */
static void sum_groups(const ljg_program *p, int ki, const int *nest_last, int *head) {
  const ljg_kernel *k = &p->kernels[ki];
  bool *ok = ljb_xcalloc((size_t)k->nnests + 1, sizeof *ok), *used = ljb_xcalloc((size_t)k->nexprs + 1, sizeof *used);
  bool group = sums_may_group(p, ki, nest_last);
  for (int s = 0; s < k->nnests; s++) ok[s] = group && summable(p, ki, nest_last, s), head[s] = -1;
  for (int s = 0; s < k->nnests; s++) {
    if (!ok[s] || head[s] >= 0) continue;
    const ljg_nest *a = &k->nests[s];
    for (int t = s + 1, n = 1; t < k->nnests && n < SUM_GROUP_MAX; t++) {
      const ljg_nest *b = &k->nests[t];
      bool joins = ok[t] && head[t] < 0 && b->ndim == a->ndim && b->rmask == a->rmask && b->row_dims == a->row_dims &&
                   memcmp(b->shape, a->shape, (size_t)a->ndim * sizeof *a->shape) == 0;
      for (int u = s; u < t && joins; u++)
        joins = !nest_reads(k, b, k->nests[u].out_slot, used) && k->nests[u].out_slot != b->out_slot &&
                !nest_reads(k, &k->nests[u], b->out_slot, used);
      if (joins) head[s] = s, head[t] = s, n++;
    }
  }
  free(ok);
  free(used);
}

/* The loops of a nest of a kernel of column blocks (ljg_kernel.col_block) go over a block's
 * columns a whole vector at a time, as many vectors an iteration as the block holds, at most
 * what vmath_interleave asks or four: the vectorizer otherwise took vectors of 2 of their 16
 * lanes for blocks of 16 columns, its 4 vectors an iteration being more than they held (a
 * softmax over the channels of [32, 64, 56, 56] in blocks of 16 columns, one thread, `lj-run`
 * on its graph: 15.6 -> 4.1 ms; in blocks of 448, 3.1). */
static void column_block_loops(ljc_kctx *kc, const ljg_nest *nest) {
  ljc_ir *ir = kc->ir;
  int lanes = ir->vec_bytes / (int)lj_dtype_size((lj_dtype)nest->out_dtype);
  int fit = (int)(kc->k->col_block / lanes), ic = ir->loop_interleave ? ir->loop_interleave : 4;
  if (fit < 1 || ir->loop_width) return;
  ir->loop_width = lanes;
  ir->loop_interleave = ic < fit ? ic : fit;
}

static void emit_nest(ljc_kctx *kc, const ljg_nest *nest, int check, LLVMValueRef begin, LLVMValueRef end) {
  int s = (int)(nest - kc->k->nests);
  ljg_view pick_view;
  int32_t load;
  if (kc->b_summed[s] >= 0) {
    if (kc->p->kernels[kc->b_summed[s]].mm_sum > 1) add_runs(kc, kc->b_summed[s], s, begin, end);
    return;
  }
  if (fills_for_scatter(kc->k, s) || kc->nest_last[s] < 0 || (s == 0 && kc->mm_bias >= 0) ||
      (kc->sum_head[s] >= 0 && kc->sum_head[s] != s) ||
      (s > 0 && sums_in_loop(kc->p, kc->k, kc->nest_last, kc->ahead, s - 1)) ||
      picks_found(kc->k, kc->nest_last, s - 1, &pick_view) ||
      (maps_found(kc->k, kc->nest_last, s - 2, &load, &pick_view) && !pools_rows(kc->p, kc->k, kc->nest_last, s - 2)))
    return;
  nest_gen g, first, last, with;
  nest_gen_init(&g, kc, nest, check, begin, end);
  for (int t = s; kc->sum_head[s] == s && t < kc->k->nnests; t++)
    if (kc->sum_head[t] == s) {
      g.sums[g.nsums] = &kc->k->nests[t];
      g.sums_red[g.nsums++] = reduction_of(kc->ir, kc->k->nests[t].rop, kc->k->exprs[kc->k->nests[t].value].dtype,
                                           kc->k->nests[t].rcount);
    }
  if (s > 0 && s == kc->ahead) {
    nest_gen_init(&first, kc, kc->k->nests, -1, begin, end);
    g.ahead = &first;
    if (kc->behind) {
      nest_gen_init(&last, kc, &kc->k->nests[kc->behind], -1, begin, end);
      g.behind = &last;
    }
  }
  ljc_dbg_at(kc->ir, kc->k->exprs[nest->value].node);
  kc->ir->loop_width = ljg_numel(nest->ndim, nest->shape) <= LJC_SMALL_POINTS        ? 1
                      : has_random(kc->k, nest) && nest->scatter_index < 0 ? kc->ir->vec_bytes / 8
                                                                           : 0;
  kc->ir->loop_interleave = vmath_interleave(kc, nest, g.last, g.ahead != NULL);
  if (kc->k->col_block) column_block_loops(kc, nest);
  tiles tl;
  if (find_tiles(kc->k, nest, g.last, &tl)) {
    tl.vw = kc->ir->vec_bytes / tl.size;
    LJ_ASSERT(tl.vw >= 2 && tl.vw <= TILE_LANES_MAX && tl.vw <= LJG_TILE_MIN);
    tl.run = tiles_in_blocks(kc->k, nest, g.last, &tl) ? TILE_RUN_BYTES / tl.size : tl.vw;
    tile_prefetches(kc->p, kc->k, &tl);
    for (int i = 0; i < tl.n; i++) {
      LLVMTypeRef st = ljc_storage_type(kc->ir, kc->k->exprs[tl.load[i]].dtype);
      tl.buf[i] = ljc_entry_array(kc->ir, st, (int64_t)tl.vw * tl.vw);
    }
    g.tiles = &tl;
  } else if (!g.ahead) {
    g.npf = prefetch_loads(kc->p, kc->k, s, false, g.pf);
    if (sums_in_loop(kc->p, kc->k, kc->nest_last, kc->ahead, s)) {
      nest_gen_init(&with, kc, nest + 1, -1, begin, end);
      g.with = &with;
    }
  }
  emit_kept(&g, 0);
  kc->ir->loop_width = kc->ir->loop_interleave = 0;
}

static void emit_matmul(ljc_kctx *kc, LLVMValueRef begin, LLVMValueRef end, LLVMValueRef first);

static void emit_window(ljc_kctx *kc, LLVMValueRef begin, LLVMValueRef end);
static void emit_pool_rows(ljc_kctx *kc, int s, LLVMValueRef lo, LLVMValueRef hi);

/* Whether a nest of k reads a LOCAL slot that an earlier nest wrote (a softmax: the max, the
 * exps and their sum, each read again by the nests after the one that made it). */
static bool nests_reread(const ljg_program *p, const ljg_kernel *k) {
  bool *used = ljb_xcalloc((size_t)k->nexprs, sizeof *used), found = false;
  for (int j = 1; j < k->nnests && !found; j++) {
    memset(used, 0, (size_t)k->nexprs * sizeof *used);
    ljg_nest_exprs(k, &k->nests[j], used);
    for (int e = 0; e < k->nexprs && !found; e++) {
      const ljg_kexpr *x = &k->exprs[e];
      if (!used[e] || x->kind != LJG_X_LOAD || p->slots[x->slot].kind != LJG_SLOT_LOCAL) continue;
      for (int i = 0; i < j && !found; i++) found = k->nests[i].out_slot == x->slot;
    }
  }
  free(used);
  return found;
}

/* The rows a matmul kernel's nests run on at a time within its block (0: the whole block)
 * when they read again what an earlier one wrote (nests_reread). The block is sized for the
 * GEMM (up to 64 KiB of C, fuse_rows.c), and every such pass would read it from L2;
 * LJG_ROW_BLOCK_ELEMS of the widest nest keep a part's in L1, as a row-fused loops kernel's
 * blocks are. A softmax over the rows of a [32×256×64]·[32×64×256] product, its C in blocks
 * of 64 rows, one thread: 1.75 -> 1.61-1.66 ms (fastest of 500). Nests that each stream
 * their own operands (bias, relu and its mask; SGD and a bias's gradient) gain nothing and
 * ran 2-3% slower in parts of a few rows. A window kernel's planes keep the whole block. */
static int64_t nest_part_rows(const ljg_program *p, const ljg_kernel *k) {
  if (k->kind != LJG_K_MATMUL || k->nnests < 2 || ljg_kernel_has_window(k) || k->mm_task_rows != 1 ||
      k->mm_col_tasks || !nests_reread(p, k))
    return 0;
  int64_t widest = 1;
  for (int s = 0; s < k->nnests; s++) {
    int64_t row = ljg_numel(k->nests[s].ndim, k->nests[s].shape) / (k->mm_b * k->mm_m);
    if (row > widest) widest = row;
  }
  int64_t part = LJG_ROW_BLOCK_ELEMS / widest;
  if (part < 1) part = 1;
  return part < k->row_block ? part : 0;
}

/* The first nnests nests of a row-fused kernel of column blocks (ljg_kernel.col_block) over rows
 * [lo, hi) of its block: in order on each block of columns, each nest on those of its last
 * kept dim. */
static void emit_column_blocks(ljc_kctx *kc, const int *nest_check, int nnests, LLVMValueRef lo, LLVMValueRef hi) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  const ljg_nest *n = k->nests;
  int64_t cols = n->shape[n->ndim - __builtin_popcount(n->rmask) - 1], cb = k->col_block;
  ljc_loop C;
  LJ_ASSERT(cols % cb == 0);
  ljc_loop_begin(ir, &C, ljc_i64(ir, 0), ljc_i64(ir, cols / cb), false, 0, NULL);
  kc->col_lo = LLVMBuildNSWMul(b, C.iv, ljc_i64(ir, cb), "");
  kc->col_hi = LLVMBuildNSWAdd(b, kc->col_lo, ljc_i64(ir, cb), "");
  for (int s = 0; s < nnests; s++) emit_nest(kc, &k->nests[s], nest_check[s], lo, hi);
  kc->col_lo = kc->col_hi = NULL;
  ljc_loop_end(ir, &C, NULL, NULL);
}

/* The first nnests nests of a row-fused kernel in order over rows [lo, hi) of its block, a
 * part of nest_part_rows rows at a time where it says so. */
static void emit_block_nests(ljc_kctx *kc, const int *nest_check, int nnests, LLVMValueRef lo, LLVMValueRef hi) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  int64_t part = nest_part_rows(kc->p, k);
  if (k->col_block) {
    emit_column_blocks(kc, nest_check, nnests, lo, hi);
    return;
  }
  if (part == 0) {
    for (int s = kc->ahead > 0; s < nnests; s++) emit_nest(kc, &k->nests[s], nest_check[s], lo, hi);
    return;
  }
  LLVMValueRef pr = ljc_i64(ir, part);
  LLVMValueRef rows = LLVMBuildSub(b, hi, lo, "");
  LLVMValueRef nparts = LLVMBuildSDiv(b, LLVMBuildAdd(b, rows, ljc_i64(ir, part - 1), ""), pr, "");
  ljc_loop P;
  ljc_loop_begin(ir, &P, ljc_i64(ir, 0), nparts, true, 0, NULL);
  LLVMValueRef plo = LLVMBuildAdd(b, lo, LLVMBuildMul(b, P.iv, pr, ""), ""), pnext = LLVMBuildAdd(b, plo, pr, "");
  LLVMValueRef phi = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, pnext, hi, ""), pnext, hi, "");
  for (int s = 0; s < nnests; s++) emit_nest(kc, &k->nests[s], nest_check[s], plo, phi);
  ljc_loop_end(ir, &P, NULL, NULL);
}

/* A row-fused matmul kernel's trailing product (ljg_kernel.tm) on the block's rows [lo, hi),
 * after its nests: a call of its own routine, its A the LOCAL block a nest just wrote. */
static void emit_trailing_product(ljc_kctx *kc, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef first) {
  const ljg_kernel *k = kc->k;
  ljg_kernel t;
  ljg_trailing_product(k, &t);
  int32_t bias = kc->mm_bias, sum_slot = kc->b_sum_slot;
  kc->k = &t;
  kc->mm_bias = kc->b_sum_slot = -1;
  bool called = ljc_emit_gemm(kc, lo, hi, first);
  LJ_ASSERT(called); /* fuse_rows.c joins only what a routine takes */
  kc->k = k;
  kc->mm_bias = bias;
  kc->b_sum_slot = sum_slot;
}

/* The first of the first nnests nests of k that runs the first nest ahead (runs_ahead), or 0. */
static int ahead_nest(const ljg_program *p, const ljg_kernel *k, const int *nest_last, bool b_summed0, int nnests) {
  for (int s = 1; s < nnests; s++)
    if (runs_ahead(p, k, nest_last, b_summed0, s)) return s;
  return 0;
}

/* Starts the loop over the blocks of kc->block_rows rows of [begin, end): the block's rows
 * [*lo, *hi), where the LOCAL slots' rows count from. */
static void begin_row_blocks(ljc_kctx *kc, ljc_loop *B, LLVMValueRef begin, LLVMValueRef end, LLVMValueRef *lo,
                             LLVMValueRef *hi) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  LLVMValueRef rb = ljc_i64(ir, kc->block_rows);
  LLVMValueRef rows = LLVMBuildSub(b, end, begin, "");
  LLVMValueRef nblocks = LLVMBuildSDiv(b, LLVMBuildAdd(b, rows, ljc_i64(ir, kc->block_rows - 1), ""), rb, "");
  ljc_loop_begin(ir, B, ljc_i64(ir, 0), nblocks, true, 0, NULL);
  *lo = LLVMBuildAdd(b, begin, LLVMBuildMul(b, B->iv, rb, ""), "");
  LLVMValueRef next = LLVMBuildAdd(b, *lo, rb, "");
  *hi = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, next, end, ""), next, end, "");
  for (int s = 0; s < kc->p->nslots; s++) {
    const ljg_slot *sl = &kc->p->slots[s];
    if (kc->slot_origin[s]) kc->slot_origin[s] = LLVMBuildMul(b, *lo, ljc_i64(ir, sl->row_bytes / lj_dtype_size(sl->dtype)), "");
  }
}

/* A row-fused kernel: for each block of row_block rows of [begin, end), a matmul kernel's
 * rows of C and then the first nnests nests in order over the block's rows, the window after
 * the first win_at of them (first when its planes lead, after those that compute what it
 * reads), so what one writes is still in cache when the next reads it. LOCAL slots hold the
 * current block only: their rows count from the block's first. Where a nest runs the first
 * one ahead (runs_ahead), blocks may be smaller, the first block runs the first nest alone,
 * and each block ends copying the first nest's next block in (ahead_slot); where the last
 * nest runs behind too (runs_behind), only a task's last block runs it, and the LOCAL slots
 * it reads have two buffers, which the blocks write by turns: a block reads the previous
 * one's where the next writes. Copying them at the end of each block instead took a softmax
 * over [4096, 1024] from 0.68 to 1.5 ms on one thread (libc's memcpy of its 4 KiB of exps). */
static void emit_row_blocks(ljc_kctx *kc, const int *nest_check, int nnests, LLVMValueRef begin, LLVMValueRef end) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  kc->ahead = ahead_nest(kc->p, k, kc->nest_last, kc->b_summed[0] >= 0, nnests);
  const ljg_slot *first_slot = &kc->p->slots[k->nests[0].out_slot];
  if (kc->ahead) {
    kc->block_rows = ahead_block_rows(kc->p, k, kc->nest_last, kc->ahead);
    kc->ahead_end = end;
    kc->behind = nnests == k->nnests ? runs_behind(kc->p, k, kc->nest_last, kc->ahead) : 0;
  }
  LLVMValueRef *own = NULL, *other = NULL; /* the LOCAL slots the last nest reads: two buffers */
  if (kc->behind) {
    kc->behind_slot = ljb_xcalloc((size_t)kc->p->nslots, sizeof *kc->behind_slot);
    own = ljb_xcalloc((size_t)kc->p->nslots, sizeof *own);
    other = ljb_xcalloc((size_t)kc->p->nslots, sizeof *other);
    bool *used = ljb_xcalloc((size_t)k->nexprs, sizeof *used);
    ljg_nest_exprs(k, &k->nests[kc->behind], used);
    for (int e = 0; e < k->nexprs; e++) {
      int32_t s = k->exprs[e].slot;
      if (!used[e] || k->exprs[e].kind != LJG_X_LOAD || kc->p->slots[s].kind != LJG_SLOT_LOCAL || other[s]) continue;
      own[s] = kc->slot_ptr[s];
      other[s] = ljc_entry_array(ir, ir->i8, kc->p->slots[s].nbytes);
      LLVMBuildMemSet(b, other[s], LLVMConstInt(ir->i8, 0, 0), ljc_i64(ir, kc->p->slots[s].nbytes), 64);
    }
    free(used);
  }
  if (kc->ahead && first_slot->kind == LJG_SLOT_LOCAL && !(other && other[k->nests[0].out_slot]))
    kc->ahead_slot = ljc_entry_array(ir, ir->i8, first_slot->nbytes);
  ljc_loop B;
  LLVMValueRef lo, hi;
  begin_row_blocks(kc, &B, begin, end, &lo, &hi);
  LLVMValueRef first = LLVMBuildICmp(b, LLVMIntEQ, B.iv, ljc_i64(ir, 0), "");
  if (kc->behind) { /* odd blocks write the other buffer and read the previous block's in their own */
    kc->behind_first = first;
    LLVMValueRef odd = LLVMBuildTrunc(b, B.iv, ir->i1, "");
    for (int s = 0; s < kc->p->nslots; s++)
      if (other[s]) {
        kc->slot_ptr[s] = LLVMBuildSelect(b, odd, other[s], own[s], "");
        kc->behind_slot[s] = LLVMBuildSelect(b, odd, own[s], other[s], "");
      }
  }
  bool window = ljg_kernel_has_window(k) && !(k->kind == LJG_K_MATMUL && ljc_gemm_writes_window(k));
  if (k->kind == LJG_K_MATMUL) emit_matmul(kc, lo, hi, first);
  if (kc->ahead) { /* the first block's first nest; each block's nest `ahead` runs the next's */
    LLVMBasicBlockRef after = ljc_if_begin(ir, first, "first_block");
    emit_nest(kc, k->nests, nest_check[0], lo, hi);
    ljc_if_end(ir, after);
  }
  if (!window) {
    emit_block_nests(kc, nest_check, kc->behind ? kc->behind : nnests, lo, hi);
    if (kc->behind) { /* a task's last block runs the last nest itself; each keeps a copy */
      LLVMBasicBlockRef after = ljc_if_begin(ir, LLVMBuildICmp(b, LLVMIntEQ, hi, end, ""), "last_block");
      if (kc->block_rows > 1) { /* the previous block's rows past those of this shorter one */
        LLVMValueRef from = LLVMBuildSub(b, hi, ljc_i64(ir, kc->block_rows), "");
        LLVMValueRef *saved = ljb_xalloc(2 * (size_t)kc->p->nslots * sizeof *saved);
        behind_slots_begin(kc, saved);
        emit_nest(kc, &k->nests[kc->behind], nest_check[kc->behind], ljc_intrinsic2(ir, "smax", from, begin), lo);
        behind_slots_end(kc, saved);
        free(saved);
      }
      emit_nest(kc, &k->nests[kc->behind], nest_check[kc->behind], lo, hi);
      ljc_if_end(ir, after);
    }
    if (kc->ahead_slot) {
      LLVMValueRef bytes = ljc_i64(ir, first_slot->nbytes);
      LLVMBuildMemCpy(b, kc->slot_ptr[k->nests[0].out_slot], 64, kc->ahead_slot, 64, bytes);
    }
  } else {
    bool cols = ljc_depthwise_cols(kc->p, k), image = ljc_depthwise_image(kc->p, k);
    for (int s = 0; s < k->nnests; s++) {
      if (k->win_at == s && pools_rows(kc->p, k, kc->nest_last, s)) {
        emit_pool_rows(kc, s, lo, hi);
        continue;
      }
      if (k->win_at == s && image) ljc_emit_depthwise_image(kc, lo, hi);
      else if (k->win_at == s && !cols) emit_window(kc, lo, hi);
      if (cols && ljc_depthwise_nest(kc->p, k, s)) ljc_emit_depthwise_nest(kc, s, lo, hi);
      else if (!(image && s == k->win_at - 1) && !(cols && ljc_depthwise_epilogue(kc->p, k, s) >= 0))
        emit_nest(kc, &k->nests[s], nest_check[s], lo, hi);
    }
    if (k->win_at == k->nnests && image) ljc_emit_depthwise_image(kc, lo, hi);
    else if (k->win_at == k->nnests && !cols) emit_window(kc, lo, hi);
  }
  if (k->tm) emit_trailing_product(kc, lo, hi, first);
  ljc_loop_end(ir, &B, NULL, NULL);
  for (int s = 0; own && s < kc->p->nslots; s++)
    if (own[s]) kc->slot_ptr[s] = own[s];
  free(own);
  free(other);
  free(kc->behind_slot);
  kc->behind_slot = NULL;
}

/* The most columns a nest that sums a task's rows block by block has: its accumulators, on
 * the stack, take at most 256 KiB. Wider than emit_columns' blocks, they still pay: a layer
 * norm's over [2048, 8192] on one thread 10.3 -> 9.35 ms. */
enum { BLOCK_SUM_COLUMNS_MAX = 32768 };

/* Whether nest s of a kernel with per-task nests sums the task's rows block by block
 * (emit_task_rows): it reduces its last dim, the task's rows, in column order (a layer norm's
 * weight and bias gradients: [tasks, columns, rows]; BLOCK_SUM_COLUMNS_MAX columns at most),
 * and reads what the row nests write at the row it adds (row stride S along its last dim,
 * task_rows·S along its first, within the row along the columns). No nest reads what it writes, and it reads
 * nothing another per-task nest writes, so it may run before them. */
static bool sums_by_block(const ljg_kernel *k, const int *nest_last, bool b_summed, int s) {
  const ljg_nest *n = &k->nests[s];
  bool plain = n->rop == LJG_OP_SUM || n->rop == LJG_OP_MEAN || n->rop == LJG_OP_PROD || n->rop == LJG_OP_AMAX ||
               n->rop == LJG_OP_AMIN;
  if (s < k->per_task_at || !plain || n->ndim != 3 || n->rmask != 4 || n->scatter_index >= 0 ||
      n->shape[0] != k->ntasks || n->shape[1] > BLOCK_SUM_COLUMNS_MAX || n->shape[2] != k->task_rows ||
      nest_last[s] != s || b_summed || !ljg_column_order(k, n, 2))
    return false;
  bool *used = ljb_xcalloc((size_t)k->nexprs, sizeof *used), ok = true;
  ljg_nest_exprs(k, n, used);
  for (int e = 0; ok && e < k->nexprs; e++) {
    const ljg_kexpr *x = &k->exprs[e];
    if (ljg_expr_reads(x, n->out_slot)) ok = false;
    if (!used[e] || x->kind != LJG_X_LOAD) continue;
    for (int w = 0; ok && w < k->nnests; w++) {
      if (k->nests[w].out_slot != x->slot || w == s) continue;
      const ljg_view *v = &k->views[x->view];
      const ljg_view1 *t = &v->v[0];
      ok = w < k->per_task_at && v->n == 1 && t->stride[2] > 0 && t->stride[0] == k->task_rows * t->stride[2] &&
           t->stride[1] >= 0 && (t->shape[1] - 1) * t->stride[1] < t->stride[2];
    }
  }
  free(used);
  return ok;
}

/* A nest that sums_by_block: its accumulators, one per column, start at the task's first
 * block, each block adds its rows to them after the row nests ran on it (still in L1), and
 * the last stores them: each column summed in the order emit_columns sums it. */
static void block_sum_begin(ljc_kctx *kc, nest_gen *g, const ljg_nest *nest, LLVMValueRef task, LLVMValueRef *arr) {
  ljc_ir *ir = kc->ir;
  *g = (nest_gen){.kc = kc, .nest = nest, .nkept = 2, .columns = true, .last = (int)(nest - kc->k->nests)};
  g->pt.ndim = 3;
  g->pt.idx[0] = task;
  g->red = reduction_of(ir, nest->rop, kc->k->exprs[nest->value].dtype, nest->rcount);
  LLVMTypeRef at[2];
  columns_types(ir, &g->red, at);
  for (int a = 0; a < reduction_nacc(&g->red); a++) arr[a] = ljc_entry_array(ir, at[a], nest->shape[1]);
  columns_start(g, arr, ljc_i64(ir, 0), ljc_i64(ir, nest->shape[1]), ljc_i64(ir, 0));
}
static void block_sum_add(nest_gen *g, const LLVMValueRef *arr, LLVMValueRef lo, LLVMValueRef hi) {
  ljc_ir *ir = g->kc->ir;
  ljc_dbg_at(ir, g->kc->k->exprs[g->nest->value].node);
  ljc_loop R;
  ljc_loop_begin(ir, &R, lo, hi, false, 0, NULL);
  g->pt.idx[2] = R.iv;
  columns_add(g, 1, arr, ljc_i64(ir, 0), ljc_i64(ir, g->nest->shape[1]), ljc_i64(ir, 0), 1);
  ljc_loop_end(ir, &R, NULL, NULL);
}
static void block_sum_end(nest_gen *g, const LLVMValueRef *arr) {
  ljc_ir *ir = g->kc->ir;
  columns_store(g, 1, arr, ljc_i64(ir, 0), ljc_i64(ir, g->nest->shape[1]), ljc_i64(ir, 0));
}

/* A kernel whose tasks are task_rows rows each (fuse_rows.c's join_task_sums): for each task
 * of [begin, end), its rows through the nests before per_task_at block by block, the nests
 * that sums_by_block adding each block's rows after them, then the other nests from
 * per_task_at on the task. */
static void emit_task_rows(ljc_kctx *kc, const int *nest_check, LLVMValueRef begin, LLVMValueRef end) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  int n = k->nnests - k->per_task_at;
  nest_gen *sums = ljb_xcalloc((size_t)n, sizeof *sums);
  LLVMValueRef(*arr)[2] = ljb_xcalloc((size_t)n, sizeof *arr);
  bool *by_block = ljb_xcalloc((size_t)n, sizeof *by_block);
  for (int i = 0; i < n; i++) {
    int s = k->per_task_at + i;
    by_block[i] = sums_by_block(k, kc->nest_last, kc->b_summed[s] >= 0, s);
  }
  ljc_loop T, B;
  ljc_loop_begin(ir, &T, begin, end, true, 0, NULL);
  LLVMValueRef first = LLVMBuildNSWMul(b, T.iv, ljc_i64(ir, k->task_rows), ""), lo, hi;
  for (int i = 0; i < n; i++)
    if (by_block[i]) block_sum_begin(kc, &sums[i], &k->nests[k->per_task_at + i], T.iv, arr[i]);
  begin_row_blocks(kc, &B, first, LLVMBuildNSWAdd(b, first, ljc_i64(ir, k->task_rows), ""), &lo, &hi);
  emit_block_nests(kc, nest_check, k->per_task_at, lo, hi);
  for (int i = 0; i < n; i++)
    if (by_block[i]) block_sum_add(&sums[i], arr[i], LLVMBuildNSWSub(b, lo, first, ""), LLVMBuildNSWSub(b, hi, first, ""));
  ljc_loop_end(ir, &B, NULL, NULL);
  for (int i = 0; i < n; i++)
    if (by_block[i]) block_sum_end(&sums[i], arr[i]);
  LLVMValueRef next = LLVMBuildNSWAdd(b, T.iv, ljc_i64(ir, 1), "");
  for (int s = k->per_task_at; s < k->nnests; s++)
    if (!by_block[s - k->per_task_at]) emit_nest(kc, &k->nests[s], nest_check[s], T.iv, next);
  ljc_loop_end(ir, &T, NULL, NULL);
  free(by_block);
  free(arr);
  free(sums);
}

/* A matmul kernel whose tasks are blocks of C's columns and which has nests (fuse.c's
 * nests_by_columns): the routine computes the task range's columns of every row (one block
 * of rows, all of them), then the column nests run on those columns of every row, and the
 * first task runs the other nests whole. */
static void emit_column_block(ljc_kctx *kc, const int *nest_check, LLVMValueRef begin, LLVMValueRef end) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  LLVMValueRef width = ljc_i64(ir, k->mm_col_tasks), rows = ljc_i64(ir, k->mm_b * k->mm_m), zero = ljc_i64(ir, 0);
  emit_matmul(kc, begin, end, ljc_const_i(ir->i1, 1));
  LLVMValueRef lo = LLVMBuildNSWMul(b, begin, width, "");
  LLVMValueRef hi = ljc_intrinsic2(ir, "smin", LLVMBuildNSWMul(b, end, width, ""), ljc_i64(ir, k->mm_n));
  for (int s = 0; s < k->nnests; s++) {
    if (ljg_column_nest(k, s)) {
      kc->col_lo = lo, kc->col_hi = hi;
      emit_nest(kc, &k->nests[s], nest_check[s], zero, rows);
      kc->col_lo = kc->col_hi = NULL;
      continue;
    }
    LLVMBasicBlockRef after = ljc_if_begin(ir, LLVMBuildICmp(b, LLVMIntEQ, begin, zero, ""), "first_task");
    emit_nest(kc, &k->nests[s], nest_check[s], zero, rows);
    ljc_if_end(ir, after);
  }
}

/* ---- matmul ------------------------------------------------------------------------------- */

static LLVMValueRef mm_load(ljc_kctx *kc, int e, LLVMValueRef i0, LLVMValueRef i1, LLVMValueRef i2) {
  ljc_ir *ir = kc->ir;
  const ljg_kexpr *x = &kc->k->exprs[e];
  ljc_point p = {3, {i0, i1, i2}};
  LLVMValueRef off = ljc_view_offset(ir, &kc->k->views[x->view], &p);
  LLVMTypeRef st = ljc_storage_type(ir, x->dtype);
  LLVMValueRef ptr = LLVMBuildInBoundsGEP2(ir->b, st, kc->slot_ptr[x->slot], &off, 1, "");
  return ljc_from_storage(ir, LLVMBuildLoad2(ir->b, st, ptr, ""), x->dtype);
}

/* Gives bi as the matrix, or for a batch sum opens the loop over the run of the batch from
 * matrix bi that the row sums (*bm gets the matrix). */
static bool batch_begin(ljc_kctx *kc, ljc_loop *L, LLVMValueRef bi, LLVMValueRef *bm, int nacc, LLVMValueRef *acc) {
  const ljg_kernel *k = kc->k;
  if (!k->mm_sum) {
    *bm = bi;
    return false;
  }
  LLVMValueRef end = LLVMBuildNSWAdd(kc->ir->b, bi, ljc_i64(kc->ir, k->mm_b / k->mm_sum), "");
  ljc_loop_begin(kc->ir, L, bi, end, false, nacc, acc);
  *bm = L->iv;
  return true;
}

/* C[row, :] += a[k] * B[k, :] for each k (and each matrix when summed): for B contiguous
 * along n. */
static void matmul_axpy(ljc_kctx *kc, LLVMValueRef bi, LLVMValueRef mi, LLVMValueRef row, LLVMTypeRef t) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  bool isfloat = ljg_dtype_is_float(k->mm_dtype);
  ljc_loop z;
  ljc_loop_begin(ir, &z, ljc_i64(ir, 0), ljc_i64(ir, k->mm_n), false, 0, NULL);
  LLVMBuildStore(b, isfloat ? ljc_const_f(t, 0) : ljc_const_i(t, 0), LLVMBuildInBoundsGEP2(b, t, row, &z.iv, 1, ""));
  ljc_loop_end(ir, &z, NULL, NULL);
  if (k->mm_k == 0 || k->mm_b == 0) return;
  ljc_loop bl, kk, n;
  LLVMValueRef bm;
  bool summed = batch_begin(kc, &bl, bi, &bm, 0, NULL);
  ljc_loop_begin(ir, &kk, ljc_i64(ir, 0), ljc_i64(ir, k->mm_k), false, 0, NULL);
  LLVMValueRef a = mm_load(kc, k->mm_a, bm, mi, kk.iv);
  ljc_loop_begin(ir, &n, ljc_i64(ir, 0), ljc_i64(ir, k->mm_n), false, 0, NULL);
  LLVMValueRef bv = mm_load(kc, k->mm_bm, bm, kk.iv, n.iv);
  LLVMValueRef cp = LLVMBuildInBoundsGEP2(b, t, row, &n.iv, 1, "");
  LLVMValueRef c = LLVMBuildLoad2(b, t, cp, "");
  c = isfloat ? ljc_fmuladd(ir, a, bv, c) : LLVMBuildAdd(b, c, LLVMBuildMul(b, a, bv, ""), "");
  LLVMBuildStore(b, c, cp);
  ljc_loop_end(ir, &n, NULL, NULL);
  ljc_loop_end(ir, &kk, NULL, NULL);
  if (summed) ljc_loop_end(ir, &bl, NULL, NULL);
}

/* C[row, n] = A[row, :] . B[:, n] for each n (summed over the matrices when summed): for B
 * contiguous along k. */
static void matmul_dot(ljc_kctx *kc, LLVMValueRef bi, LLVMValueRef mi, LLVMValueRef row, LLVMTypeRef t) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  bool isfloat = ljg_dtype_is_float(k->mm_dtype);
  LLVMValueRef zero = isfloat ? ljc_const_f(t, 0) : ljc_const_i(t, 0);
  ljc_loop n;
  ljc_loop_begin(ir, &n, ljc_i64(ir, 0), ljc_i64(ir, k->mm_n), false, 0, NULL);
  LLVMValueRef acc = zero;
  if (k->mm_k > 0 && k->mm_b > 0) {
    ljc_loop bl, kk;
    LLVMValueRef bm;
    bool summed = batch_begin(kc, &bl, bi, &bm, 1, &zero);
    ljc_loop_begin(ir, &kk, ljc_i64(ir, 0), ljc_i64(ir, k->mm_k), false, 1, summed ? &bl.acc[0] : &zero);
    LLVMValueRef a = mm_load(kc, k->mm_a, bm, mi, kk.iv), bv = mm_load(kc, k->mm_bm, bm, kk.iv, n.iv);
    LLVMValueRef next = isfloat ? reassoc(ljc_fmuladd(ir, a, bv, kk.acc[0]))
                                : LLVMBuildAdd(b, kk.acc[0], LLVMBuildMul(b, a, bv, ""), "");
    ljc_loop_end(ir, &kk, &next, &acc);
    if (summed) ljc_loop_end(ir, &bl, &acc, &acc);
  }
  LLVMBuildStore(b, acc, LLVMBuildInBoundsGEP2(b, t, row, &n.iv, 1, ""));
  ljc_loop_end(ir, &n, NULL, NULL);
}

/* The matmul's rows for the tasks [begin, end); `first` (an i1): the first such call of a run
 * of the kernel (ljc_emit_gemm). */
static void emit_matmul(ljc_kctx *kc, LLVMValueRef begin, LLVMValueRef end, LLVMValueRef first) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  if (ljc_gemm_writes_window(k)) {
    ljc_emit_gemm(kc, begin, end, first);
    return;
  }
  if (k->mm_task_rows > 1) { /* tasks of several rows of C */
    begin = LLVMBuildNSWMul(b, begin, ljc_i64(ir, k->mm_task_rows), "");
    end = LLVMBuildNSWMul(b, end, ljc_i64(ir, k->mm_task_rows), "");
  }
  if (k->mm_n == 0 || ljc_emit_gemm(kc, begin, end, first)) return;
  LJ_ASSERT(!k->mm_col_tasks && !k->mm_a_period); /* given only to the matmuls a routine takes (fuse.c) */
  LJ_ASSERT(k->mm_dtype != LJ_BF16 && k->mm_dtype != LJ_F16); /* f32 products by now (pass_matmul.c) */
  LLVMTypeRef t = ljc_compute_type(ir, k->mm_dtype);
  const ljg_view1 *bview = ljg_view_top(&k->views[k->exprs[k->mm_bm].view]);
  bool dot = bview->stride[2] != 1 && bview->stride[1] == 1;
  ljc_loop rows;
  ljc_loop_begin(ir, &rows, begin, end, true, 0, NULL);
  /* the matrix, or for a batch sum the first of its run (row b·M + m of C sums run b) */
  LLVMValueRef bi = LLVMBuildUDiv(b, rows.iv, ljc_i64(ir, k->mm_m), "");
  if (k->mm_sum) bi = LLVMBuildNSWMul(b, bi, ljc_i64(ir, k->mm_b / k->mm_sum), "");
  LLVMValueRef mi = LLVMBuildURem(b, rows.iv, ljc_i64(ir, k->mm_m), "");
  LLVMValueRef rowoff = LLVMBuildNSWMul(b, rows.iv, ljc_i64(ir, k->mm_n), "");
  if (kc->slot_origin[k->mm_out_slot]) rowoff = LLVMBuildNSWSub(b, rowoff, kc->slot_origin[k->mm_out_slot], "");
  LLVMValueRef row = LLVMBuildInBoundsGEP2(b, t, kc->slot_ptr[k->mm_out_slot], &rowoff, 1, "");
  if (dot)
    matmul_dot(kc, bi, mi, row, t);
  else
    matmul_axpy(kc, bi, mi, row, t);
  ljc_loop_end(ir, &rows, NULL, NULL);
}

/* ---- windows (im2col, col2im) -------------------------------------------------------------- */

/* ceil(a / b) for b > 0 and any a, clamped to [0, hi] */
static LLVMValueRef ceil_div_clamp(ljc_ir *ir, LLVMValueRef a, int64_t b, int64_t hi) {
  LLVMBuilderRef bl = ir->b;
  LLVMValueRef q = LLVMBuildSDiv(bl, a, ljc_i64(ir, b), ""), r = LLVMBuildSRem(bl, a, ljc_i64(ir, b), "");
  q = LLVMBuildAdd(bl, q, LLVMBuildZExt(bl, LLVMBuildICmp(bl, LLVMIntSGT, r, ljc_i64(ir, 0), ""), ir->i64, ""), "");
  q = ljc_intrinsic2(ir, "smax", q, ljc_i64(ir, 0));
  return ljc_intrinsic2(ir, "smin", q, ljc_i64(ir, hi));
}

/* Runs body(ctx, iv) for iv in [lo, hi) (runtime bounds). */
static void for_range(ljc_ir *ir, LLVMValueRef lo, LLVMValueRef hi, void (*body)(void *, LLVMValueRef), void *ctx) {
  ljc_loop L;
  ljc_loop_begin(ir, &L, lo, hi, true, 0, NULL);
  body(ctx, L.iv);
  ljc_loop_end(ir, &L, NULL, NULL);
}

typedef struct window_gen {
  ljc_kctx *kc;
  LLVMValueRef n, c, kh, kw, oh, ih, row; /* row: im2col's output row; col2im's output plane */
  LLVMTypeRef st;
  LLVMValueRef fill;                      /* storage-typed */
} window_gen;

static LLVMValueRef window_src(window_gen *w, LLVMValueRef i1, LLVMValueRef i2) {
  const ljg_kernel *k = w->kc->k;
  const ljg_kexpr *src = &k->exprs[k->win_src];
  ljc_point p = {src->view >= 0 ? ljg_view_top(&k->views[src->view])->ndim : 0, {0}};
  if (k->win_op == LJG_OP_IM2COL) {
    p.idx[0] = w->n, p.idx[1] = w->c, p.idx[2] = i1, p.idx[3] = i2;
  } else {
    p.idx[0] = w->n, p.idx[1] = i1, p.idx[2] = i2;
  }
  LLVMValueRef off = ljc_slot_offset(w->kc, src->slot, &k->views[src->view], &p);
  return LLVMBuildInBoundsGEP2(w->kc->ir->b, w->st, w->kc->slot_ptr[src->slot], &off, 1, "");
}

static void fill_one(void *ctx, LLVMValueRef ow) {
  window_gen *w = ctx;
  LLVMBuildStore(w->kc->ir->b, w->fill, LLVMBuildInBoundsGEP2(w->kc->ir->b, w->st, w->row, &ow, 1, ""));
}

/* the input column of output column ow */
static LLVMValueRef window_iw(window_gen *w, LLVMValueRef ow) {
  ljc_ir *ir = w->kc->ir;
  const int64_t *a = w->kc->k->win;
  LLVMValueRef iw = LLVMBuildNSWMul(ir->b, ow, ljc_i64(ir, a[3]), "");
  iw = LLVMBuildNSWAdd(ir->b, iw, LLVMBuildNSWMul(ir->b, w->kw, ljc_i64(ir, a[7]), ""), "");
  return LLVMBuildNSWSub(ir->b, iw, ljc_i64(ir, a[5]), "");
}

static void copy_one(void *ctx, LLVMValueRef ow) {
  window_gen *w = ctx;
  LLVMBuilderRef b = w->kc->ir->b;
  LLVMValueRef v = LLVMBuildLoad2(b, w->st, window_src(w, w->ih, window_iw(w, ow)), "");
  LLVMBuildStore(b, v, LLVMBuildInBoundsGEP2(b, w->st, w->row, &ow, 1, ""));
}

/* Rows with a column stride of 2 (pooling windows) go a vector at a time through two vector
 * loads that cover 2·vw columns from column iw0 on, every other one used. They start one
 * column early when iw0 > 0 (*early; the odd lanes are used), so that they never reach past
 * the last column used; from column 0 they use the even lanes, which needs rows of at least
 * 2·vw columns: vectors narrower than the target's (stride2_width) serve shorter rows. The
 * first column loaded. */
static LLVMValueRef stride2_start(ljc_ir *ir, LLVMValueRef iw0, LLVMValueRef *early) {
  *early = LLVMBuildICmp(ir->b, LLVMIntSGT, iw0, ljc_i64(ir, 0), "");
  return LLVMBuildNSWSub(ir->b, iw0, LLVMBuildZExt(ir->b, *early, ir->i64, ""), "");
}

/* The vector width for window kernel k's rows of column stride 2: the widest power of two up
 * to vw (the target's) whose two vectors fit in a row; 0 when none of at least 2 does. */
static int stride2_width(const ljg_kernel *k, int vw) {
  int v = vw < 64 ? vw : 64;
  while (v >= 2 && k->win_img[3] < 2 * v) v /= 2;
  return v >= 2 ? v : 0;
}

/* lanes[i] = 2i + odd for i < vw (the used lanes of the two loads), and spread[h][j] the lane
 * of a vector v (or, past vw, of a second operand) that goes to lane j of load h: v's element
 * for the used lanes, else lane vw. */
static void stride2_lanes(ljc_ir *ir, int vw, int odd, LLVMValueRef *lanes, LLVMValueRef spread[2][64]) {
  for (int i = 0; i < vw; i++) lanes[i] = ljc_const_i(ir->i32, 2 * i + odd);
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < vw; j++) {
      int col = h * vw + j;
      spread[h][j] = ljc_const_i(ir->i32, col % 2 == odd ? (col - odd) / 2 : vw);
    }
}

/* Vector v of a row copy with a column stride of 2: the vw source elements from column iw0
 * on, out of two loads (stride2_start). */
static LLVMValueRef stride2_vector(window_gen *w, LLVMTypeRef vt, int vw, unsigned esize, LLVMValueRef iw0) {
  ljc_ir *ir = w->kc->ir;
  LLVMBuilderRef b = ir->b;
  LLVMValueRef early, start = stride2_start(ir, iw0, &early);
  LLVMValueRef half[2];
  for (int h = 0; h < 2; h++) {
    half[h] = LLVMBuildLoad2(b, vt, window_src(w, w->ih, LLVMBuildNSWAdd(b, start, ljc_i64(ir, h * vw), "")), "");
    LLVMSetAlignment(half[h], esize);
  }
  LLVMValueRef picked[2];
  for (int odd = 0; odd < 2; odd++) {
    LLVMValueRef lanes[64], spread[2][64];
    stride2_lanes(ir, vw, odd, lanes, spread);
    picked[odd] = LLVMBuildShuffleVector(b, half[0], half[1], LLVMConstVector(lanes, (unsigned)vw), "");
  }
  return LLVMBuildSelect(b, early, picked[1], picked[0], "");
}

/* row[lo, hi) = the fill, or (copy) the source row a vector at a time, the last vector
 * overlapping the one before it (LLVM would mask the short rows' tails, which costs more
 * than the row on AMD CPUs); a source with a column stride of 2 (pooling) through
 * stride2_vector; a span shorter than a vector, or another strided source, element by
 * element. */
static void emit_span(window_gen *w, LLVMValueRef lo, LLVMValueRef hi, bool copy) {
  ljc_ir *ir = w->kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = w->kc->k;
  const ljg_view *sv = &k->views[k->exprs[k->win_src].view];
  unsigned esize = (unsigned)lj_dtype_size((lj_dtype)k->win_dtype);
  int vw = ir->vec_bytes / (int)esize;
  bool unit = sv->n == 1 && ljg_view_top(sv)->stride[3] == 1;
  int s2 = copy && unit && k->win[3] == 2 ? stride2_width(k, vw) : 0;
  bool stride2 = s2 > 0;
  if (stride2) vw = s2;
  if (vw < 2 || (copy && !stride2 && (k->win[3] != 1 || !unit))) {
    for_range(ir, lo, hi, copy ? copy_one : fill_one, w);
    return;
  }
  LLVMTypeRef vt = LLVMVectorType(w->st, (unsigned)vw);
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef vec = LLVMAppendBasicBlockInContext(ir->ctx, fn, "span.vectors");
  LLVMBasicBlockRef one = LLVMAppendBasicBlockInContext(ir->ctx, fn, "span.elements");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "span.done");
  LLVMValueRef len = LLVMBuildNSWSub(b, hi, lo, "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGE, len, ljc_i64(ir, vw), ""), vec, one);
  LLVMPositionBuilderAtEnd(b, vec);
  LLVMValueRef fillv = NULL;
  if (!copy) {
    LLVMValueRef one_lane = LLVMBuildInsertElement(b, LLVMGetUndef(vt), w->fill, ljc_const_i(ir->i32, 0), "");
    fillv = LLVMBuildShuffleVector(b, one_lane, LLVMGetUndef(vt), LLVMConstNull(LLVMVectorType(ir->i32, (unsigned)vw)), "");
  }
  ljc_loop q;
  ljc_loop_begin(ir, &q, ljc_i64(ir, 0), LLVMBuildUDiv(b, len, ljc_i64(ir, vw), ""), false, 0, NULL);
  for (int last = 0; last < 2; last++) {
    LLVMValueRef ow = last ? LLVMBuildNSWSub(b, hi, ljc_i64(ir, vw), "")
                           : LLVMBuildNSWAdd(b, lo, LLVMBuildNSWMul(b, q.iv, ljc_i64(ir, vw), ""), "");
    LLVMValueRef v = fillv;
    if (stride2) {
      v = stride2_vector(w, vt, vw, esize, window_iw(w, ow));
    } else if (copy) {
      v = LLVMBuildLoad2(b, vt, window_src(w, w->ih, window_iw(w, ow)), "");
      LLVMSetAlignment(v, esize);
    }
    LLVMSetAlignment(LLVMBuildStore(b, v, LLVMBuildInBoundsGEP2(b, w->st, w->row, &ow, 1, "")), esize);
    if (!last) ljc_loop_end(ir, &q, NULL, NULL);
  }
  LLVMBuildBr(b, done);
  LLVMPositionBuilderAtEnd(b, one);
  for_range(ir, lo, hi, copy ? copy_one : fill_one, w);
  LLVMBuildBr(b, done);
  LLVMPositionBuilderAtEnd(b, done);
}

/* col2im: pointers to cols[n, (c*KH + kh)*KW + kw, oh*OW + ow] and to out[n, c, ih, iw]. */
static void add_ptrs(window_gen *w, LLVMValueRef ow, LLVMValueRef *src, LLVMValueRef *dst) {
  ljc_ir *ir = w->kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = w->kc->k;
  LLVMValueRef r = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, w->c, ljc_i64(ir, k->win[0]), ""), w->kh, "");
  r = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, r, ljc_i64(ir, k->win[1]), ""), w->kw, "");
  LLVMValueRef col = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, w->oh, ljc_i64(ir, k->win_ow), ""), ow, "");
  *src = window_src(w, r, col);
  LLVMValueRef at = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, w->ih, ljc_i64(ir, k->win_img[3]), ""), window_iw(w, ow), "");
  *dst = LLVMBuildInBoundsGEP2(b, w->st, w->row, &at, 1, "");
}

static void add_one(void *ctx, LLVMValueRef ow) {
  window_gen *w = ctx;
  ljc_ir *ir = w->kc->ir;
  LLVMBuilderRef b = ir->b;
  lj_dtype dt = (lj_dtype)w->kc->k->win_dtype;
  LLVMValueRef src, p;
  add_ptrs(w, ow, &src, &p);
  LLVMValueRef v = ljc_from_storage(ir, LLVMBuildLoad2(b, w->st, src, ""), dt);
  LLVMValueRef old = ljc_from_storage(ir, LLVMBuildLoad2(b, w->st, p, ""), dt);
  LLVMValueRef sum = ljg_dtype_is_float(dt) ? LLVMBuildFAdd(b, old, v, "") : LLVMBuildAdd(b, old, v, "");
  LLVMBuildStore(b, ljc_to_storage(ir, sum, dt), p);
}

/* Adds vector v of a col2im row with a column stride of 2 at p, column iw0 of the output
 * row: two loads (stride2_start) with v spread over their used lanes and -0.0 over the others
 * (x + -0.0 is x for every x), stored back. A task owns its plane, and the loads stay in
 * the row, so what is stored back unchanged is what the task last wrote there. */
static void stride2_add(ljc_ir *ir, LLVMTypeRef vt, int vw, unsigned esize, LLVMValueRef p, LLVMValueRef iw0,
                        LLVMValueRef v) {
  LLVMBuilderRef b = ir->b;
  LLVMValueRef early, start = stride2_start(ir, iw0, &early);
  LLVMValueRef back = LLVMBuildNSWSub(b, start, iw0, "");
  LLVMValueRef q = LLVMBuildInBoundsGEP2(b, LLVMGetElementType(vt), p, &back, 1, "");
  LLVMValueRef minus[64];
  for (int i = 0; i < vw; i++) minus[i] = ljc_const_f(LLVMGetElementType(vt), -0.0);
  LLVMValueRef negzero = LLVMConstVector(minus, (unsigned)vw);
  LLVMValueRef add[2][2];
  for (int odd = 0; odd < 2; odd++) {
    LLVMValueRef lanes[64], spread[2][64];
    stride2_lanes(ir, vw, odd, lanes, spread);
    for (int h = 0; h < 2; h++)
      add[odd][h] = LLVMBuildShuffleVector(b, v, negzero, LLVMConstVector(spread[h], (unsigned)vw), "");
  }
  for (int h = 0; h < 2; h++) {
    LLVMValueRef off = ljc_i64(ir, h * vw);
    LLVMValueRef at = LLVMBuildInBoundsGEP2(b, LLVMGetElementType(vt), q, &off, 1, "");
    LLVMValueRef old = LLVMBuildLoad2(b, vt, at, "");
    LLVMSetAlignment(old, esize);
    LLVMValueRef sum = LLVMBuildFAdd(b, old, LLVMBuildSelect(b, early, add[1][h], add[0][h], ""), "");
    LLVMSetAlignment(LLVMBuildStore(b, sum, at), esize);
  }
}

/* Adds the vw columns of col2im's row from ow on: one vector (stride2: spread over every
 * other column, stride2_add). */
static void add_vector(window_gen *w, int vw, unsigned esize, bool stride2, LLVMValueRef ow) {
  ljc_ir *ir = w->kc->ir;
  LLVMBuilderRef b = ir->b;
  LLVMTypeRef vt = LLVMVectorType(w->st, (unsigned)vw);
  LLVMValueRef src, p;
  add_ptrs(w, ow, &src, &p);
  LLVMValueRef v = LLVMBuildLoad2(b, vt, src, "");
  LLVMSetAlignment(v, esize);
  if (stride2) {
    stride2_add(ir, vt, vw, esize, p, window_iw(w, ow), v);
    return;
  }
  LLVMValueRef old = LLVMBuildLoad2(b, vt, p, "");
  LLVMSetAlignment(old, esize);
  LLVMSetAlignment(LLVMBuildStore(b, LLVMBuildFAdd(b, old, v, ""), p), esize);
}

/* col2im's adds over [lo, hi): f32/f64 with a stride of 1 or 2 (stride2_add) a vector at a
 * time; with a stride of 1 the rest by narrower vectors, down to two lanes; what remains (and
 * other cases) element by element. */
static void emit_add_span(window_gen *w, LLVMValueRef lo, LLVMValueRef hi) {
  ljc_ir *ir = w->kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = w->kc->k;
  const ljg_view *sv = &k->views[k->exprs[k->win_src].view];
  lj_dtype dt = (lj_dtype)k->win_dtype;
  unsigned esize = (unsigned)lj_dtype_size(dt);
  int vw = ir->vec_bytes / (int)esize;
  int s2 = k->win[3] == 2 ? stride2_width(k, vw) : 0;
  bool stride2 = s2 > 0;
  if (stride2) vw = s2;
  if ((dt != LJ_F32 && dt != LJ_F64) || vw < 2 || (k->win[3] != 1 && !stride2) || sv->n != 1 ||
      ljg_view_top(sv)->stride[2] != 1) {
    for_range(ir, lo, hi, add_one, w);
    return;
  }
  LLVMValueRef nvec = LLVMBuildSDiv(b, LLVMBuildNSWSub(b, hi, lo, ""), ljc_i64(ir, vw), "");
  ljc_loop q;
  ljc_loop_begin(ir, &q, ljc_i64(ir, 0), nvec, true, 0, NULL);
  add_vector(w, vw, esize, stride2, LLVMBuildNSWAdd(b, lo, LLVMBuildNSWMul(b, q.iv, ljc_i64(ir, vw), ""), ""));
  ljc_loop_end(ir, &q, NULL, NULL);
  LLVMValueRef tail = LLVMBuildNSWAdd(b, lo, LLVMBuildNSWMul(b, nvec, ljc_i64(ir, vw), ""), "");
  if (!stride2) { /* the rest, rem < vw columns: a vector of each power of two in rem */
    LLVMValueRef rem = LLVMBuildNSWSub(b, hi, tail, "");
    for (int h = vw / 2; h >= 2; h /= 2) {
      LLVMValueRef bit = LLVMBuildAnd(b, rem, ljc_i64(ir, h), "");
      LLVMBasicBlockRef after = ljc_if_begin(ir, LLVMBuildICmp(b, LLVMIntNE, bit, ljc_i64(ir, 0), ""), "tail.vector");
      add_vector(w, h, esize, false, LLVMBuildNSWAdd(b, tail, LLVMBuildAnd(b, rem, ljc_i64(ir, -2 * h), ""), ""));
      ljc_if_end(ir, after);
    }
    tail = LLVMBuildNSWAdd(b, tail, LLVMBuildAnd(b, rem, ljc_i64(ir, -2), ""), "");
  }
  for_range(ir, tail, hi, add_one, w);
}

/* Whether col2im's windows tile its image in pairs of columns: two columns wide at a column
 * stride of 2, as tall as their row stride, no padding or dilation, every row and column
 * covered (a 2×2 max-pool's gradient over an even image). Each element of the image is then
 * one window's value, stored rather than added to zeros. */
static bool tiles_in_pairs(const ljg_kernel *k) {
  const int64_t *a = k->win;
  return k->win_op == LJG_OP_COL2IM && a[1] == 2 && a[3] == 2 && a[0] == a[2] && a[4] == 0 && a[5] == 0 &&
         a[6] == 1 && a[7] == 1 && k->win_oh * a[0] == k->win_img[2] && k->win_ow * 2 == k->win_img[3];
}

/* Stores x0 and x1 (v-lane vectors, or scalars for v = 1) interleaved at dst + 2·ow:
 * shuffled into two vectors, or one pair. */
static void store_interleaved(ljc_ir *ir, LLVMTypeRef st, unsigned esize, int v, LLVMValueRef x0, LLVMValueRef x1,
                              LLVMValueRef dst, LLVMValueRef ow) {
  LLVMBuilderRef b = ir->b;
  LLVMValueRef at = LLVMBuildNSWMul(b, ow, ljc_i64(ir, 2), "");
  for (int h = 0; h < 2; h++) {
    LLVMValueRef val = h ? x1 : x0;
    if (v > 1) {
      LLVMValueRef lanes[128];
      for (int i = 0; i < v; i++) lanes[i] = ljc_const_i(ir->i32, (i & 1) * v + h * v / 2 + i / 2);
      val = LLVMBuildShuffleVector(b, x0, x1, LLVMConstVector(lanes, (unsigned)v), "");
    }
    LLVMValueRef off = LLVMBuildNSWAdd(b, at, ljc_i64(ir, v > 1 ? h * v : h), "");
    LLVMSetAlignment(LLVMBuildStore(b, val, LLVMBuildInBoundsGEP2(b, st, dst, &off, 1, "")), esize);
  }
}

/* Stores the pairs of columns ow .. ow + v - 1 of window rows src0 (kw = 0) and src1 (kw = 1)
 * interleaved at dst + 2·ow (store_interleaved). */
static void store_pairs(ljc_ir *ir, LLVMTypeRef st, unsigned esize, int v, LLVMValueRef src0, LLVMValueRef src1,
                        LLVMValueRef dst, LLVMValueRef ow) {
  LLVMTypeRef vt = v > 1 ? LLVMVectorType(st, (unsigned)v) : st;
  LLVMValueRef x[2], srcs[2] = {src0, src1};
  for (int j = 0; j < 2; j++) {
    x[j] = LLVMBuildLoad2(ir->b, vt, LLVMBuildInBoundsGEP2(ir->b, st, srcs[j], &ow, 1, ""), "");
    LLVMSetAlignment(x[j], esize);
  }
  store_interleaved(ir, st, esize, v, x[0], x[1], dst, ow);
}

/* col2im of windows that tile in pairs (tiles_in_pairs): every image row ih = oh·KH + kh is
 * its windows' two rows (kw = 0, 1) interleaved, a vector of each at a time; a row whose
 * length is not a multiple of the vector ends with one more vector, overlapping the last
 * (the same values stored twice). */
static void emit_col2im_pairs(window_gen *w, LLVMValueRef plane) {
  ljc_ir *ir = w->kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = w->kc->k;
  const ljg_view *sv = &k->views[k->exprs[k->win_src].view];
  int64_t KH = k->win[0], OH = k->win_oh, OW = k->win_ow;
  unsigned esize = (unsigned)lj_dtype_size((lj_dtype)k->win_dtype);
  int v = sv->n == 1 && ljg_view_top(sv)->stride[2] == 1 ? ir->vec_bytes / (int)esize : 1;
  while (v > OW) v /= 2;
  if (v < 2) v = 1;
  ljc_loop kh, oh, q;
  ljc_loop_begin(ir, &kh, ljc_i64(ir, 0), ljc_i64(ir, KH), false, 0, NULL);
  ljc_loop_begin(ir, &oh, ljc_i64(ir, 0), ljc_i64(ir, OH), false, 0, NULL);
  LLVMValueRef r0 = LLVMBuildNSWMul(b, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, w->c, ljc_i64(ir, KH), ""), kh.iv, ""),
                                    ljc_i64(ir, 2), "");
  LLVMValueRef col = LLVMBuildNSWMul(b, oh.iv, ljc_i64(ir, OW), "");
  LLVMValueRef src0 = window_src(w, r0, col), src1 = window_src(w, LLVMBuildNSWAdd(b, r0, ljc_i64(ir, 1), ""), col);
  LLVMValueRef ih = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, oh.iv, ljc_i64(ir, KH), ""), kh.iv, "");
  LLVMValueRef rowoff = LLVMBuildNSWMul(b, ih, ljc_i64(ir, k->win_img[3]), "");
  LLVMValueRef dst = LLVMBuildInBoundsGEP2(b, w->st, plane, &rowoff, 1, "");
  ljc_loop_begin(ir, &q, ljc_i64(ir, 0), ljc_i64(ir, OW / v), false, 0, NULL);
  store_pairs(ir, w->st, esize, v, src0, src1, dst, LLVMBuildNSWMul(b, q.iv, ljc_i64(ir, v), ""));
  ljc_loop_end(ir, &q, NULL, NULL);
  if (OW % v) store_pairs(ir, w->st, esize, v, src0, src1, dst, ljc_i64(ir, OW - v));
  ljc_loop_end(ir, &oh, NULL, NULL);
  ljc_loop_end(ir, &kh, NULL, NULL);
}

/* The lanes l of a vector of v from column c on (an i64) for which 0 <= c + l < n. */
static LLVMValueRef columns_inside(ljc_ir *ir, LLVMValueRef c, int v, int64_t n) {
  LLVMBuilderRef b = ir->b;
  LLVMValueRef iota[64];
  for (int l = 0; l < v; l++) iota[l] = ljc_const_i(ir->i32, l);
  LLVMTypeRef it = LLVMVectorType(ir->i32, (unsigned)v);
  LLVMValueRef cols =
      LLVMBuildAdd(b, ljc_splat(ir, LLVMBuildTrunc(b, c, ir->i32, ""), it), LLVMConstVector(iota, (unsigned)v), "");
  return LLVMBuildICmp(b, LLVMIntULT, cols, ljc_splat(ir, ljc_const_i(ir->i32, n), it), "");
}

/* A row of n elements of ct, each `fill`, a constant of the module: what a window reads above
 * or below its image (a max-pool's -inf, zeros for col2im). */
static LLVMValueRef fill_row(ljc_ir *ir, LLVMTypeRef ct, double fill, int64_t n) {
  LLVMValueRef *v = ljb_xalloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = ljc_const_f(ct, fill);
  LLVMValueRef g = LLVMAddGlobal(ir->mod, LLVMArrayType2(ct, (uint64_t)n), "lj_fill_row");
  LLVMSetInitializer(g, LLVMConstArray2(ct, v, (uint64_t)n));
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
  LLVMSetAlignment(g, 64);
  free(v);
  return g;
}

/* The widest window rows whose col2im of stride 2 gathers each image row (col2im_rows), which
 * reads the windows above or below the window rows from a row of zeros that long, and the
 * most taps it takes (each a row of its code). */
enum { COL2IM_ZERO_ROW_MAX = 8192, COL2IM_TAPS_MAX = 49 };

/* Whether col2im's windows of stride 2 are gathered into each image row instead of added into
 * the image (emit_col2im_rows): f32 or f64, strides 2 and no dilation, an even image with at
 * least 2 columns of each parity, windows that do not tile it in pairs (tiles_in_pairs), the
 * window rows' positions contiguous. */
static bool col2im_rows(const ljg_kernel *k) {
  const int64_t *a = k->win, *img = k->win_img;
  lj_dtype dt = (lj_dtype)k->win_dtype;
  const ljg_view *sv = &k->views[k->exprs[k->win_src].view];
  return k->win_op == LJG_OP_COL2IM && (dt == LJ_F32 || dt == LJ_F64) && a[2] == 2 && a[3] == 2 && a[6] == 1 &&
         a[7] == 1 && img[2] % 2 == 0 && img[3] % 2 == 0 && img[3] >= 4 && k->win_ow <= COL2IM_ZERO_ROW_MAX &&
         a[0] * a[1] <= COL2IM_TAPS_MAX &&
         !tiles_in_pairs(k) && sv->n == 1 && ljg_view_top(sv)->stride[2] == 1;
}

/* Where tap t (kh or kw) of a window of stride 2 padded by pad lands: on image row or column
 * 2i + *q of window row or column i + *d, *q = (t - pad) mod 2, *d = -⌊(t - pad) / 2⌋. */
static void col2im_shift(int64_t t, int64_t pad, int64_t *q, int64_t *d) {
  *q = ((t - pad) % 2 + 2) % 2;
  *d = -((t - pad - *q) / 2);
}

/* Whether v window columns from j0 on, shifted by every tap's column shift, lie inside the
 * window rows. */
static bool col2im_plain(const ljg_kernel *k, int v, int64_t j0) {
  for (int64_t kw = 0; kw < k->win[1]; kw++) {
    int64_t q, d;
    col2im_shift(kw, k->win[5], &q, &d);
    if (j0 + d < 0 || j0 + d + v > k->win_ow) return false;
  }
  return true;
}

/* Image columns 2·j0 .. 2·(j0 + v) - 1 of the image row at dst whose taps' window rows are
 * taps[kh·KW + kw] (NULL: no tap of that row reaches it): for each column parity, +0 plus,
 * in col2im's order, each tap's v window values from column j0 + its shift on (a masked load,
 * 0 outside the window row, where `masked`; a row of zeros for the window rows outside the
 * windows: adding +0 to a sum that starts at +0 changes nothing), the two sums interleaved. */
static void col2im_vector(window_gen *w, const LLVMValueRef *taps, int v, LLVMValueRef j0, bool masked,
                          LLVMValueRef dst) {
  ljc_ir *ir = w->kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = w->kc->k;
  const int64_t *a = k->win;
  unsigned esize = (unsigned)lj_dtype_size((lj_dtype)k->win_dtype);
  LLVMTypeRef vt = LLVMVectorType(w->st, (unsigned)v);
  LLVMValueRef sum[2] = {LLVMConstNull(vt), LLVMConstNull(vt)};
  for (int64_t t = 0; t < a[0] * a[1]; t++) {
    if (!taps[t]) continue;
    int64_t px, dx;
    col2im_shift(t % a[1], a[5], &px, &dx);
    LLVMValueRef c = LLVMBuildNSWAdd(b, j0, ljc_i64(ir, dx), "");
    LLVMValueRef p = LLVMBuildGEP2(b, w->st, taps[t], &c, 1, ""), x; /* masked: may lie before its row */
    if (masked) {
      x = ljc_masked_load(ir, vt, p, (int)esize, columns_inside(ir, c, v, k->win_ow));
    } else {
      x = LLVMBuildLoad2(b, vt, p, "");
      LLVMSetAlignment(x, esize);
    }
    sum[px] = LLVMBuildFAdd(b, sum[px], x, "");
  }
  store_interleaved(ir, w->st, esize, v, sum[0], sum[1], dst, j0);
}

/* col2im_vector over the vectors [j0, j1) of an image row's window columns. */
static void col2im_vectors(window_gen *w, const LLVMValueRef *taps, int v, int64_t j0, int64_t j1, bool masked,
                           LLVMValueRef dst) {
  if (j0 >= j1) return;
  ljc_ir *ir = w->kc->ir;
  ljc_loop q;
  ljc_loop_begin(ir, &q, ljc_i64(ir, j0), ljc_i64(ir, j1), false, 0, NULL);
  col2im_vector(w, taps, v, LLVMBuildNSWMul(ir->b, q.iv, ljc_i64(ir, v), ""), masked, dst);
  ljc_loop_end(ir, &q, NULL, NULL);
}

/* col2im of stride 2 gathered a row at a time (col2im_rows): tap (kh, kw) of window (oh, ow)
 * lands on image element (2(oh - dy) + py, 2(ow - dx) + px) (col2im_shift), so image row
 * 2i + py sums, column by column, the window rows oh = i + dy of its taps of row parity py,
 * each read at a fixed shift: vectors of window positions summed in registers, the sums of the
 * two column parities interleaved and stored, every image element once. The same sums in the
 * same order as col2im's adds into a zeroed image, which spread each window vector over two
 * vectors of an image row to load, add and store back, for every tap (and added the ends of
 * rows of more positions than a vector element by element). */
static void emit_col2im_rows(window_gen *w, LLVMValueRef plane) {
  ljc_ir *ir = w->kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = w->kc->k;
  const int64_t *a = k->win;
  int64_t H2 = k->win_img[2] / 2, W2 = k->win_img[3] / 2, OH = k->win_oh, OW = k->win_ow, KK = a[0] * a[1];
  int v = ir->vec_bytes / (int)lj_dtype_size((lj_dtype)k->win_dtype);
  while (v > W2) v /= 2;
  LLVMValueRef zeros = fill_row(ir, w->st, 0, OW);
  /* the vectors [jlo, jhi) of a row read their window rows plainly */
  int64_t nvec = W2 / v, jlo = 0, jhi = nvec;
  while (jlo < nvec && !col2im_plain(k, v, jlo * v)) jlo++;
  while (jhi > jlo && !col2im_plain(k, v, (jhi - 1) * v)) jhi--;
  LLVMValueRef first = LLVMBuildNSWMul(b, w->c, ljc_i64(ir, KK), "");
  ljc_loop i;
  ljc_loop_begin(ir, &i, ljc_i64(ir, 0), ljc_i64(ir, H2), false, 0, NULL);
  for (int py = 0; py < 2; py++) {
    LLVMValueRef taps[COL2IM_TAPS_MAX] = {0};
    for (int64_t kh = 0; kh < a[0]; kh++) {
      int64_t qy, dy;
      col2im_shift(kh, a[4], &qy, &dy);
      if (qy != py) continue;
      LLVMValueRef oh = LLVMBuildNSWAdd(b, i.iv, ljc_i64(ir, dy), "");
      LLVMValueRef inside = LLVMBuildICmp(b, LLVMIntULT, oh, ljc_i64(ir, OH), "");
      LLVMValueRef at = LLVMBuildNSWMul(b, LLVMBuildSelect(b, inside, oh, ljc_i64(ir, 0), ""), ljc_i64(ir, OW), "");
      for (int64_t kw = 0; kw < a[1]; kw++) {
        LLVMValueRef r = LLVMBuildNSWAdd(b, first, ljc_i64(ir, kh * a[1] + kw), "");
        taps[kh * a[1] + kw] = LLVMBuildSelect(b, inside, window_src(w, r, at), zeros, "");
      }
    }
    LLVMValueRef row = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, i.iv, ljc_i64(ir, 2), ""), ljc_i64(ir, py), "");
    LLVMValueRef rowoff = LLVMBuildNSWMul(b, row, ljc_i64(ir, 2 * W2), "");
    LLVMValueRef dst = LLVMBuildInBoundsGEP2(b, w->st, plane, &rowoff, 1, "");
    col2im_vectors(w, taps, v, 0, jlo, true, dst);
    col2im_vectors(w, taps, v, jlo, jhi, false, dst);
    col2im_vectors(w, taps, v, jhi, nvec, true, dst);
    if (W2 % v) col2im_vector(w, taps, v, ljc_i64(ir, W2 - v), !col2im_plain(k, v, W2 - v), dst);
  }
  ljc_loop_end(ir, &i, NULL, NULL);
}

/* A window of at most this many positions has its (kh, kw) loops unrolled when it is emitted:
 * each position's valid columns are then constants, and its row copies short loops of a
 * fixed length (a pooling window's rows are a few vectors each). */
enum { UNROLLED_WINDOW = 9 };

/* The output rows (kh, kw, oh) of one window position (kh, kw) for every oh: im2col's rows are
 * padding where the input row is outside the image, else padding, a strided copy of the valid
 * columns, padding; col2im adds the valid columns back. */
static void window_rows(window_gen *w, LLVMValueRef out, LLVMValueRef khv, LLVMValueRef kwv) {
  ljc_kctx *kc = w->kc;
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  const int64_t *a = k->win;
  int64_t H = k->win_img[2], W = k->win_img[3], OH = k->win_oh, OW = k->win_ow;
  bool to_cols = k->win_op == LJG_OP_IM2COL;
  w->kh = khv, w->kw = kwv;
  ljc_loop oh;
  ljc_loop_begin(ir, &oh, ljc_i64(ir, 0), ljc_i64(ir, OH), false, 0, NULL);
  w->oh = oh.iv;
  w->ih = LLVMBuildNSWSub(b, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, oh.iv, ljc_i64(ir, a[2]), ""),
                                              LLVMBuildNSWMul(b, khv, ljc_i64(ir, a[6]), ""), ""),
                          ljc_i64(ir, a[4]), "");
  LLVMValueRef inside = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, w->ih, ljc_i64(ir, 0), ""),
                                     LLVMBuildICmp(b, LLVMIntSLT, w->ih, ljc_i64(ir, H), ""), "");
  /* valid output columns: 0 <= ow*sw + kw*dw - pw < W */
  LLVMValueRef shift = LLVMBuildNSWSub(b, ljc_i64(ir, a[5]), LLVMBuildNSWMul(b, kwv, ljc_i64(ir, a[7]), ""), "");
  LLVMValueRef lo = ceil_div_clamp(ir, shift, a[3], OW);
  LLVMValueRef hi = ceil_div_clamp(ir, LLVMBuildNSWAdd(b, shift, ljc_i64(ir, W), ""), a[3], OW);
  hi = ljc_intrinsic2(ir, "smax", hi, lo);
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(ir->ctx, fn, "row.inside");
  LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(ir->ctx, fn, "row.outside");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "row.done");
  if (to_cols) {
    LLVMValueRef r = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, khv, ljc_i64(ir, a[1]), ""), kwv, ""),
                                                        ljc_i64(ir, OH), ""), oh.iv, "");
    LLVMValueRef rowoff = LLVMBuildNSWMul(b, r, ljc_i64(ir, OW), "");
    w->row = LLVMBuildInBoundsGEP2(b, w->st, out, &rowoff, 1, "");
  }
  LLVMBuildCondBr(b, inside, yes, no);
  LLVMPositionBuilderAtEnd(b, yes);
  if (to_cols) {
    for_range(ir, ljc_i64(ir, 0), lo, fill_one, w);
    emit_span(w, lo, hi, true);
    for_range(ir, hi, ljc_i64(ir, OW), fill_one, w);
  } else {
    emit_add_span(w, lo, hi);
  }
  LLVMBuildBr(b, done);
  LLVMPositionBuilderAtEnd(b, no);
  if (to_cols) emit_span(w, ljc_i64(ir, 0), ljc_i64(ir, OW), false);
  LLVMBuildBr(b, done);
  LLVMPositionBuilderAtEnd(b, done);
  ljc_loop_end(ir, &oh, NULL, NULL);
}

/* One (n, c) plane per task: each window position's rows (window_rows); col2im first zeroes
 * the plane, or stores the windows instead when they tile it in pairs of columns, or (of
 * stride 2) gathers each image row from its windows. */
static void emit_window(ljc_kctx *kc, LLVMValueRef begin, LLVMValueRef end) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  const int64_t *a = k->win;
  int64_t C = k->win_img[1], H = k->win_img[2], W = k->win_img[3];
  bool to_cols = k->win_op == LJG_OP_IM2COL;
  window_gen w = {0};
  w.kc = kc;
  w.st = ljc_storage_type(ir, (lj_dtype)k->win_dtype);
  LLVMTypeRef ct = ljc_compute_type(ir, (lj_dtype)k->win_dtype);
  LLVMValueRef fill = ljg_dtype_is_float((lj_dtype)k->win_dtype) ? ljc_const_f(ct, to_cols ? k->win_fill : 0)
                                                                 : ljc_const_i(ct, 0);
  w.fill = ljc_to_storage(ir, fill, (lj_dtype)k->win_dtype);
  ljc_loop tasks;
  ljc_loop_begin(ir, &tasks, begin, end, true, 0, NULL);
  w.n = LLVMBuildUDiv(b, tasks.iv, ljc_i64(ir, C), "");
  w.c = LLVMBuildURem(b, tasks.iv, ljc_i64(ir, C), "");
  int64_t plane = to_cols ? ljg_window_cols_plane(k) : ljg_window_image_plane(k);
  LLVMValueRef base = LLVMBuildNSWMul(b, tasks.iv, ljc_i64(ir, plane), "");
  if (kc->slot_origin[k->win_out_slot]) base = LLVMBuildNSWSub(b, base, kc->slot_origin[k->win_out_slot], "");
  LLVMValueRef out = LLVMBuildInBoundsGEP2(b, w.st, kc->slot_ptr[k->win_out_slot], &base, 1, "");
  if (tiles_in_pairs(k) || col2im_rows(k)) {
    if (tiles_in_pairs(k))
      emit_col2im_pairs(&w, out);
    else
      emit_col2im_rows(&w, out);
    ljc_loop_end(ir, &tasks, NULL, NULL);
    return;
  }
  if (!to_cols) {
    w.row = out;
    emit_span(&w, ljc_i64(ir, 0), ljc_i64(ir, H * W), false);
  }
  if (a[0] * a[1] <= UNROLLED_WINDOW) {
    for (int64_t i = 0; i < a[0]; i++)
      for (int64_t j = 0; j < a[1]; j++) window_rows(&w, out, ljc_i64(ir, i), ljc_i64(ir, j));
  } else {
    ljc_loop kh, kw;
    ljc_loop_begin(ir, &kh, ljc_i64(ir, 0), ljc_i64(ir, a[0]), false, 0, NULL);
    ljc_loop_begin(ir, &kw, ljc_i64(ir, 0), ljc_i64(ir, a[1]), false, 0, NULL);
    window_rows(&w, out, kh.iv, kw.iv);
    ljc_loop_end(ir, &kw, NULL, NULL);
    ljc_loop_end(ir, &kh, NULL, NULL);
  }
  ljc_loop_end(ir, &tasks, NULL, NULL);
}

/* ---- a max-pool's windows straight from the image ------------------------------------------ */

/* The most window rows and columns emit_pool_rows takes (each tap a vector of its code), and
 * the widest image whose windows reach above or below it (read from a row of the fill). */
enum { POOL_ROWS_MAX = 5, POOL_COLS_MAX = 5, POOL_PAD_ROW_MAX = 8192 };

/* Whether kernel k's windows reach above or below its image (padded rows). */
static bool pool_reaches_out(const ljg_kernel *k) {
  const int64_t *a = k->win;
  return a[4] > 0 || (k->win_oh - 1) * a[2] + a[0] > k->win_img[2];
}

/* Whether nest s of kernel k is a max-pool's argmax over its window's im2col that reads the
 * image's rows instead (emit_pool_rows), in a kernel of row blocks whose code runs the window
 * between its nests (emit_row_blocks): windows of at most POOL_ROWS_MAX rows and
 * POOL_COLS_MAX columns, of column stride 1 or 2, any row stride and padding, no dilation,
 * f32 or f64 rows of contiguous columns (an image at most POOL_PAD_ROW_MAX wide where the
 * rows are padded: a row of the fill, fill_row); the argmax over the im2col's taps of each
 * position (its value the window's LOCAL buffer in im2col's layout, which no other nest
 * reads), whose found element the next nest gathers (picks_found); its output and that
 * nest's contiguous along the positions. Then the im2col is not written. */
static bool pools_rows(const ljg_program *p, const ljg_kernel *k, const int *nest_last, int s) {
  if (s < 0 || s >= k->nnests || !ljg_kernel_has_window(k) || k->win_op != LJG_OP_IM2COL || k->win_at != s ||
      k->row_block <= 0 || k->task_rows > 0 || k->mm_col_tasks ||
      (k->kind == LJG_K_MATMUL && (ljc_gemm_in_one_call(k) || ljc_gemm_writes_window(k))))
    return false;
  const int64_t *a = k->win;
  int64_t P = k->win_oh * k->win_ow, KK = a[0] * a[1];
  lj_dtype dt = (lj_dtype)k->win_dtype;
  if ((dt != LJ_F32 && dt != LJ_F64) || a[0] > POOL_ROWS_MAX || a[1] > POOL_COLS_MAX || (a[3] != 1 && a[3] != 2) ||
      a[6] != 1 || a[7] != 1 || (pool_reaches_out(k) && k->win_img[3] > POOL_PAD_ROW_MAX) || k->win_ow < 2 ||
      p->slots[k->win_out_slot].kind != LJG_SLOT_LOCAL)
    return false;
  const ljg_nest *n = &k->nests[s];
  ljg_view pick;
  if (n->rop != LJG_OP_ARGMAX || n->ndim != 3 || n->rmask != 4u || n->shape[1] != P || n->shape[2] != KK ||
      !picks_found(k, nest_last, s, &pick))
    return false;
  const ljg_kexpr *x = &k->exprs[n->value], *src = &k->exprs[k->win_src];
  const ljg_view *xv = &k->views[x->view], *sv = &k->views[src->view], *ov = &k->views[n->out_view];
  if (x->kind != LJG_X_LOAD || x->slot != k->win_out_slot || x->dtype != dt || xv->n != 1 || sv->n != 1 ||
      ljg_view_top(sv)->ndim != 4 || ljg_view_top(sv)->stride[3] != 1 || ov->n != 1 || ov->v[0].stride[1] != 1 ||
      pick.n != 1 || pick.v[0].stride[1] != 1)
    return false;
  const ljg_view1 *t = &xv->v[0];
  if (t->ndim != 3 || t->offset != 0 || t->stride[0] != KK * P || t->stride[1] != 1 || t->stride[2] != P)
    return false;
  /* no other nest reads the buffer (the gather, s + 1, does not run) */
  return !ljg_nests_read(k, k->win_out_slot, s, s + 1);
}

/* What emit_pool_rows's vectors share: the argmax nest and the gather it stores for, the
 * vector type and width, the window's fill, the pointers to the window's image rows of the
 * output row (a row of the fill where one lies outside the image), and the shuffles that take
 * the even and the odd lanes of two vectors (column stride 2). */
typedef struct pool_gen {
  ljc_kctx *kc;
  const ljg_nest *n, *pick;
  ljg_view pick_view;
  int vw;
  LLVMTypeRef ct, vt;
  LLVMValueRef fill;
  LLVMValueRef rows[POOL_ROWS_MAX];
  LLVMValueRef lanes[2];
} pool_gen;

/* The vw elements of image row `row` from column c on; where masked, the lanes outside the
 * row's W columns the fill (a masked load: c may be negative, the vector may reach past the
 * row's end). */
static LLVMValueRef pool_load(pool_gen *g, LLVMValueRef row, LLVMValueRef c, bool masked) {
  ljc_ir *ir = g->kc->ir;
  LLVMBuilderRef b = ir->b;
  unsigned esize = (unsigned)lj_dtype_size((lj_dtype)g->kc->k->win_dtype);
  LLVMValueRef ptr = LLVMBuildGEP2(b, g->ct, row, &c, 1, "");
  if (!masked) {
    LLVMValueRef v = LLVMBuildLoad2(b, g->vt, ptr, "");
    LLVMSetAlignment(v, esize);
    return v;
  }
  LLVMTypeRef types[2] = {g->vt, ir->ptr};
  LLVMValueRef mask = columns_inside(ir, c, g->vw, g->kc->k->win_img[3]);
  LLVMValueRef args[4] = {ptr, ljc_const_i(ir->i32, (int64_t)esize), mask, g->fill};
  return ljc_intrinsic_over(ir, "masked.load", 2, types, 4, args);
}

/* The argmax and maximum of the vw windows of the output row from column ox0 on (pools_rows),
 * stored at position p0 of the argmax's output and of the gathering nest's: each tap a vector
 * of its image row (of column stride 2, the even or the odd lanes of two vectors of 2·vw
 * columns, which serve two taps), combined in the im2col's order of the taps as the argmax's
 * reduction does (the first of equal maxima, the first NaN); masked where the vectors may
 * reach outside the row. */
static void pool_vector(pool_gen *g, LLVMValueRef r, LLVMValueRef p0, LLVMValueRef ox0, bool masked) {
  ljc_kctx *kc = g->kc;
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  const int64_t *a = k->win;
  LLVMTypeRef it = LLVMVectorType(ir->i32, (unsigned)g->vw);
  LLVMValueRef vals[POOL_ROWS_MAX * POOL_COLS_MAX], at[POOL_ROWS_MAX * POOL_COLS_MAX];
  int nt = 0;
  LLVMValueRef col = LLVMBuildNSWSub(b, LLVMBuildNSWMul(b, ox0, ljc_i64(ir, a[3]), ""), ljc_i64(ir, a[5]), "");
  for (int64_t kh = 0; kh < a[0]; kh++)
    for (int64_t kw0 = 0; kw0 < a[1]; kw0 += a[3]) {
      LLVMValueRef c = LLVMBuildNSWAdd(b, col, ljc_i64(ir, kw0), ""), taps[2];
      taps[0] = pool_load(g, g->rows[kh], c, masked);
      if (a[3] == 2) {
        LLVMValueRef c1 = LLVMBuildNSWAdd(b, c, ljc_i64(ir, g->vw), "");
        LLVMValueRef second = pool_load(g, g->rows[kh], c1, masked), first = taps[0];
        for (int odd = 0; odd < 2; odd++) taps[odd] = LLVMBuildShuffleVector(b, first, second, g->lanes[odd], "");
      }
      for (int64_t kw = kw0; kw < kw0 + a[3] && kw < a[1]; kw++, nt++) {
        vals[nt] = taps[kw - kw0];
        at[nt] = ljc_splat(ir, ljc_const_i(ir->i32, kh * a[1] + kw), it);
      }
    }
  /* pairs of neighbours, earlier taps on the left: the same choice as one pass in order, in
   * a chain of log2 of the taps' compares instead of one a tap */
  for (; nt > 1; nt = (nt + 1) / 2)
    for (int i = 0; i < nt; i += 2) {
      if (i + 1 == nt) {
        vals[i / 2] = vals[i], at[i / 2] = at[i];
        continue;
      }
      LLVMValueRef better = float_arg_better(b, true, vals[i + 1], vals[i]);
      vals[i / 2] = LLVMBuildSelect(b, better, vals[i + 1], vals[i], "");
      at[i / 2] = LLVMBuildSelect(b, better, at[i + 1], at[i], "");
    }
  LLVMValueRef best = vals[0];
  const ljg_nest *n = g->n;
  ljc_point pt = {3, {r, p0, ljc_i64(ir, 0)}};
  LLVMTypeRef xt = LLVMVectorType(ljc_compute_type(ir, n->out_dtype), (unsigned)g->vw);
  LLVMValueRef off = ljc_slot_offset(kc, n->out_slot, &k->views[n->out_view], &pt);
  LLVMTypeRef st = ljc_storage_type(ir, n->out_dtype);
  LLVMValueRef store = LLVMBuildStore(b, LLVMBuildIntCast2(b, at[0], xt, 0, ""),
                                      LLVMBuildInBoundsGEP2(b, st, kc->slot_ptr[n->out_slot], &off, 1, ""));
  LLVMSetAlignment(store, (unsigned)lj_dtype_size((lj_dtype)n->out_dtype));
  off = ljc_slot_offset(kc, g->pick->out_slot, &g->pick_view, &pt);
  store = LLVMBuildStore(b, best, LLVMBuildInBoundsGEP2(b, g->ct, kc->slot_ptr[g->pick->out_slot], &off, 1, ""));
  LLVMSetAlignment(store, (unsigned)lj_dtype_size((lj_dtype)k->win_dtype));
}

/* pool_vector for the vectors [j0, j1) of the output row whose positions start at p_row. */
static void pool_vectors(pool_gen *g, LLVMValueRef r, LLVMValueRef p_row, int64_t j0, int64_t j1, bool masked) {
  if (j0 >= j1) return;
  ljc_ir *ir = g->kc->ir;
  ljc_loop j;
  ljc_loop_begin(ir, &j, ljc_i64(ir, j0), ljc_i64(ir, j1), false, 0, NULL);
  LLVMValueRef ox0 = LLVMBuildNSWMul(ir->b, j.iv, ljc_i64(ir, g->vw), "");
  pool_vector(g, r, LLVMBuildNSWAdd(ir->b, p_row, ox0, ""), ox0, masked);
  ljc_loop_end(ir, &j, NULL, NULL);
}

/* Whether the vector of positions from column ox0 on reads only the row's own columns. */
static bool pool_plain(const ljg_kernel *k, int vw, int64_t ox0) {
  const int64_t *a = k->win;
  int64_t span = a[3] == 2 ? 2 * vw + 2 * ((a[1] - 1) / 2) : vw + a[1] - 1; /* the columns loaded */
  int64_t c = ox0 * a[3] - a[5];
  return c >= 0 && c + span <= k->win_img[3];
}

/* A max-pool of a row-fused kernel (pools_rows) on the block's planes [lo, hi): each output
 * row's windows read from the image's rows a vector of positions at a time (the last vector
 * overlapping the one before it; masked loads for the vectors that reach into the padding or
 * past the row's end, plain ones between them), their argmax and maximum stored as nests s
 * and s + 1 would (a nest mapping the maximum, maps_found, then runs on what nest s + 1's slot
 * holds): no im2col of KH·KW rows written and read back. */
static void emit_pool_rows(ljc_kctx *kc, int s, LLVMValueRef lo, LLVMValueRef hi) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  const int64_t *a = k->win;
  pool_gen g = {.kc = kc, .n = &k->nests[s], .pick = &k->nests[s + 1]};
  LJ_ASSERT(picks_found(k, kc->nest_last, s, &g.pick_view));
  int64_t C = k->win_img[1], H = k->win_img[2], W = k->win_img[3], OH = k->win_oh, OW = k->win_ow;
  g.vw = ir->vec_bytes / (int)lj_dtype_size((lj_dtype)k->win_dtype);
  while (g.vw > OW) g.vw /= 2;
  g.ct = ljc_compute_type(ir, (lj_dtype)k->win_dtype);
  g.vt = LLVMVectorType(g.ct, (unsigned)g.vw);
  g.fill = ljc_splat(ir, ljc_const_f(g.ct, k->win_fill), g.vt);
  LLVMValueRef lanes[64], spread[2][64];
  for (int odd = 0; odd < 2; odd++) {
    stride2_lanes(ir, g.vw, odd, lanes, spread);
    g.lanes[odd] = LLVMConstVector(lanes, (unsigned)g.vw);
  }
  bool padded = pool_reaches_out(k);
  LLVMValueRef pad = padded ? fill_row(ir, g.ct, k->win_fill, W) : NULL;
  /* the vectors [jlo, jhi) of a row read it plainly */
  int64_t nvec = OW / g.vw, jlo = 0, jhi = nvec;
  while (jlo < nvec && !pool_plain(k, g.vw, jlo * g.vw)) jlo++;
  while (jhi > jlo && !pool_plain(k, g.vw, (jhi - 1) * g.vw)) jhi--;
  window_gen w = {0};
  w.kc = kc;
  w.st = g.ct;
  ljc_loop task, oy;
  ljc_loop_begin(ir, &task, lo, hi, true, 0, NULL);
  w.n = LLVMBuildUDiv(b, task.iv, ljc_i64(ir, C), "");
  w.c = LLVMBuildURem(b, task.iv, ljc_i64(ir, C), "");
  ljc_loop_begin(ir, &oy, ljc_i64(ir, 0), ljc_i64(ir, OH), false, 0, NULL);
  for (int64_t kh = 0; kh < a[0]; kh++) {
    LLVMValueRef iy = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, oy.iv, ljc_i64(ir, a[2]), ""), ljc_i64(ir, kh - a[4]), "");
    if (!padded) {
      g.rows[kh] = window_src(&w, iy, ljc_i64(ir, 0));
      continue;
    }
    LLVMValueRef inside = LLVMBuildICmp(b, LLVMIntULT, iy, ljc_i64(ir, H), "");
    LLVMValueRef row = window_src(&w, LLVMBuildSelect(b, inside, iy, ljc_i64(ir, 0), ""), ljc_i64(ir, 0));
    g.rows[kh] = LLVMBuildSelect(b, inside, row, pad, "");
  }
  LLVMValueRef p_row = LLVMBuildNSWMul(b, oy.iv, ljc_i64(ir, OW), "");
  pool_vectors(&g, task.iv, p_row, 0, jlo, true);
  pool_vectors(&g, task.iv, p_row, jlo, jhi, false);
  pool_vectors(&g, task.iv, p_row, jhi, nvec, true);
  if (OW % g.vw) {
    int64_t last = OW - g.vw;
    pool_vector(&g, task.iv, LLVMBuildNSWAdd(b, p_row, ljc_i64(ir, last), ""), ljc_i64(ir, last),
                !pool_plain(k, g.vw, last));
  }
  ljc_loop_end(ir, &oy, NULL, NULL);
  ljc_loop_end(ir, &task, NULL, NULL);
}

/* ---- a max-pool's gradient straight into the image ------------------------------------------ */

/* The most window rows, and the largest row stride, a max-pool's gradient has for emit_unpool
 * (each a row of its code). */
enum { UNPOOL_ROWS_MAX = 8 };

/* A max-pool's gradient laid out by col2im (max_pool2d's vjp), ljc_unpools: its nests fill a
 * LOCAL column buffer with zeros and scatter one value per window along the taps into it
 * (fills_for_scatter), its window the col2im of that buffer, of f32 or f64, with a column
 * stride of 1 or 2 that divides the image's width (one or two vectors to interleave; at
 * least 2 columns of each residue, every target's vectors at least 2 lanes). */
bool ljc_unpools(const ljg_program *p, const ljg_kernel *k) {
  if (k->kind != LJG_K_WINDOW || k->win_op != LJG_OP_COL2IM || k->nnests != 2 || k->win_at != 2 ||
      !fills_for_scatter(k, 0))
    return false;
  const ljg_nest *sc = &k->nests[1];
  const int64_t *a = k->win, *img = k->win_img;
  int64_t KK = a[0] * a[1], P = k->win_oh * k->win_ow;
  lj_dtype dt = (lj_dtype)k->win_dtype;
  if ((dt != LJ_F32 && dt != LJ_F64) || sc->out_dtype != dt || a[6] != 1 || a[7] != 1 || (a[3] != 1 && a[3] != 2) ||
      img[3] % a[3] != 0 || img[3] / a[3] < 2 || a[0] > UNPOOL_ROWS_MAX || a[2] > UNPOOL_ROWS_MAX)
    return false;
  if (sc->ndim != 4 || sc->scatter_dim != 2 || sc->shape[0] != img[0] || sc->shape[1] != img[1] || sc->shape[2] != 1 ||
      sc->shape[3] != P)
    return false;
  const ljg_kexpr *src = &k->exprs[k->win_src];
  const ljg_view *sv = &k->views[sc->out_view], *cv = &k->views[src->view];
  if (sc->out_slot != src->slot || p->slots[sc->out_slot].kind != LJG_SLOT_LOCAL || sv->n != 1 || cv->n != 1)
    return false;
  const int64_t taps[4] = {img[0], img[1], KK, P}, cols[3] = {img[0], img[1] * KK, P};
  return ljg_view1_walks(&sv->v[0], 4, taps) && ljg_view1_walks(&cv->v[0], 3, cols) && sv->v[0].offset == cv->v[0].offset;
}

/* The columns of emit_unpool's buffers around a row's OW windows: *left before them, *width
 * in all, so that every window a vector of the image's columns of one residue reads is in. */
static void unpool_columns(const ljg_kernel *k, int64_t *left, int64_t *width) {
  const int64_t *a = k->win;
  int64_t J = k->win_img[3] / a[3], lo = 0, hi = 0;
  for (int64_t r = 0; r < a[3]; r++)
    for (int64_t kw = 0; kw < a[1]; kw++)
      if ((r + a[5] - kw) % a[3] == 0) {
        int64_t dj = (r + a[5] - kw) / a[3];
        lo = dj < lo ? dj : lo, hi = dj > hi ? dj : hi;
      }
  *left = -lo;
  int64_t right = J - 1 + hi - (k->win_ow - 1);
  *width = *left + k->win_ow + (right > 0 ? right : 0);
}

/* vw columns of each residue (column mod stride) of an image row, at dst, from j0 on: each
 * column the sum, from +0 in the order of the taps (col2im's), of the windows' values whose
 * position is that tap, read from vals and pos at the rows rowoff (per tap row; NULL: none
 * reaches the image row) from column `left` (pos -1 where no window is), the residues
 * interleaved. */
static void unpool_vector(ljc_kctx *kc, LLVMValueRef vals, LLVMValueRef pos, const LLVMValueRef *rowoff, int64_t left,
                          int vw, LLVMValueRef dst, LLVMValueRef j0) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  const int64_t *a = k->win;
  lj_dtype dt = (lj_dtype)k->win_dtype;
  LLVMTypeRef ct = ljc_compute_type(ir, dt), vt = LLVMVectorType(ct, (unsigned)vw);
  LLVMTypeRef it = LLVMVectorType(ir->i32, (unsigned)vw);
  unsigned esize = (unsigned)lj_dtype_size(dt);
  LLVMValueRef zero = LLVMConstNull(vt), sum[2] = {zero, zero};
  for (int64_t r = 0; r < a[3]; r++)
    for (int64_t kh = 0; kh < a[0]; kh++) {
      if (!rowoff[kh]) continue;
      for (int64_t kw = 0; kw < a[1]; kw++) {
        if ((r + a[5] - kw) % a[3] != 0) continue;
        LLVMValueRef at = LLVMBuildNSWAdd(b, rowoff[kh], j0, "");
        at = LLVMBuildNSWAdd(b, at, ljc_i64(ir, left + (r + a[5] - kw) / a[3]), "");
        LLVMValueRef v = LLVMBuildLoad2(b, vt, LLVMBuildInBoundsGEP2(b, ct, vals, &at, 1, ""), "");
        LLVMValueRef t = LLVMBuildLoad2(b, it, LLVMBuildInBoundsGEP2(b, ir->i32, pos, &at, 1, ""), "");
        LLVMSetAlignment(v, esize);
        LLVMSetAlignment(t, 4);
        LLVMValueRef hit = LLVMBuildICmp(b, LLVMIntEQ, t, ljc_splat(ir, ljc_const_i(ir->i32, kh * a[1] + kw), it), "");
        sum[r] = LLVMBuildFAdd(b, sum[r], LLVMBuildSelect(b, hit, v, zero, ""), "");
      }
    }
  LLVMValueRef row = sum[0], col = j0;
  if (a[3] == 2) {
    LLVMValueRef lanes[128];
    for (int i = 0; i < 2 * vw; i++) lanes[i] = ljc_const_i(ir->i32, (i & 1) * vw + i / 2);
    row = LLVMBuildShuffleVector(b, sum[0], sum[1], LLVMConstVector(lanes, (unsigned)(2 * vw)), "");
    col = LLVMBuildNSWMul(b, j0, ljc_i64(ir, 2), "");
  }
  LLVMSetAlignment(LLVMBuildStore(b, row, LLVMBuildInBoundsGEP2(b, ct, dst, &col, 1, "")), esize);
}

/* A max-pool's gradient (ljc_unpools): per plane, the scatter's values and positions at each
 * window (vals and pos, LOCAL to the call; a bad position reported, stored as -1), then each
 * image row from them (unpool_vector): no column buffer of KH·KW rows written and read back,
 * no zeros stored first, the same sums in the same order as the col2im's. */
static void emit_unpool(ljc_kctx *kc, const int *nest_check, LLVMValueRef begin, LLVMValueRef end) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  const ljg_nest *sc = &k->nests[1];
  const int64_t *a = k->win;
  int64_t C = k->win_img[1], H = k->win_img[2], W = k->win_img[3], OH = k->win_oh, OW = k->win_ow, KK = a[0] * a[1];
  int64_t J = W / a[3], left, cw;
  unpool_columns(k, &left, &cw);
  lj_dtype dt = (lj_dtype)k->win_dtype;
  LLVMTypeRef ct = ljc_compute_type(ir, dt);
  int vw = ir->vec_bytes / (int)lj_dtype_size(dt);
  while (vw > J) vw /= 2;
  /* a last row of no windows for the rows past the image's; about two of the column buffer's
   * KH·KW rows, which the fusion keeps LOCAL only up to an L2's size */
  int64_t n = (OH + 1) * cw;
  LLVMValueRef vals = ljc_entry_array(ir, ct, n), pos = ljc_entry_array(ir, ir->i32, n);
  LLVMBuildMemSet(b, vals, LLVMConstInt(ir->i8, 0, 0), ljc_i64(ir, n * (int64_t)lj_dtype_size(dt)), 64);
  LLVMBuildMemSet(b, pos, LLVMConstInt(ir->i8, 0xff, 0), ljc_i64(ir, n * 4), 64);
  /* the windows one loop when the buffers' rows are the windows' rows (no columns around
   * them), so that short rows (7 windows) vectorize */
  bool flat = left == 0 && cw == OW;
  ljc_loop task, oh, ow, m, j;
  ljc_loop_begin(ir, &task, begin, end, true, 0, NULL);
  ljc_point pt = {4, {LLVMBuildUDiv(b, task.iv, ljc_i64(ir, C), ""), LLVMBuildURem(b, task.iv, ljc_i64(ir, C), ""),
                      ljc_i64(ir, 0), NULL}};
  ljc_loop_begin(ir, &oh, ljc_i64(ir, 0), ljc_i64(ir, flat ? 1 : OH), false, 0, NULL);
  ljc_loop_begin(ir, &ow, ljc_i64(ir, 0), ljc_i64(ir, flat ? OH * OW : OW), false, 0, NULL);
  pt.idx[3] = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, oh.iv, ljc_i64(ir, OW), ""), ow.iv, "");
  ljc_emit_exprs(kc, &pt, sc->value);
  LLVMValueRef v = kc->vals[sc->value];
  LLVMValueRef bad, index = scatter_index(kc, sc, nest_check[1], &pt, KK, &bad);
  LLVMValueRef at = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, oh.iv, ljc_i64(ir, cw), ""), ow.iv, "");
  at = LLVMBuildNSWAdd(b, at, ljc_i64(ir, left), "");
  /* col2im's element: the scatter's 0 + v, in the output's dtype */
  v = ljc_round_to(ir, LLVMBuildFAdd(b, ljc_const_f(LLVMTypeOf(v), 0), v, ""), sc->out_dtype);
  LLVMBuildStore(b, v, LLVMBuildInBoundsGEP2(b, ct, vals, &at, 1, ""));
  LLVMValueRef t = LLVMBuildSelect(b, bad, ljc_i64(ir, -1), index, "");
  LLVMBuildStore(b, LLVMBuildTrunc(b, t, ir->i32, ""), LLVMBuildInBoundsGEP2(b, ir->i32, pos, &at, 1, ""));
  ljc_loop_end(ir, &ow, NULL, NULL);
  ljc_loop_end(ir, &oh, NULL, NULL);
  LLVMValueRef base = LLVMBuildNSWMul(b, task.iv, ljc_i64(ir, H * W), "");
  if (kc->slot_origin[k->win_out_slot]) base = LLVMBuildNSWSub(b, base, kc->slot_origin[k->win_out_slot], "");
  LLVMValueRef plane = LLVMBuildInBoundsGEP2(b, ct, kc->slot_ptr[k->win_out_slot], &base, 1, "");
  int64_t sh = a[2], rows = (H + sh - 1) / sh;
  ljc_loop_begin(ir, &m, ljc_i64(ir, 0), ljc_i64(ir, rows), false, 0, NULL);
  for (int q = 0; q < sh; q++) {
    LLVMValueRef ih = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, m.iv, ljc_i64(ir, sh), ""), ljc_i64(ir, q), "");
    LLVMBasicBlockRef after = NULL;
    if (q > 0 && H % sh != 0)
      after = ljc_if_begin(ir, LLVMBuildICmp(b, LLVMIntSLT, ih, ljc_i64(ir, H), ""), "unpool.row");
    /* the buffers' row of each tap row kh that reaches image row ih (else NULL), that of no
     * windows where its window row is outside [0, OH) */
    LLVMValueRef rowoff[UNPOOL_ROWS_MAX] = {0};
    for (int64_t kh = 0; kh < a[0]; kh++) {
      int64_t d = q + a[4] - kh;
      if (((d % sh) + sh) % sh != 0) continue;
      LLVMValueRef wr = LLVMBuildNSWAdd(b, m.iv, ljc_i64(ir, d / sh), "");
      LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, wr, ljc_i64(ir, 0), ""),
                                     LLVMBuildICmp(b, LLVMIntSLT, wr, ljc_i64(ir, OH), ""), "");
      rowoff[kh] = LLVMBuildNSWMul(b, LLVMBuildSelect(b, in, wr, ljc_i64(ir, OH), ""), ljc_i64(ir, cw), "");
    }
    LLVMValueRef off = LLVMBuildNSWMul(b, ih, ljc_i64(ir, W), "");
    LLVMValueRef dst = LLVMBuildInBoundsGEP2(b, ct, plane, &off, 1, "");
    ljc_loop_begin(ir, &j, ljc_i64(ir, 0), ljc_i64(ir, J / vw), false, 0, NULL);
    unpool_vector(kc, vals, pos, rowoff, left, vw, dst, LLVMBuildNSWMul(b, j.iv, ljc_i64(ir, vw), ""));
    ljc_loop_end(ir, &j, NULL, NULL);
    if (J % vw) unpool_vector(kc, vals, pos, rowoff, left, vw, dst, ljc_i64(ir, J - vw));
    if (after) ljc_if_end(ir, after);
  }
  ljc_loop_end(ir, &m, NULL, NULL);
  ljc_loop_end(ir, &task, NULL, NULL);
}

/* ---- kernels ------------------------------------------------------------------------------- */

/* used[s]: 1 when the kernel reads slot s, 2 when it writes it. */
static void mark_slots(const ljg_kernel *k, uint8_t *used) {
  for (int e = 0; e < k->nexprs; e++)
    if (k->exprs[e].kind == LJG_X_LOAD || k->exprs[e].kind == LJG_X_SCALAR || k->exprs[e].kind == LJG_X_BUFFER)
      used[k->exprs[e].slot] = 1;
  for (int s = 0; s < k->nnests; s++) used[k->nests[s].out_slot] = 2;
  int32_t own[3];
  for (int i = 0, n = ljg_kernel_own_outputs(k, own); i < n; i++) used[own[i]] = 2;
}

/* A kernel reads each slot it only loads from, through views of one level of the slot's
 * dtype, from the line its least offset lies in: its entry passes its body the slot's address
 * moved by that many whole lines (64 bytes: the body's pointers stay aligned), and its body
 * reads the views with their offsets less as many elements. The kernels of an unrolled loop
 * that take each step's part of one tensor (an LSTM's inputs times its input weights, computed
 * for every step at once) then have bodies of the same code, compiled once (twins.c): the
 * LSTM workload's step of 32 steps in 114 kernels compiled 57 bodies before, 28 so, its cold
 * compile 335-341 -> 261-275 ms on two Zen 5 threads, 337-347 -> 276-287 on one. Not a slot
 * whose views the body shares with another slot's or a nest's, nor one it reads other than
 * through its views (the sums an earlier kernel's routine wrote in runs: add_runs). The
 * elements each slot's reads move by (0 for most), or NULL where none moves. */
static int64_t *slot_shifts(const ljg_program *p, int ki) {
  const ljg_kernel *k = &p->kernels[ki];
  size_t n = (size_t)p->nslots + 1;
  uint8_t *used = ljb_xcalloc(n, sizeof *used);
  mark_slots(k, used);
  int kj, nest;
  int64_t at, step;
  if (ljc_gemm_b_sum(p, ki, &kj, &nest, &at, &step)) used[p->kernels[kj].nests[nest].out_slot] = 2;
  for (int s = 0, by; s < k->nnests; s++)
    if ((by = summed_by(p, ki, s)) >= 0) used[p->kernels[by].mm_out_slot] = 2;
  int32_t *view_slot = ljb_xalloc(((size_t)k->nviews + 1) * sizeof *view_slot);
  for (int v = 0; v < k->nviews; v++) view_slot[v] = -1;
  for (int s = 0; s < k->nnests; s++) view_slot[k->nests[s].out_view] = -2;
  for (int e = 0; e < k->nexprs; e++) {
    const ljg_kexpr *x = &k->exprs[e];
    if (x->kind != LJG_X_LOAD && x->kind != LJG_X_SCALAR && x->kind != LJG_X_BUFFER) continue;
    const ljg_slot *sl = &p->slots[x->slot];
    if (x->kind != LJG_X_LOAD || sl->kind == LJG_SLOT_LOCAL || sl->kind == LJG_SLOT_SCALAR || x->dtype != sl->dtype ||
        k->views[x->view].n != 1)
      used[x->slot] = 2;
    if (x->kind == LJG_X_SCALAR || x->view < 0) continue;
    int32_t *vs = &view_slot[x->view];
    if (*vs != -1 && *vs != x->slot) {
      used[x->slot] = 2;
      if (*vs >= 0) used[*vs] = 2;
    }
    if (*vs == -1) *vs = x->slot;
  }
  int64_t *shift = ljb_xalloc(n * sizeof *shift);
  for (size_t sl = 0; sl < n; sl++) shift[sl] = INT64_MAX;
  for (int e = 0; e < k->nexprs; e++) {
    const ljg_kexpr *x = &k->exprs[e];
    if (x->kind == LJG_X_LOAD && used[x->slot] == 1 && k->views[x->view].v[0].offset < shift[x->slot])
      shift[x->slot] = k->views[x->view].v[0].offset;
  }
  bool any = false;
  for (int sl = 0; sl < p->nslots; sl++) {
    int64_t line = LJC_LINE_BYTES / (int64_t)lj_dtype_size((lj_dtype)p->slots[sl].dtype);
    shift[sl] = shift[sl] == INT64_MAX || shift[sl] < line ? 0 : shift[sl] / line * line;
    any |= shift[sl] != 0;
  }
  free(view_slot);
  free(used);
  if (any) return shift;
  free(shift);
  return NULL;
}

/* Kernel k with the offsets of the views of the slots that move (slot_shifts) less their
 * shift, into *out, its views into *views (malloc'd). */
static void shifted_kernel(const ljg_kernel *k, const int64_t *shift, ljg_kernel *out, ljg_view **views) {
  *out = *k;
  *views = ljb_xalloc(((size_t)k->nviews + 1) * sizeof **views);
  memcpy(*views, k->views, (size_t)k->nviews * sizeof **views);
  bool *done = ljb_xcalloc((size_t)k->nviews + 1, sizeof *done);
  for (int e = 0; e < k->nexprs; e++) {
    const ljg_kexpr *x = &k->exprs[e];
    if (x->kind != LJG_X_LOAD || !shift[x->slot] || done[x->view]) continue;
    (*views)[x->view].v[0].offset -= shift[x->slot];
    done[x->view] = true;
  }
  free(done);
  out->views = *views;
}

/* The checks a kernel makes, with their allocas, created in the entry block. */
static void create_checks(ljc_kctx *kc, int *nest_check) {
  ljc_ir *ir = kc->ir;
  const ljg_kernel *k = kc->k;
  int max = k->nexprs + k->nnests + 1;
  kc->checks = ljb_xcalloc((size_t)max, sizeof *kc->checks);
  kc->expr_check = ljb_xalloc((size_t)max * sizeof *kc->expr_check);
  for (int e = 0; e < k->nexprs + 1; e++) kc->expr_check[e] = -1;
  for (int e = 0; e < k->nexprs + k->nnests; e++) {
    int code;
    const ljg_nest *nest = e >= k->nexprs ? &k->nests[e - k->nexprs] : NULL;
    if (nest) {
      nest_check[e - k->nexprs] = -1;
      if (nest->scatter_index < 0) continue;
      code = LJG_KERR_INDEX;
    } else if ((code = ljc_expr_check(k, e)) == LJG_KERR_NONE) {
      continue;
    }
    ljc_check *c = &kc->checks[kc->nchecks];
    c->code = code;
    c->node = nest ? k->node : k->exprs[e].node;
    c->bound = nest ? ljg_view_top(&k->views[nest->out_view])->shape[nest->scatter_dim] : (int64_t)k->exprs[e].value;
    c->flag = LLVMBuildAlloca(ir->b, ir->i8, "check.flag");
    LLVMBuildStore(ir->b, ljc_const_i(ir->i8, 0), c->flag);
    if (code == LJG_KERR_INDEX) {
      c->badval = LLVMBuildAlloca(ir->b, ir->i64, "check.value");
      LLVMBuildStore(ir->b, ljc_i64(ir, INT64_MAX), c->badval);
    }
    if (nest)
      nest_check[e - k->nexprs] = kc->nchecks++;
    else
      kc->expr_check[e] = kc->nchecks++;
  }
}

/* After the loops: the first failed check is reported through err (one per launch). */
static void emit_error_checks(ljc_kctx *kc, LLVMValueRef err) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  for (int i = 0; i < kc->nchecks; i++) {
    const ljc_check *c = &kc->checks[i];
    LLVMBasicBlockRef report = LLVMAppendBasicBlockInContext(ir->ctx, fn, "check.failed");
    LLVMBasicBlockRef record = LLVMAppendBasicBlockInContext(ir->ctx, fn, "check.record");
    LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(ir->ctx, fn, "check.next");
    LLVMValueRef v = LLVMBuildLoad2(b, ir->i8, c->flag, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntNE, v, ljc_const_i(ir->i8, 0), ""), report, next);
    LLVMPositionBuilderAtEnd(b, report);
    LLVMValueRef x = LLVMBuildAtomicCmpXchg(b, err, ljc_const_i(ir->i32, 0), ljc_const_i(ir->i32, c->code),
                                            LLVMAtomicOrderingSequentiallyConsistent,
                                            LLVMAtomicOrderingSequentiallyConsistent, 0);
    LLVMBuildCondBr(b, LLVMBuildExtractValue(b, x, 1, ""), record, next);
    LLVMPositionBuilderAtEnd(b, record);
    /* ljg_kerr: {i32 code, i32 node, i64 value, i64 bound} */
    LLVMValueRef off[3] = {ljc_i64(ir, 4), ljc_i64(ir, 8), ljc_i64(ir, 16)};
    LLVMBuildStore(b, ljc_const_i(ir->i32, c->node), LLVMBuildInBoundsGEP2(b, ir->i8, err, &off[0], 1, ""));
    LLVMValueRef bad = c->badval ? LLVMBuildLoad2(b, ir->i64, c->badval, "") : ljc_i64(ir, 0);
    LLVMBuildStore(b, bad, LLVMBuildInBoundsGEP2(b, ir->i8, err, &off[1], 1, ""));
    LLVMBuildStore(b, ljc_i64(ir, c->bound), LLVMBuildInBoundsGEP2(b, ir->i8, err, &off[2], 1, ""));
    LLVMBuildBr(b, next);
    LLVMPositionBuilderAtEnd(b, next);
  }
}

static void emit_kernel(ljc_ir *ir, const ljg_program *p, int ki, const char *name) {
  const ljg_kernel *k = &p->kernels[ki];
  LLVMBuilderRef b = ir->b;
  int64_t *shift = slot_shifts(p, ki);
  ljg_kernel shifted;
  ljg_view *shifted_views = NULL;
  if (shift) {
    shifted_kernel(k, shift, &shifted, &shifted_views);
    k = &shifted;
  }
  uint8_t *used = ljb_xcalloc((size_t)p->nslots + 1, sizeof *used);
  mark_slots(k, used);
  int sum_kernel, sum_nest;
  int64_t sum_at = 0, sum_step = 0;
  int32_t sum_slot = -1; /* the slot the routine writes B's sums into */
  if (ljc_gemm_b_sum(p, ki, &sum_kernel, &sum_nest, &sum_at, &sum_step)) {
    sum_slot = p->kernels[sum_kernel].nests[sum_nest].out_slot;
    if (k->mm_sum > 1) /* each run's, after the runs' matrices in C's slot: that nest adds them */
      sum_slot = k->mm_out_slot, sum_at = k->mm_sum * k->mm_m * k->mm_n, sum_step = 1;
    used[sum_slot] = 2;
  }
  uint8_t *local = ljb_xcalloc((size_t)p->nslots + 1, sizeof *local); /* LOCAL slots: no argument */
  for (int s = 0; s < p->nslots; s++)
    if (used[s] && p->slots[s].kind == LJG_SLOT_LOCAL) {
      local[s] = 1;
      used[s] = 0;
    }
  int nused = 0;
  for (int s = 0; s < p->nslots; s++) nused += used[s] != 0;
  /* the body, every slot a noalias argument */
  LLVMTypeRef *ptypes = ljb_xalloc(((size_t)nused + 3) * sizeof *ptypes);
  for (int i = 0; i < nused; i++) ptypes[i] = ir->ptr;
  ptypes[nused] = ir->i64;
  ptypes[nused + 1] = ir->i64;
  ptypes[nused + 2] = ir->ptr;
  LLVMTypeRef body_t = LLVMFunctionType(ir->void_, ptypes, (unsigned)nused + 3, 0);
  char fname[96];
  snprintf(fname, sizeof fname, "%s_k%d_body", name, ki);
  LLVMValueRef body = LLVMAddFunction(ir->mod, fname, body_t);
  LLVMSetLinkage(body, LLVMInternalLinkage);
  ljc_add_fn_attr(ir, body, "nounwind");
  ljc_prefer_target_vectors(ir, body);
  ljc_dbg_function(ir, body, k->node);
  ljc_kctx kc = {.ir = ir,
                 .p = p,
                 .k = k,
                 .slot_ptr = ljb_xcalloc((size_t)p->nslots + 1, sizeof(LLVMValueRef)),
                 .slot_origin = ljb_xcalloc((size_t)p->nslots + 1, sizeof(LLVMValueRef)),
                 .vals = ljb_xcalloc((size_t)k->nexprs + 1, sizeof(LLVMValueRef)),
                 .load_at = ljb_xcalloc((size_t)k->nexprs + 1, sizeof(LLVMValueRef)),
                 .block_rows = k->row_block,
                 .b_sum_slot = sum_slot,
                 .b_sum_at = sum_at,
                 .b_sum_step = sum_step};
  for (int s = 0, a = 0; s < p->nslots; s++) {
    if (!used[s]) continue;
    kc.slot_ptr[s] = LLVMGetParam(body, (unsigned)a);
    if (used[s] == 2) ljc_add_param_attr(ir, body, (unsigned)a, "noalias", 0);
    ljc_add_param_attr(ir, body, (unsigned)a, "align", p->slots[s].kind == LJG_SLOT_SCALAR ? 8 : 64);
    a++;
  }
  LLVMValueRef begin = LLVMGetParam(body, (unsigned)nused), end = LLVMGetParam(body, (unsigned)nused + 1);
  LLVMValueRef err = LLVMGetParam(body, (unsigned)nused + 2);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ir->ctx, body, "entry"));
  for (int s = 0; s < p->nslots; s++) {
    if (!local[s]) continue;
    /* one block of rows on the stack; slot_origin is set per block */
    kc.slot_ptr[s] = LLVMBuildAlloca(b, LLVMArrayType2(ir->i8, (uint64_t)p->slots[s].nbytes), "local");
    LLVMSetAlignment(kc.slot_ptr[s], 64);
    kc.slot_origin[s] = ljc_i64(ir, 0);
  }
  int *nest_check = ljb_xalloc(((size_t)k->nnests + 1) * sizeof *nest_check);
  create_checks(&kc, nest_check);
  kc.nest_last = ljb_xalloc(((size_t)k->nnests + 1) * sizeof *kc.nest_last);
  loop_groups(k, kc.nest_last);
  kc.sum_head = ljb_xalloc(((size_t)k->nnests + 1) * sizeof *kc.sum_head);
  sum_groups(p, ki, kc.nest_last, kc.sum_head);
  kc.mm_bias = bias_start(p, k, kc.nest_last);
  kc.b_summed = ljb_xcalloc((size_t)k->nnests + 1, sizeof *kc.b_summed);
  kc.found_load = -1;
  for (int s = 0; s <= k->nnests; s++) kc.b_summed[s] = s < k->nnests ? summed_by(p, ki, s) : -1;
  if (k->kind == LJG_K_MATMUL && (k->row_block == 0 || ljc_gemm_in_one_call(k)))
    emit_matmul(&kc, begin, end, ljc_const_i(ir->i1, 1));
  else if (k->kind == LJG_K_WINDOW && k->row_block == 0)
    emit_window(&kc, begin, end);
  else if (ljc_unpools(p, k))
    emit_unpool(&kc, nest_check, begin, end);
  else if (k->row_block > 0 && k->mm_col_tasks)
    emit_column_block(&kc, nest_check, begin, end);
  else if (k->task_rows > 0)
    emit_task_rows(&kc, nest_check, begin, end);
  else if (k->row_block > 0)
    emit_row_blocks(&kc, nest_check, k->nnests, begin, end);
  else
    for (int s = 0; s < k->nnests; s++) emit_nest(&kc, &k->nests[s], nest_check[s], begin, end);
  emit_error_checks(&kc, err);
  LLVMBuildRetVoid(b);
  /* the entry point: loads the slot pointers and calls the body */
  LLVMTypeRef outer_p[4] = {ir->ptr, ir->i64, ir->i64, ir->ptr};
  LLVMTypeRef outer_t = LLVMFunctionType(ir->void_, outer_p, 4, 0);
  snprintf(fname, sizeof fname, "%s_k%d", name, ki);
  LLVMValueRef outer = LLVMAddFunction(ir->mod, fname, outer_t);
  ljc_add_fn_attr(ir, outer, "nounwind");
  ljc_prefer_target_vectors(ir, outer);
  ljc_dbg_function(ir, outer, k->node);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ir->ctx, outer, "entry"));
  const uint8_t *stream = ir->stream;
  LLVMValueRef *args = ljb_xalloc(((size_t)nused + 3) * sizeof *args);
  for (int s = 0, a = 0; s < p->nslots; s++) {
    if (!used[s]) continue;
    LLVMValueRef idx = ljc_i64(ir, s);
    LLVMValueRef pp = LLVMBuildInBoundsGEP2(b, ir->ptr, LLVMGetParam(outer, 0), &idx, 1, "");
    args[a++] = LLVMBuildLoad2(b, ir->ptr, pp, "");
    if (stream && stream[s]) ljc_set_align_md(ir, args[a - 1], 64); /* as the body's argument says */
    if (shift && shift[s]) {
      LLVMValueRef bytes = ljc_i64(ir, shift[s] * (int64_t)lj_dtype_size((lj_dtype)p->slots[s].dtype));
      args[a - 1] = LLVMBuildInBoundsGEP2(b, ir->i8, args[a - 1], &bytes, 1, "");
    }
  }
  args[nused] = LLVMGetParam(outer, 1);
  args[nused + 1] = LLVMGetParam(outer, 2);
  args[nused + 2] = LLVMGetParam(outer, 3);
  int64_t peel = stream ? ljc_stream_peel(ir, p, ki, stream) : 0;
  if (peel > 0) {
    /* [begin, min(up, end)) then [up, end), up the first multiple of peel from begin
     * (stream.c); both calls inlined, so that LLVM sees the second range start aligned */
    ljc_add_fn_attr(ir, body, "alwaysinline");
    LLVMValueRef up = LLVMBuildAnd(b, LLVMBuildAdd(b, args[nused], ljc_i64(ir, peel - 1), ""), ljc_i64(ir, -peel), "");
    LLVMValueRef last = args[nused + 1];
    args[nused + 1] = ljc_intrinsic2(ir, "smin", up, last);
    LLVMBuildCall2(b, body_t, body, args, (unsigned)nused + 3, "");
    args[nused] = up; /* past end: the body does nothing */
    args[nused + 1] = last;
  }
  LLVMBuildCall2(b, body_t, body, args, (unsigned)nused + 3, "");
  LLVMBuildRetVoid(b);
  free(args);
  free(ptypes);
  free(used);
  free(local);
  free(kc.slot_ptr);
  free(kc.slot_origin);
  free(kc.vals);
  free(kc.load_at);
  free(kc.checks);
  free(kc.expr_check);
  free(kc.nest_last);
  free(kc.sum_head);
  free(kc.b_summed);
  free(shift);
  free(shifted_views);
  free(nest_check);
}

void ljc_lower_kernel(ljc_ir *ir, const ljg_program *p, int k, const char *name) {
  emit_kernel(ir, p, k, name);
}

int ljc_behind_nest(const ljg_program *p, int ki) {
  const ljg_kernel *k = &p->kernels[ki];
  if (k->kind != LJG_K_LOOPS || k->row_block <= 0 || k->task_rows > 0) return -1;
  int *last = ljb_xalloc(((size_t)k->nnests + 1) * sizeof *last);
  loop_groups(k, last);
  int s = ahead_nest(p, k, last, summed_by(p, ki, 0) >= 0, k->nnests), t = s ? runs_behind(p, k, last, s) : 0;
  free(last);
  return t > 0 ? t : -1;
}
