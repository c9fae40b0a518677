//! Sealing: a sealed capability cannot be used or changed, only unsealed by
//! a capability that holds Unseal over its object type, or, a sealed entry
//! (sentry), jumped to. The object type is the address of the sealing
//! capability, which must hold Seal over it (CSeal, CUnseal, CSealEntry of
//! the CHERI ISA v9; Morello's SEAL and UNSEAL).

use super::capability::Capability;
use super::encoding;
use super::error::Error;
use super::format::Permission;

impl Capability {
    /// The capability sealed with the object type `sealer`'s address names.
    pub fn seal(&self, sealer: &Capability) -> Result<Capability, Error> {
        self.unsealed_and_tagged()?;
        sealer.authorises(Permission::Seal)?;
        let otypes = &self.format.params().sealing_otypes;
        let otype = u32::try_from(sealer.address)
            .ok()
            .filter(|otype| otypes.contains(otype))
            .ok_or(Error::NotASealingOtype {
                address: sealer.address,
            })?;
        Ok(self.with_otype(otype))
    }

    /// The capability sealed as an entry: a sentry, unsealed by jumping to it.
    pub fn seal_entry(&self) -> Result<Capability, Error> {
        self.unsealed_and_tagged()?;
        if self.format.params().sentry_needs_execute && !self.has_permission(Permission::Execute) {
            return Err(Error::MissingPermission {
                permission: Permission::Execute,
            });
        }
        Ok(self.with_otype(self.format.params().otype_sentry))
    }

    /// The capability unsealed by `unsealer`, whose address must be its
    /// object type. It stays Global only if `unsealer` is.
    pub fn unseal(&self, unsealer: &Capability) -> Result<Capability, Error> {
        let p = self.format.params();
        if !self.tag {
            return Err(Error::Untagged);
        }
        let otype = self.otype();
        if otype == p.otype_unsealed {
            return Err(Error::NotSealed);
        }
        if !p.sealing_otypes.contains(&otype) {
            return Err(Error::ReservedOtype { otype });
        }
        unsealer.authorises(Permission::Unseal)?;
        if unsealer.address != u64::from(otype) {
            return Err(Error::WrongOtype {
                otype,
                address: unsealer.address,
            });
        }
        let mut permissions = self.permissions();
        if !unsealer.has_permission(Permission::Global) {
            permissions &= !self.format.permission_mask(Permission::Global).unwrap_or(0);
        }
        let unsealed = self.with_otype(p.otype_unsealed);
        Ok(Capability {
            pesbt: encoding::with_permissions(self.format, unsealed.pesbt, permissions),
            ..unsealed
        })
    }

    fn unsealed_and_tagged(&self) -> Result<(), Error> {
        if !self.tag {
            Err(Error::Untagged)
        } else if self.is_sealed() {
            Err(Error::Sealed)
        } else {
            Ok(())
        }
    }

    /// Whether the capability may authorise sealing or unsealing: tagged,
    /// unsealed, holding `permission`, its address within its bounds.
    fn authorises(&self, permission: Permission) -> Result<(), Error> {
        self.unsealed_and_tagged()?;
        if !self.has_permission(permission) {
            return Err(Error::MissingPermission { permission });
        }
        if !self.in_bounds() {
            return Err(Error::AddressOutOfBounds {
                address: self.address,
            });
        }
        Ok(())
    }

    fn with_otype(&self, otype: u32) -> Capability {
        Capability {
            pesbt: encoding::with_otype(self.format, self.pesbt, otype),
            ..*self
        }
    }
}
