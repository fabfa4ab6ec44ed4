"""When the tracer is made, from the standard OpenTelemetry variables alone, and what service it
names; the spans themselves are tested over real sockets (tests/wire/recording/test_tracing.py)."""

from __future__ import annotations

import pytest

from proxy.recording.tracer import Tracer

ON = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OTEL_SERVICE_NAME": "x"},  # a name alone exports nothing
        {**ON, "OTEL_SDK_DISABLED": "true"},
        {**ON, "OTEL_TRACES_EXPORTER": "none"},
    ],
)
def test_no_tracer_unless_an_endpoint_is_set_and_the_sdk_is_on(environ: dict[str, str]) -> None:
    assert Tracer.from_environment(environ) is None


@pytest.mark.parametrize(
    ("environ", "service"),
    [
        (ON, "replay-proxy"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}, "replay-proxy"),
        ({**ON, "OTEL_SERVICE_NAME": "rollouts"}, "rollouts"),
        ({**ON, "OTEL_RESOURCE_ATTRIBUTES": "service.name=evals,team=rl"}, "evals"),
    ],
)
def test_the_service_is_the_proxy_unless_the_variables_name_one(
    environ: dict[str, str], service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):  # the SDK reads os.environ
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    tracer = Tracer.from_environment(environ)
    assert tracer is not None
    try:
        assert tracer.provider.resource.attributes["service.name"] == service
        assert tracer.content is False
    finally:
        tracer.shutdown()


def test_message_content_is_opted_into_by_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {**ON, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    tracer = Tracer.from_environment(environ)
    assert tracer is not None
    try:
        assert tracer.content is True
    finally:
        tracer.shutdown()
