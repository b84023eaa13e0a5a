/* lower_expr.c — the value of kernel expressions at one point of a loop nest: loads through
 * views, scalars, constants, index leaves and every elementwise op, with PyTorch's semantics
 * per dtype class (float, integer with wrap-around, bool). Values are in compute types (f32
 * for 16-bit floats, rounded back after each op). Integer division by zero sets a per-
 * expression flag that the kernel reports after its loops; it never traps. */
#include "codegen_llvm/ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A view's top level has the point's dims, or none: a 0-d value read the same at every point
 * (the seed and offset of a random op, whatever computes them). */
LLVMValueRef ljc_view_offset(ljc_ir *ir, const ljg_view *v, const ljc_point *p) {
  LLVMBuilderRef b = ir->b;
  LLVMValueRef idx[LJ_MAX_DIMS];
  for (int d = 0; d < p->ndim; d++) idx[d] = p->idx[d];
  LLVMValueRef off = NULL;
  for (int l = v->n - 1; l >= 0; l--) {
    const ljg_view1 *t = &v->v[l];
    LJ_ASSERT(l < v->n - 1 || t->ndim == p->ndim || t->ndim == 0);
    off = ljc_i64(ir, t->offset);
    for (int d = 0; d < t->ndim; d++) {
      if (t->stride[d] == 0 || t->shape[d] == 1) continue;
      LLVMValueRef term = t->stride[d] == 1 ? idx[d] : LLVMBuildNSWMul(b, idx[d], ljc_i64(ir, t->stride[d]), "");
      off = LLVMBuildNSWAdd(b, off, term, "");
    }
    if (l == 0) break;
    /* the linear position in the level below, unravelled into its indices */
    const ljg_view1 *below = &v->v[l - 1];
    LLVMValueRef rem = off;
    for (int d = below->ndim - 1; d >= 0; d--) {
      int64_t sz = below->shape[d];
      if (sz <= 1) {
        idx[d] = ljc_i64(ir, 0);
        continue;
      }
      idx[d] = d == 0 ? rem : LLVMBuildURem(b, rem, ljc_i64(ir, sz), "");
      if (d > 0) rem = LLVMBuildUDiv(b, rem, ljc_i64(ir, sz), "");
    }
  }
  return off;
}

static LLVMValueRef const_of(ljc_ir *ir, lj_dtype dt, double v) {
  LLVMTypeRef t = ljc_compute_type(ir, dt);
  if (ljg_dtype_is_float(dt)) return ljc_const_f(t, v);
  if (dt == LJ_BOOL) return LLVMConstInt(ir->i1, v != 0, 0);
  return ljc_const_i(t, ljg_float_to_int(dt, v));
}

/* ---- float ops ----------------------------------------------------------------------------- */

static LLVMValueRef float_div_floor(ljc_ir *ir, LLVMValueRef a, LLVMValueRef bv) {
  LLVMBuilderRef b = ir->b;
  LLVMValueRef zero = ljc_fconst_like(a, 0), q = LLVMBuildFDiv(b, a, bv, "");
  LLVMValueRef mod = LLVMBuildFRem(b, a, bv, "");
  LLVMValueRef div = LLVMBuildFDiv(b, LLVMBuildFSub(b, a, mod, ""), bv, "");
  LLVMValueRef sign_differs = LLVMBuildXor(b, LLVMBuildFCmp(b, LLVMRealOLT, bv, zero, ""),
                                           LLVMBuildFCmp(b, LLVMRealOLT, mod, zero, ""), "");
  LLVMValueRef adjust = LLVMBuildAnd(b, LLVMBuildFCmp(b, LLVMRealUNE, mod, zero, ""), sign_differs, "");
  div = LLVMBuildSelect(b, adjust, LLVMBuildFSub(b, div, ljc_fconst_like(a, 1), ""), div, "");
  LLVMValueRef fl = ljc_intrinsic1(ir, "floor", div);
  LLVMValueRef up = LLVMBuildFCmp(b, LLVMRealOGT, LLVMBuildFSub(b, div, fl, ""), ljc_fconst_like(a, 0.5), "");
  fl = LLVMBuildSelect(b, up, LLVMBuildFAdd(b, fl, ljc_fconst_like(a, 1), ""), fl, "");
  LLVMValueRef r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNE, div, zero, ""), fl,
                                   ljc_intrinsic2(ir, "copysign", zero, q), "");
  return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, bv, zero, ""), q, r, "");
}

