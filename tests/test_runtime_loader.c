/* test_runtime_loader.c — IDX datasets and the device loader on small files written here
 * (raw and gzip'd): values, labels and shapes as stored; u8 scaling and normalization;
 * batches with the last one kept or dropped; seeded shuffles that are permutations,
 * reproducible and different per epoch; barriers every N batches; missing, corrupt,
 * truncated and inconsistent files and bad options give clear errors; lj_shutdown with a
 * live loader. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

enum { N = 10, H = 3, W = 2 };
static char dir[256];

static const char *path_of(const char *name) {
  static char buf[4][512];
  static int k;
  char *p = buf[k++ % 4];
  snprintf(p, 512, "%s/%s", dir, name);
  return p;
}

/* Writes an IDX file: header for (type, dims) then `bytes` of data as given (big-endian
 * already); gzip'd when the name ends in .gz. */
static void write_idx(const char *name, int type, int ndim, const uint32_t *dims, const void *bytes, size_t n) {
  unsigned char hdr[4 + 4 * 8] = {0, 0, (unsigned char)type, (unsigned char)ndim};
  for (int i = 0; i < ndim; i++)
    for (int b = 0; b < 4; b++) hdr[4 + 4 * i + b] = (unsigned char)(dims[i] >> (24 - 8 * b));
  size_t hn = 4 + 4 * (size_t)ndim;
  const char *path = path_of(name);
  if (strstr(name, ".gz")) {
    gzFile f = gzopen(path, "wb");
    ck_assert(f);
    ck_assert_int_eq(gzwrite(f, hdr, (unsigned)hn), (int)hn);
    if (n) ck_assert_int_eq(gzwrite(f, bytes, (unsigned)n), (int)n);
    ck_assert_int_eq(gzclose(f), Z_OK);
  } else {
    FILE *f = fopen(path, "wb");
    ck_assert(f);
    ck_assert_uint_eq(fwrite(hdr, 1, hn, f), hn);
    if (n) ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
  }
}

static unsigned char pixel(int i, int k) { return (unsigned char)((i * 37 + k * 11) % 256); }

/* images [N, H, W] u8 and labels [N] u8 (label i = 9 - i: all distinct) as name.{images,labels}[.gz] */
static void write_images(const char *suffix) {
  unsigned char img[N * H * W], lab[N];
  for (int i = 0; i < N; i++) {
    lab[i] = (unsigned char)(9 - i);
    for (int k = 0; k < H * W; k++) img[i * H * W + k] = pixel(i, k);
  }
  char a[64], b[64];
  snprintf(a, sizeof a, "images%s", suffix);
  snprintf(b, sizeof b, "labels%s", suffix);
  write_idx(a, 0x08, 3, (uint32_t[]){N, H, W}, img, sizeof img);
  write_idx(b, 0x08, 1, (uint32_t[]){N}, lab, sizeof lab);
}

static lj_dataset *load(const char *suffix) {
  char a[64], b[64];
  snprintf(a, sizeof a, "images%s", suffix);
  snprintf(b, sizeof b, "labels%s", suffix);
  lj_dataset *ds = lj_dataset_load_idx(path_of(a), path_of(b));
  ck_assert_msg(ds, "%s", lj_last_error());
  return ds;
}

static void setup(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/lj_loader_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  ck_assert(mkdtemp(dir));
  write_images("");
  write_images(".gz");
}

static void teardown(void) {
  tu_remove_dir(dir);
}

/* Reads a batch back: x values and labels. */
static void read_batch(lj_tensor *x, lj_tensor *y, int64_t *n, float *xv, int64_t *yv) {
  *n = lj_tensor_shape(y)[0];
  ck_assert_int_eq(lj_tensor_dtype(x), LJ_F32);
  ck_assert_int_eq(lj_tensor_dtype(y), LJ_I64);
  ck_assert_int_eq(lj_tensor_ndim(x), 4);
  const int64_t *s = lj_tensor_shape(x);
  ck_assert(s[0] == *n && s[1] == 1 && s[2] == H && s[3] == W);
  ck_assert_int_eq(lj_tensor_to_host(x, xv, (size_t)*n * H * W * sizeof *xv), LJ_OK);
  ck_assert_int_eq(lj_tensor_to_host(y, yv, (size_t)*n * sizeof *yv), LJ_OK);
}

