/* vmath.c — transcendental functions emitted as branch-free IR: range reduction, a
 * polynomial, reconstruction, and selects for the special values. No libm calls (but for sin
 * and cos of huge arguments), so the loop vectorizer turns them into AVX-512 code. f64
 * versions use enough terms for ~1 ulp; f32 versions fewer (pow of f32 is computed in f64,
 * which keeps it accurate over the whole range at little cost).
 *
 * Polynomials are Taylor series where those converge fast on the reduced range (f64 exp, log,
 * sin, cos, expm1, erf near 0) and fitted ones for f32 exp (tools/gen_exp_coeffs.py: one term
 * fewer for the same accuracy) and erfc (pieces: vmath_erf.h, from tools/gen_erf_coeffs.py).
 * sin and cos reduce by π/2 in three parts up to |x| = 2^20 and call libm beyond (a branch
 * no vector takes unless one of its lanes is that large). Accuracy limits, documented in
 * docs/semantics.md: f64 pow has relative error about |y·ln x|·2^-53. */
#include "codegen_llvm/ir.h"
#include "codegen_llvm/vmath_erf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- small helpers --------------------------------------------------------------------- */

static LLVMValueRef K(LLVMValueRef like, double v) { return ljc_fconst_like(like, v); }

static LLVMValueRef sel(ljc_ir *ir, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(ir->b, c, a, b, "");
}

static LLVMValueRef fcmp(ljc_ir *ir, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFCmp(ir->b, p, a, b, "");
}

static LLVMValueRef vmul(ljc_ir *ir, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(ir->b, a, b, ""); }
static LLVMValueRef vadd(ljc_ir *ir, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(ir->b, a, b, ""); }
static LLVMValueRef vsub(ljc_ir *ir, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(ir->b, a, b, ""); }
static LLVMValueRef vdiv(ljc_ir *ir, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(ir->b, a, b, ""); }

/* c[0] + c[1] x + ... + c[n-1] x^(n-1), Horner. */
static LLVMValueRef poly(ljc_ir *ir, LLVMValueRef x, const double *c, int n) {
  LLVMValueRef acc = K(x, c[n - 1]);
  for (int i = n - 2; i >= 0; i--) acc = ljc_fmuladd(ir, acc, x, K(x, c[i]));
  return acc;
}

static LLVMTypeRef int_like(ljc_ir *ir, LLVMValueRef x) { return ljc_is_f64(x) ? ir->i64 : ir->i32; }

static LLVMValueRef to_f64(ljc_ir *ir, LLVMValueRef x) { return LLVMBuildFPExt(ir->b, x, ir->f64, ""); }
static LLVMValueRef to_f32(ljc_ir *ir, LLVMValueRef x) { return LLVMBuildFPTrunc(ir->b, x, ir->f32, ""); }

/* ---- exp, expm1 -------------------------------------------------------------------------- */

/* exp(r) = 1 + r q(r) on |r| <= ln2/2 for f32, q fitted by tools/gen_exp_coeffs.py: relative
 * error at most 2e-9 before rounding, exp within 1.03 ulp over its whole range (the degree-7
 * Taylor series it replaced: 0.91 ulp, one multiply-add more). f64 keeps Taylor's 1/k!. */
static const double exp_f32_poly[] = {1, 1.0000000321457743, 0.49999994238073214, 0.16666431306090548,
                                      0.04166799461719353, 0.008374153009717951, 0.0013844084486564173};

/* ln2 in two parts for f32's reductions: n ln2 = n LN2_HI_F32 + n LN2_LO_F32 */
#define LN2_HI_F32 0.693145751953125
#define LN2_LO_F32 1.42860682030941723212e-6

/* x = n ln2 + r, |r| <= ln2/2, and p = exp(r): t = x log2(e) + 1.5·2^mant rounds n into t's
 * low bits (for x within a few hundred of 0; no float->int conversion, which would be poison
 * for NaN). x may be a vector (exp_avx512); n_out may be NULL. */
static void exp_reduce(ljc_ir *ir, LLVMValueRef x, LLVMValueRef *t, LLVMValueRef *n_out, LLVMValueRef *p) {
  bool d = ljc_is_f64(x);
  double ln2hi = d ? 6.93147180369123816490e-01 : LN2_HI_F32;
  double ln2lo = d ? 1.90821492927058770002e-10 : LN2_LO_F32;
  double c[16];
  int nc = d ? 14 : (int)LJ_COUNT_OF(exp_f32_poly);
  for (int i = 0; i < nc; i++) c[i] = d ? (i ? c[i - 1] / i : 1) : exp_f32_poly[i];
  double magic = d ? 0x1.8p52 : 0x1.8p23;
  *t = ljc_fmuladd(ir, x, K(x, 1.4426950408889634), K(x, magic));
  LLVMValueRef n = vsub(ir, *t, K(x, magic));
  LLVMValueRef r = ljc_fmuladd(ir, n, K(x, -ln2hi), x);
  r = ljc_fmuladd(ir, n, K(x, -ln2lo), r);
  *p = poly(ir, r, c, nc);
  if (n_out) *n_out = n;
}

/* With AVX-512, exp is a call of a function of the module, lj_vm_exp_f32 or _f64, that the loop
 * vectorizer replaces with its variant over a vector's lanes (the call's
 * vector-function-abi-variant) and that is inlined after it (ljc_optimize). The variant clamps
 * x to ±EXP_CLAMP (x86's max and min, which pass a NaN on) and scales p by 2^n with
 * vscalefps/pd, which rounds once into the subnormals and gives 0 and inf beyond them: the
 * generic code's integer add into p's exponent and its selects for the ranges (a compare and
 * a blend each, on the multiply-add pipes) made an exp of 16 lanes 7.3 cycles on Zen 5; this
 * one took 6.2 with exp_reduce's polynomial (f32 now reduces to sixteenths: 5.4). */
#define EXP_CLAMP_F32 110.0
#define EXP_CLAMP_F64 1100.0

