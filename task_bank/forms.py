from django import forms
from django.conf import settings


class TaskImportForm(forms.Form):
    package = forms.FileField(help_text="A zip of an MLAgentBench task folder (env/, scripts/, optional task.toml).")
    slug = forms.SlugField(required=False, help_text="Default: from the zip's folder or file name.")
    metric = forms.CharField(required=False, max_length=100, help_text="Overrides the manifest's metric name.")
    direction = forms.ChoiceField(
        choices=[("", "as the manifest says"), ("higher", "higher is better"), ("lower", "lower is better")],
        required=False,
    )

    def clean_package(self):
        package = self.cleaned_data["package"]
        if not package.name.lower().endswith(".zip"):
            raise forms.ValidationError(f"{package.name} is not a .zip file; upload a zip of the task folder")
        if package.size > settings.BENCH_TASK_MAX_BYTES:
            raise forms.ValidationError(
                f"the zip is {package.size} bytes; at most {settings.BENCH_TASK_MAX_BYTES} bytes are allowed"
            )
        return package

    @property
    def higher_is_better(self) -> bool | None:
        return {"higher": True, "lower": False}.get(self.cleaned_data.get("direction") or "")
