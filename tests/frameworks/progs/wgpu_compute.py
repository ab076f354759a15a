"""A small wgpu compute shader (wgpu-native on Vulkan): doubles and adds one
to 4096 integers, checks them and prints the adapter and their sum."""
import array
import sys

import wgpu
from wgpu.utils.compute import compute_with_buffers

SHADER = """
@group(0) @binding(0) var<storage, read> data_in: array<u32>;
@group(0) @binding(1) var<storage, read_write> data_out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    data_out[id.x] = data_in[id.x] * 2u + 1u;
}
"""

N = 4096
adapter = wgpu.gpu.request_adapter_sync(power_preference="low-power")
print("adapter", adapter.info["backend_type"], adapter.info["adapter_type"])
src = array.array("I", range(N))
out = compute_with_buffers({0: src}, {1: (N, "I")}, SHADER, n=N // 64)
result = out[1].tolist()
assert result == [i * 2 + 1 for i in range(N)], "wrong result"
print("sum", sum(result))
sys.stdout.flush()
