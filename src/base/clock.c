/* clock.c — the monotonic clock behind every timing metric. */
#include "base/base.h"

#include <time.h>

uint64_t ljb_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}
