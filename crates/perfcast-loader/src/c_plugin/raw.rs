//! The raw side of the C boundary that every category shares: reading a plugin's structs up
//! to their `struct_size`, its strings and error buffers, calling a function that reports
//! through a status code, and owning the instances `create` returned.

use crate::call::CallError;
use crate::LoadError;
use perfcast_abi::codes::OK;
use perfcast_core::PluginError;
use std::ffi::{c_char, c_void, CStr};
use std::mem::{size_of, MaybeUninit};
use std::path::Path;

pub(crate) const ERR_CAP: usize = 1024;

/// Copy the first `min(struct_size, size_of::<T>())` bytes of `*p` into a zeroed `T`.
///
/// # Safety
/// `p` must point to at least `struct_size` readable bytes, and `T` must be valid when zeroed
/// (integers, raw pointers and `Option<fn>` only).
pub(crate) unsafe fn read_prefix<T: Copy>(p: *const T, struct_size: usize) -> T {
    let mut out = MaybeUninit::<T>::zeroed();
    let n = struct_size.min(size_of::<T>());
    std::ptr::copy_nonoverlapping(p as *const u8, out.as_mut_ptr() as *mut u8, n);
    out.assume_init()
}

/// The `struct_size` at the start of a plugin struct.
pub(crate) unsafe fn struct_size<T>(p: *const T) -> usize {
    std::ptr::read_unaligned(p as *const u32) as usize
}

pub(crate) unsafe fn c_string(p: *const c_char) -> Option<String> {
    (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
}

/// The message a plugin wrote into an error buffer (bounded; never trusts the NUL).
pub(crate) fn read_err(buf: &[u8], code: i32) -> String {
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let s = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    if s.is_empty() {
        format!("error code {code} without a message")
    } else {
        s
    }
}

/// Call `f(err, err_cap)` and turn a non-OK status into a `CallError`.
pub(crate) fn call(f: impl FnOnce(*mut c_char, usize) -> i32) -> Result<(), CallError> {
    let mut buf = [0u8; ERR_CAP];
    let rc = f(buf.as_mut_ptr() as *mut c_char, ERR_CAP);
    if rc == OK {
        Ok(())
    } else {
        Err(CallError {
            code: rc,
            path: String::new(),
            message: read_err(&buf, rc),
        })
    }
}

/// A created instance and the function that frees it.
pub(crate) struct Instance {
    pub(crate) this: *mut c_void,
    pub(crate) destroy: Option<unsafe extern "C" fn(*mut c_void)>,
}

// SAFETY: the header's contract requires instances to be immutable after `create` and every
// function to be callable concurrently from any thread.
unsafe impl Send for Instance {}
unsafe impl Sync for Instance {}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(d) = self.destroy {
            // SAFETY: called once, with the pointer `create` returned.
            unsafe { d(self.this) }
        }
    }
}

pub(crate) fn invalid(path: &Path, message: String) -> LoadError {
    LoadError::Invalid {
        path: path.to_path_buf(),
        message,
    }
}

/// The vtable of component `cname`, read up to its `struct_size`, which must cover the
/// `layout` layout (`min` bytes) of a `what` vtable.
///
/// # Safety
/// `vp` must be the component's (non-NULL) vtable.
pub(crate) unsafe fn read_vtable<T: Copy>(
    path: &Path,
    cname: &str,
    vp: *const T,
    min: usize,
    what: &str,
    layout: &str,
) -> Result<T, LoadError> {
    let vsize = struct_size(vp);
    if vsize < min {
        return Err(invalid(
            path,
            format!("`{cname}`: {what} vtable struct_size {vsize} is below the {layout} layout"),
        ));
    }
    Ok(read_prefix(vp, vsize))
}

/// A required function the vtable of `cname` lacks.
pub(crate) fn no_function(path: &Path, cname: &str, function: &str) -> LoadError {
    invalid(
        path,
        format!("`{cname}`: vtable has no {function} function"),
    )
}

/// A count a plugin wrote that is more than the host's array of `cap` holds.
pub(crate) fn too_many(what: &str, n: usize, cap: usize) -> CallError {
    CallError {
        code: perfcast_abi::codes::ERR_FAILED,
        path: String::new(),
        message: format!("{n} {what} do not fit the host's array of {cap}"),
    }
}

/// Creates an instance of a component from its parameters (the component's `create`).
pub(crate) trait NewInstance:
    Fn(&serde_json::Value) -> Result<Instance, PluginError> + Send + Sync + 'static
{
}
impl<F> NewInstance for F where
    F: Fn(&serde_json::Value) -> Result<Instance, PluginError> + Send + Sync + 'static
{
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_abi::c::{v1_0, PcComputeUnitVtable};

    #[test]
    fn error_buffers_are_bounded() {
        assert_eq!(read_err(b"bad key `x`\0garbage", 1), "bad key `x`");
        assert_eq!(read_err(&[b'a'; 4], 2), "aaaa");
        assert!(read_err(&[0; 8], 2).contains("code 2"));
    }

    #[test]
    fn fields_beyond_struct_size_read_as_absent() {
        // A 1.0 vtable followed by bytes that are not the plugin's (0xAB garbage).
        let mut buf = [0xABu8; size_of::<PcComputeUnitVtable>()];
        let size = v1_0::compute_unit_vtable_size();
        buf[..4].copy_from_slice(&(size as u32).to_ne_bytes());
        let p = buf.as_ptr() as *const PcComputeUnitVtable;
        // SAFETY: `buf` holds `size` bytes; only those are copied.
        let v = unsafe { read_prefix(p, struct_size(p)) };
        assert!(v.peak.is_some() && v.launch_overhead.is_some());
        assert!(v.gemm_tile.is_none() && v.op_time.is_none());
        // A larger (newer) struct_size copies only what this host knows.
        buf[..4].copy_from_slice(&1000u32.to_ne_bytes());
        let v = unsafe { read_prefix(p, struct_size(p)) };
        assert!(v.op_time.is_some());
    }
}
