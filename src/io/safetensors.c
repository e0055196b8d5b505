/* safetensors.c: the .safetensors reader (every header field checked before any data is
 * touched), the sharded-index loader and the writer that reproduces the reference layout. */
#define _GNU_SOURCE
#include "io/safetensors.h"
#include "io/json_util.h"
#include "base/utf8.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data are little-endian; this reader assumes a little-endian host"
#endif

/* Largest integer a JSON number (a double in cJSON) holds exactly. */
#define ST_MAX_JSON_INT 9007199254740992.0

typedef struct dtype_info {
    const char *name;
    size_t size;
    int ref_rank; /* position in the reference serializer's Dtype enum; it sorts descending */
} dtype_info;

static const dtype_info DTYPES[B8_DTYPE_COUNT] = {
    [B8_F32] = {"F32", 4, 11},  [B8_F16] = {"F16", 2, 7},         [B8_BF16] = {"BF16", 2, 8},
    [B8_F64] = {"F64", 8, 12},  [B8_I64] = {"I64", 8, 13},        [B8_I32] = {"I32", 4, 9},
    [B8_I16] = {"I16", 2, 5},   [B8_I8] = {"I8", 1, 2},           [B8_U8] = {"U8", 1, 1},
    [B8_BOOL] = {"BOOL", 1, 0}, [B8_U16] = {"U16", 2, 6},         [B8_U32] = {"U32", 4, 10},
    [B8_U64] = {"U64", 8, 14},  [B8_F8_E5M2] = {"F8_E5M2", 1, 3}, [B8_F8_E4M3] = {"F8_E4M3", 1, 4},
};

const char *b8_dtype_name(b8_dtype dt) {
    return ((unsigned)dt < B8_DTYPE_COUNT) ? DTYPES[dt].name : "?";
}

size_t b8_dtype_size(b8_dtype dt) {
    return ((unsigned)dt < B8_DTYPE_COUNT) ? DTYPES[dt].size : 0;
}

bool b8_dtype_from_name(const char *name, b8_dtype *out) {
    if (!name) return false;
    for (int i = 0; i < B8_DTYPE_COUNT; i++) {
        if (strcmp(name, DTYPES[i].name) == 0) {
            if (out) *out = (b8_dtype)i;
            return true;
        }
    }
    return false;
}

/* ---- The checkpoint object ------------------------------------------------------------ */

typedef struct st_file {
    char *path;
    const uint8_t *base; /* whole file image */
    size_t size;
    bool mapped; /* munmap on close (false for b8_st_open_memory) */
    bool owned;  /* a copy in memory: b8_free_aligned on close */
} st_file;

typedef struct st_meta {
    char *key, *value;
} st_meta;

struct b8_st {
    st_file *files;
    size_t nfiles, files_cap;
    b8_st_tensor *tensors; /* file order */
    size_t n, cap;
    size_t *by_name; /* indices into tensors, sorted by name, for b8_st_find */
    st_meta *meta;
    size_t nmeta, meta_cap;
    size_t data_bytes;
};

void b8_st_close(b8_st *st) {
    if (!st) return;
    for (size_t i = 0; i < st->n; i++)
        free((char *)st->tensors[i].name);
    for (size_t i = 0; i < st->nfiles; i++) {
        if (st->files[i].mapped && st->files[i].base)
            munmap((void *)st->files[i].base, st->files[i].size);
        if (st->files[i].owned) b8_free_aligned((void *)st->files[i].base);
        free(st->files[i].path);
    }
    for (size_t i = 0; i < st->nmeta; i++) {
        free(st->meta[i].key);
        free(st->meta[i].value);
    }
    free(st->files);
    free(st->tensors);
    free(st->by_name);
    free(st->meta);
    free(st);
}

/* Grows *arr (of elements of size `elem`) so that index `need-1` fits. */
static bool grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (!b8_mul_ok(nc, 2, &nc)) return false;
    }
    size_t bytes;
    if (!b8_mul_ok(nc, elem, &bytes)) return false;
    void *p = realloc(*arr, bytes);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

size_t b8_st_count(const b8_st *st) {
    return st ? st->n : 0;
}

const b8_st_tensor *b8_st_at(const b8_st *st, size_t i) {
    return (st && i < st->n) ? &st->tensors[i] : NULL;
}

size_t b8_st_data_bytes(const b8_st *st) {
    return st ? st->data_bytes : 0;
}

