from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm


class SignUpForm(UserCreationForm):
    """Username, email, password twice. The email is where a password reset is sent: one account per address."""

    email = forms.EmailField(help_text="Where a password reset link is sent.")

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")

    def clean_email(self) -> str:
        email = self.cleaned_data["email"].strip()
        if get_user_model().objects.filter(email__iexact=email).exists():
            raise forms.ValidationError(
                "An account with this email address exists already: sign in, or reset its password."
            )
        return email


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        label="New token's name",
        max_length=100,
        help_text="What the token is for, e.g. the machine or script that uses it.",
    )
    # One per page shown: the same form sent again (a reloaded answer) makes no second token.
    once = forms.CharField(widget=forms.HiddenInput, required=False, max_length=64)
