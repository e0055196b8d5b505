/* tokenizer.h: WordPiece (BERT, DistilBERT, multilingual BERT) and SentencePiece-Unigram
 * (XLM-RoBERTa) tokenizers that reproduce the Hugging Face "slow" tokenizers of transformers
 * v4.31 id for id, a byte-level BPE tokenizer (GPT-2, RoBERTa, ModernBERT) that reproduces
 * the Hugging Face `tokenizers` library (ids, tokens, offsets), plus the encoding layer the engine needs (special tokens, token types,
 * truncation, overflow windows with a stride, byte offsets, word ids, padded batches).
 *
 * Thread safety: a b8_tokenizer is immutable once loaded and may be shared by any number of
 * threads. Every encode call writes into a caller-owned result (b8_encoding, b8_tok_pieces)
 * that also keeps the scratch memory of the call, so reusing one result per thread makes
 * steady-state encoding allocation-free.
 *
 * Text is UTF-8 with an explicit length (NUL bytes are ordinary characters). Invalid UTF-8
 * fails with BERT8_ERR_ENCODING and a message naming the byte offset. Offsets are byte
 * offsets [start, end) into the text (or text_pair) they came from.
 *
 * Behaviour (what "parity" means here):
 *  - WordPiece = BertTokenizer: the do_lower_case pre-pass of PreTrainedTokenizer.tokenize
 *    (character by character, so final sigma is not special), clean-up (NUL, U+FFFD and
 *    categories C* dropped, whitespace unified), CJK ideographs split one by one, NFC,
 *    accent stripping (NFD, drop Mn) when uncased or strip_accents, punctuation split,
 *    greedy longest-match-first sub-words with "##", words over 100 characters -> [UNK].
 *  - Unigram = XLMRobertaTokenizer over sentencepiece 0.1.97: the precompiled charsmap
 *    (nmt_nfkc), whitespace -> U+2581 with a dummy prefix and extra spaces removed, Viterbi
 *    over piece scores (float, exactly as EncodeOptimized), runs of unknown characters merged
 *    into one <unk>, and the fairseq ids (<s>=0 <pad>=1 </s>=2 <unk>=3, spm id + 1, <mask>
 *    last).
 *  - Special and added tokens are matched in the text before the model runs (never split,
 *    also when glued to text), leftmost-longest. They match verbatim; with do_lower_case,
 *    a token that is its own lower case also matches any-case spellings (the lower-casing
 *    pre-pass runs before the split). lstrip/rstrip eat Python-whitespace beside them, and
 *    tokens given as plain strings strip both sides, as transformers v4.31 does.
 *  - An added token with single_word (tokenizer.json, or an AddedToken object in
 *    tokenizer_config.json) matches only where it is not glued to a word character on either
 *    side, as HF tokenizers' AddedVocabulary decides it: word characters are regex \w
 *    (letters, marks, decimal digits, letter numbers, connector punctuation such as '_',
 *    U+200C/U+200D and the circled/squared letters). A match refused that way is not
 *    retried at a later start inside it (leftmost-longest, non-overlapping, like HF). The
 *    slow tokenizers of transformers v4.31 ignore single_word.
 *  - BPE = `tokenizers` (0.2x) with a tokenizer.json whose model is BPE and whose
 *    pre-tokenizer is ByteLevel: added tokens split first (normalized=false ones on the raw
 *    text, then the others; lstrip/rstrip take the whitespace into the token and its
 *    offsets, as `tokenizers` does), normalizers NFC / Lowercase / Sequence of them, the
 *    GPT-2 split regex (written out by hand in bpe.c), bytes mapped to the GPT-2 byte
 *    alphabet, merges by rank, and RobertaProcessing / ByteLevel offset trimming. Offsets
 *    are the reference's character offsets expressed in bytes; its trimming can leave a
 *    token's start after the next token's (a lone prefix space before an unknown run). A
 *    decoded text ends at its first NUL. See bpe.c.
 * Unicode properties come from utf8proc; code points first assigned in Unicode 15.0 are
 * treated as unassigned because the reference (Python 3.11) uses Unicode 14.0.
 *
 * Files: this header only declares, with no .c of its own, so that every file of the tokenizer
 * can include it for its types. The functions are defined above it: tok_object.c (free,
 * introspection), tok_load.c (loading), encode.c (tokenize, encode), decode.c, and
 * unicode_text.c (b8_utf8_check). The internal types are in tok_types.h.
 */
