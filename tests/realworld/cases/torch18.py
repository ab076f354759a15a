"""torch 1.8's from_dlpack, its steps in their order (rw26): the tensor
stolen from the capsule, the capsule marked used only at the end."""
from dlpack_ctypes import DLManagedTensor, api


def from_dlpack(cap, fixed=False):
    managed = api.PyCapsule_GetPointer(cap, b"dltensor")  # steals the tensor
    if fixed:
        api.PyCapsule_SetName(cap, b"used_dltensor")
    try:
        raise RuntimeError("torch.cuda.init() failed")  # a step that raised
    except RuntimeError:
        # the half-made tensor dies, and with it the tensor: released
        DLManagedTensor.from_address(managed).deleter(managed)
        raise
