"""HTTP routes by area, each a class the ingress inherits: a new subsystem adds a module.

Serve finds a route's endpoint on any class of the ingress's MRO, so the routes
of ``memories``, ``sessions``, ``profiles`` and ``archives`` are methods of
mixins over ``IngressBase`` (``base``), put together in ``raymem.serve.app``.
"""
