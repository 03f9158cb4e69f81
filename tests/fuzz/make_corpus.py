#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/) from
the repository's fixtures plus hand-made edge cases; files named
regression_* (inputs the fuzzers found, each also a unit test) are kept. Deterministic: run it
again after changing it and commit what changes. Standard library only.

Usage: tests/fuzz/make_corpus.py   (from anywhere)
"""
import ast
import hashlib
import json
import re
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/fuzz/corpus"
DATA = ROOT / "tests/data"


def write(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


# --- safetensors -----------------------------------------------------------

def safetensors(tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape, data bytes)."""
    header, blob = {}, b""
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob


def raw_header(text, data=b""):
    text = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    t = "safetensors_header_fuzz"
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, float("inf"))
    write(t, "f32_matrix", safetensors([("w", "F32", [2, 2], f32)]))
    write(t, "all_dtypes", safetensors([
        ("f16", "F16", [2], struct.pack("<2H", 0x3C00, 0x7E00)),
        ("bf16", "BF16", [2], struct.pack("<2H", 0x3F80, 0xFF80)),
        ("f64", "F64", [1], struct.pack("<d", 3.25)),
        ("i64", "I64", [2], struct.pack("<2q", -1, 2**62)),
        ("i32", "I32", [1], struct.pack("<i", 7)),
        ("i16", "I16", [1], struct.pack("<h", -3)),
        ("i8", "I8", [2], b"\x80\x7f"),
        ("u8", "U8", [2], b"\x00\xff"),
        ("bool", "BOOL", [2], b"\x00\x01"),
    ], metadata={"format": "pt"}))
    write(t, "scalar_and_empty", safetensors([
        ("scalar", "F32", [], struct.pack("<f", 1.5)),
        ("empty", "F32", [0, 3], b""),
    ]))
    write(t, "unpadded", safetensors([("x", "I64", [1], struct.pack("<q", 5))], pad=False))
    # The real header of a fixture (GPT-2 tensor names, F16), its data cut.
    real = (DATA / "models/gpt2-random-sharded-fp16/model-00001-of-00006.safetensors").read_bytes()
    n = struct.unpack("<Q", real[:8])[0]
    write(t, "fixture_header_truncated_data", real[: 8 + n + 64])
    # Hand-made malformed files: each one error path.
    write(t, "empty_file", b"")
    write(t, "short_length", b"\x10\x00\x00")
    write(t, "length_beyond_file", struct.pack("<Q", 1 << 40) + b"{}")
    write(t, "length_zero", struct.pack("<Q", 0))
    write(t, "empty_header_object", raw_header("{}"))
    write(t, "not_json", raw_header("{\"w\": [1, 2"))
    write(t, "header_is_array", raw_header("[]"))
    write(t, "entry_not_object", raw_header('{"w": 3}'))
    write(t, "unknown_dtype", raw_header('{"w":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}}', b"\0"))
    write(t, "negative_dim", raw_header('{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', b"\0" * 4))
    write(t, "huge_dims", raw_header(
        '{"w":{"dtype":"F64","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}}', b"\0" * 8))
    write(t, "offsets_reversed", raw_header('{"w":{"dtype":"U8","shape":[1],"data_offsets":[1,0]}}', b"\0"))
    write(t, "offsets_overlap", raw_header(
        '{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
        '"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}', b"\0" * 3))
    write(t, "offsets_beyond_data", raw_header('{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}', b"\0"))
    write(t, "size_mismatch", raw_header('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', b"\0" * 4))
    write(t, "metadata_not_strings", raw_header('{"__metadata__":{"k":1}}'))
    write(t, "offsets_not_ints", raw_header('{"w":{"dtype":"U8","shape":[1],"data_offsets":[0.5,"1"]}}', b"\0"))
    write(t, "duplicate_keys", raw_header(
        '{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
        '"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0"))


def index_seeds():
    t = "safetensors_index_fuzz"
    s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    write(t, "valid", json.dumps({"metadata": {"total_size": 28},
                                  "weight_map": {"a": s1, "b": s1, "c": s2}}))
    write(t, "valid_subset", json.dumps({"weight_map": {"c": s2}}))
    write(t, "wrong_shard", json.dumps({"weight_map": {"a": s2, "c": s2}}))
    write(t, "missing_shard", json.dumps({"weight_map": {"a": "model-00003-of-00003.safetensors"}}))
    write(t, "traversal", json.dumps({"weight_map": {"a": "../" + s1}}))
    write(t, "absolute", json.dumps({"weight_map": {"a": "/etc/passwd"}}))
    write(t, "directory", json.dumps({"weight_map": {"a": "."}}))
    write(t, "shard_not_string", json.dumps({"weight_map": {"a": 1}}))
    write(t, "weight_map_array", json.dumps({"weight_map": [s1]}))
    write(t, "no_weight_map", json.dumps({"metadata": {}}))
    write(t, "empty_weight_map", json.dumps({"weight_map": {}}))
    write(t, "not_json", '{"weight_map": {"a": ')
    write(t, "empty", "")
    write(t, "fixture_index",
          (DATA / "models/gpt2-random-sharded-fp16/model.safetensors.index.json").read_bytes())


# --- config.json -----------------------------------------------------------

def config_seeds():
    t = "model_config_fuzz"
    configs = [ROOT / "models/tiny-gpt2/config.json"]
    configs += sorted((DATA / "models").glob("*/config.json"))
    for path in configs:
        write(t, "fixture_" + path.parent.name, path.read_bytes())
    # The config.json literals of the family tests (shaped like real
    # checkpoints': Llama 3.1, Qwen2.5, Pythia, OPT-350m, yarn, longrope, ...).
    n = 0
    for test in ("tests/model/family_config_test.cc", "tests/model/model_config_test.cc"):
        for literal in re.findall(r'R"\((.*?)\)"', (ROOT / test).read_text(), re.S):
            try:
                json.loads(literal)
            except ValueError:
                continue
            n += 1
            write(t, "test_%02d" % n, literal)
    # Variants of the Llama fixture: each a key the parser treats specially.
    base = json.loads((DATA / "models/llama/config.json").read_text())
    variants = {
        "rope_yarn": {"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                       "original_max_position_embeddings": 32}},
        "rope_longrope": {"rope_scaling": {"type": "longrope", "short_factor": [1.0] * 4,
                                           "long_factor": [2.0] * 4}},
        "rope_dynamic": {"rope_scaling": {"type": "dynamic", "factor": 2.0}},
        "rope_v5_parameters": {"rope_parameters": {"rope_type": "linear", "factor": 2.0,
                                                   "rope_theta": 10000.0}},
        "layer_types": {"sliding_window": 4, "use_sliding_window": True,
                        "layer_types": ["sliding_attention", "full_attention"]},
        "eos_list": {"eos_token_id": [1, 2, 3], "bos_token_id": None},
        "null_head_dim": {"head_dim": None, "num_key_value_heads": None},
        "huge_layers": {"num_hidden_layers": 2**40},
        "huge_hidden": {"hidden_size": 2**62, "num_attention_heads": 2},
        "float_sizes": {"hidden_size": 64.5},
        "negative_heads": {"num_attention_heads": -4},
        "wrong_types": {"rms_norm_eps": "small", "rope_theta": [1]},
    }
    for name, change in variants.items():
        write(t, "llama_" + name, json.dumps({**base, **change}))
    for model_type in ("gemma", "unknown_family"):
        write(t, "type_" + model_type, json.dumps({**base, "model_type": model_type}))
    write(t, "not_object", "[1, 2]")
    write(t, "not_json", '{"model_type": "gpt2", ')
    write(t, "empty", "")


# --- tokenizers -------------------------------------------------------------

def small_tokenizer(path, keep=320):
    """A real tokenizer.json with its vocabulary cut to `keep` entries (and
    the merges among them), every other component as shipped."""
    tok = json.loads(path.read_text())
    model = tok["model"]
    vocab = dict(sorted(model["vocab"].items(), key=lambda kv: kv[1])[:keep])
    merges = []
    for m in model.get("merges", []):
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    model["vocab"], model["merges"] = vocab, merges
    tok["added_tokens"] = [t for t in tok.get("added_tokens", [])][:8]
    return json.dumps(tok, ensure_ascii=False)


def tokenizer_json_seeds():
    t = "tokenizer_json_fuzz"
    for name in ("llama3", "llama2", "qwen3"):
        write(t, "fixture_" + name + "_cut", small_tokenizer(DATA / "tokenizers" / name / "tokenizer.json"))
    toy_vocab = {"a": 0, "b": 1, "c": 2, "bc": 3, "abc": 4, "ab": 5, "<unk>": 6, "\u2581": 7,
                 "<0x41>": 8, "<0xC3>": 9}
    toy = {"model": {"type": "BPE", "vocab": toy_vocab, "merges": ["b c", "a bc", "a b"],
                     "unk_token": "<unk>"}}
    write(t, "toy_bpe", json.dumps(toy))
    components = {
        "normalizers": {"normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": True, "strip_right": True},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
            {"type": "Prepend", "prepend": "\u2581"}]}},
        "nfd_nfc": {"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "NFC"}]}},
        "split_regex": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\s+|[a-c]{2}"}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}]}},
        "split_behaviors": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": "b"}, "behavior": b, "invert": False}
            for b in ("Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous")]}},
        "metaspace": {"pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
                                        "prepend_scheme": "first", "split": True},
                      "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}},
        "byte_fallback": {"model": {**toy["model"], "byte_fallback": True, "fuse_unk": True},
                          "decoder": {"type": "Sequence", "decoders": [
                              {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                              {"type": "ByteFallback"}, {"type": "Fuse"},
                              {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}},
        "ignore_merges_pairs": {"model": {"type": "BPE", "vocab": toy_vocab, "ignore_merges": True,
                                          "merges": [["b", "c"], ["a", "bc"]], "unk_token": "<unk>"}},
        "added_tokens": {"added_tokens": [
            {"id": 10, "content": "<s>", "special": True, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False},
            {"id": 11, "content": "abc", "special": False, "single_word": True, "lstrip": True,
             "rstrip": True, "normalized": True}]},
        "template_processing": {
            "added_tokens": [{"id": 10, "content": "<s>", "special": True}],
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}}],
                               "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [10], "tokens": ["<s>"]}}}},
        "bytelevel_all": {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True},
                          "post_processor": {"type": "ByteLevel", "trim_offsets": False},
                          "decoder": {"type": "ByteLevel"}},
        "unsupported_unigram": {"model": {"type": "Unigram", "vocab": [["a", -1.0]]}},
        "unsupported_precompiled": {"normalizer": {"type": "Precompiled", "precompiled_charsmap": ""}},
    }
    for name, change in components.items():
        write(t, "toy_" + name, json.dumps({**toy, **change}, ensure_ascii=False))
    write(t, "no_model", '{"normalizer": null}')
    write(t, "not_json", '{"model": ')


