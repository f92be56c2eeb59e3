"""How a Prometheus login is given (config/prometheus_access.py): by flag, file or environment, basic or bearer, a
URL's login split off; every mistake named without the credential; the reclaim policy's from its Secret."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from components.reclaim.objects import PROMETHEUS_SECRET, plan_objects, policy_zip
from config.monitoring import MonitoringConfig
from config.prometheus_access import POLICY_AUTH_ENV, PrometheusAccessError, access_from, policy_access
from config.reclaim import IdleNotebooksConfig
from config.secrets import PROMETHEUS_PASSWORD_ENV, PROMETHEUS_TOKEN_ENV

URL = "http://prometheus.lab:9090"
SECRET = "canary-s3cr#t"


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_basic_auth_comes_from_the_user_flag_and_the_password_in_the_environment() -> None:
    access = access_from(URL, user="admin", environ={PROMETHEUS_PASSWORD_ENV: SECRET})

    assert access.url == URL and access.headers() == {"Authorization": _basic("admin", SECRET)}
    assert SECRET not in repr(access)


def test_a_token_comes_from_its_file_without_the_editors_newline(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(f"{SECRET}\n", encoding="utf-8")

    access = access_from(URL, token_file=str(tmp_path / "token"), environ={})

    assert access.headers() == {"Authorization": f"Bearer {SECRET}"}


def test_a_urls_login_becomes_basic_auth_and_the_url_loses_it() -> None:
    access = access_from(f"http://admin:{SECRET}@prometheus.lab:9090", environ={PROMETHEUS_TOKEN_ENV: "x"})

    assert access.url == URL and access.headers() == {"Authorization": _basic("admin", SECRET)}


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"url": f"http://admin:{SECRET}@p:9090", "user": "admin"}, "carries a login"),
        ({"user": "admin"}, "--prometheus-user admin has no password"),
        ({"password": SECRET}, "without --prometheus-user"),
        ({"user": "admin", "password": SECRET, "token": SECRET}, "both given"),
        ({"password_file": f"/nonexistent/{SECRET}"}, "cannot read it"),
    ],
)
def test_each_mistake_is_named_and_the_credential_never_shown(given: dict[str, str], said: str) -> None:
    url = given.pop("url", URL)
    with pytest.raises(PrometheusAccessError) as refused:
        access_from(url, environ={}, **given)

    assert said in str(refused.value)
    assert "s3cr" not in str(refused.value).replace(f"/nonexistent/{SECRET}", "")


def test_the_policy_reads_its_login_from_the_secrets_variable_and_its_deployment_holds_only_the_reference() -> None:
    cfg = IdleNotebooksConfig.model_validate({"enabled": True, "prometheusUrl": URL})

    planned = plan_objects(cfg, MonitoringConfig(), {}, policy_zip(), prometheus_login=True)

    [container] = planned.deployment["spec"]["template"]["spec"]["containers"]
    [login] = [env for env in container["env"] if env["name"] == POLICY_AUTH_ENV]
    assert login["valueFrom"]["secretKeyRef"]["name"] == PROMETHEUS_SECRET
    assert policy_access(URL, {POLICY_AUTH_ENV: f"Bearer {SECRET}"}).headers() == {"Authorization": f"Bearer {SECRET}"}
    assert policy_access(URL, {POLICY_AUTH_ENV: f"admin:{SECRET}"}).headers() == {
        "Authorization": _basic("admin", SECRET)
    }
    assert policy_access(URL, {}).headers() == {}
