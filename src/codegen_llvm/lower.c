/* lower.c — kernels to LLVM IR. Every kernel becomes two functions:
 *
 *   void <name>_k<i>(void **slots, i64 begin, i64 end, ljg_kerr *err)
 *       loads the slot pointers it uses and calls
 *   internal void <name>_k<i>_body(ptr noalias align 64 s0, ..., i64 begin, i64 end, ptr err)
 *
 * where the buffers the kernel writes are noalias arguments: LLVM then knows no load can see
 * a store, so it vectorizes and hoists freely. (Read-only inputs may alias each other, which
 * is harmless; marking them too would give graphs with hundreds of scalar parameters
 * quadratic alias-analysis time.) The body runs each loop nest: loops over the kept dims (the first one over the
 * task range [begin, end)), and for reductions an inner set of loops carrying the
 * accumulator in phis; reassociation is allowed on sum/prod accumulators only, so they
 * vectorize. Matmul kernels compute one output row per task: when B is contiguous along n,
 * zero the row and add a[k] times row k of B for each k (the inner loop over n vectorizes);
 * when B is contiguous along k (a transposed weight), each output is a dot product over k
 * (a vectorized reduction). Division-by-zero flags are checked after the loops and
 * reported through err. */
#include "codegen_llvm/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- loops ------------------------------------------------------------------------------- */

typedef struct loop {
  LLVMBasicBlockRef pre, header, exit;
  LLVMValueRef iv, hi;
  bool guarded;
  int nacc;
  LLVMValueRef acc[2], acc_in[2];
} loop;

/* Opens a loop for iv in [lo, hi) carrying nacc values; guarded when it may run 0 times. */
static void loop_begin(ljc_ir *ir, loop *L, LLVMValueRef lo, LLVMValueRef hi, bool guard, int nacc,
                       LLVMValueRef *acc_in) {
  LLVMBuilderRef b = ir->b;
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  memset(L, 0, sizeof *L);
  L->pre = LLVMGetInsertBlock(b);
  L->header = LLVMAppendBasicBlockInContext(ir->ctx, fn, "loop");
  L->exit = LLVMAppendBasicBlockInContext(ir->ctx, fn, "loop.exit");
  L->hi = hi;
  L->guarded = guard;
  L->nacc = nacc;
  if (guard)
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, lo, hi, ""), L->header, L->exit);
  else
    LLVMBuildBr(b, L->header);
  LLVMPositionBuilderAtEnd(b, L->header);
  L->iv = LLVMBuildPhi(b, ir->i64, "i");
  LLVMAddIncoming(L->iv, &lo, &L->pre, 1);
  for (int a = 0; a < nacc; a++) {
    L->acc_in[a] = acc_in[a];
    L->acc[a] = LLVMBuildPhi(b, LLVMTypeOf(acc_in[a]), "acc");
    LLVMAddIncoming(L->acc[a], &acc_in[a], &L->pre, 1);
  }
}

/* Closes the loop; acc_out receives the carried values after it. */
static void loop_end(ljc_ir *ir, loop *L, LLVMValueRef *acc_next, LLVMValueRef *acc_out) {
  LLVMBuilderRef b = ir->b;
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
  LLVMValueRef next = LLVMBuildNSWAdd(b, L->iv, ljc_i64(ir, 1), "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, next, L->hi, ""), L->header, L->exit);
  LLVMAddIncoming(L->iv, &next, &latch, 1);
  for (int a = 0; a < L->nacc; a++) LLVMAddIncoming(L->acc[a], &acc_next[a], &latch, 1);
  LLVMPositionBuilderAtEnd(b, L->exit);
  for (int a = 0; a < L->nacc; a++) {
    if (!L->guarded) {
      acc_out[a] = acc_next[a];
      continue;
    }
    LLVMValueRef phi = LLVMBuildPhi(b, LLVMTypeOf(acc_next[a]), "");
    LLVMValueRef in[2] = {L->acc_in[a], acc_next[a]};
    LLVMBasicBlockRef from[2] = {L->pre, latch};
    LLVMAddIncoming(phi, in, from, 2);
    acc_out[a] = phi;
  }
}

/* ---- reductions ----------------------------------------------------------------------------- */

typedef struct reduction {
  int op;
  lj_dtype in_dt;     /* dtype of the reduced values */
  LLVMTypeRef acc_t;  /* accumulator type */
  bool isfloat, sgn;
} reduction;

static reduction reduction_of(ljc_ir *ir, int op, lj_dtype in_dt) {
  reduction r = {op, in_dt, NULL, ljg_dtype_is_float(in_dt), in_dt != LJ_BOOL && ljg_dtype_is_signed(in_dt)};
  bool wide = (op == LJG_OP_SUM || op == LJG_OP_MEAN || op == LJG_OP_PROD) && !r.isfloat;
  r.acc_t = wide ? ir->i64 : ljc_compute_type(ir, in_dt);
  return r;
}

static int reduction_nacc(const reduction *r) {
  return r->op == LJG_OP_ARGMAX || r->op == LJG_OP_ARGMIN ? 2 : 1;
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
    acc[1] = ljc_i64(ir, 0);
    break;
  }
  }
}

