"""The ``TableFs`` contract on the local backend, and ``HadoopFs`` against a stand-in for the
JVM's ``FileSystem`` with HDFS semantics (rename refuses an existing destination), so the
commit log's logic over Hadoop is checked without a JVM; the real JVM path is exercised by
tests/integration/connectors/test_parquet_hadoop.py."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.errors import CommitRejected, ConfigError
from daemon.storage.commitlog import META, CommitLog
from daemon.storage.fs import LocalFs, TableFs
from daemon.storage.hadoopfs import HadoopFs

TP0 = TopicPartition("t", 0)


# ---- a stand-in for py4j's view of org.apache.hadoop.fs (HDFS semantics) --------------------


class JavaError(Exception):
    def __init__(self, cls: str, message: str) -> None:
        super().__init__(message)
        self.java_exception = _JavaException(cls, message)


class _JavaException:
    def __init__(self, cls: str, message: str) -> None:
        self._cls, self._message = cls, message

    def getClass(self) -> Any:
        cls = self._cls
        return type("C", (), {"getName": staticmethod(lambda: cls)})()

    def getMessage(self) -> str:
        return self._message


class FakePath:
    def __init__(self, uri: str) -> None:
        self.uri = uri.rstrip("/")

    def getName(self) -> str:
        return self.uri.rpartition("/")[2]

    def toUri(self) -> Any:
        scheme, _, rest = self.uri.partition("://")
        return type("U", (), {"getScheme": lambda s: scheme, "getPath": lambda s: rest})()

    def getFileSystem(self, conf: Any) -> FakeHdfs:
        return conf["fs"]  # type: ignore[no-any-return]


class FakeStatus:
    def __init__(self, path: FakePath, is_dir: bool, mtime_ms: int) -> None:
        self.path, self.dir, self.mtime = path, is_dir, mtime_ms

    def getPath(self) -> FakePath:
        return self.path

    def isDirectory(self) -> bool:
        return self.dir

    def isFile(self) -> bool:
        return not self.dir

    def getModificationTime(self) -> int:
        return self.mtime


class FakeStream:
    def __init__(self, fs: FakeHdfs, uri: str) -> None:
        self.fs, self.uri, self.data = fs, uri, bytearray()

    def write(self, data: bytearray) -> None:
        self.data += data

    def hasCapability(self, name: str) -> bool:
        return name == "hsync"

    def hsync(self) -> None:
        self.fs.files[self.uri] = bytes(self.data)

    def close(self) -> None:
        self.fs.files[self.uri] = bytes(self.data)


class FakeHdfs:
    """Files and directories in dicts; rename refuses an existing destination (HDFS)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.dirs: dict[str, int] = {}
        self.renames = 0

    def _parent_ok(self, uri: str) -> bool:
        return uri.rpartition("/")[0] in self.dirs

    def mkdirs(self, p: FakePath) -> bool:
        uri = p.uri
        while "://" in uri and uri.partition("://")[2]:
            self.dirs.setdefault(uri, int(time.time() * 1000))
            uri = uri.rpartition("/")[0]
        return True

    def resolvePath(self, p: FakePath) -> FakePath:
        return p

    def hasPathCapability(self, p: FakePath, name: str) -> bool:
        return False

    def getFileStatus(self, p: FakePath) -> FakeStatus:
        if p.uri in self.files:
            return FakeStatus(p, False, 0)
        if p.uri in self.dirs:
            return FakeStatus(p, True, self.dirs[p.uri])
        raise JavaError("java.io.FileNotFoundException", p.uri)

    def listStatus(self, p: FakePath) -> list[FakeStatus]:
        if p.uri not in self.dirs:
            raise JavaError("java.io.FileNotFoundException", p.uri)
        children = [u for u in [*self.files, *self.dirs] if u.rpartition("/")[0] == p.uri]
        return [self.getFileStatus(FakePath(u)) for u in sorted(children)]

    def open(self, p: FakePath) -> Any:
        if p.uri not in self.files:
            raise JavaError("java.io.FileNotFoundException", p.uri)
        data = self.files[p.uri]
        return type("In", (), {"data": data, "close": lambda s: None})()

    def create(self, p: FakePath, overwrite: bool) -> FakeStream:
        if not overwrite and p.uri in self.files:
            raise JavaError("org.apache.hadoop.fs.FileAlreadyExistsException", p.uri)
        self.mkdirs(FakePath(p.uri.rpartition("/")[0]))
        return FakeStream(self, p.uri)

    def createNewFile(self, p: FakePath) -> bool:
        if p.uri in self.files:
            return False
        self.files[p.uri] = b""
        return True

    def rename(self, src: FakePath, dst: FakePath) -> bool:
        self.renames += 1
        if dst.uri in self.files or dst.uri in self.dirs or not self._parent_ok(dst.uri):
            return False
        if src.uri in self.files:
            self.files[dst.uri] = self.files.pop(src.uri)
            return True
        return False

    def delete(self, p: FakePath, recursive: bool) -> bool:
        gone = [u for u in [*self.files, *self.dirs] if u == p.uri or u.startswith(p.uri + "/")]
        for u in gone:
            self.files.pop(u, None)
            self.dirs.pop(u, None)
        return bool(gone)


