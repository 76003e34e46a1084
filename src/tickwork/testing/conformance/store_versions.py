"""Store conformance: versioned changes to jobs (commands consumed from a stream).

A change that carries a ``JobVersion`` is written only when its version is newer than the
last one applied to the job's name, in the same transaction that records it; else
StaleVersion, and nothing of the change is written. Versions are kept after a delete.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace

import pytest

from tickwork.drivers.base import (
    JobDeleteParams,
    JobUpdateParams,
    JobVersion,
    Store,
)
from tickwork.errors import Conflict, JobNotFound, StaleVersion
from tickwork.testing.factories import NOW, add_job, create_params, job_spec, seconds


class VersionConformance:
    class TestJobVersions:
        async def test_a_create_records_its_version(self, store: Store) -> None:
            assert await store.job_version_get("v") is None
            await store.job_create(replace(create_params(job_spec("v")),
                                           version=JobVersion("v", 3)))
            assert await store.job_version_get("v") == 3

        async def test_a_newer_update_applies_and_an_older_one_is_refused(
                self, store: Store) -> None:
            job = await store.job_create(replace(create_params(job_spec("v", priority=1)),
                                                 version=JobVersion("v", 5)))
            newer = await store.job_update(JobUpdateParams(
                id=job.id, spec=job_spec("v", priority=7), next_run_at=None,
                now=NOW + seconds(1), version=JobVersion("v", 7)))
            assert newer.spec.priority == 7
            for old in (6, 7):  # older, and as old: neither is written
                with pytest.raises(StaleVersion) as caught:
                    await store.job_update(JobUpdateParams(
                        id=job.id, spec=job_spec("v", priority=old), next_run_at=None,
                        now=NOW + seconds(2), version=JobVersion("v", old)))
                assert (caught.value.version, caught.value.applied) == (old, 7)
            assert (await store.job_get("v")).spec.priority == 7
            assert await store.job_version_get("v") == 7

        async def test_a_stale_create_writes_nothing(self, store: Store) -> None:
            job = await add_job(store, "v")
            await store.job_delete(JobDeleteParams(id=job.id, now=NOW + seconds(1),
                                                   version=JobVersion("v", 9)))
            with pytest.raises(StaleVersion):
                await store.job_create(replace(create_params(job_spec("v")),
                                               version=JobVersion("v", 8)))
            with pytest.raises(JobNotFound):  # a late older command does not bring it back
                await store.job_get("v")
            assert await store.job_version_get("v") == 9

        async def test_a_refused_change_keeps_the_version(self, store: Store) -> None:
            await add_job(store, "taken")
            with pytest.raises(Conflict):  # the name is taken: rolled back, version too
                await store.job_create(replace(create_params(job_spec("taken")),
                                               version=JobVersion("taken", 1)))
            assert await store.job_version_get("taken") is None

        async def test_a_stale_delete_keeps_the_job(self, store: Store) -> None:
            job = await store.job_create(replace(create_params(job_spec("v")),
                                                 version=JobVersion("v", 4)))
            with pytest.raises(StaleVersion):
                await store.job_delete(JobDeleteParams(id=job.id, now=NOW + seconds(1),
                                                       version=JobVersion("v", 2)))
            assert (await store.job_get("v")).id == job.id

        async def test_racing_updates_leave_the_newest(self, store: Store,
                                                       peer_store: Store) -> None:
            job = await store.job_create(replace(create_params(job_spec("v")),
                                                 version=JobVersion("v", 1)))

            async def update(on: Store, version: int) -> None:
                with contextlib.suppress(StaleVersion):
                    await on.job_update(JobUpdateParams(
                        id=job.id, spec=job_spec("v", priority=version), next_run_at=None,
                        now=NOW + seconds(version), version=JobVersion("v", version)))

            await asyncio.gather(*(update(store if v % 2 else peer_store, v)
                                   for v in range(2, 12)))
            assert (await store.job_get("v")).spec.priority == 11
            assert await store.job_version_get("v") == 11

        async def test_versions_are_kept_per_namespace(self, store: Store) -> None:
            """Job names are unique per namespace, and so are their versions: a name's
            version in one namespace neither holds back nor is held back by another's."""
            acme = await store.job_create(replace(create_params(job_spec("v")),
                                                  namespace="acme",
                                                  version=JobVersion("v", 5, "acme")))
            await store.job_create(replace(create_params(job_spec("v")), namespace="globex",
                                           version=JobVersion("v", 2, "globex")))
            assert await store.job_version_get("v", "acme") == 5
            assert await store.job_version_get("v", "globex") == 2
            assert await store.job_version_get("v") is None  # default has none
            with pytest.raises(StaleVersion):
                await store.job_update(JobUpdateParams(
                    id=acme.id, spec=job_spec("v", priority=3), next_run_at=None,
                    now=NOW + seconds(1), version=JobVersion("v", 4, "acme")))
            assert await store.job_version_get("v", "globex") == 2