/* A call of the x86 intrinsic `name` with n <= 5 arguments, returning the first's type. */
static LLVMValueRef x86_vector_op(ljc_ir *ir, const char *name, int n, LLVMValueRef *args) {
  LLVMTypeRef params[5];
  LJ_ASSERT(n <= 5);
  for (int i = 0; i < n; i++) params[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef fty = LLVMFunctionType(params[0], params, (unsigned)n, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(ir->mod, name);
  if (!fn) fn = LLVMAddFunction(ir->mod, name, fty);
  return LLVMBuildCall2(ir->b, fty, fn, args, (unsigned)n, "");
}

/* f32 exp of 16 lanes from a table of sixteenths (tools/gen_exp_coeffs.py): x = (n + j/16) ln2
 * + r with |r| <= ln2/32, and exp(x) = 2^n T[j] (1 + p(r)). T[j] = 2^((j + c)/16) for the
 * shift c = 0.144513, with which every entry is within 0.21 ulp of its value (up to 0.5 for
 * c = 0), and the cubic p fits exp(r - c ln2/16) - 1 within 1.2e-9: exp within 0.75 ulp over
 * the normal results. Against exp_reduce's degree-6 polynomial it takes a permute (vpermps,
 * indexed by t's low four bits) for three multiply-adds: 5.4 cycles a vector on Zen 5, 6.4
 * before (microbenchmarks of the two sequences with a load, a sum and a store). Sets *y to
 * T[j] (1 + p(r)) and *k to n + j/16, which scalef floors. */
static const float exp_f32_table[16] = {
    0x1.019b94p+0f, 0x1.0d0354p+0f, 0x1.18ec58p+0f, 0x1.255c5ap+0f, 0x1.325954p+0f, 0x1.3fe984p+0f,
    0x1.4e136ep+0f, 0x1.5cdde0p+0f, 0x1.6c4ff6p+0f, 0x1.7c711cp+0f, 0x1.8d4912p+0f, 0x1.9edff0p+0f,
    0x1.b13e2ap+0f, 0x1.c46c94p+0f, 0x1.d87464p+0f, 0x1.ed5f3cp+0f};
static const double exp_f32_table_poly[] = {-0.00624099339354971, 0.9937590102091565, 0.49689893094633536,
                                            0.1656227383916964};

static void exp_sixteenths(ljc_ir *ir, LLVMValueRef x, LLVMValueRef *k, LLVMValueRef *y) {
  LLVMValueRef magic = K(x, 0x1.8p19); /* t = x log2(e) + magic rounds to sixteenths */
  LLVMValueRef t = ljc_fmuladd(ir, x, K(x, 1.4426950408889634), magic);
  *k = vsub(ir, t, magic);
  LLVMValueRef r = ljc_fmuladd(ir, *k, K(x, -LN2_HI_F32), x);
  r = ljc_fmuladd(ir, *k, K(x, -LN2_LO_F32), r);
  LLVMValueRef table[16];
  for (int i = 0; i < 16; i++) table[i] = LLVMConstReal(ir->f32, exp_f32_table[i]);
  LLVMValueRef args[2] = {LLVMConstVector(table, 16), LLVMBuildBitCast(ir->b, t, LLVMVectorType(ir->i32, 16), "")};
  LLVMValueRef tj = x86_vector_op(ir, "llvm.x86.avx512.permvar.sf.512", 2, args);
  *y = ljc_fmuladd(ir, tj, poly(ir, r, exp_f32_table_poly, (int)LJ_COUNT_OF(exp_f32_table_poly)), tj);
}

/* exp of vector x (16 f32 or 8 f64 lanes) with AVX-512's scalef; x clamped above only when
 * it may be above 0 (ljc_vm_exp_nonpositive). */
static LLVMValueRef exp_avx512(ljc_ir *ir, LLVMValueRef x, bool nonpositive) {
  bool d = ljc_is_f64(x);
  double clamp = d ? EXP_CLAMP_F64 : EXP_CLAMP_F32;
  LLVMValueRef rounding = ljc_const_i(ir->i32, 4); /* the current mode */
  LLVMValueRef lo[3] = {K(x, -clamp), x, rounding};
  x = x86_vector_op(ir, d ? "llvm.x86.avx512.max.pd.512" : "llvm.x86.avx512.max.ps.512", 3, lo);
  if (!nonpositive) {
    LLVMValueRef hi[3] = {K(x, clamp), x, rounding};
    x = x86_vector_op(ir, d ? "llvm.x86.avx512.min.pd.512" : "llvm.x86.avx512.min.ps.512", 3, hi);
  }
  LLVMValueRef t, n, p;
  if (d)
    exp_reduce(ir, x, &t, &n, &p);
  else
    exp_sixteenths(ir, x, &n, &p);
  LLVMValueRef all = d ? ljc_const_i(ir->i8, -1) : ljc_const_i(ir->i16, -1);
  LLVMValueRef args[5] = {p, n, LLVMGetUndef(LLVMTypeOf(p)), all, rounding};
  return x86_vector_op(ir, d ? "llvm.x86.avx512.mask.scalef.pd.512" : "llvm.x86.avx512.mask.scalef.ps.512", 5, args);
}

/* Lists fn in llvm.compiler.used. A function whose address is taken keeps its calling
 * convention: otherwise the GlobalOpt of an O2/O3 pipeline (LJ_OPT_LEVEL=3) makes the helpers
 * fastcc, and a call the SLP vectorizer adds afterwards, in the C convention, is undefined (a
 * softmax's kernel compiled to an endless loop). ljc_optimize drops the list. Room for every
 * helper of both dtypes with its variants (vm_call: 5 functions a helper over 16 lanes). */
static void keep_convention(ljc_ir *ir, LLVMValueRef fn) {
  LLVMValueRef elems[64], old = LLVMGetNamedGlobal(ir->mod, "llvm.compiler.used");
  unsigned n = 0;
  if (old) {
    LLVMValueRef init = LLVMGetInitializer(old);
    n = (unsigned)LLVMGetNumOperands(init);
    LJ_ASSERT(n < LJ_COUNT_OF(elems));
    for (unsigned i = 0; i < n; i++) elems[i] = LLVMGetOperand(init, i);
    LLVMDeleteGlobal(old);
  }
  elems[n++] = fn;
  LLVMValueRef g = LLVMAddGlobal(ir->mod, LLVMArrayType2(ir->ptr, n), "llvm.compiler.used");
  LLVMSetLinkage(g, LLVMAppendingLinkage);
  LLVMSetSection(g, "llvm.metadata");
  LLVMSetInitializer(g, LLVMConstArray2(ir->ptr, elems, n));
}

/* A helper of the module (LJC_VM_PREFIX) that computes nothing but its result; ljc_optimize
 * inlines it after the loop vectorizer, which needs the call whole. One definition for every
 * module of a name (linkonce_odr: a helper's name says all its code depends on), so that the
 * modules of kernels linked into one before their optimization (session.c's groups) share it:
 * internal, the second module's copy was renamed, its calls' vector variants (which name the
 * helper) no longer matched it, and the loop vectorizer left their loops scalar (an LSTM's
 * cells, [32, 256] with three sigmoids and two tanhs, 8 µs a step -> 165). */
static LLVMValueRef vm_function(ljc_ir *ir, const char *name, LLVMTypeRef fty) {
  LLVMValueRef fn = LLVMAddFunction(ir->mod, name, fty);
  keep_convention(ir, fn);
  LLVMSetLinkage(fn, LLVMLinkOnceODRLinkage);
  ljc_add_fn_attr(ir, fn, "nounwind");
  ljc_add_fn_attr(ir, fn, "willreturn");
  ljc_add_fn_attr(ir, fn, "noinline");
  unsigned memory = LLVMGetEnumAttributeKindForName("memory", 6);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ir->ctx, memory, 0));
  LLVMPositionBuilderAtEnd(ir->b, LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry"));
  return fn;
}

/* The body of a helper on a vector of lanes: builds its result from the helper's parameter x
 * at the builder's position (the helper's entry block), in which it may add blocks. */
typedef LLVMValueRef (*vm_body)(ljc_ir *ir, LLVMValueRef x, int variant);

/* Helper `name`x`lanes` over a vector of `lanes` lanes of st, fewer than `full`: runs
 * `full`x`full` on its lanes repeated to fill a vector of `full` (what the loop vectorizer calls
 * where it takes fewer lanes than a vector's at a time: a row of 16 in two halves). */
static void vm_narrow(ljc_ir *ir, const char *name, LLVMTypeRef st, unsigned lanes, unsigned full, LLVMValueRef vfull) {
  char vname[64];
  snprintf(vname, sizeof vname, "%sx%u", name, lanes);
  LLVMTypeRef nt = LLVMVectorType(st, lanes), ft = LLVMVectorType(st, full);
  LLVMTypeRef nfty = LLVMFunctionType(nt, &nt, 1, 0), ffty = LLVMFunctionType(ft, &ft, 1, 0);
  LLVMValueRef fn = vm_function(ir, vname, nfty), wide[64], narrow[64];
  for (unsigned i = 0; i < full; i++) wide[i] = ljc_const_i(ir->i32, (int64_t)(i % lanes));
  for (unsigned i = 0; i < lanes; i++) narrow[i] = ljc_const_i(ir->i32, (int64_t)i);
  LLVMValueRef v = LLVMGetParam(fn, 0);
  v = LLVMBuildShuffleVector(ir->b, v, LLVMGetUndef(nt), LLVMConstVector(wide, full), "");
  v = LLVMBuildCall2(ir->b, ffty, vfull, &v, 1, "");
  LLVMBuildRet(ir->b, LLVMBuildShuffleVector(ir->b, v, LLVMGetUndef(ft), LLVMConstVector(narrow, lanes), ""));
}

/* A call of helper `name` on scalar x, with its variants over `lanes` lanes (the call's
 * vector-function-abi-variant) built by body(ir, vector, variant), and over fewer (half,
 * quarter... down to 2: vm_narrow); the scalar helper runs the variant on one lane, so every
 * point gets the same result however its loop runs. Without the narrower variants, a loop the
 * vectorizer took 8 lanes at a time ran the helper once a lane: softmax over [1048576, 16],
 * one Zen 5 thread, 37-41 ms. */
static LLVMValueRef vm_call(ljc_ir *ir, LLVMValueRef x, const char *name, unsigned lanes, vm_body body,
                            int variant) {
  char vname[64];
  snprintf(vname, sizeof vname, "%sx%u", name, lanes);
  LLVMTypeRef st = LLVMTypeOf(x), vt = LLVMVectorType(st, lanes);
  LLVMTypeRef fty = LLVMFunctionType(st, &st, 1, 0), vfty = LLVMFunctionType(vt, &vt, 1, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(ir->mod, name);
  if (!fn) {
    LLVMBasicBlockRef saved = LLVMGetInsertBlock(ir->b);
    LLVMMetadataRef saved_loc = LLVMGetCurrentDebugLocation2(ir->b); /* the helpers have no debug info */
    LLVMSetCurrentDebugLocation2(ir->b, NULL);
    LLVMValueRef vfn = vm_function(ir, vname, vfty);
    LLVMBuildRet(ir->b, body(ir, LLVMGetParam(vfn, 0), variant));
    for (unsigned l = lanes / 2; l >= 2; l /= 2) vm_narrow(ir, name, st, l, lanes, vfn);
    fn = vm_function(ir, name, fty);
    LLVMValueRef zero = ljc_const_i(ir->i32, 0);
    LLVMValueRef v = LLVMBuildInsertElement(ir->b, LLVMGetUndef(vt), LLVMGetParam(fn, 0), zero, "");
    v = LLVMBuildShuffleVector(ir->b, v, LLVMGetUndef(vt), LLVMConstNull(LLVMVectorType(ir->i32, lanes)), "");
    v = LLVMBuildCall2(ir->b, vfty, vfn, &v, 1, "");
    LLVMBuildRet(ir->b, LLVMBuildExtractElement(ir->b, v, zero, ""));
    LLVMPositionBuilderAtEnd(ir->b, saved);
    LLVMSetCurrentDebugLocation2(ir->b, saved_loc);
  }
  LLVMValueRef call = LLVMBuildCall2(ir->b, fty, fn, &x, 1, "");
  char variant_attr[512];
  int n = 0;
  for (unsigned l = lanes; l >= 2; l /= 2)
    n += snprintf(variant_attr + n, sizeof variant_attr - (size_t)n, "%s_ZGV_LLVM_N%uv_%s(%sx%u)",
                  l == lanes ? "" : ",", l, name, name, l);
  static const char key[] = "vector-function-abi-variant";
  LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex,
                           LLVMCreateStringAttribute(ir->ctx, key, sizeof key - 1, variant_attr, (unsigned)n));
  return call;
}

static LLVMValueRef exp_body(ljc_ir *ir, LLVMValueRef x, int nonpositive) { return exp_avx512(ir, x, nonpositive); }

static LLVMValueRef exp_call(ljc_ir *ir, LLVMValueRef x, bool nonpositive) {
  bool d = ljc_is_f64(x);
  char name[48];
  snprintf(name, sizeof name, LJC_VM_PREFIX "exp%s_f%d", nonpositive ? "_nonpositive" : "", d ? 64 : 32);
  return vm_call(ir, x, name, d ? 8 : 16, exp_body, nonpositive);
}

LLVMValueRef ljc_vm_exp_nonpositive(ljc_ir *ir, LLVMValueRef x) {
  return ir->vec_bytes == 64 ? exp_call(ir, x, true) : ljc_vm_exp(ir, x);
}

LLVMValueRef ljc_vm_exp(ljc_ir *ir, LLVMValueRef x) {
  if (ir->vec_bytes == 64) return exp_call(ir, x, false);
  bool d = ljc_is_f64(x);
  LLVMTypeRef it = int_like(ir, x);
  /* results above the largest finite value are inf, below the smallest normal one 0 */
  double hi = d ? 0x1.62e42fefa39efp+9 : 0x1.62e42ep+6;    /* the largest x with n ln2 <= max */
  double lo = d ? -0x1.6232bdd7abcd2p+9 : -0x1.5d589ep+6; /* the smallest with n ln2 >= min */
  LLVMValueRef t, p;
  exp_reduce(ir, x, &t, NULL, &p);
  /* p · 2^n by adding n to p's exponent: within [lo, hi], n ≥ min exponent + 1 only where
   * p ≥ 1, and n = max exponent + 1 only where p < 1, so the sum stays a normal exponent */
  LLVMValueRef ni = LLVMBuildShl(ir->b, LLVMBuildBitCast(ir->b, t, it, ""), ljc_const_i(it, d ? 52 : 23), "");
  LLVMValueRef res = LLVMBuildBitCast(ir->b, LLVMBuildAdd(ir->b, LLVMBuildBitCast(ir->b, p, it, ""), ni, ""), LLVMTypeOf(x), "");
  res = sel(ir, fcmp(ir, LLVMRealOLT, x, K(x, lo)), K(x, 0), res);
  /* above hi and NaN in one select: x + inf is inf for the one and NaN for the other (an add,
   * not a multiply, leaves the multiply-add units to the polynomial) */
  return sel(ir, fcmp(ir, LLVMRealOLE, x, K(x, hi)), res, vadd(ir, x, K(x, INFINITY)));
}

LLVMValueRef ljc_vm_expm1(ljc_ir *ir, LLVMValueRef x) {
  bool d = ljc_is_f64(x);
  int deg = d ? 15 : 9;
  double c[16];
  double f = 1;
  for (int i = 0; i < deg; i++) {
    f *= i + 1;
    c[i] = 1.0 / f; /* x^k / (k+1)! */
  }
  LLVMValueRef small = fcmp(ir, LLVMRealOLT, ljc_intrinsic1(ir, "fabs", x), K(x, 0.34657359027997264));
  LLVMValueRef taylor = vmul(ir, x, poly(ir, x, c, deg));
  LLVMValueRef big = vsub(ir, ljc_vm_exp(ir, x), K(x, 1));
  return sel(ir, small, taylor, big);
}

/* ---- log, log1p -------------------------------------------------------------------------- */

LLVMValueRef ljc_vm_log(ljc_ir *ir, LLVMValueRef x) {
  bool d = ljc_is_f64(x);
  LLVMBuilderRef b = ir->b;
  LLVMTypeRef it = int_like(ir, x);
  int mant = d ? 52 : 23, bias = d ? 1023 : 127;
  int nterms = d ? 12 : 5;
  double c[16];
  for (int i = 0; i < nterms; i++) c[i] = 2.0 / (2 * i + 1); /* log m = 2f(1 + s/3 + s^2/5 ...) */
  /* subnormals: scale into the normal range first */
  LLVMValueRef sub = fcmp(ir, LLVMRealOLT, x, K(x, d ? 0x1p-1022 : 0x1p-126));
  LLVMValueRef xs = sel(ir, sub, vmul(ir, x, K(x, d ? 0x1p54 : 0x1p24)), x);
  LLVMValueRef eadj = sel(ir, sub, K(x, d ? -54 : -24), K(x, 0));
  LLVMValueRef bits = LLVMBuildBitCast(b, xs, it, "");
  LLVMValueRef e = LLVMBuildLShr(b, bits, ljc_const_i(it, mant), "");
  e = LLVMBuildSub(b, e, ljc_const_i(it, bias), "");
  LLVMValueRef mbits = LLVMBuildAnd(b, bits, ljc_const_i(it, (int64_t)((1ULL << mant) - 1)), "");
  mbits = LLVMBuildOr(b, mbits, ljc_const_i(it, (int64_t)bias << mant), "");
  LLVMValueRef m = LLVMBuildBitCast(b, mbits, LLVMTypeOf(x), "");
  LLVMValueRef ef = vadd(ir, LLVMBuildSIToFP(b, e, LLVMTypeOf(x), ""), eadj);
  LLVMValueRef big = fcmp(ir, LLVMRealOGT, m, K(x, 1.4142135623730951));
  m = sel(ir, big, vmul(ir, m, K(x, 0.5)), m);
  ef = sel(ir, big, vadd(ir, ef, K(x, 1)), ef);
  LLVMValueRef f = vdiv(ir, vsub(ir, m, K(x, 1)), vadd(ir, m, K(x, 1)));
  LLVMValueRef s = vmul(ir, f, f);
  LLVMValueRef lm = vmul(ir, f, poly(ir, s, c, nterms));
  double ln2hi = d ? 6.93147180369123816490e-01 : 0.693145751953125;
  double ln2lo = d ? 1.90821492927058770002e-10 : 1.42860682030941723212e-6;
  LLVMValueRef res = ljc_fmuladd(ir, ef, K(x, ln2hi), ljc_fmuladd(ir, ef, K(x, ln2lo), lm));
  res = sel(ir, fcmp(ir, LLVMRealOEQ, x, K(x, INFINITY)), x, res);
  res = sel(ir, fcmp(ir, LLVMRealOEQ, x, K(x, 0)), K(x, -INFINITY), res);
  return sel(ir, fcmp(ir, LLVMRealULT, x, K(x, 0)), K(x, NAN), res);
}

LLVMValueRef ljc_vm_log1p(ljc_ir *ir, LLVMValueRef x) {
  /* log(u) * x / (u - 1) with u = 1 + x corrects the rounding of u */
  LLVMValueRef u = vadd(ir, x, K(x, 1));
  LLVMValueRef dd = vsub(ir, u, K(x, 1));
  LLVMValueRef r = vmul(ir, ljc_vm_log(ir, u), vdiv(ir, x, dd));
  r = sel(ir, fcmp(ir, LLVMRealOEQ, dd, K(x, 0)), x, r);
  return sel(ir, fcmp(ir, LLVMRealOEQ, x, K(x, INFINITY)), x, r);
}

/* ---- sin, cos ---------------------------------------------------------------------------- */

/* x reduced by k π/2 with π/2 in three parts of 33, 33 and 53 bits (fdlibm's pio2_1, pio2_2,
 * pio2_2t): k·part is exact for |k| < 2^20, so the reduction is good to about 2^20 (to 2^50
 * where the multiply-adds are fused); beyond TRIG_REDUCED_MAX the helpers call libm. */
#define TRIG_REDUCED_MAX 0x1p20

/* sin or cos of a double (or a vector of them), computed to f64 accuracy when `full`, else to
 * f32 accuracy, for |x| <= TRIG_REDUCED_MAX. */
static LLVMValueRef sin_cos(ljc_ir *ir, LLVMValueRef x, bool want_cos, bool full) {
  int ns = full ? 8 : 5, nc = full ? 9 : 6;
  double sc[10], cc[10];
  double f = 1;
  for (int i = 0; i < ns; i++) { /* -1/3!, 1/5!, ... */
    f *= (2 * i + 2) * (2 * i + 3);
    sc[i] = (i % 2 ? 1 : -1) / f;
  }
  f = 1;
  for (int i = 0; i < nc; i++) { /* -1/2!, 1/4!, ... */
    f *= (2 * i + 1) * (2 * i + 2);
    cc[i] = (i % 2 ? 1 : -1) / f;
  }
  /* k rounded by adding 1.5·2^52 (so -0 gives +0 and r keeps x's sign); beyond 2^51 garbage,
   * but only lanes that the callers take libm's results for get there */
  LLVMValueRef magic = K(x, 0x1.8p52);
  LLVMValueRef k = vsub(ir, ljc_fmuladd(ir, x, K(x, 0.63661977236758134308), magic), magic);
  LLVMValueRef r = ljc_fmuladd(ir, k, K(x, -1.57079632673412561417e+00), x);
  r = ljc_fmuladd(ir, k, K(x, -6.07710050630396597660e-11), r);
  r = ljc_fmuladd(ir, k, K(x, -2.02226624879595063154e-21), r);
  LLVMValueRef r2 = vmul(ir, r, r);
  /* r (1 + r² P(r²)) rather than r + r³ P(r²): sin(±0) is ±0 (that add gave +0) */
  LLVMValueRef s = vmul(ir, r, ljc_fmuladd(ir, r2, poly(ir, r2, sc, ns), K(x, 1)));
  LLVMValueRef c = ljc_fmuladd(ir, r2, poly(ir, r2, cc, nc), K(x, 1));
  /* quadrant q = k mod 4, in float so no conversion can be poison */
  LLVMValueRef q = vsub(ir, k, vmul(ir, ljc_intrinsic1(ir, "floor", vmul(ir, k, K(x, 0.25))), K(x, 4)));
  LLVMValueRef ns_ = LLVMBuildFNeg(ir->b, s, ""), nc_ = LLVMBuildFNeg(ir->b, c, "");
  LLVMValueRef q1 = fcmp(ir, LLVMRealOEQ, q, K(x, 1)), q2 = fcmp(ir, LLVMRealOEQ, q, K(x, 2)),
               q3 = fcmp(ir, LLVMRealOEQ, q, K(x, 3));
  if (want_cos) return sel(ir, q1, ns_, sel(ir, q2, nc_, sel(ir, q3, s, c)));
  return sel(ir, q1, c, sel(ir, q2, ns_, sel(ir, q3, nc_, s)));
}

/* sin or cos of a vector of floats within ±TRIG_REDUCED_MAX, in f32 (with fused
 * multiply-adds: sin_cos in f64 without them). x = k π/2 + rh + rl: k from a multiply-add
 * with 1.5·2^23, whose low bits are k (the quadrant, with no conversion that could be poison
 * for NaN); π/2 in three floats (c1 + c2 + c3), x - k c1 exact in the multiply-add, the rest
 * carried as r + rl. Cephes's sinf and cosf polynomials, rl's term added last. */
static LLVMValueRef sin_cos_f32(ljc_ir *ir, LLVMValueRef x, bool want_cos) {
  static const double sc[] = {-1.6666654611e-1, 8.3321608736e-3, -1.9515295891e-4};
  static const double cc[] = {4.166664568298827e-2, -1.388731625493765e-3, 2.443315711809948e-5};
  LLVMBuilderRef b = ir->b;
  unsigned lanes = LLVMGetVectorSize(LLVMTypeOf(x));
  LLVMTypeRef vi = LLVMVectorType(ir->i32, lanes);
  if (!ir->fma) {
    LLVMValueRef y = sin_cos(ir, LLVMBuildFPExt(b, x, LLVMVectorType(ir->f64, lanes), ""), want_cos, false);
    return LLVMBuildFPTrunc(b, y, LLVMTypeOf(x), "");
  }
  LLVMValueRef magic = K(x, 0x1.8p23);
  LLVMValueRef t = ljc_fmuladd(ir, x, K(x, 0x1.45f306p-1), magic), k = vsub(ir, t, magic);
  LLVMValueRef r1 = ljc_fmuladd(ir, k, K(x, -0x1.921fb6p+0), x);
  /* + k (c2 + c3) = eh + el (eh + el: k c2 exactly, then k c3), r1 + eh two-summed */
  LLVMValueRef eh = vmul(ir, k, K(x, 0x1.777a5cp-25));
  LLVMValueRef el = ljc_fmuladd(ir, k, K(x, 0x1.777a5cp-25), LLVMBuildFNeg(b, eh, ""));
  el = ljc_fmuladd(ir, k, K(x, 0x1.ee59dap-50), el);
  LLVMValueRef r = vadd(ir, r1, eh), bb = vsub(ir, r, r1);
  LLVMValueRef err = vadd(ir, vsub(ir, r1, vsub(ir, r, bb)), vsub(ir, eh, bb));
  LLVMValueRef rl = vadd(ir, err, el);
  LLVMValueRef q = LLVMBuildBitCast(b, t, vi, "");
  LLVMValueRef one = ljc_splat(ir, ljc_const_i(ir->i32, 1), vi), two = ljc_splat(ir, ljc_const_i(ir->i32, 2), vi);
  LLVMValueRef z = vmul(ir, r, r);
  /* sin: r + (rl + r z P(z)); sin(-0) is -0, which r1 + eh is not */
  LLVMValueRef sv = vadd(ir, r, ljc_fmuladd(ir, vmul(ir, r, z), poly(ir, z, sc, 3), rl));
  if (!want_cos) sv = sel(ir, fcmp(ir, LLVMRealOEQ, x, K(x, 0)), x, sv);
  /* cos: w + ((1 - w) - z/2 + (z² Q(z) - r rl)) with w = 1 - z/2 (fdlibm's kernel_cos) */
  LLVMValueRef hz = vmul(ir, z, K(x, 0.5)), w = vsub(ir, K(x, 1), hz);
  LLVMValueRef tail = ljc_fmuladd(ir, vmul(ir, z, z), poly(ir, z, cc, 3), LLVMBuildFNeg(b, vmul(ir, r, rl), ""));
  LLVMValueRef cv = vadd(ir, w, vadd(ir, vsub(ir, vsub(ir, K(x, 1), w), hz), tail));
  /* quadrant q: sin is s, c, -s, -c and cos c, -s, -c, s */
  LLVMValueRef odd = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, q, one, ""), LLVMConstNull(vi), "");
  LLVMValueRef res = sel(ir, odd, want_cos ? sv : cv, want_cos ? cv : sv);
  LLVMValueRef qs = want_cos ? LLVMBuildAdd(b, q, one, "") : q;
  LLVMValueRef sign = LLVMBuildShl(b, LLVMBuildAnd(b, qs, two, ""), ljc_splat(ir, ljc_const_i(ir->i32, 30), vi), "");
  return LLVMBuildBitCast(b, LLVMBuildXor(b, LLVMBuildBitCast(b, res, vi, ""), sign, ""), LLVMTypeOf(x), "");
}

