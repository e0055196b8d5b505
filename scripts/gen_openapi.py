#!/usr/bin/env python3
"""Writes server/openapi.inc: the OpenAPI 3 description of bert8 serve's routes (GET /openapi.json,
and the Swagger page at /docs). Run it after changing a route or a request field:
    python3 scripts/gen_openapi.py"""
import json
import pathlib

S = lambda **k: k
ids = {"type": "array", "items": {"type": "integer", "minimum": 0}, "description": "token ids (used as given; decoded to text when a prompt applies)"}
str_or_list = {"oneOf": [{"type": "string"}, ids, {"type": "array", "items": {"oneOf": [{"type": "string"}, ids]}}]}
text_only = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
trunc = {"truncate": {"type": "boolean", "nullable": True, "description": "cut inputs past the maximum input length (default: --auto-truncate)"},
         "truncation_direction": {"type": "string", "enum": ["left", "right", "Left", "Right"], "default": "right"}}
prompt = {"prompt_name": {"type": "string", "nullable": True, "description": "a key of config_sentence_transformers.json's prompts; its text is prepended to every input (default: --default-prompt / --default-prompt-name)"}}
err = {"type": "object", "properties": {"error": {"type": "string"}, "error_type": {"type": "string", "enum": ["Validation", "Tokenizer", "Overloaded", "Backend", "Empty", "Unhealthy"]}}}
oerr = {"type": "object", "properties": {"message": {"type": "string"}, "code": {"type": "integer"}, "type": {"type": "string"}}}
def errs(openai=False):
    ref = {"$ref": "#/components/schemas/" + ("OpenAIError" if openai else "Error")}
    return {str(c): {"description": d, "content": {"application/json": {"schema": ref}}} for c, d in
            [(400, "Empty batch"), (413, "Payload too large"), (422, "Validation or tokenization error"), (424, "Model error"), (429, "Overloaded"), (503, "Unhealthy or loading")]}
def post(op, summary, req, resp, openai=False):
    r = {"200": {"description": summary, "content": {"application/json": {"schema": resp}}}}
    r.update(errs(openai))
    return {"post": {"tags": ["Text Embeddings Inference"], "operationId": op, "summary": summary,
                     "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/" + req}}}},
                     "responses": r}}
def get(op, summary, resp, ctype="application/json", desc="OK"):
    c = {ctype: {"schema": resp}} if resp else None
    r = {"200": {"description": desc}}
    if c: r["200"]["content"] = c
    return {"get": {"tags": ["Text Embeddings Inference"], "operationId": op, "summary": summary, "responses": r}}
