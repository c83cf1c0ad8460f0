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

import urllib3
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, F, Q, Sum
from django.db.models.functions import Greatest
from django.utils import timezone

from ..models import LLMCall, LLMLease, ModelEndpoint, Run
from ..text import db_json, db_text

log = logging.getLogger(__name__)

ALLOWED_OPTIONS = {"temperature", "max_tokens", "stop", "top_p", "seed", "tools", "tool_choice"}
#: What an agent may ask of the model's functions (``tool_choice``): OpenAI's words, or one function by name.
TOOL_CHOICES = ("none", "auto", "required")
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
    #: The functions the model called (OpenAI's ``tool_calls``: id, type and function name and arguments), if any.
    tool_calls: list[dict] = field(default_factory=list)


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


def estimate_tokens(messages: list[dict], tools: list | None = None) -> int:
    return (
        len(json.dumps(messages)) // CHARS_PER_TOKEN + (len(json.dumps(tools)) // CHARS_PER_TOKEN if tools else 0) + 1
    )


#: Tokens a chat template may add around each message (role markers, separators), and around the whole prompt.
MESSAGE_OVERHEAD_TOKENS = 16


def prompt_bound(messages: list[dict], tools: list | None = None) -> int:
    """At most how many tokens the prompt can be, whatever the tokenizer: one per byte of its text (a byte-level
    tokenizer never makes more), with the function calls it quotes and the functions offered (as JSON, the most
    a template writes of them), plus the template's tokens around each message."""
    text_bytes = sum(len(str(m.get("content") or "").encode()) + len(str(m.get("role", "")).encode()) for m in messages)
    calls_bytes = sum(len(json.dumps(m["tool_calls"]).encode()) for m in messages if m.get("tool_calls"))
    calls_bytes += sum(len(str(m.get("tool_call_id", "")).encode()) for m in messages)
    tools_bytes = len(json.dumps(tools).encode()) if tools else 0
    return text_bytes + calls_bytes + tools_bytes + MESSAGE_OVERHEAD_TOKENS * (len(messages) + 1)


@dataclass(frozen=True)
class Reservation:
    tokens: int
    cost: Decimal


def budget_reserve(
    run: Run, endpoint: ModelEndpoint, messages: list[dict], max_tokens: int, tools: list | None = None
) -> Reservation:
    """Reserve the call's worst case (the prompt's bound plus its max_tokens) against the run's token and cost
    budgets, in one conditional UPDATE, or refuse the call that could take the run over either. Calls in flight
    count as spent, so no two calls can together pass a budget; ``budget_settle`` gives the reservation back."""
    prompt = prompt_bound(messages, tools)
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


def _recorded_counts(run_id: int, step_index: int) -> dict:
    """How many calls the run recorded, and their bytes, in all and in step ``step_index``: one query."""
    in_step = Q(step_index=step_index)
    return LLMCall.objects.filter(run_id=run_id).aggregate(
        run_n=Count("pk"),
        run_size=Sum("recorded_bytes"),
        step_n=Count("pk", filter=in_step),
        step_size=Sum("recorded_bytes", filter=in_step),
    )


def calls_limit_check(run: Run, step_index: int, *, prompt_bytes: int = 0) -> None:
    """End the run (a limit) that has recorded as many model calls, or as many bytes of them, as a step or a run may
    hold: every request is a row with its prompt and completion, so these bound what a run can write
    (BENCH_LLM_CALLS_PER_STEP / _PER_RUN, BENCH_LLM_RECORDED_MB_PER_STEP / _PER_RUN). ``prompt_bytes``: the prompt
    of the call about to be made, counted with what is recorded already."""
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