class FakeSpark:
    def __init__(self, fs: FakeHdfs) -> None:
        io = type("IO", (), {"IOUtils": type("U", (), {"toByteArray": staticmethod(_bytes)})})
        hadoop_fs = type("FS", (), {"Path": FakePath})
        self._jvm = type("J", (), {})()
        self._jvm.org = type("O", (), {})()
        self._jvm.org.apache = type("A", (), {})()
        self._jvm.org.apache.hadoop = type("H", (), {"fs": hadoop_fs})()
        self._jvm.org.apache.commons = type("C", (), {"io": io})()
        conf = {"fs": fs}
        self._jsc = type("JSC", (), {"hadoopConfiguration": lambda s: conf})()


def _bytes(stream: Any) -> bytes:
    return stream.data  # type: ignore[no-any-return]


URI = "hdfs://nn/tables/t"


@pytest.fixture
def hdfs() -> FakeHdfs:
    return FakeHdfs()


def hadoop_log(hdfs: FakeHdfs, stale_after: float = 600.0) -> CommitLog:
    fs = HadoopFs(FakeSpark(hdfs), URI, stale_after=stale_after)
    return CommitLog(URI, fs=fs, stale_after=stale_after).open()


def stage_file(hdfs: FakeHdfs, log: CommitLog, commit_id: str, name: str) -> None:
    hdfs.files[f"{log.stage(commit_id)}/{name}"] = b"PAR1"


# ---- the contract, on both backends -----------------------------------------------------------


def backends(tmp_path: Path, hdfs: FakeHdfs) -> list[TableFs]:
    return [LocalFs(tmp_path / "t"), HadoopFs(FakeSpark(hdfs), URI)]


def test_exclusive_create_refuses_a_taken_name_on_both_backends(
    tmp_path: Path, hdfs: FakeHdfs
) -> None:
    for fs in backends(tmp_path, hdfs):
        fs.ensure_root()
        fs.mkdirs("_connectd/log")
        fs.publish_exclusive("_connectd/log/1.json", b"first")
        with pytest.raises(FileExistsError):
            fs.publish_exclusive("_connectd/log/1.json", b"second")
        assert fs.read("_connectd/log/1.json") == b"first", fs.kind
        assert fs.listdir("_connectd/log") == ["1.json"], fs.kind  # no temporary left
        assert fs.read("_connectd/log/2.json") is None and fs.listdir("nothing") == []


def test_rename_walk_marker_and_delete_on_both_backends(tmp_path: Path, hdfs: FakeHdfs) -> None:
    for fs in backends(tmp_path, hdfs):
        fs.ensure_root()
        fs.mkdirs("s/x=1")
        fs.publish_exclusive("s/x=1/a.parquet", b"a")
        fs.publish_exclusive("s/_SUCCESS", b"")
        fs.publish_exclusive("s/.a.crc", b"")
        assert fs.walk_files("s") == ["x=1/a.parquet"], fs.kind
        fs.mkdirs("x=1")
        fs.rename("s/x=1/a.parquet", "x=1/part-0.parquet")
        assert fs.is_file("x=1/part-0.parquet") and not fs.exists("s/x=1/a.parquet")
        with pytest.raises(FileNotFoundError):
            fs.rename("s/x=1/a.parquet", "x=1/part-1.parquet")
        assert fs.create_marker("done") and not fs.create_marker("done")
        fs.remove_tree("s")
        fs.remove_tree("s")  # missing is fine
        assert not fs.exists("s"), fs.kind


# ---- the commit log over the Hadoop backend ---------------------------------------------------


def test_hadoop_commit_log_commits_fences_and_refuses_like_the_local_one(hdfs: FakeHdfs) -> None:
    log = hadoop_log(hdfs)
    log.fence("c", 0, 2, [TP0])
    commit_id = log.new_commit_id()
    stage_file(hdfs, log, commit_id, "a.parquet")
    log.commit("c", 0, 2, [OffsetRange("t", 0, 0, 10)], commit_id=commit_id)
    assert f"{URI}/part-{commit_id}-00000.parquet" in hdfs.files
    assert not [u for u in hdfs.files if "/_connectd/staging/" in u]
    zombie = hadoop_log(hdfs)
    with pytest.raises(CommitRejected, match="zombie"):
        zombie.commit("c", 0, 1, [OffsetRange("t", 0, 10, 12)], commit_id=zombie.new_commit_id())
    with pytest.raises(CommitRejected, match="duplicate"):
        zombie.commit("c", 0, 2, [OffsetRange("t", 0, 5, 12)], commit_id=zombie.new_commit_id())
    assert hadoop_log(hdfs).committed_offsets() == {TP0: 10}


