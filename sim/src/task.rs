//! Spawning a host's tasks, with their types erased.
//!
//! Every task a simulated host runs (its servers, its zones, its
//! reconcilers' background work) is spawned on the host's `LocalSet`. tokio
//! compiles its task machinery (the cell, the harness, the poll and
//! cancel paths, for both a `LocalSet` and a local runtime) once per
//! future *type*: spawned as written, the simulation's twenty-odd kinds of
//! task made as many copies of it, about 7% of this crate's code. Boxed
//! here first, every task is the same type and the machinery is compiled
//! once. A task costs one more allocation, at its spawn; the order tasks
//! run in, and so every run, is unchanged.

use std::{future::Future, pin::Pin};

use tokio::task::{JoinHandle, JoinSet};

/// A host task, boxed: the one future type the simulation spawns.
pub type HostTask = Pin<Box<dyn Future<Output = ()>>>;

/// Spawns `task` on the current host's local set.
pub fn spawn(task: impl Future<Output = ()> + 'static) -> JoinHandle<()> {
    tokio::task::spawn_local(Box::pin(task) as HostTask)
}

/// Spawns `task` on the current host's local set, into `set`.
pub fn spawn_into(set: &mut JoinSet<()>, task: impl Future<Output = ()> + 'static) {
    set.spawn_local(Box::pin(task) as HostTask);
}
