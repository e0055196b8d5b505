/* registry.c: every op's dispatch table (see registry.h). */
#include "kernels/registry.h"

#include <string.h>

/* The tables of the ops, defined in their kernel files. */
extern b8_op_table b8_op_layernorm, b8_op_attention, b8_op_attention_s8, b8_op_quantize_static,
    b8_op_quantize_dynamic, b8_op_quantize_dynamic_zp, b8_op_layernorm_quantize, b8_op_sgemm, b8_op_sgemm_rows, b8_op_rotary, b8_op_glu,
    b8_op_rel_dot;

static b8_op_table *const g_ops[] = {&b8_op_sgemm,     &b8_op_attention,        &b8_op_attention_s8,
                                     &b8_op_layernorm, &b8_op_quantize_static, &b8_op_quantize_dynamic,
                                     &b8_op_quantize_dynamic_zp,
                                     &b8_op_layernorm_quantize, &b8_op_sgemm_rows, &b8_op_rotary,
                                     &b8_op_glu,     &b8_op_rel_dot};

int b8_dispatch_op_count(void) { return (int)(sizeof g_ops / sizeof *g_ops); }

b8_op_table *b8_dispatch_op(int i) { return i >= 0 && i < b8_dispatch_op_count() ? g_ops[i] : NULL; }

const char *b8_dispatch_choice(const char *op) {
    for (int i = 0; i < b8_dispatch_op_count(); i++)
        if (!strcmp(g_ops[i]->op, op)) {
            int c = __atomic_load_n(&g_ops[i]->chosen, __ATOMIC_ACQUIRE);
            return c >= 0 ? g_ops[i]->impls[c].name : NULL;
        }
    return NULL;
}
