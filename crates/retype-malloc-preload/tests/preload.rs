//! Runs real programs and our C test programs with `LD_PRELOAD=libretype_malloc_preload.so`.
//! Programs whose output must match glibc's run twice, once per allocator.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

/// The preload library of this build, brought up to date first: a test run does not build the
/// package's cdylib (nothing links it), so a library left by an earlier build could be stale.
fn lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        // <target>/<profile>/deps/preload-…: the library goes to <target>/<profile>.
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("profile directory");
        let target_dir = profile_dir.parent().expect("target directory");
        let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cargo
            .args(["build", "-p", "retype-malloc-preload", "--target-dir"])
            .arg(target_dir);
        if profile_dir.ends_with("release") {
            cargo.arg("--release");
        }
        let status = cargo.status().expect("run cargo build");
        assert!(
            status.success(),
            "cargo build -p retype-malloc-preload failed"
        );
        profile_dir
            .join("libretype_malloc_preload.so")
            .canonicalize()
            .expect("libretype_malloc_preload.so after cargo build")
    })
}

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("retype-malloc-preload")
        .join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles `tests/c/<name>.c` once per test run and returns the executable. Tests run in
/// parallel: compiling a program again while another test runs it would fail ("text file
/// busy") or run a half-written file.
fn compile(name: &str) -> PathBuf {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    built
        .entry(name.to_string())
        .or_insert_with(|| compile_now(name))
        .clone()
}