size_t b8_st_numel(const b8_st_tensor *t) {
    if (!t) return 0;
    size_t n = 1;
    /* Cannot overflow: the reader checked the product when it opened the file. */
    for (int d = 0; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    return n;
}

const b8_st_tensor *b8_st_find(const b8_st *st, const char *name) {
    if (!st || !name || !st->by_name) return NULL;
    size_t lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const b8_st_tensor *t = &st->tensors[st->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *b8_st_metadata(const b8_st *st, const char *key) {
    if (!st || !key) return NULL;
    for (size_t i = 0; i < st->nmeta; i++)
        if (strcmp(st->meta[i].key, key) == 0) return st->meta[i].value;
    return NULL;
}

size_t b8_st_metadata_count(const b8_st *st) {
    return st ? st->nmeta : 0;
}

bool b8_st_metadata_at(const b8_st *st, size_t i, const char **key, const char **value) {
    if (!st || i >= st->nmeta) return false;
    if (key) *key = st->meta[i].key;
    if (value) *value = st->meta[i].value;
    return true;
}

/* ---- Header parsing -------------------------------------------------------------------- */

static uint64_t read_u64_le(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* A JSON number that must be a non-negative integer exactly representable in a double. */
static bool json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= 0.0 && d <= ST_MAX_JSON_INT)) return false; /* also rejects NaN and inf */
    if (d != floor(d)) return false;
    *out = (uint64_t)d;
    return true;
}


/* Renders a parsed shape for messages. */
static void shape_str(const b8_st_tensor *t, char *buf, size_t cap) {
    size_t k = 0;
    k += (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%" PRId64, d ? "," : "", t->shape[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

static bert8_status add_meta(b8_st *st, const char *key, const char *value, b8_err *e) {
    if (!grow((void **)&st->meta, &st->meta_cap, st->nmeta + 1, sizeof *st->meta))
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for safetensors metadata");
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for safetensors metadata");
    }
    st->meta[st->nmeta].key = k;
    st->meta[st->nmeta].value = v;
    st->nmeta++;
    return BERT8_OK;
}

/* Checks "__metadata__" and merges it into st (keys already present, from an earlier shard,
 * are kept). */
static bert8_status parse_metadata(b8_st *st, const char *path, const cJSON *m, size_t first_meta,
                                   b8_err *e) {
    if (!cJSON_IsObject(m))
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: header field \"__metadata__\" is %s, not an object", path,
                       b8_json_type_name(m));
    for (const cJSON *kv = m->child; kv; kv = kv->next) {
        if (!cJSON_IsString(kv) || !kv->valuestring)
            return b8_fail(e, BERT8_ERR_FORMAT,
                           "%s: \"__metadata__\" entry \"%.200s\" is %s, not a string", path,
                           kv->string ? kv->string : "", b8_json_type_name(kv));
        const char *key = kv->string ? kv->string : "";
        /* Duplicates inside one file are an error; across shards the first shard wins. */
        for (size_t i = 0; i < st->nmeta; i++) {
            if (strcmp(st->meta[i].key, key) != 0) continue;
            if (i >= first_meta)
                return b8_fail(e, BERT8_ERR_FORMAT,
                               "%s: \"__metadata__\" has the key \"%.200s\" twice", path, key);
            goto next;
        }
        bert8_status s = add_meta(st, key, kv->valuestring, e);
        if (s) return s;
    next:;
    }
    return BERT8_OK;
}

/* Fills t from one header entry; offsets are checked against the data area of data_len bytes
 * that starts at absolute offset data_start. */
static bert8_status parse_entry(const char *path, const cJSON *v, size_t data_start,
                                size_t data_len, b8_st_tensor *t, uint64_t *begin_out, b8_err *e) {
    const char *name = v->string ? v->string : "";
    if (!cJSON_IsObject(v))
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: tensor '%.200s': header entry is %s, not an object", path, name,
                       b8_json_type_name(v));
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(v, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(v, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(v, "data_offsets");
    if (!dt || !shape || !offs)
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: tensor '%.200s': header entry lacks field \"%s\"",
                       path, name,
                       !dt      ? "dtype"
                       : !shape ? "shape"
                                : "data_offsets");
    if (!cJSON_IsString(dt) || !dt->valuestring)
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: tensor '%.200s': field \"dtype\" is %s, not a string", path, name,
                       b8_json_type_name(dt));
    if (!b8_dtype_from_name(dt->valuestring, &t->dtype))
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: tensor '%.200s': unknown dtype \"%.40s\"",
                       path, name, dt->valuestring);
    if (!cJSON_IsArray(shape))
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: tensor '%.200s': field \"shape\" is %s, not an array", path, name,
                       b8_json_type_name(shape));
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > B8_ST_MAX_DIMS)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: tensor '%.200s': shape has %d dims, at most %d are supported", path,
                       name, ndim, B8_ST_MAX_DIMS);
    t->ndim = ndim;
    size_t numel = 1;
    bool overflow = false;
    int d = 0;
    for (const cJSON *x = shape->child; x; x = x->next, d++) {
        uint64_t dim;
        if (!json_uint(x, &dim)) {
            if (cJSON_IsNumber(x))
                return b8_fail(e, BERT8_ERR_FORMAT,
                               "%s: tensor '%.200s': shape dim %d (%g) is not a non-negative "
                               "integer",
                               path, name, d, x->valuedouble);
            return b8_fail(e, BERT8_ERR_FORMAT,
                           "%s: tensor '%.200s': shape dim %d is %s, not a non-negative integer",
                           path, name, d, b8_json_type_name(x));
        }
        t->shape[d] = (int64_t)dim;
        if (!b8_mul_ok(numel, (size_t)dim, &numel)) overflow = true;
    }
    size_t nbytes = 0;
    if (overflow || !b8_mul_ok(numel, b8_dtype_size(t->dtype), &nbytes)) {
        char sb[200];
        shape_str(t, sb, sizeof sb);
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: tensor '%.200s': shape %s of %s overflows the element/byte count", path,
                       name, sb, dt->valuestring);
    }
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2)
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: tensor '%.200s': field \"data_offsets\" is %s, not an array of two "
                       "integers",
                       path, name,
                       cJSON_IsArray(offs) ? "an array of another length" : b8_json_type_name(offs));
    uint64_t begin, end;
    if (!json_uint(offs->child, &begin) || !json_uint(offs->child->next, &end))
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: tensor '%.200s': \"data_offsets\" are not non-negative integers", path,
                       name);
    if (begin > end)
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: tensor '%.200s': data_offsets [%" PRIu64 ",%" PRIu64
                       "] begin after end",
                       path, name, begin, end);
    if (end > data_len)
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: tensor '%.200s': data_offsets [%" PRIu64 ",%" PRIu64
                       "] (file bytes %zu..%" PRIu64 ") out of range: the data area is %zu bytes "
                       "(file bytes %zu..%zu)",
                       path, name, begin, end, data_start + (size_t)begin, data_start + end,
                       data_len, data_start, data_start + data_len);
    if (end - begin != nbytes) {
        char sb[200];
        shape_str(t, sb, sizeof sb);
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: tensor '%.200s': size mismatch: shape %s of %s needs %zu bytes but "
                       "data_offsets [%" PRIu64 ",%" PRIu64 "] (file bytes %zu..%" PRIu64
                       ") span %" PRIu64 " bytes",
                       path, name, sb, dt->valuestring, nbytes, begin, end,
                       data_start + (size_t)begin, data_start + end, end - begin);
    }
    t->nbytes = nbytes;
    t->file_offset = data_start + (size_t)begin;
    *begin_out = begin;
    return BERT8_OK;
}

