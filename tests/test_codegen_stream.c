/* Non-temporal stores (codegen_llvm/stream.c): with a low LJ_NT_STORE_KB, kernels writing
 * large outputs (loops', a depthwise convolution's forward sums' and input gradient's, and
 * the nests after the sums, a max-pool's gradient's image, a product's C from its GEMM
 * routine) store them with non-temporal vector stores and fence; the values match the interpreter whatever the task
 * ranges' alignment (odd sizes, two threads, row lengths that are and are not whole vectors),
 * and nothing streams when the threshold is 0 or not met. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Starts the runtime with threshold kb and `threads` threads, compiling for cpu (NULL: the
 * host) and saving the assembly of what it runs (tu_take_saved reads it). */
static void init_streaming(int kb, int threads, const char *cpu, char *path, size_t cap) {
  lj_config cfg = lj_config_default();
  cfg.nt_store_kb = kb;
  cfg.num_threads = threads;
  cfg.cpu = cpu;
  tu_init_saving(cfg, "asm", path, cap);
}

/* Starts the runtime with a 64 KiB threshold and `threads` threads, dumping its compiles
 * into a new directory made from the template dir (mkdtemp): the kernels' text and the GEMM
 * routines' objects. */
static void init_dumping(int threads, char *dir) {
  ck_assert_ptr_nonnull(mkdtemp(dir));
  lj_config cfg = lj_config_default();
  cfg.nt_store_kb = 64;
  cfg.num_threads = threads;
  cfg.dump_dir = dir;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
}

/* How many times text names `what`. */
static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)) != NULL; p++) n++;
  return n;
}

static lj_tensor *relu_chain(lj_tensor *x, lj_tensor *w, lj_tensor *b) {
  return lj_mul_scalar(lj_relu(lj_add(lj_mul(x, w), b)), 0.5);
}

/* An elementwise chain over n elements (400 KB to 800 KB) against a 64 KiB threshold: its
 * task range runs along the output, so each thread's range is peeled to a whole vector. */
START_TEST(test_stream_elementwise) {
  static const int64_t sizes[] = {100003, 65536 + 5, 131072};
  static const lj_dtype dts[] = {LJ_F32, LJ_F64};
  for (int threads = 1; threads <= 2; threads++)
    for (int d = 0; d < 2; d++)
      for (int i = 0; i < 3; i++) {
        char path[64];
        init_streaming(64, threads, NULL, path, sizeof path);
        int64_t n = sizes[i];
        lj_tensor *x = tu_tensor(dts[d], LJ_SHAPE(n), TU_ANY, 1);
        lj_tensor *w = tu_tensor(dts[d], LJ_SHAPE(n), TU_ANY, 2);
        lj_tensor *b = tu_tensor(dts[d], LJ_SHAPE(n), TU_ANY, 3);
        tu_check1(relu_chain(x, w, b), tu_rtol(dts[d]));
        lj_tensor_release(x);
        lj_tensor_release(w);
        lj_tensor_release(b);
        char *text = tu_take_saved(path);
        ck_assert_int_gt(count(text, "movnt"), 0);
        ck_assert_int_gt(count(text, "sfence"), 0); /* the stores are fenced */
        free(text);
        lj_shutdown();
      }
}
END_TEST

/* softmax's and log_softmax's row kernels write their output in their last pass, which runs a
 * block behind in the loop of the exps (the lowering's runs_behind): rows of 1024 floats
 * start on whole vectors and stream, but for a Zen 4 (stream.c); rows of 1001 do not (a row
 * starts wherever the one before ended), so LLVM cannot show the stores aligned and they stay
 * ordinary. Compiled for an AVX2 machine and, where the host runs its code, for a Zen 4. All
 * match the interpreter. */
static const char *const row_targets[] = {"haswell", "znver4"};

START_TEST(test_stream_rows) {
  static const int64_t cols[] = {1024, 1001};
  const char *cpu = row_targets[_i];
  if (!tu_host_runs(cpu)) return;
  bool zen4 = strcmp(cpu, "znver4") == 0;
  for (int log = 0; log < 2; log++)
    for (int c = 0; c < 2; c++)
      for (int threads = 1; threads <= 2; threads++) {
        char path[64];
        init_streaming(256, threads, cpu, path, sizeof path);
        lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(129, cols[c]), TU_ANY, 4);
        tu_check1(log ? lj_log_softmax(x, 1) : lj_softmax(x, 1), tu_rtol(LJ_F32));
        lj_tensor_release(x);
        char *text = tu_take_saved(path);
        int nt = count(text, "movnt");
        free(text);
        if (cols[c] == 1024 && !zen4)
          ck_assert_int_gt(nt, 0);
        else
          ck_assert_int_eq(nt, 0);
        lj_shutdown();
      }
}
END_TEST

