from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from bench.roles import roles_of

from .forms import SignUpForm, TokenCreateForm
from .selectors import user_agents, user_recent_runs, user_tokens
from .services import NewToken, TokenLimitError, token_create, token_revoke, user_signup
from .throttle import throttle_hit


def _throttled(request: HttpRequest, *, scope: str, limit: int, what: str) -> str | None:
    """The message for a throttled POST of ``scope`` (and the attempt counted), or None when it may go on."""
    wait = throttle_hit(scope=scope, request=request, limit=limit)
    if not wait:
        return None
    return f"Too many {what} attempts from your address: try again in {wait} seconds."


def signup_view(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("accounts:account")
    form = SignUpForm(request.POST or None)
    if request.method == "POST":
        refused = _throttled(request, scope="signup", limit=settings.BENCH_SIGNUP_PER_MINUTE, what="sign-up")
        if refused:
            form.add_error(None, refused)
            return render(request, "accounts/signup.html", {"form": form}, status=429)
        if form.is_valid():
            user = user_signup(
                username=form.cleaned_data["username"],
                email=form.cleaned_data["email"],
                password=form.cleaned_data["password1"],
            )
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(request, f"Welcome, {user.get_username()}: you are signed in.")
            return redirect("accounts:account")
    return render(request, "accounts/signup.html", {"form": form}, status=400 if form.errors else 200)


class SignInView(auth_views.LoginView):
    """Django's sign-in, throttled per address."""

    redirect_authenticated_user = True

    def post(self, request, *args, **kwargs):
        refused = _throttled(request, scope="signin", limit=settings.BENCH_SIGNIN_PER_MINUTE, what="sign-in")
        if refused:
            form = self.get_form()
            form.errors.clear()
            form.add_error(None, refused)
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)


class PasswordResetView(auth_views.PasswordResetView):
    """Django's password reset by email, throttled per address like signing in (each request sends a mail)."""

    def post(self, request, *args, **kwargs):
        refused = _throttled(request, scope="reset", limit=settings.BENCH_SIGNIN_PER_MINUTE, what="password reset")
        if refused:
            form = self.get_form()
            form.add_error(None, refused)
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)


def _account_page(request: HttpRequest, *, new: NewToken | None = None, status: int = 200) -> HttpResponse:
    user = request.user
    context = {
        "roles": roles_of(user),
        "agents": user_agents(user=user),
        "runs": user_recent_runs(user=user),
        "tokens": user_tokens(user=user),
        "token_form": TokenCreateForm(),
        "new": new,
    }
    return render(request, "accounts/account.html", context, status=status)


@login_required
def account_view(request: HttpRequest) -> HttpResponse:
    return _account_page(request)


@require_POST
@login_required
def token_create_view(request: HttpRequest) -> HttpResponse:
    form = TokenCreateForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"No token created: {form.errors['name'][0]}")
        return redirect("accounts:account")
    try:
        new = token_create(user=request.user, name=form.cleaned_data["name"])
    except TokenLimitError as exc:
        messages.error(request, f"No token created: {exc}.")
        return redirect("accounts:account")
    # The key is shown in this answer only: no redirect to a page that would have to keep it somewhere.
    return _account_page(request, new=new, status=201)


@require_POST
@login_required
def token_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    if token_revoke(user=request.user, token_id=pk):
        messages.success(request, "Token revoked: the API refuses it from now on.")
    else:
        messages.error(request, "You have no such token (revoked already?).")
    return redirect("accounts:account")