/* A scan of raw header bytes: an upper bound on the JSON values they can hold (each value
 * but the first follows a ',', ':', '[' or '{') and, in *members, the entries of the
 * top-level object (commas at depth 1, plus one). Strings are skipped, escapes included. */
static size_t header_counts(const uint8_t *h, size_t n, size_t *members) {
    size_t values = 1, commas = 0;
    int depth = 0;
    bool in_str = false, any = false;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = h[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = false;
            continue;
        }
        switch (c) {
        case '"':
            in_str = true;
            if (depth == 1) any = true;
            break;
        case '{':
        case '[':
            values++;
            depth++;
            break;
        case '}':
        case ']':
            depth--;
            break;
        case ',':
            values++;
            if (depth == 1) commas++;
            break;
        case ':':
            values++;
            break;
        default:
            break;
        }
    }
    *members = any ? commas + 1 : 0;
    return values;
}

typedef struct span {
    uint64_t begin, end;
    size_t idx; /* position in the header, to keep the order of equal offsets stable */
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Parses and validates the file image st->files[fi] and appends its tensors to st. On
 * failure the tensors it appended are removed again. */
static bert8_status parse_file(b8_st *st, size_t fi, b8_err *e) {
    const st_file *f = &st->files[fi];
    const char *path = f->path;
    const uint8_t *buf = f->base;
    size_t len = f->size;
    if (len < 8)
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: truncated file: %zu bytes, shorter than the 8-byte header length", path,
                       len);
    uint64_t hlen = read_u64_le(buf);
    if (hlen > len - 8)
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: header length %" PRIu64 " (bytes 0..7) runs past the end of the file: "
                       "the header would end at byte %s%" PRIu64 " but the file is %zu bytes",
                       path, hlen, hlen > UINT64_MAX - 8 ? "> " : "",
                       hlen > UINT64_MAX - 8 ? hlen : hlen + 8, len);
    if (hlen > B8_ST_MAX_HEADER)
        return b8_fail(e, BERT8_ERR_TOO_LARGE,
                       "%s: header length %" PRIu64 " (bytes 0..7) is over the %" PRIu64
                       "-byte limit",
                       path, hlen, B8_ST_MAX_HEADER);
    if (hlen < 2)
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: header length %" PRIu64 " is too short for a JSON object", path, hlen);
    const uint8_t *hdr = buf + 8;
    size_t hn = (size_t)hlen;
    /* cJSON stops at a NUL and does not check UTF-8; both make a header invalid JSON. */
    const uint8_t *nul = memchr(hdr, 0, hn);
    if (nul)
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: header is not valid JSON: NUL byte at file offset %zu", path,
                       (size_t)(nul - buf));
    size_t bad = b8_utf8_invalid_at(hdr, hn);
    if (bad < hn)
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: header is not valid JSON: invalid UTF-8 at file offset %zu", path,
                       bad + 8);
    /* Bound the parser's memory and the tensor table before parsing. */
    size_t members = 0, values = header_counts(hdr, hn, &members);
    if (values > B8_ST_MAX_HEADER_VALUES)
        return b8_fail(e, BERT8_ERR_TOO_LARGE,
                       "%s: header holds about %zu JSON values, over the limit of %zu", path,
                       values, B8_ST_MAX_HEADER_VALUES);
    if (members > B8_ST_MAX_TENSORS + 1 || st->n + members > B8_ST_MAX_TENSORS + 1)
        return b8_fail(e, BERT8_ERR_TOO_LARGE,
                       "%s: header lists %zu entries%s, over the limit of %zu tensors per "
                       "checkpoint",
                       path, members, st->n ? " (after the earlier shards' tensors)" : "",
                       B8_ST_MAX_TENSORS);
    /* A NUL-terminated, padded copy: cJSON may look a few bytes past the end of its input. */
    char *copy = malloc(hn + 64);
    if (!copy) return b8_fail(e, BERT8_ERR_NOMEM, "%s: out of memory for the header", path);
    memcpy(copy, hdr, hn);
    memset(copy + hn, 0, 64);
    const char *stop = NULL;
    cJSON *root = cJSON_ParseWithOpts(copy, &stop, 0);
    if (!root) {
        size_t at = stop ? (size_t)(stop - copy) : 0;
        if (at > hn) at = hn;
        free(copy);
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: header is not valid JSON (parse error near file offset %zu)", path,
                       at + 8);
    }
    size_t after = (size_t)(stop - copy);
    bert8_status nul_st = b8_json_refuse_nul(copy, hn, path, e); /* tensor names */
    if (nul_st) {
        free(copy);
        cJSON_Delete(root);
        return nul_st;
    }
    while (after < hn && (copy[after] == ' ' || copy[after] == '\t' || copy[after] == '\n' ||
                          copy[after] == '\r'))
        after++;
    free(copy);
    if (after < hn) {
        cJSON_Delete(root);
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: header is not valid JSON: unexpected bytes after the object at file "
                       "offset %zu",
                       path, after + 8);
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: header is %s, not a JSON object", path,
                       b8_json_type_name(root));
    }

    size_t data_start = 8 + hn, data_len = len - data_start;
    size_t first = st->n, first_meta = st->nmeta;
    bert8_status s = BERT8_OK;
    span *spans = NULL;
    size_t nsp = 0;
    int entries = cJSON_GetArraySize(root);
    if (entries > 0) {
        spans = malloc((size_t)entries * sizeof *spans);
        if (!spans) {
            s = b8_fail(e, BERT8_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
    }
    for (const cJSON *v = root->child; v; v = v->next) {
        if (v->string && strcmp(v->string, "__metadata__") == 0) {
            s = parse_metadata(st, path, v, first_meta, e);
            if (s) goto fail;
            continue;
        }
        b8_st_tensor t;
        memset(&t, 0, sizeof t);
        uint64_t begin = 0;
        s = parse_entry(path, v, data_start, data_len, &t, &begin, e);
        if (s) goto fail;
        t.data = buf + t.file_offset;
        t.file = f->path;
        if (!grow((void **)&st->tensors, &st->cap, st->n + 1, sizeof *st->tensors)) {
            s = b8_fail(e, BERT8_ERR_NOMEM, "%s: out of memory for the tensor table", path);
            goto fail;
        }
        t.name = strdup(v->string ? v->string : "");
        if (!t.name) {
            s = b8_fail(e, BERT8_ERR_NOMEM, "%s: out of memory for the tensor table", path);
            goto fail;
        }
        spans[nsp].begin = begin;
        spans[nsp].end = begin + t.nbytes;
        spans[nsp].idx = st->n;
        nsp++;
        st->tensors[st->n++] = t;
    }
    cJSON_Delete(root);
    root = NULL;

    /* Overlap check and reordering into data order in one pass over the sorted spans. */
    if (nsp > 1) qsort(spans, nsp, sizeof *spans, span_cmp);
    uint64_t reach = 0;   /* end of the furthest non-empty tensor so far */
    size_t reach_idx = 0; /* which tensor that is */
    for (size_t i = 0; i < nsp; i++) {
        if (spans[i].end == spans[i].begin) continue; /* empty tensors share no bytes */
        if (spans[i].begin < reach) {
            const b8_st_tensor *a = &st->tensors[reach_idx], *b = &st->tensors[spans[i].idx];
            s = b8_fail(e, BERT8_ERR_FORMAT,
                        "%s: tensors '%.200s' (file bytes %zu..%zu) and '%.200s' (file bytes "
                        "%zu..%zu) have overlapping data_offsets",
                        path, a->name, a->file_offset, a->file_offset + a->nbytes, b->name,
                        b->file_offset, b->file_offset + b->nbytes);
            goto fail;
        }
        reach = spans[i].end;
        reach_idx = spans[i].idx;
    }
    if (nsp > 0) {
        b8_st_tensor *sorted = malloc(nsp * sizeof *sorted);
        if (!sorted) {
            s = b8_fail(e, BERT8_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
        for (size_t i = 0; i < nsp; i++)
            sorted[i] = st->tensors[spans[i].idx];
        memcpy(st->tensors + first, sorted, nsp * sizeof *sorted);
        free(sorted);
    }
    for (size_t i = first; i < st->n; i++)
        st->data_bytes += st->tensors[i].nbytes;
    free(spans);
    return BERT8_OK;

fail:
    cJSON_Delete(root);
    free(spans);
    for (size_t i = first; i < st->n; i++)
        free((char *)st->tensors[i].name);
    st->n = first;
    return s;
}

static int by_name_cmp_ctx(const void *a, const void *b, void *ctx) {
    const b8_st_tensor *t = ctx;
    return strcmp(t[*(const size_t *)a].name, t[*(const size_t *)b].name);
}

/* Builds the name index and rejects a name that occurs twice (in one file or across shards). */
static bert8_status build_index(b8_st *st, b8_err *e) {
    free(st->by_name);
    st->by_name = NULL;
    if (st->n == 0) return BERT8_OK;
    st->by_name = malloc(st->n * sizeof *st->by_name);
    if (!st->by_name) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for the tensor index");
    for (size_t i = 0; i < st->n; i++)
        st->by_name[i] = i;
    qsort_r(st->by_name, st->n, sizeof *st->by_name, by_name_cmp_ctx, st->tensors);
    for (size_t i = 1; i < st->n; i++) {
        const b8_st_tensor *a = &st->tensors[st->by_name[i - 1]];
        const b8_st_tensor *b = &st->tensors[st->by_name[i]];
        if (strcmp(a->name, b->name) == 0) {
            if (a->file_offset > b->file_offset && a->file == b->file) {
                const b8_st_tensor *tmp = a;
                a = b;
                b = tmp;
            }
            return b8_fail(e, BERT8_ERR_FORMAT,
                           "duplicate tensor name '%.200s': in %s at file offset %zu and in %s at "
                           "file offset %zu",
                           a->name, a->file, a->file_offset, b->file, b->file_offset);
        }
    }
    return BERT8_OK;
}

/* ---- Opening --------------------------------------------------------------------------- */

static b8_st *st_new(b8_err *e) {
    b8_st *st = calloc(1, sizeof *st);
    if (!st) b8_fail(e, BERT8_ERR_NOMEM, "out of memory opening a safetensors checkpoint");
    return st;
}

/* Opens `path` into a new entry of st->files: files up to B8_ST_COPY_MAX bytes are read into
 * memory, larger ones are mapped read-only. A copy cannot fault if the file is truncated or
 * rewritten while the model is loaded; a mapping can (SIGBUS on a page past the new end), and
 * that is the price of not holding a second copy of a large checkpoint. */
static bert8_status map_file(b8_st *st, const char *path, b8_err *e) {
    if (!grow((void **)&st->files, &st->files_cap, st->nfiles + 1, sizeof *st->files))
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory opening %s", path);
    st_file *f = &st->files[st->nfiles];
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    if (!f->path) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory opening %s", path);
    st->nfiles++; /* from here on b8_st_close() releases the entry */
    size_t size = 0;
    int fd = b8_open_regular(path, &size, e);
    if (fd < 0) return e ? e->status : BERT8_ERR_IO;
    f->size = size;
    if (f->size < 8) {
        /* mmap of an empty file fails; the parser reports the truncation instead. */
        close(fd);
        static const uint8_t none[8];
        f->base = none;
        return BERT8_OK;
    }
    if (f->size <= B8_ST_COPY_MAX) {
        uint8_t *buf = b8_malloc_aligned(f->size);
        if (!buf) {
            close(fd);
            return b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s (%zu bytes)", path,
                           f->size);
        }
        size_t n = 0;
        while (n < f->size) {
            ssize_t got = pread(fd, buf + n, f->size - n, (off_t)n);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                int err = got < 0 ? errno : 0;
                close(fd);
                b8_free_aligned(buf);
                if (got == 0)
                    return b8_fail(e, BERT8_ERR_IO,
                                   "%s shrank while it was read: %zu bytes instead of %zu", path,
                                   n, f->size);
                return b8_fail(e, BERT8_ERR_IO, "error reading %s at byte offset %zu: %s", path,
                               n, strerror(err));
            }
            n += (size_t)got;
        }
        close(fd);
        f->base = buf;
        f->owned = true;
        return BERT8_OK;
    }
    void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (p == MAP_FAILED) return b8_fail(e, BERT8_ERR_IO, "cannot mmap %s: %s", path, strerror(err));
    f->base = p;
    f->mapped = true;
    return BERT8_OK;
}

bert8_status b8_st_open(const char *path, b8_st **out, b8_err *e) {
    if (!out) return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_open: out is NULL");
    *out = NULL;
    if (!path) return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_open: path is NULL");
    b8_st *st = st_new(e);
    if (!st) return BERT8_ERR_NOMEM;
    bert8_status s = map_file(st, path, e);
    if (!s) s = parse_file(st, 0, e);
    if (!s) s = build_index(st, e);
    if (s) {
        b8_st_close(st);
        return s;
    }
    *out = st;
    return BERT8_OK;
}

bert8_status b8_st_open_memory(const void *buf, size_t len, const char *name, b8_st **out,
                               b8_err *e) {
    if (!out) return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_open_memory: out is NULL");
    *out = NULL;
    if (!buf && len) return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_open_memory: buffer is NULL");
    if (!name) name = "<memory>";
    b8_st *st = st_new(e);
    if (!st) return BERT8_ERR_NOMEM;
    bert8_status s = BERT8_OK;
    if (!grow((void **)&st->files, &st->files_cap, 1, sizeof *st->files) ||
        !(st->files[0].path = strdup(name))) {
        s = b8_fail(e, BERT8_ERR_NOMEM, "out of memory opening %s", name);
    } else {
        st->nfiles = 1;
        st->files[0].base = buf;
        st->files[0].size = len;
        st->files[0].mapped = false;
        st->files[0].owned = false;
        s = parse_file(st, 0, e);
        if (!s) s = build_index(st, e);
    }
    if (s) {
        b8_st_close(st);
        return s;
    }
    *out = st;
    return BERT8_OK;
}

static char *join_path(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* A shard name must stay inside the checkpoint folder: relative and without ".." parts.
 * (Symlinks are followed on purpose: a Hugging Face cache snapshot links its files into
 * ../../blobs.) */
static bool shard_name_safe(const char *s) {
    if (!s[0] || s[0] == '/') return false;
    const char *p = s;
    while (*p) {
        const char *q = strchr(p, '/');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') return false;
        if (!q) break;
        p = q + 1;
    }
    return true;
}

static int str_ptr_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bert8_status open_index(const char *dir, const char *index_path, b8_st **out, b8_err *e) {
    size_t len = 0;
    char *text = b8_read_file_max(index_path, B8_ST_MAX_INDEX_BYTES, &len, e);
    if (!text) return e ? e->status : BERT8_ERR_IO;
    const char *stop = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &stop, 1);
    bert8_status s = BERT8_OK;
    b8_st *st = NULL;
    const char **shards = NULL;
    if (!root) {
        s = b8_fail(e, BERT8_ERR_FORMAT, "%s: not valid JSON (parse error near byte %zu)",
                    index_path, stop ? (size_t)(stop - text) : (size_t)0);
        goto done;
    }
    if ((s = b8_json_refuse_nul(text, len, index_path, e))) goto done; /* tensor and shard names */
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(wm)) {
        s = b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"weight_map\" is %s, not an object",
                    index_path, cJSON_IsObject(root) ? b8_json_type_name(wm) : "missing");
        goto done;
    }
    int nmap = cJSON_GetArraySize(wm);
    if (nmap <= 0) {
        s = b8_fail(e, BERT8_ERR_FORMAT, "%s: \"weight_map\" is empty", index_path);
        goto done;
    }
    shards = malloc((size_t)nmap * sizeof *shards);
    if (!shards) {
        s = b8_fail(e, BERT8_ERR_NOMEM, "%s: out of memory", index_path);
        goto done;
    }
    size_t ns = 0;
    for (const cJSON *v = wm->child; v; v = v->next) {
        if (!cJSON_IsString(v) || !v->valuestring) {
            s = b8_fail(e, BERT8_ERR_FORMAT,
                        "%s: weight_map entry for tensor '%.200s' is %s, not a file name",
                        index_path, v->string ? v->string : "", b8_json_type_name(v));
            goto done;
        }
        if (!shard_name_safe(v->valuestring)) {
            s = b8_fail(e, BERT8_ERR_FORMAT,
                        "%s: weight_map shard path '%.200s' (for tensor '%.200s') escapes the "
                        "checkpoint folder",
                        index_path, v->valuestring, v->string ? v->string : "");
            goto done;
        }
        shards[ns++] = v->valuestring;
    }
    qsort(shards, ns, sizeof *shards, str_ptr_cmp);
    size_t u = 0;
    for (size_t i = 0; i < ns; i++)
        if (u == 0 || strcmp(shards[u - 1], shards[i]) != 0) shards[u++] = shards[i];
    ns = u;

    st = st_new(e);
    if (!st) {
        s = BERT8_ERR_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < ns; i++) {
        char *sp = join_path(dir, shards[i]);
        if (!sp) {
            s = b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
            goto done;
        }
        s = map_file(st, sp, e);
        free(sp);
        if (s) {
            b8_wrap(e, "%s: weight_map shard '%.200s'", index_path, shards[i]);
            goto done;
        }
        s = parse_file(st, st->nfiles - 1, e);
        if (s) goto done;
    }
    s = build_index(st, e);
    if (s) goto done;
    for (const cJSON *v = wm->child; v; v = v->next) {
        const b8_st_tensor *t = b8_st_find(st, v->string ? v->string : "");
        const char *want = v->valuestring;
        if (!t) {
            s = b8_fail(e, BERT8_ERR_MISSING,
                        "%s: tensor '%.200s' is listed for shard '%.200s' but absent from it",
                        index_path, v->string ? v->string : "", want);
            goto done;
        }
        /* t->file is dir + "/" + its shard name. */
        size_t dl = strlen(dir);
        if (strcmp(t->file + dl + 1, want) != 0) {
            s = b8_fail(e, BERT8_ERR_MISSING,
                        "%s: tensor '%.200s' is listed for shard '%.200s' but absent from it "
                        "(found in %s)",
                        index_path, v->string ? v->string : "", want, t->file);
            goto done;
        }
    }
