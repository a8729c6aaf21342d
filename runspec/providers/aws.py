"""AWS EC2: instance id and region from the metadata service (IMDSv2), credentials from the
standard environment variables or the instance role, EC2's Query API signed with SigV4 using the
standard library (boto3 is not a dependency).

IMDSv2 (docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html):
  PUT /latest/api/token (X-aws-ec2-metadata-token-ttl-seconds) -> token, then with
  X-aws-ec2-metadata-token: GET /latest/meta-data/instance-id, /latest/meta-data/placement/region,
  /latest/meta-data/iam/security-credentials/[ROLE]
EC2 API (docs.aws.amazon.com/AWSEC2/latest/APIReference), POST https://ec2.REGION.amazonaws.com/
  Action=TerminateInstances|StopInstances|DescribeInstances&InstanceId.1=ID&Version=2016-11-15
  -> XML with instanceState/name (shutting-down, terminated, stopping, stopped).
  With DryRun=true the answer is an error: DryRunOperation (HTTP 412) when allowed,
  UnauthorizedOperation (HTTP 403) when not; <Response><Errors><Error><Code>.
SigV4: docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import urllib.parse
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import ClassVar

from runspec.providers.base import GONE, Action, Provider, ProviderError

EC2_VERSION = "2016-11-15"
TOKEN_TTL = "300"
API_ACTION = {Action.DESTROY: "TerminateInstances", Action.STOP: "StopInstances"}


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str
    token: str | None = None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def canonical_request(
    method: str, path: str, query: str, headers: dict[str, str], payload: bytes
) -> tuple[str, str]:
    """(canonical request, signed header names) as SigV4 defines them."""
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    canonical_query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in sorted(pairs)
    )
    lowered = {k.lower().strip(): " ".join(v.strip().split()) for k, v in headers.items()}
    names = sorted(lowered)
    canonical_headers = "".join(f"{n}:{lowered[n]}\n" for n in names)
    signed = ";".join(names)
    request = "\n".join(
        [method, path or "/", canonical_query, canonical_headers, signed, _sha256(payload)]
    )
    return request, signed


def string_to_sign(amz_date: str, scope: str, canonical: str) -> str:
    return "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, _sha256(canonical.encode())])


def signature(secret: str, date: str, region: str, service: str, to_sign: str) -> str:
    key = _hmac(("AWS4" + secret).encode(), date)
    key = _hmac(key, region)
    key = _hmac(key, service)
    key = _hmac(key, "aws4_request")
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def sign(
    *,
    method: str,
    url: str,
    headers: dict[str, str],
    payload: bytes,
    creds: Credentials,
    region: str,
    service: str,
    now: dt.datetime,
) -> dict[str, str]:
    """`headers` plus x-amz-date, the session token if any, and Authorization."""
    parts = urllib.parse.urlsplit(url)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    date = amz_date[:8]
    signed_headers = {**headers, "host": parts.netloc, "x-amz-date": amz_date}
    if creds.token:
        signed_headers["x-amz-security-token"] = creds.token
    canonical, names = canonical_request(method, parts.path, parts.query, signed_headers, payload)
    scope = f"{date}/{region}/{service}/aws4_request"
    sig = signature(
        creds.secret_key, date, region, service, string_to_sign(amz_date, scope, canonical)
    )
    out = {k: v for k, v in signed_headers.items() if k != "host"}
    out["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={creds.access_key}/{scope}, "
        f"SignedHeaders={names}, Signature={sig}"
    )
    return out


class AWS(Provider):
    name = "aws"
    can_stop = True
    stop_bills = "a stopped EC2 instance still bills its EBS volumes"
    going_after: ClassVar[dict[Action, frozenset[str]]] = {
        Action.STOP: frozenset({"stopping", "stopped"}),
        Action.DESTROY: frozenset({"shutting-down", "terminated"}),
    }
    _imds_token: str | None = None
    _creds: Credentials | None = None
    _region: str | None = None

    # The key id is no secret on its own, but it is half of one: no child needs it either.
    secret_env = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")

    def secrets(self) -> tuple[str, ...]:
        found: list[str | None] = list(super().secrets())
        if self._creds is not None:
            found += [self._creds.secret_key, self._creds.token]
        if self._imds_token:
            found.append(self._imds_token)
        return tuple(s for s in found if s)

    @property
    def metadata(self) -> str:
        return self.env.get("RUNSPEC_AWS_METADATA", "http://169.254.169.254").rstrip("/")

    def _imds(self, path: str) -> str:
        if self._imds_token is None:
            resp = self.http.request(
                "PUT",
                f"{self.metadata}/latest/api/token",
                headers={"X-aws-ec2-metadata-token-ttl-seconds": TOKEN_TTL},
                timeout=3.0,
            )
            self._imds_token = resp.text.strip()
            self.http.secrets.append(self._imds_token)
        resp = self.http.request(
            "GET",
            f"{self.metadata}/latest/meta-data/{path}",
            headers={"X-aws-ec2-metadata-token": self._imds_token},
            timeout=3.0,
        )
        return resp.text.strip()

    def identify(self) -> str:
        instance = self._imds("instance-id")
        if not instance.startswith("i-"):
            raise ProviderError(
                f"aws: the metadata service gave no instance id ({instance[:40]!r})"
            )
        return instance

    def how_identified(self) -> str:
        return "IMDSv2 instance-id"

    def region(self) -> str:
        if self._region is None:
            self._region = (
                self.env.get("AWS_REGION")
                or self.env.get("AWS_DEFAULT_REGION")
                or self._imds("placement/region")
            )
        return self._region

    def endpoint(self) -> str:
        override = self.env.get("RUNSPEC_AWS_EC2_API")
        return (override or f"https://ec2.{self.region()}.amazonaws.com").rstrip("/") + "/"

    def credentials(self) -> Credentials:
        if self._creds is not None:
            return self._creds
        key, secret = self.env.get("AWS_ACCESS_KEY_ID"), self.env.get("AWS_SECRET_ACCESS_KEY")
        if key and secret:
            self._creds = Credentials(key, secret, self.env.get("AWS_SESSION_TOKEN"))
        else:
            role = self._imds("iam/security-credentials/").splitlines()
            if not role or not role[0]:
                raise ProviderError(
                    "aws: no credentials (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or attach "
                    "an instance role allowed ec2:TerminateInstances/StopInstances)"
                )
            try:
                data = json.loads(self._imds(f"iam/security-credentials/{role[0]}"))
                self._creds = Credentials(
                    data["AccessKeyId"], data["SecretAccessKey"], data.get("Token")
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise ProviderError("aws: the instance role's credentials are unreadable") from exc
        self.http.secrets.extend(s for s in (self._creds.secret_key, self._creds.token) if s)
        return self._creds

    def _ec2(self, action: str, instance: str, *, dry_run: bool = False) -> ET.Element:
        url = self.endpoint()
        params = {"Action": action, "InstanceId.1": instance, "Version": EC2_VERSION}
        if dry_run:
            params["DryRun"] = "true"
        body = urllib.parse.urlencode(params).encode()
        headers = {"content-type": "application/x-www-form-urlencoded; charset=utf-8"}
        signed = sign(
            method="POST",
            url=url,
            headers=headers,
            payload=body,
            creds=self.credentials(),
            region=self.region(),
            service="ec2",
            now=dt.datetime.fromtimestamp(self.clock.time(), tz=dt.timezone.utc),
        )
        resp = self.http.request("POST", url, headers=signed, body=body)
        try:
            return ET.fromstring(resp.body)
        except ET.ParseError as exc:
            raise ProviderError(f"aws: {action} answered with something that is not XML") from exc

    def prove(self, actions: tuple[Action, ...], instance: str) -> str:
        """EC2's DryRun: "If you have the required permissions, the error response is
        DryRunOperation. Otherwise, it is UnauthorizedOperation" (botocore's ec2 service-2.json,
        StopInstances and TerminateInstances). Nothing is stopped or terminated."""
        proven = []
        for action in actions:
            name = API_ACTION[action]
            try:
                self._ec2(name, instance, dry_run=True)
            except ProviderError as exc:
                if exc.code == "DryRunOperation":
                    proven.append(name)
                    continue
                if exc.code == "UnauthorizedOperation":
                    raise ProviderError(
                        f"aws: the credentials may not {name} on {instance} (DryRun answered "
                        f"UnauthorizedOperation): allow ec2:{name} on it in the IAM policy"
                    ) from exc
                raise
            raise ProviderError(f"aws: {name} with DryRun=true answered as if it had acted")
        return f"DryRun proves {' and '.join(proven)} allowed on {instance}"

    def describe_call(self, action: Action, instance: str) -> str:
        name = API_ACTION[action]
        return f"POST {self.endpoint()} Action={name}&InstanceId.1={instance} (SigV4, ec2)"

    def call(self, action: Action, instance: str) -> None:
        self._ec2(API_ACTION[action], instance)

    def state(self, instance: str) -> str:
        root = self._ec2("DescribeInstances", instance)
        name = root.find(".//{*}instanceState/{*}name")
        if name is None or not name.text:
            return GONE
        return name.text
