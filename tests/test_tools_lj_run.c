/* test_tools_lj_run.c — lj-run replays a graph saved by LJ_SAVE_TENSORS_FILE: on the inputs
 * its documented generator makes, its outputs are bit for bit what the program computed on the
 * same inputs; it picks graphs by index and by hash, agrees with the reference interpreter,
 * writes the compile's dump files, and rejects a bad choice with a message; graphs written as
 * IR text reach code paths the public ops do not; its timed runs feed the updated parameters
 * back. */
#include "test_util.h"

#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

enum { SEED = 7 };

/* lj-run's inputs (its --help): element i of parameter k is splitmix64(seed * 2^32 + k * 2^48
 * + i), floats uniform in [-1, 1). */
static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static lj_tensor *lj_run_input(int k, int64_t rows, int64_t cols) {
  float *v = malloc((size_t)(rows * cols) * sizeof *v);
  for (int64_t i = 0; i < rows * cols; i++) {
    uint64_t r = splitmix64(((uint64_t)SEED << 32) + ((uint64_t)k << 48) + (uint64_t)i);
    v[i] = (float)((double)(r >> 40) * 0x1p-23 - 1.0);
  }
  lj_tensor *t = lj_tensor_from_host(lj_default_device(), LJ_F32, LJ_SHAPE(rows, cols), v);
  free(v);
  return t;
}

/* Runs lj-run with args; its exit status, stdout+stderr in *out (malloc'd). */
static int lj_run(const char *args, char **out) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s %s 2>&1", LJ_RUN_PATH, args);
  return tu_command(cmd, out);
}

START_TEST(test_replay_bit_for_bit) {
  char dir[] = "/tmp/lj_test_lj_run_XXXXXX";
  ck_assert(mkdtemp(dir));
  char save[256], outdir[256];
  snprintf(save, sizeof save, "%s/graphs", dir);
  snprintf(outdir, sizeof outdir, "%s/out", dir);
  ck_assert_int_eq(mkdir(outdir, 0777), 0);
  lj_config cfg = lj_config_default();
  cfg.save_tensors_file = save;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
  /* graph 0: a layer with log_softmax (parameters in first use: x, w, b); graph 1: another */
  lj_tensor *x = lj_run_input(0, 37, 29), *w = lj_run_input(1, 29, 11), *b = lj_run_input(2, 1, 11);
  lj_tensor *y = lj_log_softmax(lj_relu(lj_add(lj_matmul(x, w), lj_mul_scalar(b, 0.5))), 1);
  lj_tensor *z = lj_sum(lj_tanh(x), 1, (const int[]){0}, false);
  ck_assert_int_eq(lj_sync_tensors(1, &y), LJ_OK);
  char hash_z[33];
  ck_assert_int_eq(lj_graph_hash(1, &z, hash_z), LJ_OK);
  ck_assert_int_eq(lj_sync_tensors(1, &z), LJ_OK);
  size_t ny = 37 * 11 * sizeof(float), nz = 29 * sizeof(float);
  float *vy = malloc(ny), *vz = malloc(nz);
  ck_assert_int_eq(lj_tensor_to_host(y, vy, ny), LJ_OK);
  ck_assert_int_eq(lj_tensor_to_host(z, vz, nz), LJ_OK);
  lj_shutdown();

  char args[1024], *out;
  size_t size;
  snprintf(args, sizeof args, "--seed %d --outputs %s --interp %s.0", SEED, outdir, save);
  ck_assert_msg(lj_run(args, &out) == 0, "%s", out);
  ck_assert_msg(strstr(out, "4 parameters, 1 outputs") && strstr(out, "compile: ") && strstr(out, "run: median "),
                "%s", out);
  ck_assert_msg(strstr(out, "0 element(s) beyond tolerance"), "%s", out);
  free(out);
  char path[300];
  snprintf(path, sizeof path, "%s/root0.bin", outdir);
  char *got = tu_read_file(path, &size);
  ck_assert(got && size == ny);
  ck_assert_msg(memcmp(got, vy, ny) == 0, "lj-run's log_softmax layer differs from the program's");
  free(got);

  snprintf(args, sizeof args, "--seed %d --outputs %s --hash %.12s --runs 2 %s.0", SEED, outdir, hash_z, save);
  ck_assert_msg(lj_run(args, &out) == 0, "%s", out);
  ck_assert_msg(strstr(out, hash_z), "%s", out);
  free(out);
  got = tu_read_file(path, &size);
  ck_assert(got && size == nz && memcmp(got, vz, nz) == 0);
  free(got);

  /* the last graph by index is the same one; --dump writes the compile's files */
  snprintf(args, sizeof args, "--index -1 --runs 0 --dump %s/dump %s.0", dir, save);
  ck_assert_msg(lj_run(args, &out) == 0, "%s", out);
  free(out);
  snprintf(path, sizeof path, "%s/dump/%s.opt.ll", dir, hash_z);
  got = tu_read_file(path, &size);
  ck_assert_msg(got && strstr(got, "define void @lj_"), "%s not written", path);
  free(got);

  ck_assert_int_eq(lj_run("--index 2 /dev/null", &out), 2);
  ck_assert_msg(strstr(out, "holds no graph"), "%s", out);
  free(out);
  snprintf(args, sizeof args, "--index 5 %s.0", save);
  ck_assert_int_eq(lj_run(args, &out), 2);
  ck_assert_msg(strstr(out, "--index 5:") && strstr(out, "holds 2 graph(s)"), "%s", out);
  free(out);
  free(vy);
  free(vz);
  tu_remove_dir(dir);
}
END_TEST

