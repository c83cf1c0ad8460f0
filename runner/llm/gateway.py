"""The LLM gateway: every completion an agent or an action needs is made here, in the worker.

It resolves the run's model to a configured endpoint, enforces the run's token and cost budgets before the
call that would exceed them, calls the endpoint over the OpenAI protocol (retrying transient errors with
backoff), counts tokens and cost to the run, and records every call. API keys are read from the worker's
environment by variable name and never enter a sandbox, the database or a page.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

import psycopg
import urllib3
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.db.models import Count, F, Q, Sum
from django.db.models.functions import Greatest
from django.utils import timezone

from ..models import LLMCall, LLMLease, ModelEndpoint, Run
from ..text import db_json, db_text

log = logging.getLogger(__name__)

ALLOWED_OPTIONS = {"temperature", "max_tokens", "stop", "top_p", "seed"}
MAX_COMPLETION_TOKENS = 200_000
#: The most of an endpoint's answer that is read: a chat completion of MAX_COMPLETION_TOKENS tokens is a few MB at
#: most; a sick server sending more does not fill the worker's memory.
MAX_ANSWER_BYTES = 32 << 20
CHARS_PER_TOKEN = 4


class LLMError(Exception):
    """A completion could not be made; the subclass says whose fault it was (``kind`` names it)."""

    kind = ""


class LLMRequestError(LLMError):
    """The caller asked for something wrong (bad options, a refused request): the run goes on."""

    kind = "request"


class LLMBudgetError(LLMError):
    """The call would take the run over its token or cost budget: the run ends at a limit."""

    kind = "budget"


class LLMInfrastructureError(LLMError):
    """The endpoint is missing, misconfigured or failing: not the agent's fault."""

    kind = "infrastructure"


@dataclass
class Completion:
    text: str
    tokens_in: int
    tokens_out: int
    cost: Decimal
    latency_s: float
    call_id: int


def no_endpoint(model: str) -> LLMError:
    """The error for a model no enabled endpoint serves, naming the configured ones."""
    if not model:
        return LLMRequestError("this run has no model; start it with --model NAME to let it make LLM calls")
    names = sorted(ModelEndpoint.objects.filter(is_enabled=True).values_list("name", flat=True))
    return LLMInfrastructureError(f"no model endpoint named {model!r}; configured: {', '.join(names) or 'none'}")


@dataclass(frozen=True)
class EndpointClient:
    """What a process keeps for an endpoint address and key: a pool of open connections to it (through the proxy
    the environment names for it, as ``HTTPS_PROXY`` and ``NO_PROXY`` say), the URL of its chat completions and the
    headers of a request."""

    pool: urllib3.PoolManager
    url: str
    headers: dict[str, str]


#: The endpoint clients this process keeps, one per endpoint address and key (``client_for``).
_clients: dict[tuple[int, str, str], EndpointClient] = {}
_clients_lock = threading.Lock()


def client_for(endpoint: ModelEndpoint) -> EndpointClient:
    """The endpoint's client. One is kept per endpoint address and key in each process (a forked worker makes its
    own): its connections stay open between calls and its TLS context is built once (building one per call cost
    tens of milliseconds)."""
    key = (os.getpid(), endpoint.base_url, api_key_for(endpoint))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = _client_make(base_url=key[1], api_key=key[2])
    return client


def _client_make(*, base_url: str, api_key: str) -> EndpointClient:
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {api_key}"} if api_key else {})
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        return EndpointClient(urllib3.ProxyManager(proxy), url, headers)
    return EndpointClient(urllib3.PoolManager(), url, headers)


def api_key_for(endpoint: ModelEndpoint) -> str:
    """The endpoint's API key from the worker's environment ("" for an endpoint that needs none)."""
    if not endpoint.api_key_env:
        return ""
    key = os.environ.get(endpoint.api_key_env, "")
    if not key:
        raise LLMInfrastructureError(
            f"the API key of endpoint {endpoint.name} is not set: environment variable {endpoint.api_key_env} "
            "is empty on this worker",
        )
    return key


def cost_of(endpoint: ModelEndpoint, tokens_in: int, tokens_out: int) -> Decimal:
    million = Decimal(1_000_000)
    return (
        endpoint.price_input_per_mtok * Decimal(tokens_in) + endpoint.price_output_per_mtok * Decimal(tokens_out)
    ) / million


def estimate_tokens(messages: list[dict]) -> int:
    return len(json.dumps(messages)) // CHARS_PER_TOKEN + 1


#: Tokens a chat template may add around each message (role markers, separators), and around the whole prompt.
MESSAGE_OVERHEAD_TOKENS = 16


def prompt_bound(messages: list[dict]) -> int:
    """At most how many tokens the prompt can be, whatever the tokenizer: one per byte of its text (a byte-level
    tokenizer never makes more), plus the template's tokens around each message."""
    text_bytes = sum(len(str(m.get("content", "")).encode()) + len(str(m.get("role", "")).encode()) for m in messages)
    return text_bytes + MESSAGE_OVERHEAD_TOKENS * (len(messages) + 1)


@dataclass(frozen=True)
class Reservation:
    tokens: int
    cost: Decimal


