/* ir.h — what the files of the LLVM stage share: the emission context (context, module,
 * builder, types), dtype ↔ LLVM type mapping and conversions, intrinsic calls, and the
 * entry points of each file. Internal to src/codegen_llvm/ (codegen.h is what other stages
 * see). */
#ifndef LJ_CODEGEN_IR_H
#define LJ_CODEGEN_IR_H

#include "codegen_llvm/codegen.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

/* Emission context of one module. */
typedef struct ljc_ir {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTypeRef i1, i8, i16, i32, i64, f16, f32, f64, ptr, void_;
  int vec_bytes; /* the target's vector register width (explicitly vectorized kernels) */
  bool fma;      /* the target fuses multiply-adds (ljc_fmuladd rounds once) */
  bool bf16_dot; /* the target has bf16 dot products of the vector width (ljc_bf16_dot) */
  struct ljc_dbg *dbg; /* LJ_HLO_DEBUG: debug info being built (debuginfo.c), or NULL */
  int loop_width;      /* loops closed while it is 1 are marked not to be vectorized, while it
                          is n > 1 to be vectorized n lanes wide; 0: no mark */
  int loop_interleave; /* while loop_width is 0, loops closed while it is n > 0 are marked to
                          interleave n vector iterations; 0: the vectorizer's choice */
  const uint8_t *stream; /* the kernel being lowered: the slots it writes with non-temporal
                            stores (stream.c), or NULL */
} ljc_ir;

/* Code that computes at most this many points is not worth vector code: a kernel that small
 * skips the loop vectorizer, and in a larger kernel a nest that small keeps its loops scalar.
 * Vectorizing is most of such code's compile (a main vector loop, a scalar remainder and the
 * checks between them), while scalar code costs it a few microseconds a run. */
enum { LJC_SMALL_POINTS = 4096 };

/* ir.c */
void ljc_ir_init(ljc_ir *ir, LLVMContextRef ctx, LLVMModuleRef mod);
/* The vector register width a target feature string implies: 64 bytes with AVX-512F, 32 with
 * AVX (or when the features are not given: code for a named CPU), else 16. */
int ljc_vector_bytes(const char *features);
/* Whether features give 64-byte vectors and AVX-512's bf16 dot products (vdpbf16ps). */
bool ljc_bf16_dot(const char *features);
/* The names of vmath.c's helper functions, which stay calls (noinline) until the loop
 * vectorizer has replaced them with their vector variants, and are inlined after it
 * (pipeline.c). */
#define LJC_VM_PREFIX "lj_vm_"
void ljc_ir_dispose(ljc_ir *ir);
/* Storage type of a dtype in memory (bf16 as i16, bool as i8) and the type values are
 * computed in (bf16/f16 in f32, bool as i1). */
LLVMTypeRef ljc_storage_type(ljc_ir *ir, lj_dtype dt);
LLVMTypeRef ljc_compute_type(ljc_ir *ir, lj_dtype dt);
/* Converts a loaded storage value to its compute type, and back for a store. */
LLVMValueRef ljc_from_storage(ljc_ir *ir, LLVMValueRef v, lj_dtype dt);
LLVMValueRef ljc_to_storage(ljc_ir *ir, LLVMValueRef v, lj_dtype dt);
/* Rounds a compute value to what dt can hold (the identity except for bf16/f16), so fused
 * 16-bit float ops round after every op as PyTorch does. */
LLVMValueRef ljc_round_to(ljc_ir *ir, LLVMValueRef v, lj_dtype dt);
/* Converts compute value v of dtype `from` to dtype `to` (PyTorch's cast semantics). */
LLVMValueRef ljc_cast(ljc_ir *ir, LLVMValueRef v, lj_dtype from, lj_dtype to);
LLVMValueRef ljc_const_f(LLVMTypeRef t, double v);
LLVMValueRef ljc_const_i(LLVMTypeRef t, int64_t v);
LLVMValueRef ljc_i64(ljc_ir *ir, int64_t v);
/* An array of n values of type t, 64-byte aligned, in the current function's entry block (so
 * that loops do not grow the stack). */
LLVMValueRef ljc_entry_array(ljc_ir *ir, LLVMTypeRef t, int64_t n);
/* Tells LLVM that pointer load `load` gives an address aligned to `align` bytes (!align,
 * with !noundef: a promise, so only for pointers that are). */
void ljc_set_align_md(ljc_ir *ir, LLVMValueRef load, int64_t align);
/* Calls llvm.<name> overloaded on type t with n arguments. */
LLVMValueRef ljc_intrinsic(ljc_ir *ir, const char *name, LLVMTypeRef t, int n, LLVMValueRef *args);
/* The same for an intrinsic overloaded on several types (e.g. masked.load: vector, pointer). */
LLVMValueRef ljc_intrinsic_over(ljc_ir *ir, const char *name, int ntypes, LLVMTypeRef *types, int n,
                                LLVMValueRef *args);
