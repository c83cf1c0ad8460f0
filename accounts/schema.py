"""How the OpenAPI schema describes the named tokens (imported by ``AccountsConfig.ready``)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.ApiTokenAuthentication"
    name = "namedTokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": 'A key made on the account page, prefixed with "Token": `Token mlb_...`.',
        }
