"""The deployment manifests in cluster/ are valid for the tools that read them."""

from pathlib import Path

import yaml
from ray.serve.schema import ServeDeploySchema

from raymem.config import load_settings
from raymem.serve.app import app_builder

CLUSTER = Path(__file__).parent.parent / "cluster"


def test_serve_config_validates_and_names_our_builder():
    config = ServeDeploySchema.model_validate(
        yaml.safe_load((CLUSTER / "serve-config.yaml").read_text())
    )
    [application] = config.applications
    assert application.import_path == "raymem.serve.app:app_builder"
    assert {d.name for d in application.deployments} == {"Ingress", "Embedder"}


def test_kuberay_serve_config_validates():
    documents = list(yaml.safe_load_all((CLUSTER / "kuberay-rayservice.yaml").read_text()))
    [service] = [d for d in documents if d["kind"] == "RayService"]
    ServeDeploySchema.model_validate(yaml.safe_load(service["spec"]["serveConfigV2"]))


def test_example_config_loads_and_builds_an_app(tmp_path):
    settings = load_settings(CLUSTER / "raymem.toml", environ={})
    assert settings.object_store.bucket and settings.durability.mode == "shipped"
    assert settings.models.num_gpus == 1
    app = app_builder({"config": str(CLUSTER / "raymem.toml")})
    assert type(app).__name__ == "Application"
