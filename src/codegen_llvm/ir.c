/* ir.c — emission helpers: LLVM types for dtypes, conversions between storage and compute
 * types (bf16 by bit arithmetic with round-to-nearest-even, f16 through LLVM's half),
 * PyTorch's casts, constants, intrinsic calls, attributes, and loops carrying values in
 * phis. */
#include "codegen_llvm/ir.h"

#include <llvm-c/DebugInfo.h>

#include <stdio.h>
#include <string.h>

void ljc_ir_init(ljc_ir *ir, LLVMContextRef ctx, LLVMModuleRef mod) {
  memset(ir, 0, sizeof *ir);
  ir->ctx = ctx;
  ir->mod = mod;
  ir->b = LLVMCreateBuilderInContext(ctx);
  ir->i1 = LLVMInt1TypeInContext(ctx);
  ir->i8 = LLVMInt8TypeInContext(ctx);
  ir->i16 = LLVMInt16TypeInContext(ctx);
  ir->i32 = LLVMInt32TypeInContext(ctx);
  ir->i64 = LLVMInt64TypeInContext(ctx);
  ir->f16 = LLVMHalfTypeInContext(ctx);
  ir->f32 = LLVMFloatTypeInContext(ctx);
  ir->f64 = LLVMDoubleTypeInContext(ctx);
  ir->ptr = LLVMPointerTypeInContext(ctx, 0);
  ir->void_ = LLVMVoidTypeInContext(ctx);
}

int ljc_vector_bytes(const char *features) {
  if (!features || !*features) return 32;
  if (strstr(features, "+avx512f")) return 64;
  return strstr(features, "+avx") ? 32 : 16;
}

bool ljc_bf16_dot(const char *features) {
  return ljc_vector_bytes(features) == 64 && strstr(features, "+avx512bf16");
}

void ljc_ir_dispose(ljc_ir *ir) { LLVMDisposeBuilder(ir->b); }

LLVMTypeRef ljc_storage_type(ljc_ir *ir, lj_dtype dt) {
  switch (dt) {
  case LJ_F32: return ir->f32;
  case LJ_F64: return ir->f64;
  case LJ_BF16: return ir->i16;
  case LJ_F16: return ir->f16;
  case LJ_I8:
  case LJ_U8:
  case LJ_BOOL: return ir->i8;
  case LJ_I16: return ir->i16;
  case LJ_I32: return ir->i32;
  case LJ_I64: return ir->i64;
  }
  LJ_UNREACHABLE("bad dtype");
}

LLVMTypeRef ljc_compute_type(ljc_ir *ir, lj_dtype dt) {
  switch (dt) {
  case LJ_F32:
  case LJ_BF16:
  case LJ_F16: return ir->f32;
  case LJ_F64: return ir->f64;
  case LJ_BOOL: return ir->i1;
  default: return ljc_storage_type(ir, dt);
  }
}

LLVMValueRef ljc_const_f(LLVMTypeRef t, double v) { return LLVMConstReal(t, v); }

LLVMValueRef ljc_const_i(LLVMTypeRef t, int64_t v) {
  return LLVMConstInt(t, (unsigned long long)v, 1);
}

LLVMValueRef ljc_i64(ljc_ir *ir, int64_t v) { return ljc_const_i(ir->i64, v); }

void ljc_set_align_md(ljc_ir *ir, LLVMValueRef load, int64_t align) {
  LLVMMetadataRef a = LLVMValueAsMetadata(ljc_i64(ir, align));
  LLVMSetMetadata(load, LLVMGetMDKindIDInContext(ir->ctx, "align", 5),
                  LLVMMetadataAsValue(ir->ctx, LLVMMDNodeInContext2(ir->ctx, &a, 1)));
  LLVMSetMetadata(load, LLVMGetMDKindIDInContext(ir->ctx, "noundef", 7),
                  LLVMMetadataAsValue(ir->ctx, LLVMMDNodeInContext2(ir->ctx, NULL, 0)));
}

LLVMValueRef ljc_entry_array(ljc_ir *ir, LLVMTypeRef t, int64_t n) {
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(ir->b));
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
  LLVMBuilderRef eb = LLVMCreateBuilderInContext(ir->ctx);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first)
    LLVMPositionBuilderBefore(eb, first);
  else
    LLVMPositionBuilderAtEnd(eb, entry);
  LLVMValueRef a = LLVMBuildAlloca(eb, LLVMArrayType2(t, (uint64_t)n), "");
  LLVMSetAlignment(a, 64);
  LLVMDisposeBuilder(eb);
  return a;
}

