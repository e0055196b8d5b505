/* fuzz_config.c: config.json through b8_config_parse. An accepted config must have every
 * size in the range the loader relies on (so that the shapes it derives cannot overflow),
 * a head size that divides the hidden size, and one label name per class. */
#include "fuzz_util.h" /* first: it defines _GNU_SOURCE */

#include <math.h>

#include "io/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    char *text = fuzz_str(data, size);
    b8_config c;
    b8_err e;
    b8_err_clear(&e);
    bert8_status s = b8_config_parse(text, "config.json", &c, &e);
    if (s == BERT8_OK) {
        FUZZ_CHECK(c.vocab_size >= 1 && c.vocab_size <= ((int64_t)1 << 31));
        FUZZ_CHECK(c.hidden_size >= 1 && c.hidden_size <= (1 << 20));
        FUZZ_CHECK(c.num_heads >= 1 && c.hidden_size % c.num_heads == 0);
        FUZZ_CHECK(c.num_layers >= 0 && c.num_layers <= 4096);
        FUZZ_CHECK(c.intermediate_size >= 1 && c.intermediate_size <= (1 << 22));
        FUZZ_CHECK(c.max_position_embeddings >= 1);
        FUZZ_CHECK(c.type_vocab_size >= 0);
        FUZZ_CHECK(isnormal(c.layer_norm_eps) && c.layer_norm_eps > 0 && c.layer_norm_eps < 1);
        FUZZ_CHECK(c.num_labels >= 1 && c.num_labels <= B8_CONFIG_MAX_LABELS && c.labels);
        for (int64_t i = 0; i < c.num_labels; i++)
            FUZZ_CHECK(c.labels[i] != NULL);
        FUZZ_CHECK(memchr(c.model_type, 0, sizeof c.model_type) != NULL);
        FUZZ_CHECK(memchr(c.architecture, 0, sizeof c.architecture) != NULL);
        FUZZ_CHECK(c.lora_count >= 0 && c.lora_count <= B8_LORA_MAX_TASKS);
        for (int64_t i = 0; i < c.lora_count; i++)
            FUZZ_CHECK(c.lora_tasks[i][0] != '\0' && memchr(c.lora_tasks[i], 0, B8_LORA_NAME_MAX) != NULL);
        FUZZ_CHECK(c.lora_count == 0 || (c.lora_rank >= 1 && isfinite(c.lora_alpha)));
        b8_config_free(&c);
    } else {
        FUZZ_CHECK(e.status == s && e.msg[0] != '\0' && c.labels == NULL);
    }
    free(text);
    return 0;
}