LLVMValueRef ljc_intrinsic1(ljc_ir *ir, const char *name, LLVMValueRef x);
LLVMValueRef ljc_intrinsic2(ljc_ir *ir, const char *name, LLVMValueRef x, LLVMValueRef y);
/* a*b + c, fused where the target allows (llvm.fmuladd). */
LLVMValueRef ljc_fmuladd(ljc_ir *ir, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);
/* The same value or type at the float type of x (float or double). */
bool ljc_is_f64(LLVMValueRef x);
LLVMValueRef ljc_fconst_like(LLVMValueRef x, double v);
void ljc_add_fn_attr(ljc_ir *ir, LLVMValueRef fn, const char *name);
/* Has the vectorizer use the target's widest vectors (ljc_ir.vec_bytes) in fn. */
void ljc_prefer_target_vectors(ljc_ir *ir, LLVMValueRef fn);
void ljc_add_param_attr(ljc_ir *ir, LLVMValueRef fn, unsigned param, const char *name, uint64_t v);

/* Loops over an i64 induction variable carrying up to LJC_LOOP_ACC values in phis. */
enum { LJC_LOOP_ACC = 32 };
typedef struct ljc_loop {
  LLVMBasicBlockRef pre, header, exit;
  LLVMValueRef iv, hi;
  int64_t step;
  bool guarded;
  int nacc;
  LLVMValueRef acc[LJC_LOOP_ACC], acc_in[LJC_LOOP_ACC];
} ljc_loop;
/* Opens a loop for iv = lo, lo + step, ... while iv < hi (step > 0; (hi - lo) a multiple of
 * step), carrying nacc values (L->acc inside); guarded when it may run 0 times. */
void ljc_loop_begin_step(ljc_ir *ir, ljc_loop *L, LLVMValueRef lo, LLVMValueRef hi, int64_t step, bool guard,
                         int nacc, LLVMValueRef *acc_in);
void ljc_loop_begin(ljc_ir *ir, ljc_loop *L, LLVMValueRef lo, LLVMValueRef hi, bool guard, int nacc,
                    LLVMValueRef *acc_in);
/* Closes the loop with the carried values' next values; acc_out receives them after it. The
 * loop is marked as ir->loop_width and ir->loop_interleave say. */
void ljc_loop_end(ljc_ir *ir, ljc_loop *L, LLVMValueRef *acc_next, LLVMValueRef *acc_out);

/* Code run only when cond (an i1) holds: ljc_if_begin puts the builder in it and returns the
 * block after it, which ljc_if_end, given that block, closes it into. */
LLVMBasicBlockRef ljc_if_begin(ljc_ir *ir, LLVMValueRef cond, const char *name);
void ljc_if_end(ljc_ir *ir, LLVMBasicBlockRef after);

/* Transposes the n × n matrix whose rows are the n-lane vectors v[0..n) in place: log2(n)
 * rounds, each interleaving the halves of the pairs (i, i + n/2). */
void ljc_transpose(ljc_ir *ir, int n, LLVMValueRef *v);
/* The same, for n vectors of the target's full width, by two-source permutes whose index
 * vectors the code generator cannot see (on AVX-512; ljc_transpose elsewhere): the same
 * instructions, which it otherwise spends half a kernel's compile trying to combine. */
void ljc_transpose_permutes(ljc_ir *ir, int n, LLVMValueRef *v);

/* The vector of type vt (a vector type) with x in every lane. */
LLVMValueRef ljc_splat(ljc_ir *ir, LLVMValueRef x, LLVMTypeRef vt);
/* The vector of type vt at p (elements aligned to `align` bytes), its lanes where mask (an i1
 * vector) and 0 elsewhere: the lanes not in mask are not read. */
LLVMValueRef ljc_masked_load(ljc_ir *ir, LLVMTypeRef vt, LLVMValueRef p, int align, LLVMValueRef mask);
/* Stores the lanes of x where mask at p (elements aligned to `align` bytes). */
void ljc_masked_store(ljc_ir *ir, LLVMValueRef x, LLVMValueRef p, int align, LLVMValueRef mask);
/* A hint to bring the cache line at p into L2 for reading (prefetcht1: locality 2); p may be
 * any address, a prefetch never faults. */
void ljc_prefetch(ljc_ir *ir, LLVMValueRef p);
/* The same for writing (prefetchw): the line comes owned, so the stores to it that follow do
 * not each wait for it. */
void ljc_prefetch_write(ljc_ir *ir, LLVMValueRef p);
/* Marks vector store `store` non-temporal (!nontemporal): on x86, a store of a whole vector
 * the store's alignment shows aligned goes straight to memory without reading its line. */
void ljc_set_nontemporal(LLVMContextRef ctx, LLVMValueRef store);
/* x86's sfence at the builder's position: the non-temporal stores before it are seen by every
 * thread before any store after it. */
void ljc_sfence(LLVMBuilderRef b, LLVMModuleRef mod);

/* vmath.c: transcendentals as straight-line polynomial code (vectorizable; libm only for sin
 * and cos beyond 2^20). Each takes and returns a float or double value. */
LLVMValueRef ljc_vm_exp(ljc_ir *ir, LLVMValueRef x);
/* exp of an x known to be at most 0 or NaN (a softmax's x - max): with AVX-512, x is not
 * clamped above (a vminps less a vector: one thread, softmax over [4096, 1024] 0.554-0.573 ->
 * 0.526-0.534 ms); the same results as ljc_vm_exp's for such x. */
