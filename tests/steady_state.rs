//! The sharded step's buffers are kept between calls: after warm-up steps, a steady state of
//! lookups and applies allocates nothing of batch size (counted by this test binary's
//! allocator); rows come back in the storage dtype bit for bit, and gradients given in it train
//! exactly as the same gradients widened to f32.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use half::bf16;
use rowshard::comm::threads;
use rowshard::{
    Backend, Communicator, DType, Optimizer, PartitionScheme, ShardError, ShardedTable,
    ShardedTableSpec, TableConfig,
};
use rowshard_tests::data::Rng;
use rowshard_tests::equivalence::{DIM, spec};

/// Allocations this large or larger are of batch size: the batches below are 512 ids of 32 f32
/// (64 KiB), each rank's messages about half of that.
const BATCH_BYTES: usize = 16 << 10;

static LARGE: AtomicU64 = AtomicU64::new(0);

struct Counting;

// SAFETY: forwards to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= BATCH_BYTES {
            LARGE.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as received.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: allocated by System above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size >= BATCH_BYTES {
            LARGE.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: allocated by System above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The counter is the process's: the tests of this binary run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_steady_state_step_allocates_nothing_of_batch_size() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let spec = ShardedTableSpec {
        rows: 20_000,
        config: TableConfig::new(Optimizer::Adam, DType::F32, 32),
        ..spec(
            Optimizer::Adam,
            DType::F32,
            PartitionScheme::RoundRobin { block: 2 },
        )
    };
    let results = threads::run(2, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut table = ShardedTable::new(comm, &client, &spec)?;
        let mut rng = Rng::new(comm.rank() as u64);
        let batches: Vec<Vec<u32>> = (0..8)
            .map(|_| (0..512).map(|_| rng.below(20_000)).collect())
            .collect();
        let mut rows = vec![0.0f32; 512 * 32];
        let mut grads = vec![0.0f32; 512 * 32];
        let mut counted = 0;
        for (step, ids) in batches.iter().enumerate() {
            if step == 5 {
                comm.barrier()?;
                counted = LARGE.load(Ordering::Relaxed);
            }
            table.lookup_into(ids, &mut rows)?;
            for (g, r) in grads.iter_mut().zip(&rows) {
                *g = 0.1 * r + 0.01;
            }
            table.apply_gradients(ids, &grads, 0.01)?;
        }
        comm.barrier()?;
        Ok(LARGE.load(Ordering::Relaxed) - counted)
    });
    for r in results {
        assert_eq!(
            r.unwrap(),
            0,
            "batch-size allocations in steady-state steps"
        );
    }
}

#[test]
fn rows_and_gradients_in_the_storage_dtype() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let spec = spec(Optimizer::Adam, DType::BF16, PartitionScheme::Even);
    let ids: Vec<u32> = vec![3, 9, 3, 30, 2, 9];
    let mut rng = Rng::new(4);
    let grads: Vec<bf16> = rng
        .values(ids.len() * DIM, -1.0, 1.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let widened: Vec<f32> = grads.iter().map(|g| g.to_f32()).collect();
    let run = |as_bf16: bool| {
        threads::run(2, |comm| -> Result<_, ShardError> {
            let client = Backend::Cpu.client()?;
            let mut table = ShardedTable::new(comm, &client, &spec)?;
            let mut stored = vec![bf16::ZERO; ids.len() * DIM];
            table.lookup_into(&ids, &mut stored)?;
            let f32_rows = table.lookup(&ids)?;
            let same = stored.iter().zip(&f32_rows).all(|(s, f)| s.to_f32() == *f);
            if as_bf16 {
                table.apply_gradients_as(&ids, &grads, 0.05)?;
            } else {
                table.apply_gradients(&ids, &widened, 0.05)?;
            }
            Ok((same, table.gather_to_root(0, 16)?))
        })
    };
    let (a, b) = (run(true), run(false));
    for r in a.iter().chain(&b) {
        assert!(
            r.as_ref().unwrap().0,
            "bf16 rows are the f32 rows' exact values"
        );
    }
    let (ta, tb) = (
        a[0].as_ref().unwrap().1.clone().unwrap(),
        b[0].as_ref().unwrap().1.clone().unwrap(),
    );
    assert!(ta.iter().zip(&tb).all(|(x, y)| x.to_bits() == y.to_bits()));
    let wrong = threads::run(1, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let table = ShardedTable::new(comm, &client, &spec)?;
        let mut out = vec![half::f16::ZERO; DIM];
        Ok(table.lookup_into(&[0], &mut out))
    });
    let e = wrong[0].as_ref().unwrap().as_ref().unwrap_err().to_string();
    assert!(e.contains("ask for f32 or bf16"), "{e}");
}
