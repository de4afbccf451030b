//! PCI identities and PCIe link facts: bus ids (BDF), link generations, widths and bandwidth.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A PCI function address, always printed as NCCL and sysfs print it: `0000:81:00.0`
/// (lower case, 4-digit domain). NVML's 8-digit domain (`00000000:81:00.0`) and upper case
/// are accepted on input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bdf {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a PCI bus id (expected DDDD:BB:DD.F, e.g. 0000:81:00.0)")]
pub struct BdfError(pub String);

impl FromStr for Bdf {
    type Err = BdfError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BdfError(s.to_string());
        let (rest, function) = s.rsplit_once('.').ok_or_else(bad)?;
        let mut parts = rest.split(':');
        let (domain, bus, device) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(d), Some(b), Some(dev), None) => (d, b, dev),
            (Some(b), Some(dev), None, None) => ("0", b, dev),
            _ => return Err(bad()),
        };
        let hex = |t: &str, max_len: usize| -> Result<u32, BdfError> {
            if t.is_empty() || t.len() > max_len || !t.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad());
            }
            u32::from_str_radix(t, 16).map_err(|_| bad())
        };
        let device = hex(device, 2)?;
        let function = hex(function, 1)?;
        if device > 0x1f || function > 7 {
            return Err(bad());
        }
        Ok(Bdf {
            domain: hex(domain, 8)?,
            bus: hex(bus, 2)? as u8,
            device: device as u8,
            function: function as u8,
        })
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl Serialize for Bdf {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Bdf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// PCI class codes topo-tune cares about (upper 16 bits of the 24-bit class).
pub(crate) mod class {
    pub(crate) const VGA: u16 = 0x0300;
    pub(crate) const GPU_3D: u16 = 0x0302;
    pub(crate) const INFINIBAND: u16 = 0x0207;
    pub(crate) const PCI_BRIDGE: u16 = 0x0604;
    pub(crate) const NVSWITCH: u16 = 0x0680;
}

pub(crate) const VENDOR_NVIDIA: u16 = 0x10de;

/// Is this PCI function an NVIDIA GPU (display or 3D controller)?
pub(crate) fn is_nvidia_gpu(vendor: u16, class_id: u16) -> bool {
    vendor == VENDOR_NVIDIA && (class_id == class::VGA || class_id == class::GPU_3D)
}

/// PCIe generation from the sysfs speed text: `32.0 GT/s PCIe` (kernel ≥ 5.7) or `8 GT/s`
/// (older kernels). `Unknown` and anything unreadable give `None`.
pub(crate) fn gen_from_speed(text: &str) -> Option<u8> {
    let gts: f64 = text.split_whitespace().next()?.parse().ok()?;
    let gen = match gts {
        x if (x - 2.5).abs() < 0.01 => 1,
        x if (x - 5.0).abs() < 0.01 => 2,
        x if (x - 8.0).abs() < 0.01 => 3,
        x if (x - 16.0).abs() < 0.01 => 4,
        x if (x - 32.0).abs() < 0.01 => 5,
        x if (x - 64.0).abs() < 0.01 => 6,
        x if (x - 128.0).abs() < 0.01 => 7,
        _ => return None,
    };
    Some(gen)
}

/// Usable bytes per second per lane (GB/s, one direction) after line coding, as hwloc computes it.
pub(crate) fn lane_gbps(gen: u8) -> Option<f64> {
    Some(match gen {
        1 => 0.25,
        2 => 0.5,
        3 => 8.0 * 128.0 / 130.0 / 8.0,
        4 => 16.0 * 128.0 / 130.0 / 8.0,
        5 => 32.0 * 128.0 / 130.0 / 8.0,
        6 => 64.0 * 242.0 / 256.0 / 8.0,
        7 => 128.0 * 242.0 / 256.0 / 8.0,
        _ => return None,
    })
}

/// A PCIe link as read: current and maximum generation and width, and what that carries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PcieLink {
    pub current_gen: Option<u8>,
    pub current_width: Option<u8>,
    pub max_gen: Option<u8>,
    pub max_width: Option<u8>,
    /// Current one-direction bandwidth in GB/s (from gen × width, or hwloc's figure).
    pub bandwidth_gbps: Option<f64>,
}

/// How a link falls short of what it could do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Degradation {
    Width,
    Speed,
    WidthAndSpeed,
}

