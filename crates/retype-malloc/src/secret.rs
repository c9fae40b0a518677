//! The per-process secret of hardened mode: canaries and the quarantine's junk are keyed by
//! it, so an attacker cannot forge them without reading it first, and it seeds the random
//! order in which a page's fresh blocks are handed out.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::os;

static SECRET: AtomicU64 = AtomicU64::new(0);

/// The secret mixed ([`mix`]), drawn with it: the multiplier of [`keyed`] and the source of
/// the quarantine's junk byte, so neither mixes the secret again at every use.
static MIXED: AtomicU64 = AtomicU64::new(0);

/// Draws of [`random`] so far: each one mixes the next count with the secret.
static DRAWS: AtomicU64 = AtomicU64::new(0);

/// Draws the secret (once, at start-up): from `getrandom`, or if that fails from the clock
/// and the address space layout, which still differ from run to run.
pub(crate) fn init() {
    let mut secret = 0u64;
    // SAFETY: `secret` is valid for writes of its 8 bytes.
    let got = unsafe { libc::getrandom((&raw mut secret).cast(), 8, libc::GRND_NONBLOCK) };
    if got != 8 {
        secret = mix(os::now_ms() ^ (&raw const secret as u64));
    }
    SECRET.store(secret, Ordering::Relaxed);
    MIXED.store(mix(secret), Ordering::Relaxed);
}

/// The secret.
pub(crate) fn get() -> u64 {
    SECRET.load(Ordering::Relaxed)
}

/// The secret, mixed: as unpredictable as the secret, and not it.
pub(crate) fn mixed() -> u64 {
    MIXED.load(Ordering::Relaxed)
}

/// `x` hashed under the secret: `x` xored with it, multiplied by its mix into 128 bits, the
/// halves folded (wyhash's "mum"). One multiplication, about half the instructions of
/// [`mix`]; every bit of `x` reaches the middle bits of the product, so values a few blocks
/// apart hash far apart; without the secret, no value is predictable from `x`.
#[inline]
pub(crate) fn keyed(x: u64) -> u64 {
    fold_mul(x, get(), mixed())
}

/// [`keyed`] under secret `secret` whose mix is `mixed`.
#[inline(always)]
fn fold_mul(x: u64, secret: u64, mixed: u64) -> u64 {
    let t = u128::from(x ^ secret) * u128::from(mixed);
    (t >> 64) as u64 ^ t as u64
}

/// A bijective 64-bit mixer (the splitmix64 finaliser).
pub(crate) fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A number no one without the secret can predict (splitmix64 over a shared count; drawn
/// once per fresh run of blocks, rarely enough that the shared count does not contend).
pub(crate) fn random() -> u64 {
    let n = DRAWS.fetch_add(1, Ordering::Relaxed);
    mix(get() ^ mix(n.wrapping_add(0x9e37_79b9_7f4a_7c15)))
}

/// Shuffles `items` into a random order (Fisher-Yates, seeded by one fresh draw). Each step
/// draws with one multiplication (wyrand) and picks its index by a multiplication instead of
/// a remainder: a division per block, and a splitmix per block, made a page's carving cost
/// more than the mallocs it serves (a producer's mallocs in `xmalloc`, 3.7x the time).
pub(crate) fn shuffle(items: &mut [u8]) {
    let mut state = random();
    for i in (1..items.len()).rev() {
        state = state.wrapping_add(0xa076_1d64_78bd_642f);
        let t = state as u128 * (state ^ 0xe703_7ed1_a0b4_28db) as u128;
        let r = (t >> 64) as u64 ^ t as u64;
        let j = ((r as u128 * (i as u128 + 1)) >> 64) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::{fold_mul, mix, shuffle};

    /// Under any of a few secrets, the blocks of a run of 64 Ki addresses 16 bytes apart all
    /// get different values, and each one's high half (the part a canary's tag keeps)
    /// differs from its neighbour's, so neighbours' tags cannot stand in for each other.
    #[test]
    fn keyed_values_of_nearby_blocks_differ() {
        for seed in 1..5u64 {
            let (secret, base) = (mix(seed), 0x7f12_3456_0000u64 + 4096 * seed);
            let values: Vec<u64> = (0..1u64 << 16)
                .map(|i| fold_mul(base + 16 * i, secret, mix(secret)))
                .collect();
            assert!(values.windows(2).all(|w| w[0] >> 32 != w[1] >> 32));
            let mut sorted = values.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), values.len());
        }
    }

    /// A shuffle keeps every item once, and two shuffles of many items differ.
    #[test]
    fn a_shuffle_is_a_permutation() {
        let identity: Vec<u8> = (0..=255).collect();
        let (mut a, mut b) = (identity.clone(), identity.clone());
        shuffle(&mut a);
        shuffle(&mut b);
        assert_ne!(a, b);
        assert_ne!(a, identity);
        for mut v in [a, b] {
            v.sort_unstable();
            assert_eq!(v, identity);
        }
        let mut one = [7u8];
        shuffle(&mut one);
        assert_eq!(one, [7]);
    }
}
