/* tok_types.h: the types the tokenizer's source files share and nobody else sees: the piece
 * trie's units, code point buffers, token lists and the per-call scratch, and the tokenizer
 * object. Types only: each source file declares its functions in its own header, so that
 * including this one makes no file depend on another's code. */
#ifndef BERT8_TOK_TYPES_H
#define BERT8_TOK_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

/* ---- Piece trie: byte-wise trie over vocabulary strings ------------------------------ */

/* A double array built once from the sorted keys: the children of a node sit at base + byte
 * and each unit also carries the node's value and score, so one step of a walk touches one
 * cache line. Unit 0 is the root; child 0 means "no child". */
typedef struct b8_da_unit {
    int32_t base;  /* children of this node sit at base + byte */
    int32_t check; /* index of the parent; -1 for a free unit */
    int32_t value; /* B8_PV_* flags | id, or -1 */
    float score;   /* Unigram piece score */
} b8_da_unit;

#define B8_PV_UNUSED (1 << 30) /* a piece the Viterbi must skip */
#define B8_PV_USER (1 << 29)   /* a user-defined piece */
#define B8_PV_ID ((1 << 29) - 1)

typedef struct b8_ptrie {
    b8_da_unit *da;
    uint32_t da_n;
} b8_ptrie;

typedef struct b8_ptrie_key {
    const char *s;
    uint32_t len;
    int32_t value;  /* an id below 2^29 */
    uint32_t order; /* filled by the build: position in the input */
} b8_ptrie_key;

#define B8_PTRIE_NONE UINT32_MAX

/* ---- Code points --------------------------------------------------------------------- */

/* Code points with their origin span [start, end) in the input, for offset tracking. */
typedef struct b8_ucps {
    uint32_t *cp;
    int32_t *os, *oe;
    size_t n, cap;
} b8_ucps;

/* Work buffers of b8_uni_nfc, kept across calls. */
typedef struct b8_nfc_work {
    int32_t *g, *u, *m;
    size_t gc, uc, mc;
} b8_nfc_work;

/* ---- Token lists and scratch --------------------------------------------------------- */

/* The tokens of one sequence before the template is applied. */
typedef struct b8_tokseq {
    int64_t n, cap;
    int32_t *id, *os, *oe, *word;
    /* Only for b8_tokenizer_tokenize: each token's string (see b8_tok_pieces). */
    bool want_strings;
    char *str;
    int64_t str_n, str_cap;
    int64_t *str_off; /* [cap + 1] */
} b8_tokseq;

/* Per-call scratch reused across calls through the result structs. */
typedef struct b8_tok_scratch {
    b8_ucps word, tmp;  /* WordPiece: the current word and NFC/NFD scratch */
    b8_nfc_work nfc;    /* WordPiece: NFC work buffers */
    uint8_t *nb;        /* normalized bytes */
    int32_t *nos, *noe; /* origin span of each normalized byte */
    size_t nb_cap;
    void *lattice; /* Unigram Viterbi: one entry per normalized byte + 1 */
    size_t lattice_cap;
    b8_tokseq *seqs; /* encode: 2 per input */
    int64_t nseqs;
    void *plan; /* encode: row plan */
    size_t plan_cap;
    void *bpe_sym, *bpe_heap; /* BPE: the symbols of one word and its merge queue */
    size_t bpe_cap;
    void *bpe_cache; /* BPE: words already merged (bpe.c) */
} b8_tok_scratch;

/* ---- The tokenizer ------------------------------------------------------------------- */

/* One merge of a BPE model: the pair (left, right) becomes new_id; lower rank merges first. */
typedef struct b8_bpe_merge {
    int32_t left, right; /* left < 0: empty slot */
    int32_t rank, new_id;
} b8_bpe_merge;

enum { B8_BPE_NORM_NFC = 1, B8_BPE_NORM_LOWER = 2, B8_BPE_MAX_NORM = 8 };

typedef struct b8_added_token {
    char *content;
    size_t len;
    int32_t id;
    bool lstrip, rstrip; /* eat whitespace on that side of the match */
    bool single_word;    /* match only between non-word characters */
    bool special;
    /* also matches text that lower-cases to it: the do_lower_case pre-pass of
     * PreTrainedTokenizer.tokenize runs before the split on added tokens */
    bool fold;
    /* BPE (`tokenizers` semantics): matched on the normalized text in a second pass; false:
     * on the raw text in the first */
    bool normalized;
    /* BPE with a Lowercase normalizer: the content lower-cased, as `tokenizers` normalizes a
     * normalized token before matching it (fold then matches against this); else NULL */
    char *folded;
    size_t folded_len;
} b8_added_token;

/* An added token's id and its index in b8_tokenizer.added (b8_tokenizer.added_by_id). */
typedef struct b8_added_ref {
    int32_t id, idx;
} b8_added_ref;

