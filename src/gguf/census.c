/*
 * census.c: nb_gguf_census, what a validated file's tensors hold by type and which of them a
 * K-quant recipe wrote in a fallback type (contract in nibble.h). Reads the tensor list only.
 */
#include <string.h>

#include "base/error.h"
#include "nibble.h"

static void count(nb_census_count *c, const nb_gguf_tensor *t) {
    c->tensors++;
    c->params += (uint64_t)t->ne[0] * (uint64_t)nb_gguf_tensor_rows(t);
    c->bytes += t->bytes;
}

static void finish(nb_census_count *c) {
    c->bits_per_weight = c->params ? 8.0 * (double)c->bytes / (double)c->params : 0;
}

int nb_census_fallback_of(const nb_census *c, const nb_gguf_tensor *t) {
    return c->kquants && t->n_dims >= 2 && t->ne[0] % 256 ? nb_type_fallback_of(t->type) : -1;
}

nb_status nb_gguf_census(const nb_gguf *g, nb_census *out) {
    if (!g || !out) return nb_fail(NB_ERR_INVALID_ARG, "census: NULL argument");
    memset(out, 0, sizeof *out);
    nb_census_count by_id[NB_CENSUS_TYPES] = {{0}};
    const int64_t n = nb_gguf_tensor_count(g);
    for (int64_t i = 0; i < n; i++) {
        const nb_gguf_tensor *t = nb_gguf_tensor_at(g, i);
        count(&by_id[t->type], t), count(&out->total, t);
        if (nb_type_is_kquant(t->type)) out->kquants = 1;
    }
    for (int id = 0; id < NB_CENSUS_TYPES; id++)
        if (by_id[id].tensors) {
            by_id[id].type = id;
            finish(&by_id[id]);
            out->types[out->n_types++] = by_id[id];
        }
    out->total.type = -1;
    finish(&out->total);
    /* one group per (written type, row length), named by its first tensor */
    for (int64_t i = 0; i < n; i++) {
        const nb_gguf_tensor *t = nb_gguf_tensor_at(g, i);
        const int wanted = nb_census_fallback_of(out, t);
        if (wanted < 0) continue;
        out->n_fallback++;
        int k = 0;
        while (k < out->n_groups && (out->groups[k].type != t->type || out->groups[k].row_length != t->ne[0])) k++;
        if (k == NB_CENSUS_GROUPS) {
            out->ungrouped++;
            continue;
        }
        if (k == out->n_groups) out->groups[out->n_groups++] = (nb_census_group){t->type, wanted, t->ne[0], 0, t->name};
        out->groups[k].tensors++;
    }
    return NB_OK;
}
