//! `rowshard demo`: one fused Adam step on a local table, with what it did and how long the JIT
//! took.

use std::time::Instant;

use rowshard_kernels::{
    Backend, DType, KernelError, KernelSet, LocalTable, Optimizer, Segments, TableConfig,
};

use crate::init::{Initializer, SplitMix64};

/// Runs the demo on `backend` and prints a report.
pub fn run(backend: Backend) -> Result<(), KernelError> {
    let (rows, dim, batch) = (10_000usize, 64usize, 4096usize);
    let config = TableConfig::new(Optimizer::Adam, DType::F32, dim);
    println!("rowshard demo: one fused Adam step on a {rows} x {dim} f32 table, {backend} runtime");

    let client = backend.client()?;
    let kernels = KernelSet::new(&client, config)?;
    println!(
        "  JIT: compiled gather + fused Adam (vector width {}) in {:.1} ms",
        kernels.vector_size(),
        kernels.jit_time().as_secs_f64() * 1e3
    );
    let init = Initializer::Uniform {
        bound: 0.1,
        seed: 7,
    }
    .values(0, rows, dim);
    let mut table = LocalTable::with_kernels(kernels, rows, &init)?;

    // A skewed batch over the first half of the table: many duplicate ids.
    let mut rng = SplitMix64::new(1);
    let ids: Vec<u32> = (0..batch)
        .map(|_| ((rng.next_f32().powi(3)) * (rows / 2) as f32) as u32)
        .collect();
    let grads: Vec<f32> = (0..batch * dim).map(|_| rng.next_f32() - 0.5).collect();
    let unique = Segments::group(&ids).len();

    let start = Instant::now();
    table.apply(&ids, &grads, 0.01)?;
    let elapsed = start.elapsed();
    println!(
        "  step: {batch} ids ({unique} unique rows, duplicates summed in input order) applied in {:.2} ms",
        elapsed.as_secs_f64() * 1e3
    );

    let hot = ids[0];
    let after = table.gather(&[hot])?;
    let before = &init[hot as usize * dim..][..4];
    println!("  row {hot} before: {before:.5?}");
    println!("  row {hot} after:  {:.5?}", &after[..4]);
    println!(
        "  Adam state `m` of row {hot}: {:.5?}",
        &table.state("m")?[hot as usize * dim..][..4]
    );
    println!(
        "  Adam state `step` of row {hot}: {}",
        table.state("step")?[hot as usize]
    );

    let weights = table.weights()?;
    let half = rows / 2 * dim;
    let untouched = weights[half..]
        .iter()
        .zip(&init[half..])
        .all(|(a, b)| a.to_bits() == b.to_bits());
    println!(
        "  rows {}..{rows} got no gradient and are bit-identical to before: {}",
        rows / 2,
        if untouched { "yes" } else { "NO" }
    );
    Ok(())
}
