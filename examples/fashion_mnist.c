/* fashion_mnist.c — the main job: trains the seed's MNISTNet (or an MLP) on Fashion-MNIST
 * on a lazyjit device. Every step records forward, backward and the SGD update as one
 * pending graph; the loader's barrier runs it, compiled once and then from the cache. Logs
 * the loss like the PyTorch example, shows a progress bar on a terminal, tests after each
 * epoch, prints the short metrics report and writes an SVG plot of loss and accuracy. */
#include "svg_plot.h"

#include <errno.h>
#include <getopt.h>
#include <lazyjit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_DATA_DIR "/usr/share/datasets/fashion-mnist"
#define FMNIST_MEAN 0.2860 /* the training images' pixel mean and std */
#define FMNIST_STD 0.3530

typedef struct options {
  int epochs, threads, log_interval;
  int64_t batch_size, limit;
  double lr, momentum;
  uint64_t seed;
  const char *model, *data_dir, *out_dir;
} options;

enum { MAX_PARAMS = 8 };
typedef struct model {
  bool cnn;
  int nparams;
  lj_tensor *p[MAX_PARAMS];
} model;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: fashion_mnist [options]\n"
          "  --epochs N        training epochs (default 2)\n"
          "  --batch-size N    samples per step (default 64)\n"
          "  --threads N       threads of the device (default: every core)\n"
          "  --model cnn|mlp   MNISTNet (default) or a 784-128-10 perceptron\n"
          "  --lr X            SGD learning rate (default 0.01)\n"
          "  --momentum X      SGD momentum (default 0.5)\n"
          "  --limit N         train on the first N samples only (default: all)\n"
          "  --seed N          initialization and shuffle seed (default 1)\n"
          "  --log-interval N  batches between log lines (default 200)\n"
          "  --data DIR        the Fashion-MNIST IDX files (default " DEFAULT_DATA_DIR ")\n"
          "  --out DIR         where the plot goes (default fashion_mnist_out)\n");
}

static bool parse_options(int argc, char **argv, options *o) {
  *o = (options){.epochs = 2, .batch_size = 64, .lr = 0.01, .momentum = 0.5, .seed = 1, .log_interval = 200,
                 .model = "cnn", .data_dir = DEFAULT_DATA_DIR, .out_dir = "fashion_mnist_out"};
  static const struct option longs[] = {
      {"epochs", required_argument, 0, 'e'}, {"batch-size", required_argument, 0, 'b'},
      {"threads", required_argument, 0, 't'}, {"model", required_argument, 0, 'm'},
      {"lr", required_argument, 0, 'l'},     {"momentum", required_argument, 0, 'M'},
      {"limit", required_argument, 0, 'n'},  {"seed", required_argument, 0, 's'},
      {"log-interval", required_argument, 0, 'i'}, {"data", required_argument, 0, 'd'},
      {"out", required_argument, 0, 'o'},    {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (c) {
    case 'e': o->epochs = atoi(optarg); break;
    case 'b': o->batch_size = atoll(optarg); break;
    case 't': o->threads = atoi(optarg); break;
    case 'm': o->model = optarg; break;
    case 'l': o->lr = atof(optarg); break;
    case 'M': o->momentum = atof(optarg); break;
    case 'n': o->limit = atoll(optarg); break;
    case 's': o->seed = strtoull(optarg, NULL, 10); break;
    case 'i': o->log_interval = atoi(optarg); break;
    case 'd': o->data_dir = optarg; break;
    case 'o': o->out_dir = optarg; break;
    case 'h': usage(stdout); exit(0);
    default: usage(stderr); return false;
    }
  }
  const char *bad = optind < argc                                                   ? "unexpected argument"
                    : o->epochs < 1                                                   ? "--epochs must be >= 1"
                    : o->batch_size < 1                                               ? "--batch-size must be >= 1"
                    : o->threads < 0                                                  ? "--threads must be >= 0"
                    : o->limit < 0                                                    ? "--limit must be >= 0"
                    : o->log_interval < 1                                             ? "--log-interval must be >= 1"
                    : strcmp(o->model, "cnn") != 0 && strcmp(o->model, "mlp") != 0 ? "--model must be cnn or mlp"
                                                                                      : NULL;
  if (bad) {
    fprintf(stderr, "fashion_mnist: %s\n", bad);
    usage(stderr);
  }
  return !bad;
}

static lj_dataset *load_split(const char *dir, const char *split) {
  char images[1024], labels[1024];
  snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, split);
  snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, split);
  lj_dataset *ds = lj_dataset_load_idx(images, labels);
  if (!ds) {
    fprintf(stderr, "fashion_mnist: %s\n", lj_last_error());
    if (lj_last_status() == LJ_ERR_IO && access(images, R_OK) != 0)
      fprintf(stderr,
              "Fashion-MNIST is not in %s. Install it with\n"
              "    sudo apt-get install dataset-fashion-mnist\n"
              "or pass --data DIR, a directory with train-images-idx3-ubyte.gz,\n"
              "train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz.\n",
              dir);
  }
  return ds;
}

