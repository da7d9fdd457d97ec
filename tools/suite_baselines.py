#!/usr/bin/env python3
"""PyTorch baselines for kopt's suite: for every spec in specs/suite/ (or the
folder given), times the spec's `torch.expr` in PyTorch eager and under
torch.compile on the spec's own shapes, dtypes and input distributions, and
writes specs/suite/baselines_<gpu>.json, which `kopt suite` reads for its
speedups and fast_p (docs/SUITE.md).

    python3 tools/suite_baselines.py                 # every problem, default GPU
    python3 tools/suite_baselines.py --only relu,softmax --reps 50
    python3 tools/suite_baselines.py --list          # the problems and their expressions (no GPU)

Timing, as kopt times a kernel (docs/TRUST.md): CUDA events around the call
alone, on the current stream; before every sample the L2 is flushed (a buffer
of twice the L2 is zeroed outside the timed window) and the GPU spins about
1 ms, so the host has queued the whole call before the timed window opens
(Python's time between launches is not counted: --host-gaps counts it, as
KernelBench does); warm-up calls first (for torch.compile, after compiling);
the median of the samples, with the 10th and 90th percentiles. An eager time
is every kernel the expression launches, back to back.
TF32 is off for matmul and cuDNN (the suite's problems are f32 and kopt's
kernels compute in f32; --tf32 turns it on and records it).

A problem that fails (an exception in eager or in torch.compile) is recorded
with its error and the rest go on. Nothing here needs kopt.
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import re
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SPECS = os.path.join(HERE, "..", "specs", "suite")

# The helpers a spec expression may use (specs/README.md), for shapes and
# scalar values.
EXPR_HELPERS = {
    "cdiv": lambda a, b: -(-a // b), "ceil": math.ceil, "floor": math.floor, "min": min, "max": max,
    "abs": abs, "sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log2": math.log2, "int": int,
}


def gpu_slug(name):
    """'NVIDIA H100 80GB HBM3' -> 'nvidia_h100_80gb_hbm3', as kopt.suite.gpu_slug."""
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


def spec_expr(text, scope):
    """A spec expression (Lua) that is plain arithmetic over sizes, in Python."""
    if isinstance(text, (int, float)):
        return text
    py = text.replace("~=", "!=").replace("^", "**")
    return eval(py, {"__builtins__": {}}, {**EXPR_HELPERS, **scope})  # noqa: S307 (trusted spec files)


def load_specs(folder, only):
    specs = []
    if not os.path.isdir(folder):
        sys.exit(f"suite_baselines.py: --specs {folder}: not a folder of specs")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json") or name.startswith("baselines_"):
            continue
        with open(os.path.join(folder, name)) as f:
            spec = json.load(f)
        if "torch" not in spec:
            print(f"note: {name}: no 'torch' field, skipped", file=sys.stderr)
            continue
        specs.append(spec)
    if only:
        by = {s["name"]: s for s in specs}
        missing = [n for n in only if n not in by]
        if missing:
            sys.exit(f"suite_baselines: --only: no problem named {', '.join(missing)} "
                     f"(the suite has: {', '.join(sorted(by))})")
        specs = [by[n] for n in only]
    return specs


def device_facts(index, torch):
    """The facts kopt reads from the driver (for the speed of light), by the
    same attributes; torch's properties where libcuda cannot be asked."""
    props = torch.cuda.get_device_properties(index)
    facts = {"name": torch.cuda.get_device_name(index), "cc_major": props.major, "cc_minor": props.minor,
             "sm_count": props.multi_processor_count, "l2_bytes": getattr(props, "L2_cache_size", None),
             "mem_bytes": props.total_memory}
    attrs = {"clock_khz": 13, "mem_clock_khz": 36, "mem_bus_width": 37}
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        dev = ctypes.c_int()
        # device ordinals follow CUDA_VISIBLE_DEVICES, as torch's do
        if cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), index) == 0:
            for key, attr in attrs.items():
                v = ctypes.c_int()
                if cuda.cuDeviceGetAttribute(ctypes.byref(v), attr, dev) == 0:
                    facts[key] = v.value
        drv = ctypes.c_int()
        if cuda.cuDriverGetVersion(ctypes.byref(drv)) == 0:
            facts["driver"] = f"{drv.value // 1000}.{drv.value % 1000 // 10}"
    except OSError:
        pass
    for key, alt in (("clock_khz", "clock_rate"), ("mem_clock_khz", "memory_clock_rate"),
                     ("mem_bus_width", "memory_bus_width")):
        if key not in facts and hasattr(props, alt):
            facts[key] = getattr(props, alt)
    return facts


