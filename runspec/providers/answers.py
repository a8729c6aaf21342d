"""What a provider said when it refused, as one line: each provider's documented error body.

The bodies are hostile data: parsed strictly, read only for short strings, cut to a line.

- Hetzner (docs.hetzner.cloud, "Errors"): {"error": {"code": "locked", "message": ...}}
- GCP (cloud.google.com/apis/design/errors, the compute discovery document's error shape):
  {"error": {"code": 400, "message": ..., "errors": [{"reason": ..., "message": ...}]}}
- Lambda (docs.lambda.ai/api/cloud, ApiErrorResponse): {"error": {"code":
  "global/invalid-api-key", "message": ..., "suggestion": ...}}
- vast.ai (vast-ai/docs api-reference/openapi: destroy_instance.yaml, stop_instance.yaml):
  {"success": false, "error": "invalid_args", "msg": ...}; a 429 says {"detail": ...}
- RunPod (runpod/docs api-reference/openapi.json): no error body is documented; an `error`
  or `message` string is read when there is one, else the body's start
- AWS EC2 (docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html):
  <Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>...</Message>...
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

from runspec.printable import printable

MAX_BODY = 1 << 16  # an error body past this is not read for its reason
MAX_LINE = 200

# Error codes that say "again later" whatever the HTTP status: Hetzner's `locked` (423, an
# action already runs on the server), its rate limit, conflict and maintenance; GCP's rate
# limits (a 403 with this reason); AWS's throttling.
TRANSIENT_CODES = frozenset(
    {
        "locked",
        "rate_limit_exceeded",
        "conflict",
        "timeout",
        "maintenance",
        "rateLimitExceeded",
        "userRateLimitExceeded",
        "RequestLimitExceeded",
        "Throttling",
    }
)


@dataclass(frozen=True)
class Said:
    """The reason in one line, and the provider's error code when it gave one."""

    text: str
    code: str | None = None


def _line(value: object) -> str:
    text = value if isinstance(value, str) else ""
    return printable(re.sub(r"\s+", " ", text).strip()[:MAX_LINE])


def _from_json(data: Any) -> Said | None:
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict):
        code: object = error.get("code")
        details = error.get("errors")
        if isinstance(details, list) and details and isinstance(details[0], dict):
            code = details[0].get("reason") or code  # GCP: the reason is the useful code
        message = _line(error.get("message"))
        hint = _line(error.get("suggestion"))
        text = message + (f" ({hint})" if hint else "")
        code_text = _line(code) if isinstance(code, str) else None
        if code_text and text:
            return Said(f"{code_text}: {text}", code_text)
        if text or code_text:
            return Said(text or code_text or "", code_text)
    msg = _line(data.get("msg")) or _line(data.get("detail")) or _line(data.get("message"))
    err = _line(error) if isinstance(error, str) else None
    if msg or err:
        return Said(f"{err}: {msg}" if err and msg else msg or err or "", err or None)
    return None


def _from_xml(body: bytes) -> Said | None:
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return None
    code = root.find(".//{*}Error/{*}Code")
    message = root.find(".//{*}Error/{*}Message")
    if code is None or not code.text:
        return None
    text = _line(code.text)
    detail = _line(message.text if message is not None else "")
    return Said(f"{text}: {detail}" if detail else text, text)


def said(body: bytes) -> Said:
    """The refusal's reason in one line (the raw start of the body when no shape fits)."""
    if len(body) <= MAX_BODY:
        stripped = body.lstrip()
        if stripped.startswith(b"<"):
            found = _from_xml(stripped)
        else:
            try:
                found = _from_json(json.loads(stripped or b"null"))
            except ValueError:
                found = None
        if found is not None:
            return found
    return Said(_line(body[: MAX_LINE * 2].decode("utf-8", "replace")))