done:
    free(shards);
    cJSON_Delete(root);
    free(text);
    if (s) {
        b8_st_close(st);
        return s;
    }
    *out = st;
    return BERT8_OK;
}

bert8_status b8_st_open_dir(const char *dir, b8_st **out, b8_err *e) {
    if (!out) return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_open_dir: out is NULL");
    *out = NULL;
    if (!dir) return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_open_dir: dir is NULL");
    char *single = join_path(dir, "model.safetensors");
    char *index = join_path(dir, "model.safetensors.index.json");
    bert8_status s;
    struct stat sb;
    if (!single || !index) {
        s = b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    } else if (stat(single, &sb) == 0) {
        /* Like transformers: a single file wins over an index next to it. */
        s = b8_st_open(single, out, e);
    } else if (stat(index, &sb) == 0) {
        s = open_index(dir, index, out, e);
    } else {
        s = b8_fail(e, BERT8_ERR_IO,
                    "%s: no model.safetensors or model.safetensors.index.json in the folder", dir);
    }
    free(single);
    free(index);
    return s;
}

/* ---- Conversions ----------------------------------------------------------------------- */

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float b8_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0x1F) return bits_f32(sign | 0x7F800000u | (man << 13)); /* inf, NaN payload */
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24 is exact in float */
        float v = ldexpf((float)man, -24);
        return bits_f32(sign | f32_bits(v));
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