def prompt_size(messages: list[dict], tools: dict | None = None) -> int:
    """The bytes a call's messages, and the functions it offers (``tools``: the row's), take where its row keeps
    them."""
    return len(json.dumps(messages, ensure_ascii=False).encode()) + (
        len(json.dumps(tools, ensure_ascii=False).encode()) if tools else 0
    )


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
) -> tuple[dict, dict]:
    """One chat completion request: the answer's JSON and its message (its text in ``content``, "" for none, and
    the functions it called in ``tool_calls``), or ``EndpointFailure`` saying what came instead. The request is the
    OpenAI protocol's, made on the endpoint's kept connections: of its answer the gateway reads the message and the
    usage. Against a server that answers at once (``benchmarks/llm_call.py --clients``): 0.45 ms a call, httpx's
    client 0.57 ms, the ``openai`` package's typed client 1.20 ms."""
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
    calls = message.get("tool_calls") or []
    if not (isinstance(calls, list) and all(_tool_call_ok(call) for call in calls)):
        raise EndpointFailure(
            "the message's tool_calls are not a list of "
            '{"id": ..., "type": "function", "function": {"name": ..., "arguments": "<JSON text>"}}: '
            f"{json.dumps(calls)[:300]}"
        )
    return answer, {"content": text, "tool_calls": calls}


def _named_function(item: object) -> dict | None:
    """The ``function`` of a tool, a tool choice or a tool call (OpenAI's shapes) when it is an object with a name;
    else None."""
    function = item.get("function") if isinstance(item, dict) else None
    return function if isinstance(function, dict) and isinstance(function.get("name"), str) else None


def _tool_call_ok(call: object) -> bool:
    """Whether ``call`` is a function call as OpenAI's protocol writes one (its arguments JSON text)."""
    function = _named_function(call)
    return (
        function is not None
        and isinstance(call.get("id"), str)
        and call.get("type", "function") == "function"
        and isinstance(function.get("arguments"), str)
    )


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
) -> str:
    """A note when a sampled call got exactly the answer an earlier call of the same step and ``purpose`` (the
    same caller asking again, its prompt perhaps amended) got: the endpoint seems to ignore temperature (greedy
    decoding), so asking again will not change the answer. Calls of other purposes (an action's own call beside
    the agent's) are other questions, whose answers may match by chance."""
    temperature = options.get("temperature")
    if not temperature or not text.strip():
        return ""
    purpose, text = db_text(purpose[:60]), db_text(text)
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
) -> Completion:
    """Make one completion for a run (or for a connection test when run is None). Raises LLMError."""
    model_name = model if model is not None else (run.model if run else "")
    if not model_name:
        raise no_endpoint(model_name)
    asked = options_check(options or {})
    problem = messages_problem(messages)
    if problem:
        raise LLMRequestError(problem)
    if run is not None:
        calls_limit_check(run, step_index, prompt_bytes=prompt_size(messages, _offered(asked)))
    call = _Call(run=run, messages=messages, step_index=step_index, purpose=purpose)
    call.begin(model_name, asked, tick=tick)
    endpoint, options = call.endpoint, call.options
    attempts = settings.BENCH_LLM_MAX_RETRIES + 1
    try:
        client = client_for(endpoint)  # a missing API key gives the slot back too
        for attempt in range(attempts):
            try:
                answer, reply = _call_ticking(client, endpoint, messages, options, call.timeout_s, tick)
            except EndpointFailure as exc:
                call.failed(exc, attempt=attempt, attempts=attempts, tick=tick)
                continue
            return call.answered(answer, reply)
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
        elif key == "tools" and not (isinstance(value, list) and value and all(_tool_ok(t) for t in value)):
            raise LLMRequestError(
                'tools must be a list of {"type": "function", "function": {"name": "...", "description": "...", '
                '"parameters": {JSON schema}}}'
            )
        elif key == "tool_choice" and not ((isinstance(value, str) and value in TOOL_CHOICES) or _named_choice(value)):
            raise LLMRequestError(
                f'tool_choice must be one of {", ".join(TOOL_CHOICES)} or {{"type": "function", "function": '
                '{"name": "..."}}'
            )
        clean[key] = value
    if "tool_choice" in clean and "tools" not in clean:
        raise LLMRequestError("tool_choice needs tools: the functions the model may call")
    return clean


def _tool_ok(tool: object) -> bool:
    function = _named_function(tool)
    return (
        function is not None
        and tool.get("type") == "function"
        and bool(function["name"])
        and isinstance(function.get("description", ""), str)
        and isinstance(function.get("parameters", {}), dict)
    )


def _named_choice(choice: object) -> bool:
    return _named_function(choice) is not None and choice.get("type") == "function"


