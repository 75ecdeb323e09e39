//! Memory and network generations: what one stack (chip, package) of a DRAM generation and
//! one port of a link generation deliver. Every figure cites its source; `ASSUMPTION` marks
//! projections that no vendor has shipped.

use perfcast_core::PluginError;

/// One DRAM generation, per stack (HBM), per chip (GDDR) or per x64 package (LPDDR).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DramGeneration {
    pub name: &'static str,
    /// Peak bandwidth of one unit, GB/s.
    pub unit_bandwidth_gbs: f64,
    /// Capacity of one unit, GB.
    pub unit_capacity_gb: f64,
    /// Where the numbers come from.
    pub source: &'static str,
}

/// Built-in DRAM generations.
pub const DRAM_GENERATIONS: [DramGeneration; 8] = [
    DramGeneration {
        name: "HBM2",
        unit_bandwidth_gbs: 256.0,
        unit_capacity_gb: 8.0,
        source: "JEDEC JESD235A: 2.0 Gb/s x 1024 bits; 8-Hi x 8 Gb stacks (V100)",
    },
    DramGeneration {
        name: "HBM2e",
        unit_bandwidth_gbs: 409.6,
        unit_capacity_gb: 16.0,
        source: "JEDEC JESD235C / Samsung Flashbolt: 3.2 Gb/s x 1024 bits; 8-Hi x 16 Gb (A100 80GB: 5 stacks, 2.04 TB/s)",
    },
    DramGeneration {
        name: "HBM3",
        unit_bandwidth_gbs: 819.2,
        unit_capacity_gb: 24.0,
        source: "JEDEC JESD238 (2022): 6.4 Gb/s x 1024 bits; SK hynix 12-Hi 24 GB HBM3 (2023)",
    },
    DramGeneration {
        name: "HBM3e",
        unit_bandwidth_gbs: 1228.8,
        unit_capacity_gb: 36.0,
        source: "SK hynix / Micron HBM3E (2024): 9.6 Gb/s x 1024 bits (Micron: 9.2 Gb/s, >1.2 TB/s); 12-Hi 36 GB",
    },
    DramGeneration {
        name: "HBM4",
        unit_bandwidth_gbs: 2048.0,
        unit_capacity_gb: 64.0,
        source: "JEDEC JESD270-4 (April 2025): 8 Gb/s x 2048 bits; 16-Hi x 32 Gb = 64 GB",
    },
    DramGeneration {
        name: "HBM4e",
        unit_bandwidth_gbs: 2560.0,
        unit_capacity_gb: 64.0,
        source: "ASSUMPTION: vendor roadmaps (SK hynix, Samsung, ~2027): 10 Gb/s x 2048 bits, 16-Hi x 32 Gb",
    },
    DramGeneration {
        name: "GDDR7",
        unit_bandwidth_gbs: 112.0,
        unit_capacity_gb: 3.0,
        source: "JEDEC JESD239 GDDR7; NVIDIA RTX PRO 6000 Blackwell: 28 Gb/s x 32 bits per 24 Gb chip (512-bit clamshell: 96 GB, 1.79 TB/s)",
    },
    DramGeneration {
        name: "LPDDR5X",
        unit_bandwidth_gbs: 68.3,
        unit_capacity_gb: 32.0,
        source: "JEDEC JESD209-5B LPDDR5X-8533: 8.533 GT/s x 64 bits per package; 32 GB packages (ASSUMPTION: vendors ship 16-64 GB)",
    },
];

/// The generation called `name` (case-insensitive), or an error listing the known ones.
pub fn dram_generation(name: &str) -> Result<DramGeneration, PluginError> {
    by_name(&DRAM_GENERATIONS, |g| g.name, name, "DRAM generation")
}

/// The entry of `table` whose name (`name_of`) is `name`, ignoring case; else an error on
/// `generation` naming `what` and listing the known names.
fn by_name<T: Copy>(
    table: &[T],
    name_of: fn(&T) -> &'static str,
    name: &str,
    what: &str,
) -> Result<T, PluginError> {
    table
        .iter()
        .copied()
        .find(|g| name_of(g).eq_ignore_ascii_case(name))
        .ok_or_else(|| PluginError::Params {
            path: "generation".into(),
            message: format!(
                "unknown {what} `{name}`; known: {}",
                table.iter().map(name_of).collect::<Vec<_>>().join(", ")
            ),
        })
}

/// Kind of link a generation belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFamily {
    /// Scale-up (NVLink): bandwidth quoted per GPU with both directions summed.
    ScaleUp,
    /// Scale-out NIC: line rate per GPU, one direction.
    ScaleOut,
}

/// One link generation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkGeneration {
    pub name: &'static str,
    pub family: LinkFamily,
    /// Per GPU, one direction, GB/s.
    pub bandwidth_gbs: f64,
    pub source: &'static str,
}