fn compile_now(name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    let exe = tmp("bin").join(name);
    let out = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-ldl")
        .output()
        .expect("gcc must be installed");
    assert!(
        out.status.success(),
        "gcc {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Runs `cmd`, with our allocator preloaded when `ours`.
fn run(mut cmd: Command, ours: bool) -> Output {
    if ours {
        cmd.env("LD_PRELOAD", lib());
    } else {
        cmd.env_remove("LD_PRELOAD");
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success() && text(&out.stdout).ends_with("OK\n"),
        "{what}: status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn c_semantics_of_the_malloc_family() {
    assert_ok(&run(Command::new(compile("semantics")), true), "semantics");
}

#[test]
fn sixteen_threads_stress() {
    assert_ok(&run(Command::new(compile("stress")), true), "stress");
}

#[test]
fn fork_while_other_threads_allocate() {
    assert_ok(&run(Command::new(compile("fork")), true), "fork");
}

/// The C programs (`stress`: sixteen threads) in hardened and secure mode.
#[test]
fn hardened_and_secure_modes_run_the_c_programs_unchanged() {
    for env in [&HARDENED[..], &SECURE] {
        for name in ["semantics", "stress", "fork", "handoff"] {
            let mut cmd = Command::new(compile(name));
            cmd.envs(env.iter().copied());
            assert_ok(&run(cmd, true), &format!("{name} with {env:?}"));
        }
    }
}

/// A thread waiting in `pthread_join` parks its heap: a thread it waits for adopts it (and
/// reuses the blocks it frees there), and the waiting thread takes its own heap back after.
#[test]
fn a_joining_thread_parks_its_heap() {
    for case in ["adopt", "back"] {
        let mut cmd = Command::new(compile("park"));
        cmd.arg(case);
        assert_ok(&run(cmd, true), &format!("park {case}"));
    }
}

#[test]
fn works_when_loaded_with_dlopen() {
    let mut cmd = Command::new(compile("dlopen"));
    cmd.arg(lib());
    assert_ok(&run(cmd, false), "dlopen");
}

fn misuse(case: &str, size: usize, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(compile("misuse"));
    cmd.args([case, &size.to_string()])
        .envs(env.iter().copied());
    run(cmd, true)
}

/// Hardened mode, hardened mode without canaries, and secure mode: a small block's liveness
/// is its canary tag in the first, a bit of its segment's bitmap in the second, whether it
/// holds a free-list link in the third.
const LIVENESS: [&[(&str, &str)]; 3] = [
    &HARDENED,
    &[
        ("RETYPE_MALLOC_HARDENED", "1"),
        ("RETYPE_MALLOC_CANARY", "0"),
    ],
    &SECURE,
];

#[test]
fn hardened_and_secure_modes_abort_on_double_and_invalid_frees() {
    // A pointer into an 8-byte block (a 16-byte slot) is not 16-aligned.
    for (size, interior) in [
        (8, "invalid free (misaligned)"),
        (4096, "invalid free (inside a block)"),
        (1 << 20, "invalid free (inside a large block)"),
    ] {
        let cases = [
            ("double", "double free"),
            ("double-remote", "double free"),
            ("interior", interior),
            ("stack", "invalid free (not allocated by retype-malloc)"),
            ("realloc-freed", "use after free"),
        ];
        for env in LIVENESS {
            for (case, message) in cases {
                let out = misuse(case, size, env);
                let err = text(&out.stderr);
                assert_eq!(
                    out.status.signal(),
                    Some(libc::SIGABRT),
                    "{case} {size} {env:?}: expected abort, got {:?}; stderr {err}",
                    out.status
                );
                assert!(
                    err.contains("retype-malloc: ") && err.contains(message),
                    "{case} {size} {env:?}: stderr was {err:?}"
                );
            }
            let clean = misuse("clean", size, env);
            assert!(
                clean.status.success() && text(&clean.stdout) == "clean\n",
                "clean run {size} {env:?}: {clean:?}"
            );
        }
    }
}

/// Runs `tests/c/harden.c`, committing error `case` on a block of `size` bytes, with `env`.
fn harden(case: &str, size: usize, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(compile("harden"));
    cmd.args([case, &size.to_string()])
        .envs(env.iter().copied());
    run(cmd, true)
}

/// Asserts that `out` was killed by `signal` after printing `message` (if not empty).
fn assert_caught(out: &Output, signal: i32, message: &str, what: &str) {
    let err = text(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(signal),
        "{what}: expected signal {signal}, got {:?}; stderr {err}",
        out.status
    );
    assert!(
        err.contains(&format!("retype-malloc: {message}")),
        "{what}: stderr was {err:?}"
    );
}

const HARDENED: [(&str, &str); 1] = [("RETYPE_MALLOC_HARDENED", "1")];
const SECURE: [(&str, &str); 1] = [("RETYPE_MALLOC_SECURE", "1")];

#[test]
fn hardened_mode_catches_overflows_and_underflows_of_small_blocks_with_canaries() {
    let cases = [
        ("overflow-1", "heap overflow (canary)"),
        ("overflow-32", "heap overflow (canary)"),
        ("overflow-block", "heap overflow (canary)"),
        ("overflow-realloc", "heap overflow (canary)"),
        ("overflow-memcpy", "heap overflow (canary)"),
        ("underflow-1", "heap underflow (canary of the block before)"),
        (
            "underflow-32",
            "heap underflow (canary of the block before)",
        ),
        (
            "underflow-memcpy",
            "heap underflow (canary of the block before)",
        ),
    ];
    for size in [8, 4096] {
        for (case, message) in cases {
            let out = harden(case, size, &HARDENED);
            let class = if size == 8 { 16 } else { 4608 };
            let message = format!("{message} of pointer 0x");
            assert_caught(&out, libc::SIGABRT, &message, &format!("{case} {size}"));
            assert!(text(&out.stderr).contains(&format!("in size class {class} B")));
        }
        let clean = harden("clean", size, &HARDENED);
        assert!(clean.status.success(), "clean {size}: {clean:?}");
    }
}

/// Whether `out` was killed by SIGSEGV (a guard page) with nothing from us on stderr.
fn assert_faulted(out: &Output, what: &str) {
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSEGV),
        "{what}: expected a fault, got {:?}; stderr {}",
        out.status,
        text(&out.stderr)
    );
}

#[test]
fn hardened_mode_guards_large_blocks_with_guard_pages_and_canaries() {
    // 1 MiB ends at its last page's end: any access past either end faults there (secure
    // mode's guard pages too).
    let mib = 1 << 20;
    for (case, env) in [
        "overflow-1",
        "overflow-32",
        "overflow-block",
        "overflow-realloc",
        "overflow-memcpy",
        "underflow-1",
        "underflow-32",
        "underflow-memcpy",
    ]
    .into_iter()
    .flat_map(|case| [(case, &HARDENED), (case, &SECURE)])
    {
        let what = format!("{case} 1 MiB {env:?}");
        assert_faulted(&harden(case, mib, env), &what);
    }
    // One byte more: 15 bytes of canary after the block, 4080 before it in its first page.
    let odd = mib + 1;
    let cases = [
        ("overflow-1", "heap overflow (canary)"),
        ("overflow-realloc", "heap overflow (canary)"),
        ("underflow-1", "heap underflow (canary)"),
        ("underflow-32", "heap underflow (canary)"),
        ("underflow-memcpy", "heap underflow (canary)"),
    ];
    for (case, message) in cases {
        let out = harden(case, odd, &HARDENED);
        let what = format!("{case} 1 MiB + 1");
        assert_caught(
            &out,
            libc::SIGABRT,
            &format!("{message} of pointer 0x"),
            &what,
        );
        assert!(text(&out.stderr).contains(&format!("in size class {odd} B")));
    }
    for case in ["overflow-32", "overflow-memcpy"] {
        let what = format!("{case} 1 MiB + 1");
        assert_faulted(&harden(case, odd, &HARDENED), &what);
    }
    for size in [mib, odd] {
        let clean = harden("clean", size, &HARDENED);
        assert!(clean.status.success(), "clean {size}: {clean:?}");
    }
}

#[test]
fn hardened_mode_zero_size_blocks_fault_on_access_and_free_cleanly() {
    for case in ["zero-read", "zero-write", "zero-calloc"] {
        assert_faulted(&harden(case, 8, &HARDENED), case);
    }
    for size in [8, 4096, 1 << 20] {
        let out = harden("zero-free", size, &HARDENED);
        assert!(
            out.status.success() && text(&out.stdout) == "zero-free\n",
            "zero-free {size}: {out:?}"
        );
    }
}

/// Hardened mode with a time bound no test run reaches, so blocks leave quarantine by its
/// byte and block bounds only.
const HARDENED_UNTIMED: [(&str, &str); 2] = [
    ("RETYPE_MALLOC_HARDENED", "1"),
    ("RETYPE_MALLOC_QUARANTINE_MS", "100000000"),
];

/// A free-list link rewritten after free is followed by default (the next mallocs hand out
/// the address written); in hardened mode the quarantine holds the block back (and checks it
/// at exit), and without the quarantine, and in secure mode, the link is decoded and checked
/// before it is followed.
#[test]
fn hardened_and_secure_modes_check_free_list_links() {
    let unquarantined = [
        ("RETYPE_MALLOC_HARDENED", "1"),
        ("RETYPE_MALLOC_QUARANTINE_BYTES", "0"),
    ];
    for size in [8, 4096] {
        let seen = |env: &[(&str, &str)]| text(&harden("poison", size, env).stdout);
        // Debug builds check the free lists as they change, so they stop at the link.
        if !cfg!(debug_assertions) {
            assert_eq!(seen(&[]), "poisoned\n", "default {size}");
        }
        // The quarantine holds the block back, and finds the link written at exit.
        let out = harden("poison", size, &HARDENED);
        assert_eq!(text(&out.stdout), "not poisoned\n", "hardened {size}");
        let what = format!("poison {size}");
        let message = "write after free (quarantine, at exit)";
        assert_caught(&out, libc::SIGABRT, message, &what);
        for env in [&unquarantined[..], &SECURE] {
            let out = harden("poison", size, env);
            let what = format!("poison {size} with {env:?}");
            assert_caught(
                &out,
                libc::SIGABRT,
                "heap corruption (free list link)",
                &what,
            );
        }
    }
}

/// Fresh blocks come in a random order in hardened and secure mode, in address order by
/// default.
#[test]
fn hardened_and_secure_modes_hand_out_fresh_blocks_in_a_random_order() {
    for size in [8, 4096] {
        for (env, seen) in [
            (&HARDENED[..], "shuffled\n"),
            (&SECURE, "shuffled\n"),
            (&[], "address order\n"),
        ] {
            let out = harden("order", size, env);
            assert!(
                out.status.success() && text(&out.stdout) == seen,
                "order {size} {env:?}: {out:?}"
            );
        }
    }
}

#[test]
fn hardened_mode_quarantines_freed_blocks_and_checks_them_on_leaving() {
    for (size, class) in [(8, 16), (4096, 4608)] {
        let out = harden("write-after-free", size, &HARDENED_UNTIMED);
        let what = format!("write-after-free {size}");
        assert_caught(&out, libc::SIGABRT, "write after free (quarantine)", &what);
        assert!(text(&out.stderr).contains(&format!("in size class {class} B")));
        for (case, seen) in [("read-after-free", "junk\n"), ("reuse", "not reused\n")] {
            let out = harden(case, size, &HARDENED_UNTIMED);
            assert!(
                out.status.success() && text(&out.stdout) == seen,
                "{case} {size}: {out:?}"
            );
        }
    }
    // A freed large block is inaccessible while in quarantine.
    let mib = 1 << 20;
    for case in ["write-after-free", "read-after-free"] {
        assert_faulted(
            &harden(case, mib, &HARDENED_UNTIMED),
            &format!("{case} 1 MiB"),
        );
    }
    let out = harden("reuse", mib, &HARDENED_UNTIMED);
    assert!(
        out.status.success() && text(&out.stdout) == "not reused\n",
        "reuse 1 MiB: {out:?}"
    );
}

#[cfg(target_arch = "x86_64")]
#[test]
fn the_heap_is_never_executable() {
    for size in [8, 4096, 1 << 20] {
        for env in [&HARDENED[..], &SECURE, &[]] {
            let what = format!("execute {size} {env:?}");
            assert_faulted(&harden("execute", size, env), &what);
        }
    }
}

#[test]
fn each_measure_has_its_own_switch() {
    let off = harden(
        "overflow-1",
        8,
        &[
            ("RETYPE_MALLOC_HARDENED", "1"),
            ("RETYPE_MALLOC_CANARY", "0"),
        ],
    );
    assert!(off.status.success(), "canaries off: {off:?}");
    let alone = harden("overflow-1", 8, &[("RETYPE_MALLOC_CANARY", "1")]);
    assert_caught(
        &alone,
        libc::SIGABRT,
        "heap overflow (canary)",
        "canaries alone",
    );
    let default = harden("overflow-1", 8, &[]);
    assert!(default.status.success(), "default mode: {default:?}");
    // Without guard pages a large block starts its mapping's pages: the canaries in its last
    // page catch what a guard page would have.
    let unguarded = harden(
        "overflow-32",
        (1 << 20) + 1,
        &[
            ("RETYPE_MALLOC_HARDENED", "1"),
            ("RETYPE_MALLOC_GUARD", "0"),
        ],
    );
    assert_caught(
        &unguarded,
        libc::SIGABRT,
        "heap overflow (canary)",
        "guard off",
    );
    let guard_alone = harden("overflow-1", 1 << 20, &[("RETYPE_MALLOC_GUARD", "1")]);
    assert_faulted(&guard_alone, "guard pages alone");
    let zero_off = harden(
        "zero-write",
        8,
        &[
            ("RETYPE_MALLOC_HARDENED", "1"),
            ("RETYPE_MALLOC_ZERO_FAULT", "0"),
        ],
    );
    assert!(
        zero_off.status.success(),
        "zero-size faults off: {zero_off:?}"
    );
    let zero_alone = harden("zero-write", 8, &[("RETYPE_MALLOC_ZERO_FAULT", "1")]);
    assert_faulted(&zero_alone, "zero-size faults alone");
    let no_quarantine = harden(
        "write-after-free",
        8,
        &[
            ("RETYPE_MALLOC_HARDENED", "1"),
            ("RETYPE_MALLOC_QUARANTINE_BYTES", "0"),
        ],
    );
    // Without the quarantine the flipped byte lands in the freed block's free-list link,
    // which the next malloc finds broken: caught, but not by the quarantine.
    assert!(
        !text(&no_quarantine.stderr).contains("(quarantine)"),
        "quarantine off: {no_quarantine:?}"
    );
    let quarantine_alone = harden(
        "write-after-free",
        4096,
        &[("RETYPE_MALLOC_QUARANTINE_BYTES", "65536")],
    );
    assert_caught(
        &quarantine_alone,
        libc::SIGABRT,
        "write after free (quarantine)",
        "quarantine alone",
    );
}

/// Runs `args` under both allocators in fresh copies of a work directory prepared by `setup`
/// and asserts identical stdout and exit status.
fn same_as_glibc(name: &str, setup: impl Fn(&Path), args: &[&str], env: &[(&str, &str)]) {
    let mut outputs = Vec::new();
    for ours in [false, true] {
        let dir = tmp(&format!("{name}-{}", if ours { "retype" } else { "glibc" }));
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        setup(&dir);
        let mut cmd = Command::new(args[0]);
        cmd.args(&args[1..])
            .current_dir(&dir)
            .envs(env.iter().copied())
            .env("HOME", &dir);
        let out = run(cmd, ours);
        assert!(
            out.status.success(),
            "{name} (ours={ours}) failed: {}",
            text(&out.stderr)
        );
        outputs.push(out);
    }
    assert!(
        !outputs[0].stdout.is_empty(),
        "{name}: no output to compare"
    );
    assert_eq!(
        text(&outputs[0].stdout),
        text(&outputs[1].stdout),
        "{name}: output differs from glibc's"
    );
}

#[test]
fn python3_output_matches_glibc() {
    let script = r#"
import hashlib, json, re, threading, zlib, collections
d = {str(i): [i * j for j in range(i % 50)] for i in range(20000)}
s = json.dumps(d, sort_keys=True)
words = re.findall(r"\d+", s)
c = collections.Counter(w[-2:] for w in words)
out = []
def work(k):
    out.append(hashlib.sha256(zlib.compress((s[k::7]).encode())).hexdigest())
ts = [threading.Thread(target=work, args=(k,)) for k in range(7)]
[t.start() for t in ts]; [t.join() for t in ts]
print(hashlib.sha256(s.encode()).hexdigest(), len(words), c.most_common(3), sorted(out))
print(sorted(set(x * x % 1009 for x in range(10**5)))[:20])
"#;
    same_as_glibc(
        "python",
        |_| {},
        &["/usr/bin/python3", "-c", script],
        &[("PYTHONMALLOC", "malloc")],
    );
}

#[test]
fn git_output_matches_glibc() {
    let script = r#"set -e
git init -q repo && cd repo
for i in $(seq 1 300); do printf 'line %s\n%s\n' "$i" "$(seq 1 $((i % 40)))" > "f$i.txt"; done
git add . && git commit -q -m first
for i in $(seq 1 300 | awk 'NR % 3 == 0'); do echo changed >> "f$i.txt"; done
git commit -q -am second
git log --format='%H %T %s'
git diff --stat HEAD~1 | tail -1
git gc -q && git count-objects -v | grep -v size
git fsck --no-progress 2>&1
"#;
    let env = [
        ("GIT_AUTHOR_NAME", "retype"),
        ("GIT_AUTHOR_EMAIL", "retype@example.org"),
        ("GIT_COMMITTER_NAME", "retype"),
        ("GIT_COMMITTER_EMAIL", "retype@example.org"),
        ("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z"),
        ("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z"),
        ("GIT_CONFIG_NOSYSTEM", "1"),
    ];
    same_as_glibc("git", |_| {}, &["sh", "-c", script], &env);
}

#[test]
fn sqlite3_shell_output_matches_glibc() {
    let sql = r#"
CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, name TEXT, blob BLOB);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000)
INSERT INTO t SELECT i, (i * 7919) % 1000, printf('name-%08d-%s', i, hex(i * i)), zeroblob(i % 300) FROM n;
CREATE INDEX tk ON t(k);
SELECT count(*), sum(k), sum(length(name)), sum(length(blob)) FROM t;
SELECT k, count(*), min(name), max(id) FROM t GROUP BY k ORDER BY count(*) DESC, k LIMIT 5;
SELECT a.k, count(*) FROM t a JOIN t b ON a.k = b.k AND a.id < 200 AND b.id < 2000 GROUP BY a.k ORDER BY 2 DESC, 1 LIMIT 5;
UPDATE t SET name = upper(name) || name WHERE id % 5 = 0;
DELETE FROM t WHERE id % 7 = 0;
VACUUM;
SELECT count(*), sum(length(name)) FROM t;
SELECT group_concat(name, ',') FROM (SELECT name FROM t ORDER BY name DESC LIMIT 20);
"#;
    same_as_glibc(
        "sqlite3",
        |dir| std::fs::write(dir.join("script.sql"), sql).unwrap(),
        &["sh", "-c", "sqlite3 test.db < script.sql"],
        &[],
    );
}

