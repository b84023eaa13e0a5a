/* stream.c — non-temporal stores for outputs the caches cannot keep. A loop kernel that moves
 * at least the session's nt_store_bytes (LJ_NT_STORE_KB: by default the host's L3 size, at
 * most 32 MiB) writes each output of at least half that with non-temporal stores: straight
 * to memory, without first reading every line it writes into the cache (a fifth to a third
 * of a streaming kernel's traffic) and without evicting what the cache holds.
 *
 * x86 has non-temporal stores only for whole aligned vectors, and LLVM's vectorizer leaves a
 * loop scalar when its scalar stores are marked non-temporal (it cannot show their vectors
 * aligned), so the marking comes after optimization: every vector store into a streamed
 * output whose alignment LLVM proved gets !nontemporal. The lowering gives it what it needs
 * for the proof (lower.c): the streamed slots' pointers are loaded with !align 64 (every slot
 * is 64-byte aligned), and a kernel whose task range runs along a streamed output peels the
 * range's start up to a whole vector; rows whose length is a multiple of a vector start
 * aligned by themselves. A store LLVM could not show aligned stays an ordinary one. The
 * kernel then ends with an sfence: non-temporal stores are not ordered with the other
 * stores, and the thread that joins the kernel's tasks must see them.
 *
 * A matmul kernel's C streams from its GEMM routine instead (gemm.c: the argument block's
 * STREAM, which the routine honours where C's rows start on whole vectors), where C is written
 * once and not read back from the caches (streams_c); its nests' outputs as a loop's.
 *
 * The output of a nest the lowering runs a block behind in the loop of the exps
 * (ljc_behind_nest: log_softmax's x − max − log sum, softmax's exps / sum) streams too, but on
 * a Zen 4 core (znver4, whose AVX-512 runs on 256-bit halves): there non-temporal stores in
 * that loop slowed it by a fifth, in L3 and from memory alike, and ordinary stores made it the
 * fastest of the ways tried (log_softmax over [4096, 1024], one thread: 1.60-1.82 ms streamed,
 * 1.29-1.47 not, 1.33-1.48 with the output in a pass of its own and streamed; over [16384,
 * 1024] from memory 6.8-7.5, 5.6-6.1 and 5.8-7.0). A Zen 5 core is the other way round: with
 * ordinary stores, which read every line of the output before writing it, that loop took
 * 0.78-0.82 ms against 0.58-0.61 streamed ([4096, 1024], one thread), and from
 * memory 3.97-4.25 against 2.92-3.27 ([16384, 1024]). */
#include "codegen_llvm/ir.h"

#include <stdlib.h>
#include <string.h>

/* Whether cpu streams the output of a nest run behind (above). */
static bool streams_behind(const char *cpu) { return strcmp(cpu, "znver4") != 0; }

/* A depthwise convolution's input gradient computed from dY's rows (ljc_depthwise_image), and
 * a max-pool's gradient stored from its windows' values and positions (ljc_unpools), write
 * their image a plane after another, each row's vectors inside it aligned where its rows are
 * whole lines: streamed when it is not LOCAL. Of stride 2, 3×3 over 128 channels of 112×112
 * at batch 32, the depthwise kernel took 17.1 ms with ordinary stores, 8.4 streamed (8.9 and
 * 6.9 on two threads); ResNet's max-pool gradient over [8, 64, 112, 112], one thread, 3.15
 * and 1.80-2.10. */
static bool streams_image(const ljg_program *p, const ljg_kernel *k, int64_t nt_store_bytes) {
  const ljg_slot *s = &p->slots[k->win_out_slot];
  return (ljc_depthwise_image(p, k) || ljc_unpools(p, k)) && s->kind != LJG_SLOT_LOCAL &&
         2 * s->nbytes >= nt_store_bytes &&
         k->win_img[3] * (int64_t)lj_dtype_size((lj_dtype)k->win_dtype) % LJC_LINE_BYTES == 0;
}

/* A matmul's C, where its routine may stream it (ljc_gemm_streams_c), C is not a block on the
 * stack, and the kernel moves the threshold: when nothing follows the product in its kernel,
 * a C of at least half the threshold (the product of [4096, 3] by [3, 4096], a point cloud's
 * pairwise products, one thread, wrote its 64 MiB in 8.5 ms with ordinary stores, each first
 * reading its line, and 2.6 ms streamed); when nests follow it on the whole of a thread's rows
 * (no blocks of rows, no column tasks), a C of at least the threshold, which the nests read
 * back from memory either way (relu(x·Wᵀ + b) to [4096, 4096] from 3 inputs, one thread: 12.7
 * -> 6.4 ms with C and the relu's output streamed). */