static LLVMValueRef float_remainder(ljc_ir *ir, LLVMValueRef a, LLVMValueRef bv) {
  LLVMBuilderRef b = ir->b;
  LLVMValueRef zero = ljc_fconst_like(a, 0);
  LLVMValueRef m = LLVMBuildFRem(b, a, bv, "");
  LLVMValueRef sign_differs = LLVMBuildXor(b, LLVMBuildFCmp(b, LLVMRealOLT, bv, zero, ""),
                                           LLVMBuildFCmp(b, LLVMRealOLT, m, zero, ""), "");
  LLVMValueRef adjust = LLVMBuildAnd(b, LLVMBuildFCmp(b, LLVMRealUNE, m, zero, ""), sign_differs, "");
  return LLVMBuildSelect(b, adjust, LLVMBuildFAdd(b, m, bv, ""), m, "");
}

/* num / (1 + exp(w)): sigmoid(x) is 1 / (1 + exp(-x)), x·sigmoid(v) divides x by 1 + exp(-v)
 * (no multiply after the division). */
static LLVMValueRef over_one_plus_exp(ljc_ir *ir, LLVMValueRef num, LLVMValueRef w) {
  LLVMValueRef e = ljc_vm_exp(ir, w);
  return LLVMBuildFDiv(ir->b, num, LLVMBuildFAdd(ir->b, ljc_fconst_like(w, 1), e, ""), "");
}