#[test]
fn gcc_output_matches_glibc() {
    let mut c = String::from("#include <stdio.h>\n");
    for i in 0..400 {
        c += &format!(
            "static long f{i}(long x) {{ long a[16]; for (int k = 0; k < 16; k++) a[k] = x * k + {i}; \
             long s = 0; for (int k = 0; k < 16; k++) s += a[k] % ({i} + 3); return s ^ (x << ({i} % 7)); }}\n"
        );
    }
    c += "int main(void) { long s = 0;\n";
    for i in 0..400 {
        c += &format!("  s += f{i}(s + {i});\n");
    }
    c += "  printf(\"%ld\\n\", s); return 0; }\n";
    same_as_glibc(
        "gcc",
        |dir| std::fs::write(dir.join("gen.c"), &c).unwrap(),
        &[
            "sh",
            "-c",
            "gcc -O2 -S -o - gen.c | grep -v '\\.ident' && gcc -O2 -o gen gen.c && ./gen",
        ],
        &[],
    );
}

#[test]
fn statistics_reach_a_file_even_when_stderr_is_closed() {
    let file = tmp("stats").join("stats.txt");
    let _ = std::fs::remove_file(&file);
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "exec 2>&-; ls / > /dev/null"])
        .env("RETYPE_MALLOC_STATS", &file);
    assert!(run(cmd, true).status.success());
    let report = std::fs::read_to_string(&file).expect("statistics file");
    assert!(
        report.contains("retype-malloc statistics") && report.contains("thread heaps created: "),
        "{report}"
    );
    assert!(report.contains("kernel Rss:"), "{report}");
}

