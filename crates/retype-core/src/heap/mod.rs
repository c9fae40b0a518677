//! Heap allocators over real memory (first, best, worst and next fit, indexed fits,
//! segregated fits, buddy, TLSF).