LLVMValueRef ljc_vm_exp_nonpositive(ljc_ir *ir, LLVMValueRef x);
LLVMValueRef ljc_vm_expm1(ljc_ir *ir, LLVMValueRef x);
LLVMValueRef ljc_vm_log(ljc_ir *ir, LLVMValueRef x);
LLVMValueRef ljc_vm_log1p(ljc_ir *ir, LLVMValueRef x);
LLVMValueRef ljc_vm_sin(ljc_ir *ir, LLVMValueRef x);
LLVMValueRef ljc_vm_cos(ljc_ir *ir, LLVMValueRef x);
/* cos of a double known to be within ±2^20 (an angle of the normal sampler): inline code,
 * without ljc_vm_cos's helper call and its branch for huge arguments. */
LLVMValueRef ljc_vm_cos_reduced(ljc_ir *ir, LLVMValueRef x);
LLVMValueRef ljc_vm_tanh(ljc_ir *ir, LLVMValueRef x);
LLVMValueRef ljc_vm_erf(ljc_ir *ir, LLVMValueRef x);
LLVMValueRef ljc_vm_erfc(ljc_ir *ir, LLVMValueRef x);
LLVMValueRef ljc_vm_pow(ljc_ir *ir, LLVMValueRef x, LLVMValueRef y);
/* Integer a ** e (same integer type). */
LLVMValueRef ljc_vm_ipow(ljc_ir *ir, LLVMValueRef a, LLVMValueRef e, bool is_signed);

/* rng.c: Philox4x32-10 (graph/philox.h) and its floats for element `index`. */
LLVMValueRef ljc_random(ljc_ir *ir, ljg_op op, lj_dtype dt, LLVMValueRef index,
                        LLVMValueRef seed, LLVMValueRef offset);

/* lower_expr.c: the value of every kernel expression at one point of a nest. */
typedef struct ljc_point {
  int ndim;
  LLVMValueRef idx[LJ_MAX_DIMS]; /* i64 loop indices */
} ljc_point;
/* A data-dependent check a kernel makes: an i8 flag set when it fails, and the offending
 * value (index checks), both allocas reported after the loops. */
typedef struct ljc_check {
  LLVMValueRef flag, badval;
  int32_t code, node;
  int64_t bound;
} ljc_check;

/* A cache line's bytes (every slot starts on one). */
enum { LJC_LINE_BYTES = 64 };

/* Gathers and scatters along a dim of at most this many elements touch every position with a
 * select instead of one computed address, so their loops vectorize: a 3×3 window's nine (a
 * 3×3 max-pool's gradient over [32, 64, 112, 112], one thread: its kernel 21 -> 14.4 ms with
 * the scatter's loop vectorized). */
enum { LJC_SMALL_DIM = 9 };

typedef struct ljc_kctx {
  ljc_ir *ir;
  const ljg_program *p;
  const ljg_kernel *k;
  LLVMValueRef *slot_ptr; /* pointer value per program slot (NULL if unused) */
  LLVMValueRef *slot_origin; /* per slot: for a LOCAL slot, the element offset of the first
                                row of the block it holds (i64); else NULL */
  LLVMValueRef *vals;     /* per expression, the value at the current point */
  int *expr_check;        /* per expression, its check in checks[] or -1 */
  ljc_check *checks;
  int nchecks;
  int *nest_last;         /* per nest: the last nest its loop also runs (lower.c's shares_loop),
                             or -1 for a nest that runs in an earlier one's */
  int *sum_head;          /* per nest: the nest whose loop also computes this sum (lower.c's
                             sum_groups; itself for that nest), or -1 */
  int32_t mm_bias;        /* ljc_gemm_bias: the bias LOAD whose sum with C the routine
                             writes into the first nest's slot (that nest not run), or -1 */
  int *b_summed;          /* per nest: the earlier kernel whose routine writes it instead
                             (ljc_gemm_b_sum: not run, or with a batch sum into runs, the
                             runs' sums added), or -1 */
  int32_t b_sum_slot;     /* ljc_gemm_b_sum: the slot this kernel's routine writes B's sums
                             into, at element b_sum_at + n·b_sum_step; -1 for none */
  int64_t b_sum_at, b_sum_step;
  int32_t found_load;     /* a LOAD ljc_emit_exprs takes as `found` instead (an argmax's
                             found element, lower.c's maps_found), or -1 */
  LLVMValueRef found;
  LLVMValueRef *load_at;  /* per expression: where a LOAD reads its element at the current
                             point instead of its slot (a transposed operand's tile, lower.c's
                             emit_tiles), or NULL */
  LLVMValueRef col_lo, col_hi; /* a matmul kernel of column tasks: the columns [col_lo, col_hi)
                                  its nests run on, or NULL (lower.c's emit_column_block) */
  int64_t block_rows;     /* a row-fused kernel's rows a block as its code runs them:
                             k->row_block, or fewer (lower.c's ahead_block_rows) */
  int ahead;              /* the nest that runs the first one over the next block's rows in
                             its loop (lower.c's runs_ahead), or 0 */
  LLVMValueRef ahead_end; /* then: the end of the call's rows */
  LLVMValueRef ahead_slot; /* and where the first nest's LOCAL slot for the next block is */
  int behind;             /* the last nest, when nest `ahead` also runs it over the previous
                             block's rows (lower.c's runs_behind), or 0 */
  LLVMValueRef behind_first; /* then: whether the block is the call's first (an i1) */
  LLVMValueRef *behind_slot; /* and per slot: where the previous block wrote a LOCAL slot
                                nest `behind` reads, or NULL */
} ljc_kctx;
/* Element offset (i64) of view v at point p. */
LLVMValueRef ljc_view_offset(ljc_ir *ir, const ljg_view *v, const ljc_point *p);
/* The same for an element of slot: relative to the block a LOCAL slot holds. */
LLVMValueRef ljc_slot_offset(ljc_kctx *kc, int32_t slot, const ljg_view *v, const ljc_point *p);
/* Emits the expressions `root` depends on (and root) at point p into kc->vals. */
void ljc_emit_exprs(ljc_kctx *kc, const ljc_point *p, int root);
/* The check expression e needs (LJG_KERR_DIV_ZERO, LJG_KERR_INDEX) or LJG_KERR_NONE. */
int ljc_expr_check(const ljg_kernel *k, int e);
/* Records a failed check: sets its flag where `bad` and keeps the smallest such value (value
 * may be NULL). */