/// KiB of mappings advised for huge pages, and KiB backed by them, after `hugeheap MIB`.
fn huge_heap(mib: u32, env: &[(&str, &str)]) -> (u64, u64) {
    let mut cmd = Command::new(compile("hugeheap"));
    cmd.arg(mib.to_string()).envs(env.iter().copied());
    let out = run(cmd, true);
    let figures: Vec<u64> = text(&out.stdout)
        .split_whitespace()
        .map(|f| f.parse().expect("a KiB figure"))
        .collect();
    assert_eq!(figures.len(), 2, "hugeheap printed {:?}", text(&out.stdout));
    (figures[0], figures[1])
}

/// What the allocator controls is whether it asks for huge pages (`MADV_HUGEPAGE`, seen as
/// VmFlags `hg`); whether the kernel grants them depends on the THP mode and on how
/// fragmented this machine's memory is, so that is printed, not asserted (the benchmarks
/// measure it).
#[test]
fn a_big_heap_asks_for_huge_pages_and_a_small_one_does_not() {
    if !Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        eprintln!("skipped: this kernel has no transparent huge pages");
        return;
    }
    // Past the 48 MiB threshold every segment is advised, the early ones too.
    let (advised, huge) = huge_heap(64, &[]);
    eprintln!("64 MiB heap: {advised} KiB advised, {huge} KiB in huge pages");
    assert!(
        advised >= 60 * 1024,
        "only {advised} KiB of a 64 MiB heap advised"
    );
    // Only its 2 MiB array of pointers, a large block, is advised (see RETYPE_MALLOC_HUGEPAGES_LARGE).
    let (small, _) = huge_heap(16, &[]);
    assert!(
        small <= 2 * 1024 + 4,
        "a 16 MiB heap stays on 4 KiB pages, but {small} KiB advised"
    );
    let (from_start, _) = huge_heap(16, &[("RETYPE_MALLOC_HUGEPAGES_MIN_MIB", "0")]);
    assert!(
        from_start >= 15 * 1024,
        "MIN_MIB=0 advised only {from_start} KiB"
    );
    let (off, _) = huge_heap(64, &[("RETYPE_MALLOC_HUGEPAGES", "0")]);
    assert_eq!(
        off, 0,
        "RETYPE_MALLOC_HUGEPAGES=0 still asked for huge pages"
    );
}