static LLVMValueRef float_op(ljc_ir *ir, int op, LLVMValueRef a, LLVMValueRef bv) {
  LLVMBuilderRef b = ir->b;
  LLVMValueRef zero = ljc_fconst_like(a, 0), one = ljc_fconst_like(a, 1), half = ljc_fconst_like(a, 0.5);
  switch (op) {
  case LJG_OP_NEG: return LLVMBuildFNeg(b, a, "");
  case LJG_OP_ABS: return ljc_intrinsic1(ir, "fabs", a);
  case LJG_OP_EXP: return ljc_vm_exp(ir, a);
  case LJG_OP_LOG: return ljc_vm_log(ir, a);
  case LJG_OP_LOG1P: return ljc_vm_log1p(ir, a);
  case LJG_OP_EXPM1: return ljc_vm_expm1(ir, a);
  case LJG_OP_SQRT: return ljc_intrinsic1(ir, "sqrt", a);
  case LJG_OP_RSQRT: return LLVMBuildFDiv(b, one, ljc_intrinsic1(ir, "sqrt", a), "");
  case LJG_OP_SIN: return ljc_vm_sin(ir, a);
  case LJG_OP_COS: return ljc_vm_cos(ir, a);
  case LJG_OP_TANH: return ljc_vm_tanh(ir, a);
  case LJG_OP_SIGMOID: return over_one_plus_exp(ir, one, LLVMBuildFNeg(b, a, ""));
  case LJG_OP_RELU: return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, a, zero, ""), zero, a, ""); /* keeps -0 and NaN */
  case LJG_OP_GELU: {
    /* x/2 (1 + erf(x/sqrt2)) written as x/2 erfc(-x/sqrt2): no cancellation for x < 0 */
    LLVMValueRef e = ljc_vm_erfc(ir, LLVMBuildFMul(b, a, ljc_fconst_like(a, -M_SQRT1_2), ""));
    return LLVMBuildFMul(b, LLVMBuildFMul(b, half, a, ""), e, "");
  }
  case LJG_OP_GELU_TANH: {
    /* x/2 (1 + tanh u) = x sigmoid(2u) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3):
     * -2u = x (c1 + c3 x^2), one multiply-add and two multiplies */
    double c1 = -2 * 0.7978845608028654;
    LLVMValueRef poly = ljc_fmuladd(ir, LLVMBuildFMul(b, a, a, ""), ljc_fconst_like(a, c1 * 0.044715), ljc_fconst_like(a, c1));
    return over_one_plus_exp(ir, a, LLVMBuildFMul(b, a, poly, ""));
  }
  case LJG_OP_SILU: return over_one_plus_exp(ir, a, LLVMBuildFNeg(b, a, ""));
  case LJG_OP_ERF: return ljc_vm_erf(ir, a);
  case LJG_OP_FLOOR: return ljc_intrinsic1(ir, "floor", a);
  case LJG_OP_CEIL: return ljc_intrinsic1(ir, "ceil", a);
  case LJG_OP_ROUND: return ljc_intrinsic1(ir, "roundeven", a);
  case LJG_OP_SIGN: {
    LLVMValueRef pos = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, a, zero, ""), one, zero, "");
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, a, zero, ""), ljc_fconst_like(a, -1), pos, "");
  }
  case LJG_OP_RECIPROCAL: return LLVMBuildFDiv(b, one, a, "");
  case LJG_OP_ADD: return LLVMBuildFAdd(b, a, bv, "");
  case LJG_OP_SUB: return LLVMBuildFSub(b, a, bv, "");
  case LJG_OP_MUL: return LLVMBuildFMul(b, a, bv, "");
  case LJG_OP_DIV: return LLVMBuildFDiv(b, a, bv, "");
  case LJG_OP_DIV_TRUNC: return ljc_intrinsic1(ir, "trunc", LLVMBuildFDiv(b, a, bv, ""));
  case LJG_OP_DIV_FLOOR: return float_div_floor(ir, a, bv);
  case LJG_OP_REMAINDER: return float_remainder(ir, a, bv);
  case LJG_OP_POW: return ljc_vm_pow(ir, a, bv);
  case LJG_OP_MAXIMUM:
  case LJG_OP_MINIMUM: {
    /* std::max / std::min (the first operand wins ties, -0 vs 0 too), NaN propagated */
    LLVMValueRef less = op == LJG_OP_MAXIMUM ? LLVMBuildFCmp(b, LLVMRealOLT, a, bv, "")
                                             : LLVMBuildFCmp(b, LLVMRealOLT, bv, a, "");
    LLVMValueRef r = LLVMBuildSelect(b, less, bv, a, "");
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, a, bv, ""), LLVMBuildFAdd(b, a, bv, ""), r, "");
  }
  case LJG_OP_EQ: return LLVMBuildFCmp(b, LLVMRealOEQ, a, bv, "");
  case LJG_OP_NE: return LLVMBuildFCmp(b, LLVMRealUNE, a, bv, "");
  case LJG_OP_LT: return LLVMBuildFCmp(b, LLVMRealOLT, a, bv, "");
  case LJG_OP_LE: return LLVMBuildFCmp(b, LLVMRealOLE, a, bv, "");
  case LJG_OP_GT: return LLVMBuildFCmp(b, LLVMRealOGT, a, bv, "");
  case LJG_OP_GE: return LLVMBuildFCmp(b, LLVMRealOGE, a, bv, "");
  case LJG_OP_LOGICAL_NOT: return LLVMBuildFCmp(b, LLVMRealOEQ, a, zero, "");
  case LJG_OP_ISNAN: return LLVMBuildFCmp(b, LLVMRealUNO, a, a, "");
  case LJG_OP_LOGICAL_AND:
  case LJG_OP_LOGICAL_OR: {
    LLVMValueRef x = LLVMBuildFCmp(b, LLVMRealUNE, a, zero, ""), y = LLVMBuildFCmp(b, LLVMRealUNE, bv, zero, "");
    return op == LJG_OP_LOGICAL_AND ? LLVMBuildAnd(b, x, y, "") : LLVMBuildOr(b, x, y, "");
  }
  default: LJ_UNREACHABLE("not an elementwise float op");
  }
}

/* ---- integer and bool ops -------------------------------------------------------------------- */

/* The truncated quotient and remainder of a by d (neither 0 nor, signed, -1). Integers of up to
 * 32 bits divide in floating point: f32 holds those of up to 16 bits exactly, f64 those of 32,
 * and the rounded quotient truncates to the exact one (for a = q·d + r with 0 < |r| < |d|,
 * |a/d - q| >= 1/|d|, more than half an ulp of a/d there), in vector code: x86 divides integers
 * one at a time (a remainder of 16M int32 by a scalar, one Zen 5 thread: 32 -> 3.5-4.1 ms). */
