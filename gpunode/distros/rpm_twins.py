"""`-minimal` twins on RPM distros: a small build of a package installed in its place, which provides the plain name
and conflicts with the full build. A plain name (`curl`) is satisfied by either build; naming the full build
(`curl-full`) replaces the minimal one in one transaction, `dnf swap MINIMAL FULL`, as the vendors' own templates do.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.vendor_facts import Fact, Pin, Source, fact_table

_ECS_AMI = Pin("aws/amazon-ecs-ami", "a2532d3503f2052a09ac18189b0de33918406db8")
_ROCKY_KS = Pin("rocky-linux/kickstarts", "126d7433e0bbab3a5a722385f7e08b920c41ec1d")  # branch r9


@dataclass(frozen=True)
class Twin:
    """The minimal build, the name that installs the full build, and the plain names either build serves."""

    minimal: str
    full: str
    names: tuple[str, ...]


TWINS = fact_table("rpm_twins", {
    "curl": Fact(Twin("curl-minimal", "curl-full", ("curl",)),
                 Source(url="https://docs.aws.amazon.com/linux/al2023/ug/curl-minimal.html"),
                 "curl-minimal is the default in AL2023 AMIs and containers; the full build by `dnf swap curl-minimal "
                 "curl-full`. Fedora's curl.spec gives curl-minimal `Provides: curl` and `Conflicts: curl`, and curl "
                 "the virtual `Provides: curl-full` (https://fedoraproject.org/wiki/Changes/CurlMinimal_as_Default); "
                 "Rocky 9's container kickstart installs it (rocky-linux/kickstarts Rocky-9-Container-Base.ks:35, "
                 f"branch r9 at {_ROCKY_KS.ref})"),
    "libcurl": Fact(Twin("libcurl-minimal", "libcurl-full", ("libcurl",)),
                    Source(url="https://docs.aws.amazon.com/linux/al2023/ug/curl-minimal.html"),
                    "`dnf swap libcurl-minimal libcurl-full`, before curl's swap"),
    "gnupg2": Fact(Twin("gnupg2-minimal", "gnupg2-full", ("gnupg2", "gnupg", "gpg")),
                   _ECS_AMI.at("al2023.pkr.hcl", "105"),
                   "the ECS AMI swaps `dnf swap -y gnupg2-minimal gnupg2-full`; AWS's page: only gnupg2-minimal is "
                   "installed by default, enough to verify rpm signatures "
                   "(https://docs.aws.amazon.com/linux/al2023/ug/gnupg-minimal.html). gnupg and gpg are the names "
                   "Fedora's gnupg2 provides (`Provides: gnupg`, `Provides: gpg`); that the minimal build serves them "
                   "is gpunode's reading of that page (AL2023's spec is not public)"),
})


def twin_of(name: str) -> Twin | None:
    """The twin pair `name` belongs to (a plain name, the minimal or the full build), or None."""
    for fact in TWINS.values():
        twin = fact.value
        if name in (twin.minimal, twin.full, *twin.names):
            return twin
    return None


def probe_names(names: list[str]) -> list[str]:
    """`names` and, for each with a twin, both builds: what the probe asks rpm about (in one query)."""
    out = list(names)
    for name in names:
        twin = twin_of(name)
        if twin:
            out += [n for n in (twin.minimal, twin.full) if n not in out]
    return out
