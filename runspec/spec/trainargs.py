"""The `libreyolo train` options a spec may pass through `train.args`.

A static list, so validating a spec never imports LibreYOLO (seconds and most of a gigabyte).
`tests/test_spec_trainargs.py` compares it with the installed LibreYOLO's `train` command and
with the schema, so it cannot drift silently. The schema's `train.args` section is generated
from it: `python -m runspec.spec.trainargs` prints that section.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TrainOption:
    key: str  # underscores, as LibreYOLO's Python API spells it
    kind: str  # the CLI option's Python type: bool, int, float or str
    default: Any  # the CLI's default; None where LibreYOLO decides per model family
    description: str


# Every `libreyolo train` option (LibreYOLO 1.6.0) except its output flags and the ones the
# spec sets elsewhere (below), plus `sync_bn`, which LibreYOLO takes only from Python.
OPTIONS: tuple[TrainOption, ...] = (
    TrainOption(
        "task",
        "str",
        None,
        "Explicit task override: detect, segment, semantic, pose, classify, gaze, obb, "
        "point, depth",
    ),
    TrainOption("workers", "int", 4, "Dataloader workers"),
    TrainOption(
        "cache", "str", "false", "Cache images to speed dataloading: ram, disk, true, false"
    ),
    TrainOption(
        "min_samples",
        "int",
        0,
        "Epoch-length floor for tiny datasets: when the dataset has fewer images, draw "
        "this many samples per epoch with replacement (0 = off)",
    ),
    TrainOption(
        "class_balanced",
        "bool",
        False,
        "LVIS-style repeat-factor sampling for long-tailed datasets (default: off)",
    ),
    TrainOption(
        "cls_pw",
        "float",
        0.0,
        "Classification inverse-frequency weighting power: 0 off, 1 full (mean-one class "
        "weights; cannot combine with class_weights=True)",
    ),
    TrainOption(
        "class_weights",
        "bool",
        False,
        "Legacy sample-normalized classification loss weights (default: off)",
    ),
    TrainOption(
        "single_cls", "bool", False, "Train a G0/G1 detector with every label remapped to class 0"
    ),
    TrainOption(
        "classes",
        "str",
        None,
        "Train a G0/G1 detector on only these original dataset class ids, comma-separated"
        " (e.g. '0,3,5'); every other class is dropped as if unlabeled. Ids are kept as-"
        "is, not compacted",
    ),
    TrainOption(
        "average_best",
        "int",
        0,
        "Uniform-average the N best checkpoints by the watched metric into "
        "weights/average.pt at the end of training (0 = off)",
    ),
    TrainOption(
        "export_check",
        "bool",
        False,
        "Export ONNX before epoch 1 and fail the run if export breaks (default: off)",
    ),
    TrainOption(
        "precise_bn",
        "int",
        0,
        "Recompute BatchNorm running stats from this many train images after the last "
        "epoch (0 = off)",
    ),
    TrainOption(
        "aux_weight",
        "float",
        None,
        "YOLO9 only: PGI auxiliary-branch loss weight for fine-tuning (default 0.25; 0 "
        "trains the main head only)",
    ),
    TrainOption("seed", "int", 0, "Random seed"),
    TrainOption("amp", "bool", True, "Automatic Mixed Precision"),
    TrainOption("amp_dtype", "str", "float16", "CUDA AMP dtype: float16 or bfloat16"),
    TrainOption(
        "cuda_graph",
        "bool",
        False,
        "Capture the training forward/backward into CUDA graphs (single-GPU, supported "
        "families only; others run eager)",
    ),
    TrainOption(
        "compile",
        "str",
        "false",
        "torch.compile the training network: true, false, default, reduce-overhead, max-"
        "autotune, max-autotune-no-cudagraphs (single CUDA GPU; other runs train eager "
        "with a warning)",
    ),
    TrainOption("pretrained", "bool", True, "Use pretrained weights"),
    TrainOption(
        "lora", "bool", False, "Enable LoRA fine-tuning for supported transformer families"
    ),
    TrainOption(
        "freeze", "str", "", "Freeze layers: int count, list of indices, or module name(s)"
    ),
    TrainOption(
        "distill_model",
        "str",
        "",
        "Teacher for knowledge distillation: a detector checkpoint, or a foundation-"
        "teacher id (e.g. 'dinov2') for backbone feature distillation",
    ),
    TrainOption(
        "dis", "float", None, "Distillation loss weight (default: per-loss-type published default)"
    ),
    TrainOption(
        "distill_loss_type",
        "str",
        "mgd",
        "Distillation feature loss for detector teachers: mgd, cwd (foundation teachers "
        "always use feat_mse)",
    ),
    TrainOption("optimizer", "str", "sgd", "Optimizer: sgd, adam, adamw"),
    TrainOption("lr0", "float", 0.01, "Initial learning rate"),
    TrainOption("momentum", "float", 0.937, "SGD momentum / Adam beta1"),
    TrainOption("weight_decay", "float", 0.0005, "L2 regularization"),
    TrainOption("nesterov", "bool", True, "Nesterov momentum"),
    TrainOption("scheduler", "str", "yoloxwarmcos", "LR schedule type"),
    TrainOption("warmup_epochs", "int", 5, "Warmup duration"),
    TrainOption("warmup_lr_start", "float", 0.0, "Initial warmup LR"),
    TrainOption("min_lr_ratio", "float", 0.05, "Minimum LR ratio"),
    TrainOption("lr_drop", "int", 100, "RF-DETR step LR drop epoch"),
    TrainOption("mosaic", "float", 1.0, "Mosaic probability"),
    TrainOption("mixup", "float", 1.0, "Mixup probability"),
    TrainOption("hsv_prob", "float", 1.0, "HSV jitter probability"),
    TrainOption("flip_prob", "float", 0.5, "Horizontal flip probability"),
    TrainOption(
        "fliplr", "float", None, "Horizontal flip probability (ecosystem alias of flip_prob)"
    ),
    TrainOption("flipud", "float", 0.0, "Vertical flip probability"),
    TrainOption("degrees", "float", 10.0, "Rotation +/- degrees"),
    TrainOption("translate", "float", 0.1, "Translation ratio"),
    TrainOption("shear", "float", 2.0, "Shear angle"),
    TrainOption("mosaic_scale", "str", "(0.1,2.0)", "Mosaic scale range"),
    TrainOption("mixup_scale", "str", "(0.5,1.5)", "Mixup scale range"),
    TrainOption("no_aug_epochs", "int", 15, "Disable augmentation for final N epochs"),
    TrainOption(
        "auto_augment",
        "str",
        None,
        "Classification auto-augment policy: randaugment, autoaugment, augmix (default: none)",
    ),
    TrainOption(
        "erasing", "float", 0.0, "Classification RandomErasing probability, 0 <= erasing < 1"
    ),
    TrainOption("cutmix", "float", 0.0, "Classification CutMix probability (soft labels)"),
    TrainOption(
        "scale",
        "str",
        "0.5",
        "Classification RandomResizedCrop area range: a float lower bound or an explicit (min,max)",
    ),
    TrainOption(
        "crop_pct",
        "float",
        None,
        "Classification eval resize ratio before the center crop (default: the model "
        "family's native value)",
    ),
    TrainOption("ema", "bool", True, "Exponential Moving Average"),
    TrainOption("ema_decay", "float", 0.9998, "EMA decay factor"),
    TrainOption("val", "bool", True, "Validate during training"),
    TrainOption("eval_interval", "int", 10, "Validate every N epochs"),
    TrainOption("max_det", "int", 300, "Maximum predictions per image after validation NMS"),
    TrainOption("eval_max_det", "int", None, "COCO evaluator cap (default: pycocotools AP@100)"),
    TrainOption(
        "faster_coco_eval",
        "bool",
        True,
        "Use the faster-coco-eval C++ backend for validation COCO metrics (default: on "
        "when installed; falls back to pycocotools)",
    ),
    TrainOption("save_plots", "bool", False, "Save final validation plots during training"),
    TrainOption(
        "plot_samples",
        "int",
        8,
        "Sample images in the validation sample plot: 0 for none, -1 for every validated "
        "image (does not change the metrics)",
    ),
    TrainOption("patience", "int", 50, "Early stopping patience (0=disabled)"),
    TrainOption("log_interval", "int", 10, "Log loss every N batches"),
    TrainOption(
        "allow_download_scripts",
        "bool",
        False,
        "Allow embedded Python in dataset YAML download blocks",
    ),
    TrainOption(
        "sync_bn",
        "bool",
        None,
        "SyncBatchNorm across GPUs (Python-only; on by default for most families; "
        "set false for CPU multi-process runs)",
    ),
)

# Options of `libreyolo train` that runspec does not pass through, and where they belong.
ELSEWHERE: dict[str, str] = {
    "model": "set it as train.model",
    "data": "the dataset section names the data.yaml (dataset.path, or hub with data)",
    "epochs": "set it as train.epochs",
    "batch": "set it as train.batch",
    "imgsz": "set it as train.imgsz",
    "device": "set it as train.device",
    "save_period": "set it as train.save_period",
    "project": "set it as output.project",
    "name": "the run folder is named after the spec's name",
    "exist_ok": "runspec chooses the run folder itself",
    "resume": "runspec resumes by itself after a crash (train.restarts says how often)",
    "json": "runspec controls the trainer's output",
    "quiet": "runspec controls the trainer's output",
    "dry_run": "validate the spec with `runspec validate` instead",
    "help_json": "runspec controls the trainer's output",
}

BY_KEY: dict[str, TrainOption] = {option.key: option for option in OPTIONS}


def normalise_key(key: str) -> str:
    """LibreYOLO treats dashes and underscores alike; runspec keeps underscores."""
    return key.replace("-", "_")


def option_schema(option: TrainOption) -> dict[str, Any]:
    """The JSON Schema of one option's value as a spec writes it."""
    types: list[str]
    if option.kind == "bool":
        types = ["boolean"]
    elif option.kind == "int":
        types = ["integer"]
    elif option.kind == "float":
        types = ["number"]
    else:
        # LibreYOLO parses these strings itself; YAML gives `cache: false` or `freeze: 10`
        # as a boolean or a number, which it takes as well.
        types = ["string", "number", "boolean"]
    if option.default is None:
        types.append("null")
    schema: dict[str, Any] = {
        "type": types[0] if len(types) == 1 else types,
        "description": option.description,
    }
    if option.default is not None:
        schema["default"] = option.default
    return schema


def args_schema() -> dict[str, Any]:
    """The schema's `train.args` properties: each option, and its dashed spelling."""
    properties: dict[str, Any] = {}
    for option in sorted(OPTIONS, key=lambda o: o.key):
        properties[option.key] = option_schema(option)
    for option in sorted(OPTIONS, key=lambda o: o.key):
        if "_" in option.key:
            dashed = option.key.replace("_", "-")
            properties[dashed] = {
                "$ref": f"#/$defs/trainArgs/properties/{option.key}",
                "description": f"same as {option.key}",
            }
    return properties


if __name__ == "__main__":
    print(json.dumps(args_schema(), indent=2))
