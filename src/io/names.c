/* names.c: tensor names and group sizes in an architecture (see names.h). */
#include "io/names.h"
#include "io/arch.h"

#include <stdio.h>

int b8_group_nparts(const b8_arch_desc *a, b8_group g) {
    const b8_group_desc *d = &b8_group_table[g];
    return d->gated && a->ffn != B8_FFN_GLU ? d->n_parts - 1 : d->n_parts;
}

void b8_group_dims(const b8_arch_desc *a, b8_group g, int64_t H, int64_t I, int64_t *n, int64_t *k) {
    const b8_group_desc *d = &b8_group_table[g];
    *n = b8_group_nparts(a, g) * (d->part_n_inter ? I : H);
    *k = d->k_inter ? I : H;
}

void b8_part_name(bert8_arch arch, const char *prefix, int64_t layer, b8_part part, char *out,
                  size_t cap) {
    const b8_arch_desc *d = b8_arch_of(arch);
    snprintf(out, cap, "%s%s.%lld.%s", prefix, d->layer_prefix, (long long)layer, d->parts[part]);
}

bool b8_fused_name(bert8_arch arch, const char *prefix, int64_t layer, b8_group g, char *out, size_t cap) {
    const b8_arch_desc *d = b8_arch_of(arch);
    if (cap) out[0] = '\0';
    if (!d->fused[g]) return false;
    snprintf(out, cap, "%s%s.%lld.%s", prefix, d->layer_prefix, (long long)layer, d->fused[g]);
    return true;
}