float b8_bf16_to_f32(uint16_t b) {
    return bits_f32((uint32_t)b << 16);
}

uint16_t b8_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) /* inf stays inf; NaN stays a (quiet) NaN with the top payload bits */
        return sign | 0x7C00u | (ax > 0x7F800000u ? (0x200u | ((ax >> 13) & 0x3FFu)) : 0);
    if (ax >= 0x477FF000u) return sign | 0x7C00u; /* 65520 and up round to inf */
    if (ax < 0x38800000u) {
        /* below 2^-14: a half subnormal. Scaling by 2^24 is exact, rintf rounds half to even,
         * and 1024 is the bit pattern of the smallest normal, so the carry is right too. */
        float a = bits_f32(ax) * 16777216.0f;
        return sign | (uint16_t)rintf(a);
    }
    uint32_t h = ((((ax >> 23) - 112u)) << 10) | ((ax >> 13) & 0x3FFu);
    uint32_t rem = ax & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry bumps the exponent */
    return sign | (uint16_t)h;
}

uint16_t b8_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

bert8_status b8_st_to_f32(const b8_st_tensor *t, size_t count, float **out, b8_err *e) {
    if (!out) return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_to_f32: out is NULL");
    *out = NULL;
    if (!t) return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_to_f32: tensor is NULL");
    if (t->dtype != B8_F32 && t->dtype != B8_F16 && t->dtype != B8_BF16 && t->dtype != B8_F64)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: tensor '%.200s' has dtype %s, expected a float dtype "
                       "(F32/F16/BF16/F64)",
                       t->file ? t->file : "?", t->name, b8_dtype_name(t->dtype));
    size_t es = b8_dtype_size(t->dtype);
    size_t n = t->nbytes / es;
    if (n != count || n * es != t->nbytes) {
        char sb[200];
        shape_str(t, sb, sizeof sb);
        return b8_fail(e, BERT8_ERR_SHAPE,
                       "%s: tensor '%.200s' has %zu elements (shape %s), expected %zu",
                       t->file ? t->file : "?", t->name, n, sb, count);
    }
    size_t bytes;
    if (!b8_mul_ok(n, sizeof(float), &bytes))
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "tensor '%.200s' is too large", t->name);
    float *dst = b8_malloc_aligned(bytes);
    if (!dst)
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory converting tensor '%.200s' (%zu bytes)",
                       t->name, bytes);
    const uint8_t *src = t->data;
    switch (t->dtype) {
    case B8_F32:
        if (n) memcpy(dst, src, bytes);
        break;
    case B8_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = b8_f16_to_f32(h);
        }
        break;
    case B8_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = b8_bf16_to_f32(h);
        }
        break;
    default: /* B8_F64 */
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, src + 8 * i, 8);
            dst[i] = (float)d;
        }
        break;
    }
    *out = dst;
    return BERT8_OK;
}

