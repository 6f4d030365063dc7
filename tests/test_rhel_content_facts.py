"""facts.sh tells how RHEL gets its content (a cloud's RHUI or subscription-manager), which decides how CodeReady
Builder is enabled (aws/aws-parallelcluster-cookbook package_repos_redhat8.rb@f75d84c:36-39 for RHUI)."""

from __future__ import annotations

import subprocess

from gpunode.facts import parse_facts
from gpunode.scripts import SCRIPTS_DIR


def test_facts_parse_rhui_repo_files_and_registration() -> None:
    text = ("@@gpunode-facts 1\n@@kv pkgmgr\nyum_unfinished=0\nrhui_repo=/etc/yum.repos.d/redhat-rhui.repo\n"
            "rhui_repo=/etc/yum.repos.d/redhat-rhui-client-config.repo\nrhsm_registered=0\n@@end\n")
    pkg = parse_facts(text).pkg
    assert pkg.rhui_repo_files == ("/etc/yum.repos.d/redhat-rhui.repo",
                                   "/etc/yum.repos.d/redhat-rhui-client-config.repo")
    assert not pkg.rhsm_registered
    registered = parse_facts("@@gpunode-facts 1\n@@kv pkgmgr\nrhsm_registered=1\n@@end\n").pkg
    assert registered.rhsm_registered and not registered.rhui_repo_files


def test_facts_script_reports_both_on_this_machine() -> None:
    """The lines are there (no RHUI and no consumer certificate on the test machine), and facts.sh stays valid."""
    out = subprocess.run(["bash", str(SCRIPTS_DIR / "facts.sh")], capture_output=True, text=True,
                         env={"FACTS_WANT": "pkgmgr", "PATH": "/usr/bin:/bin"}, timeout=60).stdout
    pkg = parse_facts(out).pkg
    assert "rhsm_registered=0" in out and pkg.rhui_repo_files == () and not pkg.rhsm_registered
