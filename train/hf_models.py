"""Torch re-implementation of the transformers v4.31 encoder maths (BERT, DistilBERT, XLM-R).

Module attribute names mirror transformers so that state_dict() keys are exactly the
tensor names of hub checkpoints; bert8 then loads what we save like any hub model.
Only inference-relevant structure plus dropout is kept (no caching, no cross-attention).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

F32_MIN = torch.finfo(torch.float32).min


def act_fn(name):
    if name == "gelu":
        return lambda x: F.gelu(x)
    if name == "gelu_new":
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "relu":
        return F.relu
    raise ValueError("unsupported activation %r" % name)


# ---- BERT / XLM-R ---------------------------------------------------------------------


class BertEmbeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden_size"]
        self.word_embeddings = nn.Embedding(cfg["vocab_size"], h, padding_idx=cfg["pad_token_id"])
        self.position_embeddings = nn.Embedding(cfg["max_position_embeddings"], h)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], h)
        self.LayerNorm = nn.LayerNorm(h, eps=cfg["layer_norm_eps"])
        self.dropout = nn.Dropout(cfg["hidden_dropout_prob"])
        self.xlmr = cfg["model_type"] == "xlm-roberta"
        self.pad = cfg["pad_token_id"]

    def position_ids(self, input_ids):
        if self.xlmr:
            # Positions come from the ids, not the mask: every pad-id token gets `pad`.
            m = (input_ids != self.pad).long()
            return torch.cumsum(m, dim=1) * m + self.pad
        t = input_ids.shape[1]
        return torch.arange(t, device=input_ids.device).unsqueeze(0).expand_as(input_ids)

    def forward(self, input_ids, token_type_ids=None):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = (self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
             + self.position_embeddings(self.position_ids(input_ids)))
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden_size"]
        self.nh = cfg["num_attention_heads"]
        self.dh = h // self.nh
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.value = nn.Linear(h, h)
        self.dropout = nn.Dropout(cfg["attention_probs_dropout_prob"])

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.nh, self.dh).permute(0, 2, 1, 3)

    def forward(self, x, ext_mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh) + ext_mask
        p = self.dropout(torch.softmax(s, dim=-1))
        c = torch.matmul(p, v).permute(0, 2, 1, 3).contiguous()
        return c.view(c.shape[0], c.shape[1], -1)


class BertSelfOutput(nn.Module):
    def __init__(self, cfg, in_features=None):
        super().__init__()
        h = cfg["hidden_size"]
        self.dense = nn.Linear(in_features or h, h)
        self.LayerNorm = nn.LayerNorm(h, eps=cfg["layer_norm_eps"])
        self.dropout = nn.Dropout(cfg["hidden_dropout_prob"])

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self = BertSelfAttention(cfg)
        self.output = BertSelfOutput(cfg)

    def forward(self, x, ext_mask):
        return self.output(self.self(x, ext_mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden_size"], cfg["intermediate_size"])
        self.act = act_fn(cfg["hidden_act"])

    def forward(self, x):
        return self.act(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention = BertAttention(cfg)
        self.intermediate = BertIntermediate(cfg)
        self.output = BertSelfOutput(cfg, cfg["intermediate_size"])

    def forward(self, x, ext_mask):
        a = self.attention(x, ext_mask)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(cfg) for _ in range(cfg["num_hidden_layers"])])

    def forward(self, x, ext_mask):
        for lyr in self.layer:
            x = lyr(x, ext_mask)
        return x


class BertPooler(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden_size"], cfg["hidden_size"])

    def forward(self, h):
        return torch.tanh(self.dense(h[:, 0]))


class BertModel(nn.Module):
    """BertModel / XLMRobertaModel (the maths differ only in the position ids)."""

    def __init__(self, cfg, add_pooling_layer=True):
        super().__init__()
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = BertEncoder(cfg)
        self.pooler = BertPooler(cfg) if add_pooling_layer else None

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        ext = (1.0 - attention_mask[:, None, None, :].float()) * F32_MIN
        h = self.encoder(self.embeddings(input_ids, token_type_ids), ext)
        return h, (self.pooler(h) if self.pooler is not None else None)


def _init_weights(module, std):
    # transformers' _init_weights: N(0, std) linears/embeddings, zero biases, unit LayerNorm.
    for m in module.modules():
        if isinstance(m, nn.Linear):
            m.weight.data.normal_(0.0, std)
            if m.bias is not None:
                m.bias.data.zero_()
        elif isinstance(m, nn.Embedding):
            m.weight.data.normal_(0.0, std)
            if m.padding_idx is not None:
                m.weight.data[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            m.weight.data.fill_(1.0)
            m.bias.data.zero_()


class RobertaClassificationHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden_size"], cfg["hidden_size"])
        self.dropout = nn.Dropout(cfg["hidden_dropout_prob"])
        self.out_proj = nn.Linear(cfg["hidden_size"], cfg["num_labels"])

    def forward(self, h):
        x = self.dropout(h[:, 0])
        x = self.dropout(torch.tanh(self.dense(x)))
        return self.out_proj(x)


class BertForSequenceClassification(nn.Module):
    """Also XLMRobertaForSequenceClassification when cfg model_type is xlm-roberta."""

    def __init__(self, cfg):
        super().__init__()
        self.xlmr = cfg["model_type"] == "xlm-roberta"
        if self.xlmr:
            self.roberta = BertModel(cfg, add_pooling_layer=False)
            self.classifier = RobertaClassificationHead(cfg)
        else:
            self.bert = BertModel(cfg, add_pooling_layer=True)
            self.dropout = nn.Dropout(cfg["hidden_dropout_prob"])
            self.classifier = nn.Linear(cfg["hidden_size"], cfg["num_labels"])
        _init_weights(self, cfg["initializer_range"])

    @property
    def encoder_model(self):
        return self.roberta if self.xlmr else self.bert

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        h, pooled = self.encoder_model(input_ids, attention_mask, token_type_ids)
        if self.xlmr:
            return self.classifier(h)
        return self.classifier(self.dropout(pooled))


class BertForQuestionAnswering(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.xlmr = cfg["model_type"] == "xlm-roberta"
        if self.xlmr:
            self.roberta = BertModel(cfg, add_pooling_layer=False)
        else:
            self.bert = BertModel(cfg, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(cfg["hidden_size"], 2)
        _init_weights(self, cfg["initializer_range"])

    @property
    def encoder_model(self):
        return self.roberta if self.xlmr else self.bert

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        h, _ = self.encoder_model(input_ids, attention_mask, token_type_ids)
        lg = self.qa_outputs(h)
        return lg[..., 0], lg[..., 1]


class BertForMaskedLM(nn.Module):
    """Pre-training only; its head (cls.*) is never exported with task models."""

    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden_size"]
        self.bert = BertModel(cfg, add_pooling_layer=False)
        self.transform_dense = nn.Linear(h, h)
        self.transform_ln = nn.LayerNorm(h, eps=cfg["layer_norm_eps"])
        self.bias = nn.Parameter(torch.zeros(cfg["vocab_size"]))
        self.act = act_fn(cfg["hidden_act"])
        _init_weights(self, cfg["initializer_range"])

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, select=None):
        h, _ = self.bert(input_ids, attention_mask, token_type_ids)
        if select is not None:
            h = h[select]
        t = self.transform_ln(self.act(self.transform_dense(h)))
        return t @ self.bert.embeddings.word_embeddings.weight.t() + self.bias


# ---- DistilBERT ---------------------------------------------------------------------


class DistilEmbeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["dim"]
        self.word_embeddings = nn.Embedding(cfg["vocab_size"], d, padding_idx=cfg["pad_token_id"])
        self.position_embeddings = nn.Embedding(cfg["max_position_embeddings"], d)
        self.LayerNorm = nn.LayerNorm(d, eps=1e-12)
        self.dropout = nn.Dropout(cfg["dropout"])

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        return self.dropout(self.LayerNorm(self.word_embeddings(input_ids) + self.position_embeddings(pos)))


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["dim"]
        self.nh = cfg["n_heads"]
        self.dh = d // self.nh
        self.q_lin = nn.Linear(d, d)
        self.k_lin = nn.Linear(d, d)
        self.v_lin = nn.Linear(d, d)
        self.out_lin = nn.Linear(d, d)
        self.dropout = nn.Dropout(cfg["attention_dropout"])

    def forward(self, x, mask):
        b, t, _ = x.shape

        def split(y):
            return y.view(b, t, self.nh, self.dh).transpose(1, 2)

        q = split(self.q_lin(x)) / math.sqrt(self.dh)  # DistilBERT scales q before the product
        s = torch.matmul(q, split(self.k_lin(x)).transpose(2, 3))
        s = s.masked_fill((mask == 0).view(b, 1, 1, t), F32_MIN)
        p = self.dropout(torch.softmax(s, dim=-1))
        c = torch.matmul(p, split(self.v_lin(x))).transpose(1, 2).contiguous().view(b, t, -1)
        return self.out_lin(c)


class FFN(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.lin1 = nn.Linear(cfg["dim"], cfg["hidden_dim"])
        self.lin2 = nn.Linear(cfg["hidden_dim"], cfg["dim"])
        self.dropout = nn.Dropout(cfg["dropout"])
        self.act = act_fn(cfg["activation"])

    def forward(self, x):
        return self.dropout(self.lin2(self.act(self.lin1(x))))


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention = MultiHeadSelfAttention(cfg)
        self.sa_layer_norm = nn.LayerNorm(cfg["dim"], eps=1e-12)
        self.ffn = FFN(cfg)
        self.output_layer_norm = nn.LayerNorm(cfg["dim"], eps=1e-12)

    def forward(self, x, mask):
        x = self.sa_layer_norm(self.attention(x, mask) + x)
        return self.output_layer_norm(self.ffn(x) + x)


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layer = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg["n_layers"])])

    def forward(self, x, mask):
        for lyr in self.layer:
            x = lyr(x, mask)
        return x


class DistilBertModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embeddings = DistilEmbeddings(cfg)
        self.transformer = Transformer(cfg)

    def forward(self, input_ids, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return self.transformer(self.embeddings(input_ids), attention_mask)


class DistilBertForSequenceClassification(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.distilbert = DistilBertModel(cfg)
        self.pre_classifier = nn.Linear(cfg["dim"], cfg["dim"])
        self.classifier = nn.Linear(cfg["dim"], cfg["num_labels"])
        self.dropout = nn.Dropout(cfg["seq_classif_dropout"])
        _init_weights(self, cfg["initializer_range"])

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        h = self.distilbert(input_ids, attention_mask)
        x = self.dropout(F.relu(self.pre_classifier(h[:, 0])))
        return self.classifier(x)


class DistilBertForQuestionAnswering(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.distilbert = DistilBertModel(cfg)
        self.qa_outputs = nn.Linear(cfg["dim"], 2)
        self.dropout = nn.Dropout(cfg["qa_dropout"])
        _init_weights(self, cfg["initializer_range"])

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        lg = self.qa_outputs(self.dropout(self.distilbert(input_ids, attention_mask)))
        return lg[..., 0], lg[..., 1]


ARCHS = {
    "BertForSequenceClassification": BertForSequenceClassification,
    "XLMRobertaForSequenceClassification": BertForSequenceClassification,
    "BertForQuestionAnswering": BertForQuestionAnswering,
    "XLMRobertaForQuestionAnswering": BertForQuestionAnswering,
    "DistilBertForSequenceClassification": DistilBertForSequenceClassification,
    "DistilBertForQuestionAnswering": DistilBertForQuestionAnswering,
}


def num_labels(cfg):
    return len(cfg["id2label"]) if "id2label" in cfg else 2


def build(cfg):
    """Instantiate the class named by cfg['architectures'][0] (cfg as read from config.json)."""
    cfg = dict(cfg)
    cfg["num_labels"] = num_labels(cfg)
    if cfg["model_type"] != "distilbert":
        cfg.setdefault("layer_norm_eps", 1e-12)
        cfg.setdefault("hidden_act", "gelu")
    return ARCHS[cfg["architectures"][0]](cfg)