static void trunc_division(ljc_ir *ir, LLVMValueRef a, LLVMValueRef d, bool sgn, LLVMValueRef *q, LLVMValueRef *r) {
  LLVMBuilderRef b = ir->b;
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMTypeRef et = LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMGetElementType(t) : t;
  unsigned bits = LLVMGetIntTypeWidth(et);
  if (bits > 32) {
    *q = sgn ? LLVMBuildSDiv(b, a, d, "") : LLVMBuildUDiv(b, a, d, "");
    *r = sgn ? LLVMBuildSRem(b, a, d, "") : LLVMBuildURem(b, a, d, "");
    return;
  }
  LLVMTypeRef ft = bits <= 16 ? ir->f32 : ir->f64;
  if (et != t) ft = LLVMVectorType(ft, LLVMGetVectorSize(t));
  LLVMValueRef fa = sgn ? LLVMBuildSIToFP(b, a, ft, "") : LLVMBuildUIToFP(b, a, ft, "");
  LLVMValueRef fd = sgn ? LLVMBuildSIToFP(b, d, ft, "") : LLVMBuildUIToFP(b, d, ft, "");
  LLVMValueRef fq = ljc_intrinsic1(ir, "trunc", LLVMBuildFDiv(b, fa, fd, ""));
  *q = sgn ? LLVMBuildFPToSI(b, fq, t, "") : LLVMBuildFPToUI(b, fq, t, "");
  *r = LLVMBuildSub(b, a, LLVMBuildMul(b, *q, d, ""), "");
}

/* trunc/floor division or remainder; *zero is true where the divisor is 0 (result 0). */
static LLVMValueRef int_division(ljc_ir *ir, int op, LLVMValueRef a, LLVMValueRef bv, bool sgn,
                                 LLVMValueRef *zero) {
  LLVMBuilderRef b = ir->b;
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef z = ljc_const_i(t, 0), one = ljc_const_i(t, 1), q, r;
  *zero = LLVMBuildICmp(b, LLVMIntEQ, bv, z, "");
  if (!sgn) {
    trunc_division(ir, a, LLVMBuildSelect(b, *zero, one, bv, ""), false, &q, &r);
    return LLVMBuildSelect(b, *zero, z, op == LJG_OP_REMAINDER ? r : q, "");
  }
  /* b == -1 is done apart: INT_MIN / -1 would trap */
  LLVMValueRef m1 = LLVMBuildICmp(b, LLVMIntEQ, bv, ljc_const_i(t, -1), "");
  LLVMValueRef safe = LLVMBuildSelect(b, LLVMBuildOr(b, *zero, m1, ""), one, bv, "");
  trunc_division(ir, a, safe, true, &q, &r);
  q = LLVMBuildSelect(b, m1, LLVMBuildNeg(b, a, ""), q, "");
  r = LLVMBuildSelect(b, m1, z, r, "");
  LLVMValueRef adjust = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntNE, r, z, ""),
                                     LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildXor(b, r, bv, ""), z, ""), "");
  LLVMValueRef res;
  if (op == LJG_OP_DIV_TRUNC) res = q;
  else if (op == LJG_OP_DIV_FLOOR) res = LLVMBuildSub(b, q, LLVMBuildZExt(b, adjust, t, ""), "");
  else res = LLVMBuildAdd(b, r, LLVMBuildSelect(b, adjust, bv, z, ""), "");
  return LLVMBuildSelect(b, *zero, z, res, "");
}

