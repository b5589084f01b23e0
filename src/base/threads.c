/*
 * threads.c: persistent pthread pool (contract in threads.h and nibble.h).
 *
 * Workers wait for a new job generation: first by spinning briefly (a decode step issues many
 * small matmuls back to back, and a condition-variable wake costs tens of microseconds), then on
 * a condition variable so that an idle pool costs nothing.
 */
#include "base/threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/error.h"

#define NB_POOL_MAX_THREADS 256
#define NB_POOL_SPIN 20000

struct nb_pool {
    int n;                    /* threads including the caller */
    pthread_t *workers;       /* n - 1 */
    pthread_mutex_t job_lock; /* one job sequence at a time */
    pthread_mutex_t m;        /* guards the sleeping paths below */
    pthread_cond_t cv_work, cv_done;
    atomic_uint_fast64_t gen; /* bumped once per job */
    atomic_int pending;       /* workers still running the current job */
    atomic_int stop;
    nb_pool_fn fn;            /* the current job; written before gen is bumped */
    void *ctx;
    int64_t items, grain;
    void *scratch;
    size_t scratch_bytes;
};

typedef struct {
    nb_pool *p;
    int index;
} worker_arg;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Chunk i of n threads: boundaries at multiples of grain, a function of (items, grain, n) only. */
static void chunk(int64_t items, int64_t grain, int n, int i, int64_t *b, int64_t *e) {
    int64_t units = (items + grain - 1) / grain;
    int64_t ub = units * i / n, ue = units * (i + 1) / n;
    *b = ub * grain < items ? ub * grain : items;
    *e = ue * grain < items ? ue * grain : items;
}

static void run_chunk(nb_pool *p, int i) {
    int64_t b, e;
    chunk(p->items, p->grain, p->n, i, &b, &e);
    if (b < e) p->fn(p->ctx, b, e);
}

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    nb_pool *p = wa.p;
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
        run_chunk(p, wa.index);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
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

nb_status nb_pool_create(int n_threads, nb_pool **out) {
    if (!out) return nb_fail(NB_ERR_INVALID_ARG, "nb_pool_create: out is NULL");
    *out = NULL;
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > NB_POOL_MAX_THREADS)
        return nb_fail(NB_ERR_RANGE, "nb_pool_create: %d threads, limit %d", n_threads, NB_POOL_MAX_THREADS);
    nb_pool *p = calloc(1, sizeof *p);
    if (!p) return nb_fail(NB_ERR_NOMEM, "nb_pool_create: pool struct");
    p->n = n_threads;
    pthread_mutex_init(&p->job_lock, NULL);
    pthread_mutex_init(&p->m, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            nb_pool_destroy(p);
            return nb_fail(NB_ERR_NOMEM, "nb_pool_create: %d thread handles", n_threads - 1);
        }
        for (int i = 1; i < n_threads; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (wa) *wa = (worker_arg){p, i};
            if (!wa || pthread_create(&p->workers[i - 1], NULL, worker_main, wa) != 0) {
                free(wa);
                stop_workers(p, i - 1);
                p->n = 1; /* the workers are gone; destroy must not join them again */
                nb_pool_destroy(p);
                return nb_fail(NB_ERR_NOMEM, "nb_pool_create: starting thread %d of %d", i, n_threads);
            }
        }
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

void nb_pool_for_locked(nb_pool *p, int64_t n, int64_t grain, nb_pool_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (!p || p->n == 1 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->items = n;
    p->grain = grain;
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->m);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->m);
    run_chunk(p, 0);
    int spins = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) != 0 && spins < NB_POOL_SPIN) {
        cpu_relax();
        spins++;
    }
    if (atomic_load_explicit(&p->pending, memory_order_acquire) != 0) {
        pthread_mutex_lock(&p->m);
        while (atomic_load(&p->pending) != 0) pthread_cond_wait(&p->cv_done, &p->m);
        pthread_mutex_unlock(&p->m);
    }
}

nb_status nb_pool_for(nb_pool *p, int64_t n, int64_t grain, nb_pool_fn fn, void *ctx) {
    if (!fn) return nb_fail(NB_ERR_INVALID_ARG, "nb_pool_for: fn is NULL");
    if (n < 0) return nb_fail(NB_ERR_RANGE, "nb_pool_for: n = %lld < 0", (long long)n);
    if (p) pthread_mutex_lock(&p->job_lock);
    nb_pool_for_locked(p, n, grain, fn, ctx);
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