START_TEST(test_dataset_contents) {
  for (int gz = 0; gz < 2; gz++) {
    lj_dataset *ds = load(gz ? ".gz" : "");
    ck_assert_int_eq(lj_dataset_size(ds), N);
    int64_t shape[LJ_MAX_DIMS];
    ck_assert_int_eq(lj_dataset_sample_shape(ds, shape), 3);
    ck_assert(shape[0] == 1 && shape[1] == H && shape[2] == W);
    for (int i = 0; i < N; i++) ck_assert_int_eq(lj_dataset_label(ds, i), 9 - i);
    ck_assert_int_eq(lj_dataset_label(ds, N), -1);
    tu_expect_error(LJ_ERR_ARG, "lj_dataset_label", "index 10", "[0, 10)", NULL);
    lj_dataset *sub = lj_dataset_subset(ds, 3, 4);
    ck_assert(sub);
    lj_dataset_free(ds); /* the subset shares the storage */
    ck_assert_int_eq(lj_dataset_size(sub), 4);
    ck_assert_int_eq(lj_dataset_label(sub, 0), 6);
    ck_assert_ptr_null(lj_dataset_subset(sub, 2, 3));
    tu_expect_error(LJ_ERR_ARG, "lj_dataset_subset", "[2, 2 + 3)", "4", NULL);
    lj_dataset_free(sub);
  }
}
END_TEST

/* In order, batch 4: batches of 4, 4, 2 with x = (pixel / 255 - mean) / std; then the end of
 * the epoch (false, status OK), and the next epoch starts over. */
START_TEST(test_batches_in_order) {
  lj_dataset *ds = load(".gz");
  lj_loader_options o = lj_loader_defaults();
  o.batch_size = 4;
  o.shuffle = false;
  o.mean = 0.25;
  o.std = 0.5;
  lj_loader *l = lj_loader_new(ds, lj_default_device(), &o);
  ck_assert_msg(l, "%s", lj_last_error());
  lj_dataset_free(ds);
  ck_assert_int_eq(lj_loader_batches(l), 3);
  for (int epoch = 0; epoch < 2; epoch++) {
    int seen = 0;
    lj_tensor *x, *y;
    while (lj_loader_next(l, &x, &y)) {
      float xv[4 * H * W];
      int64_t yv[4], n;
      read_batch(x, y, &n, xv, yv);
      ck_assert_int_eq(n, seen + 4 <= N ? 4 : N - seen);
      for (int i = 0; i < n; i++, seen++) {
        ck_assert_int_eq(yv[i], 9 - seen);
        for (int k = 0; k < H * W; k++)
          ck_assert_float_eq(xv[i * H * W + k], (float)((pixel(seen, k) / 255.0 - 0.25) / 0.5));
      }
      lj_tensor_release(x);
      lj_tensor_release(y);
    }
    ck_assert_int_eq(lj_last_status(), LJ_OK);
    ck_assert_ptr_null(x);
    ck_assert_int_eq(seen, N);
  }
  lj_loader_free(l);
}
END_TEST

/* The labels of one epoch, batch by batch. */
static void epoch_labels(lj_loader *l, int64_t *labels, int *nbatches) {
  lj_tensor *x, *y;
  int seen = 0;
  *nbatches = 0;
  while (lj_loader_next(l, &x, &y)) {
    int64_t n = lj_tensor_shape(y)[0];
    ck_assert_int_eq(lj_tensor_to_host(y, labels + seen, (size_t)n * sizeof *labels), LJ_OK);
    seen += (int)n;
    (*nbatches)++;
    lj_tensor_release(x);
    lj_tensor_release(y);
  }
  ck_assert_int_eq(lj_last_status(), LJ_OK);
}

