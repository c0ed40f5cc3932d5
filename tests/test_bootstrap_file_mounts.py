"""The file_mounts contract: small files in metadata, directories and large files over SSH."""

from __future__ import annotations

import base64

from bootstrap_stubs import cluster

from bootstrap import plan_file_mounts
from bootstrap.file_mounts import METADATA_FILE_MOUNT_BUDGET, METADATA_VALUE_LIMIT


def test_small_file_travels_in_metadata_as_base64(tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    plan = plan_file_mounts(cluster(file_mounts={"~/a.txt": "a.txt"}), base_dir=tmp_path)
    assert plan.over_ssh == {}
    assert [(m.key, m.target) for m in plan.in_metadata] == [("ray-file-mount-0", "~/a.txt")]
    assert base64.b64decode(plan.metadata_entries()["ray-file-mount-0"]) == b"hello"


def test_directories_and_large_files_are_left_to_ssh(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "big.bin").write_bytes(b"x" * METADATA_VALUE_LIMIT)
    config = cluster(file_mounts={"~/dir": str(tmp_path / "dir"),
                                  "~/big.bin": str(tmp_path / "big.bin")})
    plan = plan_file_mounts(config)
    assert plan.in_metadata == []
    assert set(plan.over_ssh) == {"~/dir", "~/big.bin"}


def test_files_beyond_the_metadata_budget_go_over_ssh(tmp_path):
    size = METADATA_VALUE_LIMIT // 2  # base64 of two such files exceeds the budget
    mounts = {}
    for name in ("a", "b"):
        (tmp_path / name).write_bytes(b"y" * size)
        mounts[f"/opt/{name}"] = str(tmp_path / name)
    plan = plan_file_mounts(cluster(file_mounts=mounts))
    assert [m.target for m in plan.in_metadata] == ["/opt/a"]
    assert list(plan.over_ssh) == ["/opt/b"]
    assert sum(len(v) for v in plan.metadata_entries().values()) <= METADATA_FILE_MOUNT_BUDGET