/* sin or cos of a vector x of lanes within ±TRIG_REDUCED_MAX (sin_cos, sin_cos_f32). */
static LLVMValueRef trig_reduced(ljc_ir *ir, LLVMValueRef x, bool want_cos) {
  return ljc_is_f64(x) ? sin_cos(ir, x, want_cos, true) : sin_cos_f32(ir, x, want_cos);
}

/* trig_reduced of vector x, with libm's sin or cos (on the lane as a double, rounded) on the
 * lanes that `big` marks, which it reduces exactly (the interpreter's results); the other
 * lanes as in a vector without such lanes. */
static LLVMValueRef trig_exact(ljc_ir *ir, LLVMValueRef x, LLVMValueRef big, int want_cos) {
  LLVMBuilderRef b = ir->b;
  unsigned lanes = LLVMGetVectorSize(LLVMTypeOf(x));
  const char *libm = want_cos ? "cos" : "sin";
  LLVMTypeRef lty = LLVMFunctionType(ir->f64, &ir->f64, 1, 0);
  LLVMValueRef lfn = LLVMGetNamedFunction(ir->mod, libm);
  if (!lfn) {
    lfn = LLVMAddFunction(ir->mod, libm, lty);
    ljc_add_fn_attr(ir, lfn, "nounwind");
  }
  /* other lanes pass libm a 0, so it never sets errno */
  LLVMValueRef arg = sel(ir, big, x, LLVMConstNull(LLVMTypeOf(x))), exact = LLVMGetUndef(LLVMTypeOf(x));
  for (unsigned i = 0; i < lanes; i++) {
    LLVMValueRef li = ljc_const_i(ir->i32, i);
    LLVMValueRef e = LLVMBuildExtractElement(b, arg, li, "");
    LLVMValueRef y = LLVMBuildCall2(b, lty, lfn, ljc_is_f64(x) ? &e : (LLVMValueRef[]){to_f64(ir, e)}, 1, "");
    exact = LLVMBuildInsertElement(b, exact, ljc_is_f64(x) ? y : to_f32(ir, y), li, "");
  }
  return sel(ir, big, exact, trig_reduced(ir, x, want_cos));
}