/* Parameters initialized like PyTorch's Conv2d / Linear, requiring grad. */
static bool model_init(model *m, lj_device *d, bool cnn) {
  static const int k3[2] = {3, 3};
  m->cnn = cnn;
  lj_tensor **p = m->p;
  lj_status st;
  if (cnn) {
    m->nparams = 8;
    st = lj_nn_conv2d_init(d, LJ_F32, 1, 32, k3, 1, true, &p[0], &p[1]);
    if (st == LJ_OK) st = lj_nn_conv2d_init(d, LJ_F32, 32, 64, k3, 1, true, &p[2], &p[3]);
    if (st == LJ_OK) st = lj_nn_linear_init(d, LJ_F32, 3136, 128, true, &p[4], &p[5]);
    if (st == LJ_OK) st = lj_nn_linear_init(d, LJ_F32, 128, 10, true, &p[6], &p[7]);
  } else {
    m->nparams = 4;
    st = lj_nn_linear_init(d, LJ_F32, 784, 128, true, &p[0], &p[1]);
    if (st == LJ_OK) st = lj_nn_linear_init(d, LJ_F32, 128, 10, true, &p[2], &p[3]);
  }
  return st == LJ_OK;
}

/* Log-probabilities [B, 10] for images x [B, 1, 28, 28]. */
static lj_tensor *model_forward(const model *m, lj_tensor *x) {
  static const int pad1[2] = {1, 1}, pool2[2] = {2, 2};
  lj_tensor *const *p = m->p;
  lj_tensor *h;
  if (m->cnn) {
    h = lj_relu(lj_max_pool2d(lj_conv2d(x, p[0], p[1], NULL, pad1, NULL, 1), pool2, NULL, NULL));
    h = lj_relu(lj_max_pool2d(lj_conv2d(h, p[2], p[3], NULL, pad1, NULL, 1), pool2, NULL, NULL));
    h = lj_relu(lj_linear(lj_reshape(h, LJ_SHAPE(-1, 3136)), p[4], p[5]));
    return lj_log_softmax(lj_linear(h, p[6], p[7]), 1);
  }
  h = lj_relu(lj_linear(lj_reshape(x, LJ_SHAPE(-1, 784)), p[0], p[1]));
  return lj_log_softmax(lj_linear(h, p[2], p[3]), 1);
}

/* The progress bar: drawn on stderr when it is a terminal. */
static void progress(int epoch, int64_t done, int64_t total, double rate) {
  if (!isatty(STDERR_FILENO)) return;
  enum { WIDTH = 30 };
  int fill = total ? (int)(WIDTH * done / total) : WIDTH;
  char bar[WIDTH + 1];
  for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '.';
  bar[WIDTH] = 0;
  fprintf(stderr, "\r\033[Kepoch %d [%s] %lld/%lld  %.0f img/s", epoch, bar, (long long)done, (long long)total, rate);
}

static void progress_clear(void) {
  if (isatty(STDERR_FILENO)) fprintf(stderr, "\r\033[K");
}

typedef struct history {
  double *step_x, *step_loss; /* loss averaged over each log interval, x in epochs */
  int nsteps, cap;
  double *acc_x, *acc; /* test accuracy (%) after each epoch */
  int nacc;
} history;

static void history_add_loss(history *h, double x, double loss) {
  if (h->nsteps == h->cap) {
    h->cap = h->cap ? 2 * h->cap : 256;
    h->step_x = realloc(h->step_x, (size_t)h->cap * sizeof *h->step_x);
    h->step_loss = realloc(h->step_loss, (size_t)h->cap * sizeof *h->step_loss);
    if (!h->step_x || !h->step_loss) abort();
  }
  h->step_x[h->nsteps] = x;
  h->step_loss[h->nsteps++] = loss;
}

