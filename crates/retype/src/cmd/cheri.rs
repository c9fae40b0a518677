//! `retype cheri`: CHERI compressed capabilities (`retype_core::cheri`) on
//! the command line. `setbounds` gives what setting bounds on the root
//! capability yields for a base and length (what seed 004's allocator gets
//! from `cheri_setbounds`, and reads back with `cheri_getlen`); `decode`
//! gives the fields a PESBT word and an address decode to.

use std::io::{self, BufRead, Write};

use anyhow::{bail, Context, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use retype_core::cheri::permissions::names;
use retype_core::cheri::{representable_alignment_mask, representable_length, Capability, Format};
use serde::Serialize;

#[derive(Args)]
pub struct CheriArgs {
    #[command(subcommand)]
    command: CheriCommand,
}

#[derive(Subcommand)]
enum CheriCommand {
    /// Bounds BASE..BASE+LENGTH set on the root capability: the base and top
    /// they round to, whether that is exact, CRRL and CRAM of LENGTH, and PESBT
    Setbounds(SetboundsArgs),
    /// The fields a PESBT word (architectural, not the memory form) and an
    /// address decode to
    Decode(DecodeArgs),
}

#[derive(Args)]
struct SetboundsArgs {
    #[arg(long, value_parser = format_parser())]
    format: Format,
    /// One JSON object instead of a table (always, with `-`)
    #[arg(long)]
    json: bool,
    /// Decimal or 0x-hex; `-` reads `BASE LENGTH` pairs from standard input,
    /// one a line, and writes one JSON line each
    base: String,
    /// Decimal or 0x-hex
    length: Option<String>,
}

#[derive(Args)]
struct DecodeArgs {
    #[arg(long, value_parser = format_parser())]
    format: Format,
    /// One JSON object instead of a table (always, with `-`)
    #[arg(long)]
    json: bool,
    /// Decode as tagged (refused for bits no derivation produces)
    #[arg(long)]
    tag: bool,
    /// Decimal or 0x-hex; `-` reads `PESBT CURSOR` pairs from standard
    /// input, one a line, and writes one JSON line each
    pesbt: String,
    /// The address; decimal or 0x-hex
    cursor: Option<String>,
}

/// `--format`: one of the format names.
pub(crate) fn format_parser() -> impl TypedValueParser<Value = Format> {
    PossibleValuesParser::new(Format::ALL.iter().map(|f| f.name())).map(|name| {
        name.parse::<Format>()
            .expect("a possible value names a format")
    })
}

pub fn run(args: CheriArgs) -> Result<()> {
    let mut out = io::stdout().lock();
    match args.command {
        CheriCommand::Setbounds(a) => setbounds(&a, &mut out),
        CheriCommand::Decode(a) => decode(&a, &mut out),
    }
}

/// The result of setting bounds, as `--json` writes it.
#[derive(Serialize)]
struct SetboundsRow {
    format: &'static str,
    base: u64,
    /// Up to 2^64, written as a decimal integer all the same.
    top: u128,
    length: u128,
    exact: bool,
    crrl: u128,
    cram: u64,
    pesbt: u64,
}

fn setbounds(a: &SetboundsArgs, out: &mut impl Write) -> Result<()> {
    match (a.base.as_str(), &a.length) {
        ("-", None) => each_pair(("BASE", "LENGTH"), out, |base, length| {
            bounds_row(a.format, base, length)
        })?,
        ("-", Some(_)) => {
            bail!("`-` reads BASE LENGTH pairs from standard input: no LENGTH after it")
        }
        (base, Some(length)) => {
            let row = bounds_row(a.format, number("BASE", base)?, number("LENGTH", length)?)?;
            if a.json {
                writeln!(out, "{}", serde_json::to_string(&row)?)?;
            } else {
                write_setbounds(&row, out)?;
            }
        }
        (_, None) => bail!("LENGTH is missing (or give `-` to read pairs from standard input)"),
    }
    Ok(())
}

/// `-`: a pair of numbers named `names` on each line of standard input,
/// and `row`'s answer to it as one JSON line; an error names its line.
fn each_pair<R: Serialize>(
    names: (&str, &str),
    out: &mut impl Write,
    mut row: impl FnMut(u128, u128) -> Result<R>,
) -> Result<()> {
    for (i, line) in io::stdin().lock().lines().enumerate() {
        let line = line.context("reading standard input")?;
        if line.trim().is_empty() {
            continue;
        }
        let answer = (|| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [first, second] = fields[..] else {
                bail!("expected `{} {}`, got `{}`", names.0, names.1, line.trim());
            };
            row(number(names.0, first)?, number(names.1, second)?)
        })()
        .with_context(|| format!("line {}", i + 1))?;
        writeln!(out, "{}", serde_json::to_string(&answer)?)?;
    }
    Ok(())
}

/// The root capability at `base`, its bounds set to `length` bytes.
fn bounds_row(format: Format, base: u128, length: u128) -> Result<SetboundsRow> {
    let width = format.params().addr_width;
    if base > format.max_address().into() {
        bail!("BASE {base:#x} is beyond {format}'s {width}-bit address space");
    }
    let top = base + length;
    if top > format.max_top() {
        bail!("LENGTH {length:#x} from BASE {base:#x} overflows {format}'s {width}-bit address space (top {top:#x} > 2^{width})");
    }
    let set = Capability::root(format)
        .set_address(base as u64)
        .set_bounds(length)
        .with_context(|| format!("{format}: bounds {base:#x}+{length:#x}"))?;
    let cap = set.capability;
    Ok(SetboundsRow {
        format: format.name(),
        base: cap.base(),
        top: cap.top(),
        length: cap.length(),
        exact: set.exact,
        crrl: representable_length(format, length),
        cram: representable_alignment_mask(format, length),
        pesbt: cap.pesbt(),
    })
}