/* ---- Writer ---------------------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    size_t need;
    if (!b8_add_ok(b->n, n + 1, &need) || !grow((void **)&b->p, &b->cap, need, 1)) {
        b->oom = true;
        return;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) {
    sb_put(b, s, strlen(s));
}

static void sb_u64(sbuf *b, uint64_t v) {
    char tmp[24];
    int k = snprintf(tmp, sizeof tmp, "%" PRIu64, v);
    sb_put(b, tmp, (size_t)k);
}

/* A JSON string escaped the way serde_json writes it (the reference serializer): short
 * escapes for \b \t \n \f \r, \u00xx (lowercase hex) for other control bytes, raw UTF-8. */
static void sb_json_str(sbuf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    sb_put(b, "\"", 1);
    const char *run = s;
    for (const char *p = s;; p++) {
        unsigned char c = (unsigned char)*p;
        if (c != 0 && c >= 0x20 && c != '"' && c != '\\') continue;
        sb_put(b, run, (size_t)(p - run));
        if (c == 0) break;
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t k = 2;
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\t':
            esc[1] = 't';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        default:
            esc[1] = 'u', esc[2] = '0', esc[3] = '0', esc[4] = hex[c >> 4], esc[5] = hex[c & 15];
            k = 6;
        }
        sb_put(b, esc, k);
        run = p + 1;
    }
    sb_put(b, "\"", 1);
}

