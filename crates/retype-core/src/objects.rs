//! seL4 object types and their sizes.
//!
//! Sizes are log2 bytes, taken from each architecture's libsel4 `constants.h`
//! (seL4 in docs/references.md). Where a size depends on a kernel
//! configuration option the option is a field of [`Config`], so a study can pin
//! the exact kernel it models. CantripOS (seed 000) runs RISC-V 32 with MCS.

use strum::{Display, EnumString, IntoStaticStr, VariantArray};

/// The instruction set architectures whose object sizes we know, spelled
/// as on the command line (`riscv32`, `x86_64`, …) by `FromStr` and `Display`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Display, EnumString, IntoStaticStr, VariantArray,
)]
#[strum(serialize_all = "lowercase")]
pub enum Arch {
    Riscv32,
    Riscv64,
    X86_64,
    Aarch64,
}

impl Arch {
    pub const ALL: &'static [Arch] = <Arch as strum::VariantArray>::VARIANTS;

    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// The object types that `Untyped_Retype` can create.
///
/// Frames and page tables use architecture-neutral names: `SmallPage` is
/// `seL4_RISCV_4K_Page` on RISC-V and `seL4_X86_4K` on x86_64. `FromStr` and
/// `Display` spell them as request scripts and the command line do.
#[derive(Display, EnumString, IntoStaticStr, VariantArray)]
#[strum(serialize_all = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectType {
    Untyped,
    Tcb,
    Endpoint,
    Notification,
    #[strum(serialize = "cnode")]
    CapTable,
    SchedContext,
    Reply,
    #[strum(serialize = "page")]
    SmallPage,
    LargePage,
    HugePage,
    PageTable,
    #[strum(serialize = "vspace")]
    VSpace,
}

impl ObjectType {
    pub const ALL: &'static [ObjectType] = <ObjectType as strum::VariantArray>::VARIANTS;

    /// The name used on the command line and in request scripts.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether the caller chooses the size (`size_bits` is meaningful).
    pub fn is_variable_size(self) -> bool {
        matches!(
            self,
            ObjectType::Untyped | ObjectType::CapTable | ObjectType::SchedContext
        )
    }

    /// Frames may be carved from device untypeds; nothing else but Untyped may.
    pub fn is_frame(self) -> bool {
        matches!(
            self,
            ObjectType::SmallPage | ObjectType::LargePage | ObjectType::HugePage
        )
    }
}

/// Why an object size cannot be computed (seL4 checks 4–7 of `Untyped_Retype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeError {
    /// `size_bits` is at least the word size, or the object would be larger
    /// than the largest untyped (`seL4_RangeError`, range `[0, max]`).
    Range { max: u32 },
    /// `size_bits` is invalid for this type (`seL4_InvalidArgument`, argument 1),
    /// or the type does not exist in this configuration.
    InvalidArgument { arg: u32 },
}

/// A kernel configuration: architecture plus the options that change sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub arch: Arch,
    /// Mixed-criticality scheduling: adds SchedContext and Reply objects and
    /// doubles the notification.
    pub mcs: bool,
    /// The larger TCB: FPU state on RISC-V, a large XSAVE area on x86_64,
    /// hardware debug or hypervisor state on AArch64.
    pub big_tcb: bool,
}

impl Config {
    /// The kernel of seed 000's evaluation: CantripOS on RISC-V 32 with MCS.
    pub const CANTRIP: Config = Config {
        arch: Arch::Riscv32,
        mcs: true,
        big_tcb: false,
    };

    pub const fn new(arch: Arch) -> Config {
        Config {
            arch,
            mcs: false,
            big_tcb: false,
        }
    }

    fn is_32bit(&self) -> bool {
        self.arch == Arch::Riscv32
    }

    pub fn word_bits(&self) -> u32 {
        if self.is_32bit() {
            32
        } else {
            64
        }
    }

    /// log2 of one CNode slot (a `cte`).
    pub fn slot_bits(&self) -> u32 {
        if self.is_32bit() {
            4
        } else {
            5
        }
    }

    pub fn min_untyped_bits(&self) -> u32 {
        4
    }

    pub fn max_untyped_bits(&self) -> u32 {
        match self.arch {
            Arch::Riscv32 => 29,
            Arch::Riscv64 => 38,
            Arch::X86_64 | Arch::Aarch64 => 47,
        }
    }

    pub fn min_sched_context_bits(&self) -> u32 {
        7
    }

    fn tcb_bits(&self) -> u32 {
        let base = match self.arch {
            Arch::Riscv32 => 9,
            Arch::Riscv64 => 10,
            Arch::X86_64 | Arch::Aarch64 => 11,
        };
        base + self.big_tcb as u32
    }

