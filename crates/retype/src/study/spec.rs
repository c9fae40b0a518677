//! Workload and policy names on the command line.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use strum::{Display, EnumString, IntoStaticStr, VariantArray};

use anyhow::{bail, Context};
use retype_core::mm::slab::WatermarkRule;
use retype_core::mm::{Layout, PolicyKind};
use retype_core::workload::uniform::UniformParams;

/// A workload named on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkloadSpec {
    /// `uniform:seed=S,ops=N,free=F`
    Uniform(UniformParams),
    /// `app:hello|timer|fibonacci|mltest`
    App(App),
    /// `seq:1|2|3`
    Seq(usize),
    /// `log:PATH`, a CantripOS log.
    Log(PathBuf),
    /// `script:PATH`, a request script (see `retype_core::workload::script`).
    Script(PathBuf),
}

/// Seed 000's standalone applications, as their request scripts in
/// `traces/cantrip/apps` name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Display, EnumString, IntoStaticStr, VariantArray)]
#[strum(serialize_all = "lowercase")]
pub enum App {
    Hello,
    Timer,
    Fibonacci,
    Mltest,
}

const WORKLOAD_HELP: &str = "expected uniform:seed=S,ops=N,free=F, app:hello|timer|fibonacci|mltest, seq:1|2|3, log:PATH or script:PATH";

impl FromStr for WorkloadSpec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        let Some((kind, arg)) = s.split_once(':') else {
            bail!("unknown workload {s:?}: {WORKLOAD_HELP}");
        };
        Ok(match kind {
            "uniform" => WorkloadSpec::Uniform(
                parse_uniform(arg).with_context(|| format!("workload {s:?}"))?,
            ),
            "app" => WorkloadSpec::App(
                crate::names::one_of("application", arg)
                    .with_context(|| format!("workload {s:?}"))?,
            ),
            "seq" => match arg {
                "1" | "2" | "3" => WorkloadSpec::Seq(arg.parse()?),
                _ => bail!("unknown sequence {arg:?}: seed 000 has sequences 1, 2 and 3"),
            },
            "log" if !arg.is_empty() => WorkloadSpec::Log(arg.into()),
            "script" if !arg.is_empty() => WorkloadSpec::Script(arg.into()),
            _ => bail!("unknown workload {s:?}: {WORKLOAD_HELP}"),
        })
    }
}

fn parse_uniform(arg: &str) -> anyhow::Result<UniformParams> {
    let mut p = UniformParams {
        seed: 42,
        ops: 1000,
        free_percent: 48,
    };
    for kv in arg.split(',').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("{kv:?} is not key=value"))?;
        let n: u64 = v
            .parse()
            .with_context(|| format!("{k}={v:?} is not a number"))?;
        match k {
            "seed" => p.seed = n,
            "ops" => p.ops = u32::try_from(n).context("ops must fit in 32 bits")?,
            "free" if n <= 100 => p.free_percent = n as u32,
            "free" => bail!("free={n} is not a percentage (0..=100)"),
            _ => bail!("unknown parameter {k:?} (seed, ops, free)"),
        }
    }
    Ok(p)
}

impl fmt::Display for WorkloadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkloadSpec::Uniform(p) => write!(
                f,
                "uniform:seed={},ops={},free={}",
                p.seed, p.ops, p.free_percent
            ),
            WorkloadSpec::App(a) => write!(f, "app:{a}"),
            WorkloadSpec::Seq(n) => write!(f, "seq:{n}"),
            WorkloadSpec::Log(p) => write!(f, "log:{}", p.display()),
            WorkloadSpec::Script(p) => write!(f, "script:{}", p.display()),
        }
    }
}

/// A placement policy and the watermark rule it runs under: `NAME` or
/// `NAME:lifted`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicySpec {
    pub kind: PolicyKind,
    pub rule: WatermarkRule,
}

impl PolicySpec {
    pub const fn kept(kind: PolicyKind) -> PolicySpec {
        PolicySpec {
            kind,
            rule: WatermarkRule::Kept,
        }
    }