void ljc_fail_where(ljc_kctx *kc, int check, LLVMValueRef bad, LLVMValueRef value);

/* depthwise.c: depthwise convolutions of a row-fused WINDOW kernel of whole planes computed
 * from the planes' rows, their im2col or col2im not run. */
/* Whether kernel k's im2col is not run: each nest that reads it is a depthwise convolution's
 * product or weight gradient, which ljc_emit_depthwise_nest computes from the image's rows. */
bool ljc_depthwise_cols(const ljg_program *p, const ljg_kernel *k);
/* Whether nest s of kernel k is one of those (and ljc_depthwise_cols holds). */
bool ljc_depthwise_nest(const ljg_program *p, const ljg_kernel *k, int s);
/* The nest whose depthwise sums take nest s of kernel k on (nest s not run), or -1: nest s
 * adds a bias to the sums of nest s - 1, or bounds them (a relu, a clamp), or both, which
 * the sums do themselves, writing its output instead; or it copies what such a nest s - 1
 * wrote into a layout of its own (the planes of a 1×1 convolution's operand after a depthwise
 * one), which the sums then write. */
int ljc_depthwise_epilogue(const ljg_program *p, const ljg_kernel *k, int s);
/* Whether the output of nest s of kernel k is written a row of the convolution's output at a
 * time by depthwise sums (of nest s, or of nest s - 1 when nest s is their epilogue). */
bool ljc_depthwise_writes_rows(const ljg_program *p, const ljg_kernel *k, int s);
/* Nest s (ljc_depthwise_nest) on the planes [lo, hi). */
void ljc_emit_depthwise_nest(ljc_kctx *kc, int s, LLVMValueRef lo, LLVMValueRef hi);
/* Whether kernel k's col2im and the nest before it (win_at - 1) are a depthwise convolution's
 * input gradient of stride 1, the col2im of dY times the weight, which
 * ljc_emit_depthwise_image computes from dY's rows instead (neither runs). */
bool ljc_depthwise_image(const ljg_program *p, const ljg_kernel *k);
/* The image of ljc_depthwise_image on the planes [lo, hi). */
void ljc_emit_depthwise_image(ljc_kctx *kc, LLVMValueRef lo, LLVMValueRef hi);
/* Whether the planes of kernel k's depthwise products (ljc_depthwise_cols or
 * ljc_depthwise_image) run flat: a vector over several of their rows, small planes of stride
 * 1 whose output is the size of the source. */
bool ljc_depthwise_flat(const ljg_program *p, const ljg_kernel *k);