/* A copy of the inside of padded planes, [100, 56, 56] of [100, 58, 58]: its rows of 56
 * floats are not whole cache lines, and a row's last elements, stored one at a time, would
 * share lines with its vectors' non-temporal stores: nothing streams. Rows of 64 floats,
 * [100, 48, 64] of [100, 50, 66], stream. Both match the interpreter. */
START_TEST(test_stream_whole_lines) {
  static const int64_t rows[] = {56, 48}, cols[] = {56, 64};
  for (int i = 0; i < 2; i++) {
    char path[64];
    init_streaming(256, 1, NULL, path, sizeof path);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(100, rows[i] + 2, cols[i] + 2), TU_ANY, 5);
    lj_tensor *inside = lj_slice(lj_slice(x, 1, 1, rows[i] + 1, 1), 2, 1, cols[i] + 1, 1);
    tu_check1(lj_mul_scalar(inside, 2), tu_rtol(LJ_F32));
    lj_tensor_release(x);
    char *text = tu_take_saved(path);
    if (i == 0)
      ck_assert_int_eq(count(text, "movnt"), 0);
    else
      ck_assert_int_gt(count(text, "movnt"), 0);
    free(text);
    lj_shutdown();
  }
}
END_TEST

/* A depthwise convolution's input gradient, computed from dY's rows a plane at a time
 * (codegen_llvm/depthwise.c), streams its image where its rows are whole cache lines (32
 * floats; stride 1 and 2, one and two threads), and not where they are not (28 floats). All
 * match the interpreter. */
START_TEST(test_stream_depthwise_image) {
  static const int64_t widths[] = {32, 28};
  for (int i = 0; i < 2; i++)
    for (int stride = 1; stride <= 2; stride++) {
      char path[64];
      init_streaming(256, stride, NULL, path, sizeof path);
      lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(4, 16, 34, widths[i]), TU_ANY, 6);
      lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(16, 1, 3, 3), TU_ANY, 7);
      ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
      lj_scope_begin();
      lj_tensor *y = lj_conv2d(x, w, NULL, (const int[]){stride, stride}, (const int[]){1, 1}, NULL, 16);
      lj_tensor *g = tu_tensor(LJ_F32, lj_tensor_ndim(y), lj_tensor_shape(y), TU_ANY, 8);
      ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
      lj_tensor *dx = lj_tensor_grad(x);
      tu_check_interp_tol(1, &dx, 1e-5, 5e-4); /* nine products a sum, fused or not */
      lj_scope_end();
      lj_tensor_release(x);
      lj_tensor_release(w);
      char *text = tu_take_saved(path);
      if (i == 0)
        ck_assert_int_gt(count(text, "movnt"), 0);
      else
        ck_assert_int_eq(count(text, "movnt"), 0);
      free(text);
      lj_shutdown();
    }
}
END_TEST

/* A max-pool's gradient that stores the image a row at a time from the windows' values and
 * positions (lower.c's emit_unpool) streams it where its rows are whole cache lines (48
 * floats: of stride 2, 3×3 padded by 1, each row ending in a vector that overlaps the one
 * before; of stride 1), and not where they are not (28 floats); one and two threads. All
 * match the interpreter (the overlapping windows' sums in another order). */
START_TEST(test_stream_unpool_image) {
  static const int64_t widths[] = {48, 28};
  for (int i = 0; i < 2; i++)
    for (int stride = 1; stride <= 2; stride++) {
      char path[64];
      init_streaming(256, stride, NULL, path, sizeof path);
      lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(4, 16, 34, widths[i]), TU_ANY, 12);
      ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
      lj_scope_begin();
      lj_tensor *y = lj_max_pool2d(x, (const int[]){3, 3}, (const int[]){stride, stride}, (const int[]){1, 1});
      lj_tensor *g = tu_tensor(LJ_F32, lj_tensor_ndim(y), lj_tensor_shape(y), TU_ANY, 13);
      ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, g), 0, NULL, false)), LJ_OK);
      lj_tensor *dx = lj_tensor_grad(x);
      tu_check_interp_tol(1, &dx, 1e-5, 1e-6);
      lj_scope_end();
      lj_tensor_release(x);
      char *text = tu_take_saved(path);
      ck_assert_msg((count(text, "movnt") > 0) == (i == 0), "width %lld, stride %d", (long long)widths[i], stride);
      free(text);
      lj_shutdown();
    }
}
END_TEST