static LLVMValueRef reassoc(LLVMValueRef v) {
  LLVMSetFastMathFlags(v, LLVMFastMathAllowReassoc);
  return v;
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
    const char *fn = r->isfloat ? (mx ? "maximum" : "minimum")
                                : r->sgn ? (mx ? "smax" : "smin") : (mx ? "umax" : "umin");
    out[0] = ljc_intrinsic2(ir, fn, acc[0], v);
    break;
  }
  default: {
    bool mx = r->op == LJG_OP_ARGMAX;
    LLVMValueRef better;
    if (r->isfloat) {
      better = LLVMBuildFCmp(b, mx ? LLVMRealOGT : LLVMRealOLT, v, acc[0], "");
      LLVMValueRef nan_first = LLVMBuildAnd(b, LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""),
                                            LLVMBuildFCmp(b, LLVMRealORD, acc[0], acc[0], ""), "");
      better = LLVMBuildOr(b, better, nan_first, "");
    } else {
      LLVMIntPredicate p = r->sgn ? (mx ? LLVMIntSGT : LLVMIntSLT) : (mx ? LLVMIntUGT : LLVMIntULT);
      better = LLVMBuildICmp(b, p, v, acc[0], "");
    }
    out[0] = LLVMBuildSelect(b, better, v, acc[0], "");
    out[1] = LLVMBuildSelect(b, better, index ? index : ljc_i64(ir, 0), acc[1], "");
    break;
  }
  }
}

/* ---- nests ---------------------------------------------------------------------------------- */

typedef struct nest_gen {
  ljc_kctx *kc;
  const ljg_nest *nest;
  ljc_point pt;
  int nkept;          /* leading dims that are not reduced */
  bool split;         /* dim 0 runs over the task range */
  LLVMValueRef begin, end;
  reduction red;
} nest_gen;

static LLVMValueRef point_value(nest_gen *g) {
  ljc_emit_exprs(g->kc, &g->pt, g->nest->value);
  return g->kc->vals[g->nest->value];
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
  loop L;
  loop_begin(ir, &L, ljc_i64(ir, 0), ljc_i64(ir, g->nest->shape[d]), false, nacc, acc);
  g->pt.idx[d] = L.iv;
  LLVMValueRef next[2];
  emit_reduced(g, d + 1, L.acc, next);
  loop_end(ir, &L, next, out);
}

static void store_point(nest_gen *g, LLVMValueRef v) {
  ljc_ir *ir = g->kc->ir;
  const ljg_nest *nest = g->nest;
  LLVMTypeRef st = ljc_storage_type(ir, nest->out_dtype);
  LLVMValueRef off = ljc_view_offset(ir, &g->kc->k->views[nest->out_view], &g->pt);
  LLVMValueRef p = LLVMBuildInBoundsGEP2(ir->b, st, g->kc->slot_ptr[nest->out_slot], &off, 1, "");
  LLVMBuildStore(ir->b, ljc_to_storage(ir, v, nest->out_dtype), p);
}