/* gemm.c: the matmul routines, each compiled once per session into a module of its own:
 * void lj_gemm_<f32|f64>_<variant>[_a_window](i64 *args), where args is the argument block below (the
 * pointer fields stored as pointers). A and B: the address of element (0, 0, 0) and the
 * strides of the batch, row and column dims; C contiguous [B, M, N] (one [M, N] matrix with
 * SUM) with C_ORIGIN subtracted from every element offset (a LOCAL slot's block), and
 * A_ORIGIN from A's (a trailing product's A, a LOCAL block; 0 for the others); the rows
 * [BEGIN, END) of C are computed, summed over the BATCH matrices with SUM. When an operand is
 * an im2col packed from its image (B with the WINDOW variant, A in an A-window routine), its
 * address is the image's element (0, 0, 0, 0), its batch stride the image's, and the IMG_*
 * fields the image's other strides and sizes; its element (b, k, n) of B or (b, m, k) of A is
 * the im2col's with window WIN_* (kh, kw, stride, pad, dilation; OW windows a row), and its
 * other strides are unused. WORK: for the Winograd routines of a forward product and an input
 * gradient, ljc_winograd_work_bytes() in the calling kernel's frame, which keeps what one call
 * computed for the next (the transformed weight) over a run of the kernel, and FRESH 1 on a
 * run's first call (nothing kept yet);
 * NULL and 0 for the others. LDC: the elements between C's rows (N but in a call by column
 * tasks). COL_TASKS (ljg_kernel.mm_col_tasks): 0, or [BEGIN, END) are blocks of that many
 * columns, computed for every row (the taps routine's always are). ROWS_OUTER: 0, or 1 for
 * the WINOGRAD and WINOGRAD_DX variants when [BEGIN, END) number C's rows m·BATCH + b, row m
 * of every matrix in turn (ljc_gemm_rows_outer). STREAM: 1 when C's full vectors are stored
 * non-temporally (ljc_gemm_streams_c; the routines of tiles do, where C's rows start on whole
 * vectors), else 0. BIAS: NULL, or what element
 * (m, n) of C's matrix b starts from, BIAS[(b mod BIAS_NB)·BIAS_SB + m·BIAS_SM + n·BIAS_SN] (a
 * convolution's bias, BIAS_SN 0; a linear layer's, along the columns, BIAS_SM 0 and BIAS_SN 1;
 * ljc_gemm_bias: BIAS_NB the matrices whose biases differ, a grouped convolution's groups, else
 * BATCH), before the products are added (the ROWS, COLS, ELEMENTS, DIRECT, WINDOW, WINOGRAD
 * and TAPS_FWD variants, BIAS_SN 0 or 1, 0 for the last two; NULL, zeros and 1 for the others). RELU: 1
 * when, with a BIAS, C's elements leave the last block of k as relu's (x < 0 ? 0 : x: a
 * convolution's relu(C + bias); ljc_gemm_bias; the ROWS, COLS, ELEMENTS, DIRECT, WINDOW and
 * WINOGRAD variants), else 0. BSUM: NULL, or where the
 * WINOGRAD_DW and TAPS_DW variants write Σ_b Σ_k B[b, k, n] of each column n of their call,
 * BSUM[n·BSUM_S] (a convolution's bias gradient; ljc_gemm_b_sum). UNPOOL_AT: NULL, or for
 * TAPS_DW the i8 positions of a 2×2 max-pool's maxima (ljg_kernel.mm_unpool_at), read with
 * B's strides: B is then the pooled gradient, its K the pooled positions' count times 4, and
 * dY's row y is built from B's row y/2 (element x from x/2 where the position is 2·(y%2) +
 * x%2, else 0); UNPOOL_MASK: NULL, or where, read the same way, an element not above 0 zeroes
 * B's (a relu's gradient). W_ORIGIN, W_ROW, W_CHAN, W_TAP: for the WINOGRAD, WINOGRAD_DX,
 * TAPS_FWD and TAPS_DX variants, where the weight of output row r, input channel c and tap t (3·i + j) is: A's
 * element W_ORIGIN + r·W_ROW + c·W_CHAN + t·W_TAP of each matrix (0 for the others). */
enum {
  LJC_GEMM_A, LJC_GEMM_A_SB, LJC_GEMM_A_SM, LJC_GEMM_A_SK,
  LJC_GEMM_B, LJC_GEMM_B_SB, LJC_GEMM_B_SK, LJC_GEMM_B_SN,
  LJC_GEMM_C, LJC_GEMM_C_ORIGIN, LJC_GEMM_A_ORIGIN, LJC_GEMM_M, LJC_GEMM_N, LJC_GEMM_K, LJC_GEMM_BATCH, LJC_GEMM_SUM,
  LJC_GEMM_BEGIN, LJC_GEMM_END, LJC_GEMM_WORK, LJC_GEMM_FRESH, LJC_GEMM_LDC, LJC_GEMM_COL_TASKS, LJC_GEMM_ROWS_OUTER,
  LJC_GEMM_STREAM, LJC_GEMM_BIAS, LJC_GEMM_BIAS_SB, LJC_GEMM_BIAS_SM, LJC_GEMM_BIAS_SN, LJC_GEMM_BIAS_NB,
  LJC_GEMM_RELU, LJC_GEMM_BSUM, LJC_GEMM_BSUM_S,
  LJC_GEMM_UNPOOL_AT, LJC_GEMM_UNPOOL_MASK, LJC_GEMM_W_ORIGIN, LJC_GEMM_W_ROW, LJC_GEMM_W_CHAN, LJC_GEMM_W_TAP,
  LJC_GEMM_IMG_SC, LJC_GEMM_IMG_SH, LJC_GEMM_IMG_SW, LJC_GEMM_IMG_H, LJC_GEMM_IMG_W,
  LJC_GEMM_WIN_KH, LJC_GEMM_WIN_KW, LJC_GEMM_WIN_SY, LJC_GEMM_WIN_SX, LJC_GEMM_WIN_PY, LJC_GEMM_WIN_PX,
  LJC_GEMM_WIN_DY, LJC_GEMM_WIN_DX, LJC_GEMM_WIN_OW, LJC_GEMM_NARGS
};
/* How a routine reads B: packed from rows contiguous along n, from columns contiguous along
 * k, element by element, where it is (contiguous along n: ljg_matmul_b_in_place),
 * packed from the image of an im2col (ljg_kernel.mm_cols), or, for an f32 im2col of a 3×3 or
 * 5×5 window of stride and dilation 1, through Winograd's transforms (winograd.c); WINOGRAD_DX:
 * the same for a matmul Wᵀ·dY whose col2im (3×3 or 5×5, stride and dilation 1) joined its kernel, a
 * convolution's input gradient, computed as the convolution of dY with the flipped weight
 * straight into the col2im's output (ljc_gemm_writes_window); WINOGRAD_DW: a weight
 * gradient, the batch sum of im2col(x)·dYᵀ (A the im2col), through the transforms' adjoints;
 * TAPS_DW: the same for a 3×3 window of column stride 1 over few channels, dY read in place
 * (taps.c); WINDOW_T: B the transpose of an im2col, packed from the image by transposes of
 * the window's vectors (a grouped convolution's weight gradient, dY·colsᵀ); TAPS_FWD: B the
 * im2col of a 3×3 window of column stride 1 or 2, C's matrices of at most 8 rows (a grouped
 * convolution's groups of few channels), each row summed from the image's rows where they are
 * (taps.c); TAPS_DX: the same for an input gradient as WINOGRAD_DX's, of at most 8 channels a
 * plane's matrix; TAPS_WT: WINDOW_T's product of at most 8 rows a matrix and a 3×3 window of
 * column stride 1 or 2 (a grouped convolution's weight gradient for each image), summed from
 * dY's and the image's rows where they are (taps.c). The Winograd variants only where the
 * kernel allows them (ljg_kernel.mm_no_winograd).
 * A routine is numbered kind · LJC_GEMM_NVARIANTS + variant, kind = dtype (0: f32, 1: f64) + 2
 * when A is an im2col packed from its image, a block of rows at a time, or LJC_GEMM_BF16; for
 * the Winograd variants (f32) the kind is their tile instead: 0 for F(4×4, 3×3), 1 for
 * F(5×5, 3×3), 2 for F(2×2, 5×5) and 3 for F(3×3, 5×5). */
