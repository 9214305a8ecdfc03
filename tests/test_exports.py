"""The public surface of the package."""

import raymem


def test_all_is_sorted_and_importable():
    assert raymem.__all__ == sorted(raymem.__all__)
    for name in raymem.__all__:
        assert getattr(raymem, name) is not None


def test_importing_the_client_does_not_load_ray():
    import subprocess
    import sys

    code = "import sys, raymem; raymem.Client; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
