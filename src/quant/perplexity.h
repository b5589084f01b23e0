/*
 * perplexity.h: the per-position arithmetic behind nb_perplexity (nibble.h), exposed to the tests.
 *
 * For one row l of logits over V tokens, with M = max l and S = sum_v exp(l_v - M) (float exps
 * summed in double, as llama.cpp):
 *   ln p(v)  = l_v - M - ln S, rounded to float by one function for both saving and comparing, so
 *              the same logits give bit-identical log-probabilities on both sides
 *   nll      = M + ln S - l_next
 *   top K    = the K largest logits, best first, equal logits by ascending id (argmax rule: the
 *              first maximum)
 *   tail     = (S - sum over the top K of exp(l_v - M)) / S, the mass outside the top K
 *   KL(P||Q) = sum over P's top K of P_k (ln P_k - ln Q_k) + P_tail ln(P_tail / Q_tail), where
 *              Q_tail is Q's mass outside P's top K: the KL of the two distributions coarsened to
 *              K+1 buckets, never above the exact KL (log-sum inequality) and equal to it when K = V.
 */
#ifndef NB_QUANT_PERPLEXITY_H
#define NB_QUANT_PERPLEXITY_H

#include "quant/logprobs.h"

typedef struct nb_ppl_row {
    float max;       /* M */
    int32_t argmax;  /* first index of M */
    double sum;      /* S */
    double log_sum;  /* ln S */
} nb_ppl_row;

void nb_ppl_row_init(const float *l, int n_vocab, nb_ppl_row *r);
double nb_ppl_row_nll(const float *l, const nb_ppl_row *r, int32_t next);
/* Fills rec->top (k entries, 1 <= k <= n_vocab) and rec->tail. */
void nb_ppl_row_save(const float *l, int n_vocab, const nb_ppl_row *r, int k, nb_lprob_record *rec);
/* KL(base || this row), base holding k entries. */
double nb_ppl_row_kl(const float *l, const nb_ppl_row *r, const nb_lprob_record *base, int k);

#endif
