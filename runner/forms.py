from decimal import Decimal

from django import forms
from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpRequest

from task_bank.models import Task

from .logs.inspect_read import is_inspect_name
from .models import Agent, ModelEndpoint, RunLimits


class AgentUploadForm(forms.Form):
    package = forms.FileField(
        help_text="A zip of the agent's folder: agent.toml (its name and version are taken from there) and the "
        "entry point module. See docs/example-agent."
    )
    description = forms.CharField(
        required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 4}), help_text="Default: agent.toml's."
    )
    visibility = forms.ChoiceField(
        choices=Agent.Visibility.choices,
        initial=Agent.Visibility.PUBLIC,
        help_text="Private: the agent, its runs and their steps are shown only to you and staff.",
    )

    def clean_package(self):
        package = self.cleaned_data["package"]
        if not package.name.lower().endswith(".zip"):
            raise forms.ValidationError(f"{package.name} is not a .zip file; upload a zip of the agent's folder")
        if package.size > settings.BENCH_AGENT_UPLOAD_MAX_BYTES:
            raise forms.ValidationError(
                f"the zip is {package.size} bytes; at most {settings.BENCH_AGENT_UPLOAD_MAX_BYTES} bytes are allowed"
            )
        return package


class LogUploadForm(forms.Form):
    log = forms.FileField(
        label="Log (zip, or an Inspect log)",
        help_text="An MLAgentBench log folder, zipped: env_log/trace.json and env_log/traces/step_N_files/ "
        "(step_final_files/ and overall_time.txt if the run ended), or what a run page's download gives; or an "
        "Inspect AI eval log in JSON, a run per sample, not scored here (it holds no workspace files).",
    )
    task = forms.ChoiceField(
        required=False,
        help_text="Default: the task the log names, or the one whose research problem it has.",
    )
    agent = forms.RegexField(
        regex=r"^[a-z0-9][a-z0-9_-]{0,99}(@[^\s/]{1,40})?$",
        required=False,
        max_length=141,
        help_text="name or name@version: an agent of yours, or a new name (it becomes yours). Default: the one "
        "the log names,",
        error_messages={"invalid": "an agent is named in lower-case letters, digits, - and _ (then @version)"},
    )
    model = forms.CharField(required=False, max_length=200, help_text="The model the agent used, as you name it.")

    def __init__(self, *args, tasks: list[tuple[str, str]], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["task"].choices = [("", "from the log"), *tasks]

    def clean_log(self):
        log = self.cleaned_data["log"]
        if not log.name.lower().endswith(".zip") and not is_inspect_name(log.name):
            raise forms.ValidationError(
                f"{log.name} is not a .zip file, nor an Inspect log (.json, .eval); upload the log folder zipped"
            )
        return log


class AgentChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, agent: Agent) -> str:
        return f"{agent.name}@{agent.version}"


class RunRequestForm(forms.Form):
    """Runs of one agent on tasks x repeats, with models from the platform's enabled endpoints and limits: staff's
    request queues them at once, a submitter's waits for approval (``submissions.submission_create`` either way)."""

    agent = AgentChoiceField(queryset=Agent.objects.none(), empty_label=None)
    tasks = forms.ModelMultipleChoiceField(
        queryset=Task.objects.none(), widget=forms.CheckboxSelectMultiple, help_text="Enabled tasks."
    )
    repeats = forms.IntegerField(min_value=1, initial=1, help_text="Runs per task (the paper used 8).")
    model = forms.ChoiceField(required=False, help_text="The model the agent calls; none for an agent without an LLM.")
    fast_model = forms.ChoiceField(required=False, help_text="Quick LLM-backed actions; empty: the model.")
    edit_model = forms.ChoiceField(required=False, help_text="Edit Script (AI); empty: the fast model.")
    max_steps = forms.IntegerField(
        required=False, min_value=1, max_value=RunLimits.MOST["max_steps"], help_text="Empty: each task's own."
    )
    max_time_s = forms.IntegerField(
        required=False, min_value=1, max_value=RunLimits.MOST["max_time_s"], label="Max time (s)",
        help_text="Empty: each task's own.",
    )  # fmt: skip
    max_tokens = forms.IntegerField(
        required=False, min_value=1, max_value=RunLimits.MOST["max_tokens"], help_text="Empty: no budget."
    )
    max_cost = forms.DecimalField(
        required=False, min_value=Decimal(0), max_value=RunLimits.MOST["max_cost"], max_digits=12, decimal_places=6,
        help_text="In the endpoints' prices; empty: no budget.",
    )  # fmt: skip

    def __init__(self, *args, agents: QuerySet[Agent], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].queryset = agents.order_by("name", "-created_at")
        self.fields["tasks"].queryset = Task.objects.filter(is_enabled=True, current_version__isnull=False)
        endpoints = [("", "none")] + [
            (name, name) for name in ModelEndpoint.objects.filter(is_enabled=True).values_list("name", flat=True)
        ]
        for name in ("model", "fast_model", "edit_model"):
            self.fields[name].choices = endpoints

    @property
    def limits(self) -> RunLimits:
        return RunLimits(**{name: self.cleaned_data.get(name) for name in RunLimits.NAMES})


def form_throttled(request: HttpRequest, form: forms.Form, throttle_class: type, what: str) -> bool:
    """Whether ``request``'s user is past ``throttle_class``'s rate (a DRF throttle, the one the API's operation
    uses, so the site and the API share one count); if so, the form says when to try again."""
    throttle = throttle_class()
    if throttle.allow_request(request, None):
        return False
    form.add_error(None, f"too many {what}: try again in {throttle.wait():.0f} s")
    return True