/* The variant of lj_vm_sin_f32/_f64 (variant 0) or lj_vm_cos_ (1): trig_reduced on every
 * lane unless a finite lane lies beyond TRIG_REDUCED_MAX; then (rare: a branch
 * around it) an out-of-line function that calls libm for those lanes, which keeps the calls'
 * clobbered registers off the loop. */
static LLVMValueRef trig_body(ljc_ir *ir, LLVMValueRef x, int want_cos) {
  LLVMBuilderRef b = ir->b;
  unsigned lanes = LLVMGetVectorSize(LLVMTypeOf(x));
  LLVMValueRef ax = ljc_intrinsic1(ir, "fabs", x);
  LLVMValueRef big = LLVMBuildAnd(b, fcmp(ir, LLVMRealOGT, ax, K(x, TRIG_REDUCED_MAX)),
                                  fcmp(ir, LLVMRealOLT, ax, K(x, INFINITY)), "");
  LLVMTypeRef mask_int = LLVMIntTypeInContext(ir->ctx, lanes);
  LLVMValueRef any = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildBitCast(b, big, mask_int, ""), LLVMConstNull(mask_int), "");
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(ir->ctx, fn, "beyond");
  LLVMBasicBlockRef fast_bb = LLVMAppendBasicBlockInContext(ir->ctx, fn, "reduced");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "done");
  LLVMValueRef br = LLVMBuildCondBr(b, any, slow, fast_bb);
  LLVMMetadataRef weights[3] = {LLVMMDStringInContext2(ir->ctx, "branch_weights", 14),
                                LLVMValueAsMetadata(ljc_const_i(ir->i32, 1)),
                                LLVMValueAsMetadata(ljc_const_i(ir->i32, 1 << 20))};
  LLVMSetMetadata(br, LLVMGetMDKindIDInContext(ir->ctx, "prof", 4),
                  LLVMMetadataAsValue(ir->ctx, LLVMMDNodeInContext2(ir->ctx, weights, 3)));

  LLVMPositionBuilderAtEnd(b, fast_bb);
  LLVMValueRef fast = trig_reduced(ir, x, want_cos);
  LLVMBuildBr(b, done);

  LLVMPositionBuilderAtEnd(b, slow);
  char name[64];
  snprintf(name, sizeof name, "lj_trig_beyond_%s_f%dx%u", want_cos ? "cos" : "sin", ljc_is_f64(x) ? 64 : 32, lanes);
  LLVMTypeRef params[2] = {LLVMTypeOf(x), LLVMTypeOf(big)};
  LLVMTypeRef ety = LLVMFunctionType(LLVMTypeOf(x), params, 2, 0);
  LLVMValueRef efn = LLVMGetNamedFunction(ir->mod, name);
  if (!efn) {
    efn = LLVMAddFunction(ir->mod, name, ety);
    LLVMSetLinkage(efn, LLVMInternalLinkage);
    ljc_add_fn_attr(ir, efn, "nounwind");
    ljc_add_fn_attr(ir, efn, "noinline");
    ljc_add_fn_attr(ir, efn, "cold");
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ir->ctx, efn, "entry"));
    LLVMBuildRet(b, trig_exact(ir, LLVMGetParam(efn, 0), LLVMGetParam(efn, 1), want_cos));
    LLVMPositionBuilderAtEnd(b, slow);
  }
  LLVMValueRef args[2] = {x, big};
  LLVMValueRef exact = LLVMBuildCall2(b, ety, efn, args, 2, "");
  LLVMBuildBr(b, done);

  LLVMPositionBuilderAtEnd(b, done);
  LLVMValueRef res = LLVMBuildPhi(b, LLVMTypeOf(x), "");
  LLVMValueRef in_vals[2] = {fast, exact};
  LLVMBasicBlockRef in_blocks[2] = {fast_bb, slow};
  LLVMAddIncoming(res, in_vals, in_blocks, 2);
  return res;
}

