/* hash.c — a 128-bit streaming hash (two 64-bit lanes, multiply-xorshift mixing) and a
 * clock. Not cryptographic: keys only need to be well spread and collision-resistant in
 * practice; cache hits are confirmed structurally. */
#include "base/base.h"

#include <string.h>

uint64_t ljb_mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

void ljb_hasher_init(ljb_hasher *h, uint64_t seed) {
  h->a = 0x9e3779b97f4a7c15ULL ^ seed;
  h->b = 0x6a09e667f3bcc909ULL + ljb_rotl64(seed, 29);
}

void ljb_hash_f64(ljb_hasher *h, double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  ljb_hash_u64(h, u);
}

void ljb_hash_bytes(ljb_hasher *h, const void *p, size_t n) {
  const unsigned char *s = p;
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, s, 8);
    ljb_hash_u64(h, w);
    s += 8;
    n -= 8;
  }
  uint64_t w = 0;
  if (n) memcpy(&w, s, n);
  ljb_hash_u64(h, w ^ ((uint64_t)n << 56));
}

void ljb_hash_str(ljb_hasher *h, const char *s) { ljb_hash_bytes(h, s, strlen(s)); }

ljb_hash ljb_hasher_final(const ljb_hasher *h) {
  ljb_hash r;
  r.lo = ljb_mix64(h->a ^ ljb_rotl64(h->b, 17));
  r.hi = ljb_mix64(h->b + r.lo * 0x9e3779b97f4a7c15ULL);
  return r;
}

void ljb_hash_hex(ljb_hash h, char out[33]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[i] = digits[(h.hi >> (60 - 4 * i)) & 15];
    out[16 + i] = digits[(h.lo >> (60 - 4 * i)) & 15];
  }
  out[32] = 0;
}