# About 1 ms at Hopper's clocks: more than the host needs to queue any
# suite problem's call, eager or compiled.
SPIN_CYCLES = 2_000_000

TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "i32": "int32",
                "i64": "int64", "u32": "uint32", "i8": "int8", "u8": "uint8"}


def make_inputs(spec, torch, device):
    """The spec's input tensors (shapes, dtypes, distributions) and the
    names an expression sees: problem sizes, scalar arguments, tensors."""
    problem = dict(spec.get("problem", {}))
    scope = dict(problem)
    tensors, scalars = {}, {}
    for a in spec["args"]:
        if a.get("output"):
            continue
        if "value" in a:
            v = spec_expr(a["value"], problem)
            scalars[a["name"]] = float(v) if a["type"] in ("f32", "f16", "bf16", "f64") else int(v)
            continue
        shape = [int(spec_expr(e, problem)) for e in a["shape"]]
        dtype = getattr(torch, TORCH_DTYPES[a["type"]])
        init = a.get("init", "normal")
        dist = init["dist"] if isinstance(init, dict) else init
        if dtype.is_floating_point:
            if dist == "normal":
                t = torch.randn(shape, device=device, dtype=dtype)
            elif dist == "uniform":
                t = torch.rand(shape, device=device, dtype=dtype) * 2 - 1
            elif dist == "uniform01":
                t = torch.rand(shape, device=device, dtype=dtype)
            elif dist == "ones":
                t = torch.ones(shape, device=device, dtype=dtype)
            elif dist == "zeros":
                t = torch.zeros(shape, device=device, dtype=dtype)
            elif dist == "arange":
                t = torch.arange(math.prod(shape), device=device, dtype=dtype).reshape(shape)
            else:
                t = torch.full(shape, float(init.get("value", 0)), device=device, dtype=dtype)
        else:
            t = torch.randint(0, 100, shape, device=device, dtype=dtype)
        tensors[a["name"]] = t
    scope.update(scalars)
    return tensors, scope


def build_fn(spec, tensor_names, scope, torch):
    """def f(<tensors>): return <expr>, with sizes and scalars as globals, so
    torch.compile sees ordinary Python."""
    glob = {"torch": torch, "math": math, "F": torch.nn.functional}
    glob.update(scope)
    src = "def f({}):\n    return {}\n".format(", ".join(tensor_names), spec["torch"]["expr"])
    exec(compile(src, "<{}>".format(spec["name"]), "exec"), glob)  # noqa: S102 (trusted spec files)
    return glob["f"]


def time_fn(fn, args, torch, flush, warmup, reps, max_s, spin_cycles):
    """Median, p10, p90 (ms) and the number of samples: CUDA events around
    the call alone, the L2 flushed before each sample. With spin_cycles, a
    GPU spin between the flush and the start event holds the GPU while the
    host queues the call, so Python's time between launches is not timed
    (what is timed is the GPU's work for the call, launch gaps on the GPU
    included)."""
    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.time()
    while len(times) < reps:
        flush.zero_()
        if spin_cycles:
            torch.cuda._sleep(spin_cycles)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
        if len(times) >= 5 and time.time() - t0 > max_s:
            break
    times.sort()

    def q(p):
        return times[min(len(times) - 1, max(0, int(round(p * (len(times) - 1)))))]
    return {"ms": statistics.median(times), "p10_ms": q(0.1), "p90_ms": q(0.9), "samples": len(times)}


