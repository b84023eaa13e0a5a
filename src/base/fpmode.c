/* fpmode.c — whether the calling thread flushes subnormal floats to zero: on x86 the MXCSR's
 * flush-to-zero and denormals-are-zero bits (results below the smallest normal number become
 * zero; subnormal operands are read as zero), on AArch64 the FPCR's FZ bit (both). Elsewhere
 * a thread never flushes. */
#include "base/base.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

enum { MXCSR_DAZ = 1u << 6, MXCSR_FTZ = 1u << 15 };

bool ljb_flushes_subnormals(void) { return (_mm_getcsr() & (MXCSR_DAZ | MXCSR_FTZ)) == (MXCSR_DAZ | MXCSR_FTZ); }

bool ljb_flush_subnormals(bool on) {
  unsigned csr = _mm_getcsr();
  bool was = (csr & (MXCSR_DAZ | MXCSR_FTZ)) == (MXCSR_DAZ | MXCSR_FTZ);
  _mm_setcsr(on ? csr | MXCSR_DAZ | MXCSR_FTZ : csr & ~(unsigned)(MXCSR_DAZ | MXCSR_FTZ));
  return was;
}
#elif defined(__aarch64__)
enum { FPCR_FZ = 1u << 24 };

static uint64_t fpcr(void) {
  uint64_t v;
  __asm__ volatile("mrs %0, fpcr" : "=r"(v));
  return v;
}

bool ljb_flushes_subnormals(void) { return fpcr() & FPCR_FZ; }

bool ljb_flush_subnormals(bool on) {
  uint64_t v = fpcr();
  uint64_t w = on ? v | FPCR_FZ : v & ~(uint64_t)FPCR_FZ;
  __asm__ volatile("msr fpcr, %0" : : "r"(w));
  return v & FPCR_FZ;
}
#else
bool ljb_flushes_subnormals(void) { return false; }

bool ljb_flush_subnormals(bool on) {
  (void)on;
  return false;
}
#endif
