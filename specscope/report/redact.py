"""Redaction: what a report, or a terminal paste of specscope's output, must not leak.

A policy, not a pattern list. In this order, on every string:

1. Terminal control sequences (ANSI CSI and OSC, other escapes, C0/C1 controls but tab and
   newline, bidi overrides) are removed: always, even with redaction off.
2. Known secret shapes: AWS key ids and secret keys, GitHub, GitLab, Slack, Google,
   OpenAI/Anthropic (``sk-``), Hugging Face tokens, JWTs, bearer and basic auth, PEM private
   keys, long random strings, and credentials in URLs.
3. Values assigned to a secret name (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD*``,
   ``api_key``, ...) in any form: ``NAME=v``, ``'name': v``, ``"name": v``, ``--name v``,
   ``name: v``; every element of a list value.
4. With ``args`` (reports): in startup args (``non-default args``, ``Namespace(...)``,
   ``ServerArgs(...)``, ``vllm serve`` command lines, ...) and env assignments, the value
   of every name that is not on ``ALLOWED_ARGS`` / ``ALLOWED_ENV`` (known-harmless vLLM and
   SGLang settings).
5. E-mail addresses and home folders (``/home/<user>``, ``/Users/<user>``, ``C:\\Users\\x``).
6. With ``hosts`` (reports, by default): host names and IP addresses.

Every string from a log or a store goes through one ``Redactor`` before it reaches a report;
``redact_json`` walks what ``--json`` prints. Redacting twice changes nothing (and counts
nothing twice)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import regex

MASK = "***"

# -- 1. terminal control sequences ----------------------------------------------------------------

_CONTROLS = regex.compile(
    r"\x1b\][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # OSC (title, hyperlink) to BEL or ST
    r"|\x1b[P^_X][^\x1b\x9c\n]*(?:\x1b\\|\x9c)?"  # DCS, PM, APC, SOS strings
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI (colours, cursor moves, erase)
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # CSI, 8-bit
    r"|\x9d[^\x07\x1b\x9c\n]*(?:\x07|\x9c)?"  # OSC, 8-bit
    r"|\x1b[ -/]*[0-~]?"  # any other escape
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # C0 but tab and newline, DEL, C1
    r"|[\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]"  # bidi marks and overrides
)


def strip_controls(text: str) -> str:
    """``text`` without what a terminal would act on (colours, titles, hyperlinks, cursor
    moves, bells, carriage returns) or what reorders it on screen (bidi overrides)."""
    return _CONTROLS.sub("", text)


# -- 2. secret shapes ---------------------------------------------------------------------------

_PEM = regex.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    regex.DOTALL,
)
_URL_USERINFO = regex.compile(
    r"(?i)(\b[a-z][a-z0-9+.-]*://)(?!\*\*\*[:@])([^/\s@'\"<>]+?)(:[^/\s@'\"<>]*)?@"
)
# (what, pattern, replacement): run in this order, after private keys and URL credentials.
_SHAPES: tuple[tuple[str, regex.Pattern[str], str], ...] = (
    (
        "token",
        regex.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
        "eyJ***",
    ),
    (
        "token",
        regex.compile(
            r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|AKPA|ANPA|ANVA|AROA)[A-Z0-9]{16}\b"
        ),
        "AKIA***",
    ),
    ("token", regex.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_\w{20,})"), "gh*_***"),
    (
        "token",
        regex.compile(r"\bgl(?:pat|dt|ptt|rt|cbt|imt|soat|ft|oas|agent)-[A-Za-z0-9_-]{10,}"),
        "glpat-***",
    ),
    ("token", regex.compile(r"\bxox[abposre]-[A-Za-z0-9-]{8,}"), "xox*-***"),
    ("token", regex.compile(r"(hooks\.slack\.com/services/)[A-Za-z0-9/_-]+"), r"\1***"),
    ("token", regex.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), "AIza***"),
    ("token", regex.compile(r"\bya29\.[0-9A-Za-z_-]{20,}"), "ya29.***"),
    ("token", regex.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), "sk-***"),
    ("token", regex.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"), "sk_***"),
    ("token", regex.compile(r"\bhf_(?=[a-z]*[A-Z0-9])[A-Za-z0-9]{8,}"), "hf_***"),
    ("token", regex.compile(r"\b(?:npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{40,})"), "***"),
    ("token", regex.compile(r"(?i)\b(Bearer)\s+(?!\*\*\*)[A-Za-z0-9._~+/=-]{6,}"), r"\1 ***"),
    (
        "token",
        regex.compile(r"(?i)\b(Basic)\s+(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}"),
        r"\1 ***",
    ),
    # A long random string (an AWS secret key, an unprefixed API key): mixed case and digits,
    # no separators. Hex digests (lower case) and words are left alone.
    (
        "token",
        regex.compile(
            r"(?<![\w/+.-])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[0-9])"
            r"[A-Za-z0-9][A-Za-z0-9/+]{31,}={0,2}(?![\w/+=.-])"
        ),
        MASK,
    ),
)

# -- 3, 4. assignments -------------------------------------------------------------------------

_SECRET_NAME = regex.compile(
    r"password|passwd|passphrase|secret|credential|private_?key|api_?key|access_?key"
    r"|(?:auth|access|refresh|session|id|bearer)_?token"
    r"|(?:^|_)(?:key|token|pat|pwd|pw|auth|authorization|cookie|set_cookie|signature|sig|dsn"
    r"|jwt|sas|webhook|webhook_url|session_?id|otp|pin)$"
)
_HEADER_NAMES = {"cookie", "set_cookie"}  # their value runs to the end of the line
_AUTH_NAMES = {"authorization", "proxy_authorization"}
_AUTH_VALUE = regex.compile(r"[A-Za-z]+[ \t]+[^\s'\",;]+|[^\s'\",;]+")
# Startup args whose values tell how speculative decoding was set up and say nothing about
# who ran it: read from the args in fixtures/, the seeds and parsers/, and vLLM's and
# SGLang's documented settings. Names are compared lower-cased, '-' and '.' read as '_'.
ALLOWED_ARGS = frozenset(
    """
    model model_tag model_path model_name served_model_name tokenizer tokenizer_path
    tokenizer_mode tokenizer_revision revision code_revision dtype quantization kv_cache_dtype
    calculate_kv_scales max_model_len max_seq_len context_length max_num_seqs
    max_num_batched_tokens max_running_requests max_total_tokens max_prefill_tokens
    chunked_prefill_size tensor_parallel_size tp_size tp pipeline_parallel_size pp_size pp
    data_parallel_size dp_size dp expert_parallel_size ep_size enable_expert_parallel
    decode_context_parallel_size enable_dp_attention enable_prefix_caching
    no_enable_prefix_caching prefix_caching_hash_algo disable_radix_cache enable_chunked_prefill
    no_enable_chunked_prefill chunked_prefill_enabled enable_mixed_chunk gpu_memory_utilization
    mem_fraction_static block_size page_size swap_space cpu_offload_gb num_gpu_blocks_override
    speculative_config speculative_model speculative_draft_model_path speculative_algorithm
    speculative_num_steps speculative_eagle_topk speculative_num_draft_tokens
    speculative_draft_tensor_parallel_size speculative_disable_by_batch_size
    speculative_max_model_len speculative_draft_model_revision speculative_draft_model_quantization
    speculative_accept_threshold_single speculative_accept_threshold_acc speculative_token_map
    num_speculative_tokens num_spec_tokens num_lookahead_slots method draft_model
    draft_tensor_parallel_size prompt_lookup_max prompt_lookup_min disable_padded_drafter_batch
    disable_by_batch_size attention_backend mm_encoder_attn_backend sampling_backend
    moe_runner_backend trust_remote_code enforce_eager disable_cuda_graph cuda_graph_max_bs
    cuda_graph_bs cuda_graph_sizes compilation_config level mode cudagraph_mode use_cudagraph
    full_cuda_graph cudagraph_capture_sizes splitting_ops use_inductor backend seed load_format
    optimization_level performance_mode async_scheduling enable_auto_tool_choice tool_call_parser
    reasoning_parser guided_decoding_backend skip_tokenizer_init disable_custom_all_reduce
    distributed_executor_backend disable_log_stats disable_log_requests enable_log_requests
    uvicorn_log_level log_level port subparser dispatch_function device device_config
    decoding_config chat_template_content_format limit_mm_per_prompt generation_config
    max_logprobs enable_sleep_mode num_scheduler_steps scheduling_policy schedule_policy
    schedule_conservativeness stream_interval decode_log_interval enable_metrics
    enable_torch_compile torch_compile_max_bs use_v2_block_manager preemption_mode
    use_async_output_proc enable_lora max_loras max_lora_rank pid server_args args engine_args
    chat_template chat_template_kwargs default_chat_template_kwargs
    spec_type spec_draft_n_max spec_draft_n_min spec_draft_p_min spec_synthetic_acceptance_rates
    spec_synthetic_acceptance_length model_draft draft_max draft_min draft_p_min hf_repo
    hf_repo_draft ctx_size n_gpu_layers gpu_layers_draft
    gpus shm_size ipc memory memory_swap runtime rm
    level levelname time timestamp ts asctime message msg file_path filename line_number lineno
    logger func_name funcname module process thread
    """.split()
)
# Environment settings, likewise (the exact names; secret names are caught before this).
ALLOWED_ENV = frozenset(
    """
    CUDA_VISIBLE_DEVICES HIP_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES ASCEND_RT_VISIBLE_DEVICES
    CUDA_LAUNCH_BLOCKING CUDA_DEVICE_ORDER NCCL_DEBUG NCCL_P2P_DISABLE NCCL_IB_DISABLE
    NCCL_CUMEM_ENABLE OMP_NUM_THREADS TORCH_CUDA_ARCH_LIST PYTORCH_CUDA_ALLOC_CONF
    PYTORCH_ALLOC_CONF TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL TOKENIZERS_PARALLELISM
    HF_HUB_OFFLINE TRANSFORMERS_OFFLINE HF_HUB_ENABLE_HF_TRANSFER HF_XET_HIGH_PERFORMANCE
    VLLM_ATTENTION_BACKEND VLLM_FLASH_ATTN_VERSION VLLM_LOGGING_LEVEL VLLM_WORKER_MULTIPROC_METHOD
    VLLM_ALL2ALL_BACKEND VLLM_MLA_DISABLE VLLM_ROCM_USE_AITER VLLM_RPC_TIMEOUT
    VLLM_LOG_STATS_INTERVAL VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
    VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS VLLM_ENGINE_READY_TIMEOUT_S VLLM_ENGINE_ITERATION_TIMEOUT_S
    VLLM_SLEEP_WHEN_IDLE VLLM_TARGET_DEVICE MODEL_NAME INPUT_LEN OUTPUT_LEN NUM_PROMPTS
    GPU_MEM_UTIL ENFORCE_EAGER TP_SIZE CONCURRENCY MAX_CONCURRENCY REQUEST_RATE
    """.split()
)
_ALLOWED_ENV_PREFIXES = (
    "VLLM_USE_",
    "VLLM_ENABLE_",
    "VLLM_DISABLE_",
    "SGLANG_USE_",
    "SGLANG_ENABLE_",
    "SGLANG_DISABLE_",
)
# Lines that hold startup args: their every name=value is judged against the allow-list.
_ARG_LINE = regex.compile(
    r"(?i)non-default args|\bNamespace\(|ServerArgs\(|\bserver_args\s*=|with config:"
    r"|EngineArgs\(|\bLLM\(|\bvllm\s+serve\b|\bvllm\.entrypoints|sglang\.launch_server"
    r"|\bsglang\s+serve\b|\bdocker\s+run\b|\bpython3?\s+-m\s+(?:vllm|sglang)|^\s*--[a-z]"
)
_ENV_LINE = regex.compile(r"^\s*(?:export\s+|ENV\s+|Environment=[\"']?|-e\s+)?[A-Z_][A-Z0-9_]*=")
_ENV_NAME = regex.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
# Where a name meets its value. The string alternative lets the allow-list pass step over
# quoted text that holds no args.
_KEY = regex.compile(
    r"(?P<q>['\"])(?P<qname>[A-Za-z_][\w.-]*)(?P=q)\s*:\s*"
    r"|(?<![\w-])--(?P<oname>[A-Za-z][\w.-]*)(?:=|[ \t]+(?=[^\s-]))"
    r"|(?<![\w.$/-])(?P<name>[A-Za-z_][\w.-]*)(?:\s*=(?!=)\s*|(?P<colon>:[ \t]*))"
    r"|(?P<str>'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\")"
)
_ARGISH = regex.compile(r"--\w|\w=|['\"]\w+['\"]\s*:")
_COMMAND = regex.compile(r"(?<![\w-])--\w")
_CALL = regex.compile(r"[A-Za-z_][\w.]*\(")
_EMPTY = frozenset({"", "None", "none", "null", "True", "False", "true", "false", "''", '""'})
_NUMBER = regex.compile(r"[+-]?[\d.,_%]+")
# A value that is hidden already (whole): left as it is, and not counted again.
_DONE = regex.compile(r"(?i)['\"]?(?:bearer |basic )?[\w.*-]{0,12}\*\*\*['\"]?")
# Allowed names whose text is a log message: what it says is judged like a line.
_MESSAGES = frozenset({"message", "msg"})
_OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}

# -- 5, 6. e-mail, home folders, hosts -------------------------------------------------------------

_PERSONAL: tuple[tuple[str, regex.Pattern[str], str], ...] = (
    (
        "e-mail",
        regex.compile(
            r"(?<![\w.+-])[A-Za-z0-9][\w.%+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
        ),
        "***@***",
    ),
    (
        "path",
        regex.compile(r"(/home/|/Users/|/usr/home/|/export/home/)(?!~)[^/\s'\"#:;,)\]}\\]+"),
        r"\1~",
    ),
    ("path", regex.compile(r"(?i)\b([A-Z]:\\+Users\\+)(?!~)[^\\\s'\"]+"), r"\1~"),
)
_TLDS = (
    "com|net|org|edu|gov|mil|io|ai|dev|cloud|co|me|biz|xyz|tech|us|uk|de|fr|nl|cn|jp|kr|ru|br"
    "|ca|au|eu|ch|se|internal|local|localdomain|lan|corp|intranet|home|private|example|invalid"
    "|svc|cluster|arpa"
)
# Public hosts that say nothing about who ran the server: kept, so links to docs and models
# still read (loopback addresses likewise).
_PUBLIC = (
    r"(?!(?:localhost|host)(?![\w.-])|(?:[\w-]+\.)*(?:huggingface\.co|hf\.co|github\.com"
    r"|githubusercontent\.com|pytorch\.org|vllm\.ai|nvidia\.com|python\.org|pypi\.org"
    r"|modelscope\.cn|ray\.io)(?![\w.-]))"
)
_HOSTS: tuple[tuple[str, regex.Pattern[str], str], ...] = (
    (
        "host",
        regex.compile(
            r"(?i)(\b[a-z][a-z0-9+.-]*://(?:[^/\s@'\"<>]*@)?)"
            + _PUBLIC
            + r"(?:\[[0-9a-f:.]+\]|[\w.-]+)"
        ),
        r"\1host",
    ),
    (
        "host",  # an IPv4 address; not a version (0.10.1.1, v1.2.3.4, version 1.2.3.4)
        regex.compile(
            r"(?i)(?<![\w.]|\bv|version\s*|==\s*)(?!0\.|127\.)(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}"
            r"(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w.]*\d|\+|rc)"
        ),
        "x.x.x.x",
    ),
    (
        "host",
        regex.compile(
            r"(?i)(?<![\w:.])(?=[0-9a-f:]*::|(?:[0-9a-f]{1,4}:){5})(?:[0-9a-f]{0,4}:){2,7}"
            r"[0-9a-f]{0,4}(?![\w:])"
        ),
        "x::x",
    ),
    ("host", regex.compile(r"\bip-\d{1,3}(?:-\d{1,3}){3}\b"), "host"),
    (
        "host",
        regex.compile(
            r"(?i)(?<![\w.@/-])"
            + _PUBLIC
            + r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:"
            + _TLDS
            + r")(?![\w-]|\.\w)"
        ),
        "host",
    ),
    (
        "host",
        regex.compile(
            r"(?i)(\b(?:host_?name|hostname|host|node_?name|node)['\"]?\s*[=:]\s*['\"]?"
            r"|(?<![\w-])--host(?:name)?[ \t]+['\"]?)"
            r"(?!host\b|\*\*\*|x\.x|none\b|null\b|localhost\b)([A-Za-z][\w.-]*)"
        ),
        r"\1host",
    ),
    (
        "host",
        regex.compile(r"(?i)\b([a-z_][\w-]*@)(?!(?:local)?host\b)[a-z0-9][\w-]*(?=:[~/])"),
        r"\1host",
    ),
    (
        "host",
        regex.compile(r"(?<![\w.-])(?!host\b)[A-Za-z][\w.-]*(?=:\d+:\d+ \[\d+\] NCCL)"),
        "host",
    ),
)


def _normal(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_").strip("_")


def is_secret_name(name: str) -> bool:
    """Whether a setting, variable or header of this name holds a secret (``HF_TOKEN``,
    ``aws_secret_access_key``, ``--api-key``, ``db_password``, ``Authorization``, ...)."""
    return bool(_SECRET_NAME.search(_normal(name)))


def _allowed_arg(name: str) -> bool:
    n = _normal(name)
    return n in ALLOWED_ARGS or n.removeprefix("no_") in ALLOWED_ARGS


def _allowed_env(name: str) -> bool:
    return name in ALLOWED_ENV or name.startswith(_ALLOWED_ENV_PREFIXES)


def _string_end(s: str, i: int) -> int:
    quote, j = s[i], i + 1
    while j < len(s):
        if s[j] == "\\":
            j += 2
            continue
        if s[j] == quote:
            return j + 1
        j += 1
    return len(s)


def _bracket_end(s: str, i: int) -> int:
    """The end of the bracketed value opening at ``i`` (quotes respected); the end of the
    line when it never closes."""
    stack, j = [_OPEN[s[i]]], i + 1
    while j < len(s) and stack:
        c = s[j]
        if c in "'\"":
            j = _string_end(s, j)
            continue
        if c in _OPEN and (c != "<" or stack[-1] == ">"):
            stack.append(_OPEN[c])
        elif c == stack[-1]:
            stack.pop()
        elif c in ")]}" and c in stack:
            while stack and stack[-1] != c:
                stack.pop()
            stack.pop()
        j += 1
    return j


def _value_end(s: str, i: int, stops: str) -> tuple[int, str]:
    """Where the value starting at ``i`` ends, and its kind: string, bracket or bare."""
    if i >= len(s):
        return i, "bare"
    if s[i] in "'\"":
        return _string_end(s, i), "string"
    if s[i] in _OPEN:
        return _bracket_end(s, i), "bracket"
    if call := _CALL.match(s, i):
        return _bracket_end(s, call.end() - 1), "bracket"
    j = i
    while j < len(s) and s[j] not in stops:
        j += 1
    return j, "bare"


def _elements(inner: str) -> list[str]:
    """The top-level, comma-separated elements of a list's inside."""
    out, start, j = [], 0, 0
    while j < len(inner):
        c = inner[j]
        if c in "'\"":
            j = _string_end(inner, j)
            continue
        if c in _OPEN:
            j = _bracket_end(inner, j)
            continue
        if c == ",":
            out.append(inner[start:j])
            start = j + 1
        j += 1
    out.append(inner[start:])
    return out