static LLVMValueRef trig_call(ljc_ir *ir, LLVMValueRef x, bool want_cos) {
  bool d = ljc_is_f64(x);
  char name[48];
  snprintf(name, sizeof name, LJC_VM_PREFIX "%s_f%d", want_cos ? "cos" : "sin", d ? 64 : 32);
  return vm_call(ir, x, name, (unsigned)ir->vec_bytes / (d ? 8u : 4u), trig_body, want_cos);
}

LLVMValueRef ljc_vm_sin(ljc_ir *ir, LLVMValueRef x) { return trig_call(ir, x, false); }

LLVMValueRef ljc_vm_cos(ljc_ir *ir, LLVMValueRef x) { return trig_call(ir, x, true); }

LLVMValueRef ljc_vm_cos_reduced(ljc_ir *ir, LLVMValueRef x) {
  LJ_ASSERT(ljc_is_f64(x));
  return sin_cos(ir, x, true, true);
}

/* ---- tanh, erf ----------------------------------------------------------------------------- */

LLVMValueRef ljc_vm_tanh(ljc_ir *ir, LLVMValueRef x) {
  bool d = ljc_is_f64(x);
  LLVMValueRef ax = ljc_intrinsic1(ir, "fabs", x);
  LLVMValueRef e = ljc_vm_expm1(ir, vadd(ir, ax, ax));
  LLVMValueRef t = vdiv(ir, e, vadd(ir, e, K(x, 2)));
  t = sel(ir, fcmp(ir, LLVMRealOGT, ax, K(x, d ? 20 : 9)), K(x, 1), t);
  return ljc_intrinsic2(ir, "copysign", t, x);
}

