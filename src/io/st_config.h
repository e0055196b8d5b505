/* st_config.h: the sentence-transformers settings of a model folder: the pooling mode of
 * 1_Pooling/config.json, whether modules.json ends in a Normalize module, and the truncation
 * length of sentence_bert_config.json. */
#ifndef BERT8_ST_CONFIG_H
#define BERT8_ST_CONFIG_H

#include "base/common.h"

typedef enum b8_st_pool { B8_ST_POOL_UNSET, B8_ST_POOL_CLS, B8_ST_POOL_MEAN, B8_ST_POOL_MAX } b8_st_pool;

/* Reads dir's files when present: *pool stays UNSET without 1_Pooling/config.json, *normalize
 * is set when modules.json lists sentence_transformers.models.Normalize. A pooling mode bert8
 * does not compute (mean_sqrt_len, weightedmean, lasttoken) or several modes at once is
 * BERT8_ERR_UNSUPPORTED naming the file and the key. */
bert8_status b8_st_config_read(const char *dir, b8_st_pool *pool, bool *normalize, b8_err *e);

/* max_seq_length of dir's sentence_bert_config.json (sentence-transformers truncates there):
 * *n = 0 when the file or the key is absent (or null); a value that is not a positive integer
 * is BERT8_ERR_FORMAT naming the file. */
bert8_status b8_st_max_seq_length(const char *dir, int64_t *n, b8_err *e);

#endif