static void emit_point(nest_gen *g) {
  ljc_ir *ir = g->kc->ir;
  const ljg_nest *nest = g->nest;
  if (nest->rop < 0) {
    store_point(g, point_value(g));
    return;
  }
  LLVMValueRef acc[2], out[2];
  reduction_init(ir, &g->red, acc);
  emit_reduced(g, g->nkept, acc, out);
  LLVMValueRef v = out[0];
  switch (nest->rop) {
  case LJG_OP_MEAN: v = LLVMBuildFDiv(ir->b, v, ljc_const_f(LLVMTypeOf(v), (double)nest->rcount), ""); break;
  case LJG_OP_ARGMAX:
  case LJG_OP_ARGMIN: v = out[1]; break;
  default: break;
  }
  store_point(g, v);
}

static void emit_kept(nest_gen *g, int d) {
  ljc_ir *ir = g->kc->ir;
  if (d == g->nkept) {
    emit_point(g);
    return;
  }
  bool task = d == 0 && g->split;
  if (!task && g->nest->shape[d] == 0) return;
  loop L;
  LLVMValueRef lo = task ? g->begin : ljc_i64(ir, 0);
  LLVMValueRef hi = task ? g->end : ljc_i64(ir, g->nest->shape[d]);
  loop_begin(ir, &L, lo, hi, task, 0, NULL);
  g->pt.idx[d] = L.iv;
  emit_kept(g, d + 1);
  loop_end(ir, &L, NULL, NULL);
}

static void emit_nest(ljc_kctx *kc, const ljg_nest *nest, LLVMValueRef begin, LLVMValueRef end) {
  nest_gen g = {0};
  g.kc = kc;
  g.nest = nest;
  g.pt.ndim = nest->ndim;
  g.nkept = nest->ndim - __builtin_popcount(nest->rmask);
  g.split = kc->k->task_dim == 0;
  g.begin = begin;
  g.end = end;
  if (nest->rop >= 0) g.red = reduction_of(kc->ir, nest->rop, kc->k->exprs[nest->value].dtype);
  for (int d = g.nkept; d < nest->ndim; d++) LJ_ASSERT(nest->rmask >> d & 1);
  emit_kept(&g, 0);
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

/* C[row, :] += a[k] * B[k, :] for each k: for B contiguous along n. */
static void matmul_axpy(ljc_kctx *kc, LLVMValueRef bi, LLVMValueRef mi, LLVMValueRef row, LLVMTypeRef t) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  bool isfloat = ljg_dtype_is_float(k->mm_dtype);
  loop z;
  loop_begin(ir, &z, ljc_i64(ir, 0), ljc_i64(ir, k->mm_n), false, 0, NULL);
  LLVMBuildStore(b, isfloat ? ljc_const_f(t, 0) : ljc_const_i(t, 0), LLVMBuildInBoundsGEP2(b, t, row, &z.iv, 1, ""));
  loop_end(ir, &z, NULL, NULL);
  if (k->mm_k == 0) return;
  loop kk;
  loop_begin(ir, &kk, ljc_i64(ir, 0), ljc_i64(ir, k->mm_k), false, 0, NULL);
  LLVMValueRef a = mm_load(kc, k->mm_a, bi, mi, kk.iv);
  loop n;
  loop_begin(ir, &n, ljc_i64(ir, 0), ljc_i64(ir, k->mm_n), false, 0, NULL);
  LLVMValueRef bv = mm_load(kc, k->mm_bm, bi, kk.iv, n.iv);
  LLVMValueRef cp = LLVMBuildInBoundsGEP2(b, t, row, &n.iv, 1, "");
  LLVMValueRef c = LLVMBuildLoad2(b, t, cp, "");
  c = isfloat ? ljc_fmuladd(ir, a, bv, c) : LLVMBuildAdd(b, c, LLVMBuildMul(b, a, bv, ""), "");
  LLVMBuildStore(b, c, cp);
  loop_end(ir, &n, NULL, NULL);
  loop_end(ir, &kk, NULL, NULL);
}