START_TEST(test_shuffle_is_seeded_permutation) {
  lj_dataset *ds = load("");
  lj_loader_options o = lj_loader_defaults();
  o.batch_size = 3;
  o.seed = 1234;
  lj_loader *a = lj_loader_new(ds, lj_default_device(), &o), *b = lj_loader_new(ds, lj_default_device(), &o);
  o.seed = 99;
  lj_loader *c = lj_loader_new(ds, lj_default_device(), &o);
  ck_assert(a && b && c);
  int64_t la[3][N], lb[N], lc[N];
  int nb;
  for (int e = 0; e < 3; e++) {
    epoch_labels(a, la[e], &nb);
    ck_assert_int_eq(nb, 4); /* 3, 3, 3, 1 */
    epoch_labels(b, lb, &nb);
    ck_assert(memcmp(la[e], lb, sizeof lb) == 0); /* same seed, same epoch: same order */
    bool seen[N] = {0};
    for (int i = 0; i < N; i++) {
      ck_assert(la[e][i] >= 0 && la[e][i] < N && !seen[la[e][i]]);
      seen[la[e][i]] = true;
    }
  }
  ck_assert(memcmp(la[0], la[1], sizeof la[0]) != 0 || memcmp(la[1], la[2], sizeof la[0]) != 0);
  epoch_labels(c, lc, &nb);
  ck_assert(memcmp(la[0], lc, sizeof lc) != 0);
  lj_loader_free(a);
  lj_loader_free(b);
  lj_loader_free(c);
  lj_dataset_free(ds);
}
END_TEST

/* The last partial batch dropped; an empty dataset. */
START_TEST(test_drop_last) {
  lj_dataset *ds = load("");
  lj_loader_options o = lj_loader_defaults();
  o.batch_size = 4;
  o.drop_last = true;
  lj_loader *l = lj_loader_new(ds, lj_default_device(), &o);
  ck_assert_int_eq(lj_loader_batches(l), 2);
  int64_t labels[N];
  int nb;
  epoch_labels(l, labels, &nb);
  ck_assert_int_eq(nb, 2);
  lj_loader_free(l);
  o.batch_size = 11;
  ck_assert_ptr_null(lj_loader_new(ds, lj_default_device(), &o));
  tu_expect_error(LJ_ERR_ARG, "lj_loader_new", "drop_last", "10 samples", "11", NULL);
  /* an empty dataset: every epoch ends at once */
  lj_dataset *none = lj_dataset_subset(ds, 4, 0);
  l = lj_loader_new(none, lj_default_device(), NULL);
  ck_assert_int_eq(lj_loader_batches(l), 0);
  for (int e = 0; e < 3; e++) {
    epoch_labels(l, labels, &nb);
    ck_assert_int_eq(nb, 0);
  }
  lj_loader_free(l);
  lj_dataset_free(none);
  lj_dataset_free(ds);
}
END_TEST

/* With barrier_every 2, the loader syncs before handing out batches 3, 5, ... of an epoch and
 * at its end: a pending tensor made after batch 2 is device data once batch 3 arrives. The
 * count starts over each epoch. */
START_TEST(test_barrier_every) {
  lj_dataset *ds = load("");
  lj_loader_options o = lj_loader_defaults();
  o.batch_size = 2;
  o.barrier_every = 2;
  lj_loader *l = lj_loader_new(ds, lj_default_device(), &o);
  lj_tensor *x, *y;
  int64_t syncs0 = lj_counter_value("SyncTensors");
  for (int epoch = 0; epoch < 2; epoch++) {
    lj_tensor *s = NULL;
    for (int b = 0; b < 5; b++) {
      ck_assert(lj_loader_next(l, &x, &y));
      ck_assert_int_eq(lj_counter_value("SyncTensors") - syncs0, 3 * epoch + b / 2);
      s = lj_sum(x, 0, NULL, false); /* pending until a barrier */
      lj_tensor_release(x);
      lj_tensor_release(y);
      if (b % 2 == 0 && b < 4) lj_tensor_release(s); /* the others stay alive: a barrier runs them */
    }
    ck_assert(!lj_loader_next(l, &x, &y)); /* the end: runs what batch 5 left */
    ck_assert_int_eq(lj_counter_value("SyncTensors") - syncs0, 3 * epoch + 3);
    lj_tensor_release(s);
  }
  lj_loader_free(l);
  lj_dataset_free(ds);
}
END_TEST

