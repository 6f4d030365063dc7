"""facts.sh's sections: a run gathers only what its steps read; what else a step reads is gathered when read.

facts.sh runs for real here (on this machine, as the tests' user): the partial outputs are compared with the
full one, field by field.
"""

from __future__ import annotations

import subprocess

import pytest

from gpunode.facts import attach_loader, facts_script, parse_facts
from gpunode.facts.blocks import combine
from gpunode.facts.model import Facts, FactsNotGathered
from gpunode.facts.sections import ALL, CORE, FIELD_SECTIONS, OPTIONAL, normalize, script_prefix, sections_read_by
from gpunode.steps import STEP_TYPES, build_step, step_facts_sections

# fields that change between two runs of facts.sh on a live machine
MOVING = {"uptime_seconds", "script_ms", "raw", "storage", "sections"}


def gather(sections=None) -> str:
    result = subprocess.run(["bash", "-s"], input=facts_script(sections), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def full() -> Facts:
    return parse_facts(gather())


def stable(facts: Facts) -> dict:
    return {k: v for k, v in facts.to_dict().items() if k not in MOVING}


def test_core_only_skips_the_other_sections_and_says_so(full):
    text = gather([CORE])
    core = parse_facts(text)
    assert core.sections == {CORE}
    assert "@@kv gathered\nsection=core\n" in text
    for header in ("@@raw packages", "@@kv containers", "@@raw file /etc/fstab", "@@kv disk", "@@kv procs"):
        assert header not in text
    assert core.os == full.os and core.kernel == full.kernel and core.hostname == full.hostname


def test_reading_a_section_not_gathered_gathers_it_once(full):
    core = parse_facts(gather([CORE]))
    asked: list[frozenset[str]] = []

    def loader(sections: frozenset[str]) -> str:
        asked.append(sections)
        return gather(sections)

    attach_loader(core, loader)
    assert core.pkg.managers_found == full.pkg.managers_found
    assert core.nvidia == full.nvidia
    assert core.containers == full.containers
    assert core.storage.fstab_text == full.storage.fstab_text
    assert core.pkg.reboot_required == full.pkg.reboot_required  # already there: no second gather
    assert core.vm_virt == full.vm_virt  # outside a container core's one systemd-detect-virt told it already
    assert [a for a in asked if a != {"virt"}] == [
        frozenset({"pkgmgr"}), frozenset({"gpu", "packages", "services"}), frozenset({"containers"}),
        frozenset({"storage"})]
    assert core.sections == ALL
    assert stable(core) == stable(full)


def test_without_a_loader_a_missing_section_is_an_error_never_an_empty_default():
    core = parse_facts(gather([CORE, "pkgmgr"]))
    assert core.pkg is not None
    with pytest.raises(FactsNotGathered, match="storage"):
        core.storage  # noqa: B018 - the read is the test
    with pytest.raises(FactsNotGathered, match="gpu"):
        core.gpus  # noqa: B018
    data = core.to_dict()  # what was not gathered is left out, not made up
    assert data["sections"] == ["core", "pkgmgr"] and "storage" not in data and "gpu_count" not in data
    assert data["os"] == full_os_dict()


def full_os_dict() -> dict:
    return parse_facts(gather([CORE])).to_dict()["os"]


def test_an_output_from_before_sections_holds_them_all(full):
    old = full.raw.replace("@@kv gathered\n", "@@kv unused\n")
    assert parse_facts(old).sections == ALL


def test_templates_and_conditions_say_which_sections_they_read():
    assert sections_read_by([], ["'/' in facts.storage.mounts | map(attribute='target') | list"]) == {"storage"}
    assert sections_read_by([{"a": ["x {{ facts['nvidia'].driver_version }}"]}]) == {"gpu", "packages", "services"}
    assert sections_read_by([{"msg": "{{ facts.os.family }} {{ facts.kernel.running }}"}]) == frozenset()  # core
    assert sections_read_by(["{{ facts | tojson }}"]) == set(OPTIONAL)  # all of it
    assert sections_read_by([], ["facts[key].x"]) == set(OPTIONAL)      # a computed key: any of it
    assert sections_read_by(["echo facts", {"k": "facts.storage"}]) == frozenset()  # not inside a template


def test_a_converged_packages_step_reads_no_package_manager_state():
    """facts.pkg (an interrupted transaction) matters only when the package manager is to run."""
    from gpunode.steps import StepContext
    from gpunode.steps.probe import ProbeOutput

    core = parse_facts(gather([CORE]))
    step = build_step("packages", {"names": ["jq"]})
    probe = ProbeOutput({"installed": "jq\tii \t1.6\n", "lists": "3\n1\n2\n"})
    ctx = StepContext(None, core, None, False, probe)
    assert step.plan(ctx) == []  # no loader attached: reading facts.pkg here would raise


def test_combine_keeps_one_marker_and_one_end():
    text = combine(gather([CORE]), gather(["storage"]))
    assert text.count("@@gpunode-facts") == 1 and text.count("\n@@end") == 1
    assert parse_facts(text).sections == {CORE, "storage"} and parse_facts(text).complete
    with pytest.raises(ValueError, match="marker"):
        combine(text, "garbage\n")


def test_script_prefix_and_names():
    assert script_prefix(["storage", CORE]) == "FACTS_WANT='core storage'\n"
    assert normalize(["gpu"]) == {CORE, "gpu"}
    with pytest.raises(ValueError, match="unknown facts section"):
        normalize(["gpus"])


def test_every_step_declares_known_sections():
    for kind, cls in STEP_TYPES.items():
        assert cls.facts_sections <= frozenset(OPTIONAL), kind
    assert step_facts_sections(["line", "file", "command"]) == frozenset()
    assert step_facts_sections(["wait_for_package_manager"]) == {"pkgmgr"}
    assert step_facts_sections(["no-such-kind"]) == frozenset(OPTIONAL)
    assert set().union(*FIELD_SECTIONS.values()) == set(OPTIONAL)