enum {
  LJC_GEMM_ROWS, LJC_GEMM_COLS, LJC_GEMM_ELEMENTS, LJC_GEMM_DIRECT, LJC_GEMM_WINDOW, LJC_GEMM_WINOGRAD,
  LJC_GEMM_WINOGRAD_DX, LJC_GEMM_WINOGRAD_DW, LJC_GEMM_TAPS_DW, LJC_GEMM_WINDOW_T, LJC_GEMM_TAPS_FWD,
  LJC_GEMM_TAPS_DX, LJC_GEMM_TAPS_WT, LJC_GEMM_NVARIANTS
};
/* The kind of the routines of bf16 operands and f32 products (the ROWS, COLS, ELEMENTS and
 * WINDOW variants, B the im2col for the last; gemm.c's "bf16 operands"): what a kernel whose
 * A and B are bf16 loads and whose matmul is f32 calls (ljg_fuse_options.bf16_dot). */
enum { LJC_GEMM_BF16 = 4 };
enum { LJC_GEMM_NROUTINES = 5 * LJC_GEMM_NVARIANTS };
/* Loads an argument block's fields (its pointer fields as pointers) into arg[LJC_GEMM_NARGS]. */
void ljc_gemm_load_args(ljc_ir *ir, LLVMValueRef block, LLVMValueRef *arg);
/* Defines routine r (r = ljc_gemm_code(r); external, its name from ljc_gemm_routine_name) in
 * ir's module. */
void ljc_define_gemm_routine(ljc_ir *ir, int r);
/* Whether ljc_define_gemm_routine defines r for a target with bf16 dot products or without
 * (ljc_bf16_dot): a code routine (ljc_gemm_code(r) = r) of a kind its variant has (the
 * Winograd variants' two tiles, TAPS_DW's f32 with A the im2col, LJC_GEMM_BF16's with bf16
 * dot products). */
bool ljc_gemm_routine_defined(int r, bool bf16_dot);
/* The name of the code routine r runs (ljc_gemm_code's). */
void ljc_gemm_routine_name(int r, char name[32]);
/* The routine whose code routine r runs: WINOGRAD_DX's is WINOGRAD's of the same kind and
 * TAPS_DX's TAPS_FWD's (each two differ only in where they read the weight, the W_ fields),
 * every other its own. */
int ljc_gemm_code(int r);
/* The routine a kernel's matmul is (the code it calls: ljc_gemm_code's), or -1 when it is no
 * matmul the routines do (not f32/f64, an operand not a load through a single-level view, or
 * of another dtype than the product's but both bf16 for an f32 one). */
int ljc_gemm_routine(const ljg_kernel *k);
/* Whether matmul kernel k's routine may store C non-temporally (the STREAM field): a routine
 * of tiles, no sum over the batch and K in one block of k, so that the routine writes each line
 * of C once and never reads it (stream.c decides whether the kernel's nests let it). */
bool ljc_gemm_streams_c(const ljg_kernel *k);
/* A matmul kernel's rows [begin, end) as a call of its routine; false, emitting nothing, when
 * there is none (ljc_gemm_routine). `first` (an i1): the first call of a run of the kernel. */
