"""The package share's folder on the controller: one that cannot be used turns the share off for the host with one
note and its fix (not a note per file after the host downloaded and sent everything back for nothing)."""

from __future__ import annotations

import pytest

from gpunode.pkgshare.store import PackageStore
from gpunode.steps.package_share import _size
from tests.conftest import REPO, run_cli


def test_a_folder_that_is_a_file_or_under_one_is_a_problem(tmp_path):
    afile = tmp_path / "file"
    afile.write_text("x")
    assert "cannot be created" in PackageStore(afile).problem()
    assert "cannot be created" in PackageStore(afile / "sub").problem()
    fresh = tmp_path / "a" / "b"
    assert PackageStore(fresh).problem() == "" and fresh.is_dir()


def test_small_sizes_are_not_zero_mib():
    assert _size(917 << 10) == "917 KiB" and _size(47 << 20) == "47 MiB"


@pytest.mark.parametrize("extra", ["package_cache=[a,b]", '{"package_cache": {"a": 1}}'])
def test_a_list_or_mapping_is_refused_before_any_host(tmp_path, extra):
    """`--var package_cache=[a,b]` would have made a folder named "['a', 'b']"; it is exit 2 with the fix, no host
    contacted (the inventory's one host is at an address nothing answers)."""
    book = tmp_path / "p.yml"
    book.write_text("steps:\n  - packages: {names: [jq]}\n")
    result = run_cli("provision", "-H", "192.0.2.1", "--playbook", str(book), "-e", extra)
    assert result.code == 2, result.output
    assert "package_cache must be off, true or a folder" in result.output and "fix:" in result.output


@pytest.mark.parametrize("url", ["http://x/pkgs", "https://bucket.s3.us-east-1.amazonaws.com/pkgs"])
def test_a_url_is_refused_before_any_host_not_made_a_folder(tmp_path, url):
    """`package_cache=http://x/pkgs` became a folder `./http:/x/pkgs` while `module_cache` refused the same URL
    (issue 37): it is exit 2 naming the variable, before any host, and no folder is made."""
    book = tmp_path / "p.yml"
    book.write_text("steps:\n  - packages: {names: [jq]}\n")
    result = run_cli("provision", "-H", "192.0.2.1", "--playbook", str(book), "-e", f"package_cache={url}")
    assert result.code == 2, result.output
    assert f"package_cache {url}" in result.output and "is a URL" in result.output and "fix:" in result.output
    assert not (REPO / "http:").exists() and not (REPO / "https:").exists()  # run_cli runs in the checkout


def test_a_damaged_file_in_the_folder_is_removed_and_said(tmp_path):
    """A file changed in the folder (same size) is not sent, is removed, and the host's notes name it."""
    import hashlib
    from types import SimpleNamespace

    from gpunode.parsers.apt_downloads import Download
    from gpunode.steps.package_share import _send

    store = PackageStore(tmp_path)
    data = b"genuine package"
    digest = hashlib.sha256(data).hexdigest()
    path = store.put(digest, "jq_1.deb", data)
    path.write_bytes(bytes(len(data)))
    ctx = SimpleNamespace(notes=[], run=None)
    assert _send(ctx, [Download("", "jq_1.deb", len(data), digest, "")], store) == []
    assert not path.exists() and "jq_1.deb" in ctx.notes[0] and "removed from" in ctx.notes[0]


def test_the_lists_are_refreshed_once_not_twice(tmp_path):
    """The plan command refreshes the lists; an install whose refresh comes first does not refresh them again (one
    more InRelease round per host); a refresh after another command (a repository added) stays."""
    from types import SimpleNamespace

    from gpunode.steps.base import Action
    from gpunode.steps.package_share import prefetch
    from gpunode.steps.pkgmgr import APT_ENV, AptManager

    ran: list[str] = []
    ctx = SimpleNamespace(facts=SimpleNamespace(os=SimpleNamespace(package_manager="apt")), notes=[],
                          lists_stale=True,
                          run=lambda cmd, **_: ran.append(cmd) or SimpleNamespace(ok=True, stdout="", exit_code=0))
    update = AptManager.update()
    install = f"{APT_ENV} {update} && apt-get install -- jq"
    action = Action("install packages: jq", "", install, installs=("jq",))
    assert prefetch(ctx, action, PackageStore(tmp_path)) == f"{APT_ENV} apt-get install -- jq"
    assert update in ran[0]
    later = f"{APT_ENV} echo repo > /etc/apt/sources.list.d/x.list && {update} && apt-get install -- jq"
    assert prefetch(ctx, Action("x", "", later, installs=("jq",)), PackageStore(tmp_path)) == later
    ran.clear()
    ctx.lists_stale = False  # refreshed earlier in this run: the plan command does not refresh again
    assert prefetch(ctx, action, PackageStore(tmp_path)) == install and update not in ran[0]


def test_a_template_that_reads_an_undefined_variable_is_refused(tmp_path):
    book = tmp_path / "p.yml"
    book.write_text('vars:\n  package_cache: "{{ nope_undefined }}"\nsteps:\n  - packages: {names: [jq]}\n')
    result = run_cli("provision", "-H", "192.0.2.1", "--playbook", str(book))
    assert result.code == 2, result.output
    assert "'nope_undefined' is undefined" in result.output and "fix: give that variable a value" in result.output
