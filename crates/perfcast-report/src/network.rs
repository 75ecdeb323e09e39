//! The network section of `perfcast predict`'s report (the scenario's
//! [`NetworkUsed`](perfcast_scenario::network::NetworkUsed)): as a table and as CSV rows.

use perfcast_scenario::network::NetworkUsed;
use std::fmt::Write as _;

/// The table's section on the network: the levels, the topology's link classes, what it
/// derived and its price.
pub fn table(n: &NetworkUsed) -> String {
    let mut s = String::from("Network\n");
    let _ = writeln!(s, "  topology                   {}", n.topology_label());
    let _ = writeln!(
        s,
        "  strategies                 {}",
        n.strategies.join(", ")
    );
    for (i, l) in n.levels.iter().enumerate() {
        let domain = match l.domain_size {
            Some(d) => format!("domains of {d} devices"),
            None => "no domain limit".to_string(),
        };
        let _ = writeln!(
            s,
            "  level {i}                    {}: {domain}, {:.1} GB/s achievable per device and direction",
            l.kind, l.bandwidth_gbs
        );
    }
    for l in &n.links {
        let _ = writeln!(
            s,
            "  links {:<20} {} links of {:.1} GB/s achievable per direction",
            l.name,
            l.count,
            l.bandwidth.0 / 1e9
        );
    }
    if let Some(obj) = n.derived.as_object() {
        let parts: Vec<String> = obj.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        if !parts.is_empty() {
            let _ = writeln!(s, "  derived                    {}", parts.join(", "));
        }
    }
    match (&n.cost, n.cost_usd) {
        (Some(c), Some(usd)) => {
            let _ = writeln!(
                s,
                "  cost                       ${:.2}M: {} switches, {} switch ports, {} optics (the topology's price table)",
                usd / 1e6,
                c.switches,
                c.switch_ports,
                c.optics
            );
        }
        _ => {
            let _ = writeln!(
                s,
                "  cost                       not priced (the topology has no price table)"
            );
        }
    }
    s
}

/// The CSV rows of [`table`]: `network.topology`, `network.component`, `network.strategies`,
/// the levels, the link classes and the cost.
pub fn csv(n: &NetworkUsed) -> String {
    let cell = perfcast_render::csv_cell;
    let mut s = format!("network.topology,{},\n", cell(&n.topology));
    let _ = writeln!(
        s,
        "network.component,{},",
        cell(n.component.as_deref().unwrap_or(""))
    );
    let _ = writeln!(s, "network.strategies,{},", cell(&n.strategies.join(" ")));
    for (i, l) in n.levels.iter().enumerate() {
        let _ = writeln!(s, "network.level{i}.kind,{},", cell(&l.kind));
        let _ = writeln!(s, "network.level{i}.bandwidth,{},GB/s", l.bandwidth_gbs);
    }
    for l in &n.links {
        let _ = writeln!(s, "network.links.{}.count,{},", cell(&l.name), l.count);
    }
    if let Some(usd) = n.cost_usd {
        let _ = writeln!(s, "network.cost,{usd},USD");
    }
    s
}
