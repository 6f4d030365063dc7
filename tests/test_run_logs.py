"""Run logs are pruned: the newest run folders of .gpunode/logs are kept, a --log-dir folder is never touched."""

from __future__ import annotations

from gpunode.app.run import KEEP_RUN_LOGS, prune_run_logs


def test_only_the_newest_run_folders_are_kept(tmp_path, monkeypatch):
    runs = [tmp_path / f"202611{day:02d}-120000-{100 + day}" for day in range(1, 26)]
    for run in runs:
        (run).mkdir()
        (run / "h1.log").write_text("log\n")
    mine = tmp_path / "keep-me"
    mine.mkdir()
    prune_run_logs(tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == KEEP_RUN_LOGS + 1 and "keep-me" in left
    assert not runs[0].exists() and runs[-1].exists() and runs[-KEEP_RUN_LOGS].exists()
    monkeypatch.setenv("GPUNODE_KEEP_LOGS", "3")
    prune_run_logs(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([r.name for r in runs[-3:]] + ["keep-me"])
