"""Reading input records: lines split on \\n only, streamed, BOM/CRLF/non-UTF-8 handled,
JSON lines held to their rules (issue 15, findings 1, 2 and 3); writing them safely."""

from __future__ import annotations

import errno
import io
import itertools
import json
import os

import pytest
from guards import hang_guard  # tests/ is on sys.path

from ministruct.errors import OutputClosed, OutputError
from ministruct.jobs.records import count_lines, open_lines, read_records, split_lines, write_line, write_record

SETTINGS = ("schema", "seed")


def recs(data: bytes, field: str = "prompt", **kw):
    return list(read_records(io.BytesIO(data), field, "in.jsonl", settings=kw.pop("settings", SETTINGS), **kw))


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\u0085", "\r", "\x0b", "\x0c", "\x1c"])
def test_only_newline_splits_records(sep):
    # finding 1: str.splitlines cut one JSON record into two plain-text records
    line = json.dumps({"id": "a", "prompt": f"one{sep}two"}, ensure_ascii=False)
    out = recs((line + "\n" + "plain" + sep + "text\n").encode())
    assert [(r.index, r.id, r.value, r.error) for r in out] == [
        (1, "a", f"one{sep}two", None),
        (2, 2, f"plain{sep}text", None),
    ]


def test_str_lines_are_split_on_newline_only_too():
    out = list(read_records(['{"prompt": "a\u2028b"}\nplain\u0085x\n'], "prompt"))
    assert [r.value for r in out] == ["a\u2028b", "plain\u0085x"]


def test_bom_and_crlf():
    # finding 1: a BOM turned the first record into plain text
    out = recs(b'\xef\xbb\xbf{"id": 1, "prompt": "a"}\r\n{"id": 2, "prompt": "b"}\r\nplain\r\n')
    assert [(r.id, r.value, r.error) for r in out] == [(1, "a", None), (2, "b", None), (3, "plain", None)]


def test_non_utf8_line_is_an_error_record_and_the_rest_goes_on():
    # finding 3: one non-UTF-8 byte refused the whole batch (file) or crashed (stdin)
    out = recs(b"first\nbad \xff byte\nlast\n")
    assert [r.value for r in out] == ["first", None, "last"]
    assert out[1].error == "in.jsonl:2: not UTF-8 text (byte 5 of the line is 0xff)" and out[1].id == 2


def test_blank_lines_are_skipped_but_counted():
    out = recs(b"a\n\n   \n\t\nb\n")
    assert [(r.index, r.id, r.value) for r in out] == [(1, 1, "a"), (5, 5, "b")]


@pytest.mark.parametrize(
    "line, error",
    [
        ('{"prompt": "broken json"', "in.jsonl:1: not valid JSON: Expecting ',' delimiter (column 25)"),
        ('{"prompt": "a"} trailing', "in.jsonl:1: not valid JSON: Extra data (column 17)"),
        ("[1, 2]", 'in.jsonl:1: a JSON line must be an object with "prompt", not an array'),
        ('["not", "closed"', "in.jsonl:1: not valid JSON"),
        ('{"text": "hello"}', 'in.jsonl:1: no "prompt" field'),
        ('{"id": 7}', 'in.jsonl:1: no "prompt" field'),
        ('{"prompt": 5}', 'in.jsonl:1: "prompt" is not a string (a number)'),
        ('{"prompt": null}', 'in.jsonl:1: "prompt" is not a string (null)'),
        (
            '{"prompt": "a", "temprature": 1}',
            'in.jsonl:1: unknown field "temprature" (allowed: "id", "prompt", "schema", "seed"',
        ),
        ("  " + "[" * 100_000 + "]" * 100_000, "in.jsonl:1: not usable JSON: nested too deeply"),
    ],
)
def test_json_lines_must_be_objects_with_the_field(line, error):
    # finding 2: malformed JSON, arrays and objects without "prompt" became plain-text prompts
    (rec,) = recs(line.encode() + b"\n")
    assert rec.error is not None and rec.error.startswith(error), rec.error
    assert rec.index == 1


def test_json_scalars_that_do_not_start_with_a_brace_stay_plain_text():
    out = recs(b'"quoted"\n42\nnull\n')
    assert [(r.value, r.error) for r in out] == [('"quoted"', None), ("42", None), ("null", None)]


def test_settings_and_extra_fields():
    line = json.dumps({"id": "k", "prompt": "p", "seed": 3, "schema": "s.json", "row": 17, "tag": ["x"]})
    (strict,) = recs(line.encode())
    assert strict.error is not None and '"row", "tag"' in strict.error and strict.extra == {}
    (loose,) = recs(line.encode(), allow_extra=True)
    assert loose.error is None and loose.settings == {"seed": 3, "schema": "s.json"}
    assert loose.extra == {"row": 17, "tag": ["x"]}
    (check,) = recs(b'{"text": "t", "prompt": "p"}', field="text", settings=())
    assert check.error and '"prompt"' in check.error


def test_records_are_streamed_one_line_at_a_time():
    def endless():
        for i in itertools.count(1):
            yield f'{{"id": {i}, "prompt": "p{i}"}}\n'.encode()

    first = list(itertools.islice(read_records(endless(), "prompt"), 3))
    assert [r.id for r in first] == [1, 2, 3]


