//! dlpack_rs: DLPack capsules from Rust, legacy and versioned, produced and
//! consumed through pyo3::ffi exactly as Rust DLPack crates do.
//!
//!   make(n)                 a "dltensor" capsule of n float64 (0, 1, ...)
//!   make_versioned(n, f)    a "dltensor_versioned" capsule with flags f
//!   consume(capsule)        takes either kind (renames it "used_...") and
//!                           returns a Held that calls the deleter when dropped
//!   Held.total()            the sum of the elements
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::AsPyPointer;
use std::ffi::{c_void, CStr};
use std::os::raw::c_char;

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

/// What the tensor's memory belongs to: freed by the deleter.
struct Owner {
    data: Vec<f64>,
    shape: [i64; 1],
}

const LEGACY: &[u8] = b"dltensor\0";
const VERSIONED: &[u8] = b"dltensor_versioned\0";
const USED_LEGACY: &[u8] = b"used_dltensor\0";
const USED_VERSIONED: &[u8] = b"used_dltensor_versioned\0";

fn name(bytes: &'static [u8]) -> *const c_char {
    CStr::from_bytes_with_nul(bytes).unwrap().as_ptr()
}

fn tensor_of(owner: &mut Owner) -> DLTensor {
    DLTensor {
        data: owner.data.as_mut_ptr() as *mut c_void,
        device: DLDevice { device_type: 1, device_id: 0 },
        ndim: 1,
        dtype: DLDataType { code: 2, bits: 64, lanes: 1 },
        shape: owner.shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

fn new_owner(n: usize) -> Box<Owner> {
    Box::new(Owner { data: (0..n).map(|i| i as f64).collect(), shape: [n as i64] })
}

unsafe extern "C" fn delete_legacy(t: *mut DLManagedTensor) {
    let t = Box::from_raw(t);
    drop(Box::from_raw(t.manager_ctx as *mut Owner));
}

unsafe extern "C" fn delete_versioned(t: *mut DLManagedTensorVersioned) {
    let t = Box::from_raw(t);
    drop(Box::from_raw(t.manager_ctx as *mut Owner));
}

/// The producer's capsule destructor: release a tensor nobody consumed.
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    if ffi::PyCapsule_IsValid(capsule, name(LEGACY)) == 1 {
        let t = ffi::PyCapsule_GetPointer(capsule, name(LEGACY)) as *mut DLManagedTensor;
        if let Some(d) = (*t).deleter {
            d(t);
        }
    } else if ffi::PyCapsule_IsValid(capsule, name(VERSIONED)) == 1 {
        let t = ffi::PyCapsule_GetPointer(capsule, name(VERSIONED)) as *mut DLManagedTensorVersioned;
        if let Some(d) = (*t).deleter {
            d(t);
        }
    }
}

#[pyfunction]
fn make(py: Python<'_>, n: usize) -> PyResult<PyObject> {
    let mut owner = new_owner(n);
    let t = Box::new(DLManagedTensor {
        dl_tensor: tensor_of(&mut owner),
        manager_ctx: Box::into_raw(owner) as *mut c_void,
        deleter: Some(delete_legacy),
    });
    unsafe {
        let capsule = ffi::PyCapsule_New(Box::into_raw(t) as *mut c_void, name(LEGACY),
                                         Some(capsule_destructor));
        PyObject::from_owned_ptr_or_err(py, capsule)
    }
}

#[pyfunction]
fn make_versioned(py: Python<'_>, n: usize, flags: u64) -> PyResult<PyObject> {
    let mut owner = new_owner(n);
    let t = Box::new(DLManagedTensorVersioned {
        version: DLPackVersion { major: 1, minor: 1 },
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete_versioned),
        flags,
        dl_tensor: tensor_of(&mut owner),
    });
    let t = Box::into_raw(t);
    unsafe {
        (*t).manager_ctx = Box::into_raw(owner) as *mut c_void;
        let capsule = ffi::PyCapsule_New(t as *mut c_void, name(VERSIONED), Some(capsule_destructor));
        PyObject::from_owned_ptr_or_err(py, capsule)
    }
}

enum Tensor {
    Legacy(*mut DLManagedTensor),
    Versioned(*mut DLManagedTensorVersioned),
}

#[pyclass(unsendable)]
struct Held {
    tensor: Tensor,
}

#[pymethods]
impl Held {
    fn total(&self) -> f64 {
        let t = unsafe {
            match self.tensor {
                Tensor::Legacy(p) => &(*p).dl_tensor,
                Tensor::Versioned(p) => &(*p).dl_tensor,
            }
        };
        let n = unsafe { *t.shape } as usize;
        let data = unsafe { std::slice::from_raw_parts(t.data as *const f64, n) };
        data.iter().sum()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        unsafe {
            match self.tensor {
                Tensor::Legacy(p) => {
                    if let Some(d) = (*p).deleter {
                        d(p)
                    }
                }
                Tensor::Versioned(p) => {
                    if let Some(d) = (*p).deleter {
                        d(p)
                    }
                }
            }
        }
    }
}

#[pyfunction]
fn consume(capsule: &PyAny) -> PyResult<Held> {
    let c = capsule.as_ptr();
    unsafe {
        if ffi::PyCapsule_IsValid(c, name(VERSIONED)) == 1 {
            let t = ffi::PyCapsule_GetPointer(c, name(VERSIONED)) as *mut DLManagedTensorVersioned;
            ffi::PyCapsule_SetName(c, name(USED_VERSIONED));
            return Ok(Held { tensor: Tensor::Versioned(t) });
        }
        if ffi::PyCapsule_IsValid(c, name(LEGACY)) == 1 {
            let t = ffi::PyCapsule_GetPointer(c, name(LEGACY)) as *mut DLManagedTensor;
            ffi::PyCapsule_SetName(c, name(USED_LEGACY));
            return Ok(Held { tensor: Tensor::Legacy(t) });
        }
    }
    Err(PyValueError::new_err("not an unconsumed DLPack capsule"))
}

#[pymodule]
fn dlpack_rs(_py: Python<'_>, m: &PyModule) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(make, m)?)?;
    m.add_function(wrap_pyfunction!(make_versioned, m)?)?;
    m.add_function(wrap_pyfunction!(consume, m)?)?;
    m.add_class::<Held>()?;
    Ok(())
}