typedef struct witem {
    const b8_st_write_item *it;
    size_t nbytes;
} witem;

static int witem_cmp(const void *a, const void *b) {
    const b8_st_write_item *x = ((const witem *)a)->it, *y = ((const witem *)b)->it;
    int rx = DTYPES[x->dtype].ref_rank, ry = DTYPES[y->dtype].ref_rank;
    if (rx != ry) return ry - rx;
    return strcmp(x->name, y->name);
}

bert8_status b8_st_write(const char *path, const b8_st_write_item *items, size_t n,
                         const char *const *meta_kv, b8_err *e) {
    if (!path) return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_write: path is NULL");
    if (n && !items) return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_write: items is NULL");
    size_t nmeta = 0;
    if (meta_kv) {
        while (meta_kv[2 * nmeta]) {
            if (!meta_kv[2 * nmeta + 1])
                return b8_fail(e, BERT8_ERR_INVALID_ARG,
                               "b8_st_write %s: metadata key \"%.200s\" has no value", path,
                               meta_kv[2 * nmeta]);
            for (size_t j = 0; j < nmeta; j++)
                if (strcmp(meta_kv[2 * j], meta_kv[2 * nmeta]) == 0)
                    return b8_fail(e, BERT8_ERR_INVALID_ARG,
                                   "b8_st_write %s: metadata key \"%.200s\" given twice", path,
                                   meta_kv[2 * nmeta]);
            nmeta++;
        }
    }
    witem *w = NULL;
    if (n) {
        size_t wb;
        if (!b8_mul_ok(n, sizeof *w, &wb) || !(w = malloc(wb)))
            return b8_fail(e, BERT8_ERR_NOMEM, "b8_st_write %s: out of memory", path);
    }
    bert8_status s = BERT8_OK;
    sbuf h = {0};
    char *tmp = NULL;
    FILE *f = NULL;
    for (size_t i = 0; i < n; i++) {
        const b8_st_write_item *it = &items[i];
        const char *nm = it->name ? it->name : "(null)";
        if (!it->name || (unsigned)it->dtype >= B8_DTYPE_COUNT || it->ndim < 0 ||
            it->ndim > B8_ST_MAX_DIMS) {
            s = b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_write %s: item %zu ('%.200s'): %s", path,
                        i, nm,
                        !it->name                               ? "name is NULL"
                        : (unsigned)it->dtype >= B8_DTYPE_COUNT ? "dtype out of range"
                                                                : "ndim out of range 0..8");
            goto done;
        }
        size_t cnt = 1;
        for (int d = 0; d < it->ndim; d++) {
            if (it->shape[d] < 0 || !b8_mul_ok(cnt, (size_t)it->shape[d], &cnt)) {
                s = b8_fail(e, BERT8_ERR_INVALID_ARG,
                            "b8_st_write %s: tensor '%.200s': shape dim %d (%" PRId64
                            ") is negative or overflows",
                            path, nm, d, it->shape[d]);
                goto done;
            }
        }
        if (!b8_mul_ok(cnt, DTYPES[it->dtype].size, &w[i].nbytes)) {
            s = b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_write %s: tensor '%.200s' is too large",
                        path, nm);
            goto done;
        }
        if (w[i].nbytes && !it->data) {
            s = b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_write %s: tensor '%.200s' has no data",
                        path, nm);
            goto done;
        }
        w[i].it = it;
    }
    if (n) qsort(w, n, sizeof *w, witem_cmp);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(w[i - 1].it->name, w[i].it->name) == 0) {
            s = b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_write %s: duplicate tensor name '%.200s'",
                        path, w[i].it->name);
            goto done;
        }
    }

    sb_put(&h, "{", 1);
    if (meta_kv) {
        sb_str(&h, "\"__metadata__\":{");
        for (size_t j = 0; j < nmeta; j++) {
            if (j) sb_put(&h, ",", 1);
            sb_json_str(&h, meta_kv[2 * j]);
            sb_put(&h, ":", 1);
            sb_json_str(&h, meta_kv[2 * j + 1]);
        }
        sb_put(&h, "}", 1);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const b8_st_write_item *it = w[i].it;
        if (i || meta_kv) sb_put(&h, ",", 1);
        sb_json_str(&h, it->name);
        sb_str(&h, ":{\"dtype\":\"");
        sb_str(&h, DTYPES[it->dtype].name);
        sb_str(&h, "\",\"shape\":[");
        for (int d = 0; d < it->ndim; d++) {
            if (d) sb_put(&h, ",", 1);
            sb_u64(&h, (uint64_t)it->shape[d]);
        }
        sb_str(&h, "],\"data_offsets\":[");
        sb_u64(&h, off);
        sb_put(&h, ",", 1);
        if (off > UINT64_MAX - w[i].nbytes) {
            s = b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_st_write %s: total size overflows", path);
            goto done;
        }
        off += w[i].nbytes;
        sb_u64(&h, off);
        sb_str(&h, "]}");
    }
    sb_put(&h, "}", 1);
    while (!h.oom && h.n % 8)
        sb_put(&h, " ", 1);
    if (h.oom) {
        s = b8_fail(e, BERT8_ERR_NOMEM, "b8_st_write %s: out of memory for the header", path);
        goto done;
    }

    tmp = malloc(strlen(path) + sizeof ".partial");
    if (!tmp) {
        s = b8_fail(e, BERT8_ERR_NOMEM, "b8_st_write %s: out of memory", path);
        goto done;
    }
    strcpy(tmp, path);
    strcat(tmp, ".partial");
    f = fopen(tmp, "wb");
    if (!f) {
        s = b8_fail(e, BERT8_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        goto done;
    }
    uint8_t lenb[8];
    for (int k = 0; k < 8; k++)
        lenb[k] = (uint8_t)((uint64_t)h.n >> (8 * k));
    bool ok = fwrite(lenb, 1, 8, f) == 8 && fwrite(h.p, 1, h.n, f) == h.n;
    for (size_t i = 0; ok && i < n; i++)
        if (w[i].nbytes) ok = fwrite(w[i].it->data, 1, w[i].nbytes, f) == w[i].nbytes;
    int err = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    f = NULL;
    if (!ok) {
        remove(tmp);
        s = b8_fail(e, BERT8_ERR_IO, "error writing %s: %s", tmp, strerror(err));
        goto done;
    }
    if (rename(tmp, path) != 0) {
        err = errno;
        remove(tmp);
        s = b8_fail(e, BERT8_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(err));
        goto done;
    }
done:
    free(tmp);
    free(h.p);
    free(w);
    return s;
}