START_TEST(test_other_idx_types) {
  /* i16 samples [4, 2] (big-endian on disk, no channel added) and i32 labels */
  int16_t v[8] = {-300, 1000, 7, -1, 32767, -32768, 0, 12};
  unsigned char be[16], lab[16];
  for (int i = 0; i < 8; i++) be[2 * i] = (unsigned char)((uint16_t)v[i] >> 8), be[2 * i + 1] = (unsigned char)v[i];
  for (int i = 0; i < 4; i++) lab[4 * i] = 0, lab[4 * i + 1] = 0, lab[4 * i + 2] = (unsigned char)i, lab[4 * i + 3] = 5;
  write_idx("i16", 0x0B, 2, (uint32_t[]){4, 2}, be, sizeof be);
  write_idx("i32", 0x0C, 1, (uint32_t[]){4}, lab, sizeof lab);
  lj_dataset *ds = lj_dataset_load_idx(path_of("i16"), path_of("i32"));
  ck_assert_msg(ds, "%s", lj_last_error());
  ck_assert_int_eq(lj_dataset_label(ds, 2), 2 * 256 + 5);
  lj_loader_options o = lj_loader_defaults();
  o.batch_size = 4;
  o.shuffle = false;
  lj_loader *l = lj_loader_new(ds, lj_default_device(), &o);
  lj_tensor *x, *y;
  ck_assert(lj_loader_next(l, &x, &y));
  ck_assert_int_eq(lj_tensor_ndim(x), 2);
  float xv[8];
  ck_assert_int_eq(lj_tensor_to_host(x, xv, sizeof xv), LJ_OK);
  for (int i = 0; i < 8; i++) ck_assert_float_eq(xv[i], (float)v[i]);
  lj_tensor_release(x);
  lj_tensor_release(y);
  lj_loader_free(l);
  lj_dataset_free(ds);
}
END_TEST

/* Files larger than the first piece the data is read in (1 MiB; then pieces that double) read
 * whole: 3 M samples and labels, gzip'd and not, every label where it belongs. */
START_TEST(test_large_file) {
  enum { NS = 3 << 20 };
  unsigned char *lab = malloc(NS);
  for (int i = 0; i < NS; i++) lab[i] = (unsigned char)(i * 7 + i / 251);
  write_idx("big_samples", 0x08, 1, (uint32_t[]){NS}, lab, NS);
  write_idx("big_labels.gz", 0x08, 1, (uint32_t[]){NS}, lab, NS);
  lj_dataset *ds = lj_dataset_load_idx(path_of("big_samples"), path_of("big_labels.gz"));
  ck_assert_msg(ds, "%s", lj_last_error());
  ck_assert_int_eq(lj_dataset_size(ds), NS);
  for (int i = 0; i < NS; i += 4093) ck_assert_int_eq(lj_dataset_label(ds, i), lab[i]);
  ck_assert_int_eq(lj_dataset_label(ds, NS - 1), lab[NS - 1]);
  lj_dataset_free(ds);
  free(lab);
}
END_TEST

/* Copies file a to b, keeping its first `keep` bytes (all when keep < 0), with byte `flip`
 * (if >= 0) inverted. */
static void copy_damaged(const char *a, const char *b, long keep, long flip) {
  FILE *in = fopen(path_of(a), "rb"), *out = fopen(path_of(b), "wb");
  ck_assert(in && out);
  int c;
  for (long i = 0; (c = fgetc(in)) != EOF && (keep < 0 || i < keep); i++) fputc(i == flip ? c ^ 0xff : c, out);
  fclose(in);
  fclose(out);
}