static LLVMValueRef int_op(ljc_ir *ir, int op, LLVMValueRef a, LLVMValueRef bv, bool sgn,
                           LLVMValueRef *zero) {
  LLVMBuilderRef b = ir->b;
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef z = ljc_const_i(t, 0);
  switch (op) {
  case LJG_OP_NEG: return LLVMBuildNeg(b, a, "");
  case LJG_OP_ABS:
    return sgn ? LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, a, z, ""), LLVMBuildNeg(b, a, ""), a, "") : a;
  case LJG_OP_RELU: return sgn ? ljc_intrinsic2(ir, "smax", a, z) : a;
  case LJG_OP_FLOOR:
  case LJG_OP_CEIL:
  case LJG_OP_ROUND: return a;
  case LJG_OP_SIGN: {
    LLVMValueRef pos = LLVMBuildZExt(b, LLVMBuildICmp(b, sgn ? LLVMIntSGT : LLVMIntUGT, a, z, ""), t, "");
    if (!sgn) return pos;
    return LLVMBuildSub(b, pos, LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntSLT, a, z, ""), t, ""), "");
  }
  case LJG_OP_ADD: return LLVMBuildAdd(b, a, bv, "");
  case LJG_OP_SUB: return LLVMBuildSub(b, a, bv, "");
  case LJG_OP_MUL: return LLVMBuildMul(b, a, bv, "");
  case LJG_OP_POW: return ljc_vm_ipow(ir, a, bv, sgn);
  case LJG_OP_MAXIMUM: return ljc_intrinsic2(ir, sgn ? "smax" : "umax", a, bv);
  case LJG_OP_MINIMUM: return ljc_intrinsic2(ir, sgn ? "smin" : "umin", a, bv);
  case LJG_OP_DIV_TRUNC:
  case LJG_OP_DIV_FLOOR:
  case LJG_OP_REMAINDER: return int_division(ir, op, a, bv, sgn, zero);
  case LJG_OP_EQ: return LLVMBuildICmp(b, LLVMIntEQ, a, bv, "");
  case LJG_OP_NE: return LLVMBuildICmp(b, LLVMIntNE, a, bv, "");
  case LJG_OP_LT: return LLVMBuildICmp(b, sgn ? LLVMIntSLT : LLVMIntULT, a, bv, "");
  case LJG_OP_LE: return LLVMBuildICmp(b, sgn ? LLVMIntSLE : LLVMIntULE, a, bv, "");
  case LJG_OP_GT: return LLVMBuildICmp(b, sgn ? LLVMIntSGT : LLVMIntUGT, a, bv, "");
  case LJG_OP_GE: return LLVMBuildICmp(b, sgn ? LLVMIntSGE : LLVMIntUGE, a, bv, "");
  case LJG_OP_LOGICAL_NOT: return LLVMBuildICmp(b, LLVMIntEQ, a, z, "");
  case LJG_OP_ISNAN: return LLVMConstInt(ir->i1, 0, 0);
  case LJG_OP_LOGICAL_AND:
  case LJG_OP_LOGICAL_OR: {
    LLVMValueRef x = LLVMBuildICmp(b, LLVMIntNE, a, z, ""), y = LLVMBuildICmp(b, LLVMIntNE, bv, z, "");
    return op == LJG_OP_LOGICAL_AND ? LLVMBuildAnd(b, x, y, "") : LLVMBuildOr(b, x, y, "");
  }
  default: LJ_UNREACHABLE("not an elementwise integer op");
  }
}

/* Bools are i1: sums saturate to true (or), products are and. */
static LLVMValueRef bool_op(ljc_ir *ir, int op, LLVMValueRef a, LLVMValueRef bv) {
  LLVMBuilderRef b = ir->b;
  switch (op) {
  case LJG_OP_ADD:
  case LJG_OP_MAXIMUM:
  case LJG_OP_LOGICAL_OR: return LLVMBuildOr(b, a, bv, "");
  case LJG_OP_MUL:
  case LJG_OP_MINIMUM:
  case LJG_OP_LOGICAL_AND: return LLVMBuildAnd(b, a, bv, "");
  case LJG_OP_SIGN: return a;
  case LJG_OP_LOGICAL_NOT: return LLVMBuildNot(b, a, "");
  case LJG_OP_ISNAN: return LLVMConstInt(ir->i1, 0, 0);
  case LJG_OP_EQ: return LLVMBuildICmp(b, LLVMIntEQ, a, bv, "");
  case LJG_OP_NE: return LLVMBuildICmp(b, LLVMIntNE, a, bv, "");
  case LJG_OP_LT: return LLVMBuildICmp(b, LLVMIntULT, a, bv, "");
  case LJG_OP_LE: return LLVMBuildICmp(b, LLVMIntULE, a, bv, "");
  case LJG_OP_GT: return LLVMBuildICmp(b, LLVMIntUGT, a, bv, "");
  case LJG_OP_GE: return LLVMBuildICmp(b, LLVMIntUGE, a, bv, "");
  default: LJ_UNREACHABLE("not an elementwise bool op");
  }
}