/// Valgrind's memcheck over our allocator's own code (Miri cannot run it: it calls mmap with
/// partial unmaps). Memcheck does not track blocks of an allocator it does not know, so this
/// checks the allocator's reads and writes of its own metadata, not the program's.
#[test]
fn valgrind_memcheck_finds_no_errors_in_the_allocator() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        panic!("valgrind is not installed (scripts/test installs it)");
    }
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "-q",
        "--error-exitcode=99",
        "--soname-synonyms=somalloc=nouserintercepts",
    ])
    .arg(compile("semantics"));
    let out = run(cmd, true);
    assert_ok(&out, "semantics under valgrind");
}

/// The heap errors of `tests/c/errors.c`, and what hardened mode must do with each on a block
/// of 8 B, 4 KiB and 1 MiB: abort with the message given, fault (`SIGSEGV`: a guard page or
/// an inaccessible block), or, for a read or a realloc, print what the program saw.
const ERRORS: [(&str, [&str; 3]); 18] = [
    (
        "overflow-1",
        [
            "heap overflow (canary)",
            "heap overflow (canary)",
            "SIGSEGV",
        ],
    ),
    (
        "overflow-32",
        [
            "heap overflow (canary)",
            "heap overflow (canary)",
            "SIGSEGV",
        ],
    ),
    (
        "overflow-1-memcpy",
        [
            "heap overflow (canary)",
            "heap overflow (canary)",
            "SIGSEGV",
        ],
    ),
    (
        "overflow-32-memcpy",
        [
            "heap overflow (canary)",
            "heap overflow (canary)",
            "SIGSEGV",
        ],
    ),
    (
        "underflow-1",
        [
            "heap underflow (canary of the block before)",
            "heap underflow (canary of the block before)",
            "SIGSEGV",
        ],
    ),
    (
        "underflow-32",
        [
            "heap underflow (canary of the block before)",
            "heap underflow (canary of the block before)",
            "SIGSEGV",
        ],
    ),
    (
        "underflow-1-memcpy",
        [
            "heap underflow (canary of the block before)",
            "heap underflow (canary of the block before)",
            "SIGSEGV",
        ],
    ),
    (
        "underflow-32-memcpy",
        [
            "heap underflow (canary of the block before)",
            "heap underflow (canary of the block before)",
            "SIGSEGV",
        ],
    ),
    (
        "write-after-free",
        [
            "write after free (quarantine, at exit)",
            "write after free (quarantine, at exit)",
            "SIGSEGV",
        ],
    ),
    (
        "write-after-free-malloc",
        [
            "write after free (quarantine)",
            "write after free (quarantine)",
            "SIGSEGV",
        ],
    ),
    ("read-after-free", ["clean", "clean", "SIGSEGV"]),
    ("uninitialized-read", ["clean", "clean", "clean"]),
    ("double-free", ["double free", "double free", "double free"]),
    (
        "invalid-free",
        [
            "invalid free (not allocated by retype-malloc)",
            "invalid free (not allocated by retype-malloc)",
            "invalid free (not allocated by retype-malloc)",
        ],
    ),
    (
        "interior-free",
        [
            "invalid free (misaligned)",
            "invalid free (inside a block)",
            "invalid free (inside a large block)",
        ],
    ),
    ("realloc-moves", ["moved", "moved", "moved"]),
    ("malloc0-write", ["SIGSEGV", "SIGSEGV", "SIGSEGV"]),
    ("malloc0-read", ["SIGSEGV", "SIGSEGV", "SIGSEGV"]),
];

