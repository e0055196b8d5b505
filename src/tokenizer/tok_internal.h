/* tok_internal.h: what the tokenizer's source files share and nobody else sees: the piece
 * trie, Unicode helpers, the tokenizer object, and the per-call scratch. */
#ifndef BERT8_TOK_INTERNAL_H
#define BERT8_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/utf8.h"
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

/* Builds t from n keys (the array is reordered; its strings must not be used after). With unique, a
 * repeated key fails with BERT8_ERR_FORMAT and *dup gets the input position of the second copy;
 * otherwise the last copy wins, as a dict assignment does. Unigram passes per-id scores and piece
 * types so the units carry them (B8_PV_* flags); WordPiece passes NULLs. */
bert8_status b8_ptrie_build(b8_ptrie *t, b8_ptrie_key *keys, size_t n, const float *score,
                            const uint8_t *type, bool unique, size_t *dup, b8_err *e);
void b8_ptrie_free(b8_ptrie *t);
/* Walks key from node `from`; B8_PTRIE_NONE when the path does not exist. */
uint32_t b8_ptrie_walk(const b8_ptrie *t, uint32_t from, const char *key, size_t len);
/* The id stored for key (flags removed), -1 when absent. */
int32_t b8_ptrie_get(const b8_ptrie *t, const char *key, size_t len);

static inline uint32_t b8_ptrie_child(const b8_ptrie *t, uint32_t node, uint8_t byte) {
    uint32_t i = (uint32_t)t->da[node].base + byte;
    return (i < t->da_n && t->da[i].check == (int32_t)node) ? i : 0;
}

/* The raw value of a node (flags included), -1 when no key ends there. */
static inline int32_t b8_ptrie_value(const b8_ptrie *t, uint32_t node) {
    return t->da[node].value;
}

/* ---- UTF-8 and Unicode --------------------------------------------------------------- */

/* Unicode general category as utf8proc numbers it (UTF8PROC_CATEGORY_*), except that code
 * points new in Unicode 15.0 read as unassigned (Cn), as Python 3.11's unicodedata says. */
int b8_uni_category(uint32_t cp);
/* A character of regex \w as HF tokenizers' single_word check reads it. */
bool b8_uni_is_word(uint32_t cp);
/* Python's str.isspace(). */
bool b8_uni_isspace(uint32_t cp);
/* Python's str.lower() of one character: 1 or 2 code points (U+0130 -> i U+0307). */
int b8_uni_lower(uint32_t cp, uint32_t out[2]);

/* Code points with their origin span [start, end) in the input, for offset tracking. */
typedef struct b8_ucps {
    uint32_t *cp;
    int32_t *os, *oe;
    size_t n, cap;
} b8_ucps;

bool b8_ucps_reserve(b8_ucps *u, size_t n);
void b8_ucps_free(b8_ucps *u);
static inline bool b8_ucps_push(b8_ucps *u, uint32_t cp, int32_t os, int32_t oe) {
    if (u->n == u->cap && !b8_ucps_reserve(u, u->n + 1)) return false;
    u->cp[u->n] = cp;
    u->os[u->n] = os;
    u->oe[u->n] = oe;
    u->n++;
    return true;
}

/* Work buffers of b8_uni_nfc, kept across calls. */
typedef struct b8_nfc_work {
    int32_t *g, *u, *m;
    size_t gc, uc, mc;
} b8_nfc_work;

/* NFC of w in place, keeping origins: characters that compose share the span of what they
 * came from. tmp and work are scratch. Returns false on allocation failure. */
bool b8_uni_nfc(b8_ucps *w, b8_ucps *tmp, b8_nfc_work *work);
/* NFD of w with Mn (non-spacing marks) dropped, i.e. BERT's _run_strip_accents. */
bool b8_uni_strip_accents(b8_ucps *w, b8_ucps *tmp);

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

bool b8_tokseq_reserve(b8_tokseq *s, int64_t n);
void b8_tokseq_free(b8_tokseq *s);
/* Appends a token; str (len bytes) is recorded when want_strings. */
bool b8_tokseq_push(b8_tokseq *s, int32_t id, int32_t os, int32_t oe, int32_t word, const char *str,
                    size_t len);

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

bool b8_scratch_bytes(b8_tok_scratch *s, size_t n); /* nb/nos/noe hold at least n */
void b8_scratch_free(b8_tok_scratch *s);

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

/* Model stages: tokenize text[s, e) (no added tokens inside) and append to seq; *word is
 * the next word index and is advanced. */
bert8_status b8_wp_tokenize(const b8_tokenizer *t, const uint8_t *text, int32_t s, int32_t e,
                            b8_tokseq *seq, b8_tok_scratch *sc, int32_t *word, b8_err *err);
bert8_status b8_bpe_tokenize(const b8_tokenizer *t, const uint8_t *text, int32_t s, int32_t e,
                             b8_tokseq *seq, b8_tok_scratch *sc, int32_t *word, b8_err *err);
/* The post-processor's offset trimming of one token (str, len bytes: its string), first in its
 * sequence or not; offsets move by characters of text. */
