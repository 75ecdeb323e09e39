//! The price table topologies cost their networks with (`[components.NAME.prices]`).
//!
//! Counted: switches (priced per port, so a switch of another radix scales), optical
//! transceivers (one at each end of every optical link: NIC to leaf, switch to switch, torus
//! and dragonfly global links), fibres, and NVL72 NVLink switch trays; copper links inside a
//! rack or a dragonfly group are counted as cables only. NICs are not counted (every
//! topology has one per GPU).
//!
//! Defaults. No vendor publishes list prices for these parts and no public price list was
//! found to cite, so the defaults are this project's round planning assumptions, not quotes:
//! a 400 Gb/s switch port $400 (a 64-port switch $25,600), a 400 Gb/s optical transceiver
//! $600, a fibre $50, a copper cable $100, an NVL72 NVLink switch tray $50,000. What a
//! comparison of topologies reads is the counts (switches, ports, optics: exact for the
//! wiring) and the relative cost; set the table to your own quotes for absolute figures.

use perfcast_core::params::non_negative;
use perfcast_core::topology::{CostItem, NetworkCost};
use perfcast_core::PluginError;
use serde::Deserialize;

/// Unit prices, US dollars.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Prices {
    /// One switch port (400 Gb/s class).
    pub switch_port_usd: f64,
    /// One optical transceiver.
    pub optic_usd: f64,
    /// One fibre (per optical link).
    pub fiber_usd: f64,
    /// One copper cable.
    pub copper_usd: f64,
    /// One NVLink switch tray (NVL72: 9 per rack).
    pub nvlink_switch_tray_usd: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Prices {
            switch_port_usd: 400.0,
            optic_usd: 600.0,
            fiber_usd: 50.0,
            copper_usd: 100.0,
            nvlink_switch_tray_usd: 50_000.0,
        }
    }
}

impl Prices {
    /// Every price finite and >= 0 (errors name `prices.KEY`).
    pub fn check(&self) -> Result<(), PluginError> {
        for (k, v) in [
            ("switch_port_usd", self.switch_port_usd),
            ("optic_usd", self.optic_usd),
            ("fiber_usd", self.fiber_usd),
            ("copper_usd", self.copper_usd),
            ("nvlink_switch_tray_usd", self.nvlink_switch_tray_usd),
        ] {
            non_negative(&format!("prices.{k}"), v)?;
        }
        Ok(())
    }
}

/// A bill being assembled.
#[derive(Debug, Default)]
pub struct Bill {
    cost: NetworkCost,
}

impl Bill {
    fn item(&mut self, item: &str, count: f64, unit_usd: f64) {
        if count > 0.0 {
            self.cost.items.push(CostItem {
                item: item.to_string(),
                count,
                unit_usd,
            });
        }
    }

    /// `n` switches of `radix` ports.
    pub fn switches(&mut self, p: &Prices, n: u64, radix: u64) {
        self.cost.switches += n as f64;
        self.cost.switch_ports += (n * radix) as f64;
        self.item(
            &format!("switch ({radix} ports)"),
            n as f64,
            p.switch_port_usd * radix as f64,
        );
    }

    /// `n` optical links: a transceiver at each end and a fibre.
    pub fn links(&mut self, p: &Prices, n: u64) {
        self.cost.optics += 2.0 * n as f64;
        self.item("optical transceiver", 2.0 * n as f64, p.optic_usd);
        self.item("fibre", n as f64, p.fiber_usd);
    }

    /// `n` copper cables.
    pub fn copper(&mut self, p: &Prices, n: u64) {
        self.item("copper cable", n as f64, p.copper_usd);
    }

    /// `n` NVLink switch trays.
    pub fn nvlink_trays(&mut self, p: &Prices, n: u64) {
        self.cost.switches += n as f64;
        self.item("NVLink switch tray", n as f64, p.nvlink_switch_tray_usd);
    }

    /// The bill.
    pub fn finish(self) -> NetworkCost {
        self.cost
    }
}
