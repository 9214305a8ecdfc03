"""The Ray Serve application: a FastAPI ingress that routes by profile name to profile actors.

The ingress is put together from one route class per area (``raymem.serve.routes``)
over the FastAPI app of ``raymem.serve.api``; a new subsystem adds a route module
here and an operations mixin to the profile actor. No
``from __future__ import annotations`` here: FastAPI inside Serve then answers
every request with a 422.
"""

from typing import Any

from ray import serve

from raymem.actors.pools import (
    EmbedderPool,
    GeneratorPool,
    embedder_options,
    generator_options,
)
from raymem.config import Settings, load_settings
from raymem.serve.api import app
from raymem.serve.extras import mount_extras
from raymem.serve.routes.archives import ArchiveRoutes
from raymem.serve.routes.context import ContextRoutes
from raymem.serve.routes.dreams import DreamRoutes
from raymem.serve.routes.memories import MemoryRoutes
from raymem.serve.routes.procedural import ProceduralRoutes
from raymem.serve.routes.profiles import ProfileRoutes
from raymem.serve.routes.review import ReviewRoutes
from raymem.serve.routes.sessions import SessionRoutes

# MCP at /mcp, the memory browser at /ui, API docs: added before @serve.ingress freezes the app.
mount_extras(app)


@serve.ingress(app)
class Ingress(
    MemoryRoutes,
    SessionRoutes,
    ProfileRoutes,
    ArchiveRoutes,
    ContextRoutes,
    ProceduralRoutes,
    DreamRoutes,
    ReviewRoutes,
):
    """Authenticates, validates and routes each request to its profile actor."""


# The deployment has a name of its own so that ``Ingress`` stays the class: Ray then
# pickles the class by reference, and each replica imports this module, which is
# what binds ``self`` in the routes that the route modules define.
IngressDeployment = serve.deployment(
    name="Ingress", max_ongoing_requests=256, ray_actor_options={"num_cpus": 0}
)(Ingress)


def build_app(settings: Settings) -> Any:
    """The Serve application graph: the ingress and the model pools it deploys."""
    models = settings.models
    # The pools are Serve deployments; mypy keeps a class's type through a class decorator.
    embedder = EmbedderPool.options(**embedder_options(models)).bind(models)  # type: ignore[attr-defined]
    # A model generator runs in its own pool; the rules and OpenAI backends need none.
    generator = None
    if models.generator == "transformers":
        options = generator_options(models)
        generator = GeneratorPool.options(**options).bind(models)  # type: ignore[attr-defined]
    ingress = IngressDeployment.options(num_replicas=settings.server.ingress_replicas)
    return ingress.bind(settings, embedder, generator)


def app_builder(args: dict[str, str]) -> Any:
    """Entry point for Serve config files and KubeRay (``import_path: raymem.serve.app:app_builder``).

    ``args`` may name a TOML file as ``config``; the ``RAYMEM_*`` environment of
    the Serve controller applies on top, as for ``raymem serve``.
    """
    return build_app(load_settings(args.get("config") or None))
