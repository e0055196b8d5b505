/* safetensors.h: reading (mmap, validated before use), writing and sharded-index loading of
 * Hugging Face .safetensors checkpoints, plus the float16/bfloat16 conversions they need.
 *
 * A b8_st is immutable once opened and may be read from any number of threads. Tensor data
 * pointers point into a read-only mapping, are valid until b8_st_close() and may be unaligned.
 */
#ifndef BERT8_SAFETENSORS_H
#define BERT8_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

/* The first ten are the ones the engine meets; the rest exist so that any file the reference
 * reader accepts also opens here (the consumer decides whether it can use a tensor). */
typedef enum b8_dtype {
    B8_F32,
    B8_F16,
    B8_BF16,
    B8_F64,
    B8_I64,
    B8_I32,
    B8_I16,
    B8_I8,
    B8_U8,
    B8_BOOL,
    B8_U16,
    B8_U32,
    B8_U64,
    B8_F8_E5M2,
    B8_F8_E4M3,
    B8_DTYPE_COUNT
} b8_dtype;

/* The on-disk name ("F32", "I64", ...); "?" for a value outside the enum. */
const char *b8_dtype_name(b8_dtype dt);
/* Bytes per element; 0 for a value outside the enum. */
size_t b8_dtype_size(b8_dtype dt);
/* Parses an on-disk dtype name; returns false when it is not one of the above. */
bool b8_dtype_from_name(const char *name, b8_dtype *out);

#define B8_ST_MAX_DIMS 8

/* Resource limits. Each is checked before memory is allocated for what it bounds, and a file
 * over one is refused with BERT8_ERR_TOO_LARGE and a message naming the file and the limit.
 *  - B8_ST_MAX_HEADER: bytes of JSON header per file (the reference reader's own limit).
 *  - B8_ST_MAX_HEADER_VALUES: JSON values (objects, arrays, strings, numbers) in one header,
 *    counted by a scan of the raw bytes before parsing; the parser needs about 64 bytes per
 *    value, so this bounds its memory to about 1 GiB.
 *  - B8_ST_MAX_TENSORS: tensors in one checkpoint, all shards together.
 *  - B8_ST_MAX_INDEX_BYTES: size of model.safetensors.index.json.
 * Files up to B8_ST_COPY_MAX bytes are read into memory rather than mapped, so truncating or
 * rewriting one while a model is loaded cannot fault the process (see docs/reliability.md). */
#define B8_ST_MAX_HEADER ((uint64_t)100000000)
#define B8_ST_MAX_HEADER_VALUES ((size_t)1 << 24)
#define B8_ST_MAX_TENSORS ((size_t)1 << 20)
#define B8_ST_MAX_INDEX_BYTES ((size_t)64 << 20)
#define B8_ST_COPY_MAX ((size_t)64 << 20)

typedef struct b8_st_tensor {
    const char *name;
    b8_dtype dtype;
    int ndim;
    int64_t shape[B8_ST_MAX_DIMS];
    const void *data; /* points into the mmap, read-only; may be unaligned */
    size_t nbytes;
    size_t file_offset; /* absolute offset in its file, for messages */
    const char *file;   /* path of the file that holds it */
} b8_st_tensor;

/* One checkpoint: a single file, or all shards of an index. */
typedef struct b8_st b8_st;

/* Opens one .safetensors file. */
bert8_status b8_st_open(const char *path, b8_st **out, b8_err *e);
/* Opens dir/model.safetensors, or else dir/model.safetensors.index.json ("weight_map":
 * tensor name -> shard file in dir) and every shard it names. */
bert8_status b8_st_open_dir(const char *dir, b8_st **out, b8_err *e);
/* Parses a file image already in memory; `name` is used in messages and as tensor->file.
 * buf must stay valid and unchanged until b8_st_close(). */
bert8_status b8_st_open_memory(const void *buf, size_t len, const char *name, b8_st **out,
                               b8_err *e);
void b8_st_close(b8_st *st); /* NULL is a no-op */

/* Tensors in file order (shards in name order, then ascending data offset). */
size_t b8_st_count(const b8_st *st);
const b8_st_tensor *b8_st_at(const b8_st *st, size_t i);           /* NULL when i is out of range */
const b8_st_tensor *b8_st_find(const b8_st *st, const char *name); /* NULL if absent */
/* Sum of the tensors' byte sizes. */
size_t b8_st_data_bytes(const b8_st *st);
/* Element count of a tensor (product of its shape; 1 for a scalar). */
size_t b8_st_numel(const b8_st_tensor *t);

/* The "__metadata__" string map (for an index: the union over shards, first shard wins). */
const char *b8_st_metadata(const b8_st *st, const char *key); /* NULL if absent */
size_t b8_st_metadata_count(const b8_st *st);
/* Key and value of entry i (in file order); false when i is out of range. */
bool b8_st_metadata_at(const b8_st *st, size_t i, const char **key, const char **value);

/* Drops the resident pages of a mapped tensor the caller has copied (packed weights): the
 * mapping stays valid and reading it again faults the pages back in from the file. A no-op for
 * memory images. */
void b8_st_release(const b8_st *st, const b8_st_tensor *t);
/* Tells the kernel a mapped tensor is read at random places (a lookup table: word embeddings),
 * so that a read does not map the pages around it too. */
void b8_st_advise_random(const b8_st *st, const b8_st_tensor *t);

/* Converts a float tensor (F32/F16/BF16/F64) to a freshly allocated, 64-byte aligned F32 array
 * (free with b8_free_aligned), checking that it has exactly `count` elements. */
bert8_status b8_st_to_f32(const b8_st_tensor *t, size_t count, float **out, b8_err *e);

/* Scalar conversions; the narrowing ones round to nearest even and keep NaN a NaN. */
float b8_f16_to_f32(uint16_t h);
float b8_bf16_to_f32(uint16_t b);
uint16_t b8_f32_to_f16(float f);
uint16_t b8_f32_to_bf16(float f);

/* Writes a file in the reference serializer's layout: u64 LE header length; compact JSON
 * header with "__metadata__" first (omitted when meta_kv is NULL), padded with spaces to a
 * multiple of 8; tensors ordered by dtype descending in the reference's dtype order (U64, I64,
 * F64, F32, U32, I32, BF16, F16, U16, I16, F8_E4M3, F8_E5M2, I8, U8, BOOL) then by name
 * (bytewise ascending); data packed with no gaps. Each item's data holds numel * dtype size
 * bytes in little-endian order. The file is written beside `path` and renamed into place, so
 * a failure never leaves a partial file under `path`. */
typedef struct b8_st_write_item {
    const char *name;
    b8_dtype dtype;
    int ndim;
    int64_t shape[B8_ST_MAX_DIMS];
    const void *data;
} b8_st_write_item;

bert8_status b8_st_write(const char *path, const b8_st_write_item *items, size_t n,
                         const char *const *meta_kv /* key,value,...,NULL; may be NULL */,
                         b8_err *e);

#endif