/* A per-piece constant chosen by which piece |x| is in (in[p]: |x| >= piece p's start):
 * field -2 is the centre, -1 the inverse half-width, k >= 0 coefficient k. */
static LLVMValueRef pick(ljc_ir *ir, LLVMValueRef x, const ljc_erf_piece *pieces, int np,
                         LLVMValueRef *in, int field) {
  LLVMValueRef v = NULL;
  for (int p = 0; p < np; p++) {
    const ljc_erf_piece *pc = &pieces[p];
    double c = field == -2 ? pc->c : field == -1 ? pc->inv_h : field < pc->n ? pc->coef[field] : 0;
    v = p == 0 ? K(x, c) : sel(ir, in[p], K(x, c), v);
  }
  return v;
}

/* erf on |x| <= 1 (Taylor) and erfc on |x| >= 1 (fitted pieces), both of |x|. */
typedef struct erf_parts {
  LLVMValueRef ax, near, tail; /* near = erf(x) for |x| <= 1; tail = erfc(|x|) for |x| >= 1 */
} erf_parts;

/* The erfc pieces of x's type, np of them; the first *erf_np lie below where erf rounds to 1
 * (6 for f64: erfc(6) is 2.2e-17; 4 for f32: erfc(3.92) is 1.6e-8), all that erf needs, and
 * all that erfc does where no |x| reaches past them. */
