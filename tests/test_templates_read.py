"""What templates read (gpunode/templates_read.py): Jinja's own AST, for every place that asks (facts sections,
deferred steps, the catalogue, the variable a bad value came from), and the one walker of nested strings."""

from __future__ import annotations

from gpunode.facts.sections import OPTIONAL, sections_read_by
from gpunode.templates_read import attributes_read, names_in_order, names_read, template_strings


def test_the_walker_finds_strings_nested_in_dicts_lists_and_tuples():
    value = {"a": "{{ x }}", "b": ["plain", ("{% if y %}z{% endif %}", 3)], "c": {"d": None, "e": "{{ w }}"}}
    assert list(template_strings(value)) == ["{{ x }}", "{% if y %}z{% endif %}", "{{ w }}"]
    assert list(template_strings(value, templated_only=False)) == ["{{ x }}", "plain", "{% if y %}z{% endif %}",
                                                                    "{{ w }}"]
    assert list(template_strings(42)) == []


def test_attributes_and_constant_subscripts_off_a_variable():
    assert attributes_read("{{ facts.gpus.count }}", "facts") == {"gpus"}
    assert attributes_read("{{ facts['kernel'] }}", "facts") == {"kernel"}
    assert attributes_read(["{{ facts.os.id }}", {"k": "{{ facts['nvidia'].x }}"}], "facts") == {"os", "nvidia"}
    assert attributes_read("{{ other.gpus }} plain facts.gpus", "facts") == set()  # not read at all


def test_a_computed_key_or_a_whole_read_is_none():
    assert attributes_read("{{ facts[key] }}", "facts") is None
    assert attributes_read("{{ facts[0] }}", "facts") is None
    assert attributes_read("{% if facts %}x{% endif %}", "facts") is None
    assert attributes_read("{{ facts.gpus }} {{ facts | tojson }}", "facts") is None  # one whole read is enough


def test_a_when_expression_is_a_bare_jinja_expression():
    when = "result.rc == 0 and facts.os.id == 'x'"
    assert names_read({}, [when]) == {"result", "facts"}
    assert attributes_read({}, "facts", [when]) == {"os"}
    assert attributes_read({}, "result", [when]) == {"rc"}
    assert names_read({}, [None]) == set()  # a step without when:


def test_filters_and_their_arguments_are_read_and_unknown_filters_do_not_stop_the_analysis():
    assert names_read("{{ x | default(y) }}") == {"x", "y"}
    assert names_read("{{ x | no_such_filter(z) }}") == {"x", "z"}  # parsed, never compiled for running
    assert names_read({}, ["v is version('2', '>=') and w | bool"]) == {"v", "w"}


def test_declared_names_are_not_reads():
    assert names_read("{% for item in items %}{{ item.name }}{% endfor %}") == {"items"}
    assert names_read("{% set n = 3 %}{{ n + m }}") == {"m"}


def test_plain_text_reads_nothing():
    assert names_read("echo output facts") == set()
    assert names_read({"cmd": ["ls", "/etc"], "n": 3}) == set()


def test_a_registered_result_read_by_an_argument():
    """What makes a step wait for an earlier step's `register:` (runner/host_run.py `_defers`): the template reads
    `out`; the word `output` in plain text (or an argument's key) is not a read, as a regex over the text took it."""
    args = {"cmd": "echo {{ out.stdout }}", "output": "output", "creates": "/tmp/out"}
    assert names_read(args) & {"out", "output"} == {"out"}
    assert names_read({"cmd": "echo output"}) & {"output"} == set()


def test_a_template_that_does_not_parse_reads_every_name_it_mentions():
    assert names_read("{{ facts.gpus ") >= {"facts", "gpus"}
    assert attributes_read("{{ facts.gpus ", "facts") is None  # conservative: any part
    assert attributes_read("{{ other ", "facts") == set()


def test_names_in_order_of_first_appearance():
    assert names_in_order("{{ x | default(y) }}-{{ a }}-{{ x }}") == ["x", "y", "a"]
    assert names_in_order("no template") == []


def test_facts_sections_from_the_analysis():
    assert sections_read_by(["{{ facts.gpus | length }}"]) == {"gpu"}
    assert sections_read_by([], ["facts.storage.mounts | length > 0"]) == {"storage"}
    assert sections_read_by(["{% if facts %}x{% endif %}"]) == set(OPTIONAL)
    assert sections_read_by(["{% for facts in many %}{{ facts.gpus }}{% endfor %}"]) == frozenset()  # a loop var