/* Whether expressions a and b of k compute the same value at every point of nests over the
 * same points: the same operation of the same operands, loads of one slot through equal
 * views, the same scalar or constant. */
static bool same_value(const ljg_kernel *k, int a, int b) {
  const ljg_kexpr *x = &k->exprs[a], *y = &k->exprs[b];
  if (a == b) return true;
  if (x->kind != y->kind || x->dtype != y->dtype || x->op != y->op || x->nin != y->nin ||
      memcmp(&x->value, &y->value, sizeof x->value) != 0)
    return false;
  switch (x->kind) {
  case LJG_X_LOAD: return x->slot == y->slot && ljg_view_equal(&k->views[x->view], &k->views[y->view]);
  case LJG_X_SCALAR: return x->slot == y->slot;
  case LJG_X_CONST: return true;
  case LJG_X_OP:
    for (int i = 0; i < x->nin; i++)
      if (!same_value(k, x->in[i], y->in[i])) return false;
    return true;
  default: return false; /* random numbers, iotas, gathers */
  }
}

/* Whether expression e of k is a - b with b, at every point, a float max along dims of a's
 * own values (an AMAX nest before the one computing e, the only writer of b's slot, over the
 * same points, reducing what a computes, its result read as it stores it): then a - b is at
 * most 0, or NaN (a softmax's x - max; attention's scores scaled, then shifted by their max). */
static bool below_its_max(const ljg_kernel *k, int e) {
  const ljg_kexpr *x = &k->exprs[e];
  if (x->kind != LJG_X_OP || x->op != LJG_OP_SUB || !ljg_dtype_is_float(x->dtype)) return false;
  const ljg_kexpr *b = &k->exprs[x->in[1]];
  if (b->kind != LJG_X_LOAD) return false;
  int max = -1, user = -1;
  bool *used = ljb_xcalloc((size_t)k->nexprs, sizeof *used);
  for (int s = 0; s < k->nnests; s++) {
    if (k->nests[s].out_slot == b->slot) max = max < 0 ? s : k->nnests;
    memset(used, 0, (size_t)k->nexprs * sizeof *used);
    ljg_nest_exprs(k, &k->nests[s], used);
    if (used[e] && user < 0) user = s;
  }
  free(used);
  if (max < 0 || max >= user) return false;
  const ljg_nest *m = &k->nests[max], *u = &k->nests[user];
  return m->rop == LJG_OP_AMAX && m->scatter_index < 0 && m->ndim == u->ndim &&
         memcmp(m->shape, u->shape, (size_t)m->ndim * sizeof *m->shape) == 0 && same_value(k, x->in[0], m->value) &&
         ljg_view_equal(&k->views[m->out_view], &k->views[b->view]);
}