/// What became of `errors.c` committing `kind` on `size` bytes: the message it aborted with,
/// `SIGSEGV`, or the last line it printed ("missed" when nothing stopped it).
fn error_outcome(kind: &str, size: usize, env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new("timeout");
    cmd.arg("60")
        .arg(compile("errors"))
        .args([kind, &size.to_string()])
        .envs(env.iter().copied());
    let out = run(cmd, true);
    let err = text(&out.stderr);
    match out.status.signal() {
        Some(libc::SIGABRT) => match err.split_once("retype-malloc: ") {
            Some((_, m)) => m
                .split(" of pointer")
                .next()
                .unwrap_or(m)
                .trim()
                .to_string(),
            None => format!("SIGABRT ({})", err.trim()),
        },
        Some(libc::SIGSEGV) => "SIGSEGV".to_string(),
        Some(s) => format!("signal {s}"),
        None => match text(&out.stdout).lines().last() {
            Some(line) if out.status.success() => line.to_string(),
            _ => format!("exit {:?}: {}", out.status.code(), err.trim()),
        },
    }
}

/// The errors of [`ERRORS`] that secure mode catches as hardened mode does: double and
/// invalid frees in every size (its free checks), and what lands past a large block's pages
/// (its guard pages).
fn secure_catches(kind: &str, size: usize) -> bool {
    let guarded = [
        "overflow-1",
        "overflow-32",
        "overflow-1-memcpy",
        "overflow-32-memcpy",
        "underflow-1",
        "underflow-32",
        "underflow-1-memcpy",
        "underflow-32-memcpy",
    ];
    ["double-free", "invalid-free", "interior-free"].contains(&kind)
        || (size == 1 << 20 && guarded.contains(&kind))
}

