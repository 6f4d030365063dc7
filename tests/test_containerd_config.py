"""Edge cases of the containerd config edit that the lab's three containerd versions do not reach; the lab tests
(test_lab_container_runtimes.py) prove the effect on what real containerd loads."""

from __future__ import annotations

import tomllib

import pytest

from gpunode.steps.containerd_config import ConfigError, add_nvidia_runtime, loaded_runtimes

RUNC = {"runc": {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}}


def runtimes(text: str, plugin: str = "io.containerd.grpc.v1.cri") -> dict:
    return tomllib.loads(text)["plugins"][plugin]["containerd"]["runtimes"]


def test_version_3_files_get_the_containerd_2_plugin_and_single_quotes_survive():
    text = ("version = 3\n# mine\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]\n"
            "  runtime_type = 'io.containerd.runc.v2'\n"
            "  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n    SystemdCgroup = true\n")
    edit = add_nvidia_runtime(text, 2, "/usr/bin/nvidia-container-runtime", False)
    assert edit.text.startswith(text.rstrip("\n"))  # the user's bytes first, untouched
    nvidia = runtimes(edit.text, "io.containerd.cri.v1.runtime")["nvidia"]
    assert nvidia["options"] == {"SystemdCgroup": True, "BinaryName": "/usr/bin/nvidia-container-runtime"}


def test_an_existing_nvidia_runtime_is_converged_not_replaced():
    text = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
            '  SystemdCgroup = true\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
            '  runtime_type = "io.containerd.runc.v2"\n  privileged_without_host_devices = true\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
            '  BinaryName = "/usr/bin/nvidia-container-runtime"\n  SystemdCgroup = false\n')
    edit = add_nvidia_runtime(text, 1, "/usr/bin/nvidia-container-runtime", False)
    assert edit.changes == ("nvidia SystemdCgroup = true (as runc)",)
    nvidia = runtimes(edit.text)["nvidia"]
    assert nvidia["privileged_without_host_devices"] is True and nvidia["options"]["SystemdCgroup"] is True
    assert add_nvidia_runtime(edit.text, 1, "/usr/bin/nvidia-container-runtime", False).changes == ()


def test_a_file_without_version_is_version_1_and_keeps_containerd_s_runtimes():
    edit = add_nvidia_runtime("# only a comment\noom_score = -999\n", 1, "nvidia-container-runtime", True, RUNC)
    loaded = tomllib.loads(edit.text)
    assert "version" not in loaded and loaded["oom_score"] == -999
    cri = loaded["plugins"]["cri"]["containerd"]
    assert cri["default_runtime_name"] == "nvidia" and set(cri["runtimes"]) == {"runc", "nvidia"}


@pytest.mark.parametrize("text, where", [
    ('version = 2\n[plugins\n', (2, None)),
    ('version = 2\nx = "unterminated\n', (2, None)),
])
def test_malformed_toml_names_line_and_column(text, where):
    with pytest.raises(ConfigError) as info:
        add_nvidia_runtime(text, 1, "nvidia-container-runtime", False)
    assert info.value.line == where[0] and info.value.column is not None
    assert str(info.value).startswith("not valid TOML")


def test_unknown_version_and_wrong_shapes_are_refused():
    with pytest.raises(ConfigError, match="unsupported config version 7"):
        add_nvidia_runtime("version = 7\n", 1, "x", False)
    with pytest.raises(ConfigError, match="expected a table"):
        add_nvidia_runtime('version = 2\n[plugins]\n"io.containerd.grpc.v1.cri" = 1\n', 1, "x", False)


def test_loaded_runtimes_fall_back_to_the_built_in_runc():
    dump = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\nruntime_type = "x"\n'
    default = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\nruntime_type = "r"\n'
    assert loaded_runtimes(dump, default) == {"nvidia": {"runtime_type": "x"}, "runc": {"runtime_type": "r"}}
    assert loaded_runtimes("not toml [", "") == {}
