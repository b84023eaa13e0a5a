/* fpmode.c — whether the calling thread flushes subnormal floats to zero: on x86 the MXCSR's
 * flush-to-zero and denormals-are-zero bits (results below the smallest normal number become
 * zero; subnormal operands are read as zero), on AArch64 the FPCR's FZ bit (both). Elsewhere
 * a thread never flushes. */
#include "base/base.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

enum { MXCSR_FLUSH = 1u << 6 | 1u << 15 }; /* denormals-are-zero, flush-to-zero */

bool ljb_flushes_subnormals(void) { return (_mm_getcsr() & MXCSR_FLUSH) == MXCSR_FLUSH; }

bool ljb_flush_subnormals(bool on) {
  unsigned csr = _mm_getcsr(), want = on ? csr | MXCSR_FLUSH : csr & ~(unsigned)MXCSR_FLUSH;
  if (want != csr) _mm_setcsr(want);
  return (csr & MXCSR_FLUSH) == MXCSR_FLUSH;
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
  uint64_t v = fpcr(), w = on ? v | FPCR_FZ : v & ~(uint64_t)FPCR_FZ;
  if (w != v) __asm__ volatile("msr fpcr, %0" : : "r"(w));
  return v & FPCR_FZ;
}
#else
bool ljb_flushes_subnormals(void) { return false; }

bool ljb_flush_subnormals(bool on) {
  (void)on;
  return false;
}
#endif
