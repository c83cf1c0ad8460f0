import uuid

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from django.views.generic import FormView

from core.roles import roles_of
from core.shared_cache import count_hit
from runner.selectors import stored_by

from .forms import SignUpForm, TokenCreateForm
from .selectors import user_agents, user_recent_runs, user_tokens
from .services import NewToken, TokenLimitError, token_create, token_revoke, user_signup
from .throttle import throttle_hit


class ThrottledPostMixin:
    """Counts each POST from the request's address (``throttle_hit``); over ``throttle_limit()`` a minute, the
    form is shown again, unbound (so nothing is checked: not a password, not an address), with how long to wait
    and a 429. Only ``throttle_keep`` fields are filled back in (never a password)."""

    throttle_scope: str
    throttle_what: str
    throttle_keep: tuple[str, ...] = ()

    def throttle_limit(self) -> int:
        return settings.BENCH_SIGNIN_PER_MINUTE

    def throttle_wait(self, request) -> int:
        """Seconds to wait (0: go on), counting this attempt."""
        return throttle_hit(scope=self.throttle_scope, request=request, limit=self.throttle_limit())

    def post(self, request, *args, **kwargs):
        wait = self.throttle_wait(request)
        if not wait:
            return super().post(request, *args, **kwargs)
        form_kwargs = self.get_form_kwargs()
        form_kwargs.pop("data", None)
        form_kwargs.pop("files", None)
        form_kwargs["initial"] = {name: request.POST.get(name, "") for name in self.throttle_keep}
        refused = f"Too many {self.throttle_what} attempts from your address: try again in {wait} seconds."
        context = self.get_context_data(form=self.get_form_class()(**form_kwargs), refused=refused)
        return self.render_to_response(context, status=429)


class SignUpView(ThrottledPostMixin, FormView):
    """Username, email, password twice; the new submitter is signed in at once."""

    form_class = SignUpForm
    template_name = "accounts/signup.html"
    throttle_scope, throttle_what, throttle_keep = "signup", "sign-up", ("username", "email")

    def throttle_limit(self) -> int:
        return settings.BENCH_SIGNUP_PER_MINUTE

    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated:
            return redirect("accounts:account")
        return super().dispatch(request, *args, **kwargs)

    def form_valid(self, form: SignUpForm) -> HttpResponse:
        user = user_signup(
            username=form.cleaned_data["username"],
            email=form.cleaned_data["email"],
            password=form.cleaned_data["password1"],
        )
        login(self.request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(self.request, f"Welcome, {user.get_username()}: you are signed in.")
        return redirect("accounts:account")

    def form_invalid(self, form: SignUpForm) -> HttpResponse:
        return self.render_to_response(self.get_context_data(form=form), status=400)


class SignInView(ThrottledPostMixin, auth_views.LoginView):
    """Django's sign-in, throttled per account and address (``BENCH_SIGNIN_PER_MINUTE``), and per address over all
    accounts (``BENCH_SIGNIN_PER_ADDRESS_PER_MINUTE``): many people behind one address do not lock each other out
    by guessing at one name."""

    template_name = "accounts/login.html"
    redirect_authenticated_user = True
    throttle_scope, throttle_what, throttle_keep = "signin", "sign-in", ("username",)

    def throttle_wait(self, request) -> int:
        name = str(request.POST.get("username", ""))[:200]
        account = throttle_hit(scope="signin", request=request, limit=settings.BENCH_SIGNIN_PER_MINUTE, of=name)
        address = throttle_hit(scope="signin-any", request=request, limit=settings.BENCH_SIGNIN_PER_ADDRESS_PER_MINUTE)
        return max(account, address)


class PasswordResetView(ThrottledPostMixin, auth_views.PasswordResetView):
    """Django's password reset by email, throttled per address like signing in (each request sends a mail)."""

    throttle_scope, throttle_what, throttle_keep = "reset", "password reset", ("email",)


def _account_page(request: HttpRequest, *, new: NewToken | None = None, status: int = 200) -> HttpResponse:
    user = request.user
    context = {
        "roles": roles_of(user),
        "agents": user_agents(user=user),
        "runs": user_recent_runs(user=user),
        "tokens": user_tokens(user=user),
        "stored_mb": stored_by(user.pk) / (1 << 20),
        "stored_limit_mb": settings.BENCH_USER_MAX_STORED_MB,
        "token_form": TokenCreateForm(initial={"once": uuid.uuid4().hex}),
        "new": new,
    }
    return render(request, "accounts/account.html", context, status=status)


#: How long a token form is remembered as sent.
TOKEN_FORM_ONCE_S = 24 * 3600


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
    once = form.cleaned_data["once"]
    if once and count_hit(f"token-form:{request.user.pk}:{once}", window_s=TOKEN_FORM_ONCE_S)[0] > 1:
        messages.warning(
            request,
            "That form was sent already (a reloaded page?): its token was made then and its key shown once. "
            "No other token was made; create one below if you need it.",
        )
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
