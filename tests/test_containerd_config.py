"""Edge cases of the containerd config edit that the lab's three containerd versions do not reach; the lab tests
(test_lab_container_runtimes.py) prove the effect on what real containerd loads."""

from __future__ import annotations

import tomllib

import pytest

from gpunode.steps.containerd_config import ConfigError, LayoutError, Loaded, add_nvidia_runtime, loaded_config

RUNC = Loaded({"runc": {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}})


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
    with pytest.raises(LayoutError, match="io.containerd.grpc.v1.cri is a Integer value"):
        add_nvidia_runtime('version = 2\n[plugins]\n"io.containerd.grpc.v1.cri" = 1\n', 1, "x", False)


def test_loaded_config_reads_the_dump_and_the_built_in_runc():
    dump = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\ndefault_runtime_name = "crun"\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun]\nruntime_type = "x"\n')
    default = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\nruntime_type = "r"\n'
    assert loaded_config(dump, default) == Loaded({"crun": {"runtime_type": "x"}}, "crun", {"runtime_type": "r"})
    assert loaded_config("not toml [", "") == Loaded()


KUBEADM = """version = 2
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.9"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
          runtime_type = "io.containerd.runc.v2"
          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
            SystemdCgroup = true
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
"""


def test_tables_out_of_order_are_edited_in_place():
    """A registry mirror block appended at the end makes `plugins` an out-of-order table (found by a new user)."""
    text = KUBEADM + '[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]\n  endpoint = ["https://m"]\n'
    edit = add_nvidia_runtime(text, 1, "nvidia-container-runtime", False)
    loaded = tomllib.loads(edit.text)
    assert runtimes(edit.text)["nvidia"]["options"]["SystemdCgroup"] is True
    assert loaded["plugins"]["io.containerd.grpc.v1.cri"]["registry"]["mirrors"]["docker.io"]["endpoint"] == ["https://m"]


@pytest.mark.parametrize("text", [
    'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
    '  runtimes.runc = { runtime_type = "io.containerd.runc.v2", options = { SystemdCgroup = true } }\n',
    'version = 2\nplugins = { "io.containerd.grpc.v1.cri" = { containerd = { default_runtime_name = "runc" } } }\n',
])
def test_inline_tables_and_dotted_keys_are_refused_not_misplaced(text):
    with pytest.raises(LayoutError, match="section tables only|inline table"):
        add_nvidia_runtime(text, 1, "nvidia-container-runtime", False, RUNC)


def test_the_default_runtime_is_the_template_and_no_runc_is_invented():
    text = KUBEADM.replace("runtimes.runc", "runtimes.crun").replace(
        '[plugins."io.containerd.grpc.v1.cri".containerd]\n',
        '[plugins."io.containerd.grpc.v1.cri".containerd]\n      default_runtime_name = "crun"\n')
    edit = add_nvidia_runtime(text, 1, "nvidia-container-runtime", False, Loaded(default_name="crun"))
    assert set(runtimes(edit.text)) == {"crun", "nvidia"}
    assert runtimes(edit.text)["nvidia"]["options"]["SystemdCgroup"] is True
    assert "crun's settings" in edit.changes[0]


def test_a_missing_default_runtime_is_restored_from_containerd_s_built_in():
    """A config.toml holding only the nvidia runtime (written before containerd was installed) breaks the CRI plugin
    (no runc); the next run restores runc."""
    text = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
            '  runtime_type = "io.containerd.runc.v2"\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n  BinaryName = "x"\n')
    builtin = {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": False}}
    edit = add_nvidia_runtime(text, 1, "x", False, Loaded({"nvidia": {}}, "runc", builtin))
    assert runtimes(edit.text)["runc"] == builtin
    assert edit.changes[0].startswith("restore the default runtime runc")


def test_docker_s_containerd_with_cri_disabled_is_left_alone():
    text = 'disabled_plugins = ["cri"]\n'
    edit = add_nvidia_runtime(text, 1, "x", False, RUNC)
    assert edit.text == text and edit.changes == () and "CRI plugin is disabled" in edit.note


def test_crlf_files_keep_crlf():
    text = KUBEADM.replace("\n", "\r\n")
    edit = add_nvidia_runtime(text, 1, "x", False)
    assert edit.text.count("\n") == edit.text.count("\r\n") > text.count("\n")
    assert edit.text.replace("\r\n", "\n") == add_nvidia_runtime(KUBEADM, 1, "x", False).text


def test_unquoted_yes_and_no_reach_the_tri_state_arguments():
    """`containerd: no` unquoted is YAML's false; for a yes/no/auto argument it means "no" (found by a new user)."""
    from gpunode.steps import build_step

    assert build_step("container_runtime", {"containerd": False}).containerd == "no"
    assert build_step("container_runtime", {"containerd": True}).containerd == "yes"
    assert build_step("nvidia_driver", {"fabricmanager": False}).fabricmanager == "no"