def _offered(options: dict) -> dict:
    """What a call offers of the model's functions, as its row keeps it: ``tools`` and ``tool_choice``; {} for none."""
    return {key: options[key] for key in ("tools", "tool_choice") if key in options}


def messages_problem(messages: object) -> str:
    """What is wrong with a call's messages, in words ("" when nothing): each has a role and text content; an
    assistant's may instead carry the function calls it made (``tool_calls``, content null), and a ``tool`` message
    answers one of them by its ``tool_call_id``."""
    expected = (
        'messages must be a list of {"role": "system|user|assistant|tool", "content": "..."}; an assistant message '
        'may have "tool_calls" (and content null), a tool message needs "tool_call_id"'
    )
    if not isinstance(messages, list):
        return expected
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return f"{expected} (message {index} is not)"
        calls = message.get("tool_calls")
        if calls is not None and not (
            message["role"] == "assistant" and isinstance(calls, list) and all(_tool_call_ok(c) for c in calls)
        ):
            return f"{expected} (message {index}'s tool_calls are not an assistant's list of function calls)"
        content = message.get("content")
        if not (isinstance(content, str) or (content is None and calls)):
            return f"{expected} (message {index}'s content is not text)"
        if message["role"] == "tool" and not isinstance(message.get("tool_call_id"), str):
            return f"{expected} (message {index} is a tool message without a tool_call_id)"
    return ""