def budget_reserve(run: Run, endpoint: ModelEndpoint, messages: list[dict], max_tokens: int) -> Reservation:
    """Reserve the call's worst case (the prompt's bound plus its max_tokens) against the run's token and cost
    budgets, in one conditional UPDATE, or refuse the call that could take the run over either. Calls in flight
    count as spent, so no two calls can together pass a budget; ``budget_settle`` gives the reservation back."""
    prompt = prompt_bound(messages)
    need = prompt + max_tokens
    cost = cost_of(endpoint, prompt, max_tokens)
    fits_tokens = Q(max_tokens__isnull=True) | Q(
        max_tokens__gte=F("tokens_in") + F("tokens_out") + F("tokens_reserved") + need
    )
    fits_cost = Q(max_cost__isnull=True) | Q(max_cost__gte=F("cost") + F("cost_reserved") + cost)
    reserved = Run.objects.filter(fits_tokens & fits_cost, pk=run.pk).update(
        tokens_reserved=F("tokens_reserved") + need, cost_reserved=F("cost_reserved") + cost
    )
    if reserved:
        return Reservation(need, cost)
    fresh = (
        Run.objects.filter(pk=run.pk)
        .values("tokens_in", "tokens_out", "tokens_reserved", "cost", "cost_reserved", "max_tokens", "max_cost")
        .get()
    )
    held = f" ({fresh['tokens_reserved']} held by calls in flight)" if fresh["tokens_reserved"] else ""
    if fresh["max_tokens"] is not None and not Run.objects.filter(fits_tokens, pk=run.pk).exists():
        raise LLMBudgetError(
            f"the run's token budget of {fresh['max_tokens']} would be exceeded: {fresh['tokens_in']} + "
            f"{fresh['tokens_out']} used{held}, this call needs up to {need} (its prompt's {need - max_tokens} at "
            f"one token per byte, plus max_tokens {max_tokens})",
        )
    raise LLMBudgetError(
        f"the run's cost budget of {fresh['max_cost']} would be exceeded: {fresh['cost']} spent, this call may "
        f"cost up to {cost:.6f}",
    )


@dataclass
class CallLedger:
    """What a run's attempt knows of its recorded model calls without asking the database: their counts and bytes
    (the run's and its current step's, for ``calls_limit_check``) and the current step's answers (for
    ``repeat_note``). Its session keeps it: only the attempt that holds a run records the run's calls, so after one
    read of what earlier attempts recorded (at the first call) it counts on by itself. Calls made without a ledger
    (a connection test, a direct call) read the database each time.

    A session's ledger ``defers`` its calls' records: an answered call is written, its endpoint slot and reservation
    given back, by the session's next statement (``calls_write``), which for an agent's call is the start of the
    action it answered (the record, the slot and the live action in one statement, instead of a statement each).
    Whatever comes first writes it: the next call, the step's record, the conversation's end, or a tick once it
    has waited ``DEFER_MAX_S`` for its agent (``RunSession.tick``; the conversation ticks that often meanwhile)."""

    run_id: int
    defers: bool = False
    step_index: int | None = None  # the step counted in step_n and step_size (None: nothing read yet)
    run_n: int = 0
    run_size: int = 0
    step_n: int = 0
    step_size: int = 0
    step_earlier: bool = False  # an earlier attempt recorded calls of this step (its answers are not in ``answers``)
    answers: list[LLMCall] = field(default_factory=list)  # the current step's answered calls, in order
    pending: Deferred | None = None  # an answered call not written yet

    def counts(self, step_index: int) -> dict | None:
        """The counts ``calls_limit_check`` needs, or None when the ledger cannot tell (an earlier step)."""
        if self.step_index is None:
            counts = _recorded_counts(self.run_id, step_index)
            self.run_n, self.run_size = counts["run_n"], counts["run_size"] or 0
            self.step_n, self.step_size = counts["step_n"], counts["step_size"] or 0
            self.step_index, self.step_earlier = step_index, bool(counts["step_n"])
        elif step_index > self.step_index:  # a step this attempt takes: no earlier attempt recorded its calls
            self.step_index, self.step_n, self.step_size, self.step_earlier = step_index, 0, 0, False
            self.answers.clear()
        elif step_index < self.step_index:
            return None
        return {"run_n": self.run_n, "run_size": self.run_size, "step_n": self.step_n, "step_size": self.step_size}

    def recorded(self, call: LLMCall) -> None:
        """Count a call just recorded (or deferred)."""
        if self.counts(call.step_index) is None:
            return
        self.run_n, self.step_n = self.run_n + 1, self.step_n + 1
        self.run_size, self.step_size = self.run_size + call.recorded_bytes, self.step_size + call.recorded_bytes
        if call.endpoint and call.completion:
            self.answers.append(call)

    def holds_answers(self, step_index: int) -> bool:
        """Whether ``answers`` holds every answer of step ``step_index`` (no earlier attempt recorded any)."""
        return self.counts(step_index) is not None and not self.step_earlier

    def answer_before(self, purpose: str, text: str) -> tuple[int, object] | None:
        """The newest call of the current step and ``purpose`` that got ``text``: its pk and messages."""
        for call in reversed(self.answers):
            if call.purpose == purpose and call.completion == text:
                return call.pk, call.messages
        return None


@dataclass
class Deferred:
    """An answered call whose record waits for its session's next statement, and what it holds till then."""

    call: LLMCall  # unsaved (its pk None), its fields set
    reservation: Reservation | None
    endpoint: ModelEndpoint
    slot: int
    since: float = field(default_factory=time.monotonic)


#: How long a deferred call may wait for its agent's next message before a tick writes it (and gives its slot back).
DEFER_MAX_S = 0.05


def calls_write(ledger: CallLedger, **run_fields: object) -> None:
    """Write the call ``ledger`` defers, if any, with ``run_fields`` set on its run in the same statement; with no
    call waiting, set ``run_fields`` alone (the session's next statement, whatever it was to write)."""
    deferred = ledger.pending
    if deferred is None:
        if run_fields:
            Run.objects.filter(pk=ledger.run_id).update(**run_fields)
        return
    ledger.pending = None
    _call_record(deferred.call, deferred.reservation, deferred.endpoint, deferred.slot, run_fields)