#ifndef BERT8_TOKENIZER_H
#define BERT8_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

typedef struct b8_tokenizer b8_tokenizer;

/* Resource limits. Each is checked before memory is allocated for what it bounds; a file over
 * one is refused with BERT8_ERR_TOO_LARGE and a message naming the file, the token or the id.
 *  - B8_TOK_MAX_VOCAB: ids of a vocabulary, added tokens included (2^24; the largest public
 *    vocabularies hold about 2^18).
 *  - B8_TOK_MAX_ID_GAP: a token given an explicit id (tokenizer.json vocab or added_tokens,
 *    added_tokens_decoder) may leave at most this many unused ids below it; the ids in
 *    between are padded in one step and map to "" (HF leaves them unmapped).
 *  - B8_TOK_MAX_TOKEN_BYTES: bytes of one token string (vocabulary entry, piece, added or
 *    special token).
 *  - B8_TOK_MAX_FILE_BYTES: tokenizer.json, vocab.txt and sentencepiece models;
 *    B8_TOK_MAX_CONFIG_BYTES: tokenizer_config.json, special_tokens_map.json,
 *    added_tokens.json.
 *  - B8_TOK_MAX_ENCODE_TOKENS: rows x padded length of one encode call (2^26 token slots, about
 *    2.7 GB of output arrays): a larger batch or max_length padding is BERT8_ERR_TOO_LARGE
 *    before the output is allocated. */
#define B8_TOK_MAX_VOCAB ((int64_t)1 << 24)
#define B8_TOK_MAX_ID_GAP ((int64_t)1 << 16)
#define B8_TOK_MAX_TOKEN_BYTES 1024
#define B8_TOK_MAX_FILE_BYTES ((size_t)256 << 20)
#define B8_TOK_MAX_CONFIG_BYTES ((size_t)16 << 20)
#define B8_TOK_MAX_ENCODE_TOKENS ((int64_t)1 << 26)

typedef enum b8_tok_kind {
    B8_TOK_AUTO = -1,     /* b8_tokenizer_load_files: decide from the file */
    B8_TOK_WORDPIECE = 0, /* vocab.txt or a tokenizer.json with a WordPiece model */
    B8_TOK_UNIGRAM = 1,   /* sentencepiece .model or a tokenizer.json with a Unigram model */
    B8_TOK_BPE = 2        /* a tokenizer.json with a byte-level BPE model (GPT-2, RoBERTa) */
} b8_tok_kind;

/* Options that override what the folder's config files say. -1 / 0 mean "not set". */
typedef struct b8_tok_options {
    int lowercase;              /* WordPiece do_lower_case: -1 config (default 1), 0, 1 */
    int strip_accents;          /* -1 config (default: follows lowercase), 0, 1 */
    int tokenize_chinese_chars; /* -1 config (default 1), 0, 1 */
    int64_t model_max_length;   /* 0: config (default 512) */
} b8_tok_options;

b8_tok_options b8_tok_default_options(void);

/* Loads a tokenizer from a model folder: tokenizer.json when present, else vocab.txt
 * (WordPiece) or sentencepiece.bpe.model (Unigram). tokenizer_config.json,
 * special_tokens_map.json and added_tokens.json are read when present (special tokens may be
 * strings or AddedToken objects). opt may be NULL. On failure *out is NULL and e says why. */
bert8_status b8_tokenizer_load_dir(const char *dir, const b8_tok_options *opt, b8_tokenizer **out,
                                   b8_err *e);

/* Loads one vocabulary file with explicit options and no config files: a vocab.txt
 * (WordPiece, BERT special tokens), a sentencepiece model (Unigram, XLM-R conventions) or a
 * tokenizer.json. kind may be B8_TOK_AUTO (decided by the file name and content). */
