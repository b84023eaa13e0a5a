/* philox.h — the counter-based generator behind rand/randn (Philox4x32-10), and how its
 * words become floats. The interpreter uses these functions; codegen_llvm/lower_rng.c emits
 * the same computation in IR. Element i of a random op with seed s and offset o uses
 * counter (lo(i), hi(i), lo(o), hi(o)) and key (lo(s), hi(s)), so values depend only on the
 * seed, the op's offset and the element's index — not on threads or fusion. */
#ifndef LJ_GRAPH_PHILOX_H
#define LJ_GRAPH_PHILOX_H

#include <math.h>
#include <stdint.h>

#define LJG_PHILOX_M0 0xD2511F53u
#define LJG_PHILOX_M1 0xCD9E8D57u
#define LJG_PHILOX_W0 0x9E3779B9u
#define LJG_PHILOX_W1 0xBB67AE85u
#define LJG_PHILOX_ROUNDS 10

static inline void ljg_philox(uint64_t index, uint64_t offset, uint64_t seed, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)index, c1 = (uint32_t)(index >> 32);
  uint32_t c2 = (uint32_t)offset, c3 = (uint32_t)(offset >> 32);
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < LJG_PHILOX_ROUNDS; r++) {
    uint64_t p0 = (uint64_t)LJG_PHILOX_M0 * c0, p1 = (uint64_t)LJG_PHILOX_M1 * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += LJG_PHILOX_W0;
    k1 += LJG_PHILOX_W1;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* Uniform [0,1) with 24 bits (f32 and narrower) or 53 bits (f64). */
static inline float ljg_u24(uint32_t w) { return (float)(w >> 8) * 0x1p-24f; }
static inline double ljg_u53(uint32_t a, uint32_t b) {
  return ((double)(a >> 5) * 0x1p26 + (double)(b >> 6)) * 0x1p-53;
}

/* Standard normal by Box-Muller from two uniforms; u1 is shifted to (0,1] so log is finite.
 * f32: u1 = u24(w0) + 2^-24, u2 = u24(w1); f64: u1 = u53(w0,w1) + 2^-53, u2 = u53(w2,w3).
 * Computed in the dtype's precision by compiled code; the interpreter uses f64. */
static inline double ljg_box_muller(double u1, double u2) {
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