START_TEST(test_bad_files) {
  ck_assert_ptr_null(lj_dataset_load_idx(path_of("missing.gz"), path_of("labels")));
  tu_expect_error(LJ_ERR_IO, "lj_dataset_load_idx", "cannot open", "missing.gz", "No such file", NULL);
  copy_damaged("images", "short", 4 + 12 + 20, -1);
  ck_assert_ptr_null(lj_dataset_load_idx(path_of("short"), path_of("labels")));
  tu_expect_error(LJ_ERR_IO, "short", "truncated", "60 bytes", "20", NULL);
  /* a header declaring 1.7 TB, followed by 100 bytes: truncated, not a 1.7 TB allocation */
  static const unsigned char hundred[100];
  write_idx("huge", 0x08, 3, (uint32_t[]){0x7fffffff, 28, 28}, hundred, sizeof hundred);
  ck_assert_ptr_null(lj_dataset_load_idx(path_of("huge"), path_of("labels")));
  tu_expect_error(LJ_ERR_IO, "huge", "truncated", "1683627179248 bytes", "the file has 100", NULL);
  copy_damaged("images", "long", -1, -1);
  FILE *f = fopen(path_of("long"), "ab");
  fputs("extra", f);
  fclose(f);
  ck_assert_ptr_null(lj_dataset_load_idx(path_of("long"), path_of("labels")));
  tu_expect_error(LJ_ERR_IO, "long", "corrupt", "60 bytes", NULL);
  copy_damaged("images", "magic", -1, 2);
  ck_assert_ptr_null(lj_dataset_load_idx(path_of("magic"), path_of("labels")));
  tu_expect_error(LJ_ERR_IO, "magic", "not an IDX file", "00 00 f7 03", NULL);
  copy_damaged("images.gz", "damaged.gz", -1, 30); /* inside the deflate stream */
  ck_assert_ptr_null(lj_dataset_load_idx(path_of("damaged.gz"), path_of("labels")));
  tu_expect_error(LJ_ERR_IO, "damaged.gz", "corrupt", NULL);
  copy_damaged("images.gz", "cut.gz", 40, -1);
  ck_assert_ptr_null(lj_dataset_load_idx(path_of("cut.gz"), path_of("labels")));
  tu_expect_error(LJ_ERR_IO, "cut.gz", "truncated", NULL);
  /* inconsistent pairs */
  ck_assert_ptr_null(lj_dataset_load_idx(path_of("images"), path_of("images")));
  tu_expect_error(LJ_ERR_SHAPE, "labels", "3 dims", "1-d", NULL);
  write_idx("labels9", 0x08, 1, (uint32_t[]){9}, "abcdefghi", 9);
  ck_assert_ptr_null(lj_dataset_load_idx(path_of("images"), path_of("labels9")));
  tu_expect_error(LJ_ERR_SHAPE, "10 samples", "9 labels", NULL);
  float fl[N] = {0};
  write_idx("flabels", 0x0D, 1, (uint32_t[]){N}, fl, sizeof fl);
  ck_assert_ptr_null(lj_dataset_load_idx(path_of("images"), path_of("flabels")));
  tu_expect_error(LJ_ERR_DTYPE, "flabels", "floats", NULL);
  ck_assert_ptr_null(lj_dataset_load_idx(NULL, path_of("labels")));
  tu_expect_error(LJ_ERR_ARG, "samples_path", NULL);
}
END_TEST

START_TEST(test_bad_options) {
  lj_dataset *ds = load("");
  lj_device *d = lj_default_device();
  lj_loader_options o = lj_loader_defaults();
  o.batch_size = 0;
  ck_assert_ptr_null(lj_loader_new(ds, d, &o));
  tu_expect_error(LJ_ERR_ARG, "batch_size 0", NULL);
  o = lj_loader_defaults();
  o.std = 0;
  ck_assert_ptr_null(lj_loader_new(ds, d, &o));
  tu_expect_error(LJ_ERR_ARG, "std 0", NULL);
  o = lj_loader_defaults();
  o.prefetch = 0;
  ck_assert_ptr_null(lj_loader_new(ds, d, &o));
  tu_expect_error(LJ_ERR_ARG, "prefetch 0", "[1, 64]", NULL);
  ck_assert_ptr_null(lj_loader_new(NULL, d, NULL));
  tu_expect_error(LJ_ERR_ARG, "ds", NULL);
  lj_tensor *x, *y;
  ck_assert(!lj_loader_next(NULL, &x, &y));
  tu_expect_error(LJ_ERR_ARG, "lj_loader_next", NULL);
  lj_dataset_free(ds);
}
END_TEST

START_TEST(test_shutdown_with_live_loader) {
  lj_dataset *ds = load("");
  lj_loader *l = lj_loader_new(ds, lj_default_device(), NULL);
  lj_tensor *x, *y;
  ck_assert(lj_loader_next(l, &x, &y));
  lj_shutdown();
  ck_assert(!lj_loader_next(l, &x, &y));
  tu_expect_error(LJ_ERR_DEVICE, "shut down", NULL);
  lj_loader_free(l);
  lj_dataset_free(ds);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_loader");
  TCase *tc = tu_tcase("loader");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_dataset_contents);
  tcase_add_test(tc, test_batches_in_order);
  tcase_add_test(tc, test_shuffle_is_seeded_permutation);
  tcase_add_test(tc, test_drop_last);
  tcase_add_test(tc, test_barrier_every);
  tcase_add_test(tc, test_other_idx_types);
  tcase_add_test(tc, test_bad_files);
  tcase_add_test(tc, test_large_file);
  tcase_add_test(tc, test_bad_options);
  tcase_add_test(tc, test_shutdown_with_live_loader);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
