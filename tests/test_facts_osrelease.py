"""parse_os_release on real os-release texts (tests/data/os-release, see SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.facts import os_release_fields, parse_os_release
from gpunode.facts.osrelease import default_package_manager, distro_family, pick_package_manager

DATA = Path(__file__).parent / "data" / "os-release"

# file: (id, family, package_manager, version_id, version_major, codename)
EXPECTED = {
    "ubuntu-20.04.txt": ("ubuntu", "debian", "apt", "20.04", 20, "focal"),
    "ubuntu-22.04.txt": ("ubuntu", "debian", "apt", "22.04", 22, "jammy"),
    "ubuntu-24.04.txt": ("ubuntu", "debian", "apt", "24.04", 24, "noble"),
    "debian-11.txt": ("debian", "debian", "apt", "11", 11, "bullseye"),
    "debian-12.txt": ("debian", "debian", "apt", "12", 12, "bookworm"),
    "rhel-8.txt": ("rhel", "redhat", "dnf", "8.7", 8, "Ootpa"),
    "rhel-9.txt": ("rhel", "redhat", "dnf", "9.6", 9, "Plow"),
    "rocky-8.txt": ("rocky", "redhat", "dnf", "8.10", 8, "Green Obsidian"),
    "rocky-9.txt": ("rocky", "redhat", "dnf", "9.3", 9, "Blue Onyx"),
    "almalinux-8.txt": ("almalinux", "redhat", "dnf", "8.10", 8, "Cerulean Leopard"),
    "almalinux-9.txt": ("almalinux", "redhat", "dnf", "9.4", 9, "Seafoam Ocelot"),
    "amzn-2.txt": ("amzn", "amazon", "yum", "2", 2, None),
    "amzn-2023.txt": ("amzn", "amazon", "dnf", "2023", 2023, None),
    "debian-13.txt": ("debian", "debian", "apt", "13", 13, "trixie"),
    "alinux-3.txt": ("alinux", "redhat", "dnf", "3", 3, "Soaring Falcon"),
    "tencentos-3.txt": ("tencentos", "redhat", "dnf", "3.1", 3, "Final"),
    "tencentos-4.txt": ("tencentos", "redhat", "dnf", "4.0", 4, None),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_os_release(name: str) -> None:
    os_id, family, pm, version_id, major, codename = EXPECTED[name]
    info = parse_os_release((DATA / name).read_text(encoding="utf-8"), arch="x86_64")
    assert info.id == os_id
    assert info.family == family
    assert info.package_manager == pm
    assert info.version_id == version_id
    assert info.version_major == major
    assert info.codename == codename
    assert info.arch == "x86_64"
    assert info.pretty_name  # every sample has PRETTY_NAME


def test_every_sample_is_covered_and_sourced() -> None:
    samples = {p.name for p in DATA.glob("*.txt")}
    assert samples == set(EXPECTED)
    sources = (DATA / "SOURCES.md").read_text(encoding="utf-8")
    for name in samples:
        assert f"| {name} |" in sources, f"{name} has no row in SOURCES.md"


def test_id_like_is_split_and_quotes_removed() -> None:
    rocky = parse_os_release((DATA / "rocky-9.txt").read_text(encoding="utf-8"))
    assert rocky.id_like == ("rhel", "centos", "fedora")
    assert rocky.pretty_name == "Rocky Linux 9.3 (Blue Onyx)"
    ubuntu = parse_os_release((DATA / "ubuntu-24.04.txt").read_text(encoding="utf-8"))
    assert ubuntu.id_like == ("debian",)
    assert ubuntu.pretty_name == "Ubuntu 24.04.3 LTS"


def test_file_without_final_newline() -> None:
    text = (DATA / "almalinux-9.txt").read_text(encoding="utf-8")
    assert not text.endswith("\n")
    assert os_release_fields(text)["SUPPORT_END"] == "2032-06-01"


def test_quoting_escapes_and_comments() -> None:
    text = (
        "# a comment line\n"
        "   \n"
        'NAME="Foo \\"Bar\\" \\$HOME \\\\ Linux"\n'
        "ID='foo'\n"
        "VERSION_ID=1.2\n"
        "PRETTY_NAME=Foo\\ Linux\n"
        '  ID_LIKE = "debian"  \n'
        "garbage line without equals\n"
        "9BAD=ignored\n"
        "export VARIANT_ID=server\n"
        "EMPTY=\n"
        "MIXED=\"a\"'b'c\n"
    )
    fields = os_release_fields(text)
    assert fields["NAME"] == 'Foo "Bar" $HOME \\ Linux'
    assert fields["ID"] == "foo"
    assert fields["VERSION_ID"] == "1.2"
    assert fields["PRETTY_NAME"] == "Foo Linux"
    assert fields["ID_LIKE"] == "debian"
    assert fields["VARIANT_ID"] == "server"
    assert fields["EMPTY"] == ""
    assert fields["MIXED"] == "abc"
    assert "9BAD" not in fields
    info = parse_os_release(text)
    assert info.family == "debian" and info.package_manager == "apt"  # via ID_LIKE


def test_unterminated_quote_does_not_raise() -> None:
    assert os_release_fields('NAME="half open\nID=x\n') == {"NAME": "half open", "ID": "x"}


def test_empty_and_unknown() -> None:
    empty = parse_os_release("")
    assert (empty.id, empty.family, empty.package_manager, empty.version_major) == ("", "unknown", None, None)
    alpine = parse_os_release('ID=alpine\nVERSION_ID=3.19.1\nPRETTY_NAME="Alpine Linux v3.19"\n')
    assert alpine.family == "unknown" and alpine.package_manager is None and alpine.version_major == 3


@pytest.mark.parametrize(
    ("os_id", "like", "major", "family", "pm"),
    [
        ("centos", ("rhel", "fedora"), 7, "redhat", "yum"),
        ("centos", ("rhel", "fedora"), 9, "redhat", "dnf"),  # CentOS Stream 9
        ("fedora", (), 40, "redhat", "dnf"),
        ("amzn", ("rhel", "fedora"), 2018, "amazon", "yum"),  # Amazon Linux 1
        ("opensuse-leap", ("suse", "opensuse"), 15, "suse", "zypper"),
        ("sles", ("suse",), 15, "suse", "zypper"),
        ("pop", ("ubuntu", "debian"), 22, "debian", "apt"),
    ],
)
def test_family_rules(os_id: str, like: tuple[str, ...], major: int, family: str, pm: str) -> None:
    assert distro_family(os_id, like) == family
    assert default_package_manager(family, os_id, major) == pm


def test_host_package_manager_preferred() -> None:
    assert pick_package_manager("dnf", ("dnf", "yum", "rpm")) == "dnf"  # EL8: yum is dnf's alias
    assert pick_package_manager("yum", ("yum", "rpm")) == "yum"  # AL2
    assert pick_package_manager("dnf", ("yum",)) == "yum"  # host has only yum
    assert pick_package_manager("apt", ()) == "apt"  # nothing seen: derived
    assert pick_package_manager(None, ("apt-get", "dpkg-query")) == "apt"  # unknown distro, apt present
