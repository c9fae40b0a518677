//! `retype cheri setbounds` and `cheri decode` as a user runs them: the
//! table, `--json` and the `-` standard-input mode, each held against what
//! `retype_core::cheri` computes for the same input, and a clear error for
//! bad input.

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{retype, retype_cmd, stderr, stdout};
use retype_core::cheri::permissions::names;
use retype_core::cheri::{representable_alignment_mask, representable_length, Capability, Format};
use retype_core::rng::SplitMix64;
use serde::Deserialize;

/// A `setbounds --json` line. The keys are exactly these; `top`, `length`
/// and `crrl` reach 2^64.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Row {
    format: String,
    base: u64,
    top: u128,
    length: u128,
    exact: bool,
    crrl: u128,
    cram: u64,
    pesbt: u64,
}

/// What the library gives for bounds `base`..`base + length` on the root.
fn expected(format: Format, base: u64, length: u128) -> Row {
    let set = Capability::root(format)
        .set_address(base)
        .set_bounds(length)
        .unwrap();
    Row {
        format: format.name().to_string(),
        base: set.capability.base(),
        top: set.capability.top(),
        length: set.capability.length(),
        exact: set.exact,
        crrl: representable_length(format, length),
        cram: representable_alignment_mask(format, length),
        pesbt: set.capability.pesbt(),
    }
}

/// Requests of every size, from every format's address space, to its very end.
fn requests(format: Format, n: usize) -> Vec<(u64, u128)> {
    let mut rng = SplitMix64::new(0x43);
    let aw = format.params().addr_width;
    // Morello: bases below 2^55, whose bounds address is the address.
    let base_bits = if format == Format::Morello { 55 } else { aw };
    let mut out = vec![
        (0, format.max_top()),
        (1, format.max_top() - 1),
        (0x1000, 0),
    ];
    while out.len() < n {
        let base = rng.next_u64() >> (64 - base_bits) >> rng.below(u64::from(base_bits));
        let room = format.max_top() - u128::from(base);
        let length = u128::from(rng.next_u64() >> (64 - aw) >> rng.below(u64::from(aw))).min(room);
        out.push((base, length));
    }
    out
}

fn parse_json(line: &str) -> Row {
    // It is JSON to any reader, though no u64 holds a top of 2^64.
    let value: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
    assert_eq!(value.as_object().unwrap().len(), 8, "{line}");
    serde_json::from_str(line).unwrap()
}

#[test]
fn setbounds_json_is_what_the_library_gives() {
    for &format in Format::ALL {
        for (base, length) in requests(format, 6) {
            let (b, l) = (format!("{base:#x}"), length.to_string());
            let out = retype(&[
                "cheri",
                "setbounds",
                "--format",
                format.name(),
                "--json",
                &b,
                &l,
            ]);
            assert!(out.status.success(), "{}", stderr(&out));
            let text = stdout(&out);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 1);
            assert_eq!(
                parse_json(lines[0]),
                expected(format, base, length),
                "{format} {b} {l}"
            );
        }
    }
}

#[test]
fn setbounds_table_is_what_the_library_gives() {
    for &format in Format::ALL {
        for (base, length) in requests(format, 4) {
            let (b, l) = (base.to_string(), format!("{length:#x}"));
            let out = retype(&["cheri", "setbounds", "--format", format.name(), &b, &l]);
            assert!(out.status.success(), "{}", stderr(&out));
            let text = stdout(&out);
            let field = |key: &str| -> String {
                let line = text
                    .lines()
                    .find(|l| l.split_whitespace().next() == Some(key))
                    .unwrap_or_else(|| panic!("no {key} in\n{text}"));
                line.split_whitespace().nth(1).unwrap().to_string()
            };
            let hex =
                |key: &str| u128::from_str_radix(field(key).trim_start_matches("0x"), 16).unwrap();
            let want = expected(format, base, length);
            assert_eq!(field("format"), want.format);
            assert_eq!(hex("base"), u128::from(want.base), "{text}");
            assert_eq!(hex("top"), want.top, "{text}");
            assert_eq!(hex("length"), want.length, "{text}");
            assert_eq!(
                field("exact"),
                if want.exact { "yes" } else { "no" },
                "{text}"
            );
            assert_eq!(hex("crrl"), want.crrl, "{text}");
            assert_eq!(hex("cram"), u128::from(want.cram), "{text}");
            assert_eq!(hex("pesbt"), u128::from(want.pesbt), "{text}");
        }
    }
}

