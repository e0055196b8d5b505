/* layer.c: the Linear-group table of an encoder layer (see layer.h). */
#include "io/layer.h"

const b8_group_desc b8_group_table[B8_GROUP_COUNT] = {
    [B8_GROUP_QKV] = {"qkv", 3, {B8_PART_Q, B8_PART_K, B8_PART_V}, false, false, false, B8_SITE_QKV_IN},
    [B8_GROUP_ATTN_OUT] = {"attention_output", 1, {B8_PART_ATTN_OUT}, false, false, false, B8_SITE_ATTN_OUT_IN},
    [B8_GROUP_FFN_IN] = {"ffn_in", 2, {B8_PART_FFN_IN, B8_PART_FFN_UP}, true, true, false, B8_SITE_FFN_IN_IN},
    [B8_GROUP_FFN_OUT] = {"ffn_out", 1, {B8_PART_FFN_OUT}, false, false, true, B8_SITE_FFN_OUT_IN},
};