def tokenize_seeds():
    t = "tokenize_fuzz"
    texts = set()
    for ref in ("gpt2_reference.json", "llama3/llama3_reference.json", "llama2/llama2_reference.json",
                "qwen3/qwen3_reference.json"):
        d = json.loads((DATA / "tokenizers" / ref).read_text())
        for item in d if isinstance(d, list) else d.get("cases", d.get("strings", [])):
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                texts.add(item["text"])
    sample = (DATA / "english-sample.txt").read_text()
    texts.add(sample[:2000])
    texts.update([
        "", " ", "\n\n\n", "\t \t", "a" * 300, " " * 100 + "x", "<|begin_of_text|>Hi<|eot_id|>",
        "<|endoftext|><|endoftext|>", "<s>[INST] hi [/INST]</s>", "\u2581\u2581x", "caf\u00e9 cafe\u0301",
        "\U0001F600\U0001F468\u200d\U0001F469", "\u4f60\u597d\uff0c\u4e16\u754c", "\u0000nul\u0000",
        "'s 're 've 'm 'll 'd", "123456789 3.14159", "\r\n\u00a0\u2028", "\ufeffBOM",
    ])
    for text in sorted(texts):
        write(t, "text_" + hashlib.sha1(text.encode()).hexdigest()[:12], text)
    # Invalid UTF-8: each must be refused by every tokenizer.
    for name, data in {"lone_continuation": b"a\x80b", "overlong": b"\xc0\xaf", "surrogate": b"\xed\xa0\x80",
                       "truncated": b"\xe2\x82", "beyond_max": b"\xf4\x90\x80\x80", "ff": b"\xff"}.items():
        write(t, "invalid_" + name, data)


