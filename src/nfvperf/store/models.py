"""SQLAlchemy 2 models.  Every table keeps its details in JSON columns; the scalar columns are
what history/compare/report filter and sort on."""
from __future__ import annotations

import datetime as dt
from typing import Any, Optional

from sqlalchemy import JSON, BigInteger, Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

SCHEMA_VERSION = 2   # 2: tests.study, runs.testbed (added in place to older stores)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uid: Mapped[str] = mapped_column(String(32), unique=True, index=True)   # short hex id
    tag: Mapped[str] = mapped_column(String(40))                              # "nfv" + uid
    suite: Mapped[str] = mapped_column(String(200))
    suite_path: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    topology: Mapped[str] = mapped_column(String(40), default="")
    dut: Mapped[str] = mapped_column(String(40), default="")
    tg: Mapped[str] = mapped_column(String(20), default="")
    profile: Mapped[str] = mapped_column(String(20), default="")
    status: Mapped[str] = mapped_column(String(20), default="running")   # running|completed|failed|interrupted|aborted
    reason: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    finished_at: Mapped[Optional[dt.datetime]] = mapped_column(DateTime, nullable=True)
    run_dir: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    environment: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    headline: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    # name of the testbed the run ran on (None: the local host); hosts and roles in environment
    testbed: Mapped[Optional[str]] = mapped_column(String(120), nullable=True, index=True)
    schema_version: Mapped[int] = mapped_column(Integer, default=SCHEMA_VERSION)

    tests: Mapped[list["Test"]] = relationship(back_populates="run", cascade="all, delete-orphan",
                                               order_by="Test.id")


class Test(Base):
    """One test entry at one frame size (or one IMIX profile)."""

    __tablename__ = "tests"
    __test__ = False          # not a pytest class
    # nfvperf trend selects a series' tests by name and frame size (added in place to older stores)
    __table_args__ = (Index("ix_tests_name_size", "name", "frame_size_b"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    method: Mapped[str] = mapped_column(String(60))
    frame_size_b: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    # running|passed|failed|interrupted|aborted|skipped
    status: Mapped[str] = mapped_column(String(20), default="running")
    reason: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    finished_at: Mapped[Optional[dt.datetime]] = mapped_column(DateTime, nullable=True)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    traffic: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)   # TrafficProfile.to_dict()
    # TopologySpec dump + switching_operations + directions (transmitting interfaces)
    topology: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # a unit of a study: {"name": study, "axes": {axis: value}, "baseline": bool}; None otherwise
    # (SQL NULL, not JSON null, so that `where study is not null` selects the units of studies)
    study: Mapped[Optional[dict[str, Any]]] = mapped_column(JSON(none_as_null=True), nullable=True)

    run: Mapped[Run] = relationship(back_populates="tests")
    trials: Mapped[list["Trial"]] = relationship(back_populates="test", cascade="all, delete-orphan",
                                                 order_by="Trial.seq")
    results: Mapped[list["Result"]] = relationship(back_populates="test", cascade="all, delete-orphan",
                                                   order_by="Result.id")


class Trial(Base):
    __tablename__ = "trials"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    test_id: Mapped[int] = mapped_column(ForeignKey("tests.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    duration_s: Mapped[float] = mapped_column(Float)
    load_pps: Mapped[float] = mapped_column(Float)          # per interface (MLR Trial Load)
    sent: Mapped[int] = mapped_column(Integer, default=0)
    received: Mapped[int] = mapped_column(Integer, default=0)
    loss_ratio: Mapped[float] = mapped_column(Float, default=0.0)
    valid: Mapped[bool] = mapped_column(Boolean, default=True)
    context: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)    # phase, goal, repetition...
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)     # TrialResult.to_dict()

    test: Mapped[Test] = relationship(back_populates="trials")


class Result(Base):
    __tablename__ = "results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    test_id: Mapped[int] = mapped_column(ForeignKey("tests.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(60))                          # method name
    value_pps: Mapped[Optional[float]] = mapped_column(Float, nullable=True)  # headline, per interface
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)         # MethodResult.to_dict()

    test: Mapped[Test] = relationship(back_populates="results")


class TestbedLock(Base):
    """One testbed, one job (issue 10): the row exists while a run holds the testbed.  Taken by
    inserting the primary key (atomic on SQLite and PostgreSQL), refreshed by a heartbeat, deleted
    at the run's end; see :mod:`nfvperf.store.lock`.  Times are the database's clock (UTC)."""

    __tablename__ = "testbed_locks"
    __test__ = False

    testbed: Mapped[str] = mapped_column(String(120), primary_key=True)
    run_uid: Mapped[str] = mapped_column(String(32))
    hostname: Mapped[str] = mapped_column(String(255))          # the controller that runs the job
    pid: Mapped[int] = mapped_column(Integer)
    pid_starttime: Mapped[Optional[int]] = mapped_column(BigInteger, nullable=True)
    user: Mapped[Optional[str]] = mapped_column(String(64), nullable=True)
    acquired_at: Mapped[dt.datetime] = mapped_column(DateTime)
    heartbeat_at: Mapped[dt.datetime] = mapped_column(DateTime)
