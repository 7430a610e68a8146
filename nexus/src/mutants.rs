//! The kill table's mutants in Nexus's instance code: plausible bugs of the
//! control plane, for proving that the test suite would notice them
//! (`racksim mutants`).
//!
//! The same seam as the reconciler crate's (`racksim_reconciler`'s
//! `mutants` module): compiled only with the `mutants` feature, each
//! module holds the functions one mutant replaces, under the names of the
//! functions they replace
//! (`docs/decisions/0005-mutants-as-function-replacements.md`).

/// [`racksim_mutants::Mutant::DeleteWithoutStateCheck`].
pub(crate) mod delete_without_state_check {
    use crate::instances::InstanceState;

    /// Any instance may be deleted, a running one too.
    pub(crate) fn deletable(_state: InstanceState) -> bool {
        true
    }
}

/// [`racksim_mutants::Mutant::StartWithoutConditionalTransition`].
pub(crate) mod start_without_conditional_transition {
    use racksim_reconciler::http::Connector;

    use crate::instances::{InstanceOps, InstanceRecord, InstanceStore, OpError};

    /// The saga start without its conditional Stopped -> Starting: it is
    /// the naive start.
    pub(crate) async fn start_saga<C: Connector, S: InstanceStore>(
        ops: &InstanceOps<C, S>,
        id: u32,
        sled: u32,
    ) -> Result<InstanceRecord, OpError> {
        ops.start_unprotected(id, sled, true).await
    }
}

/// [`racksim_mutants::Mutant::SagaSkipsUndo`].
pub(crate) mod saga_skips_undo {
    use racksim_reconciler::http::Connector;

    use crate::instances::{InstanceOps, InstanceStore, OpError, SagaRecord};

    /// The unwind (also when resumed after a crash) leaves the record
    /// Starting.
    pub(crate) async fn undo_mark_as_starting<C: Connector, S: InstanceStore>(
        _ops: &InstanceOps<C, S>,
        _saga: &SagaRecord,
    ) -> Result<(), OpError> {
        Ok(())
    }
}

/// [`racksim_mutants::Mutant::EnsureMatchesRemovedRows`]: upstream's own
/// code before omicron #4610.
pub(crate) mod ensure_matches_removed_rows {
    use crate::instances::NatEnsure;

    /// Every row with the entry's values counts, soft-deleted ones too.
    pub(crate) fn ensure_counts(_ensure: NatEnsure, _live_of_instance: bool) -> bool {
        true
    }
}

/// [`racksim_mutants::Mutant::FatalDpdNotify`]: upstream's own code before
/// omicron #8914.
pub(crate) mod fatal_dpd_notify {
    use racksim_reconciler::http::Connector;

    use crate::instances::{DpdNotify, InstanceOps, InstanceStore};

    /// The first dpd that cannot be notified fails the step.
    pub(crate) fn dpd_notify<C: Connector, S: InstanceStore>(
        _ops: &InstanceOps<C, S>,
    ) -> DpdNotify {
        DpdNotify::Fatal
    }
}

/// [`racksim_mutants::Mutant::MgsSwitchLookup`]: upstream's own code
/// before omicron #8914.
pub(crate) mod mgs_switch_lookup {
    use racksim_reconciler::http::Connector;

    use crate::instances::{InstanceOps, InstanceStore, SwitchLookup};

    /// Each zone's MGS names its switch, retried until all answer.
    pub(crate) fn switch_lookup<C: Connector, S: InstanceStore>(
        _ops: &InstanceOps<C, S>,
    ) -> SwitchLookup {
        SwitchLookup::MgsRetry
    }
}

/// [`racksim_mutants::Mutant::FatalRemoveNotify`]: upstream's own code
/// before omicron #10389.
pub(crate) mod fatal_remove_notify {
    use racksim_reconciler::http::Connector;

    use crate::instances::{DpdNotify, InstanceOps, InstanceStore};

    /// A dpd that cannot be told of removed rows fails the step.
    pub(crate) fn remove_notify<C: Connector, S: InstanceStore>(
        _ops: &InstanceOps<C, S>,
    ) -> DpdNotify {
        DpdNotify::Fatal
    }
}

/// [`racksim_mutants::Mutant::FatalNatConflict`]: upstream's own code
/// before omicron #4694.
pub(crate) mod fatal_nat_conflict {
    use crate::instances::NatConflict;

    /// The index's refusal fails the ensure, whatever the era.
    pub(crate) fn refusal_is_fatal(_conflict: NatConflict) -> bool {
        true
    }
}
