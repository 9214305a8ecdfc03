"""The deployment manifests in cluster/ are valid for the tools that read them."""

import json
from pathlib import Path

import yaml
from ray.serve.schema import ServeDeploySchema

from raymem.actors.catalog import HOST_RESOURCE
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


def test_the_launcher_declares_profile_hosts_and_the_gpu_the_model_pool_reserves():
    config = yaml.safe_load((CLUSTER / "ray-cluster.yaml").read_text())
    types = config["available_node_types"]
    hosting = [name for name, node in types.items() if node["resources"].get(HOST_RESOURCE)]
    assert hosting == ["cpu_worker"] and types["cpu_worker"]["min_workers"] >= 1
    assert types["gpu_worker"]["resources"]["GPU"] >= 1


def test_kuberay_declares_profile_hosts_and_its_toml_uses_the_gpu_it_reserves(tmp_path):
    documents = list(yaml.safe_load_all((CLUSTER / "kuberay-rayservice.yaml").read_text()))
    [config_map] = [d for d in documents if d["kind"] == "ConfigMap"]
    [service] = [d for d in documents if d["kind"] == "RayService"]
    toml = tmp_path / "raymem.toml"
    toml.write_text(config_map["data"]["raymem.toml"])
    serve_config = yaml.safe_load(service["spec"]["serveConfigV2"])
    [embedder] = [
        d for d in serve_config["applications"][0]["deployments"] if d["name"] == "Embedder"
    ]
    reserved = embedder["ray_actor_options"]["num_gpus"]
    assert load_settings(toml, environ={}).models.num_gpus == reserved > 0
    groups = {g["groupName"]: g for g in service["spec"]["rayClusterConfig"]["workerGroupSpecs"]}
    declared = json.loads(json.loads(groups["cpu"]["rayStartParams"]["resources"]))
    assert declared[HOST_RESOURCE] >= 1