static bool streams_c(const ljg_program *p, const ljg_kernel *k, int64_t nt_store_bytes) {
  if (!ljc_gemm_streams_c(k)) return false; /* A and B are loads then */
  const ljg_slot *c = &p->slots[k->mm_out_slot];
  const ljg_kexpr *ea = &k->exprs[k->mm_a], *eb = &k->exprs[k->mm_bm];
  int64_t moved = c->nbytes + p->slots[ea->slot].nbytes + (eb->slot != ea->slot ? p->slots[eb->slot].nbytes : 0);
  bool after_all = k->nnests == 0 || (k->row_block >= k->ntasks && !k->mm_col_tasks);
  return after_all && c->kind != LJG_SLOT_LOCAL && c->kind != LJG_SLOT_SCALAR &&
         (k->nnests ? 1 : 2) * c->nbytes >= nt_store_bytes && moved >= nt_store_bytes;
}

/* The bytes of the rows nest n of kernel k writes as a row of the output: a loop's, its last
 * dim's; in a kernel of depthwise sums (ljc_depthwise_cols), the convolution's output rows
 * where the sums write them (ljc_depthwise_writes_rows), and -1 (not streamed) for the other
 * sums (the weight gradient's, few and read back) and for an output another nest of the
 * kernel reads. With its bias added in a nest of its own, a 3×3 over 128 channels of 56×56
 * at batch 32 took 4.8 ms on one thread, 4.15 with that nest streamed (its stores, in a pass
 * of their own, waited on reading every line); its sums now start from the bias and write
 * the output among their multiply-adds, 2.96. */
static int64_t row_bytes(const ljg_program *p, const ljg_kernel *k, int n) {
  const ljg_nest *nest = &k->nests[n];
  int64_t esize = (int64_t)lj_dtype_size(nest->out_dtype);
  if (k->kind == LJG_K_WINDOW) {
    if (ljg_nests_read(k, nest->out_slot, n, n)) return -1;
    if (ljc_depthwise_writes_rows(p, k, n)) return k->win_ow * esize;
    if (ljc_depthwise_nest(p, k, n)) return -1;
  }
  return nest->ndim ? nest->shape[nest->ndim - 1] * esize : 0;
}

bool ljc_stream_slots(const ljg_program *p, int ki, int64_t nt_store_bytes, const char *cpu, uint8_t *stream) {
  const ljg_kernel *k = &p->kernels[ki];
  memset(stream, 0, (size_t)p->nslots);
  if (nt_store_bytes <= 0) return false;
  bool c = k->kind == LJG_K_MATMUL && streams_c(p, k, nt_store_bytes);
  if (k->kind == LJG_K_MATMUL && k->nnests == 0) return (stream[k->mm_out_slot] = c);
  if (k->kind != LJG_K_LOOPS && k->kind != LJG_K_WINDOW && k->kind != LJG_K_MATMUL) return false;
  uint8_t *used = ljb_xcalloc((size_t)p->nslots + 1, 1);
  for (int e = 0; e < k->nexprs; e++)
    if (k->exprs[e].kind == LJG_X_LOAD || k->exprs[e].kind == LJG_X_BUFFER) used[k->exprs[e].slot] = 1;
  for (int n = 0; n < k->nnests; n++) used[k->nests[n].out_slot] = 1;
  if (k->kind == LJG_K_WINDOW) used[k->win_out_slot] = 1;
  int64_t moved = 0;
  for (int s = 0; s < p->nslots; s++)
    if (used[s] && p->slots[s].kind != LJG_SLOT_LOCAL) moved += p->slots[s].nbytes;
  free(used);
  if (moved < nt_store_bytes) return false;
  if (k->kind == LJG_K_WINDOW && !ljc_depthwise_cols(p, k))
    return (stream[k->win_out_slot] = streams_image(p, k, nt_store_bytes));
  bool any = c;
  if (c) stream[k->mm_out_slot] = 1;
  int behind = streams_behind(cpu) ? -1 : ljc_behind_nest(p, ki);
  for (int n = 0; n < k->nnests; n++) {
    const ljg_nest *nest = &k->nests[n];
    const ljg_slot *s = &p->slots[nest->out_slot];
    /* rows stream only as whole cache lines (or a nest of one row): a row of another length
     * ends in a scalar loop whose ordinary stores share lines with the vectors' non-temporal
     * ones (the copy of [2048, 56, 56] out of a padded [2048, 58, 58], a pad's gradient, one
     * thread: 5.75 ms streamed, 1.3 not); a matmul kernel's epilogue only an output of at
     * least the threshold, as its C (a convolution of 3 to 64 channels over 32×32, batch 64,
     * its 16 MiB relu(C + b) read back by the backward kernels, two threads: 3.13 -> 3.33 ms
     * streamed at half the threshold) */
    int64_t row = row_bytes(p, k, n), least = k->kind == LJG_K_MATMUL ? nt_store_bytes : (nt_store_bytes + 1) / 2;
    if (nest->scatter_index >= 0 || s->kind == LJG_SLOT_LOCAL || s->kind == LJG_SLOT_SCALAR || s->nbytes < least ||
        n == behind || row < 0 || (nest->ndim > 1 && row % LJC_LINE_BYTES))
      continue;
    stream[nest->out_slot] = 1;
    any = true;
  }
  return any;
}