def _recorded_counts(run_id: int, step_index: int) -> dict:
    """How many calls the run recorded, and their bytes, in all and in step ``step_index``: one query."""
    in_step = Q(step_index=step_index)
    return LLMCall.objects.filter(run_id=run_id).aggregate(
        run_n=Count("pk"),
        run_size=Sum("recorded_bytes"),
        step_n=Count("pk", filter=in_step),
        step_size=Sum("recorded_bytes", filter=in_step),
    )


def calls_limit_check(run: Run, step_index: int, *, prompt_bytes: int = 0, ledger: CallLedger | None = None) -> None:
    """End the run (a limit) that has recorded as many model calls, or as many bytes of them, as a step or a run may
    hold: every request is a row with its prompt and completion, so these bound what a run can write
    (BENCH_LLM_CALLS_PER_STEP / _PER_RUN, BENCH_LLM_RECORDED_MB_PER_STEP / _PER_RUN). ``prompt_bytes``: the prompt
    of the call about to be made, counted with what is recorded already. The counts come from ``ledger`` when it
    can tell, else from the database."""
    counts = ledger.counts(step_index) if ledger is not None else None
    if counts is None:
        counts = _recorded_counts(run.pk, step_index)
    limits = [
        (counts["step_n"] + 1, settings.BENCH_LLM_CALLS_PER_STEP, f"model calls in step {step_index}", "one step"),
        (counts["run_n"] + 1, settings.BENCH_LLM_CALLS_PER_RUN, "model calls", "one run"),
    ]
    for made, most, what, where in limits:
        if made > most:
            raise LLMBudgetError(f"the run made {most} {what}, the most {where} may make")
    sizes = [
        (counts["step_size"], settings.BENCH_LLM_RECORDED_MB_PER_STEP, f"in step {step_index}", "one step"),
        (counts["run_size"], settings.BENCH_LLM_RECORDED_MB_PER_RUN, "in all", "one run"),
    ]
    for size, most_mb, what, where in sizes:
        if most_mb and (size or 0) + prompt_bytes > most_mb << 20:
            raise LLMBudgetError(
                f"the run's model calls {what} would hold {((size or 0) + prompt_bytes) / (1 << 20):.1f} MB of "
                f"prompts and completions, more than {where} may record ({most_mb} MB)"
            )


def prompt_size(messages: list[dict]) -> int:
    """The bytes a call's messages take where its row keeps them."""
    return len(json.dumps(messages, ensure_ascii=False).encode())


def budget_settle(run: Run, reservation: Reservation) -> None:
    """Give a call's reservation back: what it really spent was counted when it was recorded."""
    Run.objects.filter(pk=run.pk).update(**_settled(reservation))


def _settled(reservation: Reservation | None) -> dict:
    """The run's reservation columns with ``reservation`` given back (an UPDATE's values)."""
    if reservation is None:
        return {}
    return {
        "tokens_reserved": Greatest(F("tokens_reserved") - reservation.tokens, 0),
        "cost_reserved": Greatest(F("cost_reserved") - reservation.cost, Decimal(0)),
    }


def call_timeout(endpoint: ModelEndpoint, max_tokens: int) -> float:
    """How long one call may take: the endpoint's timeout_s, plus the answer's max_tokens at the slowest
    generation speed to expect when the endpoint states one (a slow server gets the time a long answer needs)."""
    rate = endpoint.output_tokens_per_s
    return endpoint.timeout_s + (max_tokens / rate if rate and rate > 0 else 0.0)


def timeout_reason(endpoint: ModelEndpoint, max_tokens: int) -> str:
    """Why a call was cut where it was, in words: the timeout and what it was sized from."""
    seconds = call_timeout(endpoint, max_tokens)
    if not endpoint.output_tokens_per_s or endpoint.output_tokens_per_s <= 0:
        return (
            f"no answer within the endpoint's timeout of {seconds:g} s for up to {max_tokens} tokens (timeout_s; "
            "set output_tokens_per_s to size it to the answer's max_tokens, or ask for fewer tokens)"
        )
    return (
        f"no answer within {seconds:g} s: the endpoint's timeout_s of {endpoint.timeout_s:g} s plus {max_tokens} "
        f"tokens at {endpoint.output_tokens_per_s:g} tokens/s (output_tokens_per_s); the endpoint is slower than "
        "that, or busy"
    )


class EndpointFailure(Exception):
    """An attempt that got no chat completion, in words (its ``str``): ``transient`` when asking again may help (a
    timeout, a lost connection, a server error or a busy server, an answer that is no chat completion); ``refused``
    when the endpoint refused the request itself (HTTP 400 or 404: the caller's to mend); ``status``: the HTTP
    status it answered with, if any; ``retry_after``: the seconds the endpoint asked to wait."""

    def __init__(
        self,
        text: str,
        *,
        transient: bool = True,
        status: int | None = None,
        refused: bool = False,
        retry_after: float | None = None,
    ):
        super().__init__(text)
        self.transient, self.status, self.refused, self.retry_after = transient, status, refused, retry_after


def _status_failure(status: int, headers: urllib3.HTTPHeaderDict, data: bytes) -> EndpointFailure:
    """An HTTP error status, with the message the endpoint gave (OpenAI's ``{"error": {"message": ...}}``, a
    bare ``{"error": ...}`` or ``{"detail": ...}``, else the body's text)."""
    text = data.decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    error = body.get("error", body.get("detail", body.get("message"))) if isinstance(body, dict) else None
    if isinstance(error, dict):
        error = error.get("message", error)
    message = str(error) if error else text
    try:
        retry_after = float(headers.get("retry-after", ""))
    except ValueError:
        retry_after = None
    return EndpointFailure(
        f"HTTP {status}: {message[:500]}",
        transient=status >= 500 or status in (408, 409, 429),
        status=status,
        refused=status in (400, 404),
        retry_after=retry_after,
    )


