/* names.c: the tensor-name and Linear-group tables (see names.h). */
#include "io/names.h"
#include "io/arch.h"

#include <stdio.h>

const b8_group_desc b8_group_table[B8_GROUP_COUNT] = {
    [B8_GROUP_QKV] = {"qkv", 3, {B8_PART_Q, B8_PART_K, B8_PART_V}, false, false, B8_SITE_QKV_IN},
    [B8_GROUP_ATTN_OUT] = {"attention_output", 1, {B8_PART_ATTN_OUT}, false, false, B8_SITE_ATTN_OUT_IN},
    [B8_GROUP_FFN_IN] = {"ffn_in", 1, {B8_PART_FFN_IN}, true, false, B8_SITE_FFN_IN_IN},
    [B8_GROUP_FFN_OUT] = {"ffn_out", 1, {B8_PART_FFN_OUT}, false, true, B8_SITE_FFN_OUT_IN},
};

void b8_group_dims(b8_group g, int64_t H, int64_t I, int64_t *n, int64_t *k) {
    const b8_group_desc *d = &b8_group_table[g];
    *n = d->n_parts * (d->part_n_inter ? I : H);
    *k = d->k_inter ? I : H;
}

void b8_part_name(bert8_arch arch, const char *prefix, int64_t layer, b8_part part, char *out,
                  size_t cap) {
    const b8_arch_desc *d = b8_arch_of(arch);
    snprintf(out, cap, "%s%s.%lld.%s", prefix, d->layer_prefix, (long long)layer, d->parts[part]);
}