def test_split_lines_numbers_every_line():
    assert list(split_lines([b"a\n", b"\n", b"b"])) == [(1, "a", None), (2, "", None), (3, "b", None)]


def test_open_lines_file_and_errors(tmp_path):
    p = tmp_path / "in.txt"
    p.write_bytes(b"x\ny")
    with open_lines(str(p)) as (lines, source):
        assert source == str(p) and list(lines) == [b"x\n", b"y"]
    assert count_lines(str(p)) == 2 and count_lines("-") is None
    from ministruct.errors import InputError

    with pytest.raises(InputError, match="no such input file"):
        with open_lines(str(tmp_path / "missing")):
            pass
    with pytest.raises(InputError, match="is a directory"):
        with open_lines(str(tmp_path)):
            pass


class _Failing(io.StringIO):
    def __init__(self, err: OSError) -> None:
        super().__init__()
        self.err = err

    def flush(self) -> None:
        raise self.err


def test_write_line_names_the_output_or_ends_quietly():
    with pytest.raises(OutputError, match="<stdout>: cannot write: No space left on device"):
        write_line("x", _Failing(OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(OutputClosed):
        write_line("x", _Failing(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    out = io.StringIO()
    write_record({"id": 1}, out)
    assert out.getvalue() == '{"v": 1, "id": 1}\n'


def test_a_non_utf8_json_line_keeps_its_readable_id():
    # issue 29: the error record of a non-UTF-8 line lost its id (the line number instead)
    out = recs(b'{"id": "q7", "prompt": "caf\xe9"}\n{"id": "\xff", "prompt": "x"}\n')
    assert out[0].id == "q7" and "not UTF-8 text (byte 28 of the line is 0xe9)" in out[0].error
    assert out[1].id == 2  # an id that is itself not UTF-8 is not readable: the line number


def test_a_lone_surrogate_in_a_value_is_an_error_for_its_record():
    out = recs(b'{"id": "s", "prompt": "a\\ud800b"}\n{"id": "pair", "prompt": "\\ud83d\\ude00"}\n')
    assert out[0].value == "a\ud800b" and out[0].id == "s"
    assert (
        out[0].error
        == 'in.jsonl:1: "prompt" is not valid text: character 2 is a lone surrogate (U+D800), which UTF-8 cannot encode'
    )
    assert out[1].error is None and out[1].value == "\U0001f600"


def test_records_with_lone_surrogates_are_written_as_escapes():
    buf = io.StringIO()
    write_record({"id": "\udcff", "prompt": "a\ud800"}, buf)
    line = buf.getvalue()
    line.encode("utf-8")  # writable
    assert json.loads(line) == {"v": 1, "id": "\udcff", "prompt": "a\ud800"}


@pytest.mark.parametrize("line", ['{"prompt": "a", "id": NaN}', '{"prompt": "a", "extra": -Infinity}'])
def test_nan_or_infinity_in_a_line_is_an_error_record(line):
    # the id NaN came back out as `"id": NaN`, a line no JSON reader takes
    (rec,) = recs(line.encode() + b"\n")
    assert rec.error is not None and "is not a JSON number" in rec.error and rec.id == 1


def test_count_lines_leaves_a_pipe_alone(tmp_path):
    # gen --input <(...) or a FIFO: counting for the progress total read the records away (0 results, exit 0)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with hang_guard(30, "count_lines on a FIFO", waiting=True):
        assert count_lines(str(fifo)) is None


def test_a_duplicate_id_is_an_error_record_naming_the_earlier_line():
    # issue 52: two records with one id (or an id equal to another line's line number)
    # were taken without a word, and --resume then skipped the second
    lines = [
        b'{"id": "a", "prompt": "Pick a year"}\n',
        b'{"id": "a", "prompt": "Pick another"}\n',
        b'{"id": 4, "prompt": "x"}\n',
        b"plain line four\n",
        b'{"id": 4, "prompt": "y"}\n',
        b'{"id": "4", "prompt": "a string is another id"}\n',
        b'{"id": "a", "broken\n',  # (its own error first; its id is its line number, 7)
    ]
    recs = list(read_records(lines, "prompt", "in.jsonl"))
    assert [r.id for r in recs] == ["a", "a", 4, 4, 4, "4", 7]
    assert [r.error for r in recs][:2] == [None, 'in.jsonl:2: id "a" is already the id of line 1; ids must be unique']
    assert recs[2].error is None and recs[5].error is None
    assert recs[3].error == (
        'in.jsonl:4: id 4 (its line number: the line has no "id") is already the id of line 3; ids must be unique'
    )
    assert recs[4].error == "in.jsonl:5: id 4 is already the id of line 3; ids must be unique"
    assert recs[6].error.startswith("in.jsonl:7: not valid JSON")


def test_a_null_field_is_as_if_absent():
    # issue 52: "seed": null was refused where leaving "seed" out is fine
    lines = [b'{"id": null, "prompt": "x", "seed": null, "schema": null, "think": null, "system": null}\n']
    (rec,) = read_records(lines, "prompt", settings=("seed", "schema", "think", "system"))
    assert rec.error is None and rec.id == 1 and rec.settings == {"system": None}