impl PcieLink {
    pub fn from_gen_width(
        current_gen: Option<u8>,
        current_width: Option<u8>,
        max_gen: Option<u8>,
        max_width: Option<u8>,
    ) -> Self {
        let bandwidth_gbps = match (current_gen.and_then(lane_gbps), current_width) {
            (Some(lane), Some(w)) if w > 0 => Some(round2(lane * f64::from(w))),
            _ => None,
        };
        PcieLink {
            current_gen,
            current_width,
            max_gen,
            max_width,
            bandwidth_gbps,
        }
    }

    /// Is the link running below what both ends can do? Unknown values never count as degraded.
    pub fn degradation(&self) -> Option<Degradation> {
        let narrow = matches!((self.current_width, self.max_width), (Some(c), Some(m)) if c < m);
        let slow = matches!((self.current_gen, self.max_gen), (Some(c), Some(m)) if c < m);
        match (narrow, slow) {
            (true, true) => Some(Degradation::WidthAndSpeed),
            (true, false) => Some(Degradation::Width),
            (false, true) => Some(Degradation::Speed),
            (false, false) => None,
        }
    }

    /// `Gen5 x16`, `Gen4 x8 (max Gen5 x16)`, or `?` parts where unknown.
    pub fn describe(&self) -> String {
        let part = |g: Option<u8>, w: Option<u8>| {
            let g = g.map_or("Gen?".to_string(), |g| format!("Gen{g}"));
            let w = w.map_or("x?".to_string(), |w| format!("x{w}"));
            format!("{g} {w}")
        };
        let current = part(self.current_gen, self.current_width);
        if self.degradation().is_some() {
            format!("{current} (max {})", part(self.max_gen, self.max_width))
        } else if self.current_gen.is_none() && self.current_width.is_none() {
            match self.bandwidth_gbps {
                Some(bw) => format!("{bw:.1} GB/s"),
                None => "unknown".to_string(),
            }
        } else {
            current
        }
    }
}

pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bdf_forms() {
        let b: Bdf = "00000000:00:06.0".parse().unwrap();
        assert_eq!(b.to_string(), "0000:00:06.0");
        let b: Bdf = "0000:AB:1F.7".parse().unwrap();
        assert_eq!(b.to_string(), "0000:ab:1f.7");
        assert_eq!("81:00.0".parse::<Bdf>().unwrap().to_string(), "0000:81:00.0");
        for bad in [
            "",
            "0000:00:06",
            "0000:00:20.0",
            "0000:00:06.8",
            "zz:00.0",
            "0:0:0:0.0",
            "0000:100:00.0",
        ] {
            assert!(bad.parse::<Bdf>().is_err(), "{bad}");
        }
    }

    #[test]
    fn speed_text_of_both_kernel_eras() {
        assert_eq!(gen_from_speed("32.0 GT/s PCIe\n"), Some(5));
        assert_eq!(gen_from_speed("8 GT/s"), Some(3));
        assert_eq!(gen_from_speed("2.5 GT/s PCIe"), Some(1));
        assert_eq!(gen_from_speed("Unknown"), None);
        assert_eq!(gen_from_speed(""), None);
    }

    #[test]
    fn x8_gpu_is_degraded_and_hwloc_bandwidth_matches() {
        let link = PcieLink::from_gen_width(Some(5), Some(8), Some(5), Some(16));
        assert_eq!(link.degradation(), Some(Degradation::Width));
        assert_eq!(link.bandwidth_gbps, Some(31.51));
        assert_eq!(link.describe(), "Gen5 x8 (max Gen5 x16)");
        let full = PcieLink::from_gen_width(Some(5), Some(16), Some(5), Some(16));
        assert_eq!(full.degradation(), None);
        assert_eq!(full.bandwidth_gbps, Some(63.02));
        assert_eq!(PcieLink::default().degradation(), None);
    }

    proptest! {
        #[test]
        fn bdf_roundtrip(d in 0u32..0x10000, b: u8, dev in 0u8..32, f in 0u8..8) {
            let bdf = Bdf { domain: d, bus: b, device: dev, function: f };
            prop_assert_eq!(bdf.to_string().parse::<Bdf>().unwrap(), bdf);
        }
        #[test]
        fn bdf_parse_never_panics(s in "\\PC{0,24}") { let _ = s.parse::<Bdf>(); }
    }
}