/// Every error kind in all three sizes under the default, hardened and secure modes: prints
/// the table (docs/hardening.md holds a copy) and checks hardened mode's column against
/// [`ERRORS`], and secure mode's against hardened mode's where it catches the same.
#[test]
fn what_each_mode_catches() {
    let sizes = [8, 4096, 1 << 20];
    let mut table =
        String::from("| error | size | default | hardened | secure |\n|---|---|---|---|---|\n");
    let mut wrong = Vec::new();
    for (kind, expected) in ERRORS {
        for (size, expect) in sizes.into_iter().zip(expected) {
            let default = error_outcome(kind, size, &[]);
            let hardened = error_outcome(kind, size, &HARDENED);
            let secure = error_outcome(kind, size, &SECURE);
            let shown = match size {
                8 => "8 B".to_string(),
                4096 => "4 KiB".to_string(),
                _ => "1 MiB".to_string(),
            };
            table += &format!("| {kind} | {shown} | {default} | {hardened} | {secure} |\n");
            if hardened != expect {
                wrong.push(format!("{kind} {size}: {hardened:?}, expected {expect:?}"));
            }
            if secure_catches(kind, size) && secure != expect {
                wrong.push(format!(
                    "secure {kind} {size}: {secure:?}, expected {expect:?}"
                ));
            }
        }
    }
    println!("{table}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The measures `errors.c` shows at work, each off in hardened mode and on alone. (Without
/// `ZERO_ON_MALLOC` a small block is still clean in hardened mode: free blocks are zero.)
#[test]
fn the_new_measures_have_their_own_switches() {
    let hardened_but = |var| [("RETYPE_MALLOC_HARDENED", "1"), (var, "0")];
    let cases = [
        (
            "RETYPE_MALLOC_REALLOC_MOVES",
            "realloc-moves",
            8,
            "same",
            "moved",
        ),
        (
            "RETYPE_MALLOC_ZERO_ON_MALLOC",
            "uninitialized-read",
            1 << 20,
            "stale",
            "clean",
        ),
        (
            "RETYPE_MALLOC_ZERO_ON_FREE",
            "write-after-free-malloc",
            4096,
            "write after free (quarantine)",
            "heap overflow or write after free (fill of a free block)",
        ),
        (
            "RETYPE_MALLOC_EXIT_CHECK",
            "write-after-free",
            8,
            "missed",
            "missed",
        ),
    ];
    for (var, kind, size, off, alone) in cases {
        let seen = error_outcome(kind, size, &hardened_but(var));
        assert_eq!(seen, off, "{kind} {size} with {var}=0 in hardened mode");
        let seen = error_outcome(kind, size, &[(var, "1")]);
        assert_eq!(seen, alone, "{kind} {size} with {var}=1 alone");
    }
    // The check at exit needs the quarantine, which holds the block.
    let env = [
        ("RETYPE_MALLOC_EXIT_CHECK", "1"),
        ("RETYPE_MALLOC_QUARANTINE_BYTES", "65536"),
    ];
    let seen = error_outcome("write-after-free", 4096, &env);
    assert_eq!(seen, "write after free (quarantine, at exit)");
}

/// The fields a line of `mallinfo.c` prints after `when`: name and value pairs.
fn mallinfo_fields(stdout: &str, when: &str) -> BTreeMap<String, u64> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{when} ")))
        .unwrap_or_else(|| panic!("no {when} line in\n{stdout}"));
    let words: Vec<&str> = line.split(' ').skip(1).collect();
    words
        .chunks(2)
        .map(|kv| (kv[0].to_string(), kv[1].parse().unwrap()))
        .collect()
}

/// The `size` (and `count`) of the XML's last element `<name type="kind" .../>`: the
/// totals follow the heaps.
fn xml_total(xml: &str, name: &str, kind: &str) -> (u64, u64) {
    let start = format!("<{name} type=\"{kind}\"");
    let line = xml
        .lines()
        .rev()
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("no {start} in\n{xml}"));
    let attr = |k: &str| {
        line.split(&format!(" {k}=\""))
            .nth(1)
            .and_then(|v| v.split('"').next())
            .map_or(0, |v| v.parse().unwrap())
    };
    (attr("count"), attr("size"))
}

