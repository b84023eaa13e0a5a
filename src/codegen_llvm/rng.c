/* rng.c — Philox4x32-10 in IR, exactly as graph/philox.h computes it, and the uniform and
 * normal floats made from its words. Each element's value depends only on (seed, offset,
 * index), so the generated code vectorizes and any thread split gives the same numbers. */
#include "codegen_llvm/ir.h"
#include "graph/philox.h"

typedef struct words {
  LLVMValueRef w[4];
} words;

static LLVMValueRef lo32(ljc_ir *ir, LLVMValueRef v) { return LLVMBuildTrunc(ir->b, v, ir->i32, ""); }

static LLVMValueRef hi32(ljc_ir *ir, LLVMValueRef v) {
  return LLVMBuildTrunc(ir->b, LLVMBuildLShr(ir->b, v, ljc_i64(ir, 32), ""), ir->i32, "");
}

static words philox(ljc_ir *ir, LLVMValueRef index, LLVMValueRef offset, LLVMValueRef seed) {
  LLVMBuilderRef b = ir->b;
  LLVMValueRef c0 = lo32(ir, index), c1 = hi32(ir, index), c2 = lo32(ir, offset), c3 = hi32(ir, offset);
  LLVMValueRef k0 = lo32(ir, seed), k1 = hi32(ir, seed);
  LLVMValueRef m0 = ljc_i64(ir, LJG_PHILOX_M0), m1 = ljc_i64(ir, LJG_PHILOX_M1);
  for (int r = 0; r < LJG_PHILOX_ROUNDS; r++) {
    LLVMValueRef p0 = LLVMBuildMul(b, LLVMBuildZExt(b, c0, ir->i64, ""), m0, "");
    LLVMValueRef p1 = LLVMBuildMul(b, LLVMBuildZExt(b, c2, ir->i64, ""), m1, "");
    LLVMValueRef n0 = LLVMBuildXor(b, LLVMBuildXor(b, hi32(ir, p1), c1, ""), k0, "");
    LLVMValueRef n2 = LLVMBuildXor(b, LLVMBuildXor(b, hi32(ir, p0), c3, ""), k1, "");
    c1 = lo32(ir, p1);
    c3 = lo32(ir, p0);
    c0 = n0;
    c2 = n2;
    k0 = LLVMBuildAdd(b, k0, ljc_const_i(ir->i32, (int32_t)LJG_PHILOX_W0), "");
    k1 = LLVMBuildAdd(b, k1, ljc_const_i(ir->i32, (int32_t)LJG_PHILOX_W1), "");
  }
  return (words){{c0, c1, c2, c3}};
}

/* (w >> 8) * 2^-24 in float */
static LLVMValueRef u24(ljc_ir *ir, LLVMValueRef w) {
  LLVMValueRef s = LLVMBuildLShr(ir->b, w, ljc_const_i(ir->i32, 8), "");
  return LLVMBuildFMul(ir->b, LLVMBuildUIToFP(ir->b, s, ir->f32, ""), ljc_const_f(ir->f32, 0x1p-24), "");
}

/* ((a >> 5) * 2^26 + (b >> 6)) * 2^-53 in double */
static LLVMValueRef u53(ljc_ir *ir, LLVMValueRef a, LLVMValueRef bw) {
  LLVMBuilderRef b = ir->b;
  LLVMValueRef x = LLVMBuildUIToFP(b, LLVMBuildLShr(b, a, ljc_const_i(ir->i32, 5), ""), ir->f64, "");
  LLVMValueRef y = LLVMBuildUIToFP(b, LLVMBuildLShr(b, bw, ljc_const_i(ir->i32, 6), ""), ir->f64, "");
  x = ljc_fmuladd(ir, x, ljc_const_f(ir->f64, 0x1p26), y);
  return LLVMBuildFMul(b, x, ljc_const_f(ir->f64, 0x1p-53), "");
}

LLVMValueRef ljc_random(ljc_ir *ir, ljg_op op, lj_dtype dt, LLVMValueRef index,
                        LLVMValueRef seed, LLVMValueRef offset) {
  LLVMBuilderRef b = ir->b;
  words w = philox(ir, index, offset, seed);
  bool d = dt == LJ_F64;
  LLVMValueRef v;
  if (op == LJG_OP_RAND_UNIFORM) {
    v = d ? u53(ir, w.w[0], w.w[1]) : u24(ir, w.w[0]);
  } else {
    LLVMValueRef u1 = d ? u53(ir, w.w[0], w.w[1]) : u24(ir, w.w[0]);
    u1 = LLVMBuildFAdd(b, u1, ljc_fconst_like(u1, d ? 0x1p-53 : 0x1p-24), "");
    LLVMValueRef u2 = d ? u53(ir, w.w[2], w.w[3]) : u24(ir, w.w[1]);
    LLVMValueRef rad = LLVMBuildFMul(b, ljc_vm_log(ir, u1), ljc_fconst_like(u1, -2.0), "");
    rad = ljc_intrinsic1(ir, "sqrt", rad);
    /* the angle in double: rounding 2 pi u2 to f32 would cost accuracy near cos = 0 */
    LLVMValueRef u2d = d ? u2 : LLVMBuildFPExt(b, u2, ir->f64, "");
    LLVMValueRef c = ljc_vm_cos_reduced(ir, LLVMBuildFMul(b, u2d, ljc_const_f(ir->f64, 6.283185307179586), ""));
    if (!d) c = LLVMBuildFPTrunc(b, c, ir->f32, "");
    v = LLVMBuildFMul(b, rad, c, "");
  }
  return ljc_round_to(ir, v, dt);
}