/// Built-in link generations.
pub const LINK_GENERATIONS: [LinkGeneration; 12] = [
    LinkGeneration {
        name: "nvlink2",
        family: LinkFamily::ScaleUp,
        bandwidth_gbs: 150.0,
        source: "NVIDIA V100 datasheet: NVLink 2, 300 GB/s per GPU bidirectional",
    },
    LinkGeneration {
        name: "nvlink3",
        family: LinkFamily::ScaleUp,
        bandwidth_gbs: 300.0,
        source: "NVIDIA A100 datasheet: NVLink 3, 600 GB/s per GPU bidirectional",
    },
    LinkGeneration {
        name: "nvlink4",
        family: LinkFamily::ScaleUp,
        bandwidth_gbs: 450.0,
        source: "NVIDIA H100 datasheet: NVLink 4, 900 GB/s per GPU bidirectional",
    },
    LinkGeneration {
        name: "nvlink5",
        family: LinkFamily::ScaleUp,
        bandwidth_gbs: 900.0,
        source: "NVIDIA B200 / GB200 NVL72: NVLink 5, 1.8 TB/s per GPU bidirectional",
    },
    LinkGeneration {
        name: "nvlink6",
        family: LinkFamily::ScaleUp,
        bandwidth_gbs: 1800.0,
        source: "NVIDIA GTC 2025 Vera Rubin announcement: NVLink 6, 3.6 TB/s per GPU bidirectional",
    },
    LinkGeneration {
        name: "nvlink7",
        family: LinkFamily::ScaleUp,
        bandwidth_gbs: 3600.0,
        source: "ASSUMPTION: NVLink has doubled per generation since NVLink 4; one more doubling (7.2 TB/s bidirectional)",
    },
    LinkGeneration {
        name: "edr",
        family: LinkFamily::ScaleOut,
        bandwidth_gbs: 12.5,
        source: "InfiniBand EDR, 100 Gb/s per port (IBTA)",
    },
    LinkGeneration {
        name: "hdr",
        family: LinkFamily::ScaleOut,
        bandwidth_gbs: 25.0,
        source: "InfiniBand HDR, 200 Gb/s (ConnectX-6, DGX A100)",
    },
    LinkGeneration {
        name: "ndr",
        family: LinkFamily::ScaleOut,
        bandwidth_gbs: 50.0,
        source: "InfiniBand NDR, 400 Gb/s (ConnectX-7, DGX H100/B200)",
    },
    LinkGeneration {
        name: "xdr",
        family: LinkFamily::ScaleOut,
        bandwidth_gbs: 100.0,
        source: "InfiniBand XDR, 800 Gb/s (ConnectX-8, Quantum-X800, GTC 2024)",
    },
    LinkGeneration {
        name: "1.6t",
        family: LinkFamily::ScaleOut,
        bandwidth_gbs: 200.0,
        source: "NVIDIA ConnectX-9 SuperNIC, 1.6 Tb/s per GPU (GTC 2025, Vera Rubin)",
    },
    LinkGeneration {
        name: "3.2t",
        family: LinkFamily::ScaleOut,
        bandwidth_gbs: 400.0,
        source: "ASSUMPTION: one more doubling of the per-GPU NIC rate (3.2 Tb/s)",
    },
];

/// The link generation called `name` (case-insensitive), or an error listing the known ones.
pub fn link_generation(name: &str) -> Result<LinkGeneration, PluginError> {
    by_name(&LINK_GENERATIONS, |g| g.name, name, "link generation")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hbm_generations_grow_and_match_shipped_devices() {
        let hbm: Vec<_> = DRAM_GENERATIONS
            .iter()
            .filter(|g| g.name.starts_with("HBM"))
            .collect();
        for w in hbm.windows(2) {
            assert!(w[1].unit_bandwidth_gbs > w[0].unit_bandwidth_gbs);
            assert!(w[1].unit_capacity_gb >= w[0].unit_capacity_gb);
        }
        // A100 80GB: five HBM2e stacks = 2.048 TB/s peak vs 2.039 quoted.
        let g = dram_generation("hbm2E").unwrap();
        assert!((5.0 * g.unit_bandwidth_gbs - 2039.0).abs() / 2039.0 < 0.01);
        assert!(dram_generation("HBM9")
            .unwrap_err()
            .to_string()
            .contains("HBM3e"));
    }

    #[test]
    fn link_generations_grow_per_family() {
        for fam in [LinkFamily::ScaleUp, LinkFamily::ScaleOut] {
            let v: Vec<f64> = LINK_GENERATIONS
                .iter()
                .filter(|g| g.family == fam)
                .map(|g| g.bandwidth_gbs)
                .collect();
            assert!(v.windows(2).all(|w| w[1] > w[0]), "{v:?}");
        }
        assert!(link_generation("nvlink9")
            .unwrap_err()
            .to_string()
            .contains("nvlink5"));
    }
}
