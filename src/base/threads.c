/*
 * threads.c: persistent pthread pool (contract in threads.h and nibble.h).
 *
 * Workers wait for a new job generation: first by spinning briefly (a decode step issues many
 * small matmuls back to back, and a condition-variable wake costs tens of microseconds), then on
 * a condition variable so that an idle pool costs nothing.
 *
 * The chunks of a job (N, or split * N for nb_pool_for_locked's batches) are claimed, not
 * assigned: every thread, the caller included, takes the next unclaimed chunk from an atomic
 * counter until none is left, and the caller returns when all are done. On a loaded machine a
 * worker that is not scheduled then costs at most the chunk it holds (a fixed chunk-per-thread
 * split made every job wait a full scheduler slice for it: two threads decoded 3x slower than
 * one on a busy 2-core box), and with several chunks a thread a faster thread takes more of them
 * (on a host whose two vCPUs ran a GEMM at 1 and 0.75 of each other's speed, docs/BENCHMARKS.md
 * stop 53). Chunk boundaries still depend only on (items, grain, split * N), and a chunk computes
 * the same bits on any thread.
 */
#include "base/threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"

#define NB_POOL_SPIN 20000
/* The most chunks a thread a job may ask for. Every job has n * NB_POOL_MAX_SPLIT chunk indices,
 * those past n * split empty: a constant count, so that a late worker of the previous job (whose
 * indices are all claimed) can never take one of the next job's for its own. */
#define NB_POOL_MAX_SPLIT 4

struct nb_pool {
    int n;                    /* threads including the caller */
    int chunks;               /* chunk indices of every job: n * NB_POOL_MAX_SPLIT */
    int split;                /* the current job's chunks per thread (indices past n * split: empty) */
    pthread_t *workers;       /* n - 1 */
    pthread_mutex_t job_lock; /* one job sequence at a time */
    pthread_mutex_t m;        /* guards the sleeping paths below */
    pthread_cond_t cv_work, cv_done;
    atomic_uint_fast64_t gen; /* bumped once per job */
    atomic_int next;          /* next chunk of the current job to claim (>= n: none left) */
    atomic_int done;          /* chunks of the current job finished */
    atomic_int stop;
    nb_pool_fn fn;            /* the current job; written before gen is bumped */
    void *ctx;
    int64_t items, grain;
    void *scratch;
    size_t scratch_bytes;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Chunk i of n threads: boundaries at multiples of grain, a function of (items, grain, n) only. */
static void chunk(int64_t items, int64_t grain, int n, int i, int64_t *b, int64_t *e) {
    int64_t units = (items + grain - 1) / grain;
    int64_t ub = units * i / n, ue = units * (i + 1) / n;
    *b = ub * grain < items ? ub * grain : items;
    *e = ue * grain < items ? ue * grain : items;
}

/* Runs chunks until none is left to claim; returns 1 if this thread finished the job's last one.
 * The claim (acquire) pairs with the caller's release of `next`, so fn/ctx/items are this job's. */
static int run_chunks(nb_pool *p) {
    int last = 0;
    for (;;) {
        int i = atomic_fetch_add_explicit(&p->next, 1, memory_order_acq_rel);
        if (i >= p->chunks) return last;
        int64_t b, e;
        chunk(p->items, p->grain, p->n * p->split, i, &b, &e);
        if (b < e) p->fn(p->ctx, b, e);
        last = atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel) + 1 == p->chunks;
    }
}

static void *worker_main(void *arg) {
    nb_pool *p = arg;
    uint_fast64_t seen = 0;
    for (;;) {
        int spins = 0;
        while (atomic_load_explicit(&p->gen, memory_order_acquire) == seen &&
               !atomic_load(&p->stop) && spins < NB_POOL_SPIN) {
            cpu_relax();
            spins++;
        }
        if (atomic_load_explicit(&p->gen, memory_order_acquire) == seen && !atomic_load(&p->stop)) {
            pthread_mutex_lock(&p->m);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv_work, &p->m);
            pthread_mutex_unlock(&p->m);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (run_chunks(p)) {
            pthread_mutex_lock(&p->m);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->m);
        }
    }
}

static void stop_workers(nb_pool *p, int started) {
    pthread_mutex_lock(&p->m);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->m);
    for (int i = 0; i < started; i++) pthread_join(p->workers[i], NULL);
}

int nb_pool_default_threads(int n_threads) {
    if (n_threads > 0) return n_threads;
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c <= 0 ? 1 : c > NB_MAX_THREADS ? NB_MAX_THREADS : (int)c; /* a big machine still gets a pool */
}