bool ljc_is_f64(LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) t = LLVMGetElementType(t);
  return LLVMGetTypeKind(t) == LLVMDoubleTypeKind;
}

LLVMValueRef ljc_fconst_like(LLVMValueRef x, double v) { return LLVMConstReal(LLVMTypeOf(x), v); }

LLVMValueRef ljc_from_storage(ljc_ir *ir, LLVMValueRef v, lj_dtype dt) {
  LLVMBuilderRef b = ir->b;
  switch (dt) {
  case LJ_BF16: {
    LLVMValueRef w = LLVMBuildZExt(b, v, ir->i32, "");
    w = LLVMBuildShl(b, w, ljc_const_i(ir->i32, 16), "");
    return LLVMBuildBitCast(b, w, ir->f32, "");
  }
  case LJ_F16: return LLVMBuildFPExt(b, v, ir->f32, "");
  case LJ_BOOL: return LLVMBuildICmp(b, LLVMIntNE, v, ljc_const_i(ir->i8, 0), "");
  default: return v;
  }
}

/* The bf16 x when v is ljc_from_storage's f32 of it, else NULL. */
static LLVMValueRef bf16_widened(LLVMValueRef v) {
  LLVMValueRef shl = LLVMIsABitCastInst(v) ? LLVMGetOperand(v, 0) : NULL;
  if (!shl || !LLVMIsAInstruction(shl) || LLVMGetInstructionOpcode(shl) != LLVMShl) return NULL;
  LLVMValueRef ext = LLVMGetOperand(shl, 0), by = LLVMGetOperand(shl, 1);
  if (!LLVMIsAConstantInt(by) || LLVMConstIntGetZExtValue(by) != 16 || !LLVMIsAZExtInst(ext)) return NULL;
  LLVMValueRef x = LLVMGetOperand(ext, 0);
  LLVMTypeRef t = LLVMTypeOf(x);
  return LLVMGetTypeKind(t) == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(t) == 16 ? x : NULL;
}

LLVMValueRef ljc_to_storage(ljc_ir *ir, LLVMValueRef v, lj_dtype dt) {
  LLVMBuilderRef b = ir->b;
  switch (dt) {
  case LJ_BF16: {
    /* a bf16 widened (a load, or an op's result rounded by ljc_round_to) is itself: stored
     * without rounding it again (a bf16 add of 16M elements, one Zen 4 thread: 3.49 -> 2.43 ms;
     * PyTorch 3.13) */
    LLVMValueRef x = bf16_widened(v);
    if (x) return x;
    /* round to nearest even on the upper 16 bits; NaN stays a (quiet) NaN */
    LLVMValueRef bits = LLVMBuildBitCast(b, v, ir->i32, "");
    LLVMValueRef hi = LLVMBuildLShr(b, bits, ljc_const_i(ir->i32, 16), "");
    LLVMValueRef odd = LLVMBuildAnd(b, hi, ljc_const_i(ir->i32, 1), "");
    LLVMValueRef r = LLVMBuildAdd(b, bits, ljc_const_i(ir->i32, 0x7fff), "");
    r = LLVMBuildLShr(b, LLVMBuildAdd(b, r, odd, ""), ljc_const_i(ir->i32, 16), "");
    LLVMValueRef nan = LLVMBuildOr(b, hi, ljc_const_i(ir->i32, 0x40), "");
    LLVMValueRef isnan = LLVMBuildFCmp(b, LLVMRealUNO, v, v, "");
    return LLVMBuildTrunc(b, LLVMBuildSelect(b, isnan, nan, r, ""), ir->i16, "");
  }
  case LJ_F16: return LLVMBuildFPTrunc(b, v, ir->f16, "");
  case LJ_BOOL: return LLVMBuildZExt(b, v, ir->i8, "");
  default: return v;
  }
}

LLVMValueRef ljc_round_to(ljc_ir *ir, LLVMValueRef v, lj_dtype dt) {
  if (dt != LJ_BF16 && dt != LJ_F16) return v;
  return ljc_from_storage(ir, ljc_to_storage(ir, v, dt), dt);
}

/* x86 truncation: NaN and out-of-range values give the minimum of int32 (narrow targets wrap
 * from there) or int64, which is what PyTorch produces on this platform. */
