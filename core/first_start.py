"""The first start's admin password, kept so that ``bench_ready`` can say it again at the end of `make run`'s
start-up output (where it does not scroll away): in ``var/admin-password``, readable by its owner only, until the
admin changes it (then the file goes)."""

from __future__ import annotations

import os

from django.conf import settings
from django.contrib.auth import get_user_model


def admin_password_file():
    return settings.VAR_DIR / "admin-password"


def admin_password_keep(password: str) -> None:
    """Keep the generated password of the new admin account (mode 600)."""
    path = admin_password_file()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(password)


def admin_password_kept() -> str:
    """The kept password while it is still the admin's, else "" (and the file is removed)."""
    path = admin_password_file()
    try:
        password = path.read_text().strip()
    except FileNotFoundError:
        return ""
    admin = get_user_model().objects.filter(username="admin", is_superuser=True).first()
    if admin is not None and password and admin.check_password(password):
        return password
    path.unlink(missing_ok=True)
    return ""