int64_t ljc_stream_peel(const ljc_ir *ir, const ljg_program *p, int ki, const uint8_t *stream) {
  const ljg_kernel *k = &p->kernels[ki];
  int64_t peel = 0;
  for (int n = 0; n < k->nnests; n++) {
    const ljg_nest *nest = &k->nests[n];
    if (!stream[nest->out_slot] || k->row_block > 0 || nest->ndim - 1 != k->task_dim) continue;
    int64_t lanes = ir->vec_bytes / (int64_t)lj_dtype_size(nest->out_dtype);
    if (lanes > peel) peel = lanes;
  }
  return peel;
}

/* The slot whose pointer p is an address in: p through GEPs down to the entry's load of
 * slots[s] (a GEP of the slot array by 8·s bytes, or the array itself for slot 0); -1 when
 * it is anything else. */
static int slot_of(LLVMValueRef p, LLVMValueRef slots) {
  while (LLVMIsAGetElementPtrInst(p)) p = LLVMGetOperand(p, 0);
  if (!LLVMIsALoadInst(p)) return -1;
  LLVMValueRef at = LLVMGetOperand(p, 0);
  if (at == slots) return 0;
  if (!LLVMIsAGetElementPtrInst(at) || LLVMGetNumOperands(at) != 2 || LLVMGetOperand(at, 0) != slots) return -1;
  LLVMValueRef off = LLVMGetOperand(at, 1);
  if (!LLVMIsAConstantInt(off)) return -1;
  /* indexed by pointers as lowered, by bytes once InstCombine canonicalized it */
  bool by_pointer = LLVMGetTypeKind(LLVMGetGEPSourceElementType(at)) == LLVMPointerTypeKind;
  long long bytes = LLVMConstIntGetSExtValue(off) * (by_pointer ? 8 : 1);
  return bytes % 8 ? -1 : (int)(bytes / 8);
}

void ljc_mark_stream_stores(LLVMModuleRef mod, const char *entry, const uint8_t *stream, int nslots) {
  LLVMValueRef fn = LLVMGetNamedFunction(mod, entry);
  if (!fn || LLVMCountBasicBlocks(fn) == 0) return;
  LLVMContextRef ctx = LLVMGetModuleContext(mod);
  LLVMTargetDataRef td = LLVMGetModuleDataLayout(mod);
  LLVMValueRef slots = LLVMGetParam(fn, 0);
  bool marked = false;
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) {
      if (!LLVMIsAStoreInst(i)) continue;
      LLVMTypeRef t = LLVMTypeOf(LLVMGetOperand(i, 0));
      if (LLVMGetTypeKind(t) != LLVMVectorTypeKind) continue;
      unsigned long long size = LLVMStoreSizeOfType(td, t);
      if (LLVMGetAlignment(i) < (size < LJC_LINE_BYTES ? size : LJC_LINE_BYTES)) continue; /* its parts aligned */
      int s = slot_of(LLVMGetOperand(i, 1), slots);
      if (s < 0 || s >= nslots || !stream[s]) continue;
      ljc_set_nontemporal(ctx, i);
      marked = true;
    }
  if (!marked) return;
  /* an sfence before every return */
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
    LLVMValueRef term = LLVMGetBasicBlockTerminator(bb);
    if (!term || !LLVMIsAReturnInst(term)) continue;
    LLVMPositionBuilderBefore(b, term);
    ljc_sfence(b, mod);
  }
  LLVMDisposeBuilder(b);
}
