/* units.c: the unit table and a model's units as the public API reports them (see units.h). */
#include "calibrate/units.h"

const b8_unit_desc b8_unit_table[B8_UNITS_PER_LAYER] = {
    {B8_UNIT_LINEAR, B8_GROUP_QKV, "qkv"},
    {B8_UNIT_LINEAR, B8_GROUP_ATTN_OUT, "attention_output"},
    {B8_UNIT_LINEAR, B8_GROUP_FFN_IN, "ffn_in"},
    {B8_UNIT_LINEAR, B8_GROUP_FFN_OUT, "ffn_out"},
    {B8_UNIT_ATTENTION, B8_GROUP_QKV, "attention"}, /* group: the product that feeds it */
};

const char *bert8_unit_mode_name(bert8_unit_mode mode) {
    return b8_unit_mode_valid(mode) ? b8_qmode_name(b8_qmode_of_unit_mode(mode)) : "?";
}

int64_t bert8_model_unit_count(const bert8_model *m) { return m ? m->cfg.num_layers * B8_UNITS_PER_LAYER : 0; }

bert8_status bert8_model_unit(const bert8_model *m, int64_t i, bert8_unit_info *out) {
    if (!m || !out || i < 0 || i >= bert8_model_unit_count(m)) return BERT8_ERR_INVALID_ARG;
    const b8_unit_desc *d = &b8_unit_table[i % B8_UNITS_PER_LAYER];
    const b8_layer *ly = &m->layers[i / B8_UNITS_PER_LAYER];
    out->layer = i / B8_UNITS_PER_LAYER;
    out->kind = d->key;
    out->mode = BERT8_UNIT_FP32;
    out->alpha = -1.0f;
    switch (d->kind) {
    case B8_UNIT_LINEAR:
        out->mode = b8_unit_mode_of_qmode(b8_layer_mode(ly, d->group));
        if (ly->q[d->group]) out->alpha = ly->q[d->group]->alpha;
        break;
    case B8_UNIT_ATTENTION:
        out->mode = ly->att ? BERT8_UNIT_INT8_STATIC : BERT8_UNIT_FP32;
        break;
    }
    return BERT8_OK;
}