def test_racing_committers_get_distinct_sequence_numbers(hdfs: FakeHdfs) -> None:
    a, b = hadoop_log(hdfs), hadoop_log(hdfs)
    a.commit("c", 0, 1, [OffsetRange("t", 0, 0, 5)], commit_id=a.new_commit_id())
    # b opened before a's commit; it re-reads before creating the next record.
    b.commit("c", 1, 1, [OffsetRange("t", 1, 0, 7)], commit_id=b.new_commit_id())
    assert [r.seq for r in hadoop_log(hdfs).records()] == [1, 2]
    assert hadoop_log(hdfs).committed_offsets() == {TP0: 5, TopicPartition("t", 1): 7}


def test_a_commit_killed_after_its_record_is_rolled_forward_on_open(
    hdfs: FakeHdfs, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = hadoop_log(hdfs)
    commit_id = log.new_commit_id()
    stage_file(hdfs, log, commit_id, "a.parquet")
    monkeypatch.setattr(log, "_apply", lambda record: None)  # killed right after the record
    log.commit("c", 0, 1, [OffsetRange("t", 0, 0, 3)], commit_id=commit_id)
    assert f"{URI}/part-{commit_id}-00000.parquet" not in hdfs.files
    hadoop_log(hdfs)  # the next open
    assert f"{URI}/part-{commit_id}-00000.parquet" in hdfs.files
    assert not [u for u in hdfs.files if "/_connectd/staging/" in u]


def test_staging_of_a_killed_write_is_deleted_only_after_its_lease(hdfs: FakeHdfs) -> None:
    writer = hadoop_log(hdfs)
    old = f"{int((time.time() - 700) * 1000):013d}-{'a' * 16}"
    young = writer.new_commit_id()
    stage_file(hdfs, writer, old, "a.parquet")
    stage_file(hdfs, writer, young, "b.parquet")
    hadoop_log(hdfs, stale_after=600.0)  # another process opens: no guard of the writer is seen
    staged = {u.split("/_connectd/staging/")[1].split("/")[0] for u in hdfs.files if "staging" in u}
    assert staged == {young}  # the young one may still be committed by a live writer
    writer.commit("c", 0, 1, [OffsetRange("t", 0, 0, 1)], commit_id=young)
    assert hadoop_log(hdfs).committed_offsets() == {TP0: 1}


def test_filesystems_without_an_exclusive_create_are_refused(hdfs: FakeHdfs) -> None:
    for uri in ("s3a://bucket/t", "gs://bucket/t"):  # s3a: the fake reports no conditional
        with pytest.raises(ConfigError, match="atomic"):
            HadoopFs(FakeSpark(hdfs), uri)


def test_local_tables_keep_their_meta_layout(tmp_path: Path) -> None:
    with CommitLog(tmp_path / "t") as log:
        assert sorted(os.listdir(tmp_path / "t" / META)) == [
            "checkpoint",
            "done",
            "locks",
            "log",
            "staging",
        ]
        assert log.fs.kind == "local" and log.path == tmp_path / "t"


def test_checkpoints_and_clean_up_on_a_hadoop_filesystem(hdfs: FakeHdfs) -> None:
    """Issue 16: checkpoints are published and read, and the clean-up deletes, through the
    Hadoop backend's primitives as through the local ones."""
    fs = HadoopFs(FakeSpark(hdfs), "hdfs://nn/t")
    log = CommitLog("hdfs://nn/t", fs=fs, checkpoint_interval=5, retention_ms=0).open()
    for i in range(17):
        log.commit("c", 0, 1, [OffsetRange("t", 0, i, i + 1)], commit_id=log.new_commit_id())
    assert log.clean_up().records == 10
    names = sorted(u.rsplit("/", 2)[1] + "/" + u.rsplit("/", 1)[1] for u in hdfs.files)
    assert [n for n in names if n.startswith("checkpoint/")] == [
        f"checkpoint/{s:020d}.json" for s in (10, 15)
    ]
    assert [n for n in names if n.startswith("log/")] == [
        f"log/{s:020d}.json" for s in range(11, 18)
    ]
    fresh = CommitLog("hdfs://nn/t", fs=HadoopFs(FakeSpark(hdfs), "hdfs://nn/t")).open()
    assert fresh.committed_offsets() == {TP0: 17} and fresh.last_seq() == 17