void b8_bpe_trim_offsets(const b8_tokenizer *t, const uint8_t *text, const char *str, size_t len,
                         bool first, int32_t *os, int32_t *oe);
/* GPT-2 byte alphabet: the character (UTF-8, 1 or 2 bytes) a byte is written as. */
int b8_bpe_byte_char(uint8_t byte, uint8_t out[2]);
/* The byte a GPT-2 alphabet character stands for, -1 when cp is not one. */
int b8_bpe_char_byte(uint32_t cp);
/* Reads model (a cJSON object: vocab, merges, ...) into t's BPE tables; path for messages.
 * Declared with void * so that this header stays free of cJSON. */
bert8_status b8_bpe_parse_model(b8_tokenizer *t, const void *model, const char *path, b8_err *e);
/* The rest of a BPE tokenizer.json (root, a cJSON object): normalizer, ByteLevel
 * pre-tokenizer, decoder. */
bert8_status b8_bpe_parse_pipeline(b8_tokenizer *t, const void *root, const char *path, b8_err *e);
bert8_status b8_ug_tokenize(const b8_tokenizer *t, const uint8_t *text, int32_t s, int32_t e,
                            b8_tokseq *seq, b8_tok_scratch *sc, int32_t *word, b8_err *err);

/* Loading pieces shared by the loader files (tok_load.c, tok_json.c, spm_model.c). */
b8_tokenizer *b8_tok_alloc(b8_tok_kind kind);
/* Sets the id -> token table from n strings (lens given); refuses more than B8_TOK_MAX_VOCAB
 * tokens or one longer than B8_TOK_MAX_TOKEN_BYTES (what names the source in messages). */
bert8_status b8_tok_set_tokens(b8_tokenizer *t, const char *const *toks, const size_t *lens,
                               int64_t n, b8_err *e);
/* Adds (or updates) a verbatim-matched token; id < 0 looks it up / appends it. An explicit id
 * at or past the vocabulary size grows it to id + 1 (padding with "" tokens), within
 * B8_TOK_MAX_ID_GAP and B8_TOK_MAX_VOCAB. */
bert8_status b8_tok_add_token(b8_tokenizer *t, const char *content, size_t len, int32_t id,
                              bool lstrip, bool rstrip, bool single_word, bool special, b8_err *e);
/* Appends a new token to the vocabulary (for added tokens missing from it); returns its id. */
int32_t b8_tok_append_token(b8_tokenizer *t, const char *s, size_t len, b8_err *e);
/* The added tokens' lookups (added_index.c). b8_added_find gives the index in t->added of the
 * token whose content is s (len bytes), or -1; b8_added_index_add files t->added[idx] after it
 * is appended; b8_added_index_build makes every lookup anew once the tokens are final and
 * sorted (b8_tok_finish). */
int b8_added_find(const b8_tokenizer *t, const char *s, size_t len);
bert8_status b8_added_index_add(b8_tokenizer *t, int idx, b8_err *e);
bert8_status b8_added_index_build(b8_tokenizer *t, b8_err *e);
void b8_added_index_free(b8_tokenizer *t);
/* The added token of pass `pass` (BPE: 1 for the normalized ones; 0 otherwise) that the text
 * at s (n bytes) starts with: the longest exact match, else the longest fold match (a fold
 * token also matches text that lower-cases to it); NULL when none. *mlen: the bytes of text
 * it covers. Cost: the walk down a trie, whatever the number of tokens. */
const b8_added_token *b8_added_match(const b8_tokenizer *t, int pass, const uint8_t *s, size_t n, size_t *mlen);
/* [*lo, *hi): the entries of t->added_by_id with that id. */
void b8_added_id_range(const b8_tokenizer *t, int32_t id, int *lo, int *hi);
/* Builds the lookup structures once everything is known (sorts added tokens etc.). */
bert8_status b8_tok_finish(b8_tokenizer *t, b8_err *e);
/* Sets the default templates of the kind from the special ids. */
void b8_tok_default_templates(b8_tokenizer *t);

/* Reads a sentencepiece ModelProto (data, n bytes) into t's Unigram model; path for messages. */
bert8_status b8_spm_parse(b8_tokenizer *t, const uint8_t *data, size_t n, const char *path,
                          b8_err *e);
/* Installs a precompiled charsmap blob (copied) into t->ug; what names it in messages. */
bert8_status b8_ug_set_charsmap(b8_tokenizer *t, const uint8_t *blob, size_t n, const char *what,
                                b8_err *e);
/* Finishes the Unigram model: min/max scores, piece trie, ASCII table. */
bert8_status b8_ug_finish(b8_tokenizer *t, b8_err *e);

/* model.vocab of a tokenizer.json ({"token": id, ...}, a cJSON object) into t's id -> token
 * table and trie; a repeated id is an error, a repeated key keeps the last. */
bert8_status b8_tokjson_vocab(b8_tokenizer *t, const void *vocab, const char *path, b8_err *e);
/* Parses a tokenizer.json (text, NUL-terminated) into a fresh tokenizer. */
bert8_status b8_tokjson_parse(const char *text, size_t len, const char *path,
                              const b8_tok_options *opt, b8_tokenizer **out, b8_err *e);

#endif