/* A depthwise convolution's forward product, its sums read from the image's rows: they write
 * the output (starting from the bias where there is one, taking a relu after it) and stream
 * it where its rows are whole cache lines (32 floats, not 28). All match the interpreter. */
START_TEST(test_stream_depthwise_forward) {
  static const struct {
    int64_t width;
    bool bias, relu, streams;
  } cases[] = {{32, false, false, true}, {32, true, false, true}, {32, true, true, true},
               {28, false, false, false}, {28, true, false, false}, {28, true, true, false}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char path[64];
    init_streaming(256, 1, NULL, path, sizeof path);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(4, 16, 34, cases[c].width), TU_ANY, 9);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(16, 1, 3, 3), TU_ANY, 10);
    lj_tensor *b = cases[c].bias ? tu_tensor(LJ_F32, LJ_SHAPE(16), TU_ANY, 11) : NULL;
    lj_scope_begin();
    lj_tensor *y = lj_conv2d(x, w, b, NULL, (const int[]){1, 1}, NULL, 16);
    if (cases[c].relu) y = lj_relu(y);
    tu_check_interp_tol(1, &y, 1e-5, 5e-4);
    lj_scope_end();
    lj_tensor_release(x);
    lj_tensor_release(w);
    lj_tensor_release(b);
    char *text = tu_take_saved(path);
    ck_assert_msg((count(text, "movnt") > 0) == cases[c].streams, "case %zu", c);
    free(text);
    lj_shutdown();
  }
}
END_TEST

/* A product alone whose C is at least half the threshold (64 KiB) and whose K takes one block
 * of k has its GEMM routine store C's full vectors non-temporally: the kernel's lowering says
 * so and the routine's code has the stores. B read in place (K 3, 16) or packed (K 64, and
 * transposed), f64, rows of whole vectors and not (1000 floats: the routine finds them
 * unaligned and stores them as ever), one and two threads. So does one with a relu after it
 * where the relu runs on all of a thread's rows after the product (B packed, by transposes:
 * one block of rows), its C and its output at least the threshold, the relu's output streamed
 * too; not where the relu runs on blocks of rows (B read in place), which read C back from
 * the stack, nor a product whose K is more than a block of k. All match the interpreter. */
START_TEST(test_stream_matmul) {
  static const struct {
    int64_t m, n, k;
    lj_dtype dt;
    bool bt, relu, streams;
  } cases[] = {{300, 512, 3, LJ_F32, false, false, true}, {257, 1000, 16, LJ_F32, false, false, true},
               {200, 512, 64, LJ_F32, true, false, true}, {300, 256, 8, LJ_F64, false, false, true},
               {300, 512, 3, LJ_F32, false, true, false}, {300, 512, 3, LJ_F32, true, true, true},
               {64, 512, 1000, LJ_F32, false, false, false}};
  const char *says = "the routine stores C's full vectors non-temporally";
  for (int threads = 1; threads <= 2; threads++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      char dir[] = "/tmp/lj_test_stream_mm_XXXXXX";
      init_dumping(threads, dir);
      lj_dtype dt = cases[c].dt;
      lj_tensor *a = tu_tensor(dt, LJ_SHAPE(cases[c].m, cases[c].k), TU_ANY, 12);
      lj_tensor *b = cases[c].bt ? tu_tensor(dt, LJ_SHAPE(cases[c].n, cases[c].k), TU_ANY, 13)
                                 : tu_tensor(dt, LJ_SHAPE(cases[c].k, cases[c].n), TU_ANY, 13);
      lj_scope_begin();
      lj_tensor *y = lj_matmul(a, cases[c].bt ? lj_transpose(b, 0, 1) : b);
      lj_tensor *r = cases[c].relu ? lj_relu(y) : y;
      tu_check_interp_tol(1, &r, 1e-5, 1e-6 * (double)cases[c].k); /* sums of k products that cancel in places */
      lj_scope_end();
      lj_tensor_release(a);
      lj_tensor_release(b);
      ck_assert_msg(tu_dir_has(dir, ".kernels.txt", says) == cases[c].streams, "case %zu, %d threads", c, threads);
      if (cases[c].relu) ck_assert(tu_dir_has(dir, ".kernels.txt", "nest 0 stores its aligned vectors non-temporally"));
      if (cases[c].streams) {
        char cmd[200], *out = NULL;
        snprintf(cmd, sizeof cmd, "objdump -d %s/*.lj_gemm_*.o | grep -c movnt", dir);
        tu_command(cmd, &out);
        ck_assert_msg(atoi(out) > 0, "case %zu: no non-temporal store in the routine", c);
        free(out);
      }
      tu_remove_dir(dir);
      lj_shutdown();
    }
}
END_TEST

