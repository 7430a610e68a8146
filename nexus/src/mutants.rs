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