def _masked(value: str) -> tuple[str, int]:
    """The value with what it holds replaced (a list element by element), and how many
    values were replaced; (value, 0) when there is nothing to hide."""
    v = value.strip()
    lead, trail = value[: len(value) - len(value.lstrip())], value[len(value.rstrip()) :]
    if v in _EMPTY or _DONE.fullmatch(v):
        return value, 0
    if v[0] in "'\"":
        return f"{lead}{v[0]}{MASK}{v[0]}{trail}", 1
    if v[0] in "[(" and v[-1:] in "])" and not _CALL.match(v):
        parts, n = [], 0
        for element in _elements(v[1:-1]):
            masked, k = _masked(element)
            parts.append(masked)
            n += k
        return lead + v[0] + ",".join(parts) + v[-1] + trail, n
    return lead + MASK + trail, 1


# -- the redactor ----------------------------------------------------------------------------------


@dataclass
class Redactor:
    """Applies the policy above and counts what it replaced. ``enabled=False`` only strips
    terminal controls; ``hosts`` also hides hosts and IPs; ``args`` hides startup args and
    env values not on the allow-list."""

    enabled: bool = True
    hosts: bool = True
    counts: Counter[str] = field(default_factory=Counter)
    # Source paths the store knows, as the report shows them (relative, or the file name).
    known_paths: dict[str, str] = field(default_factory=dict)
    args: bool = True
    # What each text became and what that counted: reports repeat a model or a method in
    # every row, and a run's thousand rows should not cost a thousand passes.
    _seen: dict[tuple[str, int, bool, bool], tuple[str, Counter[str]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def __call__(self, text: str | None) -> str | None:
        if text is None:
            return None
        if not self.enabled:
            return strip_controls(text)
        key = (text, len(self.known_paths), self.hosts, self.args)
        if (seen := self._seen.get(key)) is None:
            before = self.counts.copy()
            out = self._redact(strip_controls(text))
            if len(self._seen) < 100_000:
                self._seen[key] = (out, self.counts - before)
            return out
        self.counts.update(seen[1])
        return seen[0]

    def _redact(self, text: str) -> str:
        for path in sorted(self.known_paths, key=len, reverse=True):
            if path in text and path != self.known_paths[path]:
                text = text.replace(path, self.known_paths[path])
        text = self._sub("private key", _PEM, "***PRIVATE KEY***", text)
        text = self._sub("credential", _URL_USERINFO, _userinfo, text)
        for what, pattern, replacement in _SHAPES:
            text = self._sub(what, pattern, replacement, text)
        text = "\n".join(self._line(line) for line in text.split("\n"))
        for what, pattern, replacement in _PERSONAL + (_HOSTS if self.hosts else ()):
            text = self._sub(what, pattern, replacement, text)
        return text

    def text(self, text: str) -> str:
        """``self(text)`` for a text that is there (typed for callers that have one)."""
        return self(text) or ""

    def walk(self, value: Any, key: str | None = None) -> Any:
        """A JSON-able value with every string redacted; under a secret name (``api_key``,
        ``password``, ...) a value is hidden whole."""
        secret = self.enabled and key is not None and is_secret_name(key)
        if isinstance(value, str):
            if secret and value.strip() not in _EMPTY and not _DONE.fullmatch(value.strip()):
                self.counts["token"] += 1
                return MASK
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.walk(v, k if isinstance(k, str) else None) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.walk(v, key) for v in value]
        if secret and isinstance(value, int | float) and not isinstance(value, bool):
            self.counts["token"] += 1
            return MASK
        return value

    def summary(self) -> str:
        if not self.enabled:
            return "Redaction was off (--no-redact): this report may hold secrets."
        kept = "" if self.hosts else " Host names and IP addresses were kept (--no-redact-hosts)."
        if not self.counts:
            return "Redaction found nothing to hide." + kept
        parts = [f"{n} {what}{'s' if n != 1 else ''}" for what, n in sorted(self.counts.items())]
        return "Redacted " + ", ".join(parts) + "." + kept

    def _sub(
        self, what: str, pattern: regex.Pattern[str], repl: str | Callable[[Any], str], text: str
    ) -> str:
        text, n = pattern.subn(repl, text)
        if n:
            self.counts[what] += n
        return text

    def _line(self, line: str) -> str:
        if "=" not in line and ":" not in line and "--" not in line:
            return line
        line = self._assignments(line, policy=False)
        if self.args:
            line = self._assignments(line, policy=True)
        return line

    def _assignments(
        self, line: str, *, policy: bool, within: tuple[bool, bool] = (False, False)
    ) -> str:
        """Values assigned to secret names (``policy=False``), or (``policy=True``) to names
        not on the allow-list in a line of startup args or env assignments. ``within``: the
        line is the inside of a quoted text on a line of args (or of env assignments)."""
        arg_line = policy and (within[0] or bool(_ARG_LINE.search(line)))
        env_line = policy and (within[1] or bool(_ENV_LINE.match(line)))
        if policy and not (arg_line or env_line or _ENV_NAME.search(line)):
            return line
        out, i = [], 0
        while (m := _KEY.search(line, i)) is not None:
            if (literal := m.group("str")) is not None:
                if not policy:  # secrets are looked for everywhere, quoted or not
                    out.append(line[i : m.start() + 1])
                    i = m.start() + 1
                    continue
                # A quoted text: judged on its own when it holds args, else passed over.
                out.append(line[i : m.start()])
                if _ARGISH.search(literal):
                    literal = self._quoted(literal, (arg_line, env_line))
                out.append(literal)
                i = m.end()
                continue
            name = m.group("qname") or m.group("oname") or m.group("name")
            colon = m.group("colon") is not None
            judge = self._judge(name, m, policy, arg_line, env_line)
            out.append(line[i : m.end()])
            i = m.end()
            if judge is None:
                continue
            env = bool(_ENV_NAME.fullmatch(name)) and not colon
            header = colon and _normal(name) in _HEADER_NAMES
            stops = "'\"\n" if header else " \t'\"\n" if env else " \t,;)]}&'\"\n"
            end, kind = _value_end(line, i, stops)
            if colon and _normal(name) in _AUTH_NAMES and (auth := _AUTH_VALUE.match(line, i)):
                end, kind = auth.end(), "bare"  # "Bearer <token>": the scheme and the token
            value = line[i:end]
            if judge:  # hide it
                if colon and _NUMBER.fullmatch(value.strip() or "x"):
                    continue  # "#token: 515" is a count, not a secret
                masked, n = _masked(value)
                if n:
                    self.counts["token" if not policy else "setting"] += n
                out.append(masked)
                i = end
            elif kind == "bracket":
                continue  # allowed, and it holds settings of its own: look inside
            elif kind == "string" and (_COMMAND.search(value) or _normal(name) in _MESSAGES):
                out.append(self._quoted(value, (arg_line, env_line)))  # a command, a message
                i = end
            else:
                out.append(value)
                i = end
        out.append(line[i:])
        return "".join(out)

    def _quoted(self, literal: str, within: tuple[bool, bool]) -> str:
        """A quoted text of a line of args, its inside judged like a line of its own."""
        closed = len(literal) > 1 and literal[-1] == literal[0]
        inside = literal[1:-1] if closed else literal[1:]
        judged = self._assignments(inside, policy=True, within=within)
        return literal[0] + judged + (literal[0] if closed else "")

    def _judge(
        self, name: str, m: Any, policy: bool, arg_line: bool, env_line: bool
    ) -> bool | None:
        """True: hide the value; False: keep it (and pass over it); None: not a setting."""
        if not policy:
            return True if is_secret_name(name) else None
        if m.group("colon") is not None:
            return None  # "name: value" is prose or a log field, never judged by the list
        if (m.group("name") and _ENV_NAME.fullmatch(name)) or (env_line and name.isupper()):
            return not _allowed_env(name)
        if m.group("oname") is not None and _normal(name) in ("e", "env"):
            return None  # docker's -e/--env NAME=value: the NAME is judged
        if not arg_line:
            return None
        return not _allowed_arg(name)


def _userinfo(m: Any) -> str:
    return f"{m.group(1)}{MASK}{':' + MASK if m.group(3) is not None else ''}@"


def redact_json(obj: Any, redactor: Redactor | None = None) -> Any:
    """What ``--json`` prints, redacted as the text output is: every string through the
    redactor (secrets and home paths; hosts only with a redactor that hides them), and the
    value of any key with a secret name hidden whole."""
    return (redactor or Redactor(hosts=False, args=False)).walk(obj)


__all__ = [
    "ALLOWED_ARGS",
    "ALLOWED_ENV",
    "MASK",
    "Redactor",
    "is_secret_name",
    "redact_json",
    "strip_controls",
]
