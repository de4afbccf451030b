//! The NCCL version installed for the system's loader: `ncclGetVersion` from `libnccl.so.2`,
//! if the loader finds one. (NCCL shipped inside a Python wheel is not on the loader path; then
//! cluster.yaml's `nccl_version` stands in.)

use crate::model::NcclVersion;

/// NCCL's version code: `X*10000 + Y*100 + Z` from 2.9 on, `X*1000 + Y*100 + Z` before.
pub(crate) fn decode(code: i32) -> Option<NcclVersion> {
    let c = u32::try_from(code).ok()?;
    if c >= 10_000 {
        Some(NcclVersion(c / 10_000, (c % 10_000) / 100, c % 100))
    } else if c >= 1_000 {
        Some(NcclVersion(c / 1_000, (c % 1_000) / 100, c % 100))
    } else {
        None
    }
}

pub(crate) fn installed_version() -> Option<NcclVersion> {
    // SAFETY: loading NCCL runs its (side-effect free) initialisers; ncclGetVersion has the
    // C signature `ncclResult_t ncclGetVersion(int *version)` in every NCCL 2.x.
    unsafe {
        let lib = libloading::Library::new("libnccl.so.2").ok()?;
        let get: libloading::Symbol<unsafe extern "C" fn(*mut std::os::raw::c_int) -> std::os::raw::c_int> =
            lib.get(b"ncclGetVersion\0").ok()?;
        let mut code: std::os::raw::c_int = 0;
        if get(&mut code) != 0 {
            return None;
        }
        decode(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn version_codes_of_both_eras() {
        assert_eq!(decode(22809), Some(NcclVersion(2, 28, 9)));
        assert_eq!(decode(2708), Some(NcclVersion(2, 7, 8)));
        assert_eq!(decode(-1), None);
        assert_eq!(decode(12), None);
    }
}