/// Runs `retype ARGS` with `input` on standard input.
fn with_stdin(args: &[&str], input: &str) -> std::process::Output {
    let mut child = retype_cmd()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn setbounds_reads_pairs_from_standard_input() {
    for &format in Format::ALL {
        let pairs = requests(format, 200);
        // Hex and decimal, as a user would mix them; a blank line is skipped.
        let input: String = pairs
            .iter()
            .enumerate()
            .map(|(i, (b, l))| {
                if i % 2 == 0 {
                    format!("{b:#x} {l}\n")
                } else {
                    format!("{b}\t{l:#x}\n\n")
                }
            })
            .collect();
        let out = with_stdin(
            &["cheri", "setbounds", "--format", format.name(), "-"],
            &input,
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        let rows: Vec<Row> = text.lines().map(parse_json).collect();
        let want: Vec<Row> = pairs.iter().map(|&(b, l)| expected(format, b, l)).collect();
        assert_eq!(rows, want, "{format}");
    }
}

#[test]
fn a_bad_line_is_an_error_naming_it() {
    let out = with_stdin(
        &["cheri", "setbounds", "--format", "rv64", "-"],
        "0 16\n0x10 0x20\n0x10 twenty\n1 1\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stdout(&out).lines().count(),
        2,
        "the lines before it are written"
    );
    let err = stderr(&out);
    assert!(
        err.contains("line 3") && err.contains("`twenty` is not a number"),
        "{err}"
    );
    let out = with_stdin(&["cheri", "setbounds", "--format", "rv32", "-"], "1 2 3\n");
    assert!(
        stderr(&out).contains("line 1: expected `BASE LENGTH`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_input_is_refused() {
    let refused = |args: &[&str], says: &str| {
        let mut all = vec!["cheri"];
        all.extend_from_slice(args);
        let out = retype(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.starts_with("retype: error: ") && err.contains(says),
            "{args:?}: {err}"
        );
    };
    // A length past the end of the address space.
    refused(
        &["setbounds", "--format", "rv64", "1", "0x10000000000000000"],
        "overflows rv64's 64-bit address space",
    );
    refused(
        &["setbounds", "--format", "rv32", "0x10", "0xfffffff1"],
        "overflows rv32's 32-bit address space",
    );
    refused(
        &["setbounds", "--format", "rv32", "0x100000000", "0"],
        "beyond rv32's 32-bit address space",
    );
    refused(
        &["setbounds", "--format", "morello", "0x1g", "1"],
        "BASE `0x1g` is not a number",
    );
    refused(
        &["setbounds", "--format", "morello", "1", "5k"],
        "LENGTH `5k` is not a number",
    );
    refused(&["setbounds", "--format", "rv64", "1"], "LENGTH is missing");
    refused(
        &["setbounds", "--format", "rv64", "-", "1"],
        "no LENGTH after it",
    );
    // Morello's top byte is flags, not address, to small bounds.
    refused(
        &[
            "setbounds",
            "--format",
            "morello",
            "0xff00000000000944",
            "16",
        ],
        "is not what bounds this small read",
    );
    refused(
        &["decode", "--format", "rv32", "0x100000000", "0"],
        "PESBT 0x100000000 does not fit rv32's 32 bits",
    );
    // Bits no derivation produces carry no tag: RV64's null with reserved
    // bit 46 set; Morello's exponent 51 (stored inverted: 0b001_100),
    // beyond the largest, 50.
    refused(
        &["decode", "--format", "rv64", "--tag", "0x5ffffc018004", "0"],
        "no derivation produces",
    );
    refused(
        &["decode", "--format", "morello", "--tag", "0x10004", "0"],
        "no derivation produces",
    );
    let out = retype(&["cheri", "setbounds", "--format", "cc128", "1", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("[possible values: morello, rv64, rv32]"),
        "{}",
        stderr(&out)
    );
}

/// A `decode --json` line: exactly these keys.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Decoded {
    format: String,
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
    permission_names: Vec<String>,
    otype: u32,
    seal: String,
    flags: u8,
    reserved: u64,
}

#[test]
fn decode_is_what_the_library_gives() {
    let mut rng = SplitMix64::new(4);
    for &format in Format::ALL {
        let p = format.params();
        for _ in 0..8 {
            let (pesbt, cursor) = (
                rng.next_u64() & format.max_address(),
                rng.next_u64() & format.max_address(),
            );
            let cap = Capability::decode(format, pesbt, cursor, false).unwrap();
            let (hex, dec) = (format!("{pesbt:#x}"), cursor.to_string());
            let out = retype(&[
                "cheri",
                "decode",
                "--format",
                format.name(),
                "--json",
                &hex,
                &dec,
            ]);
            assert!(out.status.success(), "{}", stderr(&out));
            let got: Decoded = serde_json::from_str(stdout(&out).trim()).unwrap();
            let otype = cap.otype();
            let want = Decoded {
                format: format.name().to_string(),
                pesbt,
                address: cursor,
                tag: false,
                base: cap.base(),
                top: cap.top(),
                length: cap.length(),
                exponent: cap.exponent(),
                internal_exponent: cap.bounds_bits().internal_exponent,
                bounds_valid: cap.bounds_valid(),
                permissions: cap.permissions(),
                permission_names: names(format, cap.permissions()).map(String::from).collect(),
                otype,
                seal: if otype == p.otype_unsealed {
                    "unsealed"
                } else if otype == p.otype_sentry {
                    "sentry"
                } else if p.sealing_otypes.contains(&otype) {
                    "sealed"
                } else {
                    "reserved"
                }
                .to_string(),
                flags: cap.flags(),
                reserved: cap.reserved(),
            };
            assert_eq!(got, want);
            // The table says the same.
            let out = retype(&["cheri", "decode", "--format", format.name(), &hex, &dec]);
            let text = stdout(&out);
            assert!(
                text.contains(&format!("base         {:#x}\n", cap.base())),
                "{text}"
            );
            assert!(
                text.contains(&format!("top          {:#x}\n", cap.top())),
                "{text}"
            );
            assert!(
                text.contains(&format!("otype        {otype:#x} ({})\n", want.seal)),
                "{text}"
            );
        }
    }
}

/// `decode -`: one JSON line per `PESBT CURSOR` line, each what the single
/// command gives; a bad line is an error naming it.
#[test]
fn decode_reads_pairs_from_standard_input() {
    let mut rng = SplitMix64::new(9);
    for &format in Format::ALL {
        let pairs: Vec<(u64, u64)> = (0..6)
            .map(|_| {
                (
                    rng.next_u64() & format.max_address(),
                    rng.next_u64() & format.max_address(),
                )
            })
            .collect();
        let input: String = pairs
            .iter()
            .map(|(p, c)| format!("{p:#x} {c}\n\n"))
            .collect();
        let out = with_stdin(&["cheri", "decode", "--format", format.name(), "-"], &input);
        assert!(out.status.success(), "{}", stderr(&out));
        let got: Vec<Decoded> = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let want: Vec<Decoded> = pairs
            .iter()
            .map(|(p, c)| {
                let (p, c) = (p.to_string(), c.to_string());
                let args = [
                    "cheri",
                    "decode",
                    "--format",
                    format.name(),
                    "--json",
                    &p,
                    &c,
                ];
                serde_json::from_str(stdout(&retype(&args)).trim()).unwrap()
            })
            .collect();
        assert_eq!(got, want, "{format}");
    }
    let out = with_stdin(
        &["cheri", "decode", "--format", "rv32", "-"],
        "0 0\n0x100000000 0\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stdout(&out).lines().count(),
        1,
        "the line before it is written"
    );
    assert!(
        stderr(&out).contains("line 2: PESBT 0x100000000 does not fit rv32's 32 bits"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn decode_tagged_root() {
    for &format in Format::ALL {
        let root = Capability::root(format);
        let out = retype(&[
            "cheri",
            "decode",
            "--format",
            format.name(),
            "--tag",
            &root.pesbt().to_string(),
            "0",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("tag          yes\n"), "{text}");
        assert!(text.contains("(unsealed)"), "{text}");
        let held: Vec<&str> = names(format, format.all_permissions()).collect();
        assert!(text.contains(&held.join(" ")), "{text}");
    }
}
