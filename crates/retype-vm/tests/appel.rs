//! Appel and Li's benchmarks run on both sides and report every figure. In a
//! test binary of its own: the Linux side replaces the SIGSEGV handler.

use retype_vm::bench::appel::appel_li;

#[test]
fn appel_li_runs_ours_and_linux() {
    let r = appel_li(3, 200, 2).unwrap();
    for (ours, linux) in [r.trap, r.prot1, r.prot_n] {
        assert!(ours > 0.0 && linux > 0.0, "{r:?}");
    }
    let j = r.json();
    assert!(
        j.starts_with("{\"bench\":\"appel-li\",\"pages\":100,\"rounds\":3,\"traps\":200,"),
        "{j}"
    );
    for key in [
        "trap_ns",
        "linux_prot1_trap_unprot_ns",
        "protn_trap_unprot_ns",
    ] {
        assert!(j.contains(&format!("\"{key}\":")), "{key} in {j}");
    }
}