static LLVMValueRef float_to_int(ljc_ir *ir, LLVMValueRef v, lj_dtype to) {
  LLVMBuilderRef b = ir->b;
  bool wide = to == LJ_I64;
  LLVMTypeRef it = wide ? ir->i64 : ir->i32;
  double lim = wide ? 0x1p63 : 0x1p31;
  LLVMValueRef ge = LLVMBuildFCmp(b, LLVMRealOGE, v, ljc_fconst_like(v, -lim), "");
  LLVMValueRef lt = LLVMBuildFCmp(b, LLVMRealOLT, v, ljc_fconst_like(v, lim), "");
  LLVMValueRef ok = LLVMBuildAnd(b, ge, lt, "");
  LLVMValueRef conv = LLVMBuildFPToSI(b, v, it, "");
  LLVMValueRef r = LLVMBuildSelect(b, ok, conv, ljc_const_i(it, wide ? INT64_MIN : INT32_MIN), "");
  LLVMTypeRef tt = ljc_compute_type(ir, to);
  return tt == it ? r : LLVMBuildTrunc(b, r, tt, "");
}

LLVMValueRef ljc_cast(ljc_ir *ir, LLVMValueRef v, lj_dtype from, lj_dtype to) {
  if (from == to) return v;
  LLVMBuilderRef b = ir->b;
  LLVMTypeRef ft = ljc_compute_type(ir, from), tt = ljc_compute_type(ir, to);
  bool ffloat = ljg_dtype_is_float(from), tfloat = ljg_dtype_is_float(to);
  if (ffloat) {
    if (tfloat) {
      LLVMValueRef r = v;
      if (ft != tt) r = tt == ir->f64 ? LLVMBuildFPExt(b, v, tt, "") : LLVMBuildFPTrunc(b, v, tt, "");
      return ljc_round_to(ir, r, to);
    }
    if (to == LJ_BOOL) return LLVMBuildFCmp(b, LLVMRealUNE, v, ljc_const_f(ft, 0), "");
    return float_to_int(ir, v, to);
  }
  bool fsigned = from != LJ_BOOL && ljg_dtype_is_signed(from);
  if (tfloat) {
    LLVMValueRef r = fsigned ? LLVMBuildSIToFP(b, v, tt, "") : LLVMBuildUIToFP(b, v, tt, "");
    return ljc_round_to(ir, r, to);
  }
  if (to == LJ_BOOL) return LLVMBuildICmp(b, LLVMIntNE, v, ljc_const_i(ft, 0), "");
  unsigned fw = LLVMGetIntTypeWidth(ft), tw = LLVMGetIntTypeWidth(tt);
  if (fw == tw) return v;
  if (fw > tw) return LLVMBuildTrunc(b, v, tt, "");
  return fsigned ? LLVMBuildSExt(b, v, tt, "") : LLVMBuildZExt(b, v, tt, "");
}

LLVMValueRef ljc_intrinsic_over(ljc_ir *ir, const char *name, int ntypes, LLVMTypeRef *types, int n,
                                LLVMValueRef *args) {
  char full[64];
  snprintf(full, sizeof full, "llvm.%s", name);
  unsigned id = LLVMLookupIntrinsicID(full, strlen(full));
  LJ_ASSERT(id != 0);
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(ir->mod, id, types, (size_t)ntypes);
  LLVMTypeRef fty = LLVMIntrinsicGetType(ir->ctx, id, types, (size_t)ntypes);
  return LLVMBuildCall2(ir->b, fty, fn, args, (unsigned)n, "");
}

LLVMValueRef ljc_intrinsic(ljc_ir *ir, const char *name, LLVMTypeRef t, int n, LLVMValueRef *args) {
  return ljc_intrinsic_over(ir, name, 1, &t, n, args);
}

LLVMValueRef ljc_intrinsic1(ljc_ir *ir, const char *name, LLVMValueRef x) {
  return ljc_intrinsic(ir, name, LLVMTypeOf(x), 1, &x);
}

LLVMValueRef ljc_intrinsic2(ljc_ir *ir, const char *name, LLVMValueRef x, LLVMValueRef y) {
  LLVMValueRef args[2] = {x, y};
  return ljc_intrinsic(ir, name, LLVMTypeOf(x), 2, args);
}