/* A convolution's output kept, with a relu of it after: the routine starts C's rows from the
 * bias and writes them into the output, which streams from the routine's stores while the
 * relu reads the block back (its own thread's stores). Both outputs match the interpreter, on
 * one and two threads. */
START_TEST(test_stream_conv_bias) {
  static const int s2[2] = {2, 2}, p1[2] = {1, 1};
  for (int threads = 1; threads <= 2; threads++) {
    char dir[] = "/tmp/lj_test_stream_conv_XXXXXX";
    init_dumping(threads, dir);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 16, 128, 128), TU_ANY, 14);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(32, 16, 3, 3), TU_ANY, 15);
    lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(32), TU_ANY, 16);
    lj_scope_begin();
    lj_tensor *y = lj_conv2d(x, w, b, s2, p1, NULL, 1);
    lj_tensor *outs[2] = {y, lj_relu(lj_add_scalar(y, -1))};
    tu_check_interp_tol(2, outs, 1e-5, 1e-4); /* sums of 144 products */
    lj_scope_end();
    lj_tensor_release(x);
    lj_tensor_release(w);
    lj_tensor_release(b);
    ck_assert(tu_dir_has(dir, ".kernels.txt", "nest 0 not run: the routine starts C's rows from its bias"));
    ck_assert(tu_dir_has(dir, ".kernels.txt", "nests 0, 1 store their aligned vectors non-temporally"));
    tu_remove_dir(dir);
    lj_shutdown();
  }
}
END_TEST

/* Below the threshold, or with it 0, the same chain has no non-temporal store. */
START_TEST(test_stream_off) {
  static const int kbs[] = {0, 4096};
  for (int i = 0; i < 2; i++) {
    char path[64];
    init_streaming(kbs[i], 1, NULL, path, sizeof path);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(100003), TU_ANY, 1);
    tu_check1(relu_chain(x, x, x), tu_rtol(LJ_F32));
    lj_tensor_release(x);
    char *text = tu_take_saved(path);
    ck_assert_int_eq(count(text, "movnt") + count(text, "sfence"), 0);
    free(text);
    lj_shutdown();
  }
}
END_TEST

/* The default threshold is the L3's size up to 32 MiB; LJ_NT_STORE_KB sets it; a negative one
 * is refused by name. */
START_TEST(test_stream_config) {
  ck_assert_int_ge(lj_config_default().nt_store_kb, 0);
  ck_assert_int_le(lj_config_default().nt_store_kb, 32 << 10);
  setenv("LJ_NT_STORE_KB", "1234", 1);
  lj_config c = lj_config_default();
  unsetenv("LJ_NT_STORE_KB");
  ck_assert_int_eq(c.nt_store_kb, 1234);
  c.nt_store_kb = -1;
  ck_assert_int_eq(lj_init(&c), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "nt_store_kb (LJ_NT_STORE_KB) is -1", NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("codegen_stream");
  TCase *tc = tu_tcase("stream");
  tcase_add_test(tc, test_stream_elementwise);
  tcase_add_loop_test(tc, test_stream_rows, 0, 2);
  tcase_add_test(tc, test_stream_whole_lines);
  tcase_add_test(tc, test_stream_depthwise_image);
  tcase_add_test(tc, test_stream_unpool_image);
  tcase_add_test(tc, test_stream_depthwise_forward);
  tcase_add_test(tc, test_stream_matmul);
  tcase_add_test(tc, test_stream_conv_bias);
  tcase_add_test(tc, test_stream_off);
  tcase_add_test(tc, test_stream_config);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
