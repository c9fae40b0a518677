/* bignum (cfrac/espresso-like single-thread churn): immutable arbitrary-precision numbers,
 * each arithmetic result a fresh small heap object, most short-lived. Computes Fibonacci
 * numbers modulo nothing and checks a digit sum, so the work cannot be optimised away.
 * usage: bignum ROUNDS N */
#include "common.h"
typedef struct { int len; uint32_t d[]; } big; /* little-endian base 2^32 */
static big *mk(int len) { big *b = xmalloc(sizeof(big) + len * sizeof(uint32_t)); b->len = len; return b; }
static big *add(const big *a, const big *b) {
  if (a->len < b->len) { const big *t = a; a = b; b = t; }
  big *r = mk(a->len + 1); uint64_t c = 0;
  for (int i = 0; i < a->len; i++) { c += (uint64_t)a->d[i] + (i < b->len ? b->d[i] : 0); r->d[i] = (uint32_t)c; c >>= 32; }
  r->d[a->len] = (uint32_t)c; if (!c) r->len--;
  return r;
}
static big *small_mul(const big *a, uint32_t m) {
  big *r = mk(a->len + 1); uint64_t c = 0;
  for (int i = 0; i < a->len; i++) { c += (uint64_t)a->d[i] * m; r->d[i] = (uint32_t)c; c >>= 32; }
  r->d[a->len] = (uint32_t)c; if (!c) r->len--;
  return r;
}
int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 300;
  int n = argc > 2 ? atoi(argv[2]) : 3000;
  uint64_t check = 0; double ops = 0, t0 = now_s();
  for (int r = 0; r < rounds; r++) {
    big *a = mk(1), *b = mk(1); a->d[0] = 0; b->d[0] = 1 + r;
    for (int i = 0; i < n; i++) {
      big *c = add(a, b);
      big *t = small_mul(c, 3);  /* temporary, freed at once */
      check += t->d[0];
      free(t); free(a); a = b; b = c; ops += 2;
    }
    check += b->len; free(a); free(b);
  }
  printf("check=%llu\n", (unsigned long long)check);
  report(ops, now_s() - t0);
  return 0;
}