/* Graphs written as IR text, replayed against the interpreter: a per-image product whose A is
 * an im2col (the public ops only make the summed one, a weight gradient) packs A from the
 * image, in runs (stride 1, padding 1) and gathered (stride 2, no padding); a batch sum into
 * two matrices, each of half the batch (the matmul pass makes them of larger batches only);
 * products of 16-bit floats, which the frontend records as f32 ones between casts, computed
 * so by a GEMM routine (the f32 one, or for bf16 with bf16 dot products the bf16 one; their
 * results were once stored as f32 into a buffer of half the size, corrupting the heap); a
 * scatter-add whose indices are random numbers, in a kernel
 * whose other nests vectorize: its nest was asked to vectorize as random nests are, which
 * LLVM could not do and said so on stderr. Nothing a replay prints comes from LLVM. */
START_TEST(test_ir_text_graphs) {
  enum { NGRAPHS = 6 };
  static const struct {
    const char *text, *kernel; /* what the dump's kernels.txt says */
  } graphs[NGRAPHS] = {
      {"IR {\n  %0 = f32[3,5,9,11] data(), param=0\n"
       "  %1 = f32[3,45,99] im2col(%0), window=(3,3,1,1,1,1,1,1), fill=0\n"
       "  %2 = f32[3,99,37] data(), param=1\n  %3 = f32[3,45,37] matmul(%1, %2), ROOT=0\n}\n",
       "A: im2col"},
      {"IR {\n  %0 = f32[3,5,9,11] data(), param=0\n"
       "  %1 = f32[3,45,20] im2col(%0), window=(3,3,2,2,0,0,1,1), fill=0\n"
       "  %2 = f32[3,20,37] data(), param=1\n  %3 = f32[3,45,37] matmul(%1, %2), ROOT=0\n}\n",
       "A: im2col"},
      {"IR {\n  %0 = f32[4,6,50] data(), param=0\n  %1 = f32[4,50,7] data(), param=1\n"
       "  %2 = f32[2,6,7] matmul_sum(%0, %1), ROOT=0\n}\n",
       "summed over the batch in 2 runs"},
      {"IR {\n  %0 = bf16[2,33,17] data(), param=0\n  %1 = bf16[2,17,40] data(), param=1\n"
       "  %2 = bf16[2,33,40] matmul(%0, %1), ROOT=0\n}\n",
       "calls lj_gemm_[bf]"},
      {"IR {\n  %0 = f16[4,6,50] data(), param=0\n  %1 = f16[4,50,7] data(), param=1\n"
       "  %2 = f16[2,6,7] matmul_sum(%0, %1), ROOT=0\n}\n",
       "calls lj_gemm_f32"},
      {"IR {\n  %0 = f32[17,15,33,1] data(), param=0\n  %1 = i64[] scalar(), param=1, value=5\n"
       "  %2 = i64[] scalar(), param=2, value=7\n  %3 = f32[17,15,33,5] randn(%1, %2)\n"
       "  %4 = i64[] scalar(), param=3, value=8\n  %5 = f32[17,15,33,5] rand(%1, %4)\n"
       "  %6 = f32[] scalar(), param=4, value=0.999\n  %7 = f32[1,1,1,1] reshape(%6)\n"
       "  %8 = f32[17,15,33,5] expand(%7)\n  %9 = f32[17,15,33,5] mul(%5, %8)\n"
       "  %10 = i64[17,15,33,5] cast(%9)\n  %11 = f32[17,15,33,1] scatter_add(%0, %10, %3), dim=3\n"
       "  %12 = f32[17,15,33,1] data(), param=5\n  %13 = f32[17,15,33,1] add(%11, %12), ROOT=0\n"
       "  %14 = bool[17,15,33,5] eq(%3, %8), ROOT=1\n}\n",
       "scatter-add at"},
  };
  char dir[] = "/tmp/lj_test_lj_run_XXXXXX";
  ck_assert(mkdtemp(dir));
  for (int i = 0; i < NGRAPHS; i++) {
    char path[300], args[1024], *out;
    snprintf(path, sizeof path, "%s/graph%d.txt", dir, i);
    FILE *f = fopen(path, "w");
    ck_assert(f && fputs(graphs[i].text, f) >= 0 && fclose(f) == 0);
    snprintf(args, sizeof args, "--runs 0 --interp --dump %s/dump%d %s", dir, i, path);
    ck_assert_msg(lj_run(args, &out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "0 element(s) beyond tolerance"), "%s", out);
    ck_assert_msg(!strstr(out, "remark") && !strstr(out, "warning"), "graph %d: %s", i, out);
    free(out);
    snprintf(args, sizeof args, "grep -h '%s' %s/dump%d/*.kernels.txt", graphs[i].kernel, dir, i);
    ck_assert_msg(tu_command(args, &out) == 0, "graph %d: no kernel says \"%s\": %s", i, graphs[i].kernel, out);
    free(out);
  }
  tu_remove_dir(dir);
}
END_TEST