bert8_status b8_tokenizer_load_files(b8_tok_kind kind, const char *vocab_path,
                                     const b8_tok_options *opt, b8_tokenizer **out, b8_err *e);

void b8_tokenizer_free(b8_tokenizer *t); /* NULL is a no-op */

/* ---- Introspection ------------------------------------------------------------------ */

typedef enum b8_special {
    B8_SPECIAL_UNK,
    B8_SPECIAL_CLS,
    B8_SPECIAL_SEP,
    B8_SPECIAL_PAD,
    B8_SPECIAL_MASK,
    B8_SPECIAL_BOS,
    B8_SPECIAL_EOS,
    B8_SPECIAL_COUNT
} b8_special;

b8_tok_kind b8_tokenizer_kind(const b8_tokenizer *t);
/* Ids are in [0, vocab_size) (added tokens included). */
int64_t b8_tokenizer_vocab_size(const b8_tokenizer *t);
/* model_max_length from the options or the config (512 when neither says). */
int64_t b8_tokenizer_model_max_length(const b8_tokenizer *t);
/* Id of a special token, or -1 when the tokenizer has none. */
int32_t b8_tokenizer_special_id(const b8_tokenizer *t, b8_special which);
/* The token string of an id (e.g. "##ing", "\xe2\x96\x81the", "[CLS]"), NUL-terminated and
 * owned by t; *len (if not NULL) gets its byte length. NULL when id is out of range. */
const char *b8_tokenizer_id_to_token(const b8_tokenizer *t, int32_t id, size_t *len);
/* The id of a token string, as the reference's convert_tokens_to_ids does, or -1 when the
 * string is not in the vocabulary (Unigram: unknown pieces give the <unk> id). */
int32_t b8_tokenizer_token_to_id(const b8_tokenizer *t, const char *token, size_t len);
/* Whether id is a special token: one of the named specials or an added special token. */
bool b8_tokenizer_is_special(const b8_tokenizer *t, int32_t id);
/* ids -> text as transformers' decode (see decode.c); *out is freed by the caller (free). */
bert8_status b8_tokenizer_decode(const b8_tokenizer *t, const int32_t *ids, int64_t n, bool skip_special, char **out,
                                 b8_err *e);
/* Number of special tokens the template adds to a single sequence (pair = 0) or a pair. */
int b8_tokenizer_num_special_tokens(const b8_tokenizer *t, int pair);

/* ---- Tokenize (no special tokens of the template) --------------------------------------- */

/* The tokens of one text, as tokenizer.tokenize(text) plus ids. */
typedef struct b8_tok_pieces {
    int64_t n;         /* number of tokens */
    int32_t *ids;      /* [n] */
    int64_t *offsets;  /* [n][2] byte [start, end) into the text */
    int32_t *word_ids; /* [n] index of the pre-tokenized word (special tokens count as one) */
    /* The token strings as the reference prints them: the vocabulary entry, except that an
     * unknown SentencePiece run keeps its normalized text. Token i is strings + str_off[i],
     * NUL-terminated, str_off[i+1] - str_off[i] - 1 bytes long. */
    char *strings;
    int64_t *str_off; /* [n+1] */
    void *priv;       /* internal buffers and capacities: keep for reuse, freed by _free */
} b8_tok_pieces;

bert8_status b8_tokenizer_tokenize(const b8_tokenizer *t, const char *text, size_t len,
                                   b8_tok_pieces *out, b8_err *e);
void b8_tok_pieces_free(b8_tok_pieces *p); /* frees the buffers and zeroes *p; NULL is a no-op */

/* ---- Encode -------------------------------------------------------------------------- */

typedef enum b8_truncation {
    B8_TRUNC_NONE,          /* keep every token (max_length is then only a padding target) */
    B8_TRUNC_LONGEST_FIRST, /* drop from the end of the longer sequence, one token at a time */
    B8_TRUNC_ONLY_FIRST,    /* drop only from the first sequence */
    B8_TRUNC_ONLY_SECOND    /* drop only from the second sequence (QA contexts) */
} b8_truncation;

