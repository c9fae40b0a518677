/* kmeans (seed 004 macro): parallel k-means with pthreads. Points are allocated one by one
 * (a heap object each, as a naive program would), each iteration threads assign points to
 * the nearest centroid and accumulate per-thread partial sums in freshly allocated buffers.
 * Seed 004 runs it with 40 dimensions and 100 clusters (its kmeans' -d 40 -c 100).
 * usage: kmeans THREADS POINTS K ITERATIONS [DIM, default 8] */
#include "common.h"
static int nthreads, npoints, k, iters, dim = 8;
static double **pts; static int *assign; static double *cent;
struct part { int id; double *sum; long *cnt; };
static void *step(void *arg) {
  struct part *p = arg;
  p->sum = calloc((size_t)k * dim, sizeof(double)); p->cnt = calloc(k, sizeof(long));
  for (int i = p->id; i < npoints; i += nthreads) {
    int best = 0; double bd = 1e300;
    for (int c = 0; c < k; c++) {
      double d = 0; for (int j = 0; j < dim; j++) { double t = pts[i][j] - cent[c * dim + j]; d += t * t; }
      if (d < bd) { bd = d; best = c; }
    }
    assign[i] = best; p->cnt[best]++;
    for (int j = 0; j < dim; j++) p->sum[best * dim + j] += pts[i][j];
  }
  return 0;
}
int main(int argc, char **argv) {
  nthreads = argc > 1 ? atoi(argv[1]) : 2; npoints = argc > 2 ? atoi(argv[2]) : 200000;
  k = argc > 3 ? atoi(argv[3]) : 64; iters = argc > 4 ? atoi(argv[4]) : 10;
  if (argc > 5) dim = atoi(argv[5]);
  if (nthreads < 1 || nthreads > 64 || npoints < 1 || k < 1 || k > npoints || iters < 1 || dim < 1) {
    fprintf(stderr, "usage: kmeans THREADS(1-64) POINTS K(<=POINTS) ITERATIONS [DIM]\n");
    return 2;
  }
  uint64_t s = 5;
  pts = xmalloc(npoints * sizeof(double *)); assign = xmalloc(npoints * sizeof(int)); cent = xmalloc(k * dim * sizeof(double));
  double t0 = now_s();
  for (int i = 0; i < npoints; i++) { pts[i] = xmalloc(dim * sizeof(double)); for (int j = 0; j < dim; j++) pts[i][j] = (rnd(&s) % 10000) / 100.0; }
  for (int c = 0; c < k; c++) for (int j = 0; j < dim; j++) cent[c * dim + j] = pts[c][j];
  pthread_t t[64]; struct part part[64];
  for (int it = 0; it < iters; it++) {
    for (int i = 0; i < nthreads; i++) { part[i].id = i; pthread_create(&t[i], 0, step, &part[i]); }
    for (int i = 0; i < nthreads; i++) pthread_join(t[i], 0);
    for (int c = 0; c < k; c++) {
      long n = 0; double acc[dim]; memset(acc, 0, sizeof acc);
      for (int i = 0; i < nthreads; i++) { n += part[i].cnt[c]; for (int j = 0; j < dim; j++) acc[j] += part[i].sum[c * dim + j]; }
      if (n) for (int j = 0; j < dim; j++) cent[c * dim + j] = acc[j] / n;
    }
    for (int i = 0; i < nthreads; i++) { free(part[i].sum); free(part[i].cnt); }
  }
  double chk = 0; for (int j = 0; j < k * dim; j++) chk += cent[j];
  printf("centroid-sum=%.3f\n", chk);
  for (int i = 0; i < npoints; i++) free(pts[i]);
  report((double)npoints * iters, now_s() - t0);
  return 0;
}