/* One epoch of training; returns the images per second, or -1 on error. */
static double train_epoch(const options *o, model *m, lj_optim *opt, lj_loader *loader, int epoch, int64_t n_train,
                          history *h) {
  double t0 = now_s(), last_draw = 0, logged_sum = 0;
  int64_t seen = 0, batch = 0, interval_n = 0;
  lj_tensor *x, *y;
  /* The epoch's running loss sum stays on the device: reading the loss every step would make
   * the host wait for every step, while a sync only queues it and returns to trace the next. */
  lj_tensor *loss_sum = lj_tensor_from_host(lj_tensor_device(m->p[0]), LJ_F32, 0, NULL, &(float){0});
  while (lj_loader_next(loader, &x, &y)) {
    lj_optim_zero_grad(opt);
    lj_scope_begin();
    lj_tensor *loss = lj_keep(lj_nll_loss(model_forward(m, x), y, LJ_REDUCE_MEAN));
    lj_scope_end();
    if (!loss || lj_backward(loss) != LJ_OK || lj_optimizer_step(opt, true) != LJ_OK) {
      fprintf(stderr, "fashion_mnist: %s\n", lj_last_error());
      return -1;
    }
    lj_tensor *sum = lj_add(loss_sum, loss); /* runs with the next step's barrier */
    lj_tensor_release(loss_sum);
    loss_sum = sum;
    seen += lj_tensor_shape(y)[0];
    batch++;
    interval_n++;
    lj_tensor_release(x);
    lj_tensor_release(y);
    if (epoch == 1 && batch == 1) history_add_loss(h, (double)seen / (double)n_train, lj_item(loss)); /* the start */
    if (batch % o->log_interval == 0) {
      double total = lj_item(loss_sum);
      progress_clear();
      printf("Train Epoch: %d [%lld/%lld (%.0f%%)]  Loss: %.4f\n", epoch, (long long)seen, (long long)n_train,
             100.0 * (double)seen / (double)n_train, lj_item(loss));
      fflush(stdout);
      history_add_loss(h, epoch - 1 + (double)seen / (double)n_train, (total - logged_sum) / (double)interval_n);
      logged_sum = total;
      interval_n = 0;
    }
    lj_tensor_release(loss);
    double t = now_s();
    if (t - last_draw > 0.1) {
      progress(epoch, seen, n_train, (double)seen / (t - t0));
      last_draw = t;
    }
  }
  progress_clear();
  if (lj_last_status() != LJ_OK) {
    fprintf(stderr, "fashion_mnist: %s\n", lj_last_error());
    return -1;
  }
  if (interval_n) history_add_loss(h, epoch, (lj_item(loss_sum) - logged_sum) / (double)interval_n);
  lj_tensor_release(loss_sum);
  return (double)seen / (now_s() - t0);
}

/* Average loss and accuracy on the test set; the sums stay on the device until the end. */
static bool test(const model *m, lj_loader *loader, lj_device *d, double *avg_loss, double *accuracy) {
  lj_tensor *loss_sum = lj_zeros(d, LJ_F32, 0, NULL), *correct = lj_zeros(d, LJ_I64, 0, NULL);
  int64_t n = 0;
  lj_tensor *x, *y;
  while (lj_loader_next(loader, &x, &y)) {
    lj_scope_begin();
    lj_tensor *logp = model_forward(m, x);
    lj_assign(loss_sum, lj_add(loss_sum, lj_nll_loss(logp, y, LJ_REDUCE_SUM)));
    lj_assign(correct, lj_add(correct, lj_sum(lj_cast(lj_eq(lj_argmax(logp, 1, false), y), LJ_I64), 0, NULL, false)));
    lj_scope_end();
    n += lj_tensor_shape(y)[0];
    lj_tensor_release(x);
    lj_tensor_release(y);
  }
  bool ok = lj_last_status() == LJ_OK;
  if (ok) {
    *avg_loss = lj_item(loss_sum) / (double)n;
    *accuracy = lj_item(correct) / (double)n;
    ok = lj_last_status() == LJ_OK;
  }
  if (!ok) fprintf(stderr, "fashion_mnist: %s\n", lj_last_error());
  lj_tensor_release(loss_sum);
  lj_tensor_release(correct);
  return ok;
}

static bool make_dirs(const char *path) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(buf, 0755) != 0 && errno != EEXIST) return false;
      *p = '/';
    }
  return mkdir(buf, 0755) == 0 || errno == EEXIST;
}

static void write_plot(const options *o, const history *h) {
  char path[1200];
  snprintf(path, sizeof path, "%s/fashion_mnist.svg", o->out_dir);
  svg_panel panels[2] = {
      {"training loss", "epoch", "NLL loss", h->step_x, h->step_loss, h->nsteps, "#1f77b4"},
      {"test accuracy", "epoch", "accuracy (%)", h->acc_x, h->acc, h->nacc, "#d62728"},
  };
  char title[128];
  snprintf(title, sizeof title, "Fashion-MNIST, %s, SGD lr %g momentum %g, batch %lld", o->model, o->lr, o->momentum,
           (long long)o->batch_size);
  if (!make_dirs(o->out_dir) || !svg_plot_write(path, title, 2, panels))
    fprintf(stderr, "fashion_mnist: cannot write %s: %s\n", path, strerror(errno));
  else
    printf("plot: %s\n", path);
}

