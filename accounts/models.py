import hashlib
import hmac

from django.conf import settings
from django.db import models

#: Every key starts with this, so a key is recognised (and told apart from the single-key tokens of
#: ``rest_framework.authtoken``) before any lookup.
KEY_MARK = "mlb_"


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    """A named API key of one user. Only the key's prefix (to find the row and show it) and the sha256 of the
    whole key are kept: the key itself is shown once, when it is created."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.name} ({KEY_MARK}{self.prefix}…)"

    def matches(self, key: str) -> bool:
        """Whether ``key`` is this token's key, compared in constant time."""
        return hmac.compare_digest(key_digest(key), self.digest)