bool ljc_emit_gemm(ljc_kctx *kc, LLVMValueRef begin, LLVMValueRef end, LLVMValueRef first);

/* Whether the kernel's routine writes what its window (a col2im) would: the window is not
 * emitted then. */
bool ljc_gemm_writes_window(const ljg_kernel *k);
/* Whether the kernel's tasks number C's rows row by row of all its matrices (m·B + b; the
 * argument block's ROWS_OUTER): a Winograd forward product or input gradient that takes a
 * thread's whole range in one call (no nests, no blocks: ljc_gemm_in_one_call, or no row
 * blocks), the same weight for every matrix, where ljc_winograd_rows_outer says. */
bool ljc_gemm_rows_outer(const ljg_kernel *k);
/* The LOAD of a bias the kernel's routine starts C's rows from, or -1: when the kernel's
 * first nest computes nothing but C plus a value for each row of C (a convolution's bias) or
 * for each column (a linear layer's; not for the Winograd and taps routines), C read by
 * nothing else, so that the routine can write the sum into that nest's slot and
 * the nest does not run (a pass over C's block less); or, for the routines that apply one
 * (LJC_GEMM_RELU), a relu of that sum. */
int32_t ljc_gemm_bias(const ljg_program *p, const ljg_kernel *k);
/* Whether the first nest of matmul kernel k (with nests) is a relu that its routine applies
 * when ljc_gemm_bias folds the nest into it (LJC_GEMM_RELU): the routines of tiles and
 * Winograd's (not taps.c's). */
bool ljc_gemm_bias_relu(const ljg_kernel *k);
/* Whether matmul kernel ki's routine also writes a later kernel's nest (*kj, *nest) that sums
 * its B over the batch and k for each column n (a convolution's bias gradient from dY, which
 * the weight gradient's routine reads anyway), the nest then not run: its output's element
 * of column n at *at + n·*step. Only for the WINOGRAD_DW and TAPS_DW routines, an OUTPUT
 * slot no kernel between touches, B written by none. A batch sum into runs (mm_sum > 1)
 * writes each run's sums after its C's matrices in C's slot (room the buffer plan gives it),
 * and the nest adds them up row by row of its tasks instead: the nest's kernel then reads C
 * and splits the nest's columns. */
bool ljc_gemm_b_sum(const ljg_program *p, int ki, int *kj, int *nest, int64_t *at, int64_t *step);
/* lower.c: whether nest s of kernel k runs a loop of its own (shares none with another). */
bool ljc_nest_alone(const ljg_kernel *k, int s);
/* lower.c: the last nest of kernel k that runs in the loop of nest s (s where it is alone). */
int ljc_nest_loop_end(const ljg_kernel *k, int s);
/* lower.c: whether kernel k is a max-pool's gradient whose column buffer is not written: its
 * code stores each row of the image, a plane after another, from the windows' values and
 * positions (the image's rows at whole vectors of each plane's start). */
bool ljc_unpools(const ljg_program *p, const ljg_kernel *k);
/* Where the bias of element (m, n) of matrix bi of C is (of type t; the argument block's BIAS,
 * read only where that is not NULL). */
LLVMValueRef ljc_gemm_bias_at(ljc_ir *ir, const LLVMValueRef *arg, LLVMTypeRef t, LLVMValueRef bi, LLVMValueRef m,
                              LLVMValueRef n);
/* Whether a routine applies its call's relu (LJC_GEMM_RELU) where `last` (an i1: the last
 * block of k; NULL: all of k at once), from the call's arguments arg: an i1. */
LLVMValueRef ljc_gemm_relu_now(ljc_ir *ir, const LLVMValueRef *arg, LLVMValueRef last);
/* x < 0 ? 0 : x, as the relu op is (keeps -0 and NaN), where `now` (an i1; NULL: always),
 * else x; x a scalar or a vector. */
LLVMValueRef ljc_gemm_relu_if(ljc_ir *ir, LLVMValueRef now, LLVMValueRef x);
/* x (a vector of one element of C's rows m .. m + lanes - 1 of matrix bi, BIAS_SM 1) plus
 * their bias where `rows` (an i1 vector) says, when the argument block has one; else x. */
LLVMValueRef ljc_gemm_add_row_bias(ljc_ir *ir, const LLVMValueRef *arg, LLVMValueRef x, LLVMValueRef bi,
                                   LLVMValueRef m, LLVMValueRef rows);

/* winograd.c: defines the routine `name` of variant LJC_GEMM_WINOGRAD (_DX's too) or _DW (f32) for
 * r × r windows (3 or 5) with output tiles of tm × tm (4 or 5 for r = 3, 2 or 3 for
 * r = 5), its products in register tiles of mr tiles. */
void ljc_define_winograd(ljc_ir *ir, const char *name, int mr, int variant, int tm, int r);
/* The bytes of the argument block's WORK area of such a routine, whose input tiles are tn × tn
 * (tm + r - 1). */
int64_t ljc_winograd_work_bytes(int tn);
/* Whether such a routine of tm × tm tiles should number a product's tasks row by row of all
 * its matrices (ROWS_OUTER, rows_outer in winograd.c): images of oh × ow outputs that go
 * several at a time (each one block of its tiles), more rows than a block's. */