LLVMValueRef ljc_fmuladd(ljc_ir *ir, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
  LLVMValueRef args[3] = {a, b, c};
  return ljc_intrinsic(ir, "fmuladd", LLVMTypeOf(a), 3, args);
}

void ljc_add_fn_attr(ljc_ir *ir, LLVMValueRef fn, const char *name) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ir->ctx, kind, 0));
}

/* LLVM's tuning for some AVX-512 CPUs has the loop vectorizer prefer 256-bit vectors; with the
 * target's full width, exp- and compare-heavy loops in L1 or L2 run up to 1.4x faster, and the
 * rest no slower. */
void ljc_prefer_target_vectors(ljc_ir *ir, LLVMValueRef fn) {
  char bits[16];
  int n = snprintf(bits, sizeof bits, "%d", ir->vec_bytes * 8);
  static const char key[] = "prefer-vector-width";
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(ir->ctx, key, sizeof key - 1, bits, (unsigned)n));
}

void ljc_add_param_attr(ljc_ir *ir, LLVMValueRef fn, unsigned param, const char *name, uint64_t v) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, param + 1, LLVMCreateEnumAttribute(ir->ctx, kind, v));
}

/* ---- loops ----------------------------------------------------------------------------- */

void ljc_loop_begin_step(ljc_ir *ir, ljc_loop *L, LLVMValueRef lo, LLVMValueRef hi, int64_t step, bool guard,
                         int nacc, LLVMValueRef *acc_in) {
  LLVMBuilderRef b = ir->b;
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LJ_ASSERT(nacc <= LJC_LOOP_ACC && step > 0);
  memset(L, 0, sizeof *L);
  L->pre = LLVMGetInsertBlock(b);
  L->header = LLVMAppendBasicBlockInContext(ir->ctx, fn, "loop");
  L->exit = LLVMAppendBasicBlockInContext(ir->ctx, fn, "loop.exit");
  L->hi = hi;
  L->step = step;
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

void ljc_loop_begin(ljc_ir *ir, ljc_loop *L, LLVMValueRef lo, LLVMValueRef hi, bool guard, int nacc,
                    LLVMValueRef *acc_in) {
  ljc_loop_begin_step(ir, L, lo, hi, 1, guard, nacc, acc_in);
}

/* Gives the loop whose back edge is `br` the loop ID !{self, !{key, value}}: for width 1
 * !{"llvm.loop.vectorize.enable", false}, which keeps the loop vectorizer off it; for width
 * n > 1 !{"llvm.loop.vectorize.width", n}, which makes it vectorize n lanes wide; else, for an
 * interleave n > 0, !{"llvm.loop.interleave.count", n}. */
static void mark_loop(ljc_ir *ir, LLVMValueRef br, int width, int interleave) {
  static const char off[] = "llvm.loop.vectorize.enable", wide[] = "llvm.loop.vectorize.width",
                    count[] = "llvm.loop.interleave.count";
  const char *key = width == 1 ? off : width ? wide : count;
  LLVMMetadataRef hint[2] = {LLVMMDStringInContext2(ir->ctx, key, strlen(key)),
                             width == 1 ? LLVMValueAsMetadata(LLVMConstInt(ir->i1, 0, 0))
                                        : LLVMValueAsMetadata(ljc_const_i(ir->i32, width ? width : interleave))};
  LLVMMetadataRef self = LLVMTemporaryMDNode(ir->ctx, NULL, 0);
  LLVMMetadataRef ops[2] = {self, LLVMMDNodeInContext2(ir->ctx, hint, 2)};
  LLVMMetadataRef id = LLVMMDNodeInContext2(ir->ctx, ops, 2);
  LLVMMetadataReplaceAllUsesWith(self, id);
  LLVMSetMetadata(br, LLVMGetMDKindIDInContext(ir->ctx, "llvm.loop", 9), LLVMMetadataAsValue(ir->ctx, id));
}

void ljc_loop_end(ljc_ir *ir, ljc_loop *L, LLVMValueRef *acc_next, LLVMValueRef *acc_out) {
  LLVMBuilderRef b = ir->b;
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
  LLVMValueRef next = LLVMBuildNSWAdd(b, L->iv, ljc_i64(ir, L->step), "");
  LLVMValueRef br = LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, next, L->hi, ""), L->header, L->exit);
  if (ir->loop_width || ir->loop_interleave) mark_loop(ir, br, ir->loop_width, ir->loop_interleave);
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