typedef enum b8_padding {
    B8_PAD_LONGEST,   /* pad every row to the longest row */
    B8_PAD_MAX_LENGTH /* pad every row to max_length (rows never get shorter) */
} b8_padding;

typedef struct b8_encode_params {
    int add_special_tokens; /* 1: apply the template ([CLS] a [SEP] b [SEP], <s> a </s></s> b </s>)
                             */
    b8_truncation truncation;
    int64_t max_length; /* 0: model_max_length (used when truncating or padding to max) */
    /* With return_overflow, the truncated sequence is cut into windows of what fits, each
     * window starting (fit - stride) tokens after the previous one, and every window becomes
     * its own row with the other sequence whole (Hugging Face fast tokenizers'
     * return_overflowing_tokens). Supported with ONLY_FIRST, ONLY_SECOND and for single
     * texts. Without it the tokens past max_length are dropped. */
    int return_overflow;
    int64_t stride;
    b8_padding padding;
    int64_t pad_to_multiple_of; /* 0: off */
    int truncate_left;          /* cut tokens from the start of a sequence instead of its end
                                   (transformers' truncation_side="left"; not with overflow) */
} b8_encode_params;

/* add_special_tokens 1, no truncation, pad to longest, no overflow. */
b8_encode_params b8_default_encode_params(void);

/* A batch of encoded rows, row-major [rows][seq]; rows past lengths[r] are padding
 * (pad id, attention 0, token type 0, sequence id -1, word id -1, offsets 0,0). */
typedef struct b8_encoding {
    int64_t rows, seq;
    int32_t *input_ids;      /* [rows*seq] */
    int32_t *attention_mask; /* [rows*seq] */
    int32_t *token_type_ids; /* [rows*seq] */
    int32_t *special_mask;   /* [rows*seq] 1 for template special tokens and padding */
    int32_t *sequence_ids;   /* [rows*seq] 0 text, 1 text_pair, -1 special or padding */
    int32_t *word_ids;       /* [rows*seq] word index within its sequence, -1 special/padding */
    int64_t *offsets;        /* [rows*seq][2] byte [start, end) into the token's sequence */
    int64_t *lengths;        /* [rows] tokens before padding */
    int64_t *row_input;      /* [rows] which input (text/pair) the row came from */
    int64_t *row_window;     /* [rows] overflow window index within its input (0 = first) */
    void *priv;              /* internal buffers and capacities: keep for reuse */
} b8_encoding;

/* The encoding as the engine's input batch (pointers into enc, valid until enc changes). */
static inline bert8_batch b8_encoding_batch(const b8_encoding *enc) {
    bert8_batch b = {enc->rows, enc->seq, enc->input_ids, enc->attention_mask, enc->token_type_ids};
    return b;
}

/* Encodes one text (pair may be NULL for a single sequence). */
bert8_status b8_tokenizer_encode(const b8_tokenizer *t, const char *text, size_t text_len,
                                 const char *pair, size_t pair_len, const b8_encode_params *p,
                                 b8_encoding *out, b8_err *e);

/* Encodes n inputs. text_lens may be NULL (strlen). pairs may be NULL (all single) or hold
 * NULL entries (that input is single); pair_lens may be NULL (strlen). */
bert8_status b8_tokenizer_encode_batch(const b8_tokenizer *t, int64_t n, const char *const *texts,
                                       const size_t *text_lens, const char *const *pairs,
                                       const size_t *pair_lens, const b8_encode_params *p,
                                       b8_encoding *out, b8_err *e);

void b8_encoding_free(b8_encoding *enc); /* frees the buffers and zeroes *enc; NULL is a no-op */

/* Checks that text is UTF-8 as Python's strict decoder accepts it. Returns BERT8_OK or
 * BERT8_ERR_ENCODING naming what (the byte offset) in e; what names the input in messages. */
bert8_status b8_utf8_check(const char *text, size_t len, const char *what, b8_err *e);

#endif