def _call(
    client: EndpointClient, endpoint: ModelEndpoint, messages: list[dict], options: dict, timeout: float
) -> tuple[dict, str]:
    """One chat completion request: the answer's JSON and its text, or ``EndpointFailure`` saying what came
    instead. The request is the OpenAI protocol's, made on the endpoint's kept connections: of its answer the
    gateway reads the text and the usage. Against a server that answers at once (``benchmarks/llm_call.py
    --clients``): 0.45 ms a call, httpx's client 0.57 ms, the ``openai`` package's typed client 1.20 ms."""
    body = json.dumps({"model": endpoint.model_id, "messages": messages, **options}).encode()
    try:
        response = client.pool.request(
            "POST",
            client.url,
            body=body,
            headers=client.headers,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            retries=False,
            redirect=False,
            preload_content=False,
        )
        data = response.read(MAX_ANSWER_BYTES + 1)
    except urllib3.exceptions.LocationValueError as exc:
        raise EndpointFailure(f"its address {endpoint.base_url} cannot be called: {exc}", transient=False) from None
    except urllib3.exceptions.NewConnectionError as exc:  # a ConnectTimeoutError too, for urllib3 1.x's sake
        raise EndpointFailure(f"no connection to {endpoint.base_url} ({str(exc)[:300]})") from None
    except urllib3.exceptions.TimeoutError:
        raise EndpointFailure(timeout_reason(endpoint, int(options["max_tokens"]))) from None
    except urllib3.exceptions.HTTPError as exc:
        raise EndpointFailure(f"no answer from {endpoint.base_url} ({type(exc).__name__}: {str(exc)[:300]})") from None
    if len(data) > MAX_ANSWER_BYTES:
        response.close()  # the rest is never read: its connection is not kept
        raise EndpointFailure(
            f"the answer is over {MAX_ANSWER_BYTES:,} bytes, more than any chat completion of "
            f"{MAX_COMPLETION_TOKENS} tokens; the endpoint is misbehaving",
            transient=False,
        )
    response.release_conn()
    if not 200 <= response.status < 300:
        raise _status_failure(response.status, response.headers, data)
    try:
        answer = json.loads(data)
    except ValueError:
        shown = data[:300].decode("utf-8", "replace")
        raise EndpointFailure(f"the answer is not a chat completion (not JSON): {shown!r}") from None
    choices = answer.get("choices") if isinstance(answer, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise EndpointFailure(f"the response has no choices: {data[:300].decode('utf-8', 'replace')}")
    text = message.get("content")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise EndpointFailure(f"the message content is not text: {str(text)[:300]}")
    return answer, text


def _usage(answer: dict) -> tuple[int, int] | str:
    """The prompt's and the completion's tokens the endpoint reported, or why they cannot be counted."""
    usage = answer.get("usage")
    if usage is None:
        return "the endpoint reported no usage"
    counts = (usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0) if isinstance(usage, dict) else ()
    if len(counts) != 2 or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        return f"the endpoint reported usage that is no token counts ({str(usage)[:200]})"
    return counts


#: Threads a process keeps for model calls (``_call_ticking``): a call the run stopped waiting for (its deadline, a
#: cancel) goes on in its thread until its own timeout, so a few may be busy while the next call is made.
CALL_THREADS = 16
_pools: dict[int, ThreadPoolExecutor] = {}


def _call_pool() -> ThreadPoolExecutor:
    """This process's threads for model calls (a forked worker makes its own): a thread started per call cost more
    than the call to a server on the same machine."""
    with _clients_lock:
        pool = _pools.get(os.getpid())
        if pool is None:
            pool = _pools[os.getpid()] = ThreadPoolExecutor(max_workers=CALL_THREADS, thread_name_prefix="llm-call")
    return pool


def _call_ticking(
    client: EndpointClient,
    endpoint: ModelEndpoint,
    messages: list[dict],
    options: dict,
    timeout: float,
    tick: Callable[[], None] | None,
):
    """``_call``, while the run goes on ticking (every second: its heartbeat, its time limit, a cancel): a call
    outlives neither its run's deadline nor a cancel. What ``tick`` raises ends the wait; the abandoned request ends
    at its own timeout in its thread, and its answer is dropped."""
    if tick is None:
        return _call(client, endpoint, messages, options, timeout)
    future = _call_pool().submit(_call, client, endpoint, messages, options, timeout)
    try:
        while True:
            try:
                return future.result(timeout=1.0)
            except FuturesTimeout:
                tick()
    finally:
        future.cancel()


def stop_cut(text: str, stop: str | list[str] | None) -> tuple[str, str]:
    """The answer up to its first stop sequence, and the sequence cut ("" when none was there). OpenAI's API
    leaves the stop sequence out; some servers (transformers serve) stop at it but keep it in the answer, others
    ignore it."""
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    found = [(text.find(s), s) for s in stops if s and s in text]
    if not found:
        return text, ""
    index, sequence = min(found)
    return text[:index], sequence


def repeat_note(
    run: Run,
    step_index: int,
    purpose: str,
    messages: list[dict],
    options: dict,
    text: str,
    ledger: CallLedger | None = None,
) -> str:
    """A note when a sampled call got exactly the answer an earlier call of the same step and ``purpose`` (the
    same caller asking again, its prompt perhaps amended) got: the endpoint seems to ignore temperature (greedy
    decoding), so asking again will not change the answer. Calls of other purposes (an action's own call beside
    the agent's) are other questions, whose answers may match by chance. The earlier answers come from ``ledger``
    when it holds them all, else from the database."""
    temperature = options.get("temperature")
    if not temperature or not text.strip():
        return ""
    purpose, text = db_text(purpose[:60]), db_text(text)
    if ledger is not None and ledger.holds_answers(step_index):
        earlier = ledger.answer_before(purpose, text)
    else:
        earlier = (
            LLMCall.objects.filter(run=run, step_index=step_index, purpose=purpose, completion=text)
            .exclude(endpoint="")
            .order_by("-pk")
            .values_list("pk", "messages")
            .first()
        )
    if earlier is None:
        return ""
    same = "the same request" if earlier[1] == db_json(messages) else "an earlier request of this step"
    return (
        f"the same answer as {same} got (call {earlier[0]}) at temperature {temperature:g}: the endpoint seems to "
        "ignore temperature (greedy decoding), so asking again is unlikely to change the answer"
    )


def complete(
    *,
    run: Run | None,
    messages: list[dict],
    model: str | None = None,
    step_index: int = 0,
    purpose: str = "",
    options: dict | None = None,
    tick: Callable[[], None] | None = None,
    ledger: CallLedger | None = None,
) -> Completion:
    """Make one completion for a run (or for a connection test when run is None). Raises LLMError. ``ledger``: the
    run's session's ``CallLedger``, so the run's call limits and earlier answers are not read per call."""
    model_name = model if model is not None else (run.model if run else "")
    if not model_name:
        raise no_endpoint(model_name)
    asked = options_check(options or {})
    if not _messages_ok(messages):
        raise LLMRequestError('messages must be a list of {"role": "system|user|assistant", "content": "..."}')
    if ledger is not None:
        calls_write(ledger)  # the call before this one first
    if run is not None:
        calls_limit_check(run, step_index, prompt_bytes=prompt_size(messages), ledger=ledger)
    call = _Call(run=run, messages=messages, step_index=step_index, purpose=purpose, ledger=ledger)
    call.begin(model_name, asked, tick=tick)
    endpoint, options = call.endpoint, call.options
    attempts = settings.BENCH_LLM_MAX_RETRIES + 1
    try:
        client = client_for(endpoint)  # a missing API key gives the slot back too
        for attempt in range(attempts):
            try:
                answer, text = _call_ticking(client, endpoint, messages, options, call.timeout_s, tick)
            except EndpointFailure as exc:
                call.failed(exc, attempt=attempt, attempts=attempts, tick=tick)
                continue
            return call.answered(answer, text)
        call.record(error="; ".join(call.errors))
    finally:
        call.release()
    times = "once" if attempts == 1 else f"{attempts} times"
    last = call.errors[-1] if call.errors else "no answer"
    raise LLMInfrastructureError(f"the model endpoint {endpoint.name} failed {times}: {last}")


def options_check(options: dict) -> dict:
    """The completion options an agent may set, checked: a bad one is the agent's error, not a crash."""
    clean = {}
    for key, value in options.items():
        if key not in ALLOWED_OPTIONS or value is None:
            continue
        whole = isinstance(value, int) and not isinstance(value, bool)
        if key == "max_tokens" and not (whole and 1 <= value <= MAX_COMPLETION_TOKENS):
            raise LLMRequestError(f"max_tokens must be a whole number from 1 to {MAX_COMPLETION_TOKENS}")
        if key == "seed" and not whole:
            raise LLMRequestError("seed must be a whole number")
        if key in ("temperature", "top_p"):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 2:
                raise LLMRequestError(f"{key} must be a number from 0 to 2")
        elif key == "stop" and not (
            isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        ):
            raise LLMRequestError("stop must be a string or a list of strings")
        clean[key] = value
    return clean


def _messages_ok(messages: object) -> bool:
    return isinstance(messages, list) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages
    )