bool ljc_winograd_rows_outer(int tm, int64_t oh, int64_t ow, int64_t rows);

/* taps.c: defines the routine `name` of variant LJC_GEMM_TAPS_DW, _FWD or _WT (f32). */
void ljc_define_taps_dw(ljc_ir *ir, const char *name);
void ljc_define_taps_fwd(ljc_ir *ir, const char *name);
void ljc_define_taps_wt(ljc_ir *ir, const char *name);

/* debuginfo.c: LJ_HLO_DEBUG. ljc_dbg_begin starts debug info for the module from the call
 * sites of g's nodes (nothing happens with g NULL, nor in the other calls then);
 * ljc_dbg_function gives fn a subprogram located at `node`'s call site and makes the function
 * itself the builder's location; ljc_dbg_at makes `node`'s call site the location of what is built next;
 * ljc_dbg_end finalizes it. */
typedef struct ljc_dbg ljc_dbg;
void ljc_dbg_begin(ljc_ir *ir, const ljg_graph *g);
void ljc_dbg_function(ljc_ir *ir, LLVMValueRef fn, int node);
void ljc_dbg_at(ljc_ir *ir, int node);
void ljc_dbg_end(ljc_ir *ir);

/* lower.c: defines `<name>_k<i>` for every kernel of p. */
/* Lowers kernel k of p into ir's module as the function `<name>_k<k>`. */
void ljc_lower_kernel(ljc_ir *ir, const ljg_program *p, int k, const char *name);
/* The nest of kernel ki that its lowering runs a block behind in the loop of another
 * (runs_behind: log_softmax's output pass), or -1. */
int ljc_behind_nest(const ljg_program *p, int ki);

/* pipeline.c: optimizes the module for tm (with loop vectorization at opt level 2 unless
 * !vectorize; with the alignments of its loads and stores inferred where `align`, for
 * stream.c); false with LJ_ERR_COMPILE on failure. */
bool ljc_optimize(LLVMModuleRef mod, LLVMTargetMachineRef tm, int opt_level, bool vectorize, bool align);

/* stream.c: non-temporal stores. Sets stream[s] (p->nslots entries) for the outputs kernel ki
 * writes with them under threshold nt_store_bytes on LLVM's CPU cpu; false when there are none. */
bool ljc_stream_slots(const ljg_program *p, int ki, int64_t nt_store_bytes, const char *cpu, uint8_t *stream);
/* Tasks a kernel whose task range runs along a streamed output peels off the range's start,
 * so that the rest starts on a whole vector (its largest element count); 0: no need. */
int64_t ljc_stream_peel(const ljc_ir *ir, const ljg_program *p, int ki, const uint8_t *stream);
/* After optimization: marks non-temporal the vector stores of function `entry` into streamed
 * slots that LLVM proved aligned, and fences its returns when there are any (x86 only). */
void ljc_mark_stream_stores(LLVMModuleRef mod, const char *entry, const uint8_t *stream, int nslots);

/* twins.c: kernels compiled once per distinct body. The hash of the text of function `body`
 * of mod, its name and debug locations left out, and of the metadata mod defines, in *h;
 * false when mod has no such function. */
bool ljc_body_hash(LLVMModuleRef mod, const char *body, ljb_hash *h);
/* twin[k]: the first of the n kernels whose body hash equals h[k] (k itself when none does,
 * or has[k] is false). */
void ljc_find_twins(int n, const ljb_hash *h, const bool *has, int *twin);
/* Makes function `body` of mod an exported symbol that twins call, never inlined. */
void ljc_share_body(LLVMModuleRef mod, const char *body);
/* Calls twin_body (another object's export) where mod called its own `body`, which is
 * deleted with the internal functions only it called. */
void ljc_call_twin_body(LLVMModuleRef mod, const char *body, const char *twin_body);

/* routine_store.c: GEMM routine r's object file for target (ljc_session_routine_target) as built
 * earlier in this process: a malloc'd copy and its size, or NULL; and keeping one (a copy). */
char *ljc_routine_store_get(const char *target, int r, size_t *size);
void ljc_routine_store_put(const char *target, int r, const char *bytes, size_t size);

/* perfmap.c: the functions of an object file in the section of its symbol sym (sym itself and
 * the internal helpers next to it), at offsets from sym; empty if sym is absent. */
typedef struct ljc_perf_symbols {
  int n;
  struct ljc_perf_symbol {
    int64_t offset;
    uint64_t size;
    char name[80];
  } *sym;
} ljc_perf_symbols;
ljc_perf_symbols ljc_perf_read(LLVMMemoryBufferRef obj, const char *sym);
/* A line in perf's map file of this process for each of syms, sym being at start; frees the
 * list. */
void ljc_perf_map_add(uint64_t start, ljc_perf_symbols *syms);
/* The code generation level that goes with an opt level, for modules whose loops are
 * vectorized or not (ljc_optimize's vectorize). */
LLVMCodeGenOptLevel ljc_codegen_level(int opt_level, bool vectorize);

#endif