LLVMBasicBlockRef ljc_if_begin(ljc_ir *ir, LLVMValueRef cond, const char *name) {
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(ir->b));
  LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(ir->ctx, fn, name);
  LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(ir->ctx, fn, "if.after");
  LLVMBuildCondBr(ir->b, cond, yes, after);
  LLVMPositionBuilderAtEnd(ir->b, yes);
  return after;
}

void ljc_if_end(ljc_ir *ir, LLVMBasicBlockRef after) {
  LLVMBuildBr(ir->b, after);
  LLVMPositionBuilderAtEnd(ir->b, after);
}

/* The index vectors of ljc_transpose's interleaves over n lanes, of integer type it: lanes
 * 0 .. n/2 - 1 of both vectors alternating (lo), then the upper halves' (hi). */
static void interleave_indices(LLVMTypeRef it, int n, LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMValueRef l[64], h[64];
  for (int t = 0; t < n; t++) {
    l[t] = LLVMConstInt(it, (unsigned long long)((t & 1 ? n : 0) + t / 2), 0);
    h[t] = LLVMConstInt(it, (unsigned long long)((t & 1 ? n : 0) + n / 2 + t / 2), 0);
  }
  *lo = LLVMConstVector(l, (unsigned)n);
  *hi = LLVMConstVector(h, (unsigned)n);
}

/* ljc_transpose's rounds over v, each pair's interleaves by index vectors lo and hi: by
 * shufflevectors, or by calls of the two-source permute `permute` (of type permute_t; a, index,
 * b) where that is not NULL. */
static void transpose_rounds(ljc_ir *ir, int n, LLVMValueRef *v, LLVMValueRef lo, LLVMValueRef hi,
                             LLVMTypeRef permute_t, LLVMValueRef permute) {
  LLVMValueRef out[64];
  for (int round = 1; round < n; round *= 2) {
    for (int i = 0; i < n / 2; i++)
      for (int h = 0; h < 2; h++) {
        LLVMValueRef index = h ? hi : lo, args[3] = {v[i], index, v[i + n / 2]};
        out[2 * i + h] = permute ? LLVMBuildCall2(ir->b, permute_t, permute, args, 3, "")
                                 : LLVMBuildShuffleVector(ir->b, v[i], v[i + n / 2], index, "");
      }
    for (int i = 0; i < n; i++) v[i] = out[i];
  }
}

void ljc_transpose(ljc_ir *ir, int n, LLVMValueRef *v) {
  LLVMValueRef lo, hi;
  interleave_indices(ir->i32, n, &lo, &hi);
  transpose_rounds(ir, n, v, lo, hi, NULL, NULL);
}

/* The index vector `init` (constant) as a load from an internal global of the module named
 * `name`, marked invariant so that it leaves loops. Not a constant global: InstCombine would
 * fold the load, and then the permute whose index it is into a shufflevector. */
static LLVMValueRef opaque_index(ljc_ir *ir, const char *name, LLVMValueRef init) {
  LLVMTypeRef t = LLVMTypeOf(init);
  LLVMValueRef g = LLVMGetNamedGlobal(ir->mod, name);
  if (!g) {
    g = LLVMAddGlobal(ir->mod, t, name);
    LLVMSetInitializer(g, init);
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetAlignment(g, (unsigned)ir->vec_bytes);
  }
  LLVMValueRef load = LLVMBuildLoad2(ir->b, t, g, "");
  LLVMSetAlignment(load, (unsigned)ir->vec_bytes);
  LLVMSetMetadata(load, LLVMGetMDKindIDInContext(ir->ctx, "invariant.load", 14), LLVMMDNodeInContext(ir->ctx, NULL, 0));
  return load;
}

/* On AVX-512, each round's interleaves are vpermt2ps/vpermt2pd (as the code generator makes of
 * ljc_transpose's shufflevectors). Their indices from opaque_index: through shufflevectors, the
 * code generator's shuffle combining searched the rounds for cheaper sequences, half of a
 * kernel's compile (an add of two transposed [64, 288] in MNISTNet's step: 15.5 -> 8 ms), for
 * the same instructions. */
