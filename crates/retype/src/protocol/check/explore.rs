//! How the search explores the model: each state's class under the symmetry
//! reduction (or the state itself with `--symmetry off`), and which operations
//! and channels a state has in flight. It ties the model to the search and the
//! symmetry reduction, which know nothing of each other's place.

use std::collections::VecDeque;

use retype_core::caps::protocol::Msg;

use super::model::{Action, CapModel, Op, State, Symmetry};
use super::search::{fingerprint, Canon, Explore};
use super::symmetry;

impl Explore for CapModel {
    fn canon(&self, s: &State) -> Canon {
        match self.cfg.symmetry {
            Symmetry::On => symmetry::canon(s),
            Symmetry::Off => Canon {
                key: fingerprint(s),
                rank: std::array::from_fn(|i| i as u8),
            },
        }
    }

    fn running(&self, s: &State) -> u8 {
        let running = |(i, o): (usize, &Op)| matches!(o, Op::Running { .. }).then_some(1 << i);
        s.ops.iter().enumerate().filter_map(running).sum()
    }

    fn busy(&self, s: &State) -> u64 {
        let busy = |(i, c): (usize, &VecDeque<Msg>)| (!c.is_empty()).then_some(1 << i);
        s.chans.iter().enumerate().filter_map(busy).sum()
    }

    fn channel(&self, a: &Action) -> Option<u8> {
        match *a {
            Action::Deliver { from, to } => Some(from * self.cfg.nodes + to),
            Action::Start { .. } => None,
        }
    }
}