/* The last value the metrics file at path gives counter name (-1: none). */
static int64_t last_counter(const char *path, const char *name) {
  char *text = tu_read_file(path, NULL), key[128];
  ck_assert_ptr_nonnull(text);
  snprintf(key, sizeof key, "Counter: %s\n  Value: ", name);
  int64_t v = -1;
  for (const char *p = text; (p = strstr(p, key)) != NULL; p += strlen(key)) v = strtoll(p + strlen(key), NULL, 10);
  free(text);
  return v;
}

/* lj-run's timed runs go on as a training loop does: the output that replaces a parameter
 * (DONOR=) is that parameter in the next run, written in its buffer; only the first run and
 * the first timed one (lj-run still holds the inputs for the interpreter) copy it. A second
 * root of the same donor is not fed back (the sanitizer build would see its buffer released
 * twice); a root whose donor has another shape of its size is. The interpreter still checks
 * the first run's outputs against the first inputs. */
START_TEST(test_runs_feed_back) {
  char dir[] = "/tmp/lj_test_lj_run_XXXXXX";
  ck_assert(mkdtemp(dir));
  char path[300], metrics[300], cmd[1024], *out;
  snprintf(path, sizeof path, "%s/graph.txt", dir);
  snprintf(metrics, sizeof metrics, "%s/metrics.txt", dir);
  FILE *f = fopen(path, "w");
  ck_assert(f &&
            fputs("IR {\n  %0 = f32[4,8] data(), param=0, DONOR=(0,1)\n  %1 = f32[] scalar(), param=1, value=0.5\n"
                  "  %2 = f32[1,1] reshape(%1)\n  %3 = f32[4,8] expand(%2)\n  %4 = f32[4,8] mul(%0, %3), ROOT=0\n"
                  "  %5 = f32[4,8] add(%0, %3), ROOT=1\n  %6 = f32[32] data(), param=2, DONOR=2\n"
                  "  %7 = f32[2,16] reshape(%5), ROOT=2\n  %8 = f32[32] neg(%6), ROOT=3\n}\n",
                  f) >= 0 &&
            fclose(f) == 0);
  snprintf(cmd, sizeof cmd, "LJ_METRICS_FILE=%s %s --runs 5 --interp %s 2>&1", metrics, LJ_RUN_PATH, path);
  ck_assert_msg(tu_command(cmd, &out) == 0, "%s", out);
  ck_assert_msg(strstr(out, "0 element(s) beyond tolerance"), "%s", out);
  free(out);
  ck_assert_int_eq(last_counter(metrics, "DonatedBuffers"), 4);
  ck_assert_int_eq(last_counter(metrics, "DonationCopies"), 2);
  tu_remove_dir(dir);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("tools_lj_run");
  TCase *tc = tu_tcase("lj_run");
  tcase_add_test(tc, test_replay_bit_for_bit);
  tcase_add_test(tc, test_ir_text_graphs);
  tcase_add_test(tc, test_runs_feed_back);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