def _sleep(seconds: float, tick: Callable[[], None] | None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if tick is not None:
            tick()
        time.sleep(min(0.25, max(deadline - time.monotonic(), 0)))


#: On PostgreSQL an endpoint's slots are session advisory locks, key ``SLOT_LOCKS << 48 | endpoint id << 16 | slot``:
#: taking one writes nothing, and the server gives back the slots of a connection that ends (a worker that died) at
#: once. Elsewhere (SQLite, for development) a slot is an ``LLMLease`` row, taken back when it expires.
SLOT_LOCKS = 0x4C4C
MAX_SLOTS = 1 << 16

#: The first free slot of endpoint %s, locked (no row when all are in use). The scan stops at the first lock it
#: gets, so it takes no other.
SLOT_TAKE_SQL = """
SELECT s FROM generate_series(0, LEAST(%s, %s) - 1) AS s
WHERE pg_try_advisory_lock((%s::bigint << 48) | (%s::bigint << 16) | s) LIMIT 1
"""


def _slot_key(endpoint_id: int, slot: int) -> int:
    return SLOT_LOCKS << 48 | endpoint_id << 16 | slot


def _slot_take(model: str, asked: dict) -> ModelEndpoint:
    """The enabled endpoint named ``model`` with a free slot of it taken (``endpoint.slot``), or with ``slot`` None
    when all its slots are in use. Raises ``no_endpoint``'s error when there is no such endpoint."""
    if connection.vendor == "postgresql":
        endpoint = ModelEndpoint.objects.filter(name=model, is_enabled=True).first()
        if endpoint is None:
            raise no_endpoint(model)
        with connection.cursor() as cursor:
            cursor.execute(SLOT_TAKE_SQL, [endpoint.max_concurrency, MAX_SLOTS, SLOT_LOCKS, endpoint.pk])
            row = cursor.fetchone()
        endpoint.slot = row[0] if row else None
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


def _call_record(call: LLMCall, reservation: Reservation | None) -> None:
    """Write ``call`` (unsaved, its fields set), add its tokens and cost to its run and give ``reservation`` back,
    in one transaction."""
    with transaction.atomic():
        call.save(force_insert=True)
        Run.objects.filter(pk=call.run_id).update(
            tokens_in=F("tokens_in") + call.tokens_in,
            tokens_out=F("tokens_out") + call.tokens_out,
            cost=F("cost") + call.cost,
            **_settled(reservation),
        )


@dataclass
class _Call:
    """One completion being made: what every record of it (answered or failed) shares."""

    run: Run | None
    messages: list[dict]
    step_index: int
    purpose: str
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
                self.reservation = budget_reserve(run, endpoint, self.messages, max_tokens, self.options.get("tools"))
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

    def record(
        self,
        *,
        text: str = "",
        tool_calls: list | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        error: str = "",
    ) -> LLMCall:
        """Store the call, count its tokens and cost to the run and give back its reservation. A connection test
        stores nothing. ``release`` gives the slot back."""
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
            tools=db_json(_offered(self.options)),
            completion=db_text(text),
            tool_calls=db_json(tool_calls or []),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost=cost,
            latency_s=latency,
            error=db_text(error[:4000]),
            recorded_bytes=prompt_size(self.messages, _offered(self.options))
            + len(text.encode())
            + (len(json.dumps(tool_calls).encode()) if tool_calls else 0)
            + len(error[:4000].encode()),
            created_at=timezone.now(),
        )
        _call_record(call, self.reservation)
        self.reservation = None
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

    def answered(self, answer: dict, reply: dict) -> Completion:
        """Record the answer (``reply``: its text and the functions it called) with its tokens (estimated when the
        endpoint reports none) and notes on what it took: retries, a stop sequence the endpoint left in (cut off
        here), an answer repeated at a temperature."""
        text, tool_calls = reply["content"], reply["tool_calls"]
        usage = _usage(answer)
        notes = [f"retried after: {'; '.join(self.errors)}"] if self.errors else []
        if isinstance(usage, str):
            said = len(text) + (len(json.dumps(tool_calls)) if tool_calls else 0)
            usage, unusable = (
                (estimate_tokens(self.messages, self.options.get("tools")), said // CHARS_PER_TOKEN),
                usage,
            )
            notes.append(f"{unusable}; tokens estimated from characters")
        tokens_in, tokens_out = usage
        text, cut = stop_cut(text, self.options.get("stop"))
        if cut:
            notes.append(f"the endpoint left the stop sequence {cut!r} in its answer; the answer ends before it")
        if self.run is not None:
            notes.append(repeat_note(self.run, self.step_index, self.purpose, self.messages, self.options, text))
        notes = [note for note in notes if note]
        recorded = self.record(
            text=text, tool_calls=tool_calls, tokens_in=tokens_in, tokens_out=tokens_out, error="\n".join(notes)
        )
        return Completion(text, tokens_in, tokens_out, recorded.cost, recorded.latency_s, recorded.pk, tool_calls)


def completion_for_run(*, run: Run, step_index: int, message: dict, tick: Callable[[], None]) -> dict:
    """Answer an agent's ``llm`` protocol request. Budget and infrastructure errors end the run (re-raised)."""
    options = {k: v for k, v in message.items() if k in ALLOWED_OPTIONS}
    # The models come from the run (set by whoever started it), never from the agent's package or config.
    allowed = run.models_allowed
    asked = message.get("model")
    if not allowed:
        refusal = "this run has no model: it was started without one (bench_run --model NAME gives it one)"
        return _refused(run, step_index, message, asked, refusal)
    model = asked or allowed["main"]
    if model not in allowed.values():
        names = ", ".join(f"{role} {name!r}" for role, name in allowed.items())
        refusal = f"this run may use only the models it was started with ({names}), not {model!r}"
        return _refused(run, step_index, message, asked, refusal)
    try:
        result = complete(
            run=run,
            messages=message.get("messages"),
            model=model,
            step_index=step_index,
            purpose=str(message.get("purpose", "agent")),
            options=options,
            tick=tick,
        )
    except LLMRequestError as exc:
        return {"type": "error", "message": str(exc)}
    reply = {
        "type": "completion",
        "text": result.text,
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
        "cost": float(result.cost),
    }
    return reply | ({"tool_calls": result.tool_calls} if result.tool_calls else {})


def _refused(run: Run, step_index: int, message: dict, asked: object, refusal: str) -> dict:
    """A request no endpoint saw: recorded on the run (no tokens, no cost) so the trace shows what was asked, and
    counted against what a run may record."""
    calls_limit_check(run, step_index)
    LLMCall.objects.create(
        run=run,
        step_index=step_index,
        purpose=db_text(str(message.get("purpose", "agent"))[:60]),
        endpoint="",
        model=db_text(str(asked or "")[:200]),
        error=f"refused, no endpoint called: {refusal}",
    )
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