def _sleep(seconds: float, tick: Callable[[], None] | None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if tick is not None:
            tick()
        time.sleep(min(0.25, max(deadline - time.monotonic(), 0)))


#: On PostgreSQL an endpoint's slots are session advisory locks, key ``SLOT_LOCKS << 48 | endpoint id << 16 | slot``:
#: taking one is a single statement that writes nothing, and the server gives back the slots of a connection that
#: ends (a worker that died) at once. Elsewhere (SQLite, for development) a slot is an ``LLMLease`` row, taken back
#: when it expires.
SLOT_LOCKS = 0x4C4C
MAX_SLOTS = 1 << 16


def _slot_key(endpoint_id: int, slot: int) -> int:
    return SLOT_LOCKS << 48 | endpoint_id << 16 | slot


#: The enabled endpoint named %s, its fields in ``ModelEndpoint``'s order, and the first of its free slots taken as an
#: advisory lock (NULL when all are in use): one statement that writes nothing. It is written out, not built by the
#: ORM, which took four times as long as the statement itself, per call. The subquery is a lazy scan under LIMIT: the
#: first free slot is locked and no other (PostgreSQL's << and | have one precedence, hence the parentheses).
SLOT_TAKE_SQL = """
SELECT {columns}, (
    SELECT s FROM generate_series(0, LEAST(e.max_concurrency, %s) - 1) AS s
    WHERE pg_try_advisory_lock((%s::bigint << 48) | (e.id::bigint << 16) | s) LIMIT 1
)
FROM runner_modelendpoint e WHERE e.name = %s AND e.is_enabled
"""
_ENDPOINT_FIELDS = [f.attname for f in ModelEndpoint._meta.concrete_fields]
_SLOT_TAKE = SLOT_TAKE_SQL.format(columns=", ".join(f'e."{name}"' for name in _ENDPOINT_FIELDS))


class _PreparingCursor(psycopg.Cursor):
    """A cursor that binds its parameters on the server and prepares what it runs, once per connection: the two
    statements every model call makes (``_slot_take``, ``CALL_RECORD_SQL``) skip their planning (0.1-0.3 ms each).
    Django's own cursors bind on the client and prepare nothing, as before."""

    def execute(self, query, params=None, *, prepare: bool | None = True, binary: bool | None = None):
        return super().execute(query, params, prepare=prepare, binary=binary)


#: What a connection's prepare threshold is set to for ``_PreparingCursor``: PostgreSQL connections are opened
#: without prepared statements (Django's default, for poolers), and a threshold no statement reaches prepares only
#: what is asked to be.
PREPARE_ASKED_ONLY = 1 << 62


class _PreparedDebugWrapper(CursorDebugWrapper):
    """Django's debug wrapper logs the statement a client-bound cursor sent; this one logs what it is given, its
    parameters in it, as Django shows its own."""

    def execute(self, sql, params=None):
        with self.debug_sql(self.db.ops.compose_sql(sql, params)):
            return CursorWrapper.execute(self, sql, params)


def _prepared_cursor() -> CursorWrapper:
    """A ``_PreparingCursor`` of the default connection, wrapped as Django wraps its own (errors as Django's, queries
    logged where Django logs them)."""
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:
        raw.prepare_threshold = PREPARE_ASKED_ONLY
    wrapper = _PreparedDebugWrapper if connection.queries_logged else CursorWrapper
    return wrapper(_PreparingCursor(raw), connection)


def _slot_take(model: str, asked: dict) -> ModelEndpoint:
    """The enabled endpoint named ``model`` with a free slot of it taken (``endpoint.slot``), or with ``slot`` None
    when all its slots are in use. Raises ``no_endpoint``'s error when there is no such endpoint."""
    if connection.vendor == "postgresql":
        with _prepared_cursor() as cursor:
            cursor.execute(_SLOT_TAKE, [MAX_SLOTS, SLOT_LOCKS, model])
            row = cursor.fetchone()
        if row is None:
            raise no_endpoint(model)
        endpoint = ModelEndpoint.from_db(connection.alias, _ENDPOINT_FIELDS, row[:-1])
        endpoint.slot = row[-1]
        return endpoint
    with transaction.atomic():
        endpoint = ModelEndpoint.objects.select_for_update().filter(name=model, is_enabled=True).first()
        if endpoint is None:
            raise no_endpoint(model)
        now = timezone.now()
        LLMLease.objects.filter(endpoint_id=endpoint.pk, expires_at__lt=now).delete()  # of calls whose worker died
        endpoint.slot = None
        if LLMLease.objects.filter(endpoint_id=endpoint.pk).count() < endpoint.max_concurrency:
            max_tokens = int((endpoint.completion_defaults() | asked)["max_tokens"])
            hold = call_timeout(endpoint, max_tokens) * (settings.BENCH_LLM_MAX_RETRIES + 1) + 60
            endpoint.slot = LLMLease.objects.create(endpoint=endpoint, expires_at=now + timedelta(seconds=hold)).pk
        return endpoint


def _slot_give(endpoint: ModelEndpoint, slot: int) -> None:
    """Give back a slot ``_slot_take`` took. A connection lost since gave its slots back as it ended."""
    if connection.vendor != "postgresql":
        LLMLease.objects.filter(pk=slot).delete()
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_slot_key(endpoint.pk, slot)])
    except DatabaseError:
        log.warning(
            "endpoint %s: slot %s not given back (the connection is gone, and its locks with it)",
            endpoint.name,
            slot,
            exc_info=True,
        )


