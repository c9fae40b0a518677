/* retype.h: the markers API of retype's recorder (libretype_recorder.so).
 *
 * A program marks the phases of its run; under `retype record` each mark is
 * written to the trace, and every analysis takes `--phase NAME`
 * (`retype trace sites|leaks|flamegraph|diff|export|timeline|info`). The
 * program can also read the running phase's figures about itself (what the
 * pytest plugin's limit_memory and limit_leaks check).
 *
 * A program that uses it must still run without the recorder. The functions
 * are declared weak: a program linked without any definition of them gets
 * NULL for their addresses, so check before calling:
 *
 *     #include "retype.h"
 *     if (retype_mark) retype_mark("load");     // a no-op without the recorder
 *
 * Preloaded (`retype record -- PROGRAM`), the recorder defines them and the
 * check passes. RETYPE_MARK(name) does this for you. (Alternatively, define a
 * weak no-op of your own: `__attribute__((weak)) void retype_mark(const char *n)
 * { (void)n; }`; the recorder's definition, preloaded, takes its place.)
 *
 * A recorder loaded into a running process (`retype record --pid`) is not
 * seen by a weak reference, which the dynamic linker resolved at start:
 * find it with `dlopen(PATH_OF_THE_RECORDER, RTLD_NOLOAD | RTLD_NOW)` and
 * dlsym if you need marks in an attached process (Python's retype.mark does). */
#ifndef RETYPE_H
#define RETYPE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Starts the phase `name`, ending the one before; NULL or "" ends the phase
 * without starting another. A name marked more than once gives phases
 * NAME#1, NAME#2, ... in the trace. Does nothing while nothing is recorded. */
__attribute__((weak)) void retype_mark(const char *name);

#define RETYPE_TOP_SITES 8
#define RETYPE_SITE_FRAMES 8

/* One call stack's share of the phase. */
struct retype_site {
    uint64_t allocated;  /* bytes allocated from it during the phase */
    uint64_t calls;      /* allocating calls */
    uint64_t live;       /* of those bytes, still live now */
    uint64_t frames[RETYPE_SITE_FRAMES]; /* return addresses, the allocator's caller first */
    uint32_t frames_len;
};

/* The figures of the phase marked last. They count the blocks allocated
 * through the malloc family (every thread) since the mark, while recording
 * is on; a block allocated before the mark and freed after it counts nowhere. */
struct retype_phase_stats {
    uint64_t phase;      /* the mark's number (1 for the first); 0: none yet */
    uint64_t allocated;  /* bytes allocated in the phase */
    uint64_t calls;      /* allocating calls */
    uint64_t live;       /* bytes of those blocks still live: at the phase's end, its leaks */
    uint64_t peak;       /* the highest `live` since the mark */
    uint64_t untracked;  /* blocks the recorder had no room to follow (their bytes count in
                            `allocated` only) */
    uint32_t active;     /* 1 while the phase runs; 0 once retype_mark(NULL) ended it */
    uint32_t sites_len;
    struct retype_site sites[RETYPE_TOP_SITES]; /* heaviest first */
};

/* Fills *out: its sites ranked by live bytes if by_live, else by bytes
 * allocated. 0, or -1 when nothing is recorded. Allocates nothing. */
__attribute__((weak)) int retype_phase_stats(struct retype_phase_stats *out, int by_live);

/* retype_mark(name) if the recorder is there; nothing otherwise. */
#define RETYPE_MARK(name) do { if (retype_mark) retype_mark(name); } while (0)

#ifdef __cplusplus
}
#endif

#endif