nb_status nb_pool_create(int n_threads, nb_pool **out) {
    if (!out) return nb_fail(NB_ERR_INVALID_ARG, "nb_pool_create: out is NULL");
    *out = NULL;
    n_threads = nb_pool_default_threads(n_threads);
    if (n_threads > NB_MAX_THREADS)
        return nb_fail(NB_ERR_RANGE, "nb_pool_create: %d threads, limit %d (NB_MAX_THREADS)", n_threads,
                       NB_MAX_THREADS);
    nb_pool *p = calloc(1, sizeof *p);
    if (!p) return nb_fail(NB_ERR_NOMEM, "nb_pool_create: pool struct");
    p->n = n_threads;
    p->chunks = n_threads * NB_POOL_MAX_SPLIT;
    p->split = 1;
    pthread_mutex_init(&p->job_lock, NULL);
    pthread_mutex_init(&p->m, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            nb_pool_destroy(p);
            return nb_fail(NB_ERR_NOMEM, "nb_pool_create: %d thread handle%s", n_threads - 1,
                           nb_plural(n_threads - 1));
        }
        /* The GEMM panels keep their tiles and up to 256 tokens' lane sums on the stack (about
         * 100 KiB, kernels/x86/avx2/panel.h): more than some C libraries' default thread stack
         * (musl's is 128 KiB) leaves for the rest, so the workers ask for 4 MiB. */
        pthread_attr_t attr;
        const int attr_ok = pthread_attr_init(&attr) == 0;
        if (attr_ok) (void)pthread_attr_setstacksize(&attr, (size_t)4 << 20); /* refused: the default */
        for (int i = 1; i < n_threads; i++) {
            if (pthread_create(&p->workers[i - 1], attr_ok ? &attr : NULL, worker_main, p) != 0) {
                if (attr_ok) pthread_attr_destroy(&attr);
                stop_workers(p, i - 1);
                p->n = 1; /* the workers are gone; destroy must not join them again */
                nb_pool_destroy(p);
                return nb_fail(NB_ERR_NOMEM, "nb_pool_create: starting thread %d of %d", i, n_threads);
            }
        }
        if (attr_ok) pthread_attr_destroy(&attr);
    }
    *out = p;
    return NB_OK;
}

void nb_pool_destroy(nb_pool *p) {
    if (!p) return;
    if (p->n > 1 && p->workers) stop_workers(p, p->n - 1);
    free(p->workers);
    free(p->scratch);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    pthread_mutex_destroy(&p->m);
    pthread_mutex_destroy(&p->job_lock);
    free(p);
}

int nb_pool_threads(const nb_pool *p) { return p ? p->n : 1; }

void nb_pool_for_locked(nb_pool *p, int64_t n, int64_t grain, int split, nb_pool_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (!p || p->n == 1 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    /* the previous job is complete (done == n), so no thread holds a chunk of it; a late worker
     * that still claims from the old counter gets an index >= n and runs nothing */
    p->fn = fn;
    p->ctx = ctx;
    p->items = n;
    p->grain = grain;
    p->split = split < 1 ? 1 : split > NB_POOL_MAX_SPLIT ? NB_POOL_MAX_SPLIT : split;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->next, 0, memory_order_release);
    pthread_mutex_lock(&p->m);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->m);
    run_chunks(p);
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) != p->chunks && spins < NB_POOL_SPIN) {
        cpu_relax();
        spins++;
    }
    if (atomic_load_explicit(&p->done, memory_order_acquire) != p->chunks) {
        pthread_mutex_lock(&p->m);
        while (atomic_load(&p->done) != p->chunks) pthread_cond_wait(&p->cv_done, &p->m);
        pthread_mutex_unlock(&p->m);
    }
}

nb_status nb_pool_for(nb_pool *p, int64_t n, int64_t grain, nb_pool_fn fn, void *ctx) {
    if (!fn) return nb_fail(NB_ERR_INVALID_ARG, "nb_pool_for: fn is NULL");
    if (n < 0) return nb_fail(NB_ERR_RANGE, "nb_pool_for: n = %lld < 0", (long long)n);
    if (p) pthread_mutex_lock(&p->job_lock);
    nb_pool_for_locked(p, n, grain, 1, fn, ctx);
    if (p) pthread_mutex_unlock(&p->job_lock);
    return NB_OK;
}

void *nb_pool_lock_scratch(nb_pool *p, size_t bytes) {
    pthread_mutex_lock(&p->job_lock);
    if (bytes > p->scratch_bytes) {
        size_t want = bytes + bytes / 2 + 64;
        void *q = NULL;
        if (posix_memalign(&q, 64, want) != 0) {
            pthread_mutex_unlock(&p->job_lock);
            return NULL;
        }
        free(p->scratch);
        p->scratch = q;
        p->scratch_bytes = want;
    }
    return p->scratch;
}

void nb_pool_unlock(nb_pool *p) { pthread_mutex_unlock(&p->job_lock); }

uint64_t nb_clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