#: A call's record on PostgreSQL: its row, what it adds to its run's counts (its reservation given back; other fields
#: of the run the session writes next, ``calls_write``) and its slot given back, in one
#: statement (through the ORM, a transaction of four took twice the time). Its commit does not wait for PostgreSQL
#: to flush it to disk (synchronous_commit off for this transaction alone: set_config's true), which costs from one
#: to several milliseconds on a busy disk: what it wrote is never half there, the next commit that waits (the step's
#: record) flushes it too, and a crash of the database server before any flush (the WAL writer's, every 200 ms by
#: default) loses it whole. A slot given back twice (the statement failed after giving it) is a warning of the
#: server's, no error.
CALL_RECORD_SQL = """
WITH call AS (
    INSERT INTO runner_llmcall (run_id, step_index, purpose, endpoint, model, messages, completion, tokens_in,
        tokens_out, cost, latency_s, error, recorded_bytes, created_at)
    VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id
), spent AS (
    UPDATE runner_run SET tokens_in = tokens_in + %s, tokens_out = tokens_out + %s, cost = cost + %s,
        tokens_reserved = GREATEST(tokens_reserved - %s, 0), cost_reserved = GREATEST(cost_reserved - %s, 0){fields}
    WHERE id = %s
)
SELECT id, set_config('synchronous_commit', 'off', true), pg_advisory_unlock(%s) FROM call
"""


