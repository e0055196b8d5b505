"""Python twins of transformers v4.31's slow BertTokenizer and XLMRobertaTokenizer, plus the
project's own WordPiece vocabulary builder and SentencePiece training wrapper.

The C engine tokenizes text with exact HF semantics, so the ids we train on must be the
ids HF (and therefore bert8) would produce; test_tokenization.py checks this against the
golden tokenizer corpora.
"""
import collections
import re
import unicodedata

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _is_whitespace(ch):
    if ch in " \t\n\r":
        return True
    return unicodedata.category(ch) == "Zs"


def _is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def _is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokenize(text, lower=True, never_split=()):
    """BasicTokenizer.tokenize: clean, CJK split, NFC, lower + accent strip, punctuation split."""
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        if _is_whitespace(ch):
            out.append(" ")
        elif _is_cjk(cp):
            out.append(" " + ch + " ")
        else:
            out.append(ch)
    text = unicodedata.normalize("NFC", "".join(out))
    split = []
    for tok in text.strip().split():
        if tok in never_split:
            split.append(tok)
            continue
        if lower:
            tok = tok.lower()
            tok = "".join(c for c in unicodedata.normalize("NFD", tok) if unicodedata.category(c) != "Mn")
        cur = []
        for c in tok:
            if _is_punctuation(c):
                if cur:
                    split.append("".join(cur))
                    cur = []
                split.append(c)
            else:
                cur.append(c)
        if cur:
            split.append("".join(cur))
    return " ".join(split).strip().split()


def _split_on_specials(text, specials):
    """Split text around literal special tokens (longest match first), like the HF trie."""
    if not specials:
        return [text]
    pat = "(" + "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)) + ")"
    return [p for p in re.split(pat, text) if p != ""]


class BertTokenizer:
    def __init__(self, vocab, lower=True, max_chars=100):
        self.vocab = vocab if isinstance(vocab, dict) else {t: i for i, t in enumerate(vocab)}
        self.inv = {i: t for t, i in self.vocab.items()}
        self.lower = lower
        self.max_chars = max_chars
        self.specials = [t for t in BERT_SPECIALS if t in self.vocab]
        self.unk, self.cls, self.sep, self.pad, self.mask = (self.vocab.get(t) for t in
                                                             ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"))

    @classmethod
    def from_file(cls, path, lower=True):
        with open(path, encoding="utf-8") as f:
            toks = [line.rstrip("\n") for line in f]
        return cls(toks, lower)

    def wordpiece(self, word):
        if len(word) > self.max_chars:
            return ["[UNK]"]
        out, start = [], 0
        while start < len(word):
            end, cur = len(word), None
            while start < end:
                sub = word[start:end]
                if start > 0:
                    sub = "##" + sub
                if sub in self.vocab:
                    cur = sub
                    break
                end -= 1
            if cur is None:
                return ["[UNK]"]
            out.append(cur)
            start = end
        return out

    def tokenize(self, text):
        if self.lower:
            # PreTrainedTokenizer.tokenize lowercases char by char outside special tokens.
            text = "".join(p if p in self.specials else "".join(c.lower() for c in p)
                           for p in _split_on_specials(text, self.specials))
        toks = []
        for part in _split_on_specials(text, self.specials):
            if part in self.specials:
                toks.append(part)
                continue
            for w in basic_tokenize(part, self.lower, self.specials):
                toks.extend([w] if w in self.specials else self.wordpiece(w))
        return toks

    def ids(self, toks):
        return [self.vocab.get(t, self.unk) for t in toks]

    def encode(self, text, pair=None):
        """(input_ids, token_type_ids) of [CLS] A [SEP] (B [SEP])."""
        a = self.ids(self.tokenize(text))
        ids = [self.cls] + a + [self.sep]
        tt = [0] * len(ids)
        if pair is not None:
            b = self.ids(self.tokenize(pair))
            ids += b + [self.sep]
            tt += [1] * (len(b) + 1)
        return ids, tt


class XLMRTokenizer:
    """XLMRobertaTokenizer: sentencepiece pieces with the fairseq id offset."""

    SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]

    def __init__(self, spm_path):
        import sentencepiece as spm
        self.sp = spm.SentencePieceProcessor(model_file=spm_path)
        n = self.sp.get_piece_size()
        self.fairseq = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
        self.mask = n + 1
        self.vocab_size = n + 2
        self.bos, self.pad, self.eos, self.unk = 0, 1, 2, 3

    def tokenize(self, text):
        parts = _split_on_specials(text, self.SPECIALS)
        for i, p in enumerate(parts):
            if p not in self.SPECIALS:
                continue
            # <mask> is an AddedToken(lstrip=True); the plain-string specials strip both sides.
            if i > 0 and parts[i - 1] not in self.SPECIALS:
                parts[i - 1] = parts[i - 1].rstrip()
            if p != "<mask>" and i + 1 < len(parts) and parts[i + 1] not in self.SPECIALS:
                parts[i + 1] = parts[i + 1].lstrip()
        toks = []
        for p in parts:
            if p in self.SPECIALS:
                toks.append(p)
            elif p:
                toks.extend(self.sp.encode(p, out_type=str))
        return toks

    def piece_id(self, t):
        if t in self.fairseq:
            return self.fairseq[t]
        if t == "<mask>":
            return self.mask
        i = self.sp.piece_to_id(t)
        return i + 1 if i else self.unk

    def encode(self, text, pair=None):
        a = [self.piece_id(t) for t in self.tokenize(text)]
        ids = [self.bos] + a + [self.eos]
        if pair is not None:
            ids += [self.eos] + [self.piece_id(t) for t in self.tokenize(pair)] + [self.eos]
        return ids