# --- chat templates ----------------------------------------------------------

def c_string_literals(path, call):
    """The first string argument of every `call("...")` in a C++ test file."""
    out = []
    for m in re.finditer(re.escape(call) + r'\(\s*("(?:[^"\\]|\\.)*")', path.read_text()):
        try:
            out.append(ast.literal_eval(m.group(1)))
        except (ValueError, SyntaxError):
            pass
    return out


def cpp_char_arrays(path):
    """`const char kName[] = "..." "...";` constants of a C++ file."""
    out = {}
    for m in re.finditer(r'const char (k\w+)\[\]\s*=\s*((?:\s*"(?:[^"\\]|\\.)*")+);', path.read_text()):
        out[m.group(1)] = "".join(ast.literal_eval(s) for s in re.findall(r'"(?:[^"\\]|\\.)*"', m.group(2)))
    return out


def chat_seeds():
    t = "chat_template_fuzz"
    conversations = []
    for name in ("llama3", "qwen3"):
        chat = json.loads((DATA / "tokenizers" / name / (name + "_chat.json")).read_text())["chat"]
        conversations.append(json.dumps(chat["messages"], ensure_ascii=False))
        source = (DATA / "tokenizers" / name / "chat_template.jinja").read_text()
        write(t, "fixture_" + name, source + "\0" + conversations[-1] + "\0\x01")
        write(t, "fixture_" + name + "_default", source)
    llama2 = json.loads((DATA / "tokenizers/llama2/tokenizer_config.json").read_text()).get("chat_template")
    if isinstance(llama2, str):
        write(t, "fixture_llama2", llama2 + "\0" + conversations[0])
    for name, source in sorted(cpp_char_arrays(ROOT / "tests/engine/chat_prompt_test.cc").items()):
        if name.endswith("Template"):
            write(t, "family_" + name[1:], source + "\0" + conversations[0] + "\0\x01")
    tests = ROOT / "tests/chat_template/chat_template_test.cc"
    for i, source in enumerate(c_string_literals(tests, "RenderOrDie") + c_string_literals(tests, "Parse")):
        write(t, "test_%02d" % i, source)
    edge = {
        "deep_nesting": "{{ " + "(" * 200 + "1" + ")" * 200 + " }}",
        "recursive_macro": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "big_range": "{% for i in range(100000000) %}{% endfor %}",
        "string_repeat": "{{ 'ab' * 1000000000 }}",
        "nested_loops": "{% for a in range(1000) %}{% for b in range(1000) %}x{% endfor %}{% endfor %}",
        "bad_messages": "{{ messages[0].content }}\0{\"not\": \"a list\"}",
        "tool_fields": "{{ messages | tojson }}\0[{\"role\":\"tool\",\"content\":\"1\",\"name\":\"f\",\"extra\":[1,{}]}]",
        "raise": "{{ raise_exception('no') }}",
        "strftime": "{{ strftime_now('%Y-%m-%d') }}",
        "unicode_slices": "{{ messages[0].content[::-1] }}{{ messages[0].content[-100:100] }}",
    }
    for name, source in edge.items():
        write(t, "edge_" + name, source)


