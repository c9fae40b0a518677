//! Reducing permissions. A capability's permissions only ever shrink: the
//! hardware ANDs them with a mask (CAndPerm); here the permissions asked for
//! must be a subset of those held, or the derivation is refused.

use super::capability::Capability;
use super::encoding;
use super::error::Error;
use super::format::{Format, Permission};

impl Capability {
    /// The capability with only `permissions` (a subset of its own).
    pub fn restrict_permissions(&self, permissions: u32) -> Result<Capability, Error> {
        let unknown = permissions & !self.format.all_permissions();
        if unknown != 0 {
            return Err(Error::UnknownPermissions { bits: unknown });
        }
        if !self.tag {
            return Err(Error::Untagged);
        }
        if self.is_sealed() {
            return Err(Error::Sealed);
        }
        let extra = permissions & !self.permissions();
        if extra != 0 {
            return Err(Error::Widens { extra });
        }
        Ok(Capability {
            pesbt: encoding::with_permissions(self.format, self.pesbt, permissions),
            ..*self
        })
    }

    /// Whether the capability holds `permission` (a format without it: no).
    pub fn has_permission(&self, permission: Permission) -> bool {
        self.format
            .permission_mask(permission)
            .is_some_and(|mask| self.permissions() & mask != 0)
    }
}

/// The names of the permissions in `permissions`, in the format's order.
pub fn names(format: Format, permissions: u32) -> impl Iterator<Item = &'static str> {
    format
        .params()
        .permission_bits
        .iter()
        .filter(move |&&(_, bit)| permissions >> bit & 1 == 1)
        .map(|&(p, _)| p.name())
}
