/*
 * threads.h: the one thread pool every kernel uses (public API in nibble.h: nb_pool_*).
 *
 * Contract: a pool of N threads is the caller plus N-1 persistent workers. nb_pool_for() splits
 * [0, n) into N contiguous chunks (nb_pool_for_locked: split * N) whose boundaries are multiples
 * of `grain` (the last chunk takes the rest) and runs fn on each, each chunk on whichever thread
 * claims it first (threads.c), returning when all are done. The split depends only on (n, grain,
 * split * N), so work that computes each index independently gives identical results for any
 * thread count. One job runs at a time: concurrent callers are serialized.
 *
 * Internal extras: a per-pool scratch buffer that grows but never shrinks, so that hot paths
 * (activation quantization in nb_matmul) do not allocate per call once warm.
 */
#ifndef NB_BASE_THREADS_H
#define NB_BASE_THREADS_H

#include "nibble.h"

/* Locks the pool for one job sequence and returns a scratch buffer of at least `bytes` bytes
 * (64-byte aligned), or NULL with the pool unlocked after an allocation failure. The caller runs
 * nb_pool_for_locked() any number of times and then nb_pool_unlock(). */
void *nb_pool_lock_scratch(nb_pool *p, size_t bytes);
void nb_pool_unlock(nb_pool *p);
/* As nb_pool_for, in split * N chunks (split from 1 to 4; others are clamped to that range): work
 * bound by computation, where one thread may run slower than another (a core shared with a busy
 * neighbour), is claimed in smaller pieces, so that the faster thread takes more of them. The
 * boundaries depend only on (n, grain, split * N). */
void nb_pool_for_locked(nb_pool *p, int64_t n, int64_t grain, int split, nb_pool_fn fn, void *ctx);
/* The threads nb_pool_create(n_threads) starts: n_threads, or one per online CPU (at most
 * NB_MAX_THREADS) when n_threads <= 0. */
int nb_pool_default_threads(int n_threads);

/* Monotonic nanoseconds (CLOCK_MONOTONIC): the library's one clock for statistics and benchmarks. */
uint64_t nb_clock_ns(void);

/* The same clock in seconds. */
static inline double nb_clock_s(void) { return 1e-9 * (double)nb_clock_ns(); }

#endif
