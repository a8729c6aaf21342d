"""The children import torch without the cyclic collector and get it back afterwards."""

from __future__ import annotations

import subprocess
import sys

_PRELUDE = "import gc\nfrom runspec.trainer.heavyimports import heavy_imports\n"


def _run(code: str) -> list[str]:
    """`code` in a fresh interpreter (the collector's state is per process); its output words."""
    done = subprocess.run(
        [sys.executable, "-c", _PRELUDE + code], capture_output=True, text=True, check=True
    )
    return done.stdout.split()


def test_the_collector_is_back_after_the_imports_and_what_they_made_is_frozen() -> None:
    assert _run(
        "before = gc.get_freeze_count()\n"
        "with heavy_imports():\n"
        "    assert not gc.isenabled()\n"
        "    import json, email.parser, http.client\n"
        "    made = [[i] for i in range(1000)]\n"
        "print(gc.isenabled(), gc.get_freeze_count() - before >= 1000)\n"
    ) == ["True", "True"]


def test_a_collector_that_was_off_stays_off() -> None:
    assert _run("gc.disable()\nwith heavy_imports():\n    pass\nprint(gc.isenabled())\n") == [
        "False"
    ]


def test_the_collector_is_back_when_an_import_fails() -> None:
    assert _run(
        "try:\n"
        "    with heavy_imports():\n"
        "        import no_such_module_here\n"
        "except ImportError:\n"
        "    print(gc.isenabled())\n"
    ) == ["True"]


def test_torchvision_imports_without_torchdynamo_and_compile_still_finds_it() -> None:
    """The preflight child's torchvision costs no TorchDynamo (1.0 s of CPU); afterwards
    roi_align's check and `import torch._dynamo` reach the real module."""
    assert _run(
        "import sys\n"
        "with heavy_imports():\n"
        "    import torch, torchvision\n"
        "    from torchvision.ops import nms, roi_align\n"
        "print('torch._dynamo' in sys.modules, 'torch._dynamo.utils' in sys.modules)\n"
        "boxes = torch.tensor([[0.0, 0.0, 4.0, 4.0], [0.0, 0.0, 4.0, 4.1]])\n"
        "print(nms(boxes, torch.tensor([0.9, 0.8]), 0.5).tolist())\n"
        "print(roi_align(torch.ones(1, 1, 8, 8), [boxes[:1]], 2).sum().item())\n"
        "ra = sys.modules['torchvision.ops.roi_align']\n"
        "print(ra.is_compile_supported('cpu'), 'torch._dynamo' in sys.modules)\n"
        "import torch._dynamo.utils as real\n"
        "print(type(real).__name__, real.is_compile_supported('cpu'))\n"
        "print(torch.compile(lambda x: x * 2, backend='eager')(torch.ones(2)).tolist())\n"
    ) == ["False", "False", "[0]", "4.0", "True", "True", "module", "True", "[2.0,", "2.0]"]


def test_a_real_torchdynamo_imported_inside_the_block_is_the_whole_module() -> None:
    """Code inside the block that wants TorchDynamo itself gets it, never the stand-in."""
    assert _run(
        "import sys\n"
        "with heavy_imports():\n"
        "    import torch._dynamo\n"
        "    from torch._dynamo.utils import counters\n"
        "    import torchvision\n"
        "print(type(sys.modules['torch._dynamo.utils']).__name__, type(counters).__name__)\n"
        "print(torch._dynamo.utils is sys.modules['torch._dynamo.utils'])\n"
    ) == ["module", "defaultdict", "True"]


def test_the_weights_lookup_imports_libreyolos_families_without_the_collector() -> None:
    """The preflight's weights check (pretrained weights, the default) imports every model
    family LibreYOLO has, TorchDynamo with them: inside heavy_imports, as the child's other
    heavy imports are (outside, the collector walked them: 0.3 s more per preflight)."""
    assert _run(
        "import sys\n"
        "with heavy_imports():\n"
        "    import torch, torchvision, libreyolo\n"
        "from runspec.preflight.checks import _download_url\n"
        "from runspec.spec.modelnames import weights_file\n"
        "before = gc.get_freeze_count()\n"
        "url, why = _download_url('yolo9-t', weights_file('yolo9-t'))\n"
        "print(url is not None or why, gc.get_freeze_count() - before > 100_000)\n"
        "utils = sys.modules['torch._dynamo.utils']\n"
        "print(type(utils).__name__, 'libreyolo.models' in sys.modules)\n"
    ) == ["True", "True", "module", "True"]