def short_error(e):
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    return text if len(text) <= 600 else text[:600] + " [...]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", default=DEFAULT_SPECS, help="folder of suite specs (default specs/suite)")
    ap.add_argument("--only", default="", help="comma-separated problem names")
    ap.add_argument("--out", default="", help="output file (default <specs>/baselines_<gpu>.json)")
    ap.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    ap.add_argument("--reps", type=int, default=30, help="timed samples per measurement (default 30)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
    ap.add_argument("--max-s", type=float, default=2.0,
                    help="stop sampling a measurement after this many seconds, once it has 5 samples (default 2)")
    ap.add_argument("--compile-mode", default="default", help="torch.compile mode (default 'default')")
    ap.add_argument("--no-compile", action="store_true", help="eager only")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 in matmul and cuDNN (recorded)")
    ap.add_argument("--host-gaps", action="store_true",
                    help="time Python's gaps between launches too (KernelBench's way): no GPU spin before each sample")
    ap.add_argument("--list", action="store_true", help="print the problems and their expressions, then stop")
    args = ap.parse_args()

    only = [n for n in args.only.split(",") if n]
    if len(set(only)) != len(only):
        sys.exit("suite_baselines.py: --only names a problem twice")
    specs = load_specs(args.specs, only)
    if args.list:
        for s in specs:
            print(f"{s['name']:22s} {s['torch']['expr']}")
        return 0

    try:
        import torch  # noqa: E402 (not needed for --list)
    except ImportError:
        sys.exit("suite_baselines.py: PyTorch is not installed here (pip install torch, or run it where it is); "
                 "--list works without it")
    if not torch.cuda.is_available():
        sys.exit("suite_baselines: PyTorch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.manual_seed(0)
    device = torch.device("cuda", args.device)
    torch.cuda.set_device(device)
    facts = device_facts(args.device, torch)
    flush = torch.empty(max(2 * (facts.get("l2_bytes") or 64 << 20), 128 << 20) // 4, dtype=torch.float32,
                        device=device)
    try:
        import triton
        triton_version = triton.__version__
    except Exception:  # noqa: BLE001 (optional)
        triton_version = None

    out = args.out or os.path.join(args.specs, "baselines_{}.json".format(gpu_slug(facts["name"])))
    doc = {
        "gpu": facts["name"], "torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton_version,
        "driver": facts.get("driver"), "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "method": {"timer": "CUDA events around the call", "statistic": "median", "warmup": args.warmup,
                   "reps": args.reps, "max_s": args.max_s, "l2_flush": "a buffer of 2x the L2 zeroed before each sample",
                   "tf32": args.tf32, "compile_mode": None if args.no_compile else args.compile_mode,
                   "host_gaps": "timed" if args.host_gaps else
                   "hidden: a GPU spin of %d cycles before each sample lets the host queue the call first" % SPIN_CYCLES},
        "device": facts, "problems": {},
    }
    spin = 0 if args.host_gaps else SPIN_CYCLES
    t_all = time.time()
    print(f"{facts['name']}: {len(specs)} problems, PyTorch {torch.__version__}", flush=True)
    for spec in specs:
        name = spec["name"]
        rec = {"torch": spec["torch"]["expr"], "eager_ms": None, "compile_ms": None}
        doc["problems"][name] = rec
        t_problem = time.time()
        try:
            tensors, scope = make_inputs(spec, torch, device)
            names = list(tensors)
            fn = build_fn(spec, names, scope, torch)
            inputs = [tensors[n] for n in names]
        except Exception as e:  # noqa: BLE001 (recorded, the rest go on)
            rec["eager_error"] = rec["compile_error"] = "inputs: " + short_error(e)
            print(f"  {name:22s} inputs failed: {rec['eager_error']}", flush=True)
            continue
        with torch.no_grad():
            try:
                r = time_fn(fn, inputs, torch, flush, args.warmup, args.reps, args.max_s, spin)
                rec.update(eager_ms=r["ms"], eager_p10_ms=r["p10_ms"], eager_p90_ms=r["p90_ms"],
                           eager_samples=r["samples"])
            except Exception as e:  # noqa: BLE001
                rec["eager_error"] = short_error(e)
            if not args.no_compile:
                try:
                    # a fresh dynamo per problem: its recompile limit counts the
                    # earlier problems' functions, and past it calls run eager
                    torch._dynamo.reset()
                    cfn = torch.compile(fn, mode=None if args.compile_mode == "default" else args.compile_mode)
                    t0 = time.time()
                    cfn(*inputs)
                    torch.cuda.synchronize()
                    rec["compile_s"] = round(time.time() - t0, 2)
                    r = time_fn(cfn, inputs, torch, flush, args.warmup, args.reps, args.max_s, spin)
                    rec.update(compile_ms=r["ms"], compile_p10_ms=r["p10_ms"], compile_p90_ms=r["p90_ms"],
                               compile_samples=r["samples"])
                except Exception as e:  # noqa: BLE001
                    rec["compile_error"] = short_error(e)
        del tensors, inputs, fn
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        rec["wall_s"] = round(time.time() - t_problem, 2)

        def show(key):
            v = rec.get(key + "_ms")
            return f"{v:9.4f} ms" if v is not None else "    failed  "
        print(f"  {name:22s} eager {show('eager')}   compile {show('compile')}   ({rec['wall_s']:.1f} s)", flush=True)
        with open(out + ".tmp", "w") as f:  # what is measured so far survives a crash
            json.dump(doc, f, indent=2)
        os.replace(out + ".tmp", out)
    doc["wall_s"] = round(time.time() - t_all, 1)
    with open(out + ".tmp", "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(out + ".tmp", out)
    failed = [n for n, r in doc["problems"].items() if r.get("eager_ms") is None or
              (not args.no_compile and r.get("compile_ms") is None)]
    print(f"wrote {out} in {doc['wall_s']:.0f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