static const ljc_erf_piece *erf_pieces(LLVMValueRef x, int *np, int *erf_np) {
  bool d = ljc_is_f64(x);
  const ljc_erf_piece *pieces = d ? ljc_erf_f64 : ljc_erf_f32;
  *np = d ? (int)LJ_COUNT_OF(ljc_erf_f64) : (int)LJ_COUNT_OF(ljc_erf_f32);
  *erf_np = *np;
  while (pieces[*erf_np - 1].lo >= (d ? 6.0 : 4.0)) --*erf_np;
  return pieces;
}

/* The parts with the tail from the first np of the pieces (erfc 0 past them). x a vector of a
 * helper's lanes (vector) takes exp's AVX-512 body itself, else exp's call. */
static erf_parts erf_parts_of(ljc_ir *ir, LLVMValueRef x, const ljc_erf_piece *pieces, int np, bool vector) {
  bool d = ljc_is_f64(x);
  erf_parts r;
  r.ax = ljc_intrinsic1(ir, "fabs", x);
  /* |x| <= 1: f64's erf x = 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)); f32's x times a
   * fitted polynomial in x^2, 6 terms for the Taylor series' 11 */
  if (d) {
    double tc[18];
    double fact = 1;
    for (int n = 0; n < 18; n++) {
      if (n) fact *= n;
      tc[n] = (n % 2 ? -1 : 1) * 1.1283791670955126 / (fact * (2 * n + 1));
    }
    r.near = vmul(ir, x, poly(ir, vmul(ir, x, x), tc, 18));
  } else {
    const ljc_erf_piece *np0 = &ljc_erf_near_f32[0];
    LLVMValueRef t = ljc_fmuladd(ir, vmul(ir, x, x), K(x, np0->inv_h), K(x, -np0->c * np0->inv_h));
    r.near = vmul(ir, x, poly(ir, t, np0->coef, np0->n));
  }
  /* 1 <= |x|: erfc = exp(-x^2) P(t), P and t from the piece |x| falls in */
  LLVMValueRef in[16];
  LJ_ASSERT(np <= 16);
  for (int p = 1; p < np; p++) in[p] = fcmp(ir, LLVMRealOGE, r.ax, K(x, pieces[p].lo));
  int maxn = 0;
  for (int p = 0; p < np; p++) maxn = pieces[p].n > maxn ? pieces[p].n : maxn;
  LLVMValueRef t = vmul(ir, vsub(ir, r.ax, pick(ir, x, pieces, np, in, -2)), pick(ir, x, pieces, np, in, -1));
  LLVMValueRef acc = pick(ir, x, pieces, np, in, maxn - 1);
  for (int k = maxn - 2; k >= 0; k--) acc = ljc_fmuladd(ir, acc, t, pick(ir, x, pieces, np, in, k));
  LLVMValueRef nx2 = LLVMBuildFNeg(ir->b, vmul(ir, r.ax, r.ax), "");
  r.tail = vmul(ir, vector ? exp_avx512(ir, nx2, true) : ljc_vm_exp_nonpositive(ir, nx2), acc);
  r.tail = sel(ir, fcmp(ir, LLVMRealOGE, r.ax, K(x, pieces[np - 1].hi)), K(x, 0), r.tail);
  return r;
}

LLVMValueRef ljc_vm_erf(ljc_ir *ir, LLVMValueRef x) {
  int np, erf_np;
  const ljc_erf_piece *pieces = erf_pieces(x, &np, &erf_np);
  erf_parts e = erf_parts_of(ir, x, pieces, erf_np, false);
  LLVMValueRef far = ljc_intrinsic2(ir, "copysign", vsub(ir, K(x, 1), e.tail), x);
  return sel(ir, fcmp(ir, LLVMRealULE, e.ax, K(x, 1)), e.near, far);
}

/* erfc from the parts with the first np of the pieces. */
static LLVMValueRef erfc_of(ljc_ir *ir, LLVMValueRef x, const ljc_erf_piece *pieces, int np, bool vector) {
  erf_parts e = erf_parts_of(ir, x, pieces, np, vector);
  LLVMValueRef far = sel(ir, fcmp(ir, LLVMRealOGT, x, K(x, 0)), e.tail, vsub(ir, K(x, 2), e.tail));
  return sel(ir, fcmp(ir, LLVMRealULE, e.ax, K(x, 1)), vsub(ir, K(x, 1), e.near), far);
}

/* erfc of a helper's vector x: the pieces below erf's bound b, unless a lane's x reaches past
 * them (where erfc comes from an f32 gelu, its x below -5.6; below -b, 2 - erfc(|x|) rounds
 * to 2), then all: choosing each coefficient among pieces was most of its cost (an exact gelu
 * over 16M f32, one Zen 4 thread, 14.7 -> 13.0-13.8 ms, its bf16 16.9 -> 14.6; where every
 * vector has such a lane, 16.0). */
static LLVMValueRef erfc_body(ljc_ir *ir, LLVMValueRef x, int unused) {
  (void)unused;
  LLVMBuilderRef b = ir->b;
  int np, erf_np;
  const ljc_erf_piece *pieces = erf_pieces(x, &np, &erf_np);
  LLVMValueRef past = fcmp(ir, LLVMRealOGE, x, K(x, pieces[erf_np].lo));
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef few = LLVMAppendBasicBlockInContext(ir->ctx, fn, "erfc.near");
  LLVMBasicBlockRef all = LLVMAppendBasicBlockInContext(ir->ctx, fn, "erfc.far");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "erfc.done");
  LLVMBuildCondBr(b, ljc_intrinsic1(ir, "vector.reduce.or", past), all, few);
  LLVMValueRef v[2];
  LLVMBasicBlockRef from[2] = {few, all};
  for (int i = 0; i < 2; i++) {
    LLVMPositionBuilderAtEnd(b, from[i]);
    v[i] = erfc_of(ir, x, pieces, i ? np : erf_np, true);
    from[i] = LLVMGetInsertBlock(b);
    LLVMBuildBr(b, done);
  }
  LLVMPositionBuilderAtEnd(b, done);
  LLVMValueRef r = LLVMBuildPhi(b, LLVMTypeOf(x), "");
  LLVMAddIncoming(r, v, from, 2);
  return r;
}

