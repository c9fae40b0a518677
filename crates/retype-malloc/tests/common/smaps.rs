//! What the kernel says of this process's mappings (`/proc/self/smaps`).

/// The VmFlags of the mapping of this process that holds `addr`.
pub fn vm_flags(addr: usize) -> Vec<String> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((from, to)) = range.split_once('-') {
                if let (Ok(from), Ok(to)) = (
                    usize::from_str_radix(from, 16),
                    usize::from_str_radix(to, 16),
                ) {
                    inside = (from..to).contains(&addr);
                    continue;
                }
            }
        }
        if inside {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.split_whitespace().map(String::from).collect();
            }
        }
    }
    panic!("no mapping holds {addr:#x}");
}
