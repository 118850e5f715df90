# SPDX-License-Identifier: Apache-2.0
"""AWS Signature Version 4 as S3 checks it, for fault_proxy.py --verify-sigv4: written from AWS's published
algorithm (the Signature Version 4 reference), not from curl's or s3rver's code, so that it judges libckpt_s3's
signing independently of the libcurl that signs."""

import datetime
import hashlib
import hmac
import urllib.parse


def _uri_encode(text):
    # SigV4's encoding: everything but the unreserved characters A-Z a-z 0-9 - _ . ~, as UTF-8.
    return urllib.parse.quote(text, safe="")


class SigV4Verifier:
    """AWS Signature Version 4 for S3, from AWS's published algorithm: the canonical request is rebuilt from what
    arrived (path and query decoded and encoded again, the query sorted), so a request signed over anything but its
    canonical form fails here as it fails at S3."""

    MAX_SKEW = datetime.timedelta(minutes=15)

    def __init__(self, access_key, secret_key, region):
        self.access_key, self.secret_key, self.region = access_key, secret_key, region

    @staticmethod
    def canonical_request(method, raw_path, raw_query, headers, signed_headers, payload_hash):
        path = "/".join(_uri_encode(urllib.parse.unquote(segment)) for segment in raw_path.split("/"))
        pairs = []
        for item in raw_query.split("&") if raw_query else []:
            name, _, value = item.partition("=")
            pairs.append((_uri_encode(urllib.parse.unquote(name)), _uri_encode(urllib.parse.unquote(value))))
        query = "&".join(f"{name}={value}" for name, value in sorted(pairs))
        lines = []
        for name in signed_headers:
            values = headers.get_all(name) or []
            lines.append(f"{name}:" + ",".join(" ".join(value.split()) for value in values))
        return "\n".join([method, path, query, *lines, "", ";".join(signed_headers), payload_hash])

    def _key(self, date, region, service):
        key = ("AWS4" + self.secret_key).encode()
        for part in (date, region, service, "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        return key

    def check(self, method, raw_path, raw_query, headers, now=None):
        """None when the request is signed right; else (status, S3 code, message, details). now: the time to check
        X-Amz-Date against (the current time by default)."""
        authorization = headers.get("Authorization")
        if not authorization:
            return 403, "AccessDenied", "Access Denied (the request is not signed)", ()
        algorithm, _, rest = authorization.strip().partition(" ")
        if algorithm != "AWS4-HMAC-SHA256":
            return 400, "InvalidArgument", f"Unsupported Authorization Type {algorithm!r}", ()
        fields = {}
        for part in rest.split(","):
            name, _, value = part.strip().partition("=")
            fields[name] = value
        if not {"Credential", "SignedHeaders", "Signature"} <= set(fields):
            return (400, "AuthorizationHeaderMalformed",
                    "The authorization header is malformed; it needs Credential, SignedHeaders and Signature", ())
        scope = fields["Credential"].split("/")
        if len(scope) != 5 or scope[3] != "s3" or scope[4] != "aws4_request":
            return (400, "AuthorizationHeaderMalformed",
                    f"The credential {fields['Credential']!r} is not <key>/<date>/<region>/s3/aws4_request", ())
        access_key, date, region = scope[:3]
        if access_key != self.access_key:
            return (403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.",
                    (("AWSAccessKeyId", access_key),))
        if region != self.region:
            return (400, "AuthorizationHeaderMalformed",
                    f"The authorization header is malformed; the region '{region}' is wrong; expecting "
                    f"'{self.region}'", (("Region", self.region),))
        amz_date = headers.get("x-amz-date", "")
        try:
            when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            return 403, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header", ()
        if date != amz_date[:8]:
            return (400, "AuthorizationHeaderMalformed",
                    f"Invalid credential date {date}: it is not the date of X-Amz-Date {amz_date}", ())
        if abs((now or datetime.datetime.now(datetime.timezone.utc)) - when) > self.MAX_SKEW:
            return (403, "RequestTimeTooSkewed",
                    "The difference between the request time and the current time is too large.",
                    (("RequestTime", amz_date),))
        payload_hash = headers.get("x-amz-content-sha256")
        if payload_hash is None:
            return 400, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256", ()
        signed = fields["SignedHeaders"].split(";")
        if "host" not in signed:
            return 403, "AccessDenied", "The host header must be signed", ()
        unsigned = sorted({name.lower() for name in headers.keys()
                           if name.lower().startswith("x-amz-") and name.lower() not in signed})
        if unsigned:
            return (403, "AccessDenied", "There were headers present in the request which were not signed",
                    (("HeadersNotSigned", ", ".join(unsigned)),))
        canonical = self.canonical_request(method, raw_path, raw_query, headers, signed, payload_hash)
        # A header named in SignedHeaders that did not arrive has no value to sign: S3 and RGW then compute another
        # signature than the client's (curl before 8.3 signs an "Expect:" it was told to leave out, and sends none).
        absent = [name for name in signed if headers.get(name) is None]
        if absent:
            return (403, "SignatureDoesNotMatch",
                    "The request signature we calculated does not match the signature you provided: the signed "
                    f"header(s) {', '.join(absent)} were not sent.",
                    (("AWSAccessKeyId", access_key), ("SignedHeadersNotSent", ", ".join(absent)),
                     ("CanonicalRequest", canonical)))
        string_to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, f"{date}/{region}/s3/aws4_request",
                                    hashlib.sha256(canonical.encode()).hexdigest()])
        expected = hmac.new(self._key(date, region, "s3"), string_to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, fields["Signature"]):
            return (403, "SignatureDoesNotMatch",
                    "The request signature we calculated does not match the signature you provided. Check your key "
                    "and signing method.",
                    (("AWSAccessKeyId", access_key), ("SignatureProvided", fields["Signature"]),
                     ("StringToSign", string_to_sign), ("CanonicalRequest", canonical)))
        return None
