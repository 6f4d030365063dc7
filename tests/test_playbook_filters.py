"""Ansible's Jinja filters and tests (issue 27, item 2), each against the examples of Ansible's own documentation
(docs.ansible.com: "Using filters to manipulate data", "Tests", and the plugin pages of ansible.builtin) and the
behaviour of ansible/ansible lib/ansible/plugins/filter/core.py and test/core.py."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from gpunode.playbook.template import TemplateError, evaluate, render


def r(template: str, **variables):
    return render(template, variables)


# ---- quote -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["$(touch /tmp/pwned); id", "it's", "a b", "", "`id`", "x\ny", "--help"])
def test_quote_is_shell_quoting_the_shell_reads_back_literally(value):
    quoted = r("{{ v | quote }}", v=value)
    assert quoted == shlex.quote(value)
    assert subprocess.run(["sh", "-c", f"printf %s {quoted}"], capture_output=True, text=True).stdout == value


def test_quote_of_none_and_numbers():
    assert r("{{ none | quote }}", none=None) == "''"
    assert r("{{ 5 | quote }}") == "5"


# ---- default / d, mandatory, ternary ----------------------------------------------------------------------------
def test_default_as_documented():
    assert r("{{ some_variable | default(5) }}") == 5
    assert r("{{ some_variable | d(5) }}", some_variable=3) == 3
    assert r("{{ user | default('admin', true) }}", user="") == "admin"  # boolean=true: falsy values too
    assert r("{{ user | default('admin') }}", user="") == ""


def test_mandatory_as_documented():
    assert r("{{ variable | mandatory }}", variable="x") == "x"
    with pytest.raises(TemplateError, match="Mandatory variable 'variable' not defined."):
        r("{{ variable | mandatory }}")
    with pytest.raises(TemplateError, match="set variable, please"):
        r("{{ variable | mandatory('set variable, please') }}")


def test_ternary_as_documented():
    assert r("{{ (status == 'needs_restart') | ternary('restart', 'continue') }}", status="needs_restart") == "restart"
    assert r("{{ (status == 'needs_restart') | ternary('restart', 'continue') }}", status="ok") == "continue"
    assert r("{{ enabled | ternary('no shutdown', 'shutdown', 'omit') }}", enabled=None) == "omit"
    assert r("{{ enabled | ternary('no shutdown', 'shutdown') }}", enabled=None) == "shutdown"


# ---- types and case ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "expected"), [("yes", True), ("on", True), ("1", True), ("True", True), (1, True),
                                                 ("no", False), ("off", False), ("false", False), ("0", False),
                                                 (0, False)])
def test_bool_as_documented(value, expected):
    assert r("{{ v | bool }}", v=value) is expected


def test_int_float_string_lower_upper_join():
    assert r("{{ '42' | int }}") == 42
    assert r("{{ 'x' | int }}") == 0               # Jinja's (and so Ansible's) default of 0
    assert r("{{ '0x1A' | int(base=16) }}") == 26
    assert r("{{ '3.5' | float }}") == 3.5
    assert r("{{ 3 | string }}") == "3"
    assert r("{{ 'ABC' | lower }}-{{ 'abc' | upper }}") == "abc-ABC"
    assert r("{{ [1, 2, 3] | join(',') }}") == "1,2,3"
    assert r("{{ ['a', 'b'] | join }}") == "ab"


# ---- regex -------------------------------------------------------------------------------------------------------
def test_regex_replace_as_documented():
    assert r("{{ 'ansible' | regex_replace('^a.*i(.*)$', 'a\\\\1') }}") == "able"
    assert r("{{ 'foobar' | regex_replace('^f.*o(.*)$', '\\\\1') }}") == "bar"
    assert r("{{ 'localhost:80' | regex_replace('^(?P<host>.+):(?P<port>\\\\d+)$', '\\\\g<host>, \\\\g<port>') }}"
             ) == "localhost, 80"
    assert r("{{ 'localhost:80' | regex_replace(':80') }}") == "localhost"
    assert r("{{ 'CAR\\ntar\\nfoo\\nbar\\n' | regex_replace('^(.ar)$', '#\\\\1', multiline=True, ignorecase=True) }}"
             ) == "#CAR\n#tar\nfoo\n#bar\n"
    with pytest.raises(TemplateError, match="should match 2 times, but matches 1 times"):
        r("{{ 'a-b' | regex_replace('-', '_', mandatory_count=2) }}")


def test_regex_search_as_documented():
    assert r("{{ 'server1/database42' | regex_search('database[0-9]+') }}") == "database42"
    assert r("{{ 'ansible' | regex_search('foobar') }}") is None
    assert r("{{ 'foo\\nBAR' | regex_search('^bar', multiline=True, ignorecase=True) }}") == "BAR"
    assert r("{{ 'server1/database42' | regex_search('server([0-9]+)/database([0-9]+)', '\\\\1', '\\\\2') }}"
             ) == ["1", "42"]
    assert r("{{ '21/42' | regex_search('(?P<dividend>[0-9]+)/(?P<divisor>[0-9]+)', '\\\\g<dividend>', "
             "'\\\\g<divisor>') }}") == ["21", "42"]


# ---- base64, JSON, YAML ------------------------------------------------------------------------------------------
def test_b64_as_documented():
    assert r("{{ 'Hello' | b64encode }}") == "SGVsbG8="
    assert r("{{ 'SGVsbG8=' | b64decode }}") == "Hello"
    assert r("{{ 'Ansible - くらとみ\\n' | b64encode(encoding='utf-16-le') }}") == \
        "QQBuAHMAaQBiAGwAZQAgAC0AIABPMIkwaDB/MAoA"
    assert r("{{ 'QQBuAHMAaQBiAGwAZQAgAC0AIABPMIkwaDB/MAoA' | b64decode(encoding='utf-16-le') }}") == \
        "Ansible - くらとみ\n"


def test_json_and_yaml_round_trips():
    assert r("{{ {'a': [1, 'x']} | to_json }}") == '{"a": [1, "x"]}'
    assert r("{{ {'b': 1, 'a': 2} | to_nice_json }}") == '{\n    "a": 2,\n    "b": 1\n}'
    assert r("{{ '{\"a\": [1, 2]}' | from_json }}") == {"a": [1, 2]}
    assert r("{{ {'a': 1, 'b': [1, 2]} | to_yaml }}") == "a: 1\nb: [1, 2]\n"  # terse: flow style inside
    assert r("{{ {'a': {'b': 1}} | to_nice_yaml }}") == "a:\n    b: 1\n"
    assert r("{{ 'a: 1\\nb: [x, y]' | from_yaml }}") == {"a": 1, "b": ["x", "y"]}
    assert r("{{ none | from_yaml }}", none=None) is None


# ---- paths -------------------------------------------------------------------------------------------------------
def test_basename_dirname_as_documented():
    assert r("{{ path | basename }}", path="/etc/asdf/foo.txt") == "foo.txt"
    assert r("{{ path | dirname }}", path="/etc/asdf/foo.txt") == "/etc/asdf"


# ---- dictionaries ------------------------------------------------------------------------------------------------
DEFAULT = {"a": {"x": "default", "y": "default"}, "b": "default", "c": "default"}
PATCH = {"a": {"y": "patch", "z": "patch"}, "b": "patch"}


def test_combine_as_documented():
    assert r("{{ {'a':1, 'b':2} | combine({'b':3}) }}") == {"a": 1, "b": 3}
    assert r("{{ d | combine(p, recursive=True) }}", d=DEFAULT, p=PATCH) == {
        "a": {"x": "default", "y": "patch", "z": "patch"}, "b": "patch", "c": "default"}
    assert r("{{ d | combine(p) }}", d=DEFAULT, p=PATCH) == {
        "a": {"y": "patch", "z": "patch"}, "b": "patch", "c": "default"}
    assert r("{{ [a, b] | combine }}", a={"x": 1}, b={"y": 2}) == {"x": 1, "y": 2}
    assert r("{{ a | combine(b, c) }}", a={"x": 1}, b={"x": 2}, c={"x": 3}) == {"x": 3}


@pytest.mark.parametrize(("how", "expected"), [("replace", [3, 4, 5, 5]), ("keep", [1, 1, 2, 3]),
                                               ("append", [1, 1, 2, 3, 3, 4, 5, 5]),
                                               ("prepend", [3, 4, 5, 5, 1, 1, 2, 3]),
                                               ("append_rp", [1, 1, 2, 3, 4, 5, 5]),
                                               ("prepend_rp", [3, 4, 5, 5, 1, 1, 2])])
def test_combine_list_merge_as_documented(how, expected):
    assert r("{{ d | combine(p, list_merge=how) }}", d={"a": [1, 1, 2, 3]}, p={"a": [3, 4, 5, 5]}, how=how) == \
        {"a": expected}


def test_dict2items_and_items2dict_as_documented():
    tags = {"Application": "payment", "Environment": "dev"}
    items = [{"key": "Application", "value": "payment"}, {"key": "Environment", "value": "dev"}]
    assert r("{{ tags | dict2items }}", tags=tags) == items
    assert r("{{ files | dict2items(key_name='file', value_name='path') }}", files={"users": "/etc/passwd"}) == \
        [{"file": "users", "path": "/etc/passwd"}]
    assert r("{{ tags | items2dict }}", tags=items) == tags
    assert r("{{ fruits | items2dict(key_name='fruit', value_name='color') }}",
             fruits=[{"fruit": "apple", "color": "red"}, {"fruit": "pear", "color": "yellow"}]) == \
        {"apple": "red", "pear": "yellow"}
    with pytest.raises(TemplateError, match="dict2items requires a dictionary"):
        r("{{ 'x' | dict2items }}")


# ---- the version test --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("expression", "expected"), [
    ("'12.04' is version('12.04', '>=')", True),
    ("'2.0' is version('1.0', '>')", True),
    ("'1.0.0' is version('1.0', '==')", False),          # loose versions: the documented gotchas
    ("'1.0.0' is version('1.0', '>')", True),
    ("'3.0.0' is version('3.0.0b1', '>')", False),
    ("'6.5.10' is version_compare('6.6', '<')", True),
    ("'7.0.0' is version('6.9.10', 'lt')", False),
    ("'1.0' is version('1.0.1', operator='lt', strict=True)", True),
    ("'1.0.0b1' is version('1.0.0', 'lt', strict=True)", True),
    ("'1.0.0-alpha' is version('1.0.0', 'lt', version_type='semver')", True),
    ("'1.0.0-alpha.1' is version('1.0.0-alpha.beta', '<', version_type='semver')", True),
    ("'2.14.0rc1' is version('2.14.0', 'lt', version_type='pep440')", True),
    ("facts_version is version('535', '>=')", True),
])
def test_version_as_documented(expression, expected):
    assert evaluate(expression, {"facts_version": "535.183.01"}) is expected


@pytest.mark.parametrize(("expression", "message"), [
    ("'1.0.1a' is version('1.0', strict=True)", "Version comparison failed: invalid version number '1.0.1a'"),
    ("'1.0' is version('1.0', 'bigger')", "Invalid operator type (bigger)"),
    ("'1.0' is version('1.0', version_type='calendar')", "Invalid version type (calendar)"),
    ("'' is version('1.0')", "Input version value cannot be empty"),
])
def test_version_errors_as_ansible_says_them(expression, message):
    with pytest.raises(TemplateError) as caught:
        evaluate(expression, {})
    assert message in str(caught.value)


def test_registered_result_tests():
    result = {"rc": 1, "failed": True, "changed": False}
    assert evaluate("r is failed and r is not changed and r is not succeeded", {"r": result})
    assert evaluate("r is success and r is changed", {"r": {"rc": 0, "failed": False, "changed": True}})
    assert evaluate("r is skipped", {"r": {"skipped": True}})