/// Four threads leave 1000 blocks each of 100 to 400 bytes and a 3 MiB block is made:
/// `mallinfo2` counts them (as `retype_malloc::Mallinfo` defines its fields), `mallinfo` as
/// ints, `malloc_info`'s XML has glibc's shape and the same totals, and the statistics
/// written at exit in JSON (`RETYPE_MALLOC_STATS=….json`) agree with the last `mallinfo2`.
#[test]
fn mallinfo2_and_malloc_info_agree_with_the_statistics() {
    let file = tmp("stats").join("mallinfo.json");
    let _ = std::fs::remove_file(&file);
    let mut cmd = Command::new(compile("mallinfo"));
    cmd.env("RETYPE_MALLOC_STATS", &file);
    let out = run(cmd, true);
    assert_ok(&out, "mallinfo");
    let stdout = text(&out.stdout);
    let (before, after) = (
        mallinfo_fields(&stdout, "before"),
        mallinfo_fields(&stdout, "after"),
    );
    // Block sizes of the classes of 100, 200, 300 and 400 bytes.
    let model: u64 = [112, 208, 320, 416].iter().map(|b| 1000 * b).sum();
    let grew = after["uordblks"] - before["uordblks"];
    assert!(
        (model..model + 64 * 1024).contains(&grew),
        "uordblks grew by {grew}, the model by {model}\n{stdout}"
    );
    assert_eq!(after["hblks"] - before["hblks"], 1, "{stdout}");
    assert!(after["hblkhd"] - before["hblkhd"] >= 3 << 20, "{stdout}");
    for m in [&before, &after] {
        assert_eq!(m["arena"], m["uordblks"] + m["fordblks"], "{stdout}");
    }
    let ints = mallinfo_fields(&stdout, "int");
    for k in ["arena", "uordblks", "hblkhd"] {
        assert_eq!(ints[k], after[k], "mallinfo's {k}");
    }

    let xml = &stdout[stdout.find("<malloc").expect("malloc_info's XML")..];
    assert!(xml.starts_with("<malloc version=\"1\">\n"), "{xml}");
    assert!(
        xml.trim_end().ends_with("OK") && xml.contains("</malloc>\n"),
        "{xml}"
    );
    assert_eq!(
        xml.matches("<heap nr=").count(),
        xml.matches("</heap>").count()
    );
    let fast = xml_total(xml, "total", "fast");
    let rest = xml_total(xml, "total", "rest");
    assert_eq!(
        (fast.0, fast.1),
        (after["smblks"], after["fsmblks"]),
        "{xml}"
    );
    assert_eq!(fast.1 + rest.1, after["fordblks"], "{xml}");
    assert_eq!(
        xml_total(xml, "total", "mmap"),
        (after["hblks"], after["hblkhd"])
    );
    let mapped = xml_total(xml, "system", "current").1;
    assert_eq!(mapped, after["arena"] + after["hblkhd"], "{xml}");

    let json = std::fs::read_to_string(&file).expect("statistics file");
    let v: serde_json::Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let at_exit = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {json}"));
    assert_eq!(at_exit("large_blocks"), after["hblks"], "{json}");
    assert_eq!(at_exit("large_mapped"), after["hblkhd"], "{json}");
    assert_eq!(
        v["heap_total"]["in_use"].as_u64(),
        Some(after["uordblks"]),
        "{json}"
    );
    assert!(at_exit("small_live") >= model, "{json}");
    let heaps = v["heaps"].as_array().unwrap();
    assert_eq!(xml.matches("<heap nr=").count(), heaps.len(), "{json}");
    let held: u64 = heaps.iter().map(|h| h["held"].as_u64().unwrap()).sum();
    assert_eq!(v["heap_total"]["held"].as_u64(), Some(held));
    // The heaps add up to the total (which heap holds which thread's blocks depends on who
    // adopted whose: main's heap too, parked while it joins, may serve a thread and come back).
    let in_use: u64 = heaps.iter().map(|h| h["in_use"].as_u64().unwrap()).sum();
    assert_eq!(in_use, after["uordblks"], "{json}");
}