def _call_record(
    call: LLMCall, reservation: Reservation | None, endpoint: ModelEndpoint, slot: int, run_fields: dict | None = None
) -> None:
    """Write ``call`` (unsaved, its fields set), add its tokens and cost to its run, give ``reservation`` back and
    ``endpoint``'s ``slot`` too, and set ``run_fields`` on the run, at once: what one writes the other does too."""
    run_fields = run_fields or {}
    if connection.vendor != "postgresql":
        with transaction.atomic():
            call.save(force_insert=True)
            Run.objects.filter(pk=call.run_id).update(
                tokens_in=F("tokens_in") + call.tokens_in,
                tokens_out=F("tokens_out") + call.tokens_out,
                cost=F("cost") + call.cost,
                **_settled(reservation),
                **run_fields,
            )
            LLMLease.objects.filter(pk=slot).delete()
        return
    held = reservation or Reservation(0, Decimal(0))
    row = [call.run_id, call.step_index, call.purpose, call.endpoint, call.model, json.dumps(call.messages)]
    row += [call.completion, call.tokens_in, call.tokens_out, call.cost, call.latency_s, call.error]
    row += [call.recorded_bytes, call.created_at, call.tokens_in, call.tokens_out, call.cost, held.tokens, held.cost]
    set_also = [Run._meta.get_field(name) for name in run_fields]
    fields = "".join(f", {connection.ops.quote_name(field.column)} = %s" for field in set_also)
    values = [
        field.get_db_prep_save(value, connection) for field, value in zip(set_also, run_fields.values(), strict=True)
    ]
    with _prepared_cursor() as cursor:
        cursor.execute(
            CALL_RECORD_SQL.format(fields=fields), [*row, *values, call.run_id, _slot_key(endpoint.pk, slot)]
        )
        call.pk = cursor.fetchone()[0]
    call._state.adding, call._state.db = False, connection.alias


