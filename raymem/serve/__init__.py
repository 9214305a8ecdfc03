"""The Ray Serve application: HTTP routes, auth and the server runner."""
