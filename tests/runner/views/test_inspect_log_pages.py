"""The Inspect AI log downloads of the run page, the batch's runs list and the API follow the access rule: a
private agent's runs are a 404 (one run) or left out (a batch) for anyone but its owner and staff, and what is
downloaded is a log the library reads."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from inspect_ai.log import read_eval_log

from runner.models import Batch, Run


def _read(response, tmp_path):
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    # Named as Inspect names its logs (a timestamp first): inspect view lists no other .json file.
    assert re.search(r'attachment; filename="\d{4}-\d{2}-\d{2}T[^"]+\.json"', response["Content-Disposition"])
    path = tmp_path / "download.json"
    path.write_bytes(b"".join(response.streaming_content))
    return read_eval_log(str(path))


@pytest.mark.parametrize("where", ["page", "api"])
def test_a_runs_inspect_log_is_a_404_to_anyone_but_those_who_may_see_it(viewer, private_run, where, tmp_path):
    url = (
        reverse("runner:run_inspect_log", args=[private_run.pk])
        if where == "page"
        else f"/api/v1/runs/{private_run.pk}/inspect-log/"
    )

    response = viewer.client.get(url)

    if not viewer.may_see:
        assert response.status_code == 404
        return
    [sample] = _read(response, tmp_path).samples
    assert sample.id == private_run.pk and sample.scores["mlab_bench"].value == 9.0
    assert [e.function for e in sample.events if e.event == "tool"] == ["Write File"]


@pytest.mark.parametrize("where", ["page", "api"])
def test_a_batchs_inspect_log_holds_only_the_runs_one_may_see(viewer, private_run, public_run, where, tmp_path):
    batch = Batch.objects.create(agent=public_run.agent)
    Run.objects.filter(pk__in=[private_run.pk, public_run.pk]).update(batch=batch)
    url = (
        reverse("runner:batch_inspect_log", args=[batch.pk])
        if where == "page"
        else f"/api/v1/batches/{batch.pk}/inspect-log/"
    )

    log = _read(viewer.client.get(url), tmp_path)

    expected = {public_run.pk, private_run.pk} if viewer.may_see else {public_run.pk}
    assert {s.id for s in log.samples} == expected and log.results.total_samples == len(expected)
    assert viewer.client.get(url.replace(str(batch.pk), str(batch.pk + 1000))).status_code == 404


def test_the_run_page_and_the_batchs_runs_link_to_their_inspect_logs(client, public_run):
    batch = Batch.objects.create(agent=public_run.agent)
    Run.objects.filter(pk=public_run.pk).update(batch=batch)
    batch_log = reverse("runner:batch_inspect_log", args=[batch.pk])

    page = client.get(reverse("runner:run_detail", args=[public_run.pk])).content.decode()
    runs = client.get(reverse("runner:run_list"), {"batch": batch.pk}).content.decode()

    assert reverse("runner:run_inspect_log", args=[public_run.pk]) in page and batch_log in page
    assert batch_log in runs
