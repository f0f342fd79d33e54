"""The bulk decoder of range-vector answers against plain ``json``, on the same bodies."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from specscope.prometheus.answers import Answer, _cut, _general, decode, decode_all

# Label values that would fool a decoder that cut at markers inside strings.
TRICKY = [
    'a"b',
    '"values":[',
    ',"values":[[1,"2"]]}',
    '{"metric":{}}',
    "]},{",
    "back\\slash",
    "ünïcode ✓",
    "<&>",
    "",
    "line\nbreak",
]
VALUES = ["0", "1", "12000", "-0", "3.25", "1e+21", "NaN", "+Inf", "-Inf", "0.1", "123456789012"]


def prometheus_body(rng: random.Random, *, ascii_only: bool = True) -> bytes:
    """An answer laid out the way Prometheus (Go's encoder) writes one."""
    result = []
    for _ in range(rng.randint(0, 6)):
        metric = {"__name__": rng.choice(["vllm:a_total", "vllm:b_total", "sglang:c"])}
        for name in rng.sample(["engine", "instance", "job", "model_name", "position"], 3):
            metric[name] = rng.choice(TRICKY) if rng.random() < 0.3 else str(rng.randint(0, 9))
        t0 = 1_795_000_000 + rng.random() * 1000
        values = [
            [round(t0 + 15 * i, rng.choice([0, 3])), rng.choice(VALUES)]
            for i in range(rng.choice([0, 1, 2, 5, 40]))
        ]
        result.append({"metric": dict(sorted(metric.items())), "values": values})
    answer = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    return json.dumps(answer, separators=(",", ":"), ensure_ascii=ascii_only).encode()


def same(a: Answer, b: Answer) -> bool:
    return (
        a.keys == b.keys
        and a.counts == b.counts
        and np.array_equal(a.samples, b.samples, equal_nan=True)
    )


@pytest.mark.parametrize("seed", range(40))
def test_bulk_and_json_agree_on_prometheus_layout(seed):
    rng = random.Random(seed)
    bodies = [prometheus_body(rng, ascii_only=rng.random() < 0.5) for _ in range(8)]
    assert all(_cut(b) is not None for b in bodies)  # the bulk path is the one tested
    got = decode_all(bodies)
    for body, answer in zip(bodies, got, strict=True):
        assert isinstance(answer, Answer)
        assert same(answer, _general(body))
        assert same(decode(body), answer)


def test_other_layouts_go_through_json():
    body = prometheus_body(random.Random(1))
    spaced = json.dumps(json.loads(body), indent=1).encode()
    partial = body.replace(b'{"status":"success",', b'{"status":"success","isPartial":false,')
    histogram = (
        b'{"status":"success","data":{"resultType":"matrix","result":['
        b'{"metric":{"__name__":"h"},"histograms":[[1,{"count":"2"}]]},'
        b'{"metric":{"__name__":"x"},"values":[[1,"2"]]}]}}'
    )
    for other in (spaced, partial):
        assert _cut(other) is None
        assert same(decode(other), _general(other))
    # The histogram series has no values: json calls that malformed, and so does decode.
    with pytest.raises(ValueError):
        decode(histogram)


@pytest.mark.parametrize(
    "value",
    ['"x"', '""', '"0x10"', '"1_000"', "null", '"1","2"', '" 2"', '"Infinity"', '"1e5"'],
)
def test_odd_values_decode_as_json_decodes_them(value):
    body = (
        b'{"status":"success","data":{"resultType":"matrix","result":['
        b'{"metric":{"__name__":"x"},"values":[[1,"2"],[2,' + value.encode() + b"]]}]}}"
    )
    try:
        expected: Answer | type[ValueError] = _general(body)
    except ValueError:
        expected = ValueError
    got = decode_all([body])[0]
    if expected is ValueError:
        assert isinstance(got, ValueError)
    else:
        assert isinstance(got, Answer) and same(got, expected)


def test_one_bad_answer_spoils_only_itself():
    rng = random.Random(5)
    good = [prometheus_body(rng) for _ in range(3)]
    bad = good[1].replace(b'"12000"', b'"twelve"')
    if bad == good[1]:  # make sure there is something to spoil
        bad = (
            b'{"status":"success","data":{"resultType":"matrix","result":['
            b'{"metric":{"__name__":"x"},"values":[[1,"twelve"]]}]}}'
        )
    got = decode_all([good[0], bad, good[2]])
    assert isinstance(got[1], ValueError)
    for i in (0, 2):
        assert isinstance(got[i], Answer) and same(got[i], _general(good[i]))


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b'{"status":"success","data":{"result": [oops', b"[]", b'{"data":{}}'],
)
def test_malformed_answers_raise_value_error_with_the_text(body):
    with pytest.raises(ValueError) as caught:
        decode(body)
    assert str(caught.value)