/* C[row, n] = A[row, :] . B[:, n] for each n: for B contiguous along k. */
static void matmul_dot(ljc_kctx *kc, LLVMValueRef bi, LLVMValueRef mi, LLVMValueRef row, LLVMTypeRef t) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  bool isfloat = ljg_dtype_is_float(k->mm_dtype);
  LLVMValueRef zero = isfloat ? ljc_const_f(t, 0) : ljc_const_i(t, 0);
  loop n;
  loop_begin(ir, &n, ljc_i64(ir, 0), ljc_i64(ir, k->mm_n), false, 0, NULL);
  LLVMValueRef acc = zero;
  if (k->mm_k > 0) {
    loop kk;
    loop_begin(ir, &kk, ljc_i64(ir, 0), ljc_i64(ir, k->mm_k), false, 1, &zero);
    LLVMValueRef a = mm_load(kc, k->mm_a, bi, mi, kk.iv), bv = mm_load(kc, k->mm_bm, bi, kk.iv, n.iv);
    LLVMValueRef next = isfloat ? reassoc(ljc_fmuladd(ir, a, bv, kk.acc[0]))
                                : LLVMBuildAdd(b, kk.acc[0], LLVMBuildMul(b, a, bv, ""), "");
    loop_end(ir, &kk, &next, &acc);
  }
  LLVMBuildStore(b, acc, LLVMBuildInBoundsGEP2(b, t, row, &n.iv, 1, ""));
  loop_end(ir, &n, NULL, NULL);
}

static void emit_matmul(ljc_kctx *kc, LLVMValueRef begin, LLVMValueRef end) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  if (k->mm_n == 0) return;
  LLVMTypeRef t = ljc_compute_type(ir, k->mm_dtype);
  const ljg_view1 *bview = ljg_view_top(&k->views[k->exprs[k->mm_bm].view]);
  bool dot = bview->stride[2] != 1 && bview->stride[1] == 1;
  loop rows;
  loop_begin(ir, &rows, begin, end, true, 0, NULL);
  LLVMValueRef bi = LLVMBuildUDiv(b, rows.iv, ljc_i64(ir, k->mm_m), "");
  LLVMValueRef mi = LLVMBuildURem(b, rows.iv, ljc_i64(ir, k->mm_m), "");
  LLVMValueRef rowoff = LLVMBuildNSWMul(b, rows.iv, ljc_i64(ir, k->mm_n), "");
  LLVMValueRef row = LLVMBuildInBoundsGEP2(b, t, kc->slot_ptr[k->mm_out_slot], &rowoff, 1, "");
  if (dot)
    matmul_dot(kc, bi, mi, row, t);
  else
    matmul_axpy(kc, bi, mi, row, t);
  loop_end(ir, &rows, NULL, NULL);
}

/* ---- kernels ------------------------------------------------------------------------------- */

/* used[s]: 1 when the kernel reads slot s, 2 when it writes it. */
static void mark_slots(const ljg_kernel *k, uint8_t *used) {
  for (int e = 0; e < k->nexprs; e++)
    if (k->exprs[e].kind == LJG_X_LOAD || k->exprs[e].kind == LJG_X_SCALAR) used[k->exprs[e].slot] = 1;
  for (int s = 0; s < k->nnests; s++) used[k->nests[s].out_slot] = 2;
  if (k->kind == LJG_K_MATMUL) used[k->mm_out_slot] = 2;
}