static LLVMValueRef emit_op(ljc_kctx *kc, int e) {
  ljc_ir *ir = kc->ir;
  const ljg_kexpr *x = &kc->k->exprs[e];
  LLVMValueRef a[3] = {NULL, NULL, NULL};
  for (int i = 0; i < x->nin; i++) a[i] = kc->vals[x->in[i]];
  lj_dtype odt = kc->k->exprs[x->in[x->op == LJG_OP_WHERE ? 1 : 0]].dtype;
  if (x->op == LJG_OP_CAST) return ljc_cast(ir, a[0], odt, x->dtype);
  if (x->op == LJG_OP_WHERE) return LLVMBuildSelect(ir->b, a[0], a[1], a[2], "");
  LLVMValueRef r;
  if (x->op == LJG_OP_EXP && below_its_max(kc->k, x->in[0])) {
    r = ljc_vm_exp_nonpositive(ir, a[0]);
  } else if (ljg_dtype_is_float(odt)) {
    r = float_op(ir, x->op, a[0], a[1]);
  } else if (odt == LJ_BOOL) {
    r = bool_op(ir, x->op, a[0], a[1]);
  } else {
    if (x->op == LJG_OP_INDEX_CHECK) {
      LLVMValueRef bad = LLVMBuildOr(ir->b, LLVMBuildICmp(ir->b, LLVMIntSLT, a[0], ljc_i64(ir, 0), ""),
                                     LLVMBuildICmp(ir->b, LLVMIntSGE, a[0], ljc_i64(ir, (int64_t)x->value), ""), "");
      ljc_fail_where(kc, kc->expr_check[e], bad, a[0]);
      return a[0];
    }
    LLVMValueRef zero = NULL;
    r = int_op(ir, x->op, a[0], a[1], ljg_dtype_is_signed(odt), &zero);
    if (zero) ljc_fail_where(kc, kc->expr_check[e], zero, NULL);
  }
  return ljc_round_to(ir, r, x->dtype);
}

int ljc_expr_check(const ljg_kernel *k, int e) {
  const ljg_kexpr *x = &k->exprs[e];
  if (x->kind == LJG_X_GATHER) return LJG_KERR_INDEX;
  if (x->kind != LJG_X_OP) return LJG_KERR_NONE;
  if (x->op == LJG_OP_INDEX_CHECK) return LJG_KERR_INDEX;
  if (x->op != LJG_OP_DIV_TRUNC && x->op != LJG_OP_DIV_FLOOR && x->op != LJG_OP_REMAINDER) return LJG_KERR_NONE;
  lj_dtype odt = k->exprs[x->in[0]].dtype;
  return !ljg_dtype_is_float(odt) && odt != LJ_BOOL ? LJG_KERR_DIV_ZERO : LJG_KERR_NONE;
}

void ljc_fail_where(ljc_kctx *kc, int check, LLVMValueRef bad, LLVMValueRef value) {
  ljc_ir *ir = kc->ir;
  const ljc_check *c = &kc->checks[check];
  LLVMValueRef old = LLVMBuildLoad2(ir->b, ir->i8, c->flag, "");
  LLVMBuildStore(ir->b, LLVMBuildOr(ir->b, old, LLVMBuildZExt(ir->b, bad, ir->i8, ""), ""), c->flag);
  if (c->badval && value) {
    /* the smallest bad value: a min reduction, which vectorizes (keeping the last one does not) */
    LLVMValueRef prev = LLVMBuildLoad2(ir->b, ir->i64, c->badval, "");
    LLVMValueRef cand = LLVMBuildSelect(ir->b, bad, value, ljc_i64(ir, INT64_MAX), "");
    LLVMValueRef less = LLVMBuildICmp(ir->b, LLVMIntSLT, cand, prev, "");
    LLVMBuildStore(ir->b, LLVMBuildSelect(ir->b, less, cand, prev, ""), c->badval);
  }
}

/* x[point with dim replaced by the index value], the index checked against the dim's size
 * (a bad index reads element 0 and is reported after the loops). Along a dim of at most
 * LJC_SMALL_DIM elements every candidate is loaded and the index selects one: loads at fixed
 * positions vectorize, a load at a computed address does not (max-pool reads 4 of them). */
