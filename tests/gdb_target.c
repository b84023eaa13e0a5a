/* gdb_target.c — the program test_tools_gdb debugs: it records a scaled exponential in a
 * function of its own and reads the result, so the kernel computing it runs once. With
 * LJ_HLO_DEBUG=1 a breakpoint on the marked line stops twice: when the ops are recorded and
 * when the kernel computes them. */
#include <lazyjit.h>

#include <stdio.h>

static lj_tensor *scaled_exp(lj_tensor *x) {
  lj_tensor *y = lj_exp(lj_mul_scalar(x, 0.5)); /* gdb stops here */
  return y;
}

int main(void) {
  float v[64], out[64];
  for (int i = 0; i < 64; i++) v[i] = (float)i / 64;
  lj_tensor *x = lj_tensor_from_host(lj_default_device(), LJ_F32, LJ_SHAPE(64), v);
  lj_tensor *y = scaled_exp(x);
  if (lj_tensor_to_host(y, out, sizeof out) != LJ_OK) {
    fprintf(stderr, "%s\n", lj_last_error());
    return 1;
  }
  printf("y[63] = %.6f\n", out[63]);
  lj_tensor_release(x);
  lj_tensor_release(y);
  lj_shutdown();
  return 0;
}
