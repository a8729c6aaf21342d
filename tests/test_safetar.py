"""Safe extraction: hostile tars are refused, naming the member, with nothing written outside."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from runspec.dataset import safetar
from runspec.errors import RunspecError


def _add_file(tar: tarfile.TarFile, name: str, data: bytes = b"x") -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _add_link(tar: tarfile.TarFile, name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    tar.addfile(info)


def _dataset_tar(path: Path, content: bytes = b"names: [a]\n") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        _add_file(tar, "ds/data.yaml", content)
        _add_file(tar, "ds/images/train/a.jpg", b"\xff\xd8jpeg")
        _add_link(tar, "ds/latest", "images")
    return path


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_good_tar_is_extracted_then_skipped_by_its_marker(tmp_path: Path) -> None:
    tar = _dataset_tar(tmp_path / "ds.tar.gz")
    dest = tmp_path / "data"
    first = safetar.extract(tar, dest)
    assert not first.skipped and first.entries == ("ds",)
    assert (dest / "ds" / "data.yaml").read_bytes() == b"names: [a]\n"
    assert (dest / "ds" / "latest").is_symlink()
    assert not [p for p in dest.iterdir() if p.name.startswith(".runspec-tmp")]
    # A re-run skips: a file the user added inside survives, which a re-extraction would drop.
    (dest / "ds" / "mine.txt").write_text("kept")
    second = safetar.extract(tar, dest)
    assert second.skipped and second.sha256 == first.sha256
    assert (dest / "ds" / "mine.txt").read_text() == "kept"


def test_a_new_tar_under_the_same_key_replaces_the_old_extraction(tmp_path: Path) -> None:
    dest = tmp_path / "data"
    safetar.extract(_dataset_tar(tmp_path / "v1.tar", b"v1"), dest, key="org/ds--ds.tar")
    (dest / "ds" / "stale.txt").write_text("from v1")
    result = safetar.extract(_dataset_tar(tmp_path / "v2.tar", b"v2"), dest, key="org/ds--ds.tar")
    assert not result.skipped
    assert (dest / "ds" / "data.yaml").read_bytes() == b"v2"
    assert not (dest / "ds" / "stale.txt").exists()


def test_an_existing_folder_runspec_did_not_make_is_not_replaced(tmp_path: Path) -> None:
    dest = tmp_path / "data"
    (dest / "ds").mkdir(parents=True)
    (dest / "ds" / "precious").write_text("user data")
    with pytest.raises(RunspecError, match="was not extracted by runspec"):
        safetar.extract(_dataset_tar(tmp_path / "ds.tar"), dest)
    assert (dest / "ds" / "precious").read_text() == "user data"
    assert _tree(dest) == {"ds", "ds/precious"}


def _hostile(tmp_path: Path, build: object) -> Path:
    path = tmp_path / "evil.tar"
    with tarfile.open(path, "w") as tar:
        _add_file(tar, "ok/first.txt", b"written first in the archive")
        build(tar)  # type: ignore[operator]
    return path


def _dotdot(tar: tarfile.TarFile) -> None:
    _add_file(tar, "../escaped.txt", b"pwned")


def _inner_dotdot(tar: tarfile.TarFile) -> None:
    _add_file(tar, "ok/../../escaped.txt", b"pwned")


def _absolute(tar: tarfile.TarFile) -> None:
    _add_file(tar, "/tmp/runspec-abs-escaped.txt", b"pwned")


def _symlink_then_write(tar: tarfile.TarFile) -> None:
    _add_link(tar, "etc", "/etc")
    _add_file(tar, "etc/runspec-pwned", b"pwned")


def _relative_symlink_out(tar: tarfile.TarFile) -> None:
    _add_link(tar, "up", "../..")
    _add_file(tar, "up/escaped.txt", b"pwned")


def _inside_symlink_then_write(tar: tarfile.TarFile) -> None:
    # Even a link that points inside is not written through: the rule needs no disk state.
    _add_link(tar, "alias", "ok")
    _add_file(tar, "alias/through.txt", b"sneaky")


def _hardlink_out(tar: tarfile.TarFile) -> None:
    _add_link(tar, "shadow", "/etc/passwd", kind=tarfile.LNKTYPE)


def _device(tar: tarfile.TarFile) -> None:
    info = tarfile.TarInfo("dev/sda")
    info.type = tarfile.BLKTYPE
    info.devmajor, info.devminor = 8, 0
    tar.addfile(info)


@pytest.mark.parametrize(
    ("build", "member", "why"),
    [
        (_dotdot, "../escaped.txt", "'..'"),
        (_inner_dotdot, "ok/../../escaped.txt", "'..'"),
        (_absolute, "/tmp/runspec-abs-escaped.txt", "rewritten"),
        (_symlink_then_write, "etc", "absolute"),
        (_relative_symlink_out, "up", "outside"),
        (_inside_symlink_then_write, "alias/through.txt", "through the symlink 'alias'"),
        (_hardlink_out, "shadow", "absolute"),
        (_device, "dev/sda", "special file"),
    ],
)
def test_hostile_members_are_refused_by_name_and_nothing_is_written(
    tmp_path: Path, build: object, member: str, why: str
) -> None:
    tar = _hostile(tmp_path, build)
    dest = tmp_path / "data"
    outside_before = _tree(tmp_path)
    with pytest.raises(safetar.UnsafeTarError) as caught:
        safetar.extract(tar, dest)
    message = str(caught.value)
    assert repr(member) in message and why in message
    # The member checked before it was refused was not written either: all or nothing.
    assert _tree(dest) == set()
    assert _tree(tmp_path) == outside_before | {"data"}
    assert not Path("/tmp/runspec-abs-escaped.txt").exists()
    assert not Path("/etc/runspec-pwned").exists()


def test_declared_sizes_beyond_free_space_are_refused_before_writing(tmp_path: Path) -> None:
    # A sparse tar: its header declares more than the disk holds, yet it costs no space here.
    free = safetar.free_bytes(tmp_path)
    path = tmp_path / "huge.tar"
    small = tarfile.TarInfo("ds/data.yaml")
    small.size = 3
    huge = tarfile.TarInfo("ds/images/huge.bin")
    huge.size = free + 10**10
    with path.open("wb") as fh:
        fh.write(small.tobuf(format=tarfile.GNU_FORMAT) + b"abc".ljust(512, b"\0"))
        fh.write(huge.tobuf(format=tarfile.GNU_FORMAT))
    length = path.stat().st_size + (huge.size + 511) // 512 * 512 + 1024
    os.truncate(path, length)
    dest = tmp_path / "data"
    with pytest.raises(safetar.UnsafeTarError, match=r"'ds/images/huge\.bin'.*free"):
        safetar.extract(path, dest)
    assert _tree(dest) == set()


def test_a_corrupt_archive_says_so(tmp_path: Path) -> None:
    path = tmp_path / "broken.tar.gz"
    path.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(RunspecError, match=r"broken\.tar\.gz"):
        safetar.extract(path, tmp_path / "data")


def _many(tmp_path: Path, count: int) -> Path:
    tar_path = tmp_path / "many.tar.gz"
    with tarfile.open(tar_path, "w:gz") as tar:
        for i in range(count):
            tar.addfile(tarfile.TarInfo(f"d/f{i}"), io.BytesIO(b""))
    return tar_path


def test_a_tar_past_the_member_limit_is_refused_before_writing(tmp_path: Path) -> None:
    dest = tmp_path / "data"
    with pytest.raises(safetar.UnsafeTarError, match="more than 20 members"):
        safetar.extract(_many(tmp_path, 30), dest, max_files=20)
    assert list(dest.iterdir()) == []
    assert safetar.extract(_many(tmp_path, 20), dest, max_files=20).entries == ("d",)


def test_a_tar_past_the_free_inodes_is_refused_before_writing(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "nr_inodes=40,size=200m", "tmpfs", str(small)], check=True
    )
    try:
        with pytest.raises(safetar.UnsafeTarError, match="inodes"):
            safetar.extract(_many(tmp_path, 60), small / "data")
        assert [p.name for p in (small / "data").iterdir()] == []
    finally:
        subprocess.run(["umount", str(small)], check=True)
