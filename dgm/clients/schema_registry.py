"""Schemas by id from a schema registry over HTTP: the core's `SchemaLookup`.

A record framed for a registry names its writer schema by id (dgm.contracts.registered_schemas):
- a "content" id (Confluent's 4-byte framing) is asked of the Confluent-compatible API
  (`GET /schemas/ids/{id}`, a reference through `GET /subjects/{subject}/versions/{version}`),
  which Confluent's registry, Apicurio's ccompat API and others serve alike;
- a "global" id (Apicurio's 8-byte framing and header mode) of Apicurio's own API
  (`/apis/registry/v3`: `search/versions?globalId=`, `ids/globalIds/{id}` and its
  `references`, a reference through `groups/{g}/artifacts/{a}/versions/{v}`).

A registered schema never changes under its id, so each is fetched once per run and kept; an
id the registry does not know is remembered too, so a topic full of such records costs one
request. A transient failure (unreachable, timeout, 429, 5xx) is retried with a doubling
backoff a bounded number of times. No credential reaches a log line or an error: the URL holds
none (the config refuses them there) and the Authorization header is never printed.
Standard library only (urllib), like every HTTP client of the core.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from dgm.config.cluster import ClusterConfig
from dgm.config.problems import ConfigError
from dgm.config.schema_registry import SchemaRegistryConfig
from dgm.contracts.registered_schemas import (
    SCHEMA_FORMATS,
    IdKind,
    RegisteredSchema,
    SchemaFormat,
    SchemaLookupError,
)

log = logging.getLogger(__name__)

_ACCEPT = "application/vnd.schemaregistry.v1+json, application/json;q=0.9, */*;q=0.5"
_BACKOFF_S = 0.2
_MAX_BACKOFF_S = 5.0
_MAX_DEPTH = 32  # references nest no deeper in any sane registry; a cycle must not hang us
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_REASONS = {401: "unauthorized", 403: "forbidden", 404: "not found"}
APICURIO_DEFAULT_GROUP = "default"  # what Apicurio calls the group of an artifact without one


@dataclass(frozen=True)
class LookupCounts:
    """What a run asked of the registry: lookups asked, answered from the cache, HTTP requests
    sent, retries among them, and lookups that failed."""

    lookups: int = 0
    cache_hits: int = 0
    requests: int = 0
    retries: int = 0
    failures: int = 0


class RegistrySchemas:
    """A `SchemaLookup` over one registry's HTTP APIs, caching for the run; thread-safe."""

    def __init__(
        self, config: SchemaRegistryConfig, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._config = config
        self._sleep = sleep
        self._headers = _headers(config)
        self._tls = _tls_context(config)
        self._lock = threading.Lock()
        self._found: dict[tuple[IdKind, int], RegisteredSchema] = {}
        self._unknown: dict[tuple[IdKind, int], SchemaLookupError] = {}
        self._counts = {name: 0 for name in LookupCounts.__dataclass_fields__}

    def schema(self, schema_id: int, id_kind: IdKind = "content") -> RegisteredSchema:
        """The schema registered under `schema_id`; SchemaLookupError with a reason otherwise."""
        self._count("lookups")
        key = (id_kind, schema_id)
        with self._lock:
            cached = self._found.get(key)
            unknown = self._unknown.get(key)
        if cached is not None or unknown is not None:
            self._count("cache_hits")
            if unknown is not None:
                raise unknown
            assert cached is not None
            return cached
        try:
            return self._resolve(schema_id, id_kind, 0)
        except SchemaLookupError as error:
            self._count("failures")
            if error.reason == "not found":  # an id stays unknown for the run
                with self._lock:
                    self._unknown[key] = error
            raise

    def counts(self) -> LookupCounts:
        with self._lock:
            return LookupCounts(**self._counts)

    # Picklable, so a lookup (and what it has cached) can travel to Spark's executors: the
    # lock and the TLS context are made anew on the other side.
    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            state = dict(self.__dict__)
            for name in ("_found", "_unknown", "_counts"):
                state[name] = dict(state[name])
        del state["_lock"], state["_tls"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._tls = _tls_context(self._config)

    # -- resolution ----------------------------------------------------------------------------

    def _resolve(self, schema_id: int, id_kind: IdKind, depth: int) -> RegisteredSchema:
        with self._lock:
            cached = self._found.get((id_kind, schema_id))
        if cached is not None:
            return cached
        if depth > _MAX_DEPTH:
            raise SchemaLookupError("bad response", f"references nest deeper than {_MAX_DEPTH}")
        if id_kind == "content":
            body = self._json(f"{self._config.url.rstrip('/')}/schemas/ids/{schema_id}")
            found = self._from_ccompat(schema_id, body, depth)
        elif id_kind == "global":
            found = self._from_apicurio(schema_id, depth)
        else:
            raise SchemaLookupError("unsupported", f"unknown id kind {id_kind!r}")
        with self._lock:
            self._found[(id_kind, schema_id)] = found
        return found

    def _from_ccompat(self, schema_id: int, body: Any, depth: int) -> RegisteredSchema:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise SchemaLookupError("bad response", f"schema {schema_id}: no 'schema' text")
        references = body.get("references") or []
        resolved, names = [], []
        for reference in _list_of_dicts(references, schema_id):
            subject, version = reference.get("subject"), reference.get("version")
            url = (
                f"{self._config.url.rstrip('/')}/subjects/{quote(str(subject), safe='')}"
                f"/versions/{quote(str(version), safe='')}"
            )
            referenced = self._json(url)
            if not isinstance(referenced, dict) or not isinstance(referenced.get("id"), int):
                raise SchemaLookupError("bad response", f"reference {subject}/{version}: no id")
            with self._lock:
                cached = self._found.get(("content", referenced["id"]))
            if cached is None:
                cached = self._from_ccompat(referenced["id"], referenced, depth + 1)
                with self._lock:
                    self._found[("content", referenced["id"])] = cached
            resolved.append(cached)
            names.append(str(reference.get("name", subject)))
        # Confluent's API leaves schemaType out for Avro, its first and default format.
        return RegisteredSchema(
            schema_id=schema_id,
            format=_format(body.get("schemaType", "AVRO"), schema_id),
            text=body["schema"],
            references=tuple(resolved),
            reference_names=tuple(names),
        )

    def _from_apicurio(self, global_id: int, depth: int) -> RegisteredSchema:
        api = self._config.api_url()
        if api is None:
            raise SchemaLookupError(
                "unsupported",
                "a globalId is served by Apicurio's own API: set schema_registry.apicurio_url",
            )
        found = self._json(f"{api}/search/versions?globalId={global_id}")
        versions = found.get("versions") if isinstance(found, dict) else None
        if not isinstance(versions, list) or not versions or not isinstance(versions[0], dict):
            raise SchemaLookupError("not found", f"no version with globalId {global_id}")
        text = self._text(f"{api}/ids/globalIds/{global_id}")
        resolved, names = [], []
        references = self._json(f"{api}/ids/globalIds/{global_id}/references")
        for reference in _list_of_dicts(references, global_id):
            group = reference.get("groupId") or APICURIO_DEFAULT_GROUP
            artifact, version = reference.get("artifactId"), reference.get("version")
            meta = self._json(
                f"{api}/groups/{quote(str(group), safe='')}/artifacts/"
                f"{quote(str(artifact), safe='')}/versions/{quote(str(version), safe='')}"
            )
            if not isinstance(meta, dict) or not isinstance(meta.get("globalId"), int):
                raise SchemaLookupError("bad response", f"reference {artifact}: no globalId")
            resolved.append(self._resolve(meta["globalId"], "global", depth + 1))
            names.append(str(reference.get("name", artifact)))
        return RegisteredSchema(
            schema_id=global_id,
            format=_format(versions[0].get("artifactType"), global_id),
            text=text,
            references=tuple(resolved),
            reference_names=tuple(names),
        )

    # -- HTTP ----------------------------------------------------------------------------------

    def _json(self, url: str) -> Any:
        raw = self._get(url)
        try:
            return json.loads(raw)
        except ValueError:
            raise SchemaLookupError("bad response", f"{url}: not JSON") from None

    def _text(self, url: str) -> str:
        try:
            return self._get(url).decode("utf-8")
        except UnicodeDecodeError:
            raise SchemaLookupError("bad response", f"{url}: not UTF-8 text") from None

    def _get(self, url: str) -> bytes:
        """The body of a GET; transient failures retried, the others raised with a reason."""
        attempts = 1 + self._config.retries
        for attempt in range(attempts):
            if attempt:
                self._count("retries")
                self._sleep(min(_BACKOFF_S * 2 ** (attempt - 1), _MAX_BACKOFF_S))
            self._count("requests")
            log.debug("schema registry GET %s", url)
            request = urllib.request.Request(url, headers=self._headers)
            try:
                with urllib.request.urlopen(
                    request, timeout=self._config.timeout_s, context=self._tls
                ) as response:
                    body: bytes = response.read()
                    return body
            except urllib.error.HTTPError as error:
                error.close()
                if error.code in _TRANSIENT_STATUS and attempt + 1 < attempts:
                    continue
                reason = _REASONS.get(error.code, "server error")
                raise SchemaLookupError(reason, f"HTTP {error.code} from {url}") from None
            except (urllib.error.URLError, OSError) as error:
                why = getattr(error, "reason", error)
                if isinstance(why, ssl.SSLError):  # a certificate refused: retrying won't help
                    raise SchemaLookupError("tls error", f"{url}: {why}") from None
                if attempt + 1 < attempts:
                    continue
                raise SchemaLookupError("unreachable", f"{url}: {why}") from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1


def cluster_schemas(cluster: ClusterConfig) -> RegistrySchemas | None:
    """The lookup of a cluster's [schema_registry], or None when it names none."""
    registry = cluster.schema_registry
    return RegistrySchemas(registry) if registry is not None else None


def _headers(config: SchemaRegistryConfig) -> Mapping[str, str]:
    headers = {"Accept": _ACCEPT, "User-Agent": "dgm"}
    if config.username is not None and config.password is not None:
        pair = f"{config.username}:{config.password}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
    elif config.bearer_token is not None:
        headers["Authorization"] = f"Bearer {config.bearer_token}"
    return headers


def _tls_context(config: SchemaRegistryConfig) -> ssl.SSLContext:
    """Used for https:// URLs only; files that cannot be loaded are a config error, told at
    start rather than as a failure of every lookup."""
    try:
        context = ssl.create_default_context(cafile=str(config.ca_file) if config.ca_file else None)
        if config.cert_file is not None and config.key_file is not None:
            context.load_cert_chain(config.cert_file, config.key_file, config.key_password)
    except (ssl.SSLError, OSError) as error:  # the text names files, never the key password
        raise ConfigError(
            f"schema_registry: cannot load ca_file, cert_file or key_file: {error}"
        ) from None
    if not config.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _format(value: object, schema_id: int) -> SchemaFormat:
    for known in SCHEMA_FORMATS:
        if value == known:
            return known
    raise SchemaLookupError("unsupported format", f"schema {schema_id} is {value!r}")


def _list_of_dicts(value: object, schema_id: int) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise SchemaLookupError("bad response", f"schema {schema_id}: references not a list")
    return value
