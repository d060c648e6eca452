//! Waiting for the device, one thread at a time on the `cpu` runtime.
//!
//! The CubeCL `cpu` runtime waits for a kernel by spinning, then yielding in a loop. Thread
//! ranks that wait at once take turns on the cores its two workers need: four ranks on two cores
//! ran 20–25% slower than two. Waiting behind a process-wide mutex instead, all waiters but one
//! sleep (measured: four ranks then match two, and two gain too; docs/benchmarks.md). GPU
//! runtimes wait as CubeCL does.

use std::sync::{Mutex, MutexGuard};

use cubecl::bytes::Bytes;
use cubecl::prelude::Client;
use cubecl::server::Handle;

use crate::KernelError;
use crate::element::runtime_error;
use crate::shape::is_cpu_runtime;

static WAITING: Mutex<()> = Mutex::new(());

/// Held while this thread waits for the `cpu` runtime; `None` on other runtimes.
fn turn(client: &Client) -> Option<MutexGuard<'static, ()>> {
    is_cpu_runtime(client).then(|| WAITING.lock().unwrap_or_else(|p| p.into_inner()))
}

/// `client.read_one(handle)`, waiting in turn.
pub fn read_one(client: &Client, handle: Handle) -> Result<Bytes, KernelError> {
    let _turn = turn(client);
    client.read_one(handle).map_err(runtime_error)
}

/// Waits for every kernel enqueued on `client`, in turn.
pub fn sync(client: &Client) -> Result<(), KernelError> {
    let _turn = turn(client);
    cubecl::future::block_on(client.sync()).map_err(runtime_error)
}