enum { B8_TMPL_SPECIAL = 0, B8_TMPL_SEQ_A = 1, B8_TMPL_SEQ_B = 2, B8_TMPL_MAX = 8 };
typedef struct b8_tmpl_item {
    int8_t kind;
    int8_t type_id;
    int32_t id; /* B8_TMPL_SPECIAL only */
} b8_tmpl_item;

/* SentencePiece piece types (ModelProto.SentencePiece.Type). */
enum {
    B8_SP_NORMAL = 1,
    B8_SP_UNKNOWN = 2,
    B8_SP_CONTROL = 3,
    B8_SP_USER = 4,
    B8_SP_UNUSED = 5,
    B8_SP_BYTE = 6
};

typedef struct b8_ascii_norm {
    uint8_t simple; /* 1: this byte alone decides its normalization */
    uint8_t len;    /* bytes of the replacement */
    uint32_t off;   /* replacement in the charsmap strings, or identity when simple == 2 */
} b8_ascii_norm;

struct b8_tokenizer {
    b8_tok_kind kind;
    int64_t vocab_size;
    int64_t model_max_length;
    bool clean_up; /* tokenizer_config.json's clean_up_tokenization_spaces (absent: false, as transformers) */
    char *tok_blob;   /* id -> token: NUL-terminated strings */
    int64_t *tok_off; /* [vocab_size + 1] */
    /* room in tok_blob (bytes), tok_off and added, grown by half again each time: added
     * tokens append one at a time, and a copy per token was quadratic */
    size_t blob_cap, off_cap, added_cap, ug_cap;
    b8_ptrie trie;    /* token -> id (Unigram: pieces the Viterbi may use) */
    int32_t special[B8_SPECIAL_COUNT];

    b8_added_token *added; /* matched verbatim before the model, longest first */
    int n_added;
    uint8_t added_first[256]; /* 1 when some added token starts with that byte */
    uint64_t added_lens;      /* bit k: some special token string is k bytes long (k < 64) */
    /* their lookups (added_index.c): contents hashed (open addressing, -1 empty), a trie per
     * matching pass (BPE: [normalized]; else [0]) of contents and of lower-cased forms (fold),
     * and the tokens ordered by id */
    int32_t *added_slot;
    uint32_t added_slot_mask;
    b8_ptrie added_exact[2], added_fold[2];
    b8_added_ref *added_by_id;

    b8_tmpl_item tmpl_single[B8_TMPL_MAX], tmpl_pair[B8_TMPL_MAX];
    int n_single, n_pair;

    struct {
        bool lowercase, strip_accents, chinese, clean_text;
        int max_chars;      /* max_input_chars_per_word (100) */
        uint32_t cont_node; /* trie node of the continuing prefix ("##"), or NONE */
        int32_t unk_id;
        char *unk_token;
        char *prefix; /* continuing_subword_prefix; NULL means "##" */
        /* HF's never_split: some special token strings are kept whole inside words */
        int n_never;
    } wp;

    struct {
        float *score;  /* [vocab_size] */
        uint8_t *type; /* [vocab_size] B8_SP_* (0 = not a piece) */
        float min_score, max_score;
        int32_t unk_id;     /* final id of <unk> */
        uint8_t *charsmap;  /* owned copy of the precompiled charsmap */
        const uint32_t *da; /* double-array units (inside charsmap) */
        size_t da_units;
        const char *norm; /* replacement strings (inside charsmap) */
        size_t norm_len;
        bool add_dummy_prefix, remove_extra_ws, escape_ws;
        b8_ascii_norm ascii[128];
        b8_ptrie user; /* user-defined symbols, copied through the normalizer */
        bool has_user;
        bool fairseq;     /* ids follow XLMRobertaTokenizer's fairseq mapping */
        int64_t spm_size; /* pieces in the sentencepiece model (fairseq mode) */
        char **reserved;  /* control/unknown piece strings and their ids (PieceToId) */
        int32_t *reserved_id;
        int n_reserved;
    } ug;

    struct {
        b8_bpe_merge *merges; /* open addressing on (left, right) */
        uint32_t merge_mask;  /* slots - 1 (a power of two) */
        int64_t n_merges;
        /* id of each byte's GPT-2 alphabet character, first in a word / later (with the
         * continuing_subword_prefix) / last (with end_of_word_suffix) / both; -1 absent */
        int32_t byte_id[4][256];
        int32_t unk_id; /* -1: characters missing from the vocabulary are dropped */
        bool fuse_unk, ignore_merges;
        bool add_prefix_space, use_regex;
        bool trim_offsets, trim_prefix_space; /* post-processor offset trimming */
        uint8_t norm[B8_BPE_MAX_NORM];        /* B8_BPE_NORM_* in order */
        int n_norm;
        uint64_t tag; /* tells this load apart from any other (the scratch's word cache) */
    } bpe;
};

#endif
