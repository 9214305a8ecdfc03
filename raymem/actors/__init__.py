"""Profile actors, their routing, and the model pool deployments."""