LLVMValueRef ljc_vm_erfc(ljc_ir *ir, LLVMValueRef x) {
  bool d = ljc_is_f64(x);
  int np, erf_np;
  const ljc_erf_piece *pieces = erf_pieces(x, &np, &erf_np);
  if (ir->vec_bytes != 64) return erfc_of(ir, x, pieces, np, false);
  char name[32];
  snprintf(name, sizeof name, LJC_VM_PREFIX "erfc_f%d", d ? 64 : 32);
  return vm_call(ir, x, name, d ? 8 : 16, erfc_body, 0);
}

/* ---- pow ----------------------------------------------------------------------------------- */

/* pow in double with C99's special cases (PyTorch uses std::pow). */
static LLVMValueRef pow_f64(ljc_ir *ir, LLVMValueRef x, LLVMValueRef y) {
  LLVMBuilderRef b = ir->b;
  LLVMValueRef ax = ljc_intrinsic1(ir, "fabs", x);
  LLVMValueRef r = ljc_vm_exp(ir, vmul(ir, y, ljc_vm_log(ir, ax)));
  LLVMValueRef yint = fcmp(ir, LLVMRealOEQ, ljc_intrinsic1(ir, "trunc", y), y);
  LLVMValueRef half = vmul(ir, y, K(y, 0.5));
  LLVMValueRef yodd = LLVMBuildAnd(b, yint, fcmp(ir, LLVMRealONE, ljc_intrinsic1(ir, "trunc", half), half), "");
  LLVMValueRef xneg = LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildBitCast(b, x, ir->i64, ""), ljc_i64(ir, 0), "");
  r = sel(ir, LLVMBuildAnd(b, xneg, yodd, ""), LLVMBuildFNeg(b, r, ""), r);
  /* negative finite base, finite non-integer exponent */
  LLVMValueRef bad = LLVMBuildAnd(b, fcmp(ir, LLVMRealOLT, x, K(x, 0)),
                                  fcmp(ir, LLVMRealONE, ljc_intrinsic1(ir, "fabs", y), K(y, INFINITY)), "");
  bad = LLVMBuildAnd(b, bad, LLVMBuildNot(b, yint, ""), "");
  bad = LLVMBuildAnd(b, bad, fcmp(ir, LLVMRealONE, ax, K(x, INFINITY)), "");
  r = sel(ir, bad, K(x, NAN), r);
  LLVMValueRef one = K(x, 1);
  r = sel(ir, LLVMBuildAnd(b, fcmp(ir, LLVMRealOEQ, ax, one),
                           fcmp(ir, LLVMRealOEQ, ljc_intrinsic1(ir, "fabs", y), K(y, INFINITY)), ""),
          one, r);
  r = sel(ir, fcmp(ir, LLVMRealOEQ, x, one), one, r);
  return sel(ir, fcmp(ir, LLVMRealOEQ, y, K(y, 0)), one, r);
}

LLVMValueRef ljc_vm_pow(ljc_ir *ir, LLVMValueRef x, LLVMValueRef y) {
  if (ljc_is_f64(x)) return pow_f64(ir, x, y);
  return to_f32(ir, pow_f64(ir, to_f64(ir, x), to_f64(ir, y)));
}

/* ---- integer pow ---------------------------------------------------------------------------- */

/* a ** e by squaring, in a small helper function (a loop is clearer than unrolling 64 steps;
 * integer pow is rare). Negative exponents give 0 except for bases 1 and -1, as in PyTorch. */
LLVMValueRef ljc_vm_ipow(ljc_ir *ir, LLVMValueRef a, LLVMValueRef e, bool is_signed) {
  LLVMTypeRef t = LLVMTypeOf(a);
  char name[32];
  snprintf(name, sizeof name, "lj_ipow_%c%u", is_signed ? 's' : 'u', LLVMGetIntTypeWidth(t));
  LLVMTypeRef params[2] = {t, t};
  LLVMTypeRef fty = LLVMFunctionType(t, params, 2, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(ir->mod, name);
  if (!fn) {
    fn = LLVMAddFunction(ir->mod, name, fty);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    LLVMBasicBlockRef saved = LLVMGetInsertBlock(ir->b);
    LLVMMetadataRef saved_loc = LLVMGetCurrentDebugLocation2(ir->b); /* the helper has no debug info */
    LLVMBuilderRef b = ir->b;
    LLVMSetCurrentDebugLocation2(b, NULL);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry");
    LLVMBasicBlockRef neg = LLVMAppendBasicBlockInContext(ir->ctx, fn, "neg");
    LLVMBasicBlockRef pos = LLVMAppendBasicBlockInContext(ir->ctx, fn, "pos");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(ir->ctx, fn, "loop");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ir->ctx, fn, "done");
    LLVMValueRef x = LLVMGetParam(fn, 0), y = LLVMGetParam(fn, 1);
    LLVMValueRef zero = ljc_const_i(t, 0), one = ljc_const_i(t, 1), mone = ljc_const_i(t, -1);
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef isneg = is_signed ? LLVMBuildICmp(b, LLVMIntSLT, y, zero, "") : LLVMConstInt(ir->i1, 0, 0);
    LLVMBuildCondBr(b, isneg, neg, pos);
    LLVMPositionBuilderAtEnd(b, neg);
    LLVMValueRef odd = LLVMBuildTrunc(b, y, ir->i1, "");
    LLVMValueRef m1 = LLVMBuildSelect(b, odd, mone, one, "");
    LLVMValueRef r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, x, mone, ""), m1, zero, "");
    LLVMBuildRet(b, LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, x, one, ""), one, r, ""));
    LLVMPositionBuilderAtEnd(b, pos);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, y, zero, ""), done, loop);
    LLVMPositionBuilderAtEnd(b, loop);
    LLVMValueRef acc = LLVMBuildPhi(b, t, ""), base = LLVMBuildPhi(b, t, ""), exp_ = LLVMBuildPhi(b, t, "");
    LLVMValueRef bit = LLVMBuildTrunc(b, exp_, ir->i1, "");
    LLVMValueRef acc2 = LLVMBuildSelect(b, bit, LLVMBuildMul(b, acc, base, ""), acc, "");
    LLVMValueRef base2 = LLVMBuildMul(b, base, base, "");
    LLVMValueRef exp2 = LLVMBuildLShr(b, exp_, one, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntNE, exp2, zero, ""), loop, done);
    LLVMValueRef acc_in[2] = {one, acc2}, base_in[2] = {x, base2}, exp_in[2] = {y, exp2};
    LLVMBasicBlockRef from[2] = {pos, loop};
    LLVMAddIncoming(acc, acc_in, from, 2);
    LLVMAddIncoming(base, base_in, from, 2);
    LLVMAddIncoming(exp_, exp_in, from, 2);
    LLVMPositionBuilderAtEnd(b, done);
    LLVMValueRef res = LLVMBuildPhi(b, t, "");
    LLVMValueRef res_in[2] = {one, acc2};
    LLVMAddIncoming(res, res_in, from, 2);
    LLVMBuildRet(b, res);
    LLVMPositionBuilderAtEnd(b, saved);
    LLVMSetCurrentDebugLocation2(b, saved_loc);
  }
  LLVMValueRef args[2] = {a, e};
  return LLVMBuildCall2(ir->b, fty, fn, args, 2, "");
}