fn write_setbounds(row: &SetboundsRow, out: &mut impl Write) -> Result<()> {
    writeln!(out, "format  {}", row.format)?;
    writeln!(out, "base    {:#x}", row.base)?;
    writeln!(out, "top     {:#x}", row.top)?;
    writeln!(out, "length  {:#x} ({})", row.length, row.length)?;
    writeln!(
        out,
        "exact   {}",
        if row.exact {
            "yes"
        } else {
            "no (rounded outwards)"
        }
    )?;
    writeln!(out, "crrl    {:#x} ({})", row.crrl, row.crrl)?;
    writeln!(out, "cram    {:#x}", row.cram)?;
    writeln!(out, "pesbt   {:#x}", row.pesbt)?;
    Ok(())
}

/// A decoded capability, as `--json` writes it.
#[derive(Serialize)]
struct DecodeRow {
    format: &'static str,
    pesbt: u64,
    address: u64,
    tag: bool,
    base: u64,
    top: u128,
    length: u128,
    exponent: u32,
    internal_exponent: bool,
    bounds_valid: bool,
    permissions: u32,
    permission_names: Vec<&'static str>,
    otype: u32,
    /// `unsealed`, `sealed`, `sentry` or `reserved`.
    seal: &'static str,
    flags: u8,
    reserved: u64,
}

fn decode(a: &DecodeArgs, out: &mut impl Write) -> Result<()> {
    let row = match (a.pesbt.as_str(), &a.cursor) {
        ("-", None) => {
            return each_pair(("PESBT", "CURSOR"), out, |pesbt, cursor| {
                decode_row(a.format, pesbt, cursor, a.tag)
            })
        }
        ("-", Some(_)) => {
            bail!("`-` reads PESBT CURSOR pairs from standard input: no CURSOR after it")
        }
        (pesbt, Some(cursor)) => decode_row(
            a.format,
            number("PESBT", pesbt)?,
            number("CURSOR", cursor)?,
            a.tag,
        )?,
        (_, None) => bail!("CURSOR is missing (or give `-` to read pairs from standard input)"),
    };
    if a.json {
        writeln!(out, "{}", serde_json::to_string(&row)?)?;
    } else {
        write_decode(&row, out)?;
    }
    Ok(())
}

/// The capability `pesbt` and `cursor` decode to, tagged if `tag`.
fn decode_row(format: Format, pesbt: u128, cursor: u128, tag: bool) -> Result<DecodeRow> {
    let fit = |what: &str, value: u128| -> Result<u64> {
        if value > format.max_address().into() {
            bail!(
                "{what} {value:#x} does not fit {format}'s {} bits",
                format.params().addr_width
            );
        }
        Ok(value as u64)
    };
    let (pesbt, cursor) = (fit("PESBT", pesbt)?, fit("CURSOR", cursor)?);
    let cap = Capability::decode(format, pesbt, cursor, tag)
        .with_context(|| format!("{format}: PESBT {pesbt:#x}, address {cursor:#x}"))?;
    let p = format.params();
    let otype = cap.otype();
    let seal = if otype == p.otype_unsealed {
        "unsealed"
    } else if otype == p.otype_sentry {
        "sentry"
    } else if p.sealing_otypes.contains(&otype) {
        "sealed"
    } else {
        "reserved"
    };
    let row = DecodeRow {
        format: format.name(),
        pesbt,
        address: cap.address(),
        tag: cap.tag(),
        base: cap.base(),
        top: cap.top(),
        length: cap.length(),
        exponent: cap.exponent(),
        internal_exponent: cap.bounds_bits().internal_exponent,
        bounds_valid: cap.bounds_valid(),
        permissions: cap.permissions(),
        permission_names: names(format, cap.permissions()).collect(),
        otype,
        seal,
        flags: cap.flags(),
        reserved: cap.reserved(),
    };
    Ok(row)
}

fn write_decode(row: &DecodeRow, out: &mut impl Write) -> Result<()> {
    writeln!(out, "format       {}", row.format)?;
    writeln!(out, "pesbt        {:#x}", row.pesbt)?;
    writeln!(out, "address      {:#x}", row.address)?;
    writeln!(out, "tag          {}", if row.tag { "yes" } else { "no" })?;
    writeln!(out, "base         {:#x}", row.base)?;
    writeln!(out, "top          {:#x}", row.top)?;
    writeln!(out, "length       {:#x}", row.length)?;
    let internal = if row.internal_exponent {
        "internal"
    } else {
        "none stored"
    };
    writeln!(out, "exponent     {} ({internal})", row.exponent)?;
    if !row.bounds_valid {
        writeln!(out, "bounds       malformed (the exponent is out of range)")?;
    }
    let held = if row.permission_names.is_empty() {
        "(none)".to_string()
    } else {
        row.permission_names.join(" ")
    };
    writeln!(out, "permissions  {:#x} {held}", row.permissions)?;
    writeln!(out, "otype        {:#x} ({})", row.otype, row.seal)?;
    writeln!(out, "flags        {:#x}", row.flags)?;
    writeln!(out, "reserved     {:#x}", row.reserved)?;
    Ok(())
}

/// A decimal or 0x-hex number, named `what` in errors.
fn number(what: &str, text: &str) -> Result<u128> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u128::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.with_context(|| format!("{what} `{text}` is not a number (decimal or 0x-hex)"))
}