/* ---- Resident memory ------------------------------------------------------------------------ */

/* The mapped file that holds t, or NULL (copied into memory, or not ours). */
static const st_file *mapping_of(const b8_st *st, const b8_st_tensor *t) {
    if (!st || !t || !t->nbytes) return NULL;
    const uint8_t *p = t->data;
    for (size_t i = 0; i < st->nfiles; i++) {
        const st_file *f = &st->files[i];
        const uint8_t *base = (const uint8_t *)f->base;
        if (f->mapped && p >= base && p + t->nbytes <= base + f->size) return f;
    }
    return NULL;
}

void b8_st_release(const b8_st *st, const b8_st_tensor *t) {
    if (!mapping_of(st, t)) return;
    /* whole pages inside the tensor only: a neighbour may still be in use */
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), p = (uintptr_t)t->data;
    const uintptr_t a = (p + page - 1) & ~(page - 1), b = (p + t->nbytes) & ~(page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

void b8_st_advise_random(const b8_st *st, const b8_st_tensor *t) {
    if (!mapping_of(st, t)) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), p = (uintptr_t)t->data;
    const uintptr_t a = p & ~(page - 1), b = (p + t->nbytes + page - 1) & ~(page - 1);
    madvise((void *)a, b - a, MADV_RANDOM);
}