int main(int argc, char **argv) {
  options o;
  if (!parse_options(argc, argv, &o)) return 2;
  lj_config cfg = lj_config_default();
  if (o.threads) cfg.num_threads = o.threads;
  if (lj_init(&cfg) != LJ_OK) {
    fprintf(stderr, "fashion_mnist: %s\n", lj_last_error());
    return 1;
  }
  lj_device *d = lj_default_device();
  lj_dataset *train = load_split(o.data_dir, "train"), *testset = train ? load_split(o.data_dir, "t10k") : NULL;
  if (!train || !testset) return 2;
  if (o.limit && o.limit < lj_dataset_size(train)) {
    lj_dataset *sub = lj_dataset_subset(train, 0, o.limit);
    lj_dataset_free(train);
    train = sub;
  }
  int64_t n_train = lj_dataset_size(train);
  lj_loader_options lo = lj_loader_defaults();
  lo.batch_size = o.batch_size;
  lo.seed = o.seed;
  lo.mean = FMNIST_MEAN;
  lo.std = FMNIST_STD;
  lj_loader *train_loader = lj_loader_new(train, d, &lo);
  lo.batch_size = 1000;
  lo.shuffle = false;
  lo.barrier_every = 1; /* evaluation: run each batch's forward when the next one comes */
  lj_loader *test_loader = lj_loader_new(testset, d, &lo);
  lj_dataset_free(train);
  lj_dataset_free(testset);
  lj_manual_seed(d, o.seed);
  model m = {0};
  if (!train_loader || !test_loader || !model_init(&m, d, strcmp(o.model, "cnn") == 0)) {
    fprintf(stderr, "fashion_mnist: %s\n", lj_last_error());
    return 1;
  }
  lj_optim *opt = lj_optim_sgd(m.nparams, m.p, (lj_sgd_options){.lr = o.lr, .momentum = o.momentum});
  if (!opt) {
    fprintf(stderr, "fashion_mnist: %s\n", lj_last_error());
    return 1;
  }
  printf("lazyjit on %s (%s, %d threads): %s on %lld training images, batch %lld, %d epochs\n", lj_device_name(d),
         lj_device_hw(d), cfg.num_threads, o.model, (long long)n_train, (long long)o.batch_size, o.epochs);
  history h = {.acc_x = calloc((size_t)o.epochs, sizeof(double)), .acc = calloc((size_t)o.epochs, sizeof(double))};
  if (!h.acc_x || !h.acc) abort();
  double t_start = now_s(), train_s = 0, accuracy = 0;
  int rc = 0;
  for (int epoch = 1; epoch <= o.epochs && rc == 0; epoch++) {
    double t0 = now_s();
    double rate = train_epoch(&o, &m, opt, train_loader, epoch, n_train, &h);
    train_s += now_s() - t0;
    double test_loss;
    if (rate < 0 || !test(&m, test_loader, d, &test_loss, &accuracy)) {
      rc = 1;
      break;
    }
    h.acc_x[h.nacc] = epoch;
    h.acc[h.nacc++] = 100 * accuracy;
    printf("Epoch %d: %.1f s, %.0f img/s; test set: average loss %.4f, accuracy %.2f%%\n", epoch, now_s() - t0, rate,
           test_loss, 100 * accuracy);
    fflush(stdout);
  }
  if (rc == 0) {
    double compile_s = 0;
    lj_metric_data("CompileTime", NULL, &compile_s);
    printf("\ntrained %d epochs in %.1f s (%.0f img/s), total %.1f s, of which compiling %.2f s "
           "(%lld graphs compiled, %lld loaded from the persistent cache, %lld steps from the cache); "
           "final test accuracy %.2f%%\n",
           o.epochs, train_s, (double)(n_train * o.epochs) / train_s, now_s() - t_start, compile_s,
           (long long)lj_counter_value("UncachedCompile"), (long long)lj_counter_value("PersistentCacheHit"),
           (long long)lj_counter_value("CachedCompile"), 100 * accuracy);
    char *report = lj_metrics_short_report();
    printf("\n%s", report);
    free(report);
    write_plot(&o, &h);
  }
  free(h.step_x);
  free(h.step_loss);
  free(h.acc_x);
  free(h.acc);
  lj_optim_free(opt);
  lj_loader_free(train_loader);
  lj_loader_free(test_loader);
  for (int i = 0; i < m.nparams; i++) lj_tensor_release(m.p[i]);
  lj_shutdown();
  return rc;
}