    /// Every policy under seL4's rule.
    pub fn all() -> Vec<PolicySpec> {
        PolicyKind::ALL
            .iter()
            .map(|&k| PolicySpec::kept(k))
            .collect()
    }
}

impl FromStr for PolicySpec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        let (name, rule) = match s.split_once(':') {
            Some((n, "lifted")) => (n, WatermarkRule::Lifted),
            Some((_, other)) => bail!("unknown watermark rule {other:?} in {s:?} (only :lifted)"),
            None => (s, WatermarkRule::Kept),
        };
        let kind = crate::names::one_of("policy", name)?;
        Ok(PolicySpec { kind, rule })
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rule {
            WatermarkRule::Kept => write!(f, "{}", self.kind),
            WatermarkRule::Lifted => write!(f, "{}:lifted", self.kind),
        }
    }
}

/// `--policy`: a comma-separated list; `all` stands for every policy under
/// the kept rule. A policy named twice runs once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policies(pub Vec<PolicySpec>);

impl FromStr for Policies {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        crate::names::parse_list(s, PolicySpec::all, str::parse).map(Policies)
    }
}

/// `--workload`: a comma-separated list of workloads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workloads(pub Vec<WorkloadSpec>);

impl FromStr for Workloads {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        // clap prints an error's outermost message only: give it the whole chain.
        parse_workloads(s)
            .map(Workloads)
            .map_err(|e| anyhow::anyhow!("{e:#}"))
    }
}

/// Splits a `--workload` list on commas that start a new workload (the
/// uniform parameters contain commas too).
fn parse_workloads(list: &str) -> anyhow::Result<Vec<WorkloadSpec>> {
    let mut out: Vec<String> = Vec::new();
    for part in list.split(',') {
        let starts_new = ["uniform:", "app:", "seq:", "log:", "script:"]
            .iter()
            .any(|p| part.starts_with(p));
        match out.last_mut() {
            Some(last) if !starts_new => {
                last.push(',');
                last.push_str(part);
            }
            _ => out.push(part.to_string()),
        }
    }
    out.iter().map(|w| w.parse()).collect()
}

/// A `--layout`: `cantrip` (seed 000's 22 slabs), `cantrip*K`, or sizes in bytes.
pub fn parse_layout(s: &str) -> anyhow::Result<Layout> {
    Layout::parse(s).map_err(|e| anyhow::anyhow!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_parse_and_print_back() {
        let ws =
            parse_workloads("uniform:seed=7,ops=50,free=16,app:mltest,seq:3,log:x.log").unwrap();
        assert_eq!(ws.len(), 4);
        assert_eq!(
            ws[0],
            WorkloadSpec::Uniform(UniformParams {
                seed: 7,
                ops: 50,
                free_percent: 16
            })
        );
        assert_eq!(ws[0].to_string(), "uniform:seed=7,ops=50,free=16");
        assert_eq!(ws[2], WorkloadSpec::Seq(3));
    }

    #[test]
    fn bad_names_are_refused_with_the_choices() {
        for bad in [
            "uniform:seed=x",
            "uniform:free=101",
            "uniform:speed=1",
            "app:doom",
            "seq:4",
            "log:",
            "zip",
        ] {
            assert!(parse_workloads(bad).is_err(), "{bad}");
        }
        let e = "best-fit,fastest-fit"
            .parse::<Policies>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("fastest-fit") && e.contains("best-fit"), "{e}");
        assert_eq!(
            "best-fit:lifted".parse::<Policies>().unwrap().0[0].rule,
            WatermarkRule::Lifted
        );
        assert!("best-fit:loose".parse::<Policies>().is_err());
        assert_eq!(
            "all".parse::<Policies>().unwrap().0.len(),
            PolicyKind::ALL.len()
        );
        assert_eq!(
            "all,best-fit:lifted,best-fit"
                .parse::<Policies>()
                .unwrap()
                .0
                .len(),
            PolicyKind::ALL.len() + 1
        );
    }
}