static LLVMValueRef emit_gather(ljc_kctx *kc, int e, const ljc_point *p) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kexpr *x = &kc->k->exprs[e], *buf = &kc->k->exprs[x->in[1]];
  int64_t n = (int64_t)x->value;
  LLVMValueRef index = LLVMBuildIntCast2(b, kc->vals[x->in[0]], ir->i64, 1, ""); /* i32 or i64 */
  LLVMValueRef bad = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSLT, index, ljc_i64(ir, 0), ""),
                                 LLVMBuildICmp(b, LLVMIntSGE, index, ljc_i64(ir, n), ""), "");
  ljc_fail_where(kc, kc->expr_check[e], bad, index);
  ljc_point q = *p;
  LLVMTypeRef st = ljc_storage_type(ir, buf->dtype);
  if (n < 1 || n > LJC_SMALL_DIM) {
    q.idx[x->aux] = LLVMBuildSelect(b, bad, ljc_i64(ir, 0), index, "");
    LLVMValueRef off = ljc_slot_offset(kc, buf->slot, &kc->k->views[buf->view], &q);
    LLVMValueRef ptr = LLVMBuildInBoundsGEP2(b, st, kc->slot_ptr[buf->slot], &off, 1, "");
    return ljc_from_storage(ir, LLVMBuildLoad2(b, st, ptr, ""), buf->dtype);
  }
  LLVMValueRef v = NULL;
  for (int64_t c = 0; c < n; c++) {
    q.idx[x->aux] = ljc_i64(ir, c);
    LLVMValueRef off = ljc_slot_offset(kc, buf->slot, &kc->k->views[buf->view], &q);
    LLVMValueRef ld = LLVMBuildLoad2(b, st, LLVMBuildInBoundsGEP2(b, st, kc->slot_ptr[buf->slot], &off, 1, ""), "");
    v = c == 0 ? ld : LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, index, ljc_i64(ir, c), ""), ld, v, "");
  }
  return ljc_from_storage(ir, v, buf->dtype);
}

LLVMValueRef ljc_slot_offset(ljc_kctx *kc, int32_t slot, const ljg_view *v, const ljc_point *p) {
  LLVMValueRef off = ljc_view_offset(kc->ir, v, p);
  LLVMValueRef origin = kc->slot_origin ? kc->slot_origin[slot] : NULL;
  return origin ? LLVMBuildSub(kc->ir->b, off, origin, "") : off;
}

static LLVMValueRef load_slot(ljc_kctx *kc, int32_t slot, lj_dtype dt, LLVMValueRef off) {
  ljc_ir *ir = kc->ir;
  LLVMTypeRef st = ljc_storage_type(ir, dt);
  LLVMValueRef p = kc->slot_ptr[slot];
  if (off) p = LLVMBuildInBoundsGEP2(ir->b, st, p, &off, 1, "");
  return ljc_from_storage(ir, LLVMBuildLoad2(ir->b, st, p, ""), dt);
}

void ljc_emit_exprs(ljc_kctx *kc, const ljc_point *p, int root) {
  ljc_ir *ir = kc->ir;
  const ljg_kernel *k = kc->k;
  /* only the expressions the root uses (other nests have their own) */
  bool *used = ljb_xcalloc((size_t)root + 1, sizeof *used);
  used[root] = true;
  for (int e = root; e >= 0; e--)
    if (used[e])
      for (int i = 0; i < k->exprs[e].nin; i++) used[k->exprs[e].in[i]] = true;
  for (int e = 0; e <= root; e++) {
    if (!used[e]) continue;
    const ljg_kexpr *x = &k->exprs[e];
    LLVMValueRef v = NULL;
    ljc_dbg_at(ir, x->node);
    switch (x->kind) {
    case LJG_X_LOAD:
      if (e == kc->found_load)
        v = kc->found;
      else if (kc->load_at[e])
        v = ljc_from_storage(ir, LLVMBuildLoad2(ir->b, ljc_storage_type(ir, x->dtype), kc->load_at[e], ""), x->dtype);
      else
        v = load_slot(kc, x->slot, x->dtype, ljc_slot_offset(kc, x->slot, &k->views[x->view], p));
      break;
    case LJG_X_SCALAR: v = load_slot(kc, x->slot, x->dtype, NULL); break;
    case LJG_X_CONST: v = const_of(ir, x->dtype, x->value); break;
    case LJG_X_INDEX: {
      LLVMValueRef idx = ljc_view_offset(ir, &k->views[x->view], p);
      v = x->op == LJG_OP_IOTA ? idx
                               : ljc_random(ir, x->op, x->dtype, idx, kc->vals[x->in[0]], kc->vals[x->in[1]]);
      break;
    }
    case LJG_X_OP: v = emit_op(kc, e); break;
    case LJG_X_BUFFER: break; /* read by GATHER only */
    case LJG_X_GATHER: v = emit_gather(kc, e, p); break;
    }
    kc->vals[e] = v;
  }
  free(used);
}