/* After the loops: report the first division-by-zero flag that is set. */
static void emit_error_checks(ljc_kctx *kc, LLVMValueRef err) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  for (int e = 0; e < k->nexprs; e++) {
    if (!kc->flags[e]) continue;
    LLVMBasicBlockRef report = LLVMAppendBasicBlockInContext(ir->ctx, fn, "div0");
    LLVMBasicBlockRef record = LLVMAppendBasicBlockInContext(ir->ctx, fn, "div0.record");
    LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(ir->ctx, fn, "div0.next");
    LLVMValueRef v = LLVMBuildLoad2(b, ir->i8, kc->flags[e], "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntNE, v, ljc_const_i(ir->i8, 0), ""), report, next);
    LLVMPositionBuilderAtEnd(b, report);
    LLVMValueRef x = LLVMBuildAtomicCmpXchg(b, err, ljc_const_i(ir->i32, 0),
                                            ljc_const_i(ir->i32, LJG_KERR_DIV_ZERO),
                                            LLVMAtomicOrderingSequentiallyConsistent,
                                            LLVMAtomicOrderingSequentiallyConsistent, 0);
    LLVMBuildCondBr(b, LLVMBuildExtractValue(b, x, 1, ""), record, next);
    LLVMPositionBuilderAtEnd(b, record);
    LLVMValueRef four = ljc_i64(ir, 4);
    LLVMBuildStore(b, ljc_const_i(ir->i32, k->exprs[e].node), LLVMBuildInBoundsGEP2(b, ir->i8, err, &four, 1, ""));
    LLVMBuildBr(b, next);
    LLVMPositionBuilderAtEnd(b, next);
  }
}

static void emit_kernel(ljc_ir *ir, const ljg_program *p, int ki, const char *name) {
  const ljg_kernel *k = &p->kernels[ki];
  LLVMBuilderRef b = ir->b;
  uint8_t *used = ljb_xcalloc((size_t)p->nslots + 1, sizeof *used);
  mark_slots(k, used);
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
  ljc_kctx kc = {ir, k, ljb_xcalloc((size_t)p->nslots + 1, sizeof(LLVMValueRef)),
                 ljb_xcalloc((size_t)k->nexprs + 1, sizeof(LLVMValueRef)),
                 ljb_xcalloc((size_t)k->nexprs + 1, sizeof(LLVMValueRef))};
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
  for (int e = 0; e < k->nexprs; e++)
    if (ljc_expr_divides(k, e)) {
      kc.flags[e] = LLVMBuildAlloca(b, ir->i8, "div0.flag");
      LLVMBuildStore(b, ljc_const_i(ir->i8, 0), kc.flags[e]);
    }
  if (k->kind == LJG_K_MATMUL) emit_matmul(&kc, begin, end);
  else
    for (int s = 0; s < k->nnests; s++) emit_nest(&kc, &k->nests[s], begin, end);
  emit_error_checks(&kc, err);
  LLVMBuildRetVoid(b);
  /* the entry point: loads the slot pointers and calls the body */
  LLVMTypeRef outer_p[4] = {ir->ptr, ir->i64, ir->i64, ir->ptr};
  LLVMTypeRef outer_t = LLVMFunctionType(ir->void_, outer_p, 4, 0);
  snprintf(fname, sizeof fname, "%s_k%d", name, ki);
  LLVMValueRef outer = LLVMAddFunction(ir->mod, fname, outer_t);
  ljc_add_fn_attr(ir, outer, "nounwind");
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ir->ctx, outer, "entry"));
  LLVMValueRef *args = ljb_xalloc(((size_t)nused + 3) * sizeof *args);
  for (int s = 0, a = 0; s < p->nslots; s++) {
    if (!used[s]) continue;
    LLVMValueRef idx = ljc_i64(ir, s);
    LLVMValueRef pp = LLVMBuildInBoundsGEP2(b, ir->ptr, LLVMGetParam(outer, 0), &idx, 1, "");
    args[a++] = LLVMBuildLoad2(b, ir->ptr, pp, "");
  }
  args[nused] = LLVMGetParam(outer, 1);
  args[nused + 1] = LLVMGetParam(outer, 2);
  args[nused + 2] = LLVMGetParam(outer, 3);
  LLVMBuildCall2(b, body_t, body, args, (unsigned)nused + 3, "");
  LLVMBuildRetVoid(b);
  free(args);
  free(ptypes);
  free(used);
  free(kc.slot_ptr);
  free(kc.vals);
  free(kc.flags);
}

void ljc_lower_program(ljc_ir *ir, const ljg_program *p, const char *name) {
  for (int i = 0; i < p->nkernels; i++) emit_kernel(ir, p, i, name);
}
