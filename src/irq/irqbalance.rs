//! irqbalance: is it running, does it leave mlx5 alone, and the ban topo-tune can write
//! (`--banmod=mlx5`, irqbalance >= 1.1.0: bans every IRQ whose driver or name contains mlx5;
//! research/irq.md §3.2). topo-tune never stops irqbalance silently.

use crate::probe::fsroot::FsRoot;

use crate::model::files::IRQBALANCE_CONFIGS as CONFIG_FILES;
pub const BAN: &str = "--banmod=mlx5";
/// The most an irqbalance config may hold (a few lines in practice).
pub const CONFIG_LIMIT: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Status {
    pub running: bool,
    /// The config file found (or the one a ban would create).
    pub config: String,
    pub bans_mlx5: bool,
}

pub fn status(fs: &FsRoot) -> Status {
    let running = fs
        .list("/proc")
        .iter()
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        .any(|pid| fs.read_trimmed(&format!("/proc/{pid}/comm")).as_deref() == Some("irqbalance"));
    let config = CONFIG_FILES
        .iter()
        .find(|f| fs.exists(f))
        .copied()
        .unwrap_or(CONFIG_FILES[0])
        .to_string();
    let text = fs.read(&config).unwrap_or_default();
    let bans_mlx5 = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .any(|l| l.contains("--banmod=mlx5") || l.contains("-m mlx5") || l.contains("--banmod mlx5"));
    Status {
        running,
        config,
        bans_mlx5,
    }
}

/// The config with `--banmod=mlx5` added to IRQBALANCE_ARGS (created if absent).
pub fn with_ban(text: &str) -> String {
    let mut done = false;
    let mut out: Vec<String> = text
        .lines()
        .map(|l| {
            let t = l.trim_start();
            if !done && (t.starts_with("IRQBALANCE_ARGS=") || t.starts_with("OPTIONS=")) {
                done = true;
                let (key, val) = t.split_once('=').unwrap_or((t, ""));
                let inner = val.trim().trim_matches('"');
                let joined = if inner.is_empty() {
                    BAN.to_string()
                } else {
                    format!("{inner} {BAN}")
                };
                format!("{key}=\"{joined}\"")
            } else {
                l.to_string()
            }
        })
        .collect();
    if !done {
        out.push("# Added by topo-tune irq-pin --irqbalance ban: keep irqbalance off mlx5 interrupts.".into());
        out.push(format!("IRQBALANCE_ARGS=\"{BAN}\""));
    }
    out.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn ban_is_added_once_to_existing_args() {
        assert_eq!(
            with_ban("#IRQBALANCE_ONESHOT=\nIRQBALANCE_ARGS=\"--policyscript=/x\"\n"),
            "#IRQBALANCE_ONESHOT=\nIRQBALANCE_ARGS=\"--policyscript=/x --banmod=mlx5\"\n"
        );
        assert_eq!(with_ban(""), "# Added by topo-tune irq-pin --irqbalance ban: keep irqbalance off mlx5 interrupts.\nIRQBALANCE_ARGS=\"--banmod=mlx5\"\n");
    }
}