void ljc_transpose_permutes(ljc_ir *ir, int n, LLVMValueRef *v) {
  LLVMTypeRef vt = LLVMTypeOf(v[0]);
  LLVMTypeRef et = LLVMGetElementType(vt);
  LLVMTypeKind kind = LLVMGetTypeKind(et);
  unsigned bits = kind == LLVMFloatTypeKind     ? 32
                  : kind == LLVMDoubleTypeKind  ? 64
                  : kind == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(et)
                                                : 0;
  if (ir->vec_bytes != 64 || n * (int)bits != 512 || (bits != 32 && bits != 64)) {
    ljc_transpose(ir, n, v);
    return;
  }
  bool d = bits == 64;
  LLVMValueRef lo, hi;
  interleave_indices(d ? ir->i64 : ir->i32, n, &lo, &hi);
  lo = opaque_index(ir, d ? "lj_transpose_lo8" : "lj_transpose_lo16", lo);
  hi = opaque_index(ir, d ? "lj_transpose_hi8" : "lj_transpose_hi16", hi);
  const char *name = d ? "llvm.x86.avx512.vpermi2var.pd.512" : "llvm.x86.avx512.vpermi2var.ps.512";
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMTypeRef ft = LLVMVectorType(d ? ir->f64 : ir->f32, (unsigned)n);
  for (int i = 0; i < n; i++) v[i] = LLVMBuildBitCast(ir->b, v[i], ft, "");
  transpose_rounds(ir, n, v, lo, hi, LLVMIntrinsicGetType(ir->ctx, id, NULL, 0),
                   LLVMGetIntrinsicDeclaration(ir->mod, id, NULL, 0));
  for (int i = 0; i < n; i++) v[i] = LLVMBuildBitCast(ir->b, v[i], vt, "");
}

LLVMValueRef ljc_splat(ljc_ir *ir, LLVMValueRef x, LLVMTypeRef vt) {
  LLVMValueRef v = LLVMBuildInsertElement(ir->b, LLVMGetUndef(vt), x, ljc_const_i(ir->i32, 0), "");
  LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(ir->i32, LLVMGetVectorSize(vt)));
  return LLVMBuildShuffleVector(ir->b, v, LLVMGetUndef(vt), zeros, "");
}

LLVMValueRef ljc_masked_load(ljc_ir *ir, LLVMTypeRef vt, LLVMValueRef p, int align, LLVMValueRef mask) {
  LLVMTypeRef types[2] = {vt, ir->ptr};
  LLVMValueRef args[4] = {p, ljc_const_i(ir->i32, align), mask, LLVMConstNull(vt)};
  return ljc_intrinsic_over(ir, "masked.load", 2, types, 4, args);
}

void ljc_prefetch(ljc_ir *ir, LLVMValueRef p) {
  LLVMValueRef args[4] = {p, ljc_const_i(ir->i32, 0), ljc_const_i(ir->i32, 2), ljc_const_i(ir->i32, 1)};
  ljc_intrinsic(ir, "prefetch", ir->ptr, 4, args);
}

void ljc_prefetch_write(ljc_ir *ir, LLVMValueRef p) {
  LLVMValueRef args[4] = {p, ljc_const_i(ir->i32, 1), ljc_const_i(ir->i32, 3), ljc_const_i(ir->i32, 1)};
  ljc_intrinsic(ir, "prefetch", ir->ptr, 4, args);
}

void ljc_set_nontemporal(LLVMContextRef ctx, LLVMValueRef store) {
  LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(ctx), 1, 0));
  LLVMSetMetadata(store, LLVMGetMDKindIDInContext(ctx, "nontemporal", 11),
                  LLVMMetadataAsValue(ctx, LLVMMDNodeInContext2(ctx, &one, 1)));
}

void ljc_sfence(LLVMBuilderRef b, LLVMModuleRef mod) {
  LLVMTypeRef t = LLVMFunctionType(LLVMVoidTypeInContext(LLVMGetModuleContext(mod)), NULL, 0, 0);
  LLVMValueRef fence = LLVMGetNamedFunction(mod, "llvm.x86.sse.sfence");
  if (!fence) fence = LLVMAddFunction(mod, "llvm.x86.sse.sfence", t);
  LLVMBuildCall2(b, t, fence, NULL, 0, "");
}

void ljc_masked_store(ljc_ir *ir, LLVMValueRef x, LLVMValueRef p, int align, LLVMValueRef mask) {
  LLVMTypeRef types[2] = {LLVMTypeOf(x), ir->ptr};
  LLVMValueRef args[4] = {x, p, ljc_const_i(ir->i32, align), mask};
  ljc_intrinsic_over(ir, "masked.store", 2, types, 4, args);
}
