//! A fixed-capacity byte string on the stack, with decimal numbers, for code
//! that must not allocate: retype-malloc's statistics report (it runs inside
//! malloc) and the recorder's paths and meta records (they run inside the
//! program's malloc calls). Both link this crate, never each other.
#![no_std]

/// Up to `N - 1` bytes (one is kept for a NUL terminator); what does not fit
/// is cut off.
pub struct StackStr<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Default for StackStr<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> StackStr<N> {
    pub const fn new() -> Self {
        StackStr {
            buf: [0; N],
            len: 0,
        }
    }

    /// Appends `s`, cut at capacity.
    pub fn push(&mut self, s: &[u8]) -> &mut Self {
        let n = s.len().min(N.saturating_sub(1) - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
        self
    }

    /// Appends `v` in decimal.
    pub fn push_num(&mut self, mut v: u64) -> &mut Self {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..])
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The bytes with a NUL after them, for system calls.
    pub fn as_bytes_nul(&mut self) -> &[u8] {
        self.buf[self.len] = 0;
        &self.buf[..=self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::StackStr;

    #[test]
    fn numbers_and_text_are_appended_and_cut_at_capacity() {
        let mut s = StackStr::<32>::new();
        s.push(b"pid ").push_num(0).push(b" ").push_num(u64::MAX);
        assert_eq!(s.as_bytes(), b"pid 0 18446744073709551615");
        assert_eq!(s.as_bytes_nul().last(), Some(&0));
        let mut small = StackStr::<4>::new();
        small.push_num(12345);
        assert_eq!(small.as_bytes(), b"123");
        assert_eq!(small.as_bytes_nul(), b"123\0");
    }
}