    /// log2 size of one object of type `ty`; `size_bits` is used only by the
    /// variable-size types. Applies seL4's checks 4–7 in their order.
    #[inline]
    pub fn object_bits(&self, ty: ObjectType, size_bits: u32) -> Result<u32, SizeError> {
        let wide = self.is_32bit();
        let bits = match ty {
            ObjectType::Untyped | ObjectType::SchedContext => size_bits,
            ObjectType::CapTable => self.slot_bits().saturating_add(size_bits),
            ObjectType::Tcb => self.tcb_bits(),
            ObjectType::Endpoint => 4,
            ObjectType::Notification => (if wide { 4 } else { 5 }) + self.mcs as u32,
            ObjectType::Reply => {
                if !self.mcs {
                    return Err(SizeError::InvalidArgument { arg: 0 });
                }
                if wide {
                    4
                } else {
                    5
                }
            }
            ObjectType::SmallPage | ObjectType::PageTable | ObjectType::VSpace => 12,
            ObjectType::LargePage => {
                if wide {
                    22
                } else {
                    21
                }
            }
            ObjectType::HugePage => {
                if wide {
                    return Err(SizeError::InvalidArgument { arg: 0 });
                }
                30
            }
        };
        if ty == ObjectType::SchedContext && !self.mcs {
            return Err(SizeError::InvalidArgument { arg: 0 });
        }
        let max = self.max_untyped_bits();
        if size_bits >= self.word_bits() || bits > max {
            return Err(SizeError::Range { max });
        }
        match ty {
            ObjectType::CapTable if size_bits == 0 => Err(SizeError::InvalidArgument { arg: 1 }),
            ObjectType::Untyped if size_bits < self.min_untyped_bits() => {
                Err(SizeError::InvalidArgument { arg: 1 })
            }
            ObjectType::SchedContext if size_bits < self.min_sched_context_bits() => {
                Err(SizeError::InvalidArgument { arg: 1 })
            }
            _ => Ok(bits),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_the_libsel4_tables() {
        let rv32 = Config::new(Arch::Riscv32);
        let x64 = Config::new(Arch::X86_64);
        assert_eq!(rv32.object_bits(ObjectType::Tcb, 0), Ok(9));
        assert_eq!(x64.object_bits(ObjectType::Tcb, 0), Ok(11));
        assert_eq!(
            Config::new(Arch::Riscv64).object_bits(ObjectType::Tcb, 0),
            Ok(10)
        );
        assert_eq!(rv32.object_bits(ObjectType::CapTable, 2), Ok(6));
        assert_eq!(x64.object_bits(ObjectType::CapTable, 4), Ok(9));
        assert_eq!(rv32.object_bits(ObjectType::LargePage, 0), Ok(22));
        assert_eq!(x64.object_bits(ObjectType::LargePage, 0), Ok(21));
        assert_eq!(
            Config::CANTRIP.object_bits(ObjectType::Notification, 0),
            Ok(5)
        );
        assert_eq!(rv32.object_bits(ObjectType::Notification, 0), Ok(4));
        assert_eq!(
            Config::new(Arch::Aarch64).object_bits(ObjectType::HugePage, 0),
            Ok(30)
        );
    }

    #[test]
    fn invalid_sizes_are_refused_in_sel4_order() {
        let x64 = Config::new(Arch::X86_64);
        assert_eq!(
            x64.object_bits(ObjectType::CapTable, 0),
            Err(SizeError::InvalidArgument { arg: 1 })
        );
        assert_eq!(
            x64.object_bits(ObjectType::Untyped, 3),
            Err(SizeError::InvalidArgument { arg: 1 })
        );
        assert_eq!(
            x64.object_bits(ObjectType::Untyped, 48),
            Err(SizeError::Range { max: 47 })
        );
        // The range check precedes the per-type check.
        assert_eq!(
            x64.object_bits(ObjectType::CapTable, 64),
            Err(SizeError::Range { max: 47 })
        );
        assert!(Config::new(Arch::Riscv32)
            .object_bits(ObjectType::HugePage, 0)
            .is_err());
        assert!(x64.object_bits(ObjectType::SchedContext, 8).is_err());
        assert_eq!(
            Config::CANTRIP.object_bits(ObjectType::SchedContext, 6),
            Err(SizeError::InvalidArgument { arg: 1 })
        );
    }

    #[test]
    fn names_are_the_scripts_and_round_trip() {
        let names: alloc::vec::Vec<&str> = ObjectType::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "untyped",
                "tcb",
                "endpoint",
                "notification",
                "cnode",
                "sched_context",
                "reply",
                "page",
                "large_page",
                "huge_page",
                "page_table",
                "vspace"
            ]
        );
        let archs: alloc::vec::Vec<&str> = Arch::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(archs, ["riscv32", "riscv64", "x86_64", "aarch64"]);
        for &t in ObjectType::ALL {
            assert_eq!(t.name().parse(), Ok(t));
        }
        for &a in Arch::ALL {
            assert_eq!(alloc::format!("{a}").parse(), Ok(a));
        }
        assert!("sparc".parse::<Arch>().is_err());
    }
}
