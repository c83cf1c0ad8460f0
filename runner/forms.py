from django import forms
from django.conf import settings

from .models import Agent


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


class TraceUploadForm(forms.Form):
    log = forms.FileField(
        label="Log (zip)",
        help_text="An MLAgentBench log folder, zipped: env_log/trace.json and env_log/traces/step_N_files/ "
        "(step_final_files/ and overall_time.txt if the run ended), or what a run page's download gives.",
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
        "the log names.",
        error_messages={"invalid": "an agent is named in lower-case letters, digits, - and _ (then @version)"},
    )
    model = forms.CharField(required=False, max_length=200, help_text="The model the agent used, as you name it.")

    def __init__(self, *args, tasks: list[tuple[str, str]], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["task"].choices = [("", "from the log"), *tasks]

    def clean_log(self):
        log = self.cleaned_data["log"]
        if not log.name.lower().endswith(".zip"):
            raise forms.ValidationError(f"{log.name} is not a .zip file; upload the log folder zipped")
        return log