@dataclass
class _Call:
    """One completion being made: what every record of it (answered or failed) shares."""

    run: Run | None
    messages: list[dict]
    step_index: int
    purpose: str
    ledger: CallLedger | None = None
    errors: list[str] = field(default_factory=list)  # what each failed attempt got, in words
    started: float = field(default_factory=time.monotonic)
    # Set by ``begin``, from the endpoint as it is when the call takes its slot:
    endpoint: ModelEndpoint | None = None
    options: dict = field(default_factory=dict)  # the endpoint's defaults with the caller's options over them
    timeout_s: float = 0.0
    slot: int | None = None  # the endpoint slot this call holds (``_slot_take``)
    reservation: Reservation | None = None  # what it holds of the run's budgets

    def begin(self, model: str, asked: dict, *, tick: Callable[[], None] | None) -> None:
        """Wait for a free slot of the enabled endpoint named ``model`` (its max_concurrency, shared by all workers
        through the database), then take it and reserve the call's worst case against the run's budgets
        (``budget_reserve``; a run without a budget reserves nothing): a call refused by its budget gives its slot
        back. The endpoint is read with the slot: a change to it (disabled, another address, other defaults) holds
        from the next call on."""
        while True:
            endpoint = _slot_take(model, asked)
            if endpoint.slot is not None:
                break
            if tick is not None:
                tick()
            time.sleep(0.2)
        self.endpoint, self.slot = endpoint, endpoint.slot
        self.options = endpoint.completion_defaults() | asked
        max_tokens = int(self.options["max_tokens"])
        self.timeout_s = call_timeout(endpoint, max_tokens)
        run = self.run
        if run is not None and (run.max_tokens is not None or run.max_cost is not None):
            try:
                self.reservation = budget_reserve(run, endpoint, self.messages, max_tokens)
            except LLMBudgetError:
                self.release()
                raise

    def release(self) -> None:
        """Give back the slot, and the reservation of a call that was not recorded (a tick ended the wait)."""
        if self.reservation is not None and self.run is not None:
            budget_settle(self.run, self.reservation)
            self.reservation = None
        if self.slot is not None:
            _slot_give(self.endpoint, self.slot)
            self.slot = None

    def record(self, *, text: str = "", tokens_in: int = 0, tokens_out: int = 0, error: str = "") -> LLMCall:
        """Store the call, count its tokens and cost to the run and give back its reservation and its slot, in one
        statement (``calls_write``'s, for a ledger that defers). A connection test stores nothing: ``release`` gives
        its slot back."""
        cost = cost_of(self.endpoint, tokens_in, tokens_out)
        latency = time.monotonic() - self.started
        if self.run is None:
            return LLMCall(cost=cost, latency_s=latency)
        call = LLMCall(
            run=self.run,
            step_index=self.step_index,
            purpose=db_text(self.purpose[:60]),
            endpoint=self.endpoint.name,
            model=self.endpoint.model_id,
            messages=db_json(self.messages),
            completion=db_text(text),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost=cost,
            latency_s=latency,
            error=db_text(error[:4000]),
            recorded_bytes=prompt_size(self.messages) + len(text.encode()) + len(error[:4000].encode()),
            created_at=timezone.now(),
        )
        ledger = self.ledger
        if ledger is not None and ledger.defers:
            ledger.pending = Deferred(call, self.reservation, self.endpoint, self.slot)
        else:
            _call_record(call, self.reservation, self.endpoint, self.slot)
        self.reservation = self.slot = None
        if ledger is not None:
            ledger.recorded(call)
        return call

    def failed(self, exc: EndpointFailure, *, attempt: int, attempts: int, tick: Callable[[], None] | None) -> None:
        """An attempt that failed: noted; raised as the LLMError it is when asking again cannot help, else waited
        after (the endpoint's Retry-After, or a backoff with jitter) unless it was the last attempt."""
        self.errors.append(str(exc))
        if not exc.transient:
            error_class = LLMRequestError if exc.refused else LLMInfrastructureError
            self.record(error="; ".join(self.errors))
            outcome = "refused the call" if exc.status else "failed"
            raise error_class(f"the model endpoint {self.endpoint.name} {outcome}: {self.errors[-1]}") from exc
        if attempt + 1 < attempts:
            delay = exc.retry_after or min(settings.BENCH_LLM_BACKOFF_S * 2**attempt, 30.0)
            _sleep(delay * (0.8 + 0.4 * random.random()), tick)

    def answered(self, answer: dict, text: str) -> Completion:
        """Record the answer with its tokens (estimated when the endpoint reports none) and notes on what it took:
        retries, a stop sequence the endpoint left in (cut off here), an answer repeated at a temperature."""
        usage = _usage(answer)
        notes = [f"retried after: {'; '.join(self.errors)}"] if self.errors else []
        if isinstance(usage, str):
            usage, unusable = (estimate_tokens(self.messages), len(text) // CHARS_PER_TOKEN), usage
            notes.append(f"{unusable}; tokens estimated from characters")
        tokens_in, tokens_out = usage
        text, cut = stop_cut(text, self.options.get("stop"))
        if cut:
            notes.append(f"the endpoint left the stop sequence {cut!r} in its answer; the answer ends before it")
        if self.run is not None:
            notes.append(
                repeat_note(self.run, self.step_index, self.purpose, self.messages, self.options, text, self.ledger)
            )
        notes = [note for note in notes if note]
        recorded = self.record(text=text, tokens_in=tokens_in, tokens_out=tokens_out, error="\n".join(notes))
        return Completion(text, tokens_in, tokens_out, recorded.cost, recorded.latency_s, recorded.pk)


def completion_for_run(
    *, run: Run, step_index: int, message: dict, tick: Callable[[], None], ledger: CallLedger | None = None
) -> dict:
    """Answer an agent's ``llm`` protocol request. Budget and infrastructure errors end the run (re-raised)."""
    options = {k: v for k, v in message.items() if k in ALLOWED_OPTIONS}
    # The models come from the run (set by whoever started it), never from the agent's package or config.
    allowed = run.models_allowed
    asked = message.get("model")
    if not allowed:
        refusal = "this run has no model: it was started without one (bench_run --model NAME gives it one)"
        return _refused(run, step_index, message, asked, refusal, ledger)
    model = asked or allowed["main"]
    if model not in allowed.values():
        names = ", ".join(f"{role} {name!r}" for role, name in allowed.items())
        refusal = f"this run may use only the models it was started with ({names}), not {model!r}"
        return _refused(run, step_index, message, asked, refusal, ledger)
    try:
        result = complete(
            run=run,
            messages=message.get("messages"),
            model=model,
            step_index=step_index,
            purpose=str(message.get("purpose", "agent")),
            options=options,
            tick=tick,
            ledger=ledger,
        )
    except LLMRequestError as exc:
        return {"type": "error", "message": str(exc)}
    return {
        "type": "completion",
        "text": result.text,
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
        "cost": float(result.cost),
    }


def _refused(run: Run, step_index: int, message: dict, asked: object, refusal: str, ledger: CallLedger | None) -> dict:
    """A request no endpoint saw: recorded on the run (no tokens, no cost) so the trace shows what was asked, and
    counted against what a run may record."""
    if ledger is not None:
        calls_write(ledger)  # the call before this one first
    calls_limit_check(run, step_index, ledger=ledger)
    call = LLMCall.objects.create(
        run=run,
        step_index=step_index,
        purpose=db_text(str(message.get("purpose", "agent"))[:60]),
        endpoint="",
        model=db_text(str(asked or "")[:200]),
        error=f"refused, no endpoint called: {refusal}",
    )
    if ledger is not None:
        ledger.recorded(call)
    return {"type": "error", "message": refusal}


def endpoint_check(endpoint: ModelEndpoint) -> tuple[bool, str]:
    """The admin's "test connection": one tiny completion; the outcome is stored on the endpoint."""
    try:
        result = complete(
            run=None,
            model=endpoint.name,
            messages=[{"role": "user", "content": "Reply with the word: pong"}],
            options={"max_tokens": 5},
        )
        ok, message = True, f"answered {result.text[:80]!r} in {result.latency_s:.2f} s"
    except LLMError as exc:
        ok, message = False, str(exc)
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(
        last_check_at=timezone.now(), last_check_ok=ok, last_check_message=message
    )
    return ok, message


def endpoints_sync(specs: list[dict]) -> list[ModelEndpoint]:
    """Create or update endpoints from configuration (BENCH_MODEL_ENDPOINTS)."""
    allowed = {
        "base_url", "api_key_env", "model_id", "price_input_per_mtok", "price_output_per_mtok", "timeout_s",
        "output_tokens_per_s", "max_concurrency", "is_enabled", "default_max_tokens", "default_temperature",
    }  # fmt: skip
    for spec in specs:  # all checked before any is written
        if not isinstance(spec, dict) or "name" not in spec or "base_url" not in spec:
            raise ValueError(f"a model endpoint needs at least name and base_url: {spec!r}")
        unknown = set(spec) - allowed - {"name"}
        if unknown:
            raise ValueError(
                f"unknown keys {sorted(unknown)} in model endpoint {spec['name']}; allowed: {sorted(allowed)}"
            )
        for key in ("timeout_s", "output_tokens_per_s", "default_max_tokens"):
            value = spec.get(key)
            if value is None and key != "timeout_s":
                continue
            if key in spec and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
                raise ValueError(f"{key} of model endpoint {spec['name']} must be a number above 0, not {value!r}")
        temperature = spec.get("default_temperature")
        number = isinstance(temperature, int | float) and not isinstance(temperature, bool)
        if temperature is not None and not (number and 0 <= temperature <= 2):
            raise ValueError(
                f"default_temperature of model endpoint {spec['name']} must be from 0 to 2, not {temperature!r}"
            )
    endpoints = []
    with transaction.atomic():
        for spec in specs:
            defaults = {k: v for k, v in spec.items() if k in allowed}
            defaults.setdefault("model_id", spec["name"])
            endpoint, _ = ModelEndpoint.objects.update_or_create(name=spec["name"], defaults=defaults)
            endpoints.append(endpoint)
    return endpoints
