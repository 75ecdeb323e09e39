//! The link technologies a topology wires: the scale-up domain (`system.network[0]`) and the
//! NIC (the last level), read from the system's levels.

use perfcast_core::{Interconnect, PluginError};
use std::sync::Arc;

/// One link technology as the algorithms use it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tech {
    /// Achievable bandwidth per device, one direction, B/s.
    pub bw: f64,
    /// Fixed cost of one collective on it, s ([`Interconnect::collective_overhead`]).
    pub overhead: f64,
    /// Latency of one algorithm step on it, s ([`Interconnect::latency`]).
    pub hop: f64,
}

impl Tech {
    fn of(level: &dyn Interconnect) -> Tech {
        Tech {
            bw: level.bandwidth().0,
            overhead: level.collective_overhead().0,
            hop: level.latency().0,
        }
    }
}

/// The system's links: devices per scale-up domain, the domain's links, and the NIC (none
/// when one domain holds every device).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Links {
    /// Devices per scale-up domain (a node, an NVL72 rack).
    pub domain: u64,
    /// The scale-up links of one device.
    pub up: Tech,
    /// One device's NIC (the outermost level).
    pub nic: Option<Tech>,
}

/// The links of `network` for `devices` devices: level 0 is the scale-up domain, the last
/// level the NIC. A topology needs at least one level.
pub fn links(
    plugin: &str,
    network: &[Arc<dyn Interconnect>],
    devices: u64,
) -> Result<Links, PluginError> {
    let Some(first) = network.first() else {
        return Err(PluginError::Failed {
            plugin: plugin.to_string(),
            message: "needs at least one network level in system.network (the scale-up \
                      domain, then the NIC)"
                .into(),
        });
    };
    let domain = (first.domain_size() as u64).max(1);
    let up = Tech::of(first.as_ref());
    let nic = if domain >= devices.max(1) {
        None
    } else if network.len() >= 2 {
        network.last().map(|l| Tech::of(l.as_ref()))
    } else {
        return Err(PluginError::Failed {
            plugin: plugin.to_string(),
            message: format!(
                "{devices} devices do not fit in one scale-up domain of {domain} \
                 (system.network[0], `{}`) and system.network has no NIC level after it",
                first.kind()
            ),
        });
    };
    Ok(Links { domain, up, nic })
}

/// The NIC, or an error naming the topology (a group that leaves its domain needs one).
pub fn nic(plugin: &str, l: &Links) -> Result<Tech, PluginError> {
    l.nic.ok_or_else(|| PluginError::Failed {
        plugin: plugin.to_string(),
        message: "a group spans several scale-up domains but the system has no NIC level".into(),
    })
}
