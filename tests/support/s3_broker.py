"""Tansu with ``s3://`` storage on moto's S3 server: a broker whose data survives a restart, which the
drills restart under a running worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kagent.tools.embedded import answers_api_versions, free_port, stop_process, tansu_binary
from tests.support.waiting import wait_until

__all__ = ["S3Broker"]

BUCKET = "tansu"


class S3Broker:
    """Tansu with ``s3://`` storage on a moto S3 server on loopback; a context manager."""

    def __init__(self, log_dir: Path) -> None:
        self.host, self.port = "127.0.0.1", free_port()
        self._log_dir = log_dir
        self._s3_port = free_port()
        self._moto: subprocess.Popen[bytes] | None = None
        self._tansu: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._tansu.pid if self._tansu else None

    def __enter__(self) -> S3Broker:
        moto_server = Path(sys.executable).with_name("moto_server")
        self._moto = subprocess.Popen(
            [str(moto_server), "-H", self.host, "-p", str(self._s3_port)],
            stdout=(self._log_dir / "moto.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        endpoint = f"http://{self.host}:{self._s3_port}"

        def bucket_made() -> bool:
            import boto3

            try:
                boto3.client(
                    "s3",
                    endpoint_url=endpoint,
                    aws_access_key_id="test",
                    aws_secret_access_key="test",
                    region_name="us-east-1",
                ).create_bucket(Bucket=BUCKET)
            except Exception:  # noqa: BLE001 - not listening yet
                return False
            return True

        wait_until(bucket_made, 30, "moto's S3 server to make the bucket")
        self._env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT": endpoint,
            "AWS_ALLOW_HTTP": "true",
        }
        self.start()
        return self

    def start(self) -> None:
        """Start the broker on the same data."""
        listener = f"tcp://{self.bootstrap_servers}"
        self._tansu = subprocess.Popen(
            [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                listener,
                "--advertised-listener-url",
                listener,
                "--storage-engine",
                f"s3://{BUCKET}/",
            ],
            env=self._env,
            stdout=(self._log_dir / "tansu.log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        wait_until(lambda: answers_api_versions(self.host, self.port), 15, "the broker to listen")

    def stop(self) -> None:
        tansu, self._tansu = self._tansu, None
        if tansu is not None:
            stop_process(tansu)

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._moto is not None:
            stop_process(self._moto)
