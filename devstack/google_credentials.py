"""Real Google credentials that only ever reach loopback: a service-account key and its connection.

The key is a fresh RSA key in the JSON form Google hands out, except that its
``token_uri`` is the stand-in's ``/token``. ``google-auth`` signs its JWT with the
key and trades it there for an access token, exactly as it would at Google.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

CONN_ID = "google_cloud_default"
CONN_TYPE = "google_cloud_platform"


def service_account_key(token_uri: str, project: str) -> dict[str, str]:
    """A service-account key for ``project`` whose tokens come from ``token_uri``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    email = f"standin@{project}.iam.gserviceaccount.com"
    return {
        "type": "service_account",
        "project_id": project,
        "private_key_id": secrets.token_hex(20),
        "private_key": pem,
        "client_email": email,
        "client_id": str(secrets.randbelow(10**20)),
        "auth_uri": token_uri,
        "token_uri": token_uri,
        "universe_domain": "googleapis.com",
    }


def connection(key: dict[str, str], project: str, key_path: Path | None = None) -> dict[str, Any]:
    """The Airflow connection (JSON form) that authenticates with ``key``.

    :param key_path: where the key is written, for a connection that names a file
        (extra ``key_path``) rather than holding the key (extra ``keyfile_dict``).
    """
    extra: dict[str, Any] = {"project": project, "use_legacy_sql": False}
    if key_path is None:
        extra["keyfile_dict"] = json.dumps(key)
    else:
        key_path.write_text(json.dumps(key))
        key_path.chmod(0o600)
        extra["key_path"] = str(key_path)
    return {"conn_type": CONN_TYPE, "extra": extra}


def connection_env_var(conn_id: str = CONN_ID) -> str:
    """The environment variable Airflow reads the connection ``conn_id`` from."""
    return f"AIRFLOW_CONN_{conn_id.upper()}"