vec = {"type": "array", "items": {"type": "number", "format": "float"}}
schemas = {
 "Error": err, "OpenAIError": oerr,
 "EmbedRequest": {"type": "object", "required": ["inputs"], "properties": dict(inputs=str_or_list, **trunc, **prompt,
     normalize={"type": "boolean", "default": True}, dimensions={"type": "integer", "nullable": True, "minimum": 1, "description": "keep the first N values (Matryoshka), before normalising"})},
 "EmbedAllRequest": {"type": "object", "required": ["inputs"], "properties": dict(inputs=str_or_list, **trunc, **prompt)},
 "EmbedSparseRequest": {"type": "object", "required": ["inputs"], "properties": dict(inputs=str_or_list, **trunc, **prompt)},
 "SparseValue": {"type": "object", "properties": {"index": {"type": "integer"}, "value": {"type": "number", "format": "float"}}},
 "PredictRequest": {"type": "object", "required": ["inputs"], "properties": dict(inputs={"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}, {"type": "array", "items": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}}]}, **trunc, raw_scores={"type": "boolean", "default": False})},
 "RerankRequest": {"type": "object", "required": ["query", "texts"], "properties": dict(query={"type": "string"}, texts={"type": "array", "items": {"type": "string"}}, **trunc, raw_scores={"type": "boolean", "default": False}, return_text={"type": "boolean", "default": False})},
 "SimilarityRequest": {"type": "object", "required": ["inputs"], "properties": {"inputs": {"type": "object", "required": ["source_sentence", "sentences"], "properties": {"source_sentence": {"type": "string"}, "sentences": {"type": "array", "items": {"type": "string"}}}}, "parameters": {"type": "object", "nullable": True, "properties": dict(**trunc, **prompt)}}},
 "TokenizeRequest": {"type": "object", "required": ["inputs"], "properties": dict(inputs=text_only, add_special_tokens={"type": "boolean", "default": True}, **prompt)},
 "DecodeRequest": {"type": "object", "required": ["ids"], "properties": {"ids": {"oneOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}]}, "skip_special_tokens": {"type": "boolean", "default": True}}},
 "OpenAIRequest": {"type": "object", "required": ["input"], "properties": dict(input=str_or_list, model={"type": "string", "nullable": True}, user={"type": "string", "nullable": True}, encoding_format={"type": "string", "enum": ["float", "base64"], "default": "float"}, dimensions={"type": "integer", "nullable": True, "minimum": 1}, **prompt)},
 "Info": {"type": "object", "properties": {k: {} for k in ["model_id", "model_sha", "model_dtype", "quantization", "served_model_name", "model_type", "max_concurrent_requests", "max_input_length", "max_batch_tokens", "max_batch_requests", "max_client_batch_size", "auto_truncate", "tokenization_workers", "threads", "version", "sha", "docker_label"]}},
 "Token": {"type": "object", "properties": {"id": {"type": "integer"}, "text": {"type": "string"}, "special": {"type": "boolean"}, "start": {"type": "integer", "nullable": True}, "stop": {"type": "integer", "nullable": True}}},
 "Rank": {"type": "object", "properties": {"index": {"type": "integer"}, "text": {"type": "string"}, "score": {"type": "number"}}},
 "Prediction": {"type": "object", "properties": {"score": {"type": "number"}, "label": {"type": "string"}}},
 "OpenAIResponse": {"type": "object", "properties": {"object": {"type": "string"}, "data": {"type": "array", "items": {"type": "object", "properties": {"object": {"type": "string"}, "embedding": {"oneOf": [vec, {"type": "string", "format": "byte"}]}, "index": {"type": "integer"}}}}, "model": {"type": "string"}, "usage": {"type": "object", "properties": {"prompt_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"}}}}},
}
R = lambda n: {"$ref": "#/components/schemas/" + n}
embed_resp = {"type": "array", "items": vec}
paths = {
 "/health": get("health", "Health check: 200 once the model is loaded and the last forward pass worked", None),
 "/ping": get("ping", "Health check (as /health)", None),
 "/info": get("get_model_info", "Model and server information", R("Info")),
 "/metrics": get("metrics", "Prometheus metrics", {"type": "string"}, "text/plain"),
 "/docs": get("docs", "This API's Swagger UI page", {"type": "string"}, "text/html"),
 "/openapi.json": get("openapi", "This API's OpenAPI description (also at /api-doc/openapi.json)", {"type": "object"}),
 "/embed": post("embed", "Sentence embeddings", "EmbedRequest", embed_resp),
 "/embed_sparse": post("embed_sparse", "SPLADE sparse embeddings (models with a masked-LM head): max over tokens of log(1 + relu(logits)), the non-zero entries", "EmbedSparseRequest", {"type": "array", "items": {"type": "array", "items": R("SparseValue")}}),
 "/embed_all": post("embed_all", "The last hidden state of every token", "EmbedAllRequest", {"type": "array", "items": {"type": "array", "items": vec}}),
 "/predict": post("predict", "Sequence classification scores", "PredictRequest", {"type": "array", "items": R("Prediction")}),
 "/rerank": post("rerank", "Scores of texts against a query (cross-encoder)", "RerankRequest", {"type": "array", "items": R("Rank")}),
 "/similarity": post("similarity", "Cosine similarity of sentences to a source sentence", "SimilarityRequest", vec),
 "/tokenize": post("tokenize", "Tokens of each input", "TokenizeRequest", {"type": "array", "items": {"type": "array", "items": R("Token")}}),
 "/decode": post("decode", "Text of token ids", "DecodeRequest", {"type": "array", "items": {"type": "string"}}),
 "/v1/embeddings": post("openai_embed", "OpenAI-compatible embeddings", "OpenAIRequest", R("OpenAIResponse"), True),
 "/embeddings": post("openai_embed_alias", "OpenAI-compatible embeddings (as /v1/embeddings)", "OpenAIRequest", R("OpenAIResponse"), True),
}
deflt = post("model_task", "The model's task: /embed (or /similarity with TASK=sentence-similarity or object inputs), /predict for a classifier, /rerank for a reranker", "EmbedRequest", {})
deflt["post"]["requestBody"]["content"]["application/json"]["schema"] = {"oneOf": [R("EmbedRequest"), R("SimilarityRequest"), R("PredictRequest"), R("RerankRequest")]}
paths["/"] = dict(get("root_health", "Health check (as /health)", None), **deflt)
paths["/invocations"] = {"post": dict(deflt["post"], operationId="invocations")}
doc = {"openapi": "3.0.3", "info": {"title": "bert8 serve: text-embeddings-inference API", "description": "bert8's HTTP server, compatible with Hugging Face text-embeddings-inference", "license": {"name": "see the bert8 repository"}, "version": "@VERSION@"},
       "paths": paths, "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "with --api-key"}}}}
text = json.dumps(doc, indent=1)
out = pathlib.Path(__file__).resolve().parents[1] / "server" / "openapi.inc"
lines = ["/* openapi.inc: generated by scripts/gen_openapi.py (edit that, then run it); the OpenAPI",
         " * description of every route bert8 serve answers, as one C string (@VERSION@ is replaced",
         " * with bert8_version() when served). */"]
# The document's lines as C string literals, several to a source line (the string is the same).
cur = ""
for line in text.splitlines():
    lit = '"' + line.replace("\\", "\\\\").replace('"', '\\"') + '\\n"'
    if cur and len(cur) + 1 + len(lit) > 118:
        lines.append(cur)
        cur = lit
    else:
        cur = cur + " " + lit if cur else lit
lines.append(cur)
out.write_text("\n".join(lines) + "\n")
