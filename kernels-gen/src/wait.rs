//! Waiting for the device, one thread at a time on the `cpu` runtime when its threads outnumber
//! the cores.
//!
//! The CubeCL `cpu` runtime waits for a kernel by spinning, then yielding in a loop. Thread
//! ranks that wait at once take turns on the cores its workers need: on two cores, three ranks
//! waiting at once trained 1.3–2.6× slower than one at a time, four 2–5× slower. Where the
//! process drives more thread ranks than it has cores, waiters therefore queue behind a
//! process-wide mutex, and all but one sleep. Where the ranks fit the cores, each waits as
//! CubeCL does: queueing them there made two ranks on two cores 8–12% slower with shared
//! negatives, as a rank whose kernels were done waited for the other's (docs/benchmarks.md).
//! GPU runtimes wait as CubeCL does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use cubecl::bytes::Bytes;
use cubecl::prelude::Client;
use cubecl::server::Handle;

use crate::KernelError;
use crate::element::runtime_error;
use crate::shape::is_cpu_runtime;

static WAITING: Mutex<()> = Mutex::new(());

/// Thread ranks running in this process now, over every group of them.
static THREAD_RANKS: AtomicUsize = AtomicUsize::new(0);

/// Counts `ranks` thread ranks as running until it is dropped (see [`thread_ranks`]).
#[must_use = "the ranks count as running only while this lives"]
pub struct ThreadRanks(usize);

/// Marks `ranks` threads of this process as thread ranks that drive the runtime, from now until
/// the returned guard drops: while they outnumber the cores, they wait one at a time.
pub fn thread_ranks(ranks: usize) -> ThreadRanks {
    THREAD_RANKS.fetch_add(ranks, Ordering::SeqCst);
    ThreadRanks(ranks)
}

impl Drop for ThreadRanks {
    fn drop(&mut self) {
        THREAD_RANKS.fetch_sub(self.0, Ordering::SeqCst);
    }
}

/// The cores this process may run on.
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Held while this thread waits for the `cpu` runtime, where its thread ranks outnumber the
/// cores; `None` otherwise and on other runtimes.
fn turn(client: &Client) -> Option<MutexGuard<'static, ()>> {
    let crowded = THREAD_RANKS.load(Ordering::SeqCst) > cores();
    (crowded && is_cpu_runtime(client)).then(|| WAITING.lock().unwrap_or_else(|p| p.into_inner()))
}

/// `client.read_one(handle)`, waiting in turn.
pub fn read_one(client: &Client, handle: Handle) -> Result<Bytes, KernelError> {
    let _turn = turn(client);
    client.read_one(handle).map_err(runtime_error)
}

/// The first `len` `f32` values of each buffer, read back in one round trip, waiting in turn:
/// none for a length of 0, and no round trip when every length is 0. A buffer comes back as
/// the runtime's own allocation where it can (no second copy).
pub fn read_f32(
    client: &Client,
    reads: Vec<(Handle, usize)>,
) -> Result<Vec<Vec<f32>>, KernelError> {
    let wanted: Vec<Handle> = reads
        .iter()
        .filter(|(_, len)| *len > 0)
        .map(|(handle, _)| handle.clone())
        .collect();
    let mut bytes = match wanted.is_empty() {
        true => Vec::new(),
        false => {
            let _turn = turn(client);
            client.read(wanted).map_err(runtime_error)?
        }
    }
    .into_iter();
    Ok(reads
        .iter()
        .map(|&(_, len)| match len {
            0 => Vec::new(),
            len => match bytes
                .next()
                .expect("one buffer read per length")
                .try_into_vec()
            {
                Ok(mut values) => {
                    values.truncate(len);
                    values
                }
                Err(bytes) => bytemuck::pod_collect_to_vec(&bytes[..len * 4]),
            },
        })
        .collect())
}

/// Waits for every kernel enqueued on `client`, in turn.
pub fn sync(client: &Client) -> Result<(), KernelError> {
    let _turn = turn(client);
    cubecl::future::block_on(client.sync()).map_err(runtime_error)
}
