"""`%load_ext dlshim` in a real Jupyter kernel (ipykernel, driven by
nbclient): a clean torch->NumPy exchange says nothing, a double release
shows in the output of its own cell with its line, `%dlshim` shows the
status, `%dlshim report` the HTML report, and the kernel stays alive."""
import nbclient
import nbformat
import pytest

from conftest import ROOT

CELLS = [
    "%load_ext dlshim",
    "import numpy as np\nimport torch\na = np.from_dlpack(torch.arange(4.0))\nfloat(a.sum())",
    "import ctypes\n"
    "get_pointer = ctypes.pythonapi.PyCapsule_GetPointer\n"
    "get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]\n"
    "capsule = torch.ones(4).__dlpack__()\n"
    "managed = get_pointer(capsule, b'dltensor')\n"
    "ctypes.pythonapi.PyCapsule_SetName(ctypes.py_object(capsule), b'used_dltensor')\n"
    "deleter = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(ctypes.c_void_p.from_address(managed + 56).value)\n"
    "deleter(managed)\n"
    "deleter(managed)",
    "%dlshim",
    "%dlshim report",
    "print('alive')",
]


def text_of(cell):
    parts = []
    for out in cell.outputs:
        if out.output_type == "stream":
            parts.append(out.text)
        elif "data" in out:
            parts.append(out.data.get("text/plain", ""))
    return "".join(parts)


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPATH", str(ROOT / "python"))
    mp.setenv("DLSHIM_ON_ERROR", "protect")  # the environment applies to %load_ext
    for name in ("DLSHIM_LOG", "DLSHIM_TEST_BUILD", "LD_PRELOAD"):
        mp.delenv(name, raising=False)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path_factory.mktemp("nb"))}}
                            ).execute()
    mp.undo()
    return nb.cells


def test_a_clean_exchange_says_nothing(notebook):
    assert "dlshim" not in text_of(notebook[0]) + text_of(notebook[1])
    assert text_of(notebook[1]) == "6.0"


def test_a_violation_shows_in_its_own_cell_with_its_line(notebook):
    text = text_of(notebook[2])
    assert "dlshim: double_release at " in text
    # the line of the second deleter call, in the cell's own file
    assert ":9 in <module>" in text.split("double_release at ")[1].splitlines()[0]


def test_the_status_and_the_report(notebook):
    # one violation, by kind; two shares, none a copy: the second cell's, and
    # the third's capsule, taken as a consumer takes one (renamed used_dltensor)
    assert text_of(notebook[3]).startswith("dlshim: 1 violation(s) (double_release 1), "
                                           "2 share(s), 0 of them copies, ")
    assert "last violation: double_release at " in text_of(notebook[3])
    [html] = [o.data["text/html"] for o in notebook[4].outputs if "data" in o]
    assert "double_release" in html and "<svg" in html


def test_the_kernel_stays_alive(notebook):
    assert text_of(notebook[5]) == "alive\n"
