/* dataset.c — labelled datasets read from IDX files (the (Fashion-)MNIST format: a magic
 * 00 00 <type> <ndim>, ndim big-endian u32 sizes, then big-endian data), gzip'd or not
 * (zlib reads both). Samples stay in their file type; the loader converts them. */
#include "runtime/runtime.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const char *const op = "lj_dataset_load_idx";

static size_t idx_elem_size(int type) {
  switch (type) {
  case LJR_IDX_U8:
  case LJR_IDX_I8: return 1;
  case LJR_IDX_I16: return 2;
  case LJR_IDX_I32:
  case LJR_IDX_F32: return 4;
  case LJR_IDX_F64: return 8;
  default: return 0;
  }
}

/* Reads exactly n bytes, the part after `before` of the `total` that `what` needs; false
 * (error set, naming what was being read and how much of it the file has) otherwise. */
static bool read_part(gzFile f, const char *path, void *dst, size_t n, const char *what, size_t before, size_t total) {
  size_t got = 0;
  while (got < n) {
    unsigned chunk = (unsigned)(n - got < (1u << 30) ? n - got : (1u << 30));
    int r = gzread(f, (char *)dst + got, chunk);
    if (r < 0) {
      int zerr;
      const char *msg = gzerror(f, &zerr);
      size_t plen = strlen(path); /* zlib's message starts with "<path>: " */
      if (strncmp(msg, path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0) msg += plen + 2;
      ljb_error(LJ_ERR_IO, "%s: '%s' is corrupt (%s)", op, path, zerr == Z_ERRNO ? strerror(errno) : msg);
      return false;
    }
    if (r == 0) {
      ljb_error(LJ_ERR_IO, "%s: '%s' is truncated: %s needs %zu bytes, the file has %zu", op, path, what, total,
                before + got);
      return false;
    }
    got += (size_t)r;
  }
  return true;
}

static bool read_exact(gzFile f, const char *path, void *dst, size_t n, const char *what) {
  return read_part(f, path, dst, n, what, 0, n);
}

/* Reads the nbytes of data a header declares into *data (NULL on entry, then malloc'd: the
 * caller's to free, also on failure), in pieces that double from DATA_FIRST_BYTES: a corrupt
 * header may declare terabytes, which a file that ends early reports as truncated rather than
 * asking malloc for them. */
enum { DATA_FIRST_BYTES = 1 << 20 };
static bool read_data(gzFile f, const char *path, size_t nbytes, void **data) {
  size_t cap = nbytes < DATA_FIRST_BYTES ? nbytes : DATA_FIRST_BYTES, got = 0;
  for (;;) {
    void *p = realloc(*data, cap ? cap : 1);
    if (!p) { /* *data, the smaller buffer, is the caller's to free */
      ljb_error(LJ_ERR_OOM, "%s: cannot allocate %zu bytes for '%s'", op, cap, path);
      return false;
    }
    *data = p;
    if (!read_part(f, path, (unsigned char *)p + got, cap - got, "the data", got, nbytes)) return false;
    if (cap == nbytes) return true;
    got = cap;
    cap = nbytes - cap < cap ? nbytes : 2 * cap;
  }
}

static void to_host_order(ljr_idx *a, size_t n) {
  unsigned char *p = a->data;
  size_t w = a->elem_size;
  for (size_t i = 0; i < n && w > 1; i++, p += w)
    for (size_t k = 0; k < w / 2; k++) {
      unsigned char t = p[k];
      p[k] = p[w - 1 - k];
      p[w - 1 - k] = t;
    }
}

static bool read_idx(const char *path, ljr_idx *a) {
  memset(a, 0, sizeof *a);
  errno = 0;
  gzFile f = gzopen(path, "rb");
  if (!f) {
    ljb_error(LJ_ERR_IO, "%s: cannot open '%s': %s", op, path, errno ? strerror(errno) : "out of memory");
    return false;
  }
  bool ok = false;
  unsigned char magic[4];
  if (!read_exact(f, path, magic, 4, "the header")) goto done;
  a->elem_size = idx_elem_size(magic[2]);
  if (magic[0] != 0 || magic[1] != 0 || a->elem_size == 0 || magic[3] < 1 || magic[3] > LJ_MAX_DIMS) {
    ljb_error(LJ_ERR_IO, "%s: '%s' is not an IDX file (magic %02x %02x %02x %02x)", op, path, magic[0], magic[1],
              magic[2], magic[3]);
    goto done;
  }
  a->type = (ljr_idx_type)magic[2];
  a->ndim = magic[3];
  size_t numel = 1;
  for (int i = 0; i < a->ndim; i++) {
    unsigned char b[4];
    if (!read_exact(f, path, b, 4, "the header")) goto done;
    a->dims[i] = (int64_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
    if (a->dims[i] != 0 && numel > SIZE_MAX / 16 / (size_t)a->dims[i]) {
      ljb_error(LJ_ERR_IO, "%s: '%s' is corrupt: its sizes overflow", op, path);
      goto done;
    }
    numel *= (size_t)a->dims[i];
  }
  size_t nbytes = numel * a->elem_size;
  if (!read_data(f, path, nbytes, &a->data)) goto done;
  char extra;
  int r = gzread(f, &extra, 1);
  if (r != 0) {
    ljb_error(LJ_ERR_IO, "%s: '%s' is corrupt: %s after the %zu bytes of data its header declares", op, path,
              r > 0 ? "more bytes follow" : "the stream is damaged", nbytes);
    goto done;
  }
  to_host_order(a, numel);
  ok = true;
done:
  gzclose(f);
  if (!ok) {
    free(a->data);
    a->data = NULL;
  }
  return ok;
}

static bool is_int_type(ljr_idx_type t) { return t != LJR_IDX_F32 && t != LJR_IDX_F64; }

lj_dataset *lj_dataset_load_idx(const char *samples_path, const char *labels_path) {
  if (!samples_path) return ljb_null_arg(op, "samples_path"), NULL;
  if (!labels_path) return ljb_null_arg(op, "labels_path"), NULL;
  ljr_dataset_storage *s = ljb_xcalloc(1, sizeof *s);
  atomic_init(&s->refs, 1);
  if (!read_idx(samples_path, &s->samples) || !read_idx(labels_path, &s->labels)) goto fail;
  if (s->labels.ndim != 1) {
    ljb_error(LJ_ERR_SHAPE, "%s: labels '%s' have %d dims; labels must be 1-d", op, labels_path, s->labels.ndim);
    goto fail;
  }
  if (!is_int_type(s->labels.type)) {
    ljb_error(LJ_ERR_DTYPE, "%s: labels '%s' are floats (IDX type 0x%02x); labels must be integers", op,
              labels_path, (unsigned)s->labels.type);
    goto fail;
  }
  if (s->samples.dims[0] != s->labels.dims[0]) {
    ljb_error(LJ_ERR_SHAPE, "%s: '%s' has %lld samples but '%s' has %lld labels", op, samples_path,
              (long long)s->samples.dims[0], labels_path, (long long)s->labels.dims[0]);
    goto fail;
  }
  /* [N, H, W] images get a channel dim, as ToTensor gives [1, H, W] */
  const ljr_idx *x = &s->samples;
  int k = 0;
  if (x->ndim == 3) s->sample_shape[k++] = 1;
  for (int i = 1; i < x->ndim && k < LJ_MAX_DIMS; i++) s->sample_shape[k++] = x->dims[i];
  s->sample_ndim = k;
  s->sample_numel = 1;
  for (int i = 0; i < k; i++) s->sample_numel *= s->sample_shape[i];
  lj_dataset *ds = ljb_xcalloc(1, sizeof *ds);
  ds->s = s;
  ds->count = x->dims[0];
  return ds;
fail:
  ljr_dataset_storage_release(s);
  return NULL;
}

void ljr_dataset_storage_release(ljr_dataset_storage *s) {
  if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
  free(s->samples.data);
  free(s->labels.data);
  free(s);
}

int64_t lj_dataset_size(const lj_dataset *ds) { return ds ? ds->count : 0; }

int lj_dataset_sample_shape(const lj_dataset *ds, int64_t shape[LJ_MAX_DIMS]) {
  if (!ds || !shape) return ljb_error(LJ_ERR_ARG, "lj_dataset_sample_shape: argument %s is NULL", ds ? "shape" : "ds"), 0;
  memcpy(shape, ds->s->sample_shape, (size_t)ds->s->sample_ndim * sizeof *shape);
  return ds->s->sample_ndim;
}

int64_t ljr_dataset_label(const ljr_dataset_storage *s, int64_t i) {
  const void *p = (const char *)s->labels.data + (size_t)i * s->labels.elem_size;
  switch (s->labels.type) {
  case LJR_IDX_U8: return *(const uint8_t *)p;
  case LJR_IDX_I8: return *(const int8_t *)p;
  case LJR_IDX_I16: return *(const int16_t *)p;
  default: return *(const int32_t *)p;
  }
}

int64_t lj_dataset_label(const lj_dataset *ds, int64_t i) {
  if (!ds) return ljb_null_arg("lj_dataset_label", "ds"), -1;
  if (i < 0 || i >= ds->count) {
    ljb_error(LJ_ERR_ARG, "lj_dataset_label: index %lld is out of range [0, %lld)", (long long)i, (long long)ds->count);
    return -1;
  }
  return ljr_dataset_label(ds->s, ds->start + i);
}

void ljr_dataset_samples_f32(const ljr_dataset_storage *s, const int64_t *idx, int64_t count, double mean,
                             double std, float *out) {
  const ljr_idx *x = &s->samples;
  int64_t n = s->sample_numel;
  double inv = 1 / std;
  float table[256]; /* u8: (v / 255 - mean) / std for each byte value */
  if (x->type == LJR_IDX_U8)
    for (int v = 0; v < 256; v++) table[v] = (float)((v / 255.0 - mean) * inv);
  for (int64_t i = 0; i < count; i++, out += n) {
    const void *p = (const char *)x->data + (size_t)(idx[i] * n) * x->elem_size;
#define CONVERT(T) \
  for (int64_t k = 0; k < n; k++) out[k] = (float)((((const T *)p)[k] - mean) * inv)
    switch (x->type) {
    case LJR_IDX_U8:
      for (int64_t k = 0; k < n; k++) out[k] = table[((const uint8_t *)p)[k]];
      break;
    case LJR_IDX_I8: CONVERT(int8_t); break;
    case LJR_IDX_I16: CONVERT(int16_t); break;
    case LJR_IDX_I32: CONVERT(int32_t); break;
    case LJR_IDX_F32: CONVERT(float); break;
    case LJR_IDX_F64: CONVERT(double); break;
    }
#undef CONVERT
  }
}

lj_dataset *lj_dataset_subset(const lj_dataset *ds, int64_t start, int64_t count) {
  if (!ds) return ljb_null_arg("lj_dataset_subset", "ds"), NULL;
  if (start < 0 || count < 0 || start > ds->count || count > ds->count - start) {
    ljb_error(LJ_ERR_ARG, "lj_dataset_subset: samples [%lld, %lld + %lld) are not within the dataset's %lld",
              (long long)start, (long long)start, (long long)count, (long long)ds->count);
    return NULL;
  }
  lj_dataset *sub = ljb_xcalloc(1, sizeof *sub);
  sub->s = ds->s;
  atomic_fetch_add(&sub->s->refs, 1);
  sub->start = ds->start + start;
  sub->count = count;
  return sub;
}

void lj_dataset_free(lj_dataset *ds) {
  if (!ds) return;
  ljr_dataset_storage_release(ds->s);
  free(ds);
}