# --- requests (protobuf wire format, written by hand: no protobuf module) -----

def varint(n):
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def field(num, value):
    if isinstance(value, bool):
        return varint(num << 3) + varint(int(value))
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, float):
        return varint(num << 3 | 1) + struct.pack("<d", value)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def packed(num, values):
    return field(num, b"".join(varint(v) for v in values))


def request_seeds():
    t = "request_fuzz"
    # Field numbers as in proto/attnscope/v1/attnscope.proto.
    ids = field(3, packed(1, [464, 3797, 3332]))  # TokenIds.ids
    conversation = (field(1, field(1, "user") + field(2, "Hi there")) +
                    field(1, field(1, "assistant") + field(2, "Hello")) + field(2, True))
    chat = field(10, conversation)
    # AnalyzeOptions: return_attention 1, attention_layers 2, attention_heads 3,
    # attention_dtype 4, hidden_state_norms 5, threshold 6, template 7,
    # query_block_size 8.
    options = field(4, field(1, True) + packed(2, [0, 1]) + packed(3, [0]) + field(4, 2) +
                    field(5, False) + field(6, 6.0) + field(7, "chat") + field(8, 2))
    seeds = {
        "analyze_text": field(2, "The cat sat on the keyboard again.") + field(12, 1),
        "analyze_ids": ids + options,
        "analyze_chat": chat + field(11, False),
        "analyze_model_name": field(1, "tiny-gpt2") + field(2, "Hi"),
        "analyze_bad_utf8": field(2, b"\xff\xfe"),
        "analyze_empty_text": field(2, ""),
        "analyze_negative_ids": field(3, packed(1, [-1, 50257, 2**40])),
        "analyze_bad_options": field(2, "x") + field(4, field(6, float("nan")) + packed(3, [99]) +
                                                     field(4, 7) + field(8, -3) + field(7, "odd")),
        "generate_text": field(2, "Once upon a time") + field(4, 8) +
                         field(5, field(1, 0.8) + field(2, 40) + field(3, 0.95) + field(4, 42)) +
                         field(6, 3) + field(7, True) + field(8, False),
        "generate_ids_too_long": ids + field(4, 2**31 - 1),
        "generate_bad_sampling": field(2, "x") + field(4, 1) + field(5, field(1, -1.0) + field(3, 2.0)),
        "generate_chat": chat + field(4, 4),
        # LensRequest: text 2, ids 3, chat 4, logit_lens 6, attribution 7,
        # rollout 8, lens_positions 10, top_k 11, attribution_positions 12,
        # target_ids 13, target_text 14, rollout_queries 15, precision 20,
        # query_block_size 21.
        "lens_everything": field(2, "The cat sat on the mat.") + field(6, True) + field(7, True) +
                           field(8, True) + field(10, "all") + field(11, 5) + field(12, "0,3-4") +
                           field(15, "2,4") + field(20, "bf16") + field(21, 2),
        "lens_ids_targets": ids + field(7, True) + field(12, "0-2") + packed(13, [11, 13, 15]),
        "lens_target_text": field(2, "Hi there") + field(7, True) + field(14, " there"),
        "lens_chat": field(4, conversation) + field(6, True) + field(10, "last"),
        "lens_bad": field(2, "x") + field(11, 0) + field(15, "all") + packed(13, [2**64 - 1]) +
                    field(21, 2**64 - 1) + field(20, "fp8"),
        # PatchRequest: clean_text 2, clean_ids 3, corrupted_text 4,
        # corrupted_ids 5, kind 7, target_a_id 8, target_b_id 9,
        # target_a_text 10, target_b_text 11.
        "patch_text": field(2, "The Eiffel Tower is in") + field(4, "The Colosseum is in") +
                      field(7, 1) + field(10, " Paris") + field(11, " Rome"),
        "patch_ids_residual": ids + field(5, packed(1, [464, 3797, 3333])) + field(7, 2) +
                              field(8, 11) + field(9, 13),
        "patch_bad": field(2, "a") + field(8, 2**40) + field(11, "two tokens") + field(7, 9),
        "empty": b"",
    }
    for name, data in seeds.items():
        write(t, name, data)


def main():
    # Inputs the fuzzers found (regression_*: each also a unit test) stay.
    for old in OUT.glob("*/*"):
        if not old.name.startswith("regression_"):
            old.unlink()
    safetensors_seeds()
    index_seeds()
    config_seeds()
    tokenizer_json_seeds()
    tokenize_seeds()
    chat_seeds()
    request_seeds()
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    for d in sorted(OUT.iterdir()):
        files = list(d.iterdir())
        print("%-26s %4d seeds %8d bytes" % (d.name, len(files), sum(f.stat().st_size for f in files)))
    print("total %d bytes" % total)


if __name__ == "__main__":
    main()
