//! Facade over every built-in plugin crate.
//!
//! Built-ins register with `inventory`; a crate that no code names is not linked and its
//! registrations silently vanish. Hosts call [`registry`] (or at least name this crate), and
//! this crate names each plugin crate, so linking this one links them all.

pub use perfcast_plugin_gpu as gpu;
pub use perfcast_plugin_memory as memory;
pub use perfcast_plugin_network as network;
pub use perfcast_plugin_parallel as parallel;
pub use perfcast_plugin_recompute as recompute;
pub use perfcast_plugin_schedule as schedule;
pub use perfcast_plugin_technology as technology;

use perfcast_core::registry::{Registry, RegistryError};

/// A registry holding every built-in plugin.
pub fn registry() -> Result<Registry, RegistryError> {
    // Naming the crates here keeps them linked even under aggressive dead-code elimination.
    let _ = (
        std::any::type_name::<gpu::Gpu>(),
        std::any::type_name::<memory::Tier>(),
        std::any::type_name::<network::Link>(),
        std::any::type_name::<parallel::Tensor>(),
        std::any::type_name::<technology::GenLink>(),
    );
    Registry::with_builtins()
}

#[cfg(test)]
mod tests {
    use perfcast_core::Category;

    #[test]
    fn every_builtin_is_registered() {
        let r = super::registry().unwrap();
        assert!(r.contains(Category::ComputeUnit, "gpu"));
        for m in ["hbm", "dram", "sram", "host-dram"] {
            assert!(r.contains(Category::MemoryTier, m), "{m}");
        }
        for n in ["nvlink", "infiniband", "roce", "torus"] {
            assert!(r.contains(Category::Interconnect, n), "{n}");
        }
        for s in [
            "tensor", "sequence", "context", "pipeline", "data", "zero", "fsdp",
        ] {
            assert!(r.contains(Category::ParallelStrategy, s), "{s}");
        }
        for p in ["none", "selective", "full"] {
            assert!(r.contains(Category::RecomputePolicy, p), "{p}");
        }
        for s in ["gpipe", "1f1b", "interleaved-1f1b"] {
            assert!(r.contains(Category::PipelineSchedule, s), "{s}");
        }
    }
}
