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