# ---- vocabulary building --------------------------------------------------------------


def build_wordpiece_vocab(texts, size, min_char_count=2, word_share=0.75):
    """Count-based WordPiece vocabulary: specials, all frequent characters (bare and ##),
    the most frequent whole words, then the most frequent stem prefixes and ## suffixes of
    the words left out. Greedy longest-match then splits rare words into stem + suffixes."""
    words = collections.Counter()
    for t in texts:
        words.update(basic_tokenize(t, lower=True))
    chars = collections.Counter()
    for w, c in words.items():
        for ch in w:
            chars[ch] += c
    vocab = list(BERT_SPECIALS)
    seen = set(vocab)

    def add(tok):
        if tok not in seen and len(vocab) < size:
            seen.add(tok)
            vocab.append(tok)

    keep_chars = sorted(ch for ch, c in chars.items() if c >= min_char_count)
    for ch in keep_chars:
        add(ch)
    for ch in keep_chars:
        add("##" + ch)
    n_words = int((size - len(vocab)) * word_share) + len(vocab)
    ranked = [w for w, _ in sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))]
    for w in ranked:
        if len(vocab) >= n_words:
            break
        if len(w) <= 100:
            add(w)
    pieces = collections.Counter()
    for w, c in words.items():
        if w in seen or len(w) < 3 or len(w) > 100:
            continue
        for k in range(2, min(len(w), 9)):
            pieces[w[:k]] += c
            pieces["##" + w[-k:]] += c
    for p, _ in sorted(pieces.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(vocab) >= size:
            break
        add(p)
    return vocab


def train_sentencepiece(texts, prefix, vocab_size, seed_text_path):
    """Unigram model with XLM-R's conventions: nmt_nfkc, unk=0 bos=1 eos=2, no pad piece."""
    import sentencepiece as spm
    with open(seed_text_path, "w", encoding="utf-8") as f:
        for t in texts:
            t = t.replace("\n", " ").strip()
            if t:
                f.write(t + "\n")
    spm.SentencePieceTrainer.train(
        input=seed_text_path, model_prefix=prefix, vocab_size=vocab_size, model_type="unigram",
        normalization_rule_name="nmt_nfkc", unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        character_coverage=0.9995, num_threads=1, minloglevel=2)
