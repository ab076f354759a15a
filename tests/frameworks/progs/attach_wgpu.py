"""dlshim.attach(), then wgpu_compute.py.  `after`: wgpu's Vulkan instance
is created after the attach, so it gets the shim's layer; `before`: an
adapter is asked for first, which creates the instance without the layer,
and the compute after the attach is not seen (the limit).
Usage: attach_wgpu.py after|before"""
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))
import dlshim  # noqa: E402

if sys.argv[1] == "before":
    import wgpu
    wgpu.gpu.request_adapter_sync(power_preference="low-power")
assert dlshim.attach(format="jsonl", log="stderr", events="all")
runpy.run_path(os.path.join(HERE, "wgpu_compute.py"), run_name="__main__")
